"""Evaluation tasks: the measurement (:func:`tmdlib.torch.measure.measure`), metrics.json, the plot, the MLflow run.

Evaluation needs labels of every training and test graph, which a labelling workflow does not have:
it is a benchmark measurement and reads the dataset's own ``y`` (recorded as
``labels_for_evaluation = "dataset (benchmark mode)"``).  Training of the model under test used
only the imported labels (see :mod:`tasks.train`).  What is written and logged is built in
:mod:`tmdlib.reporting.evaluation`; where the evaluation looks in :func:`tmdlib.torch.measure.evaluation_plan`;
production mode and the control arms in :mod:`tmdlib.models.evaluate`.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from tmdlib.models.policy import selection_labels
from tmdlib.reporting.evaluation import (BENCHMARK_EVAL, PRODUCTION_EVAL, bound_vs_gap_figure, evaluation_run,
                                         notice_figure, production_document, production_run)

from . import io


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


def log_evaluation(metrics: dict, info: dict, paths, store, sel: dict, opts) -> dict:
    """The evaluate run in MLflow (params, flat metrics, the sweep as steps, datasets, the model as an input) and
    the test metric on the registered model version; returns the run's ``{"run_id", ...}``.  ``paths``: the stage's
    files (:class:`flows.config.evaluate.EvaluatePaths`, the matrix as used: None when none was); ``opts`` its options
    (:class:`flows.config.evaluate.EvaluateStageConfig`, its seed resolved)."""
    from .registry import tag_evaluation
    from .tracking import graph_store_dataset, log_datasets, log_run, selection_dataset, start_run

    graphs, selection, model, train_info = paths.graphs, paths.selection, paths.model, paths.train_info
    name, nodes, experiment = paths.dataset, paths.nodes, opts.experiment
    params, flat, steps = evaluation_run(metrics, sel, opts, bool(nodes))
    inputs = [p for p in (graphs, selection, model, train_info, paths.matrix, nodes) if p]
    run = start_run("evaluate", params, inputs, experiment, paths.stage,
                    {"labels_for_evaluation": BENCHMARK_EVAL, "labels_for_training": metrics["labels_for_training"],
                     "task": metrics["task"]["type"]})
    logged = (info.get("mlflow") or {}).get("model") or {}
    log_datasets(run["run_id"], [graph_store_dataset(graphs, store, name), selection_dataset(selection, sel, name)],
                 "evaluation", model_ids=[logged["model_id"]] if logged.get("model_id") else None)
    out = log_run("evaluate", params, flat, inputs, [paths.metrics_out, paths.plot_out], experiment=experiment,
                  step_metrics=steps if metrics["sweep"] else None, run=run)
    # the registered model version of train.json gets its test metric (the scheduled run's champion rule)
    tag_evaluation(logged, metrics["test"]["metric"], metrics["test"]["coreset_model"], run["run_id"])
    return out


def skip_evaluation(off: dict, graphs: str, metrics_out: str, plot_out: str) -> dict:
    """``evaluate_nodes`` when ``nodes.parquet`` records node subsampling as off (:func:`tasks.io.nodes_off`):
    ``metrics_nodes.json`` says the stage was skipped and why (no number, no MLflow run) and the plot is a notice."""
    name = io.dataset_name(graphs)
    doc = {"skipped": True, "stage": f"evaluate_nodes@{name}", "dataset": name, "node_subsampling": "off",
           "nodes_method": off.get("requested"), "reason": off["reason"], "line": off["line"], "nodes": None}
    save_figure(notice_figure(f"{name}: {off['line']}; nothing trained or measured"), plot_out)
    io.write_json(metrics_out, io.stamped(doc))
    print(f"{off['line']}: {doc['stage']} skipped (no metrics, no MLflow run)", flush=True)
    return doc


def save_figure(fig, out: str) -> str:
    """Atomic PNG write of a matplotlib figure (then closed); returns ``out``."""
    import matplotlib.pyplot as plt

    with io.atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return str(Path(out))


def plot_bound_vs_gap(rows: list[dict], out: str, title: str, main: dict | None = None) -> str:
    """The bound-vs-gap figure (:func:`tmdlib.reporting.evaluation.bound_vs_gap_figure`) written to ``out``."""
    return save_figure(bound_vs_gap_figure(rows, title, main), out)


def evaluation_positions(sel: dict, ds, selection: str, graphs: str, task, sample: int, seed: int) -> tuple:
    """:func:`tmdlib.torch.measure.evaluation_plan` of the selection's training graphs, test graphs and medoids
    (graph ids in ``selection``, found in the store ``ds``)."""
    from tmdlib.torch.measure import evaluation_plan

    train_pos = io.positions(sel["train_ids"], ds.graph_ids, selection, "train_ids")
    test_pos = io.positions(sel["test_ids"], ds.graph_ids, selection, "test_ids")
    med_pos = io.positions(sel["medoids"], ds.graph_ids, selection, "medoids")
    return evaluation_plan(train_pos, test_pos, med_pos, sel, ds.y, task, sample, seed, graphs)


@task(name="write-metrics", persist_result=False)
def write_metrics(path: str, metrics: dict) -> str:
    """Atomic JSON write of ``metrics.json``, with the tmdsub version that made it."""
    io.write_json(path, io.stamped(metrics))
    return path


# ----------------------------------------------------------------------------------------------
# Any registered model: production mode, and benchmark mode without a TMD-Lipschitz constant
# ----------------------------------------------------------------------------------------------
def _inputs(model, store, pos):
    from tmdlib.models import Inputs

    return Inputs(store.dataset if model.inputs == "graphs" else None,  # a molecule model: SMILES only
                  store.smiles() if model.inputs == "molecules" else None, pos)


@task(name="measure-production", persist_result=False, cache_policy=NO_CACHE)
def production_task(model, store, sel: dict, info: dict, name: str, confidence: float, seed: int) -> dict:
    """``metrics.json`` of production mode (:func:`tmdlib.models.evaluate.production_measurement`): the model's metric
    on the pool estimated on the labelled audit sample, the τ-weighted coreset loss, c·ε against the trained task's
    loss scale, and what is not measurable."""
    from tmdlib.models.evaluate import control_arms, production_measurement, production_members

    from .io import positions, read_labels
    from .labels import task_of

    task = task_of(store.task, info.get("labels_meta"))
    labels_csv = info["labels"]
    label_map, _meta = read_labels(labels_csv, None, task)
    ids = store.graph_ids
    med, tau, answered = production_members(info, sel, label_map)  # the coreset as trained, the labelled audit
    inputs_of = lambda g, what: _inputs(model, store, positions(g, ids, labels_csv, what))  # noqa: E731
    labels_of = lambda g: selection_labels(label_map, g, task, labels_csv)  # noqa: E731
    m = production_measurement(model, inputs_of(med, "labelled medoids"), labels_of(med), tau,
                               inputs_of(answered, "labelled audit graphs"),
                               labels_of(answered) if len(answered) else np.zeros((0,)), n_pool=len(ids),
                               epsilon=info.get("epsilon", sel.get("epsilon_mean")), confidence=confidence,
                               seed=seed, dataset=name)
    control = control_arms(model, info.get("model_name") or model.name, sel, label_map, answered, task,
                           lambda g: inputs_of(g, "arm"), labels_of, confidence=confidence, seed=seed)
    return production_document(m, sel, info, model, task, name=name, seed=seed, n_labelled=len(med),
                               audit=(len(sel.get("audit_ids") or []), len(answered)), control=control)


def evaluate_production(fitted, store, sel: dict, info: dict, paths, opts, extra: dict, t0: float) -> dict:
    """Production mode of the evaluate stage (an unlabelled pool, the lab's labels are all there is):
    :func:`production_task` with ``extra`` (depth, weights, device) and the seconds since ``t0`` added, the plot (no
    observed gap without the pool's labels), ``metrics.json``, the verdict's first lines, the MLflow run; returns the
    metrics.  ``paths`` / ``opts``: the stage's files and options (the stage's config, the seed resolved)."""
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

    est = metrics["pool_estimate"]
    params, flat = production_run(metrics, name)
    inputs = [graphs, selection, model, train_info]
    # the DVC stage is the run's name: evaluate@NAME, or evaluate_nodes@NAME for the node-subsampled model
    run = start_run("evaluate", params, inputs, experiment, metrics.get("stage") or f"evaluate@{name}",
                    {"labels_for_evaluation": PRODUCTION_EVAL, "task": metrics["task"]["type"], "mode": "production"})
    out = log_run("evaluate", params, flat, inputs, [metrics_out, plot_out], experiment=experiment, run=run)
    logged = (info.get("mlflow") or {}).get("model") or {}
    tag_evaluation(logged, f"pool_{est['metric']}", est.get("value"), run["run_id"])
    return out


@task(name="measure-model", persist_result=False, cache_policy=NO_CACHE)
def measure_model_task(model, store, train_pos, subset, tau, test_pos, epsilon, name: str) -> dict:
    """Benchmark mode for a model without a TMD-Lipschitz constant
    (:func:`tmdlib.models.evaluate.measure_without_constant`)."""
    from tmdlib.models.evaluate import measure_without_constant

    return measure_without_constant(model, _inputs(model, store, train_pos), _inputs(model, store, test_pos), store.y,
                                    subset, tau, epsilon=epsilon, dataset=name)
