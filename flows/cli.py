"""The ``tmdsub`` command line.

One convention with one exception.  A command is a function here that checks its options and calls its flow
(``ingest``, ``select``, ``labels import``, ``predict``, ...).  The four stage commands whose options are the flow's
own long parameter lists -- ``train``, ``evaluate``, ``audit``, ``experiment`` -- are ``*_command`` functions beside
their flows (``flows/train.py``, ...), so an option and the parameter it fills change in one file; they are
registered here by :func:`_register_stage_commands`, and a new command of that kind is registered there too.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

import flows  # noqa: F401  (environment defaults before prefect is imported)
from flows.config import one_of
from flows.config.weights import checked_weights
from flows.config.ingest import IngestPaths, IngestStageConfig
from flows.config.nodes import NodesPaths, NodesStageConfig
from flows.config.predict import PredictPaths, PredictStageConfig
from flows.config.select import SelectPaths, SelectStageConfig
from flows.config.tmd import TmdPaths, TmdStageConfig

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Provable subsampling of graph datasets for GNN training (Tree Mover's Distance).")


def _fail(err: Exception | str, code: int = 2) -> None:
    """Print one ``error:`` line (no traceback) and exit with ``code`` (2: bad input)."""
    text = str(err) or type(err).__name__
    typer.echo(f"error: {text}", err=True)
    raise typer.Exit(code)


DATA = Path("data")  # default layout for direct CLI use; dvc.yaml passes every path explicitly


def _ledger(dataset: str) -> Path:
    """Default label ledger of a dataset: every label paid for so far."""
    return DATA / "labelled" / f"{dataset}.csv"


def _store(dataset: str, graphs: Optional[Path]) -> Path:
    """Check the dataset name (no escaping the workspace) and resolve its graph store."""
    from tmdlib.datasets import check_dataset_name

    check_dataset_name(dataset)
    return graphs or DATA / "graphs" / f"{dataset}.parquet"


def _workers(value: str, shown: bool = True) -> int:
    """``--workers``: auto (the cores this process may use) or a number; prints the ``workers:`` line first."""
    from tasks.cpus import workers_line

    n, line = workers_line(value)
    if shown:
        typer.echo(line)
    return n


@app.command()
def ingest(
    dataset: Optional[str] = typer.Argument(None, help=IngestPaths.HELP["dataset"]),
    source: Optional[str] = typer.Option(None, "--source", help=IngestPaths.HELP["source"]),
    tu_dir: Optional[Path] = typer.Option(None, "--tu-dir", help=IngestPaths.HELP["tu_dir"]),
    smiles_csv: Optional[Path] = typer.Option(None, "--smiles-csv", help=IngestPaths.HELP["smiles_csv"]),
    parquet: Optional[Path] = typer.Option(None, "--parquet", help=IngestPaths.HELP["parquet"]),
    name: Optional[str] = typer.Option(None, "--name", help=IngestPaths.HELP["name"]),
    raw_root: Path = typer.Option(DATA / "raw", "--raw-root", help=IngestPaths.HELP["raw_root"]),
    out: Optional[Path] = typer.Option(None, "--out", help=IngestPaths.HELP["out"]),
    features: str = typer.Option("onehot", "--features", help=IngestStageConfig.HELP["features"]),
    smiles_column: Optional[str] = typer.Option(None, "--smiles-column", help=IngestStageConfig.HELP["smiles_column"]),
    label_column: Optional[list[str]] = typer.Option(None, "--label-column", help=IngestStageConfig.HELP["label_column"]),
    split_column: Optional[str] = typer.Option(None, "--split-column", help=IngestStageConfig.HELP["split_column"]),
    keep_column: Optional[list[str]] = typer.Option(None, "--keep-column", help=IngestStageConfig.HELP["keep_column"]),
    task: str = typer.Option("auto", "--task", help=IngestStageConfig.HELP["task"]),
    params: Optional[Path] = typer.Option(None, "--params", help=IngestStageConfig.HELP["params"]),
    append_dir: Optional[Path] = typer.Option(None, "--append-dir", help=IngestPaths.HELP["append_dir"]),
    workers: str = typer.Option("auto", "--workers", help=IngestStageConfig.HELP["workers"]),
    limit: int = typer.Option(0, "--limit", min=0, help=IngestStageConfig.HELP["limit"]),
    standin: str = typer.Option("none", "--standin", help=IngestStageConfig.HELP["standin"]),
    id_column: Optional[str] = typer.Option(None, "--id-column", help=IngestStageConfig.HELP["id_column"]),
    invalid: str = typer.Option("skip", "--invalid", help=IngestStageConfig.HELP["invalid"]),
) -> None:
    """Ingest a dataset into the Parquet graph store (one row per graph), with its task type."""
    from dataclasses import asdict, replace

    from flows.ingest import ingest_flow

    options = dict(locals())  # the command's options, as typer filled them
    cfg, paths = IngestStageConfig.from_options(options), IngestPaths.from_options(options)
    cfg = replace(cfg, workers=_workers(cfg.workers, shown=paths.resolved.kind == "smiles"))  # a SMILES source fans out
    ds_name = paths.resolved.name
    summary = ingest_flow(**asdict(paths), cfg=cfg)
    batches = f" ({len(summary['batches'])} appended batches)" if summary["batches"] else ""
    typer.echo(f"{ds_name}: {summary['graphs']} graphs{batches}, {summary['mean_nodes']:.2f} nodes and "
               f"{summary['mean_edges']:.2f} edges per graph -> {summary['path']}; task: {summary['task']}")
    if summary.get("invalid"):
        typer.echo(f"  {summary['invalid']} SMILES RDKit cannot parse were skipped (ingest.invalid: skip): each "
                   f"with its line and reason in {summary['invalid_report']}")
    dup = summary.get("duplicates")
    if dup and dup["structures"]:
        typer.echo(f"  {dup['structures']} structures stored more than once ({dup['graphs']} extra graphs, compared "
                   f"on {dup['compared']}): an answer keyed by SMILES labels every copy")


@app.command()
def tmd(
    dataset: str = typer.Argument(..., help="Dataset name (reads data/graphs/<DATASET>.parquet unless --graphs)."),
    pairs: Path = typer.Option(..., "--pairs", help="CSV with columns i,j (graph ids)."),
    out: Path = typer.Option(..., "--out", help="Output CSV with columns i,j,tmd."),
    depth: int = typer.Option(4, "--depth", help="Computation-tree depth L >= 1."),
    weights: str = typer.Option("pascal", "--weights", help="pascal | a number | comma list of L-1 numbers."),
    graphs: Optional[Path] = typer.Option(None, "--graphs", help="Graph-store Parquet (default data/graphs/<DATASET>.parquet)."),
) -> None:
    """Tree Mover's Distance of listed graph pairs."""
    from flows.tmd import tmd_pairs_flow

    store, w = _store(dataset, graphs), checked_weights(depth, weights)
    n = tmd_pairs_flow(str(store), str(pairs), str(out), depth=depth, weights=w)
    typer.echo(f"{n} pairs -> {out}")


