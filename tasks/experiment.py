"""Experiment tasks: prepare a dataset's distance matrices, run grid cells, keep the results file, write reports.

The protocol itself (grid, one cell, result rows, report pages) is library code in :mod:`tmdlib.experiment`
and :mod:`tmdlib.reporting.paper`; these tasks read inputs, call it, and write outputs atomically.

* :func:`prepare_dataset` -- once per dataset: the TMD, Feature and WL distance matrices of *all* graphs
  (those the grid reads, :func:`tmdlib.experiment.grid.needed_matrices`), cached on disk under ``<cache_dir>/<dataset>/`` (``reports/cache/``, ignored by git).  Every trial slices
  its training rows out of them (each of the three distances between two graphs does not depend on the
  other graphs, so slicing equals recomputing on the training set).
* :func:`run_cell` -- one Prefect task = one (dataset, kind, arch, method, trial) and a list of fractions
  (:func:`tmdlib.experiment.protocol.run_cell`).  Workers load the dataset and the matrices once per process.
* :class:`ResultStore` -- the results CSV, rewritten atomically after each finished cell; a rerun skips
  finished keys (resume).  One writer: the flow process (a lock file refuses a second concurrent writer).
"""
from __future__ import annotations

import functools
import hashlib
import json
import time
from pathlib import Path

import numpy as np
from prefect import task

from tmdlib import GraphDataset, InputError
from tmdlib.datasets import to_dataset
from tmdlib.experiment.grid import DEPTH, WEIGHTS
from tmdlib.experiment.results import read_results, row_key, rows_to_csv

from . import io


# ----------------------------------------------------------------------------------------------
# Per-dataset preparation (once) and per-process loading
# ----------------------------------------------------------------------------------------------
def load_dataset(name: str, raw_root: str) -> GraphDataset:
    """A built-in dataset read from its shipped raw files (``tmdlib.datasets.load_builtin``)."""
    from tmdlib.datasets import load_builtin

    return to_dataset(load_builtin(name, raw_root))


def dataset_key(ds: GraphDataset) -> str:
    """Content hash of the graphs and of the distance parameters (names the cache's meta file).

    Every array enters with a header naming it, its dtype and its shape, then its bytes.
    """
    h = hashlib.sha256(f"{DEPTH}|{WEIGHTS}".encode())
    for name in ("x", "node_ptr", "edge_ptr", "src", "dst"):
        arr = np.ascontiguousarray(getattr(ds, name))
        h.update(f"\n{name} {arr.dtype.str} {arr.shape}\n".encode())
        h.update(arr.tobytes())
    return h.hexdigest()[:16]


def code_fingerprint(matrix: str) -> str:
    """What the values of a cached matrix depend on in code, besides the graphs and parameters.

    ``"tmd"``: :func:`tmdlib.distance.engine_fingerprint` (the engine's source files, numpy and numba
    versions); ``"feature"`` / ``"wl"``: the source of :mod:`tmdlib.select.baselines` and the numpy,
    scipy and grakel versions.
    """
    if matrix == "tmd":
        from tmdlib.distance.fingerprint import engine_fingerprint

        return engine_fingerprint()
    from importlib.metadata import PackageNotFoundError, version

    from tmdlib.select import baselines

    h = hashlib.sha256(Path(baselines.__file__).read_bytes())
    for pkg in ("numpy", "scipy", "grakel"):
        try:
            h.update(f"\n{pkg} {version(pkg)}".encode())
        except PackageNotFoundError:
            h.update(f"\n{pkg} absent".encode())
    return h.hexdigest()


def matrix_paths(cache_dir: str, name: str, key: str) -> dict:
    """Cache file of each distance matrix of dataset ``name``: named by ``key`` and :func:`code_fingerprint`.

    After any change of the code that computes a matrix (or of the libraries it runs on) its file name
    changes, so a stale matrix is never read; the other matrices stay cached.
    """
    base = Path(cache_dir) / name
    return {m: str(base / f"{m}-{hashlib.sha256(f'{key}|{code_fingerprint(m)}'.encode()).hexdigest()[:16]}.npy")
            for m in ("tmd", "feature", "wl")}


