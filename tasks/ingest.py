"""Ingestion tasks: raw source -> validated Arrow table -> Parquet graph store."""
from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.parquet as pq
from prefect import task

from tmdlib import datasets as tds
from tmdlib.datasets._identity import streamed_summary, structure_duplicates, table_summary
from tmdlib.datasets.sources import (SourceReading, batch_kind, batch_reading, expected_molecules,
                                    invalid_csv_text, progress_line, tu_name)
from tmdlib.datasets import TaskSpec, store_task, table_task

from . import io
from .cpus import resolve_workers


@task(name="verify-checksums", persist_result=False)
def verify_checksums(raw_root: str, folder: str) -> list[str]:
    """Check the sha256 of every shipped raw file of ``folder`` against ``raw_root/SHA256SUMS``."""
    return tds.verify_sha256sums(raw_root, only=folder)


def _print_progress(name: str, total: int | None, unit: str = "molecules"):
    """A progress callback printing items (``unit``) done, rate and ETA (every chunk)."""
    def report(done: int, seconds: float) -> None:
        print(progress_line(name, done, seconds, total, unit), file=sys.stderr, flush=True)
    return report


@task(name="read-source", persist_result=False)
def read_source(kind: str, path: str, name: str, reading: SourceReading = SourceReading(),
                workers: int | str = "auto", skipped: list | None = None):
    """Read one source (``tu`` folder, ``ogb`` folder, ``smiles`` molecule file or graph-store ``parquet``) with its
    task, as ``reading`` says (:class:`tmdlib.datasets.sources.SourceReading`: its columns, its task -- auto, a
    type or an existing dataset's :class:`~tmdlib.datasets._task.TaskSpec` --, the TU node attributes).

    ``workers``: processes converting a SMILES source, auto (the cores this process may use,
    :func:`tasks.cpus.resolve_workers`) or a number; ``skipped`` (a list, SMILES only): a SMILES rdkit cannot
    parse is left out and appended to it (``(line, smiles, reason)``) instead of stopping.
    """
    task = reading.task
    if kind == "tu":
        return tds.read_tu(path, name=name, node_attributes=reading.node_attributes,
                           task=None if isinstance(task, TaskSpec) else task)
    if kind == "ogb":
        return tds.read_ogb(path, name=name, task=task)
    if kind == "smiles":
        return tds.read_smiles_csv(path, **reading.smiles_options(), workers=resolve_workers(workers),
                                   progress=_print_progress(name, expected_molecules(name, reading.limit)), name=name,
                                   skipped=skipped)
    if kind == "parquet":
        return store_task(tds.read_graph_parquet(path), task, path)
    raise ValueError(f"unknown source kind {kind!r}")


@task(name="write-smiles-store", persist_result=False)
def write_smiles_store(path: str, out: str, name: str, reading: SourceReading, workers: int | str = "auto",
                       task_source: str | None = None, skip_invalid: bool = False) -> dict:
    """Convert a molecule file straight into the graph store ``out`` (atomically), as ``reading`` says, one row group
    per chunk as the molecules are converted (:func:`tmdlib.datasets.write_smiles_parquet`: memory that does not
    grow with the pool); return the same summary as :func:`write_graph_store`."""
    with io.atomic_path(out) as tmp:
        stats = tds.write_smiles_parquet(path, tmp, **reading.smiles_options(), task_source=task_source,
                                         workers=resolve_workers(workers),
                                         progress=_print_progress(name, expected_molecules(name, reading.limit)),
                                         name=name, skip_invalid=skip_invalid)
    return {**_streamed_summary(out, stats), "invalid": stats["invalid"]}


def invalid_report_path(out: str | Path) -> Path:
    """The report of the SMILES an ingest skipped, beside the store: ``data/graphs/<DS>.invalid.csv``."""
    p = Path(out)
    return p.with_name(p.name.removesuffix(".parquet") + ".invalid.csv")


@task(name="write-invalid-report", persist_result=False)
def write_invalid_report(out: str, invalid: list) -> str | None:
    """``line,smiles,reason`` of every SMILES left out, beside the store (atomically); an earlier report is
    removed when this ingest skipped none, so the report always describes the store beside it."""
    path = invalid_report_path(out)
    if not invalid:
        path.unlink(missing_ok=True)
        return None
    io.write_text(path, invalid_csv_text(invalid))
    return str(path)


