"""Evaluate flow: the test metrics of the dataset's task, and the loss guarantees measured next to their bounds.

Run as ``tmdsub evaluate ...`` (:func:`evaluate_command`).  Wiring only: the measurement is
:func:`tmdlib.torch.measure.measure` (Lemma 3.2, Corollaries 3.3 and 4.1, the reference check, the verdict's loss
scale, the bound-vs-gap sweep), called through :func:`tasks.evaluate.measure_task`.  Evaluation labels are the
dataset's own (benchmark mode).  Everything is logged to MLflow from this process.
"""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Optional

import numpy as np
import typer
from prefect import flow

from flows.config.evaluate import EvaluatePaths, EvaluateStageConfig
from tasks.evaluate import (evaluate_production, evaluation_positions, log_evaluation, measure_model_task, measure_task,
                            plot_bound_vs_gap, skip_evaluation, tmd_setting, write_metrics)
from tmdlib.datasets._identity import check_same_store
from tasks.graphs import check_matrix_meta, load_matrix, matrix_path, open_store
from tasks.io import node_subsets_for, nodes_off, read_json, read_nodes, read_selection
from tasks.labels import task_of
from tasks.train import load_model, set_torch_threads
from tmdlib import InputError
from tmdlib.metrics import headline
from tmdlib.reporting.evaluation import metrics_document
from tmdlib.reporting.verdict import verdict_lines
from tmdlib.torch.measure import matrix_checks


