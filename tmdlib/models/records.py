"""What the train stage records and says of a fitted model: ``train.json``'s fields, the run's parameters and
metrics, the lines it prints, the registered version's description.  Plain dicts and strings from the fitted
:class:`~tmdlib.models._base.Model` and the stage's options; nothing is written here.
"""
from __future__ import annotations

import numpy as np

__all__ = ["train_record", "train_info", "train_params", "train_summary", "collapse_warning", "partial_answers_line",
           "model_description", "model_state_of", "state_arrays", "model_tags", "smiles_model_description",
           "skipped_record", "domain_record"]


def _no_constant(model) -> dict:
    """``train.json``'s fields of a model with no TMD-Lipschitz constant (no c·ε is claimed)."""
    return {"lipschitz": {"c": None, "certified": False, "c_certified": None, "valid": False,
                          "why": f"model {model.name!r} has no Lipschitz constant in TMD: the coreset loss is "
                                 "measured, no c*eps bound is stated"},
            "certified": False, "c_certified": None, "losses": [], "final_loss": None}


def _constant_metrics(info: dict, lip: dict, res) -> dict:
    """The run metrics of a GIN: final loss, c and its parts (κ, each layer's Φ, the readout's), alive units, and in
    certified mode the certified c and each weight matrix's spectral norm."""
    return {"final_loss": info["final_loss"], "c": lip["c"], "collapsed": res.collapsed,
            "alive_units_min": min(res.alive_units), "kappa": lip["kappa"], "bound_valid": lip["valid"],
            "certified": lip["certified"], "c_measured": lip["c_measured"],
            **({"c_certified": lip["c_certified"], "constraint_ok": lip["constraint_ok"],
                **{f"spectral_norm.{n}": v for n, v in zip(lip["matrices"], lip["spectral_norms"])}}
               if lip["certified"] else {}),
            **{f"phi.{i + 1}": v for i, v in enumerate(lip["per_layer"][:-1])},
            "phi.readout": lip["readout"]}


def train_record(model, cfg: dict, sel: dict, tau, weights: str, target, node_eps) -> tuple[dict, dict]:
    r"""``(train.json fields, run metrics)`` of a fitted :class:`tmdlib.models.Model`.

    A GIN adds its losses, its stability constant c (the certificate, Lemma 3.2) and its alive units; any other
    model states that it has no TMD-Lipschitz constant (its coreset loss is measured, no :math:`c\varepsilon` is
    claimed).  ``node_eps`` ``(k,)``: each medoid's node-subsampling ε, recorded as their τ-weighted mean
    :math:`\sum_i \tau_i \varepsilon_i / \sum_i \tau_i`; ``target``: the Lipschitz target in nats or None.
    """
    lip = model.certificate()
    tau = np.asarray(tau, dtype=np.float64)
    info = {"model_name": model.name, "model_inputs": model.inputs, "model_options": model.describe(),
            "config": cfg, "device": "cpu", "train_seconds": round(float(getattr(model, "seconds", 0.0)), 3),
            "task": model.head.task.to_dict(), "task_head": model.head.to_dict(),
            "node_epsilon_mean": None if node_eps is None else float(np.dot(tau, node_eps) / tau.sum()),
            "lipschitz_target": target}
    metrics = {"train_seconds": info["train_seconds"]}
    if lip is None:
        info.update(_no_constant(model))
    else:
        res = model.result
        info.update({"model": info["model_options"]["model"], "device": res.device, "losses": res.losses,
                     "final_loss": res.losses[-1] if res.losses else None,
                     "lipschitz": {**lip, "depth": cfg["layers"] + 1, "weights": weights,
                                   "loss": f"{res.head.loss} ({res.head.why})"},
                     "certified": lip["certified"], "c_certified": lip["c_certified"],
                     # hidden units of each layer non-zero on some training node; a 0 = a collapsed (dead) network
                     "alive_units": res.alive_units, "collapsed": res.collapsed})
        metrics.update(_constant_metrics(info, lip, res))
    if info["node_epsilon_mean"] is not None:
        metrics["node_epsilon_mean"] = info["node_epsilon_mean"]
    return info, metrics


