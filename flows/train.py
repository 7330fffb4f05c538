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
from tmdlib.datasets.identity import STORE_HASH_KEY, check_same_store
from tasks.graphs import open_store
from tasks.io import (dataset_name, node_subsets_for, nodes_off, positions, read_labels, read_labels_meta,
                      read_nodes, read_selection)
from tasks.labels import task_of
from tasks.tracking import (LiveMetric, graph_store_dataset, labels_dataset, log_datasets, log_run, open_run,
                            selection_dataset)
from tasks.train import (fit_task, log_trained_model, save_model, set_torch_threads, skip_training, train_model_spec,
                         write_model)
from tmdlib import InputError
from tmdlib.models import Inputs, model_names
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
    graphs: Path = typer.Option(..., "--graphs", help="Graph-store Parquet (data/graphs/<DATASET>.parquet)."),
    selection: Path = typer.Option(..., "--selection", help="selection.json (train/test ids, medoids, tau, epsilon)."),
    labels: Path = typer.Option(..., "--labels", help="labels.csv (graph_id,y or one column per target): the ONLY labels training reads."),
    model_out: Path = typer.Option(..., "--model-out", help="Output state dict (model.pt)."),
    info_out: Path = typer.Option(..., "--info-out", help="Output train.json (config, device, losses, c, per-layer Phi)."),
    labels_meta: Optional[Path] = typer.Option(None, "--labels-meta", help="labels.json (default: next to --labels)."),
    nodes: Optional[Path] = typer.Option(None, "--nodes", help="nodes.parquet: train on the induced subgraphs G[S]."),
    epochs: int = typer.Option(100, "--epochs", help="Training epochs."),
    hidden: Optional[int] = typer.Option(None, "--hidden", help="Hidden width (default 128 TU, 256 OGB)."),
    layers: int = typer.Option(3, "--layers", help="GIN layers (TMD depth = layers + 1)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Batch size (default 16 TU, 64 OGB)."),
    lr: str = typer.Option("auto", "--lr", help="Adam learning rate; auto = the recipe's."),
    seed: int = typer.Option(0, "--seed", help="Seed of the initialisation and the batch order."),
    device: str = typer.Option("auto", "--device", help="auto (cuda when present) | cpu | cuda[:N]."),
    pool: str = typer.Option("add", "--pool", help="Readout pooling: add (the guarantee needs it) | mean."),
    eta: float = typer.Option(1.0, "--eta", help="GIN neighbour weight eta (1 pairs with Pascal TMD weights)."),
    bias: bool = typer.Option(False, "--bias/--no-bias", help="Biases in the GIN MLPs (off: phi(0)=0, needed by the bound)."),
    weights: str = typer.Option("pascal", "--weights", help="TMD level weights the constant c is stated for."),
    lipschitz_budget: str = typer.Option("none", "--lipschitz-budget", help="Certified mode: spectral-norm budget of every weight matrix (projected after each step), c = budget^(2*layers+1); 0 or none = unconstrained."),
    lipschitz_target: float = typer.Option(0.0, "--lipschitz-target", help="Certified mode: the certificate c*eps to aim for, in nats (c = target / the selection's epsilon_mean); overrides --lipschitz-budget; 0 = off."),
    lipschitz_mode: str = typer.Option("ball", "--lipschitz-mode", help="Certified architecture: ball (ReLU GIN, budget per matrix) | orthogonal (MaxMin GIN, orthonormal matrices, the budget is c itself)."),
    torch_threads: int = typer.Option(1, "--torch-threads", help="CPU threads of torch (1: fastest for these small models, bit-reproducible)."),
    experiment: str = typer.Option("tmdsub", "--experiment", help="MLflow experiment name."),
    mlflow: bool = typer.Option(True, "--mlflow/--no-mlflow", help="Log the run to MLflow."),
    loss: str = typer.Option("auto", "--loss", help="auto (the task's: bce binary / multi-task, ce multi-class, huber regression) | huber | l1 | mse (regression; mse is uncertified)."),
    huber_delta: float = typer.Option(1.0, "--huber-delta", help="Huber's delta in standard deviations of the target (the loss's Lipschitz constant M)."),
    model: str = typer.Option("auto", "--model", help=f"A registered model ({', '.join(model_names())}; `tmdsub models` lists them) or package.module:factory returning a scikit-learn estimator; auto = the measured default: svm for molecule regression, rf for molecule classification, else certified-gin when a Lipschitz budget/target is set, else gin."),
    recipe: str = typer.Option("auto", "--recipe", help="GIN training recipe: auto (measured: default for the GIN, paper-b2 for the certified GIN) | paper-b2 (Adam lr 0.01, batch 16 TU / 64 OGB) | default (lr 0.001, batch 64)."),
    weighting: str = typer.Option("auto", "--weighting", help="auto (none on a pool without labels, measured on the pool benchmark; tau in benchmark mode) | tau (cluster sizes: Corollary 3.3) | none (unit weights; Lemma 3.2 still certifies the tau-weighted coreset loss)."),
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