@app.command("tmd-matrix")
def tmd_matrix(
    dataset: str = typer.Argument(..., help="Dataset name (reads data/graphs/<DATASET>.parquet unless --graphs)."),
    out_dir: Path = typer.Option(..., "--out-dir", help="Writes matrix.npy (symmetric, zero diagonal) and meta.json here."),
    cache_dir: Path = typer.Option(DATA / "tmd" / "cache", "--cache-dir", help=TmdPaths.HELP["cache_dir"]),
    graphs: Optional[Path] = typer.Option(None, "--graphs", help=TmdPaths.HELP["graphs"]),
    depth: int = typer.Option(4, "--depth", help=TmdStageConfig.HELP["depth"]),
    weights: str = typer.Option("pascal", "--weights", help=TmdStageConfig.HELP["weights"]),
    block_size: int = typer.Option(256, "--block-size", min=1, help=TmdStageConfig.HELP["block_size"]),
    runner: str = typer.Option("local", "--runner", help=TmdStageConfig.HELP["runner"]),
    workers: str = typer.Option("auto", "--workers", help=TmdStageConfig.HELP["workers"]),
    threads_per_block: Optional[int] = typer.Option(None, "--threads-per-block",
                                                    help=TmdStageConfig.HELP["threads_per_block"]),
    dask_address: Optional[str] = typer.Option(None, "--dask-address", envvar="TMDSUB_DASK_ADDRESS",
                                               help="Use an existing Dask scheduler (tcp://host:port); implies --runner dask."),
    engine: str = typer.Option("exact", "--engine", help=TmdStageConfig.HELP["engine"]),
) -> None:
    """The full TMD matrix of a dataset, sharded into resumable blocks (the pipeline's tmd stage)."""
    from dataclasses import replace

    from flows.tmd import make_task_runner, tmd_matrix_flow

    options = {**locals(), "graphs": _store(dataset, graphs)}
    cfg, paths = TmdStageConfig.from_options(options), TmdPaths.from_options(options)
    n_workers = _workers(cfg.workers, shown=not dask_address)
    if not cfg.threads_per_block:  # one numba thread per block beside other workers; one worker: the cores it may use
        from tasks.cpus import usable_cores

        cfg = replace(cfg, threads_per_block=1 if n_workers > 1 else usable_cores().count)
    task_runner = make_task_runner("dask" if dask_address else cfg.runner, n_workers, dask_address)
    meta = tmd_matrix_flow.with_options(task_runner=task_runner)(paths.graphs, paths.matrix_out, paths.meta_out,
                                                                 paths.cache_dir, cfg=cfg)
    if meta.get("matrix") is False:
        typer.echo(f"{dataset}: {meta['graphs']} graphs, {meta['node_pairs']:.3g} node pairs: the scalable engine "
                   f"selects without the matrix (not computed) -> {paths.meta_out}")
        return
    typer.echo(f"{dataset}: {meta['graphs']}x{meta['graphs']} TMD matrix ({meta['blocks_computed']}/{meta['blocks']} "
               f"blocks, {meta['pairs_computed']} pairs computed) -> {paths.matrix_out}")


