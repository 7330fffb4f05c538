"""Evaluation tasks: the measurement (:func:`tmdlib.torch.measure.measure`), metrics.json, the plot, the MLflow run.

Evaluation needs labels of every training and test graph, which a labelling workflow does not have:
it is a benchmark measurement and reads the dataset's own ``y`` (recorded as
``labels_for_evaluation = "dataset (benchmark mode)"``).  Training of the model under test used
only the imported labels (see :mod:`tasks.train`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from tmdlib import InputError

from . import io
from .config import parse_fractions  # noqa: F401  (the evaluate stage's option, checked in its config)

BENCHMARK_EVAL = "dataset (benchmark mode)"


def tmd_setting(tmd_meta: str | None, layers: int, weights: str) -> tuple[int, object, list, dict]:
    """(depth, weights, problems, meta) of the TMD the bound is stated with; the matrix's meta.json wins."""
    problems, meta = [], {}
    depth, w = layers + 1, weights
    if tmd_meta:
        meta = io.read_json(tmd_meta, "TMD meta file")
        depth = int(meta.get("depth", depth))
        w = meta.get("weights", w)
    if depth != layers + 1:
        problems.append(f"TMD depth {depth} != GIN layers + 1 = {layers + 1}")
    return depth, w, problems, meta


@task(name="measure", persist_result=False, cache_policy=NO_CACHE)
def measure_task(ds, model, head, cfg: dict, **kwargs) -> dict:
    """:func:`tmdlib.torch.measure.measure` (the guarantees of one trained coreset model)."""
    from tmdlib.torch.measure import measure

    return measure(ds, model, head, cfg, **kwargs)


def metrics_document(m: dict, name: str, sel: dict, info: dict, checks: dict, tmd: tuple, where: tuple, opts,
                     seconds: float) -> dict:
    """``metrics.json``: the measurement ``m`` with what it was made from (selection, labels, TMD setting): ``tmd`` =
    ``(depth, weights, problems)`` (:func:`tmd_setting`), ``where`` = ``(tau_source, plan, n_train)``
    (:func:`evaluation_positions`), ``opts`` the stage's options (:class:`tasks.config.EvaluateStageConfig`, its seed
    resolved)."""
    depth, weights, problems = tmd
    tau_source, plan, n_train = where
    sample, seed, device = opts.sample, opts.seed, opts.device
    cfg = info["config"]
    budget = cfg.get("lipschitz_budget")
    main = dict(m["bound"])
    main.update({"fraction": sel.get("fraction"), "k": int(len(sel["medoids"])),
                 "epsilon_source": "selection" if sel["epsilon_mean"] is not None else (
                     "matrix" if checks.get("epsilon") is not None else None),
                 "epsilon_matrix": checks.get("epsilon"), "tau_matches_tmd_assignment": checks.get("tau_match"),
                 "bound_weights": tau_source, "depth": depth, "weights": weights})
    # Lemma 3.2 is proven for tau = nearest-medoid cluster sizes (checked when the matrix is given)
    main["lemma_applies"] = bool(abs(float(main["tau_sum"]) - n_train) < 1e-6 and checks.get("tau_match") is not False)
    if problems:
        main["valid"] = False
        main["conditions"] = list(main["conditions"]) + list(problems)
    sample_info = None
    if plan is not None:
        sample_info = {"train_sample": int(sample), "n_train": n_train, "test_sample": int(m["test"]["n"]),
                       "seed": seed, "note": "full training loss estimated on a uniform sample (full_stderr); the "
                                             "full-data reference model is trained on that sample; no matrix check, "
                                             "no sweep"}
    test = dict(m["test"])
    test["full_model_trained_on"] = ("all training graphs" if plan is None else
                                     f"a uniform sample of {len(plan['sample_idx'])} of {n_train} training graphs")
    return {"dataset": name, "task": m["task"]["task"], "store_content_sha256": sel.get("store_content_sha256"),
            "method": sel.get("method"), "fraction": sel.get("fraction"),
            "k": int(len(sel["medoids"])), "n_train": n_train, "n_test": int(test["n"]), "seed": seed,
            "sample": sample_info, "labels_for_evaluation": BENCHMARK_EVAL,
            "labels_for_training": info.get("labels_source", "unknown"),
            "labels_for_reference_and_sweep_training": BENCHMARK_EVAL, "test": test,
            "certified": budget is not None, "lipschitz_budget": budget,
            "lipschitz_mode": cfg.get("lipschitz_mode", "ball") if budget is not None else None,
            "bound": main, "reference": m["reference"], "nodes": m["nodes"], "sweep": m["sweep"],
            "sweep_note": m["sweep_note"], "epochs": m["epochs"], "task_head": m["task"], "device": device,
            "seconds": round(seconds, 2)}


