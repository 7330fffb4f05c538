"""Ingest flow: a built-in dataset, a TU folder, a molecule file (CSV/TSV, .smi, SD file, Parquet table) or a graph-store
Parquet file -> graph store.

Run as ``tmdsub ingest ...`` (or ``python -m flows ingest ...``).  Wiring only: the source and how it is read are
decided by :class:`flows.config.ingest.IngestPaths` / :class:`~flows.config.ingest.IngestStageConfig` and
:mod:`tmdlib.datasets.sources`; the tasks of :mod:`tasks.ingest` read and write.
"""
from __future__ import annotations

from dataclasses import replace

from prefect import flow

from tasks.ingest import (append_batches, batch_sources, copy_parquet_store, count_duplicates, read_source,
                          verify_checksums, write_graph_store, write_invalid_report, write_smiles_store)
from flows.config.ingest import IngestPaths, IngestStageConfig
from tmdlib import datasets as tds
from tmdlib.datasets.sources import file_columns, plan_reading
from tmdlib.datasets import table_task
from tmdlib.datasets._task import with_task


@flow(name="ingest", log_prints=True)
def ingest_flow(dataset: str | None = None, source: str | None = None, tu_dir: str | None = None,
                smiles_csv: str | None = None, parquet: str | None = None, name: str | None = None,
                raw_root: str = "data/raw", out: str | None = None, append_dir: str | None = None,
                cfg: IngestStageConfig | None = None) -> dict:
    """Verify (built-in data), read, append the batches of ``append_dir``, validate and atomically write.

    The source: a built-in ``dataset`` (its shipped files under ``raw_root``, checksums verified) or a user's
    (``dataset`` in ``raw_root``, its ``source`` entry of ``base.datasets``, or a ``tu_dir`` / ``smiles_csv`` /
    ``parquet`` source named ``name``: :class:`flows.config.ingest.IngestPaths`); the store: ``out`` (default
    ``data/graphs/<NAME>.parquet``).  ``cfg`` (:class:`flows.config.ingest.IngestStageConfig`, checked when built;
    None: the defaults) says how it is read.

    ``append_dir`` holds batches of new graphs (TU folders, SMILES ``.csv``, graph-store ``.parquet``),
    appended in name order after the base source; old graphs keep their ids, features and task.
    A SMILES source is converted by ``cfg.workers`` processes (auto: the cores this process may use, see
    :mod:`tasks.cpus`; ``cfg.limit``: its first molecules only).  An unlabelled pool (MOSES) is stored without
    labels, as a real pool is; ``cfg.standin`` (a rule of :data:`tmdlib.datasets._smiles.STANDIN_RULES`, e.g.
    ``logp``) fills in the flagged benchmark label stand-in instead, for benchmark mode only.

    The task (``cfg.task``: auto or a type) is decided from the labels (:mod:`tmdlib.datasets._task`); a built-in
    dataset brings its own (and its label / split / kept columns) unless another is asked for.  A user's CSV
    without named label columns uses its ``y`` or ``label`` column if it has one, and its ``split`` column when
    none is named (``""``: none).

    ``cfg.invalid``: ``skip`` (default) leaves a SMILES rdkit cannot parse out of the store and lists it with its
    line and reason in ``<store>.invalid.csv`` beside it (:func:`tasks.ingest.invalid_report_path`; an appended
    batch is still refused whole); ``refuse`` stops at the first one.  A molecule store's summary also counts the
    structures stored more than once (``duplicates``).  ``cfg.id_column``: the SMILES CSV's column of the user's
    compound ids, stored as ``compound_id`` and carried to the requests and the predictions (None: a column named
    like one, :func:`tmdlib.datasets.sources.id_column_of`; ``""``: none).
    """
    cfg = cfg if cfg is not None else IngestStageConfig()
    paths = IngestPaths(dataset, source, tu_dir, smiles_csv, parquet, name, raw_root, out, append_dir)
    kind, store = paths.resolved.kind, paths.store
    summary = _ingest(paths, cfg, [] if kind == "smiles" and cfg.invalid == "skip" else None)
    skipped = summary.pop("invalid", None) or []
    summary["invalid"] = len(skipped)
    summary["invalid_report"] = write_invalid_report(store, skipped)
    if kind == "smiles":
        summary["duplicates"] = count_duplicates(store)
    return summary


def _ingest(paths: IngestPaths, cfg: IngestStageConfig, skipped: list | None) -> dict:
    src, out = paths.resolved, paths.store
    if src.checksum_folder is not None and paths.raw_root is not None:
        verify_checksums(paths.raw_root, src.checksum_folder)
    info = tds.DATASETS.get(src.name) if src.checksum_folder is not None else None
    reading, builtin_task = plan_reading(src, info, cfg.reading(src.name))
    base = file_columns(src.path, reading, find_id=info is None) if src.kind == "smiles" else reading
    batches = batch_sources(paths.append_dir)
    if src.kind == "smiles" and not batches:  # streamed into the store, a row group per chunk
        summary = write_smiles_store(src.path, out, src.name, base, cfg.workers,
                                     task_source="builtin" if builtin_task else None, skip_invalid=skipped is not None)
        return {**summary, "batches": []}
    if src.kind == "parquet" and not batches and not builtin_task:  # validated and copied a slice at a time
        summary = copy_parquet_store(src.path, out, src.name, task=reading.task)
        return {**summary, "batches": []}
    table = read_source(src.kind, src.path, src.name, base, cfg.workers, skipped)
    if builtin_task:  # the registry's task, not one the user asked for
        table = with_task(table, replace(table_task(table), source="builtin"))
    if batches:  # named columns as for the base; a batch's own y / label / split columns otherwise
        table = append_batches(table, batches, reading.node_attributes, reading.smiles_column, reading.label_columns,
                               split_column=reading.split_column, keep_columns=reading.keep_columns)
    summary = write_graph_store(table, out)
    return {**summary, "batches": [b[0] for b in batches], "invalid": skipped}