@app.command()
def select(
    dataset: str = typer.Argument(..., help="Dataset name."),
    method: str = typer.Option("auto", "--method", help=SelectStageConfig.HELP["method"]),
    fraction: Optional[float] = typer.Option(None, "--fraction", help=SelectStageConfig.HELP["fraction"]),
    count: Optional[int] = typer.Option(None, "--count", help=SelectStageConfig.HELP["count"]),
    control: float = typer.Option(0.0, "--control", help=SelectStageConfig.HELP["control"]),
    next_strategy: str = typer.Option("auto", "--next", help=SelectStageConfig.HELP["next"]),
    goal: str = typer.Option("model", "--goal", help=SelectStageConfig.HELP["goal"]),
    target: str = typer.Option("none", "--target", help=SelectStageConfig.HELP["target"]),
    seed: int = typer.Option(0, "--seed", help=SelectStageConfig.HELP["seed"]),
    test_fraction: float = typer.Option(0.2, "--test-fraction", help=SelectStageConfig.HELP["test_fraction"]),
    graphs: Optional[Path] = typer.Option(None, "--graphs", help=SelectPaths.HELP["graphs"]),
    matrix: Optional[Path] = typer.Option(None, "--matrix", help=SelectPaths.HELP["matrix"]),
    engine: str = typer.Option("auto", "--engine", help=SelectStageConfig.HELP["engine"]),
    depth: int = typer.Option(4, "--depth", help=SelectStageConfig.HELP["depth"]),
    weights: str = typer.Option("pascal", "--weights", help=SelectStageConfig.HELP["weights"]),
    out: Optional[Path] = typer.Option(None, "--out", help=SelectPaths.HELP["out"]),
    restarts: int = typer.Option(5, "--restarts", min=1, help=SelectStageConfig.HELP["restarts"]),
    backend: str = typer.Option("fasterpam", "--backend", help=SelectStageConfig.HELP["backend"]),
    labelled: Optional[Path] = typer.Option(None, "--labelled", help=SelectPaths.HELP["labelled"]),
    cache_dir: Path = typer.Option(DATA / "tmd" / "cache", "--cache-dir", help=SelectPaths.HELP["cache_dir"]),
    part_size: str = typer.Option("auto", "--part-size", help=SelectStageConfig.HELP["part_size"]),
    max_pairs: str = typer.Option("auto", "--max-pairs", help=SelectStageConfig.HELP["max_pairs"]),
    runner: str = typer.Option("local", "--runner", help="Scalable engine, several parts: local (processes) | threads | dask."),
    workers: str = typer.Option("auto", "--workers", help="Parallel parts (local/threads/dask local cluster): auto (the cores this process may use; printed) or a number."),
    dask_address: Optional[str] = typer.Option(None, "--dask-address", envvar="TMDSUB_DASK_ADDRESS", help="Use an existing Dask scheduler (tcp://host:port); implies --runner dask."),
    trust_matrix: bool = typer.Option(False, "--trust-matrix", help=SelectStageConfig.HELP["trust_matrix"]),
    audit: str = typer.Option("auto", "--audit", help=SelectStageConfig.HELP["audit"]),
) -> None:
    """Pick the graphs worth labelling (a TMD coreset, a baseline or a chemists' picker), with the exact certificate."""
    options = dict(locals())  # the command's options, as typer filled them
    from flows.select import select_flow
    from flows.tmd import make_task_runner

    store = _store(dataset, graphs)
    cfg = SelectStageConfig.from_options(options)  # every option checked: budget, names, weights, target
    if dask_address:
        runner = "dask"
    one_of("--runner", runner, ("local", "threads", "dask"))
    workers = _workers(workers, shown=not dask_address)
    if matrix is not None:
        from tasks.graphs import matrix_path

        if matrix_path(str(matrix)) is None:  # the tmd stage took the scalable engine: it wrote meta.json, no matrix
            matrix = None
    mat = matrix or DATA / "tmd" / dataset / "matrix.npy"
    use_matrix = matrix is not None or (engine != "scalable" and mat.exists())
    target = out or DATA / "selection" / dataset / "selection.json"
    paths = SelectPaths(str(store), str(target), str(mat) if use_matrix else None, str(labelled or _ledger(dataset)),
                        str(cache_dir))
    flow = select_flow.with_options(task_runner=make_task_runner(runner, workers, dask_address))
    sel = flow(**vars(paths), cfg=cfg)
    reused = f" ({sel['reused_labels']} already labelled)" if sel["reused_labels"] else ""
    typer.echo(f"{dataset}: {sel['k']} of {sel['n_train']} training graphs selected by {sel['method']} "
               f"({sel['engine']} engine){reused}; certificate: epsilon = {sel['epsilon']:.6g} (sum of "
               f"{sel['n_train']} exact TMDs to the medoids, mean {sel['epsilon_mean']:.4g}), "
               f"{sel['pairs_computed']} exact pairs computed -> {target}")