def log_evaluation(metrics: dict, info: dict, paths, store, sel: dict, opts) -> dict:
    """The evaluate run in MLflow (params, flat metrics, the sweep as steps, datasets, the model as an input) and
    the test metric on the registered model version; returns the run's ``{"run_id", ...}``.  ``paths``: the stage's
    files (:class:`tasks.config.EvaluatePaths`, the matrix as used: None when none was); ``opts`` its options
    (:class:`tasks.config.EvaluateStageConfig`, its seed resolved)."""
    from .registry import tag_evaluation
    from .tracking import graph_store_dataset, log_datasets, log_run, selection_dataset, start_run

    graphs, selection, model, train_info = paths.graphs, paths.selection, paths.model, paths.train_info
    name, nodes, experiment = paths.dataset, paths.nodes, opts.experiment
    main, metric = metrics["bound"], metrics["test"]["metric"]
    params = {"dataset": name, "task": metrics["task"]["type"], "selection.method": sel.get("method"),
              "selection.fraction": sel.get("fraction"), "selection.k": metrics["k"],
              "fractions": ",".join(map(str, opts.fractions)), "sweep_epochs": opts.sweep_epochs,
              "full_epochs": metrics["epochs"]["full_model"], "seed": opts.seed, "device": opts.device,
              "torch_threads": opts.torch_threads, "tmd.depth": main["depth"], "tmd.weights": str(main["weights"]),
              "node_subsampling": bool(nodes), "certified": metrics["certified"],
              "lipschitz_budget": metrics["lipschitz_budget"], "sample": opts.sample}
    test = {k: v for k, v in metrics["test"].items() if k not in ("metric", "coreset_metrics", "full_metrics")}
    flat = {"test": {**test, **{f"coreset.{k}": v for k, v in metrics["test"]["coreset_metrics"].items()}},
            "bound": {k: v for k, v in main.items() if k not in ("per_layer", "fraction", "k")},
            "nodes": metrics["nodes"] or {}, f"test_{metric}": metrics["test"]["coreset_model"],
            "reference": {"degenerate": metrics["reference"]["degenerate"], "epochs": metrics["reference"]["epochs"]}}
    sweep = metrics["sweep"]
    steps = {f"sweep.{key}": [p.get(key) if p.get(key) is not None else float("nan") for p in sweep]
             for key in ("fraction", "epsilon", "c_epsilon", "gap_observed", "erm_bound", "excess_loss")}
    inputs = [p for p in (graphs, selection, model, train_info, paths.matrix, nodes) if p]
    run = start_run("evaluate", params, inputs, experiment, paths.stage,
                    {"labels_for_evaluation": BENCHMARK_EVAL, "labels_for_training": metrics["labels_for_training"],
                     "task": metrics["task"]["type"]})
    logged = (info.get("mlflow") or {}).get("model") or {}
    log_datasets(run["run_id"], [graph_store_dataset(graphs, store, name), selection_dataset(selection, sel, name)],
                 "evaluation", model_ids=[logged["model_id"]] if logged.get("model_id") else None)
    out = log_run("evaluate", params, flat, inputs, [paths.metrics_out, paths.plot_out], experiment=experiment,
                  step_metrics=steps if sweep else None, run=run)
    # the registered model version of train.json gets its test metric (the scheduled run's champion rule)
    tag_evaluation(logged, metric, metrics["test"]["coreset_model"], run["run_id"])
    return out