def train_info(paths, opts, labels: tuple, sel: dict, answered: tuple, weighting: str, stamp: dict,
               record: dict) -> dict:
    """``train.json``'s content before the model file is saved.

    Parameters
    ----------
    paths, opts : object
        The stage's files (``dataset``, ``graphs``, ``selection``, ``labels``, ``nodes``) and options
        (``torch_threads``).
    labels : tuple
        ``(label_map, label_meta)``: graph id -> label, and the label set's metadata.
    answered : tuple
        :func:`tmdlib.select.answered.answered_selection`'s ``(medoid ids, τ, ε mean, partial)``.
    stamp : dict
        The store's identity fields (its content hash), recorded as given.
    record : dict
        :func:`train_record`'s fields.
    """
    label_map, label_meta = labels
    med_ids, sel_tau, epsilon, partial = answered
    return {"dataset": paths.dataset, "graphs": paths.graphs, "selection": paths.selection, "labels": paths.labels,
            "labels_source": label_meta.get("source", "unknown"),
            "labels_meta": label_meta, "labels_used": int(len(med_ids)), "labels_available": int(len(label_map)),
            "selection_method": sel.get("method"), "fraction": sel.get("fraction"), "k": int(len(med_ids)),
            "tau_sum": float(np.sum(sel_tau)), "weighting": weighting, "epsilon": epsilon, "partial": partial,
            **({"medoids_trained": med_ids, "tau_trained": sel_tau} if partial else {}),
            "node_subsampling": bool(paths.nodes), "nodes": paths.nodes, "torch_threads": int(opts.torch_threads),
            **stamp, **record}


def train_params(cfg: dict, opts, paths, task, spec, weighting: str, recipe: str | None, sel: dict, k: int,
                 label_meta: dict) -> dict:
    """The train run's parameters: the GIN's checked ``cfg`` (:func:`tmdlib.torch.options.resolve_config`), the
    stage's options ``opts`` and files ``paths``, the model ``spec``, the ``weighting`` and ``recipe`` (None for a
    model that is not a GIN) as resolved, the selection's method, fraction and ``k`` labelled medoids."""
    return {**{f"train.{k}": v for k, v in cfg.items()}, "dataset": paths.dataset, "weights": opts.weights,
            "task": task.type, "train.model": spec.name, "train.weighting": weighting, "train.recipe": recipe,
            "train.loss": opts.loss, "train.huber_delta": opts.huber_delta, "selection.method": sel.get("method"),
            "selection.fraction": sel.get("fraction"), "selection.k": k, "node_subsampling": bool(paths.nodes),
            "labels_source": label_meta.get("source", "unknown"), "torch_threads": opts.torch_threads,
            "labels_missing": label_meta.get("missing"), "labels_answered": label_meta.get("answered"),
            "certified": cfg.get("lipschitz_budget") is not None, "train.lipschitz_budget": cfg.get("lipschitz_budget"),
            "train.lipschitz_mode": cfg.get("lipschitz_mode", "ball"), "train.lipschitz_target": opts.target or 0.0}


def train_summary(name: str, task, info: dict, model) -> str:
    """The line the train stage prints: the model, the dataset and task, the graphs trained on, and c (with the
    certified budget and whether its constraint holds) or that there is no TMD-Lipschitz constant."""
    lip = info["lipschitz"]
    head = f"trained {model.name} on {name} ({task.describe()}): {info['k']} graphs"
    if lip.get("c") is None:
        return f"{head} ({info['weighting']} weights), {info['train_seconds']:.1f} s; no TMD-Lipschitz constant"
    final = info["final_loss"] if info["final_loss"] is not None else float("nan")
    return (f"{head}, {info['config']['epochs']} epochs on {info['device']}, final weighted {model.head.loss} "
            f"{final:.4f}, c = {lip['c']:.4g}" + (f" (certified: budget {lip['lipschitz_budget']}, measured "
                                                 f"{lip['c_measured']:.4g}, constraint "
                                                 f"{'holds' if lip['constraint_ok'] else 'VIOLATED'})"
                                                 if lip["certified"] else ""))


def collapse_warning(info: dict, lr) -> str | None:
    """The warning printed when the trained GIN collapsed (a layer with no unit non-zero on any training graph:
    every graph gets the same output), else None."""
    alive = info.get("alive_units")
    if not info.get("collapsed"):
        return None
    return (f"WARNING: the trained GIN collapsed: layer {alive.index(0) + 1} has no unit that is non-zero on any "
            f"training graph, so every graph gets the same output (alive units per layer: {alive}). Lower the "
            f"learning rate (train.lr, now {lr}) and retrain.")


def partial_answers_line(partial: dict) -> str:
    """The line that says how much of a selection the lab answered
    (:func:`tmdlib.select.answered.answered_selection`'s ``partial``)."""
    return (f"partial answers: {partial['answered_medoids']} of {partial['requested_medoids']} selected graphs have "
            f"a label; {partial['graphs_moved']} graphs reassigned to their nearest answered medoid, epsilon "
            f"{partial['epsilon_mean_before']:.4g} -> {partial['epsilon_mean_after']:.4g}; the others stay "
            "requested")