@app.command()
def nodes(
    dataset: str = typer.Argument(..., help="Dataset name."),
    method: str = typer.Option("auto", "--method", help=NodesStageConfig.HELP["method"]),
    fraction: float = typer.Option(..., "--fraction", help=NodesStageConfig.HELP["fraction"]),
    seed: int = typer.Option(0, "--seed", help=NodesStageConfig.HELP["seed"]),
    depth: int = typer.Option(4, "--depth", help=NodesStageConfig.HELP["depth"]),
    weights: str = typer.Option("pascal", "--weights", help=NodesStageConfig.HELP["weights"]),
    bfs_mode: str = typer.Option("fill", "--bfs-mode", help=NodesStageConfig.HELP["bfs_mode"]),
    graphs: Optional[Path] = typer.Option(None, "--graphs", help=NodesPaths.HELP["graphs"]),
    out: Optional[Path] = typer.Option(None, "--out", help=NodesPaths.HELP["out"]),
) -> None:
    """Keep, per graph, the node subset with the largest tree norm (or a baseline)."""
    from flows.select import nodes_flow

    options = {**locals(), "graphs": _store(dataset, graphs),
               "out": out or DATA / "selection" / dataset / "nodes.parquet"}
    cfg, paths = NodesStageConfig.from_options(options), NodesPaths.from_options(options)
    res = nodes_flow(paths.graphs, paths.out, cfg=cfg)
    if res["method"] == "off":
        typer.echo(f"{dataset}: node subsampling off ({res['reason']}): {paths.out} has no rows, and train_nodes and "
                   "evaluate_nodes skip")
        return
    typer.echo(f"{dataset}: nodes of {res['graphs']} graphs subsampled by {res['method']} at {cfg.fraction:g}, "
               f"mean epsilon = {res['mean_epsilon']:.4g} -> {paths.out}")