def count_duplicates(store: str) -> dict | None:
    """Structures stored more than once in a molecule store (None: no ``smiles`` column): ``structures`` (how many
    structures have copies), ``graphs`` (the graphs beyond each structure's first), ``compared`` (on what)."""
    if "smiles" not in pq.read_schema(store).names:
        return None
    index = io.canonical_keys(store)
    if index is not None:  # the key index written at ingest: canonical at any size, no parsing
        return structure_duplicates(index=index.to_pylist())
    return structure_duplicates(smiles=pq.read_table(store, columns=["smiles"]).column("smiles").to_pylist())


def _streamed_summary(out: str, stats: dict) -> dict:
    """:func:`write_graph_store`'s summary of a store written a slice at a time (``stats``: its counts and task)."""
    return {"path": str(Path(out)), **streamed_summary(stats), "sha256": io.sha256_file(out)}


@task(name="copy-parquet-store", persist_result=False)
def copy_parquet_store(path: str, out: str, name: str, task=None) -> dict:
    """Validate a graph-store Parquet file and copy it into the store ``out`` (atomically) a slice of graphs at a
    time, with its task (:func:`tmdlib.datasets.copy_graph_parquet`: memory that does not grow with the file);
    return the same summary as :func:`write_graph_store`."""
    with io.atomic_path(out) as tmp:
        stats = tds.copy_graph_parquet(path, tmp, task, progress=_print_progress(name, None, "graphs"))
    return _streamed_summary(out, stats)


def batch_sources(append_dir: str | None) -> list[tuple[str, str, str]]:
    """``(name, kind, path)`` of every batch under ``append_dir``, sorted by name (dotfiles and README skipped)."""
    if not append_dir or not Path(append_dir).is_dir():
        return []
    items = sorted(p for p in Path(append_dir).iterdir()
                   if not p.name.startswith(".") and p.name.lower() not in ("readme", "readme.md"))
    return [(p.name, batch_kind(p), str(p)) for p in items]


def read_batch(path: str, node_attributes: bool = False, smiles_column: str = "smiles",
               label_column=None, *, split_column: str | None = None, keep_columns=(), task=None):
    """Read and validate one batch (any of the three kinds) on its own, as the intake of new data does.

    A SMILES batch is read with the dataset's label columns (``label_column``; None: its own ``y`` or
    ``label`` column, if any) and, when given, the dataset's task (a
    :class:`~tmdlib.datasets._task.TaskSpec`: its labels must fit it, every offending line named); a named
    split or kept column it lacks is left null.
    """
    p = Path(path)
    kind = batch_kind(p)
    reading = batch_reading(p, kind, node_attributes, smiles_column, label_column, split_column=split_column,
                            keep_columns=keep_columns, task=task)
    table = read_source.fn(kind, str(p), tu_name(p) if kind == "tu" else p.stem, reading)
    tds.validate_graph_table(table, p)
    return table


@task(name="append-batches", persist_result=False)
def append_batches(table, batches: list[tuple[str, str, str]], node_attributes: bool = False,
                   smiles_column: str = "smiles", label_column=None, split_column: str | None = None,
                   keep_columns=()):
    """Append each batch's graphs after ``table`` (tmdlib.datasets.append_graph_table), in order; every batch
    keeps the dataset's task (a batch whose labels do not fit it is refused, naming its file and line)."""
    from tmdlib.datasets.append import append_graph_table

    spec = table_task(table)
    for name, _kind, path in batches:
        batch = read_batch(path, node_attributes, smiles_column, label_column, split_column=split_column,
                           keep_columns=keep_columns, task=spec)
        table = append_graph_table(table, batch, name, path)
    return table


@task(name="write-graph-store", persist_result=False)
def write_graph_store(table, out: str) -> dict:
    """Validate ``table`` and write it atomically to ``out``; return summary statistics."""
    tds.validate_graph_table(table, out)
    io.write_parquet(out, table)
    return {"path": str(Path(out)), **table_summary(table), "sha256": io.sha256_file(out)}
