"""The experiment's distance matrices: what names a cached matrix, how each is computed, what each took.

Each of the three distances between two graphs (TMD, Feature, WL) does not depend on the other graphs, so the
matrices of *all* graphs are computed once per dataset and every trial slices its training rows out of them
(slicing equals recomputing on the training set).  A cached matrix is named by the graphs and the distance
parameters (:func:`dataset_key`) and by the code that computes it (:func:`code_fingerprint`): after any change
of that code, or of the libraries it runs on, the name changes and a stale matrix is never read.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from .._errors import InputError
from .._graph import GraphDataset
from ._grid import DEPTH, WEIGHTS

__all__ = ["MATRICES", "dataset_key", "code_fingerprint", "matrix_file", "compute_matrix", "merge_matrix_seconds",
           "check_matrix_seconds", "progress_line"]

#: The distance matrices a grid may read (:func:`tmdlib.experiment._grid.needed_matrices`).
MATRICES = ("tmd", "feature", "wl")


def dataset_key(ds: GraphDataset) -> str:
    """Content hash of the graphs and of the distance parameters (:data:`~tmdlib.experiment._grid.DEPTH`,
    :data:`~tmdlib.experiment._grid.WEIGHTS`): 16 hex digits of a sha256.

    Every array of ``ds`` (``x``, ``node_ptr``, ``edge_ptr``, ``src``, ``dst``) enters with a header naming it,
    its dtype and its shape, then its bytes.
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
    versions); ``"feature"`` / ``"wl"``: the source of :mod:`tmdlib.select._baselines` and the numpy,
    scipy and grakel versions.
    """
    if matrix == "tmd":
        from ..distance._fingerprint import engine_fingerprint

        return engine_fingerprint()
    from importlib.metadata import PackageNotFoundError, version

    from ..select import _baselines as baselines

    h = hashlib.sha256(Path(baselines.__file__).read_bytes())
    for pkg in ("numpy", "scipy", "grakel"):
        try:
            h.update(f"\n{pkg} {version(pkg)}".encode())
        except PackageNotFoundError:
            h.update(f"\n{pkg} absent".encode())
    return h.hexdigest()


def matrix_file(matrix: str, key: str) -> str:
    """The cache file name of ``matrix`` (one of :data:`MATRICES`) for the dataset ``key``:
    ``<matrix>-<16 hex digits of sha256(key | code_fingerprint(matrix))>.npy``."""
    return f"{matrix}-{hashlib.sha256(f'{key}|{code_fingerprint(matrix)}'.encode()).hexdigest()[:16]}.npy"


def compute_matrix(ds: GraphDataset, matrix: str, threads: int = 1) -> np.ndarray:
    """The ``(n, n)`` float64 distance matrix ``matrix`` of all graphs of ``ds``: ``tmd`` (depth
    :data:`~tmdlib.experiment._grid.DEPTH`, weights :data:`~tmdlib.experiment._grid.WEIGHTS`, ``threads`` numba
    threads), ``feature`` or ``wl`` (3 iterations; :mod:`tmdlib.select._baselines`)."""
    if matrix == "tmd":
        from ..distance._engine import tmd_matrix

        out = tmd_matrix(ds, DEPTH, WEIGHTS, num_threads=threads)
    elif matrix == "feature":
        from ..select._baselines import feature_distance_matrix

        out = feature_distance_matrix(ds)
    elif matrix == "wl":
        from ..select._baselines import wl_distance_matrix

        out = wl_distance_matrix(ds, iterations=3)
    else:
        raise ValueError(f"unknown matrix {matrix!r}: {', '.join(MATRICES)}")
    return np.asarray(out, dtype=np.float64)


def merge_matrix_seconds(recorded: dict, seconds: dict | None) -> dict:
    """``{dataset: {matrix: seconds}}``: ``seconds`` over ``recorded`` per (dataset, matrix) (None values
    skipped), datasets left with no time dropped."""
    merged = {d: dict(t) for d, t in recorded.items()}
    for d, t in (seconds or {}).items():
        merged.setdefault(d, {}).update({m: float(v) for m, v in t.items() if v is not None})
    return {d: t for d, t in merged.items() if t}


def check_matrix_seconds(data, where=None) -> dict:
    """``data`` as ``{dataset: {matrix: seconds}}`` with float seconds.

    Raises
    ------
    InputError
        Naming ``where`` when ``data`` is not such a mapping of numbers.
    """
    ok = isinstance(data, dict) and all(
        isinstance(t, dict) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in t.values())
        for t in data.values())
    if not ok:
        raise InputError(where, "expected {dataset: {matrix: seconds}} with numeric seconds")
    return {d: {m: float(v) for m, v in t.items()} for d, t in data.items()}


def progress_line(name: str, done: int, total: int, elapsed: float) -> str:
    """``NAME: done/total models (elapsed s, ETA s)``: the ETA at the mean time per model so far."""
    return f"{name}: {done}/{total} models ({elapsed:.0f} s, ETA {elapsed / max(done, 1) * (total - done):.0f} s)"
