"""Train flow: a registered model (:mod:`tmdlib.models`) on the selected (τ-weighted) graphs with the imported labels
only, for the dataset's task.

Run as ``tmdsub train ...`` (:func:`train_command`).  Wiring only: the model is found in the registry
(``--model``: ``gin``, ``certified-gin``, ``rf``, ``svm``, ``gbm``, or a user's ``package.module:factory``) and
fitted through :func:`tasks.train.fit_task`.  Outputs ``model.pt`` (the model's arrays as plain tensors) and
``train.json`` (the model's config, task and loss, target standardisation, device, per-epoch losses, the stability
constant c when the model has one, alive units, the MLflow run and model); the run is logged to MLflow as
``train@<DATASET>`` (``train_nodes@<DATASET>`` with ``--nodes``), a GIN registered as ``tmdsub-<DATASET>``.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from prefect import flow

from flows.config.train import TrainPaths, TrainStageConfig
from tmdlib.datasets._identity import STORE_HASH_KEY, check_same_store
from tasks.graphs import open_store
from tasks.io import (dataset_name, node_subsets_for, nodes_off, positions, read_labels, read_labels_meta,
                      read_nodes, read_selection)
from tasks.labels import task_of
from tasks.tracking import (LiveMetric, graph_store_dataset, labels_dataset, log_datasets, log_run, open_run,
                            selection_dataset)
from tasks.train import (fit_task, log_trained_model, save_model, set_torch_threads, skip_training, train_model_spec,
                         write_model)
from tmdlib import InputError
from tmdlib.models import Inputs
from tmdlib.models.policy import certified_setting, recipe_for, selection_labels
from tmdlib.models.records import (collapse_warning, partial_answers_line, train_info, train_params, train_record,
                                   train_summary)
from tmdlib.select.answered import answered_selection, training_weights
from tmdlib.torch.options import gin_options, resolve_config, target_budget


@flow(name="train", log_prints=True)
def train_flow(graphs: str, selection: str, labels: str, model_out: str, info_out: str,
               labels_meta: str | None = None, nodes: str | None = None, cfg: TrainStageConfig | None = None) -> dict:
    """Train the model ``cfg.model`` (:mod:`tmdlib.models`: a registered name or ``package.module:factory``) on the
    coreset graphs, or on their node-subsampled subgraphs (``nodes``; skipped when it records node subsampling off:
    :func:`tasks.train.skip_training`); returns ``train.json``'s content.  ``cfg`` (:class:`flows.config.train.TrainStageConfig`,
    checked when built; None: the defaults) holds the options: GIN options (``recipe``, ``epochs``, ``lr`` ...;
    ``lipschitz_*`` for the certified GIN: a target sets c = target / the selection's ε) are ignored by the other
    models; ``weighting``: ``tau`` (Corollary 3.3), ``none`` or ``auto``
    (:func:`tmdlib.select.rounds.default_weighting`: none in production, tau in benchmark mode)."""
    opts = cfg if cfg is not None else TrainStageConfig()
    paths = TrainPaths(graphs, selection, labels, model_out, info_out, labels_meta, nodes)
    if nodes and (off := nodes_off(nodes)):  # node subsampling is off: outputs that say so, nothing trained
        return skip_training(off, graphs, model_out, info_out)
    set_torch_threads(opts.torch_threads)
    name, target = paths.dataset, opts.target
    store = open_store(graphs)
    sel = read_selection(selection)
    check_same_store(selection, sel, graphs, store.content_hash, "selection")  # before any label is read
    task = task_of(store.task, read_labels_meta(labels, labels_meta))  # the labels' task (an unlabelled pool's)
    spec = train_model_spec(opts.model, opts.lipschitz_budget, opts.lipschitz_target, store, task, nodes,
                            len(sel["medoids"]))
    graph_model = spec.takes_recipe  # the GIN's options (the registry says which models take them)
    budget, mode = certified_setting(spec, opts.lipschitz_budget, opts.lipschitz_mode, target)
    recipe = recipe_for(spec.name, opts.recipe)
    gin = resolve_config(name, opts, budget, mode, recipe=recipe) if graph_model else {"seed": int(opts.seed)}
    ds = store.dataset if spec.inputs == "graphs" else None  # a molecule model reads SMILES only
    label_map, label_meta = read_labels(labels, labels_meta, task)
    spec.check_task(task.type)
    store_hash = store.content_hash()  # the labels must belong to this store too
    check_same_store(labels_meta or str(Path(labels).with_suffix(".json")), label_meta, graphs, store_hash, "label set")
    answered = answered_selection(sel, label_map, store, opts.layers + 1, opts.weights, labels)
    med_ids, sel_tau, epsilon, partial = answered
    if partial:
        print(partial_answers_line(partial), flush=True)
    if target is not None and graph_model:  # the budget that makes c·ε = target for this selection's ε
        gin = resolve_config(name, opts, target_budget(target, epsilon, selection, opts.layers, opts.eta, opts.weights,
                                                       mode), mode, recipe=recipe)
    pos = positions(med_ids, store.graph_ids, selection, "medoids")
    y = selection_labels(label_map, med_ids, task, labels)
    subsets, node_eps = node_subsets_for(read_nodes(nodes), med_ids, nodes) if nodes else (None, None)
    source = label_meta.get("source", "unknown")
    tau, weighting = training_weights(sel_tau, opts.weighting, sel)
    params = train_params(gin, opts, paths, task, spec, weighting, recipe if graph_model else None, sel, len(med_ids),
                          label_meta)
    inputs = [p for p in (graphs, selection, labels, nodes) if p]
    # the run exists before training (the loss is logged as it goes) and before train.json names it
    with open_run("train", params, inputs, opts.experiment, enabled=opts.log_mlflow, run_name=paths.stage,
                  extra_tags={"labels_source": source, "task": task.type, "model": spec.name}) as run:
        live = None
        if run:
            log_datasets(run["run_id"], [graph_store_dataset(graphs, store, name),
                                         labels_dataset(labels, label_map, label_meta, name),
                                         selection_dataset(selection, sel, name)], "training")
            if graph_model:
                live = LiveMetric(run["run_id"], "train_loss", last_step=gin["epochs"] - 1)
        options = gin_options(gin, opts.loss, opts.huber_delta, opts.weights, name, recipe, live) if graph_model else {}
        X = Inputs(ds, store.smiles() if spec.inputs == "molecules" else None, pos, subsets)
        fitted = fit_task(spec, options, X, y, tau, task)
        if live:
            live.flush()
        record, metrics = train_record(fitted, gin, sel, tau, opts.weights, target, node_eps)
        info = train_info(paths, opts, (label_map, label_meta), sel, answered, weighting, {STORE_HASH_KEY: store_hash},
                          record)
        info["model_state"] = save_model(fitted, model_out)  # model.pt first: the MLflow model version names its sha256
        if run:
            log_trained_model(run, fitted, info, paths, task, spec, store, pos, graph_model)
        info = write_model(None, model_out, info_out, info)  # model.pt is written above
        print(train_summary(name, task, info, fitted))
        warning = collapse_warning(info, gin.get("lr"))
        if warning:
            print(warning, file=sys.stderr)
        if run:
            log_run("train", params, metrics, inputs, [info_out], experiment=opts.experiment, run=run)
    return info


def train_command(
    graphs: Path = typer.Option(..., "--graphs", help=TrainPaths.HELP["graphs"]),
    selection: Path = typer.Option(..., "--selection", help=TrainPaths.HELP["selection"]),
    labels: Path = typer.Option(..., "--labels", help=TrainPaths.HELP["labels"]),
    model_out: Path = typer.Option(..., "--model-out", help=TrainPaths.HELP["model_out"]),
    info_out: Path = typer.Option(..., "--info-out", help=TrainPaths.HELP["info_out"]),
    labels_meta: Optional[Path] = typer.Option(None, "--labels-meta", help=TrainPaths.HELP["labels_meta"]),
    nodes: Optional[Path] = typer.Option(None, "--nodes", help=TrainPaths.HELP["nodes"]),
    epochs: int = typer.Option(100, "--epochs", help=TrainStageConfig.HELP["epochs"]),
    hidden: Optional[int] = typer.Option(None, "--hidden", help=TrainStageConfig.HELP["hidden"]),
    layers: int = typer.Option(3, "--layers", help=TrainStageConfig.HELP["layers"]),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help=TrainStageConfig.HELP["batch_size"]),
    lr: str = typer.Option("auto", "--lr", help=TrainStageConfig.HELP["lr"]),
    seed: int = typer.Option(0, "--seed", help=TrainStageConfig.HELP["seed"]),
    device: str = typer.Option("auto", "--device", help=TrainStageConfig.HELP["device"]),
    pool: str = typer.Option("add", "--pool", help=TrainStageConfig.HELP["pool"]),
    eta: float = typer.Option(1.0, "--eta", help=TrainStageConfig.HELP["eta"]),
    bias: bool = typer.Option(False, "--bias/--no-bias", help=TrainStageConfig.HELP["bias"]),
    weights: str = typer.Option("pascal", "--weights", help=TrainStageConfig.HELP["weights"]),
    lipschitz_budget: str = typer.Option("none", "--lipschitz-budget", help=TrainStageConfig.HELP["lipschitz_budget"]),
    lipschitz_target: float = typer.Option(0.0, "--lipschitz-target", help=TrainStageConfig.HELP["lipschitz_target"]),
    lipschitz_mode: str = typer.Option("ball", "--lipschitz-mode", help=TrainStageConfig.HELP["lipschitz_mode"]),
    torch_threads: int = typer.Option(1, "--torch-threads", help=TrainStageConfig.HELP["torch_threads"]),
    experiment: str = typer.Option("tmdsub", "--experiment", help=TrainStageConfig.HELP["experiment"]),
    mlflow: bool = typer.Option(True, "--mlflow/--no-mlflow", help=TrainStageConfig.HELP["log_mlflow"]),
    loss: str = typer.Option("auto", "--loss", help=TrainStageConfig.HELP["loss"]),
    huber_delta: float = typer.Option(1.0, "--huber-delta", help=TrainStageConfig.HELP["huber_delta"]),
    model: str = typer.Option("auto", "--model", help=TrainStageConfig.HELP["model"]),
    recipe: str = typer.Option("auto", "--recipe", help=TrainStageConfig.HELP["recipe"]),
    weighting: str = typer.Option("auto", "--weighting", help=TrainStageConfig.HELP["weighting"]),
) -> None:
    """Train a model on the selected graphs (tau-weighted loss of the dataset's task; --model picks it)."""
    try:
        options = dict(locals())  # the command's options, as typer filled them
        info = train_flow(**vars(TrainPaths.from_options(options)), cfg=TrainStageConfig.from_options(options))
    except InputError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2)
    if info.get("skipped"):  # node subsampling off: train_nodes wrote what says so
        typer.echo(f"{info['line']}: {info['stage']} skipped, nothing trained -> {model_out}, {info_out}")
        return
    c = info["lipschitz"]["c"]
    typer.echo(f"model {info['model_name']} -> {model_out}, info -> {info_out} ("
               + (f"c = {c:.4g}{' certified' if info.get('certified') else ''}, " if c is not None else "")
               + f"device {info['device']})")
    if "mlflow" in info:
        typer.echo(f"mlflow run {info['mlflow']['run_id']} at {info['mlflow']['tracking_uri']}")