@app.command("label-requests")
def label_requests(
    dataset: str = typer.Argument(..., help="Dataset name."),
    graphs: Optional[Path] = typer.Option(None, "--graphs", help="Graph store (default data/graphs/<DATASET>.parquet)."),
    selection: Optional[Path] = typer.Option(None, "--selection", help="Selection JSON (default data/selection/<DATASET>/selection.json)."),
    out_dir: Optional[Path] = typer.Option(None, "--out-dir", help="Output folder (default data/labels/<DATASET>)."),
    labelled: Optional[Path] = typer.Option(None, "--labelled", help="Label ledger (default data/labelled/<DATASET>.csv): its graphs are not requested again."),
) -> None:
    """Export the graphs still to label: label_requests.csv/.parquet (graph_id, source_id, tau, rank) + manifest.json."""
    from tmdlib import InputError
    from flows.labels import label_requests_flow

    store = _store(dataset, graphs)
    sel = selection or DATA / "selection" / dataset / "selection.json"
    if not sel.is_file():
        raise InputError(sel, "selection not found (run `tmdsub select` first)")
    target = out_dir or DATA / "labels" / dataset
    man = label_requests_flow(str(store), str(sel), str(target), str(labelled or _ledger(dataset)))
    reused = f" ({man['reused']} selected graphs already labelled)" if man["reused"] else ""
    typer.echo(f"{dataset}: {man['requested']} graphs to label{reused} -> {target / 'label_requests.csv'}")


labels_app = typer.Typer(no_args_is_help=True, help="Import labels for the requested graphs.")
app.add_typer(labels_app, name="labels")


@labels_app.command("import")
def labels_import(
    dataset: str = typer.Argument(..., help="Dataset name."),
    source: Optional[str] = typer.Argument(None, help="The lab's answers: CSV (comma, semicolon or tab), .xlsx or SD file keyed by graph_id, source_id, your compound ids or SMILES, headers in any case; a ChEMBL activity export as it is (docs/pipeline.md#labels) -- or 'benchmark-standin' (the dataset's own labels, flagged); default: labels.source of --params."),
    graphs: Optional[Path] = typer.Option(None, "--graphs", help="Graph store (default data/graphs/<DATASET>.parquet)."),
    requests: Optional[Path] = typer.Option(None, "--requests", help="Label requests (default data/labels/<DATASET>/label_requests.parquet)."),
    out_dir: Optional[Path] = typer.Option(None, "--out-dir", help="Output folder (default data/labels/<DATASET>)."),
    labelled: Optional[Path] = typer.Option(None, "--labelled", help="Label ledger (default data/labelled/<DATASET>.csv): its labels are reused."),
    task: Optional[str] = typer.Option(None, "--task", help="A pool stored without labels: auto (from the lab's values) or a type (default base.task of --params, else auto)."),
    params: Optional[Path] = typer.Option(None, "--params", help="params.yaml: labels.source (a file or {DATASET: file}), labels.replicates / censored / max_spread, labels.columns / transform / units / sheet, base.task."),
) -> None:
    """Validate a label file against the requests; writes labels.csv (ledger + new labels) + labels.json, nothing on error."""
    from tmdlib import InputError
    from flows.labels import import_summary, labels_import_flow

    store = _store(dataset, graphs)
    req = requests or DATA / "labels" / dataset / "label_requests.parquet"
    if not req.is_file():
        raise InputError(req, "label requests not found (run `tmdsub label-requests` first)")
    target = out_dir or DATA / "labels" / dataset
    res = labels_import_flow(str(store), str(req), source, str(target), str(labelled or _ledger(dataset)), task=task,
                             params=str(params) if params else None)
    typer.echo("\n".join(import_summary(dataset, res, target)))


@labels_app.command("commit")
def labels_commit(
    dataset: str = typer.Argument(..., help="Dataset name."),
    graphs: Optional[Path] = typer.Option(None, "--graphs", help="Graph store (default data/graphs/<DATASET>.parquet)."),
    labels: Optional[Path] = typer.Option(None, "--labels", help="Labels a run used (default data/labels/<DATASET>/labels.csv)."),
    ledger: Optional[Path] = typer.Option(None, "--ledger", help="Label ledger to grow (default data/labelled/<DATASET>.csv)."),
) -> None:
    """Add the labels of a finished run to the label ledger, so the next run requests only new graphs."""
    from flows.labels import labels_commit_flow

    store = _store(dataset, graphs)
    res = labels_commit_flow(str(store), str(labels or DATA / "labels" / dataset / "labels.csv"),
                             str(ledger or _ledger(dataset)))
    typer.echo(f"{dataset}: {res['added']} measurements added to {res['ledger']} ({res['total']} graphs labelled)")


