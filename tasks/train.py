"""Training tasks: torch threads, the model file (``model.pt``, a state dict) and ``train.json``.

The readers of the selection, labels and node subsets are in :mod:`tasks.io`; MLflow runs in
:mod:`tasks.tracking`; the science (training any task type, the stability constant) in
:mod:`tmdlib.torch.fit`.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from tmdlib import InputError

from . import io



def set_torch_threads(n: int) -> int:
    """Set torch's intra-op CPU threads (``n >= 1``); returns the previous value.

    The pipeline default is 1: these models are small, so extra threads mostly spin (4-8x slower on a
    shared, oversubscribed machine), and float summation order - hence the trained weights - depends on
    the thread count: one thread makes CPU runs repeat bit for bit on any machine.
    """
    import torch

    if int(n) < 1:
        raise InputError(None, f"--torch-threads must be >= 1, got {n}")
    old = torch.get_num_threads()
    torch.set_num_threads(int(n))
    return old


# ----------------------------------------------------------------------------------------------
# Parameters (checked before any file is read)
# ----------------------------------------------------------------------------------------------
def resolve_config(dataset: str, opts, lipschitz_budget=None, lipschitz_mode=None, recipe: str = "paper-b2") -> dict:
    """The GIN's training hyper-parameters: the named ``recipe`` (:data:`tmdlib.torch.model.RECIPES`; ``paper-b2``
    fills in the paper's per-dataset B.2 widths) with the options ``opts`` over it (a
    :class:`tasks.config.TrainStageConfig`, or anything with its ``epochs``, ``hidden``, ``layers``, ``batch_size``,
    ``lr``, ``seed``, ``device``, ``pool``, ``eta``, ``bias``); checked.

    ``lipschitz_budget`` (certified mode, :mod:`tmdlib.torch.certified`): a positive number (per weight matrix) or a
    comma list of per-matrix budgets; ``None``, ``0``, ``"none"``, ``"null"`` → unconstrained.  It is added to
    the config only when set, so unconstrained configs are unchanged.  ``lipschitz_mode`` (``"ball"``, the
    default, or ``"orthogonal"``: MaxMin GIN with orthonormal matrices, the budget is c itself) is added only
    when it is ``"orthogonal"`` and a budget is set.
    """
    from tmdlib.torch.certified import parse_budget, parse_mode
    from tmdlib.torch.model import RECIPES, recipe_config

    if recipe not in RECIPES:
        raise InputError(None, f"--recipe must be one of {', '.join(RECIPES)}, got {recipe!r}")
    d = recipe_config(recipe, dataset)
    pool, device = opts.pool, opts.device
    cfg = {"hidden": int(opts.hidden or d["hidden"]), "layers": int(opts.layers), "pool": pool,
           "eta": float(opts.eta), "bias": bool(opts.bias), "lr": float(opts.lr or d["lr"]),
           "batch_size": int(opts.batch_size or d["batch_size"]), "epochs": int(opts.epochs), "seed": int(opts.seed), "device": device}
    problems = [f"--{k.replace('_', '-')} must be >= 1" for k in ("hidden", "layers", "batch_size") if cfg[k] < 1]
    if cfg["epochs"] < 0:
        problems.append("--epochs must be >= 0")
    if not cfg["lr"] > 0:
        problems.append("--lr must be > 0")
    if not cfg["eta"] > 0:
        problems.append("--eta must be > 0")
    if pool not in ("add", "mean"):
        problems.append("--pool must be 'add' or 'mean'")
    if device != "auto" and not (device == "cpu" or device.startswith("cuda")):
        problems.append("--device must be auto, cpu or cuda[:N]")
    try:
        budget = parse_budget(lipschitz_budget)
    except ValueError as err:
        problems.append(f"--lipschitz-budget: {err}")
        budget = None
    try:
        mode = parse_mode(lipschitz_mode)
    except ValueError as err:
        problems.append(f"--lipschitz-mode: {err}")
        mode = "ball"
    if budget is not None:
        cfg["lipschitz_budget"] = budget
        if mode == "orthogonal":
            cfg["lipschitz_mode"] = mode
            if isinstance(budget, list):
                problems.append("--lipschitz-mode orthogonal takes one budget (the constant c), not a list")
            if cfg["hidden"] % 2:
                problems.append("--lipschitz-mode orthogonal needs an even --hidden (MaxMin pairs units)")
        if isinstance(budget, list) and len(budget) != 2 * cfg["layers"] + 1 and mode == "ball":
            problems.append(f"--lipschitz-budget: {len(budget)} per-matrix budgets for {2 * cfg['layers'] + 1} "
                            "weight matrices (2 per GIN layer + readout)")
        if cfg["bias"]:
            problems.append("--lipschitz-budget needs --no-bias (phi(0) = 0 for the TMD stability bound)")
        if pool != "add":
            problems.append("--lipschitz-budget needs --pool add (sum readout for the TMD stability bound)")
    if problems:
        raise InputError(None, "; ".join(problems))
    return cfg


def parse_target(target) -> float | None:
    """``--lipschitz-target`` as a positive float, or None when unset / 0; :class:`InputError` otherwise."""
    if target is None or (isinstance(target, str) and target.strip().lower() in ("", "0", "none", "off")):
        return None
    try:
        t = float(target)
    except (TypeError, ValueError):
        raise InputError(None, f"--lipschitz-target must be a number of nats (0 = off), got {target!r}") from None
    if t == 0:
        return None
    if not (t > 0 and math.isfinite(t)):
        raise InputError(None, f"--lipschitz-target must be a positive number of nats (0 = off), got {target!r}")
    return t


def target_budget(target, epsilon, selection: str, layers: int, eta: float, weights, mode) -> float | None:
    """The budget that makes the certificate c·ε equal ``target`` nats for a selection with medoid objective ε.

    ``None`` when ``target`` is unset / 0.  ``"orthogonal"`` mode: the budget is c = target/ε; ``"ball"``: the
    per-matrix β with β^(2·layers+1)·κ = target/ε (:func:`tmdlib.torch.certified.budget_for_target`).  Raises
    :class:`InputError` for a negative / non-numeric target or a selection without ε.
    """
    from tmdlib.torch.certified import budget_for_target, parse_mode

    t = parse_target(target)
    if t is None:
        return None
    if epsilon is None or not float(epsilon) > 0:
        raise InputError(selection, "--lipschitz-target needs the selection's epsilon_mean (a TMD medoid objective); "
                                    "this selection has none: set --lipschitz-budget instead")
    c = t / float(epsilon)
    return c if parse_mode(mode) == "orthogonal" else budget_for_target(layers, c, eta, weights)


def check_loss_option(loss: str, huber_delta: float) -> None:
    """``--loss`` / ``--huber-delta`` before any file is read (the task decides which losses fit, later)."""
    from tmdlib.guarantees.losses import LOSSES

    known = sorted({x for v in LOSSES.values() for x in v} | {"auto"})
    if loss not in known:
        raise InputError(None, f"--loss must be one of {', '.join(known)}; got {loss!r}")
    if not (huber_delta > 0 and math.isfinite(huber_delta)):
        raise InputError(None, f"--huber-delta must be a positive number, got {huber_delta!r}")


# ----------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------
def selection_labels(label_map: dict, med_ids, task, path: str) -> np.ndarray:
    """Labels of the selected graphs as stored for training, ``(k,)`` or ``(k, T)`` (multi-class: class indices);
    :class:`InputError` naming the file when a selected graph has no label."""
    from tmdlib.datasets.task import validate_labels

    missing = [int(g) for g in med_ids if int(g) not in label_map]
    if missing:
        raise InputError(path, f"{len(missing)} selected graphs have no label, e.g. graph ids {missing[:10]}")
    y = np.asarray([label_map[int(g)] for g in med_ids], dtype=np.float64)
    enc = validate_labels(y.reshape(len(y), task.num_targets), task, path=path, encoded=False)
    return enc[:, 0] if task.num_targets == 1 else enc


def calibration_set(store, sel: dict, info: dict, task) -> tuple[np.ndarray, np.ndarray, str]:
    """``(positions, labels as stored, what)`` of the held-out labelled members the intervals are calibrated on:
    the labelled audit sample (production: the lab's labels), else the test split with the dataset's labels
    (benchmark mode)."""
    from .io import positions, read_labels

    ids = store.graph_ids
    if not store.labelled:
        label_map, _ = read_labels(info["labels"], None, task)
        audit = [int(g) for g in sel.get("audit_ids") or [] if int(g) in label_map]
        y = selection_labels(label_map, audit, task, info["labels"]) if audit else np.zeros(0)
        return positions(np.asarray(audit, dtype=np.int64), ids, info["labels"], "audit"), y, \
            f"{len(audit)} labelled audit graphs (production)"
    test = positions(np.asarray(sel["test_ids"], dtype=np.int64), ids, "selection.json", "test_ids")
    y = store.y
    y = y[test] if y.ndim == 1 else y[test]
    return test, (y[:, 0] if y.ndim == 2 and task.num_targets == 1 else y), \
        f"{len(test)} test-split graphs with the dataset's labels (benchmark mode)"


def answered_selection(sel: dict, label_map: dict, store, depth: int, weights, path: str) -> tuple:
    """``(medoid ids, τ, ε mean, partial)`` to train with: the selection's own when every medoid has a label;
    otherwise the coreset restricted to the answered medoids (:func:`tmdlib.select.partial.answered_certificate`:
    the graphs of an unanswered medoid go to their nearest answered one, τ and ε follow), with ``partial`` saying
    what moved (None when nothing is missing).  ``store`` (:class:`tasks.graphs.Store`) loads its graphs only for
    a partial answer."""
    from tmdlib.select.evidence import CoresetCertificate
    from tmdlib.select.partial import answered_certificate

    med = np.asarray(sel["medoids"], dtype=np.int64)
    have = np.array([int(g) in label_map for g in med], dtype=bool)
    if have.all():
        return med, sel["tau"], sel["epsilon_mean"], None
    if not have.any():
        raise InputError(path, f"none of the {len(med)} selected graphs has a label yet: import the lab's answers "
                               "(tmdsub labels import) before training")
    if "assignment" not in sel:
        raise InputError(path, f"{int((~have).sum())} selected graphs have no label, e.g. graph ids "
                               f"{med[~have][:10].tolist()}, and the selection has no assignment to reweight by")
    train = np.asarray(sel["train_ids"], dtype=np.int64)
    order = np.argsort(train)
    at = lambda ids: order[np.searchsorted(train, np.asarray(ids, dtype=np.int64), sorter=order)]  # noqa: E731
    assign = at(sel["assignment"])
    cert = CoresetCertificate(medoids=at(med), assignment=assign, distance=np.asarray(sel["distance"]),
                              tau=np.bincount(assign, minlength=len(train))[at(med)], epsilon=float(np.sum(sel["distance"])),
                              pairs_computed=0, engine=str(sel.get("engine", "exact")))
    new = answered_certificate(cert, at(med[have]), store.dataset.take(train), depth, weights)
    ids = train[new.medoids]
    eps_mean = float(new.epsilon) / len(train)
    partial = {"requested_medoids": int(len(med)), "answered_medoids": int(have.sum()),
               "unanswered_ids": med[~have].tolist(), "graphs_moved": int(new.info.get("moved", 0)),
               "epsilon_mean_before": sel["epsilon_mean"], "epsilon_mean_after": eps_mean,
               "rule": "graphs of an unanswered medoid go to their nearest answered medoid (exact TMD); tau and "
                       "epsilon follow (docs/pipeline.md#labels)"}
    return ids, np.asarray(new.tau, dtype=np.float64), eps_mean, partial


def resolve_model_option(model: str):
    """The :class:`tmdlib.models.ModelSpec` of ``--model`` (a registered name or ``package.module:factory``)."""
    from tmdlib.models import resolve_model

    return resolve_model(model)


def gin_options(cfg: dict, loss: str, huber_delta: float, weights, dataset: str, recipe: str, on_loss=None) -> dict:
    """The options of :class:`tmdlib.torch.model.GINModel` from a checked :func:`resolve_config` ``cfg``."""
    train = {k: cfg[k] for k in ("hidden", "layers", "pool", "eta", "bias", "lr", "batch_size", "epochs", "seed",
                                 "device")}
    return {"recipe": recipe, "dataset": dataset, "lipschitz_budget": cfg.get("lipschitz_budget"),
            "lipschitz_mode": cfg.get("lipschitz_mode"), "loss": None if loss == "auto" else loss,
            "huber_delta": huber_delta, "weights": weights, "on_loss": on_loss, **train}


@task(name="fit-model", persist_result=False, cache_policy=NO_CACHE)
def fit_task(spec, options: dict, X, y, tau, task):
    """Build the model of ``spec`` with ``options`` and fit it on the labelled selection ``X`` (τ-weighted)."""
    import time

    t0 = time.perf_counter()
    model = spec.build(options).fit(X, y, tau, task)
    model.seconds = time.perf_counter() - t0
    return model


def train_record(model, cfg: dict, sel: dict, tau, weights: str, target, node_eps) -> tuple[dict, dict]:
    """``(train.json fields, MLflow metrics)`` of a fitted :class:`tmdlib.models.Model`.

    A GIN adds its losses, its stability constant c (the certificate, Lemma 3.2) and its alive units; any other
    model states that it has no TMD-Lipschitz constant (its coreset loss is measured, no c·ε is claimed)."""
    lip = model.certificate()
    tau = np.asarray(tau, dtype=np.float64)
    info = {"model_name": model.name, "model_inputs": model.inputs, "model_options": model.describe(),
            "config": cfg, "device": "cpu", "train_seconds": round(float(getattr(model, "seconds", 0.0)), 3),
            "task": model.head.task.to_dict(), "task_head": model.head.to_dict(),
            "node_epsilon_mean": None if node_eps is None else float(np.dot(tau, node_eps) / tau.sum()),
            "lipschitz_target": target}
    metrics = {"train_seconds": info["train_seconds"]}
    if lip is None:
        info.update({"lipschitz": {"c": None, "certified": False, "c_certified": None, "valid": False,
                                   "why": f"model {model.name!r} has no Lipschitz constant in TMD: the coreset loss is "
                                          "measured, no c*eps bound is stated"},
                     "certified": False, "c_certified": None, "losses": [], "final_loss": None})
    else:
        res = model.result
        alive = res.alive_units
        info.update({"model": info["model_options"]["model"], "device": res.device, "losses": res.losses,
                     "final_loss": res.losses[-1] if res.losses else None,
                     "lipschitz": {**lip, "depth": cfg["layers"] + 1, "weights": weights,
                                   "loss": f"{res.head.loss} ({res.head.why})"},
                     "certified": lip["certified"], "c_certified": lip["c_certified"],
                     # hidden units of each layer non-zero on some training node; a 0 = a collapsed (dead) network
                     "alive_units": alive, "collapsed": res.collapsed})
        metrics.update({"final_loss": info["final_loss"], "c": lip["c"], "collapsed": res.collapsed,
                        "alive_units_min": min(alive), "kappa": lip["kappa"], "bound_valid": lip["valid"],
                        "certified": lip["certified"], "c_measured": lip["c_measured"],
                        **({"c_certified": lip["c_certified"], "constraint_ok": lip["constraint_ok"],
                            **{f"spectral_norm.{n}": v for n, v in zip(lip["matrices"], lip["spectral_norms"])}}
                           if lip["certified"] else {}),
                        **{f"phi.{i + 1}": v for i, v in enumerate(lip["per_layer"][:-1])},
                        "phi.readout": lip["readout"]})
    if info["node_epsilon_mean"] is not None:
        metrics["node_epsilon_mean"] = info["node_epsilon_mean"]
    return info, metrics


def train_summary(name: str, task, info: dict, model) -> str:
    """The line the train stage prints."""
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
    """The warning printed when the trained GIN collapsed (a dead layer), else None."""
    alive = info.get("alive_units")
    if not info.get("collapsed"):
        return None
    return (f"WARNING: the trained GIN collapsed: layer {alive.index(0) + 1} has no unit that is non-zero on any "
            f"training graph, so every graph gets the same output (alive units per layer: {alive}). Lower the "
            f"learning rate (train.lr, now {lr}) and retrain.")


# ----------------------------------------------------------------------------------------------
# Model files: the model's arrays as plain tensors (torch.load(weights_only=True)), its config in train.json
# ----------------------------------------------------------------------------------------------
def save_model(model, path: str) -> dict:
    """Atomically write a fitted :class:`tmdlib.models.Model`'s arrays to ``path`` as a dict of tensors (a GIN's:
    its state dict); returns the model's config (``train.json``'s ``model_state``, with any text arrays), which
    rebuilds it."""
    import torch

    config, arrays = model.state()
    text = {k: np.asarray(v).tolist() for k, v in arrays.items() if np.asarray(v).dtype.kind in "US"}
    bad = [k for k, v in arrays.items() if np.asarray(v).dtype.kind not in "biufUS"]
    if bad:
        raise InputError(path, f"model {model.name!r}: arrays {bad[:5]} are neither numbers nor text")
    with io.atomic_path(path) as tmp:
        torch.save({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items() if k not in text}, tmp)
    return {**config, "text_arrays": text} if text else config


def model_state_of(info: dict) -> dict:
    """``train.json``'s model config (``model_state``); a train.json written before models were registered holds a
    GIN's ``model`` / ``config`` / ``task_head`` instead."""
    if info.get("model_state"):
        return info["model_state"]
    from tmdlib.models.registry import graph_default

    return {"name": graph_default(bool(info.get("certified"))), "config": info.get("config"),
            "model": info.get("model"), "head": info.get("task_head"), "lipschitz": info.get("lipschitz")}