@flow(name="evaluate", log_prints=True)
def evaluate_flow(graphs: str, selection: str, model: str, train_info: str, metrics_out: str, plot_out: str,
                  matrix: str | None = None, nodes: str | None = None, tmd_meta: str | None = None,
                  cfg: EvaluateStageConfig | None = None) -> dict:
    """Measure the guarantees of the trained coreset model; returns ``metrics.json``'s content (+ ``mlflow``).
    ``cfg`` (:class:`flows.config.evaluate.EvaluateStageConfig`, checked when built; None: the defaults) holds the options.
    ``cfg.sample > 0`` (pools too large to score whole, e.g. MOSES): the coreset graphs are scored exactly, the full
    training loss is estimated on a seeded uniform sample (with its standard error), the reference is trained on
    that sample, the test set is sampled, and the matrix checks and the sweep are skipped.  Production mode (the lab's
    labels): the model's metric on the pool estimated on the audit sample with a ``cfg.confidence`` interval, the
    τ-weighted coreset loss and c·ε against the trained task's loss scale; nothing that needs labels the team does not
    have (:mod:`tmdlib.models.evaluate`).  ``nodes`` recording node subsampling off: skipped, saying so
    (:func:`tasks.evaluate.skip_evaluation`)."""
    opts = cfg if cfg is not None else EvaluateStageConfig()
    paths = EvaluatePaths(graphs, selection, model, train_info, metrics_out, plot_out, matrix, nodes, tmd_meta)
    if nodes and (off := nodes_off(nodes)):
        return skip_evaluation(off, graphs, metrics_out, plot_out)
    t0 = time.perf_counter()
    set_torch_threads(opts.torch_threads)
    info = read_json(train_info, "train info")
    if "config" not in info:
        raise InputError(train_info, "not a train.json (needs 'config')")
    cfg = dict(info["config"], device=opts.device)
    opts = replace(opts, seed=int(cfg.get("seed", 0) if opts.seed is None else opts.seed))  # train.json's: default
    depth, weights, problems, meta = tmd_setting(tmd_meta, int(cfg.get("layers", 3)),
                                                 (info.get("lipschitz") or {}).get("weights", "pascal"))
    store = open_store(graphs)
    name, sel = paths.dataset, read_selection(selection)  # the graphs are loaded in benchmark mode only
    store_hash = store.content_hash()  # the selection, the model and the matrix must all belong to this store
    check_same_store(selection, sel, graphs, store_hash, "selection")
    check_same_store(train_info, info, graphs, store_hash, "model")
    if tmd_meta:
        check_same_store(tmd_meta, meta, graphs, store_hash, "TMD matrix")
    fitted = load_model(model, info)
    head = fitted.head
    if fitted.certificate() is None:  # a model without a TMD-Lipschitz constant: no c, no depth condition
        problems = []
    trained_for = task_of(store.task, info.get("labels_meta"))
    if trained_for != head.task:
        raise InputError(train_info, f"the model was trained for a {head.task.describe()} task, the labels are "
                                     f"{trained_for.describe()}")
    if not store.labelled:  # production: an unlabelled pool, the lab's labels are all there is
        return evaluate_production(fitted, store, sel, info, paths, opts,
                                   {"depth": depth, "weights": weights, "device": opts.device, "stage": paths.stage},
                                   t0)
    ds = store.dataset
    train_pos, test_pos, subset, n_train, tau, tau_source, plan = evaluation_positions(
        sel, ds, selection, graphs, head.task, opts.sample, opts.seed)
    matrix = matrix_path(matrix) if plan is None else None  # None: scalable engine or sampled pool
    if matrix:
        check_matrix_meta(matrix, graphs, store_hash, depth, weights, trust=opts.trust_matrix)
    paths = replace(paths, matrix=matrix)
    D_train = load_matrix(matrix, len(ds))[np.ix_(train_pos, train_pos)] if matrix else None
    checks = matrix_checks(D_train, subset, tau) if D_train is not None else {}
    epsilon = sel["epsilon_mean"] if sel["epsilon_mean"] is not None else checks.get("epsilon")
    node_sets = node_subsets_for(read_nodes(nodes), sel["medoids"], nodes) if nodes else None
    if fitted.certificate() is None:  # no TMD-Lipschitz constant: test metrics and the observed gap, no bound
        m = measure_model_task(fitted, store, train_pos, subset, tau, test_pos, epsilon, name)
    else:
        m = measure_task(ds, fitted.model, head, cfg, train_pos=train_pos, test_pos=test_pos,
                         subset=subset, tau=tau, epsilon=epsilon, assignment=checks.get("assignment"),
                         D_train=D_train, sample_idx=None if plan is None else plan["sample_idx"], n_train=n_train,
                         weights=weights, full_epochs=opts.full_epochs, fractions=list(opts.fractions),
                         sweep_epochs=opts.sweep_epochs, seed=opts.seed, nodes=node_sets,
                         metric=headline(head.task.type, name))
    metrics = metrics_document(m, name, sel, info, checks, (depth, weights, problems), (tau_source, plan, n_train),
                               opts, time.perf_counter() - t0)
    c = m["bound"].get("c")
    plot_bound_vs_gap(m["sweep"], plot_out, f"{name} ({head.task.type}): {sel.get('method')} selection, "
                      + (f"c = {c:.3g}" if c is not None else f"{fitted.name}: no TMD constant")
                      + f", TMD depth {depth}; sweep models {opts.sweep_epochs} epochs, labels: dataset (benchmark)",
                      m["bound"] if m["bound"].get("epsilon") is not None and c is not None else None)
    write_metrics(metrics_out, metrics)
    print(verdict_lines(metrics)[0])
    if opts.log_mlflow:
        metrics["mlflow"] = log_evaluation(metrics, info, paths, store, sel, opts)
    return metrics