@app.command()
def predict(
    dataset: str = typer.Argument(..., help="Dataset name."),
    smiles_csv: Optional[Path] = typer.Option(None, "--smiles-csv", help=PredictPaths.HELP["smiles_csv"]),
    confidence: float = typer.Option(0.9, "--confidence", help=PredictStageConfig.HELP["confidence"]),
    graphs: Optional[Path] = typer.Option(None, "--graphs", help=PredictPaths.HELP["graphs"]),
    model: Optional[Path] = typer.Option(None, "--model", help=PredictPaths.HELP["model"]),
    out_dir: Optional[Path] = typer.Option(None, "--out-dir", help=PredictPaths.HELP["out_dir"]),
    mlflow: bool = typer.Option(True, "--mlflow/--no-mlflow", help=PredictStageConfig.HELP["log_mlflow"]),
    workers: str = typer.Option("auto", "--workers", help=PredictStageConfig.HELP["workers"]),
) -> None:
    """Predictions with intervals for every graph of the pool (or a SMILES file), from the trained model."""
    from flows.predict import predict_flow

    model = model or DATA / "models" / dataset / "model.pt"
    options = {**locals(), "graphs": _store(dataset, graphs), "workers": _workers(workers), "model": model,
               "selection": DATA / "selection" / dataset / "selection.json",
               "train_info": Path(model).with_name("train.json"),
               "out_dir": out_dir or DATA / "predictions" / dataset}
    cfg, paths = PredictStageConfig.from_options(options), PredictPaths.from_options(options)
    meta = predict_flow(paths.graphs, paths.selection, paths.model, paths.train_info, paths.out_dir,
                        paths.smiles_csv, cfg=cfg)
    typer.echo(f"{meta['rows']:,} rows predicted by {meta['model']} at {100 * cfg.confidence:g} % "
               f"(calibrated on {meta['calibration']})")


@app.command()
def models() -> None:
    """The registered models (train.model / --model), their inputs and task types."""
    from tmdlib.models import all_models

    for spec in all_models():
        typer.echo(f"{spec.name:14s} {spec.inputs:9s} {','.join(spec.tasks):38s} {spec.summary}")


#: The stages whose options params.yaml's groups set, and their configs (``module:Class``, imported when shown).
STAGE_CONFIGS = {"ingest": "flows.config.ingest:IngestStageConfig", "tmd": "flows.config.tmd:TmdStageConfig",
                 "select": "flows.config.select:SelectStageConfig", "nodes": "flows.config.nodes:NodesStageConfig",
                 "train": "flows.config.train:TrainStageConfig", "evaluate": "flows.config.evaluate:EvaluateStageConfig",
                 "predict": "flows.config.predict:PredictStageConfig", "audit": "flows.config.audit:AuditStageConfig",
                 "experiment": "flows.config.experiment:ExperimentStageConfig"}


def params_lines(stage: str, params: dict) -> list[str]:
    """params.yaml's documentation of one stage, read from its config: each field, the value the stage gets from
    ``params`` (the config built by its ``from_params``: checked, the defaults filled), whether the file sets it, and
    the field's help (the config's ``HELP``, which the command's ``--help`` shows too)."""
    import dataclasses
    import importlib

    module, name = STAGE_CONFIGS[stage].split(":")
    config = getattr(importlib.import_module(module), name)
    cfg = config.from_params(params)
    group = params.get(stage) or {}

    def source(field: str) -> str:
        """Where the field's value comes from: the stage's group, else the key of another group (``base.seed``,
        ``select.engine``) whose removal changes it, else one that states the same value (``base.depth: 4``, the
        default too), else the default."""
        if field in group:
            return f"{stage}.{field}"
        keys = [g for g in ["base"] + [g for g in params if g not in ("base", stage)]
                if isinstance(params.get(g), dict) and field in params[g]]
        for g in keys:
            without = {**params, g: {k: v for k, v in params[g].items() if k != field}}
            if getattr(config.from_params(without), field) != getattr(cfg, field):
                return f"{g}.{field}"
        same = [g for g in keys if params[g][field] == getattr(cfg, field)]
        return f"{same[0]}.{field}" if same else "default"

    lines = [f"{stage}:  ({config.__name__})"]
    for f in dataclasses.fields(config):
        lines.append(f"  {f.name} = {getattr(cfg, f.name)!r}  [{source(f.name)}]  {config.HELP.get(f.name, '')}"
                     .rstrip())
    return lines