def model_description(info: dict, stage: str, run_id: str, model_out: str, sha: str, in_dim: int) -> str:
    """The registered GIN version's description from ``train.json`` ``info``: architecture, task, loss, c, input
    (a float32 ``(B, n, 1 + d + n)`` dense batch, ``d`` = ``in_dim``) and output."""
    cfg, lip = info["config"], info["lipschitz"]
    head = info.get("task_head") or {}
    task = (head.get("task") or {}).get("type", "binary")
    dim = info["model"].get("out_dim", 1)
    output = {"binary": "logits (B, 1)", "multiclass": f"class logits (B, {dim})",
              "multitask": f"task logits (B, {dim})",
              "regression": f"predictions in the targets' units (B, {dim})"}.get(task, f"(B, {dim})")
    return (f"GIN ({cfg['layers']} layers, hidden {cfg['hidden']}, {cfg['pool']} readout"
            f"{', certified budget ' + str(cfg['lipschitz_budget']) if lip['certified'] else ''}"
            f"{' (orthogonal MaxMin)' if cfg.get('lipschitz_mode') == 'orthogonal' else ''}) for a {task} task, "
            f"trained by {stage} (run {run_id}) on {info['k']} coreset graphs with the tau-weighted "
            f"{head.get('loss', 'bce')} loss; labels: {info['labels_source']}; stability constant c = {lip['c']:.4g}. "
            f"Input: float32 (B, n, 1 + d + n) dense batch (node mask, {in_dim} features, adjacency), output: {output} "
            f"(tmdlib.torch.serving). Same weights as {model_out} (sha256 {sha}).")


def model_state_of(info: dict) -> dict:
    """``train.json``'s model config (``model_state``), which rebuilds the model; a ``train.json`` written before
    models were registered holds a GIN's ``model`` / ``config`` / ``task_head`` instead (read as the graph model)."""
    if info.get("model_state"):
        return info["model_state"]
    from ._registry import graph_default

    return {"name": graph_default(bool(info.get("certified"))), "config": info.get("config"),
            "model": info.get("model"), "head": info.get("task_head"), "lipschitz": info.get("lipschitz")}


def state_arrays(arrays: dict, what: str) -> tuple[dict, dict]:
    """A fitted model's arrays split into those saved as tensors and those recorded as text in its config.

    Parameters
    ----------
    arrays : dict
        ``{name: array}`` of :meth:`tmdlib.models._base.Model.state`.
    what : str
        The model, in the message.

    Returns
    -------
    tuple of dict
        ``(numeric, text)``: numeric arrays (bool, int, float), and the text arrays as lists.

    Raises
    ------
    ValueError
        An array that is neither numbers nor text.
    """
    text = {k: np.asarray(v).tolist() for k, v in arrays.items() if np.asarray(v).dtype.kind in "US"}
    bad = [k for k, v in arrays.items() if np.asarray(v).dtype.kind not in "biufUS"]
    if bad:
        raise ValueError(f"model {what!r}: arrays {bad[:5]} are neither numbers nor text")
    return {k: v for k, v in arrays.items() if k not in text}, text


def model_tags(info: dict, task, spec, name: str, stage: str, run_id: str, sha: str) -> dict:
    """The tags of a trained model's MLflow version: dataset, stage, train run, the model file's sha256, the labels'
    source, the task type, certified or not and the model's name."""
    return {"dataset": name, "stage": stage, "train_run_id": run_id, "model_sha256": sha,
            "labels_source": info["labels_source"], "task": task.type, "certified": info["certified"],
            "model": spec.name}


def smiles_model_description(info: dict, task, spec, stage: str, run_id: str, model_out: str, sha: str) -> str:
    """The description of a molecule pool's registered model (a pyfunc that takes SMILES)."""
    return (f"{spec.name} for a {task.describe()} task, trained by {stage} (run {run_id}) on {info['labels_used']} "
            f"coreset molecules; input: a DataFrame with a smiles column; same weights as {model_out} (sha256 {sha})")


def skipped_record(off: dict, name: str) -> dict:
    """``train_nodes.json`` when node subsampling was off (``off``: the record of ``nodes.parquet`` that says so): the stage
    was skipped, and why (``skipped``, ``reason``, ``line``)."""
    return {"skipped": True, "stage": f"train_nodes@{name}", "dataset": name, "node_subsampling": "off",
            "nodes_method": off.get("requested"), "reason": off["reason"], "line": off["line"]}


def domain_record(train_smiles, cal_smiles, cal_labels, what: str, confidence: float) -> dict:
    """What the registered molecule model is handed to give the predictions file's columns: the trained molecules
    (its applicability domain), the calibration members' SMILES and labels (NaN, missing, as JSON's NaN), what they
    are and the intervals' confidence; it calibrates at load time as the predict stage does."""
    return {"train_smiles": train_smiles, "calibration_smiles": cal_smiles,
            "calibration_labels": np.asarray(cal_labels, dtype=np.float64).tolist(), "calibration": what,
            "confidence": confidence}
