"""Experiment tasks: prepare a dataset's distance matrices, run grid cells, keep the results file, write reports.

The protocol itself (grid, one cell, result rows, report pages) is library code in :mod:`tmdlib.experiment`
and :mod:`tmdlib.reporting.paper`; these tasks read inputs, call it, and write outputs atomically.

* :func:`prepare_dataset` -- once per dataset: the TMD, Feature and WL distance matrices of *all* graphs
  (those the grid reads, :func:`tmdlib.experiment._grid.needed_matrices`; computed and named by
  :mod:`tmdlib.experiment.matrices`), cached on disk under ``<cache_dir>/<dataset>/`` (``reports/cache/``,
  ignored by git).
* :func:`run_cell` -- one Prefect task = one (dataset, kind, arch, method, trial) and a list of fractions
  (:func:`tmdlib.experiment.protocol.run_cell`).  Workers load the dataset and the matrices once per process.
* :class:`ResultStore` -- the results CSV, rewritten atomically after each finished cell; a rerun skips
  finished keys (resume).  One writer: the flow process (a lock file refuses a second concurrent writer).
"""
from __future__ import annotations

import functools
import json
import time
from pathlib import Path

import numpy as np
from prefect import task

from tmdlib import GraphDataset, InputError
from tmdlib.datasets import to_dataset
from tmdlib.experiment._grid import DEPTH, WEIGHTS
from tmdlib.experiment.matrices import (MATRICES, check_matrix_seconds, compute_matrix, dataset_key, matrix_file,
                                       merge_matrix_seconds)
from tmdlib.experiment import read_results, row_key, rows_to_csv
from tmdlib.experiment._results import gather_rows

from . import io


# ----------------------------------------------------------------------------------------------
# Per-dataset preparation (once) and per-process loading
# ----------------------------------------------------------------------------------------------
def load_dataset(name: str, raw_root: str) -> GraphDataset:
    """A built-in dataset read from its shipped raw files (``tmdlib.datasets.load_builtin``)."""
    from tmdlib.datasets import load_builtin

    return to_dataset(load_builtin(name, raw_root))


def matrix_paths(cache_dir: str, name: str, key: str) -> dict:
    """Cache file of each distance matrix of dataset ``name`` under ``<cache_dir>/<name>/``, named by ``key``
    and the code that computes it (:func:`tmdlib.experiment.matrices.matrix_file`)."""
    base = Path(cache_dir) / name
    return {m: str(base / matrix_file(m, key)) for m in MATRICES}


@task(name="prepare-dataset", persist_result=False)
def prepare_dataset(name: str, raw_root: str, cache_dir: str, threads: int = 2,
                    matrices: tuple = ("tmd", "feature", "wl")) -> dict:
    """Distance matrices (of ``matrices``: TMD, Feature, WL) of all graphs of ``name``: computed once, cached.

    Returns ``{"graphs", "key", "paths", "seconds", "compute_seconds"}``: ``paths`` of the requested
    matrices; ``seconds`` spent now per matrix (0 if cached); ``compute_seconds`` what computing each
    took when it was computed (kept in the cache's meta file; None if unknown, e.g. an older cache).
    """
    ds = load_dataset(name, raw_root)
    key = dataset_key(ds)
    paths = {m: p for m, p in matrix_paths(cache_dir, name, key).items() if m in matrices}
    meta_path = Path(cache_dir) / name / f"meta-{key}.json"
    known = dict(io.cached_json(meta_path).get("compute_seconds") or {})
    seconds = {}
    for m, path in paths.items():
        t0 = time.perf_counter()
        if not _readable_matrix(path, len(ds)):
            io.write_npy(path, compute_matrix(ds, m, threads))
            seconds[m] = known[m] = round(time.perf_counter() - t0, 2)
        else:
            seconds[m] = 0.0
    if paths:
        io.write_json(meta_path, {"dataset": name, "graphs": len(ds), "depth": DEPTH, "weights": WEIGHTS, "key": key,
                                  "files": {m: Path(p).name for m, p in matrix_paths(cache_dir, name, key).items()},
                                  "compute_seconds": known})
    return {"graphs": len(ds), "key": key, "paths": paths, "seconds": seconds,
            "compute_seconds": {m: known.get(m) for m in paths}}


def _readable_matrix(path: str, n: int) -> bool:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False).shape == (n, n)
    except (OSError, ValueError):
        return False


@functools.lru_cache(maxsize=4)
def _loaded(name: str, raw_root: str, paths_json: str) -> tuple:
    """(dataset, {matrix name: array}) -- once per worker process."""
    ds = load_dataset(name, raw_root)
    mats = {m: np.load(p, allow_pickle=False) for m, p in json.loads(paths_json).items()}
    return ds, mats


@functools.lru_cache(maxsize=64)
def _node_subsample(name: str, raw_root: str, paths_json: str, method: str, fraction: float, seed: int):
    """``(subsample_nodes of every graph, its CPU seconds)`` -- computed once per method/fraction/seed per
    process; a cached call still reports what computing it cost."""
    from tmdlib.select.nodes import subsample_nodes

    ds, _ = _loaded(name, raw_root, paths_json)
    t0 = time.process_time()
    sub = subsample_nodes(ds, fraction=fraction, method=method, depth=DEPTH, weights=WEIGHTS, seed=seed)
    return sub, time.process_time() - t0