@task(name="prepare-dataset", persist_result=False)
def prepare_dataset(name: str, raw_root: str, cache_dir: str, threads: int = 2,
                    matrices: tuple = ("tmd", "feature", "wl")) -> dict:
    """Distance matrices (of ``matrices``: TMD, Feature, WL) of all graphs of ``name``: computed once, cached.

    Returns ``{"graphs", "key", "paths", "seconds", "compute_seconds"}``: ``paths`` of the requested
    matrices; ``seconds`` spent now per matrix (0 if cached); ``compute_seconds`` what computing each
    took when it was computed (kept in the cache's meta file; None if unknown, e.g. an older cache).
    """
    from tmdlib import tmd_matrix
    from tmdlib.select import baselines

    ds = load_dataset(name, raw_root)
    key = dataset_key(ds)
    paths = {m: p for m, p in matrix_paths(cache_dir, name, key).items() if m in matrices}
    compute = {"tmd": lambda: tmd_matrix(ds, DEPTH, WEIGHTS, num_threads=threads),
               "feature": lambda: baselines.feature_distance_matrix(ds),
               "wl": lambda: baselines.wl_distance_matrix(ds, iterations=3)}
    meta_path = Path(cache_dir) / name / f"meta-{key}.json"
    try:
        old = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        old = {}
    known = dict(old.get("compute_seconds") or {})
    seconds = {}
    for m, path in paths.items():
        t0 = time.perf_counter()
        if not _readable_matrix(path, len(ds)):
            io.write_npy(path, np.asarray(compute[m](), dtype=np.float64))
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
    """Each finished cell's rows appended to ``store`` as the cells complete (the experiment and the molecules
    benchmark), a progress line with an ETA on stderr after each; a failed cell does not stop the others.

    Parameters
    ----------
    futures : list of PrefectFuture
        One per cell, each giving its rows (a list of dicts).
    store
        Where rows go (``store.append(rows)``: :class:`ResultStore`, :class:`tasks.molecules.MoleculeResults`).
    name : str
        The dataset, in the progress lines.
    total : int
        Rows (models) the cells will give, for the ETA.
    t0 : float
        ``time.perf_counter()`` when the dataset's work began.

    Returns
    -------
    int
        Rows appended.

    Raises
    ------
    RuntimeError
        After every cell finished, when some failed (how many, and the first error).
    """
    import sys

    from prefect.futures import as_completed

    done, failures = 0, []
    for fut in as_completed(futures):
        try:
            rows = fut.result()
        except Exception as err:  # noqa: BLE001 - keep the other cells' rows; report at the end
            failures.append(str(err))
            continue
        store.append(rows)
        done += len(rows)
        el = time.perf_counter() - t0
        print(f"{name}: {done}/{total} models ({el:.0f} s, ETA {el / max(done, 1) * (total - done):.0f} s)",
              file=sys.stderr, flush=True)
    if failures:
        raise RuntimeError(f"{name}: {len(failures)} cells failed, first: {failures[0]}")
    return done


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

    A crash leaves the previous complete file; a rerun reads it and skips finished keys.  The store
    holds an exclusive lock file (``.<dataset>.csv.lock``, ``fcntl.flock``) while open, so two runs
    cannot write the same file.
    """

    def __init__(self, directory: str, dataset: str):
        import fcntl

        self.path = Path(directory) / f"{dataset}.csv"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.path.parent / f".{self.path.name}.lock", "w")  # noqa: SIM115 - held open
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            raise InputError(str(self.path), "another experiment run is writing this results file") from None
        self.rows = read_results(str(self.path))
        self.keys = {row_key(r) for r in self.rows}

    def done(self, key: tuple) -> bool:
        return key in self.keys

    def append(self, rows: list[dict]) -> None:
        new = [r for r in rows if row_key(r) not in self.keys]
        if not new:
            return
        self.rows.extend(new)
        self.keys.update(row_key(r) for r in new)
        io.write_text(self.path, rows_to_csv(self.rows))

    def close(self) -> None:
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
    merged = {d: dict(t) for d, t in recorded.items()}
    for d, t in (seconds or {}).items():
        merged.setdefault(d, {}).update({m: float(v) for m, v in t.items() if v is not None})
    merged = {d: t for d, t in merged.items() if t}
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
    ok = isinstance(data, dict) and all(
        isinstance(t, dict) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in t.values())
        for t in data.values())
    if not ok:
        raise InputError(str(path), "expected {dataset: {matrix: seconds}} with numeric seconds")
    return {d: {m: float(v) for m, v in t.items()} for d, t in data.items()}


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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tmdlib.reporting.paper import dataset_report, read_paper, summary_markdown
    from tmdlib.reporting.tables import plot_curves

    paper = read_paper(paper_csv)
    files, summaries = [], []
    for csv_path in sorted(Path(results_dir).glob("*.csv")):
        rows = read_results(str(csv_path))
        if not rows:
            continue
        name = csv_path.stem
        text, summ, panels = dataset_report(name, rows, paper, (matrix_seconds or {}).get(name))
        summaries += summ
        md_path = Path(report_dir) / f"{name}.md"
        io.write_text(md_path, text)
        files.append(str(md_path))
        fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.6), squeeze=False)
        for ax, (title, cells, methods, ptmd) in zip(axes[0], panels):
            plot_curves(ax, cells, methods, ptmd, title=f"{name}: {title}", ylabel=f"test {rows[0]['metric']}")
        fig.tight_layout()
        png = Path(report_dir) / f"{name}.png"
        with io.atomic_path(png) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
        plt.close(fig)
        files.append(str(png))
    if summaries:
        sp = Path(report_dir) / "summary.md"
        io.write_text(sp, summary_markdown(summaries, profile))
        files.append(str(sp))
    return {"files": files, "summaries": summaries}
