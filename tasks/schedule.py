"""Tasks of the scheduled run (:mod:`flows.schedule`): grow the label ledger, take in new batches,
``dvc repro``, ``git commit``, ``dvc push`` and record the run (JSON + MLflow).

Every task runs in the workspace (the repository root, the current directory of the flow) and is
called while the flow holds the workspace lock; the ``dvc``/``tmdsub`` commands it starts inherit
that lock (:mod:`tasks.locking`).
"""
from __future__ import annotations

import os
from pathlib import Path

from prefect import task

from tmdlib import InputError

from . import dvcops, io

__all__ = ["intake_batches", "repro", "commit_labels", "commit_run", "push", "record_run"]


def pending_batches(incoming: Path, datasets: list[str]) -> list[tuple[str, Path]]:
    """``(dataset, item)`` of every item waiting in ``incoming/<DATASET>/``, sorted by name (dotfiles skipped)."""
    found = []
    for ds in datasets:
        folder = incoming / ds
        if folder.is_dir():
            found += [(ds, p) for p in sorted(folder.iterdir()) if not p.name.startswith(".")]
    return found


def check_batch(path: Path, store: Path, read_options: dict) -> int:
    """Parse ``path`` as a batch and check it appends to the dataset's current graph store; its graph count.

    Raises
    ------
    InputError
        The batch cannot be read, or does not fit the dataset (feature width, classes); the message says
        that nothing was moved.
    """
    from tmdlib.datasets import read_graph_parquet
    from tmdlib.datasets.append import append_graph_table

    from .ingest import read_batch

    options = dict(read_options)
    if store.is_file():  # a batch is read as the dataset was: its task and its label columns
        from .graphs import open_store

        task = open_store(str(store)).task
        options.setdefault("task", task)
        options.setdefault("label_column", list(task.targets))
    try:
        table = read_batch(str(path), **options)
        if store.is_file():
            append_graph_table(read_graph_parquet(store), table, path.name, path)
    except InputError as err:
        raise InputError(err.path or path, f"{err.problem} (bad batch: nothing was moved)", err.line) from None
    except (OSError, ValueError) as err:
        raise InputError(path, f"not a valid batch ({err}): nothing was moved") from None
    return int(table.num_rows)


def move_batches(items: list[tuple[str, Path]], append_root: Path, stamp: str) -> list[tuple[Path, Path]]:
    """Rename each item to ``append_root/<DATASET>/<stamp>-<name>``; all or none (renames undone on error)."""
    moved: list[tuple[Path, Path]] = []
    try:
        for ds, src in items:
            dst = append_root / ds / f"{stamp}-{src.name}"
            if dst.exists():
                raise InputError(dst, "a batch of that name is already appended")
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.rename(src, dst)
            moved.append((src, dst))
    except BaseException:
        for src, dst in reversed(moved):
            os.rename(dst, src)
        raise
    return moved


@task(name="intake-batches", persist_result=False)
def intake_batches(incoming: str, append_root: str, datasets: list[str], stamp: str, read_options: dict) -> list[dict]:
    """Validate every waiting batch, then move them all into the append folders (nothing moves on error).

    Returns ``[{"dataset", "source", "batch", "graphs"}]`` with workspace-relative paths.
    """
    items = pending_batches(Path(incoming), datasets)
    counts = [check_batch(path, Path("data/graphs") / f"{ds}.parquet", read_options) for ds, path in items]
    moved = move_batches(items, Path(append_root), stamp)
    return [{"dataset": ds, "source": str(src), "batch": str(dst), "graphs": n}
            for (ds, _), (src, dst), n in zip(items, moved, counts)]


@task(name="dvc-repro", persist_result=False)
def repro() -> dict:
    """``dvc repro`` in the workspace: ``{"stages": [ingest@MUTAG, ...], "tmd": [what each TMD stage computed]}``."""
    out = dvcops.run_tool(["dvc", "repro"], ".")
    return {"stages": dvcops.stages_ran(out), "tmd": [line.strip() for line in out.splitlines() if " TMD matrix (" in line]}


@task(name="labels-commit", persist_result=False)
def commit_labels(datasets: list[str]) -> list[str]:
    """``tmdsub labels commit <DATASET>`` for each dataset with labels from a previous run: they join the ledger."""
    return [dvcops.run_tool(["tmdsub", "labels", "commit", ds], ".").strip() for ds in datasets
            if (Path("data/labels") / ds / "labels.csv").is_file()]


@task(name="git-commit", persist_result=False)
def commit_run(paths: list[str], message: str) -> bool:
    """Commit ``paths`` (dvc.lock, appended batches, label ledgers) if the workspace is a git repo."""
    return dvcops.is_git_repo(".") and dvcops.git_commit(".", paths, message)


@task(name="dvc-push", persist_result=False)
def push() -> str:
    """``dvc push`` to the default remote (``tmdsub remote`` configures it from params.yaml)."""
    try:
        return dvcops.run_tool(["dvc", "push"], ".")
    except RuntimeError as err:
        if "no remote specified" in str(err).lower():
            raise InputError("params.yaml", "no default DVC remote: run `tmdsub remote` (reads `remote:`), "
                                            "or set schedule.push: false") from None
        raise


@task(name="record-run", persist_result=False)
def record_run(record: dict, record_path: str, graph_stores: list[str], experiment: str) -> dict:
    """Write ``record_path`` and log it to an MLflow run in ``experiment`` (tags name everything to reproduce it).

    The MLflow run is FINISHED or FAILED as the record's ``status``.  Returns the record with
    ``mlflow_run_id`` added, as written.
    """
    from mlflow import MlflowClient

    from .tracking import tracking_uri
    from .tracking import log_run, start_run

    tags = {f"schedule.{k}": _tag(v) for k, v in record.items()}
    params = {"datasets": ",".join(record["datasets"]), "commit": record["commit"], "push": record["push"]}
    metrics = {"batches": len(record["batches"]), "graphs_appended": sum(b["graphs"] for b in record["batches"]),
               "stages_ran": len(record["stages_ran"])}
    run = start_run("schedule", params, graph_stores, experiment, f"schedule-{record['stamp']}", tags)
    full = {**record, "mlflow_run_id": run["run_id"], "mlflow_tracking_uri": run["tracking_uri"]}
    io.write_json(record_path, full)
    log_run("schedule", params, metrics, graph_stores, [record_path], experiment=experiment, run=run)
    if record["status"] != "FINISHED":
        MlflowClient(tracking_uri=tracking_uri()).set_terminated(run["run_id"], "FAILED")
    return full


def _tag(value) -> str:
    """An MLflow tag value: lists joined by commas (batches by their path; champion decisions as
    ``DATASET vN: promoted|not promoted (reason)``), else ``str``."""
    if isinstance(value, list):
        return ",".join(_item(v) for v in value)
    return str(value)


def _item(v) -> str:
    if not isinstance(v, dict):
        return str(v)
    if "batch" in v:
        return v["batch"]
    return (f"{v.get('dataset')} v{v.get('version', '?')}: {'promoted' if v.get('promoted') else 'not promoted'}"
            f"{' (decided before)' if v.get('decided_before') else ''} ({v.get('reason', '')})")