@app.command("params")
def params_doc(
    stage: Optional[str] = typer.Argument(None, help=f"One stage ({', '.join(STAGE_CONFIGS)}); all when none."),
    params: Path = typer.Option(Path("params.yaml"), "--params", help="The parameters file."),
) -> None:
    """What each stage's options in params.yaml mean and the value each stage gets (read from the stages' configs)."""
    import yaml

    from tmdlib import InputError

    if stage is not None and stage not in STAGE_CONFIGS:
        _fail(f"unknown stage {stage!r}: one of {', '.join(STAGE_CONFIGS)}")
    try:
        values = yaml.safe_load(params.read_text(encoding="utf-8")) or {}
        for name in ([stage] if stage else STAGE_CONFIGS):
            typer.echo("\n".join(params_lines(name, values)))
    except (OSError, yaml.YAMLError, InputError) as err:
        _fail(err)


@app.command()
def summary() -> None:
    """Where the coreset, label requests, model, metrics and MLflow runs are (reads dvc.yaml and MLflow)."""
    from flows.summary import summary_text

    typer.echo(summary_text())


@app.command()
def remote(
    workspace: Path = typer.Option(Path("."), "--workspace", help="The repository root (reads its params.yaml)."),
) -> None:
    """Make params.yaml's `remote:` (name, url) the default DVC remote in .dvc/config (commit it to share)."""
    from tasks.dvcops import configure_remote
    from tasks.tracking import redact_uri

    name, url = configure_remote(workspace)
    typer.echo(f"DVC remote {name!r} -> {redact_uri(url)} (default; credentials: dvc remote modify --local {name} ...)")


@app.command()
def schedule(
    cron: Optional[str] = typer.Option(None, "--cron", help="Cron schedule, UTC (default params.yaml schedule.cron)."),
    name: str = typer.Option("tmdsub", "--name", help="Deployment name (scheduled-run/NAME)."),
    workspace: Path = typer.Option(Path("."), "--workspace", help="The repository root the runs work in."),
) -> None:
    """Serve a Prefect deployment that ingests new data, reruns the pipeline, pushes and records (Ctrl-C stops)."""
    from flows.schedule import serve_schedule

    serve_schedule(workspace, cron, name)


@app.command()
def retrain(
    workspace: Path = typer.Option(Path("."), "--workspace", help="The repository root to run in."),
) -> None:
    """One scheduled run now, in the foreground: ingest data/incoming, dvc repro, commit, push, record."""
    from flows.schedule import scheduled_run_flow

    rec = scheduled_run_flow(str(workspace))
    typer.echo(f"{len(rec['batches'])} new batch(es); {len(rec['stages_ran'])} stage(s) ran; "
               f"{'pushed' if rec['pushed'] else 'not pushed'}; record -> data/runs/{rec['stamp']}.json")


@app.command()
def init(
    folder: Path = typer.Argument(..., help="The project's folder (created; it must not hold a dvc.yaml or params.yaml)."),
    git: bool = typer.Option(True, "--git/--no-git", help="git init the folder (skipped inside a git repository)."),
) -> None:
    """Make a team's project: dvc.yaml (stages that run this tmdsub), params.yaml, data/raw/, git and DVC."""
    from flows.project import init_project

    info = init_project(folder, git=git)
    inits = " and ".join(n for n in ("git", "dvc") if info[n])
    typer.echo(f"tmdsub {info['version']} project in {info['path']}: {', '.join(info['files'])}"
               + (f"; {inits} initialised" if inits else ""))
    typer.echo("next: put the pool in data/raw/ (e.g. pool.sdf), list it in params.yaml (base.datasets: "
               "{POOL: pool.sdf}), then `dvc repro label_requests@POOL` there (README.md)")


@app.command()
def upgrade(
    workspace: Path = typer.Option(Path("."), "--workspace", help="The project's folder (its params.yaml)."),
) -> None:
    """After installing a new tmdsub: set params.yaml's tool.version to it, so `dvc repro` reruns every stage."""
    from flows.project import upgrade_project

    info = upgrade_project(workspace)
    if info["previous"] == info["version"]:
        typer.echo(f"{info['path']}: tool.version is already {info['version']} (the installed tmdsub)")
    else:
        typer.echo(f"{info['path']}: tool.version {info['previous']} -> {info['version']}; now `dvc repro` reruns "
                   "every stage with it (`tmdsub summary` lists the stages made by another version)")