def plot_bound_vs_gap(rows: list[dict], out: str, title: str, main: dict | None = None) -> str:
    """Two panels against the fraction of training graphs kept (atomic PNG write).

    Left: Lemma 3.2, the bound :math:`c\\varepsilon` and the observed :math:`|{\\rm gap}|` (log scale).
    Right: Corollary 3.3, the bound :math:`2c\\varepsilon` and the observed excess loss over the model
    trained on all training graphs (symlog: the excess can be negative).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = sorted([r for r in rows if r.get("epsilon") is not None], key=lambda r: r["fraction"])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    x = [r["fraction"] for r in pts]

    def pos(v):
        return [val if val is not None and val > 0 else np.nan for val in v]

    ax1.plot(x, pos([r["c_epsilon"] for r in pts]), "o-", color="tab:red", label=r"bound $c\,\varepsilon$ (Lemma 3.2)")
    ax1.plot(x, pos([r["gap_observed"] for r in pts]), "s-", color="tab:blue",
             label="observed |weighted coreset loss − full loss|")
    ax1.set_yscale("log")
    ax1.set_xlabel("fraction of training graphs kept")
    ax1.set_ylabel("loss gap")
    ax1.set_title("Lemma 3.2: loss gap vs bound")
    ax2.plot(x, [r["erm_bound"] for r in pts], "o-", color="tab:red", label=r"bound $2c\,\varepsilon$ (Cor. 3.3)")
    ax2.plot(x, [r["excess_loss"] for r in pts], "s-", color="tab:blue",
             label="observed excess loss vs full-data model")
    ax2.axhline(0.0, color="grey", lw=0.6)
    ax2.set_yscale("symlog", linthresh=1e-2)
    ax2.set_xlabel("fraction of training graphs kept")
    ax2.set_ylabel("training loss excess")
    ax2.set_title("Corollary 3.3: excess loss vs bound")
    if main is not None and main.get("epsilon") is not None and main.get("fraction") is not None:
        ax1.plot([main["fraction"]], pos([main["c_epsilon"]]), "*", ms=14, color="tab:red", mec="k",
                 label="pipeline selection (bound)")
        ax1.plot([main["fraction"]], pos([main["gap_observed"]]), "*", ms=14, color="tab:blue", mec="k",
                 label="pipeline selection (observed)")
        ax2.plot([main["fraction"]], [main["erm_bound"]], "*", ms=14, color="tab:red", mec="k")
        ax2.plot([main["fraction"]], [main["excess_loss"]], "*", ms=14, color="tab:blue", mec="k")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    if not pts and main is None:
        ax1.text(0.5, 0.5, "no coreset with a TMD epsilon", transform=ax1.transAxes, ha="center")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    with io.atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return str(Path(out))


def evaluation_positions(sel: dict, ds, selection: str, graphs: str, task, sample: int, seed: int) -> tuple:
    """Where the bound evaluation looks, in pool positions: ``(train_pos, test_pos, subset, n_train, tau,
    tau_source, plan)`` -- the training and test graphs (``sample > 0``: a seeded sample of each,
    :func:`tmdlib.torch.measure.plan_sample`; test graphs without any label dropped), the coreset as positions
    into the training graphs, the weights the bound is stated with (:func:`tmdlib.torch.measure.bound_weights`).

    Raises :class:`~tmdlib.errors.InputError` where a training graph's label is missing and ``task`` does not
    allow it (benchmark mode needs the dataset's label of every training graph)."""
    from tmdlib.torch.measure import bound_weights, plan_sample

    train_pos = io.positions(sel["train_ids"], ds.graph_ids, selection, "train_ids")
    test_pos = io.positions(sel["test_ids"], ds.graph_ids, selection, "test_ids")
    in_train = {int(p): k for k, p in enumerate(train_pos)}
    subset = np.asarray([in_train[int(p)] for p in io.positions(sel["medoids"], ds.graph_ids, selection, "medoids")],
                        dtype=np.int64)
    n_train = int(len(train_pos))
    tau, tau_source = bound_weights(sel["tau"], n_train, sel.get("certificate_tau"))
    plan = plan_sample(n_train, subset, len(test_pos), sample, seed)
    if plan is not None:
        train_pos, subset = train_pos[plan["keep"]], plan["subset"]
        test_pos = test_pos if plan["test_pick"] is None else test_pos[plan["test_pick"]]
    # task type: a benchmark needs every training label, unless the type masks missing ones out of the loss
    if ds.y is None or (not task.allows_missing and np.isnan(ds.y[train_pos]).any()):
        raise InputError(graphs, "the bound evaluation is a benchmark measurement: it needs the dataset's label "
                                 "of every training graph, and some are missing")
    test_pos = test_pos[~np.isnan(ds.y[test_pos].reshape(len(test_pos), -1)).all(axis=1)]
    return train_pos, test_pos, subset, n_train, tau, tau_source, plan


def skip_evaluation(off: dict, graphs: str, metrics_out: str, plot_out: str) -> dict:
    """``evaluate_nodes`` when ``nodes.parquet`` records node subsampling as off (:func:`tasks.io.nodes_off`):
    ``metrics_nodes.json`` says the stage was skipped and why (no number, no MLflow run) and the plot is a notice."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = io.dataset_name(graphs)
    doc = {"skipped": True, "stage": f"evaluate_nodes@{name}", "dataset": name, "node_subsampling": "off",
           "nodes_method": off.get("requested"), "reason": off["reason"], "line": off["line"], "nodes": None}
    fig = plt.figure(figsize=(6, 1.2))
    fig.text(0.5, 0.5, f"{name}: {off['line']}; nothing trained or measured", ha="center", va="center", fontsize=9)
    with io.atomic_path(plot_out) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    io.write_json(metrics_out, io.stamped(doc))
    print(f"{off['line']}: {doc['stage']} skipped (no metrics, no MLflow run)", flush=True)
    return doc


@task(name="write-metrics", persist_result=False)
def write_metrics(path: str, metrics: dict) -> str:
    """Atomic JSON write of ``metrics.json``, with the tmdsub version that made it."""
    io.write_json(path, io.stamped(metrics))
    return path


# ----------------------------------------------------------------------------------------------
# Any registered model: production mode, and benchmark mode without a TMD-Lipschitz constant
# ----------------------------------------------------------------------------------------------
PRODUCTION_EVAL = "the lab's labels only (production): the audit sample estimates the pool"


def _inputs(model, store, pos):
    from tmdlib.models import Inputs

    return Inputs(store.dataset if model.inputs == "graphs" else None,  # a molecule model: SMILES only
                  store.smiles() if model.inputs == "molecules" else None, pos)


@task(name="measure-production", persist_result=False, cache_policy=NO_CACHE)
def production_task(model, store, sel: dict, info: dict, name: str, confidence: float, seed: int) -> dict:
    """``metrics.json`` of production mode (:func:`tmdlib.models.evaluate.production_measurement`): the model's metric
    on the pool estimated on the labelled audit sample, the τ-weighted coreset loss, c·ε against the trained task's
    loss scale, and what is not measurable."""
    from tmdlib.models.evaluate import production_measurement

    from .io import positions, read_labels
    from .labels import task_of
    from .train import selection_labels

    task = task_of(store.task, info.get("labels_meta"))
    labels_csv = info["labels"]
    label_map, _meta = read_labels(labels_csv, None, task)
    ids = store.graph_ids
    # the coreset as trained: partial answers reweighted over the answered medoids (train.json), else the selection's
    trained, trained_tau = info.get("medoids_trained", sel["medoids"]), info.get("tau_trained", sel["tau"])
    med = np.asarray([int(g) for g in trained if int(g) in label_map], dtype=np.int64)
    tau_of = dict(zip((int(g) for g in trained), np.asarray(trained_tau, dtype=np.float64)))
    audit_ids = np.asarray(sel.get("audit_ids") or [], dtype=np.int64)
    answered = np.asarray([int(g) for g in audit_ids if int(g) in label_map], dtype=np.int64)
    core_pos = positions(med, ids, labels_csv, "labelled medoids")
    audit_pos = positions(answered, ids, labels_csv, "labelled audit graphs")
    m = production_measurement(model, _inputs(model, store, core_pos), selection_labels(label_map, med, task, labels_csv),
                               np.asarray([tau_of[int(g)] for g in med]), _inputs(model, store, audit_pos),
                               selection_labels(label_map, answered, task, labels_csv) if len(answered) else
                               np.zeros((0,)), n_pool=len(ids), epsilon=info.get("epsilon", sel.get("epsilon_mean")),
                               confidence=confidence, seed=seed, dataset=name)
    control = _control_arms(model, store, sel, info, label_map, answered, task, labels_csv, confidence, seed)
    est = m["pool_estimate"]
    if not len(audit_ids):
        est["note"] = "no audit sample was requested (labels.audit = 0, or a benchmark selection)"
    elif len(answered) < len(audit_ids):
        est["note"] = f"{len(audit_ids) - len(answered)} of {len(audit_ids)} audit graphs have no label yet"
    budget = info["config"].get("lipschitz_budget")
    return {"dataset": name, "mode": "production", "task": task.to_dict(), "model": info.get("model_name"),
            "store_content_sha256": sel.get("store_content_sha256"), "method": sel.get("method"),
            "fraction": sel.get("fraction"), "k": int(len(sel["medoids"])), "labelled_coreset": int(len(med)),
            "partial_answers": info.get("partial"),
            "n_pool": m["n_pool"], "audit_requested": int(len(audit_ids)), "audit_labelled": int(len(answered)),
            "seed": seed, "labels_for_evaluation": PRODUCTION_EVAL,
            "labels_for_training": info.get("labels_source", "unknown"), "pool_estimate": est,
            "constant_predictor": m["constant_predictor"],
            "coreset_loss_weighted": m["coreset_loss"],
            "test": {"metric": est["metric"], "coreset_model": None, "full_model": None, "n": 0,
                     "note": m["not_measurable"]["test_metric"]},
            "certified": budget is not None, "lipschitz_budget": budget,
            "bound": {**m["bound"], "fraction": sel.get("fraction"), "k": int(len(sel["medoids"]))},
            "not_measurable": m["not_measurable"], "reference": None, "nodes": None, "sweep": [],
            "task_head": model.head.to_dict(), **({"control": control} if control is not None else {})}


def _control_arms(model, store, sel: dict, info: dict, label_map: dict, audit, task, labels_csv: str,
                  confidence: float, seed: int) -> dict | None:
    """The Random control's verdict (:func:`tmdlib.models.evaluate.compare_arms`) when the selection has a control
    arm (``select.control``), None otherwise; molecule models only (a graph model is not retrained here)."""
    from tmdlib.models import resolve_model
    from tmdlib.models.evaluate import compare_arms

    from .io import positions
    from .train import selection_labels

    rounds = sel.get("rounds") or {}
    if not rounds.get("control_ids"):
        return None
    if model.inputs != "molecules":
        return {"verdict": "undecided", "note": f"model {model.name!r} reads graphs: the arms are compared for "
                                                "molecule models only (retraining a GIN twice per evaluation)"}
    lab = lambda ids: np.asarray([int(g) for g in ids if int(g) in label_map], dtype=np.int64)  # noqa: E731
    control, strategy = lab(rounds["control_ids"]), lab(rounds.get("strategy_new_ids") or [])
    this_round = set(rounds["control_ids"]) | set(rounds.get("strategy_new_ids") or [])
    base = lab([g for g in sel["medoids"] if int(g) not in this_round])
    ids = store.graph_ids
    try:
        spec = resolve_model(info.get("model_name") or model.name)
    except (InputError, ValueError) as err:
        return {"verdict": "undecided", "note": f"the arms were not compared: {err}"}
    return compare_arms(lambda: spec.build({}), lambda g: _inputs(model, store, positions(g, ids, labels_csv, "arm")),
                        lambda g: selection_labels(label_map, g, task, labels_csv), base, control, strategy, audit,
                        task, confidence=confidence, seed=seed)


def evaluate_production(fitted, store, sel: dict, info: dict, paths, opts, extra: dict, t0: float) -> dict:
    """Production mode of the evaluate stage (an unlabelled pool, the lab's labels are all there is):
    :func:`production_task` with ``extra`` (depth, weights, device) and the seconds since ``t0`` added, the plot (no
    observed gap without the pool's labels), ``metrics.json``, the verdict's first lines, the MLflow run; returns the
    metrics.  ``paths`` / ``opts``: the stage's files and options (:mod:`tasks.config`, the seed resolved)."""
    import time

    from tmdlib.reporting.verdict import verdict_lines

    name, confidence, seed = paths.dataset, opts.confidence, opts.seed
    plot_out, metrics_out = paths.plot_out, paths.metrics_out
    metrics = production_task(fitted, store, sel, info, name, confidence, seed)
    metrics.update({**extra, "seconds": round(time.perf_counter() - t0, 2)})
    plot_bound_vs_gap([], plot_out, f"{name} ({fitted.head.task.type}): production mode: no observed gap without the "
                      "pool's labels", metrics["bound"] if metrics["bound"].get("c_epsilon") is not None else None)
    write_metrics(metrics_out, metrics)
    for line in verdict_lines(metrics)[:3]:
        print(line)
    if opts.log_mlflow:
        metrics["mlflow"] = log_production(metrics, info, paths.graphs, paths.selection, paths.model,
                                           paths.train_info, metrics_out, plot_out, name, opts.experiment)
    return metrics


def log_production(metrics: dict, info: dict, graphs: str, selection: str, model: str, train_info: str,
                   metrics_out: str, plot_out: str, name: str, experiment: str) -> dict:
    """The production evaluate run in MLflow: the pool estimate and its interval, the coreset loss, c·ε."""
    from .registry import tag_evaluation
    from .tracking import log_run, start_run

    est, b = metrics["pool_estimate"], metrics["bound"]
    params = {"dataset": name, "task": metrics["task"]["type"], "mode": "production", "model": metrics.get("model"),
              "selection.method": metrics.get("method"), "selection.k": metrics["k"],
              "confidence": est["confidence"], "audit_labelled": metrics["audit_labelled"]}
    flat = {f"pool_estimate.{k}": v for k, v in est.items() if isinstance(v, (int, float)) and v is not None}
    const = metrics.get("constant_predictor") or {}
    flat.update({"constant_predictor.value": const.get("value"),
                 "worse_than_constant": None if const.get("worse") is None else float(const["worse"])})
    flat.update({"coreset_loss_weighted": metrics["coreset_loss_weighted"], "c_epsilon": b.get("c_epsilon"),
                 "loss_scale": b.get("loss_scale"), "epsilon": b.get("epsilon")})  # ε: the whole labelled set's
    control = metrics.get("control") or {}
    flat.update({f"control.{k}": control.get(k) for k in ("difference", "low", "high", "control", "strategy", "n",
                                                           "folds", "n_arm", "labels_needed")
                 if isinstance(control.get(k), (int, float))})
    inputs = [graphs, selection, model, train_info]
    # the DVC stage is the run's name: evaluate@NAME, or evaluate_nodes@NAME for the node-subsampled model
    run = start_run("evaluate", params, inputs, experiment, metrics.get("stage") or f"evaluate@{name}",
                    {"labels_for_evaluation": PRODUCTION_EVAL, "task": metrics["task"]["type"], "mode": "production"})
    out = log_run("evaluate", params, {k: v for k, v in flat.items() if v is not None}, inputs,
                  [metrics_out, plot_out], experiment=experiment, run=run)
    logged = (info.get("mlflow") or {}).get("model") or {}
    tag_evaluation(logged, f"pool_{est['metric']}", est.get("value"), run["run_id"])
    return out


@task(name="measure-model", persist_result=False, cache_policy=NO_CACHE)
def measure_model_task(model, store, train_pos, subset, tau, test_pos, epsilon, name: str) -> dict:
    """Benchmark mode for a model without a TMD-Lipschitz constant (:func:`tmdlib.models.evaluate.benchmark_measurement`),
    in the shape :func:`metrics_document` takes."""
    from tmdlib.models.evaluate import benchmark_measurement

    y = store.y
    y = y.reshape(len(y), -1) if model.head.task.num_targets > 1 else y.reshape(len(y), -1)[:, 0]
    m = benchmark_measurement(model, _inputs(model, store, train_pos), y[train_pos], subset, tau,
                              _inputs(model, store, test_pos), y[test_pos], epsilon=epsilon, dataset=name)
    m["bound"]["tau_sum"] = float(np.sum(tau))
    return {**m, "task": model.head.to_dict(), "reference": {"degenerate": None, "epochs": None,
                                                             "note": m["bound"]["corollary_note"]},
            "nodes": None, "sweep": [], "sweep_note": "no sweep for a model without a TMD-Lipschitz constant",
            "epochs": {"full_model": None, "sweep": None}}