def load_model(path: str, info: dict):
    """The fitted :class:`tmdlib.models.Model` of ``train.json`` ``info`` with its arrays from ``path``
    (``torch.load(weights_only=True)``: nothing is unpickled)."""
    import torch

    from tmdlib.models import restore_model

    if not Path(path).is_file():
        raise InputError(path, "model file not found")
    if info.get("skipped"):  # train_nodes with node subsampling off (skip_training): no model was trained
        raise InputError(path, f"no model: {info.get('line') or 'the training stage was skipped'}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - torch raises many kinds for a bad file
        raise InputError(path, f"not a loadable state dict: {err}") from None
    try:
        config = model_state_of(info)
        arrays = {k: v.numpy() for k, v in state.items()}
        arrays.update({k: np.asarray(v, dtype=str) for k, v in (config.get("text_arrays") or {}).items()})
        return restore_model(config, arrays)
    except (RuntimeError, KeyError, ValueError) as err:
        raise InputError(path, f"state dict does not match the model config: {err}") from None


#: The confidence of the registered model's intervals (the predict stage's default, ``predict.confidence``).
PYFUNC_CONFIDENCE = 0.9


def domain_artifact(store, pos, info: dict, task) -> dict:
    """What the registered model needs to give the predictions file's columns: the trained molecules (its
    applicability domain) and the calibration members' SMILES and labels (:func:`calibration_set`: the labelled
    audit sample in production) — it calibrates at load time as the predict stage does."""
    cal, y, what = calibration_set(store, io.read_selection(info["selection"]), info, task)
    return {"train_smiles": store.smiles(pos), "calibration_smiles": store.smiles(cal) if len(cal) else [],
            "calibration_labels": np.asarray(y, dtype=np.float64).tolist(),  # NaN (missing) as JSON's NaN
            "calibration": what, "confidence": PYFUNC_CONFIDENCE}


def log_smiles_model_task(run_id: str, model, model_out: str, info: dict, dataset: str, description: str,
                          tags: dict, example, domain: dict | None = None) -> dict:
    """:func:`tasks.registry.log_smiles_model` with the model's config as its ``train_info`` artifact and
    ``domain`` (:func:`domain_artifact`) as its ``domain`` artifact."""
    import json
    import tempfile

    from .registry import log_smiles_model

    with tempfile.TemporaryDirectory(prefix="tmdsub-model-") as tmp:
        cfg = Path(tmp) / "train.json"
        cfg.write_text(json.dumps({"model_state": info["model_state"], "config": info["config"]}, default=float))
        extra = {}
        if domain is not None:
            extra["domain"] = str(Path(tmp) / "domain.json")
            Path(extra["domain"]).write_text(json.dumps(domain))
        return log_smiles_model(run_id, model_out, str(cfg), dataset, description, tags=tags, example=example,
                                artifacts=extra)


def model_for(model: str | None, lipschitz_budget, lipschitz_target, store=None, task=None,
              graphs_only: bool = False, n_train: int = 0) -> str:
    """The model to train: ``model`` when given; ``auto`` (with the store and the task) is the measured default
    (:func:`tmdlib.models.default_model`: ``svm`` for molecule regression, ``lgbm`` past ``SVM_MAX_TRAIN`` labelled
    training molecules ``n_train``, ``rf`` for molecule classification); otherwise, and for ``None``, the certified
    GIN when a Lipschitz budget or target is set, else the GIN (the behaviour before ``train.model`` existed);
    ``graphs_only`` (node subsampling trains on subgraphs) keeps ``auto`` on the GIN."""
    if model not in (None, "", "auto"):
        return str(model)
    certified = parse_target(lipschitz_target) is not None or str(lipschitz_budget).strip().lower() not in (
        "", "0", "0.0", "none", "null", "off")
    if model == "auto" and store is not None and task is not None and not graphs_only:
        from tmdlib.models import default_model

        return default_model(store.has_smiles, task, certified, n_train)
    from tmdlib.models.registry import graph_default

    return graph_default(certified)


def recipe_for(model: str, recipe: str) -> str:
    """The GIN's training recipe: ``recipe``, or for ``auto`` the measured one — ``default`` (Adam lr 0.001, batch 64)
    for the GIN (benchmarks/gin_recipe.py: better on 3 of 4 MoleculeACE sets, R² 0.51 against 0.08 on CHEMBL204_Ki,
    and on MUTAG and PROTEINS), ``paper-b2`` (lr 0.01, batch 16) for the certified GIN (the certified sweep's
    setting, reports/certified/summary.md)."""
    if recipe != "auto":
        return recipe
    from tmdlib.models.registry import auto_recipe

    return auto_recipe(model)


def certified_setting(spec, lipschitz_budget, lipschitz_mode, target) -> tuple:
    """``(budget, mode)`` of the GIN: none for other models; the user's budget (mode as given, ``ball`` by
    default) or, when neither a budget nor a target is given, the certified GIN's registered default."""
    if not spec.certified:
        return None, None
    given = str(lipschitz_budget).strip().lower() not in ("", "0", "0.0", "none", "null", "off")
    if given or target is not None:
        return (lipschitz_budget if given else spec.defaults.get("lipschitz_budget")), lipschitz_mode
    return spec.defaults.get("lipschitz_budget"), lipschitz_mode or spec.defaults.get("lipschitz_mode")


def train_model_spec(model, lipschitz_budget, lipschitz_target, store, task, nodes, n_train: int = 0):
    """The model's :class:`~tmdlib.models.registry.ModelSpec` for this store and task (:func:`model_for`); node
    subsampling trains on subgraphs, so a model that reads molecules gives way to the graph model (said once)."""
    spec = resolve_model_option(model_for(model, lipschitz_budget, lipschitz_target, store, task, bool(nodes),
                                          n_train))
    if nodes and spec.inputs != "graphs":  # node subsampling trains on subgraphs: a graph model
        fallback = model_for(None, lipschitz_budget, lipschitz_target)
        print(f"node subsampling trains graph models: model {spec.name!r} reads molecules, {fallback} is trained on "
              "the subgraphs", flush=True)
        spec = resolve_model_option(fallback)
    return spec


def partial_answers_line(partial: dict) -> str:
    """The line that says how much of a selection the lab answered (:func:`answered_selection`'s ``partial``)."""
    return (f"partial answers: {partial['answered_medoids']} of {partial['requested_medoids']} selected graphs have "
            f"a label; {partial['graphs_moved']} graphs reassigned to their nearest answered medoid, epsilon "
            f"{partial['epsilon_mean_before']:.4g} -> {partial['epsilon_mean_after']:.4g}; the others stay "
            "requested")


def training_weights(sel_tau, weighting: str, sel: dict) -> tuple[np.ndarray, str]:
    """``(weights, weighting)``: ``auto`` resolved for the selection's mode
    (:func:`tmdlib.select.rounds.default_weighting`: none on a pool without labels, τ in benchmark mode), then the
    answered medoids' τ or unit weights."""
    from tmdlib.select.rounds import default_weighting

    weighting = default_weighting(weighting, sel.get("mode") == "production")
    tau = np.asarray(sel_tau, dtype=np.float64)
    return (tau if weighting == "tau" else np.ones(len(tau))), weighting


def train_params(cfg: dict, opts, paths, task, spec, weighting: str, recipe: str | None, sel: dict, k: int,
                 label_meta: dict) -> dict:
    """The train run's MLflow parameters: the GIN's checked ``cfg`` (:func:`resolve_config`), the stage's options
    ``opts`` (:class:`tasks.config.TrainStageConfig`) and files ``paths`` (:class:`tasks.config.TrainPaths`), the
    ``weighting`` and ``recipe`` (None for a model that is not a GIN) as resolved."""
    return {**{f"train.{k}": v for k, v in cfg.items()}, "dataset": paths.dataset, "weights": opts.weights,
            "task": task.type, "train.model": spec.name, "train.weighting": weighting, "train.recipe": recipe,
            "train.loss": opts.loss, "train.huber_delta": opts.huber_delta, "selection.method": sel.get("method"),
            "selection.fraction": sel.get("fraction"), "selection.k": k, "node_subsampling": bool(paths.nodes),
            "labels_source": label_meta.get("source", "unknown"), "torch_threads": opts.torch_threads,
            "labels_missing": label_meta.get("missing"), "labels_answered": label_meta.get("answered"),
            "certified": cfg.get("lipschitz_budget") is not None, "train.lipschitz_budget": cfg.get("lipschitz_budget"),
            "train.lipschitz_mode": cfg.get("lipschitz_mode", "ball"), "train.lipschitz_target": opts.target or 0.0}


def train_info(paths, opts, labels: tuple, sel: dict, answered: tuple, weighting: str, store_hash: str,
               record: dict) -> dict:
    """``train.json``'s content before the model file is saved: the stage's files ``paths`` and options ``opts``
    (:mod:`tasks.config`), ``labels`` = ``(label_map, label_meta)`` (:func:`tasks.io.read_labels`), ``answered`` =
    :func:`answered_selection`'s ``(medoid ids, τ, ε mean, partial)``, ``record`` from :func:`train_record`."""
    from .graphs import STORE_HASH_KEY

    label_map, label_meta = labels
    med_ids, sel_tau, epsilon, partial = answered
    return {"dataset": paths.dataset, "graphs": paths.graphs, "selection": paths.selection, "labels": paths.labels,
            "labels_source": label_meta.get("source", "unknown"),
            "labels_meta": label_meta, "labels_used": int(len(med_ids)), "labels_available": int(len(label_map)),
            "selection_method": sel.get("method"), "fraction": sel.get("fraction"), "k": int(len(med_ids)),
            "tau_sum": float(np.sum(sel_tau)), "weighting": weighting, "epsilon": epsilon, "partial": partial,
            **({"medoids_trained": med_ids, "tau_trained": sel_tau} if partial else {}),
            "node_subsampling": bool(paths.nodes), "nodes": paths.nodes, "torch_threads": int(opts.torch_threads),
            STORE_HASH_KEY: store_hash, **record}


def log_trained_model(run: dict, fitted, info: dict, paths, task, spec, store, pos, graph_model: bool) -> None:
    """The trained model to the MLflow run (``model.pt`` saved first: the version names its sha256): for molecules a
    pyfunc that takes SMILES, for any model; else the GIN (registered unless trained on node subsets).  ``paths``:
    the stage's files (:class:`tasks.config.TrainPaths`).  Sets ``info["mlflow"]`` when a model was logged."""
    from .registry import log_gin_model, model_description
    from .tracking import set_run_tag

    name, stage, model_out, nodes = paths.dataset, paths.stage, paths.model_out, paths.nodes

    set_run_tag(run["run_id"], "device", info["device"])
    sha = io.sha256_file(model_out)
    tags = {"dataset": name, "stage": stage, "train_run_id": run["run_id"], "model_sha256": sha,
            "labels_source": info["labels_source"], "task": task.type, "certified": info["certified"],
            "model": spec.name}
    if store.has_smiles and not nodes:  # molecules: a pyfunc that takes SMILES, for any model
        info["mlflow"] = {**run, "model": log_smiles_model_task(
            run["run_id"], fitted, model_out, info, name, f"{spec.name} for a {task.describe()} task, trained "
            f"by {stage} (run {run['run_id']}) on {info['labels_used']} coreset molecules; input: a DataFrame with "
            f"a smiles column; same weights as {model_out} (sha256 {sha})", tags, store.smiles(pos[:3]),
            domain_artifact(store, pos, info, task))}
    elif graph_model:
        info["mlflow"] = {**run, "model": log_gin_model(
            run["run_id"], fitted.model, fitted.result.data, name,
            model_description(info, stage, run["run_id"], model_out, sha, store.num_features),
            register=not nodes, head=fitted.head, tags=tags)}


@task(name="write-model", persist_result=False, cache_policy=NO_CACHE)
def skip_training(off: dict, graphs: str, model_out: str, info_out: str) -> dict:
    """``train_nodes`` when ``nodes.parquet`` records node subsampling as off (:func:`tasks.io.nodes_off`): nothing
    is trained or logged to MLflow; ``model_nodes.pt`` holds only the reason (no tensor), ``train_nodes.json`` says
    the stage was skipped and why (``skipped``, ``reason``, ``line``)."""
    import torch

    name = io.dataset_name(graphs)
    with io.atomic_path(model_out) as tmp:
        torch.save({"skipped": off["line"]}, tmp)
    info = {"skipped": True, "stage": f"train_nodes@{name}", "dataset": name, "node_subsampling": "off",
            "nodes_method": off.get("requested"), "reason": off["reason"], "line": off["line"]}
    print(f"{off['line']}: train_nodes@{name} skipped (no model trained, no MLflow run)", flush=True)
    return write_model(None, model_out, info_out, info)


def write_model(model, model_out: str, info_out: str, info: dict) -> dict:
    """Write ``model.pt`` (unless ``model`` is None: already written) and ``train.json`` atomically (the JSON
    last, naming the model's sha256)."""
    if model is not None:
        save_model(model, model_out)
    info = io.stamped({**info, "model_sha256": io.sha256_file(model_out)})
    io.write_json(info_out, info)
    return info