def evaluate_command(
    graphs: Path = typer.Option(..., "--graphs", help=EvaluatePaths.HELP["graphs"]),
    selection: Path = typer.Option(..., "--selection", help=EvaluatePaths.HELP["selection"]),
    model: Path = typer.Option(..., "--model", help=EvaluatePaths.HELP["model"]),
    train_info: Path = typer.Option(..., "--train-info", help=EvaluatePaths.HELP["train_info"]),
    metrics_out: Path = typer.Option(..., "--metrics-out", help=EvaluatePaths.HELP["metrics_out"]),
    plot_out: Path = typer.Option(..., "--plot-out", help=EvaluatePaths.HELP["plot_out"]),
    matrix: Optional[Path] = typer.Option(None, "--matrix", help=EvaluatePaths.HELP["matrix"]),
    tmd_meta: Optional[Path] = typer.Option(None, "--tmd-meta", help=EvaluatePaths.HELP["tmd_meta"]),
    nodes: Optional[Path] = typer.Option(None, "--nodes", help=EvaluatePaths.HELP["nodes"]),
    fractions: str = typer.Option("", "--fractions", help=EvaluateStageConfig.HELP["fractions"]),
    sweep_epochs: int = typer.Option(20, "--sweep-epochs", help=EvaluateStageConfig.HELP["sweep_epochs"]),
    full_epochs: Optional[int] = typer.Option(None, "--full-epochs", help=EvaluateStageConfig.HELP["full_epochs"]),
    seed: Optional[int] = typer.Option(None, "--seed", help=EvaluateStageConfig.HELP["seed"]),
    device: str = typer.Option("auto", "--device", help=EvaluateStageConfig.HELP["device"]),
    torch_threads: int = typer.Option(1, "--torch-threads", help=EvaluateStageConfig.HELP["torch_threads"]),
    sample: int = typer.Option(0, "--sample", min=0, help=EvaluateStageConfig.HELP["sample"]),
    experiment: str = typer.Option("tmdsub", "--experiment", help=EvaluateStageConfig.HELP["experiment"]),
    mlflow: bool = typer.Option(True, "--mlflow/--no-mlflow", help=EvaluateStageConfig.HELP["log_mlflow"]),
    trust_matrix: bool = typer.Option(False, "--trust-matrix", help=EvaluateStageConfig.HELP["trust_matrix"]),
) -> None:
    """Test metrics of the dataset's task and the loss guarantees (Lemma 3.2, Cor. 3.3/4.1): observed gaps next to their bounds."""
    try:
        options = dict(locals())  # the command's options, as typer filled them
        m = evaluate_flow(**vars(EvaluatePaths.from_options(options)), cfg=EvaluateStageConfig.from_options(options))
    except InputError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2)
    if m.get("skipped"):  # node subsampling off: evaluate_nodes wrote what says so
        typer.echo(f"{m['line']}: {m['stage']} skipped -> {metrics_out}, {plot_out}")
        return
    b = m["bound"]
    for line in verdict_lines(m)[:1 if m.get("mode") != "production" else 3]:
        typer.echo(line)
    if m.get("mode") == "production":
        loss = m["coreset_loss_weighted"]
        typer.echo(f"tau-weighted coreset loss {'n/a' if loss is None else format(loss, '.4g')}; not measurable "
                   "without the pool's "
                   "labels: the test metric, the observed gap, a full-data reference")
    else:
        typer.echo(f"test {m['test']['metric']}: {m['test']['coreset_model']} (full-data model {m['test']['full_model']})")
        fmt = lambda v: "n/a" if v is None else f"{v:.4g}"  # noqa: E731
        typer.echo(f"Lemma 3.2: gap {fmt(b['gap_observed'])} vs c*eps {b.get('c_epsilon')}; "
                   f"Cor 3.3: excess {fmt(b.get('excess_loss'))} vs 2c*eps {b.get('erm_bound')}")
    if m.get("certified") and m.get("mode") != "production":
        typer.echo(f"certified: budget {m['lipschitz_budget']}, c = {b['c']:.4g} (measured {b['c_measured']:.4g}); "
                   f"label-consistent gap {b.get('gap_label_consistent')} <= c*eps; "
                   f"with labels: gap <= {b.get('bound_with_labels')}")
    typer.echo(f"metrics -> {metrics_out}, plot -> {plot_out}")
    if "mlflow" in m:
        typer.echo(f"mlflow run {m['mlflow']['run_id']} at {m['mlflow']['tracking_uri']}")