# ----------------------------------------------------------------------------------------------
# One cell: (dataset, kind, arch, method, trial) x fractions
# ----------------------------------------------------------------------------------------------
def collect_cells(futures, store, name: str, total: int, t0: float) -> int:
    """Each finished cell's rows appended to ``store`` (:class:`ResultStore`) as the cells complete, a progress line
    on stderr after each (:func:`tmdlib.experiment._results.gather_rows`; ``futures``: one per cell)."""
    import sys

    from prefect.futures import as_completed

    return gather_rows(as_completed(futures), store, name, total, t0,
                       lambda line: print(line, file=sys.stderr, flush=True))


@task(name="experiment-cell", persist_result=False)
def run_cell(spec: dict) -> list[dict]:
    """Train and test one model per fraction (:func:`tmdlib.experiment.protocol.run_cell`).

    ``spec``: ``dataset``, ``raw_root``, ``paths`` (from :func:`prepare_dataset`), ``kind``, ``method``,
    ``arch``, ``trial``, ``epochs``, ``fractions``, ``torch_threads``, ``device``.
    """
    from tmdlib.experiment import protocol

    name, raw_root = spec["dataset"], spec["raw_root"]
    paths_json = json.dumps(spec["paths"], sort_keys=True)
    ds, mats = _loaded(name, raw_root, paths_json)
    return protocol.run_cell(spec, ds, mats, lambda m, f, s: _node_subsample(name, raw_root, paths_json, m, f, s))


# ----------------------------------------------------------------------------------------------
# Results file (resume)
# ----------------------------------------------------------------------------------------------
class ResultStore:
    """``<dir>/<dataset>.csv`` per dataset; each :meth:`append` rewrites the file atomically.

    A crash leaves the previous complete file; a rerun reads it and skips finished keys (a row already stored, or
    twice in one :meth:`append`, is kept once: the first).  ``table``: the results table's ``(read, key, csv)``
    functions (the experiment's, :mod:`tmdlib.experiment._results`, by default).  With ``lock`` the store holds an
    exclusive lock file (``.<dataset>.csv.lock``, ``fcntl.flock``) while open, so two runs cannot write the same
    file.
    """

    def __init__(self, directory: str, dataset: str, table: tuple = (read_results, row_key, rows_to_csv),
                 lock: bool = True):
        import fcntl

        self.path = Path(directory) / f"{dataset}.csv"
        self._read, self._key, self._csv = table
        self._lock = None
        if lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock = open(self.path.parent / f".{self.path.name}.lock", "w")  # noqa: SIM115 - held open
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                self._lock.close()
                raise InputError(str(self.path), "another experiment run is writing this results file") from None
        self.rows = self._read(str(self.path))
        self.keys = {self._key(r) for r in self.rows}

    def done(self, key: tuple) -> bool:
        return key in self.keys

    def append(self, rows: list[dict]) -> None:
        new = []
        for r in rows:
            if self._key(r) not in self.keys:
                self.keys.add(self._key(r))
                new.append(r)
        if new:
            self.rows.extend(new)
            io.write_text(self.path, self._csv(self.rows))

    def close(self) -> None:
        if self._lock is not None:
            self._lock.close()


MATRIX_TIMES = "matrices.json"


def record_matrix_seconds(results_dir: str, seconds: dict) -> dict:
    """Merge ``{dataset: {matrix: seconds}}`` into ``<results_dir>/matrices.json`` (atomic); return the merge.

    The distance-matrix cache is not versioned (``reports/cache/`` is ignored by git), so what each matrix
    took to compute is kept beside the results files: the reports then regenerate from committed files
    alone, with the matrix times, on a clone whose cache is empty.  Newer values replace older ones per
    (dataset, matrix).
    """
    recorded = recorded_matrix_seconds(results_dir)
    merged = merge_matrix_seconds(recorded, seconds)
    if merged != recorded:
        io.write_text(Path(results_dir) / MATRIX_TIMES, json.dumps(merged, indent=1, sort_keys=True) + "\n")
    return merged


def recorded_matrix_seconds(results_dir: str) -> dict:
    """``{dataset: {matrix: seconds}}`` from ``<results_dir>/matrices.json`` ({} if there is none).

    Raises :class:`tmdlib.InputError` naming the file if it is not such a mapping of numbers.
    """
    path = Path(results_dir) / MATRIX_TIMES
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InputError(str(path), f"not readable JSON ({err})") from None
    return check_matrix_seconds(data, str(path))


# ----------------------------------------------------------------------------------------------
# Reports
# ----------------------------------------------------------------------------------------------
@task(name="write-reports", persist_result=False)
def write_reports(results_dir: str, report_dir: str, profile: str, paper_csv: str | None = None,
                  matrix_seconds: dict | None = None) -> dict:
    """Tables (Markdown), plots (PNG) and the summary from every results CSV in ``results_dir``.

    ``matrix_seconds``: ``{dataset: {matrix: seconds}}``, what computing each distance matrix (once per
    dataset) took, reported beside the per-selection costs.
    """
    from tmdlib.reporting.paper import experiment_pages, read_paper

    results = {p.stem: rows for p in sorted(Path(results_dir).glob("*.csv")) if (rows := read_results(str(p)))}
    pages, summaries = experiment_pages(results, read_paper(paper_csv), matrix_seconds, profile)
    return {"files": io.write_pages(report_dir, pages), "summaries": summaries}