@app.command()
def version() -> None:
    """The installed tmdsub's version (a project records it in params.yaml: tool.version)."""
    from flows.project import tool_version

    typer.echo(tool_version())


def _register_stage_commands() -> None:
    """Training, evaluation, audit and experiment commands (their modules import torch/mlflow lazily)."""
    from flows.audit import audit_command
    from flows.evaluate import evaluate_command
    from flows.experiment import experiment_command
    from flows.train import train_command

    app.command("train")(train_command)
    app.command("evaluate")(evaluate_command)
    app.command("audit")(audit_command)
    app.command("experiment")(experiment_command)


_register_stage_commands()


# Commands that only read the workspace: they never take the workspace lock, so they run beside a writing
# stage (each artifact they read is replaced atomically by its writer, so they see a whole old or a whole
# new file).  ``audit`` renders its report from the files that exist; ``tmd`` writes only its own --out.
READERS = ("summary", "tmd", "audit", "params")
# schedule serves for ever and retrain may name another workspace: their runs take the lock themselves; init makes
# a new folder and version reads nothing.
SELF_LOCKING = ("schedule", "retrain", "init", "version")
HELP = ("--help", "-h")


def lock_mode(args: list[str]) -> str:
    """``"exclusive"`` (a writer: holds the workspace lock for its run) or ``"none"`` (a reader, help, or a
    command that locks for itself) for the command line ``args`` (after ``--wait``)."""
    if not args or args[0] in READERS + SELF_LOCKING + HELP or "--help" in args:
        return "none"
    if args[0] == "labels" and len(args) == 1:  # prints the sub-command help
        return "none"
    return "exclusive"


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: one workspace lock per writing run; no traceback reaches the user.

    Writers (every command that writes pipeline artifacts) hold the workspace's exclusive lock for
    their whole run; a second writer is refused (exit 75) naming the holder.  Readers (:data:`READERS`:
    ``tmd --pairs``, ``summary``, ``audit``) and ``--help`` take no lock and run beside a writer.

    ``tmdsub --wait[=SECONDS] COMMAND ...`` (or ``TMDSUB_LOCK_WAIT=SECONDS``) queues behind a run
    holding the workspace lock instead of being refused (exit 75).  Unexpected errors print one
    ``error:`` line and exit 1; ``TMDSUB_DEBUG=1`` shows the traceback.
    """
    import contextlib
    import logging
    import os

    from tasks.locking import WorkspaceBusy, workspace_lock
    from tmdlib import InputError

    def _exit(err, code: int):
        try:
            _fail(err, code)
        except typer.Exit as ex:  # outside a command typer.Exit would surface as a traceback
            raise SystemExit(ex.exit_code) from None

    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--version"]:
        args = ["version"]
    wait = os.environ.get("TMDSUB_LOCK_WAIT", "0")
    while args and (args[0] == "--wait" or args[0].startswith("--wait=")):
        wait = args.pop(0).partition("=")[2] or "inf"
    debug = os.environ.get("TMDSUB_DEBUG", "") not in ("", "0")
    if not debug:  # Prefect logs a failed run with its traceback: keep the one-line message only
        class _NoTraceback(logging.Filter):
            def filter(self, record):
                record.exc_info, record.exc_text, record.stack_info = None, None, None
                return True

        for name in ("prefect", "prefect.flow_runs", "prefect.task_runs"):
            logging.getLogger(name).addFilter(_NoTraceback())
    unlocked = lock_mode(args) == "none"
    try:
        seconds = float(wait)
    except ValueError:
        _exit(f"--wait / TMDSUB_LOCK_WAIT must be a number of seconds, got {wait!r}", 2)
    try:
        with contextlib.nullcontext() if unlocked else workspace_lock(wait=seconds):
            app(args=args, prog_name="tmdsub")
    except WorkspaceBusy as err:
        _exit(err, 75)
    except InputError as err:  # bad user input: one line naming file, line and problem
        _exit(err, 2)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        _exit("interrupted", 130)
    except Exception as err:  # noqa: BLE001 - the one place that turns any failure into one line
        if debug:
            raise
        _exit(f"{type(err).__name__}: {err} (set TMDSUB_DEBUG=1 to see the traceback)", 1)


if __name__ == "__main__":
    sys.exit(main())
