"""Reading the graph store, shared by every stage; the artifacts made from it checked against it
(:func:`tmdlib.datasets._identity.check_same_store`, :func:`check_matrix_meta`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from prefect import task

from tmdlib import GraphDataset, InputError
from tmdlib.store import GraphStore, streamed_store_hash


@task(name="load-graph-store", persist_result=False)
def load_graph_store(path: str) -> GraphDataset:
    """Read and validate ``data/graphs/<DATASET>.parquet`` into a :class:`GraphDataset` (:attr:`Store.dataset`)."""
    return open_store(path).dataset


def matrix_path(path: str | None) -> str | None:
    """``path``, or None when the TMD stage chose the scalable engine and wrote no matrix.

    That stage leaves ``meta.json`` with ``"matrix": false`` beside where the matrix would be; a path
    with neither file is returned as is (the loader then reports it missing).
    """
    import json
    from pathlib import Path

    if path is None or Path(path).exists():
        return path
    meta = Path(path).with_name("meta.json")
    try:
        if json.loads(meta.read_text(encoding="utf-8")).get("matrix") is False:
            return None
    except (OSError, ValueError, AttributeError):
        pass
    return path


def load_matrix(path: str, n: int) -> np.ndarray:
    """The TMD matrix (``.npy``, rows/cols in graph-store order, never pickled), checked to be ``(n, n)``."""
    try:
        mat = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(path, "TMD matrix not found (run `tmdsub tmd-matrix` first)") from None
    except (ValueError, OSError, EOFError) as err:
        raise InputError(path, f"not a readable .npy matrix: {err}") from None
    if mat.shape != (n, n):
        raise InputError(path, f"TMD matrix has shape {mat.shape}, the graph store has {n} graphs")
    if not np.all(np.isfinite(mat)):
        raise InputError(path, "TMD matrix has non-finite entries")
    return np.asarray(mat, dtype=np.float64)


# --------------------------------------------------------------------------------- artifacts that belong together
def _hash_cache_file(path: str) -> Path | None:
    """Where the content hash of the store file at ``path`` is remembered: a file under ``$TMDSUB_HASH_CACHE``
    (default ``~/.cache/tmdsub/store-hashes``) named by the file's real path, size, modification time (ns), inode
    and device; a store rewritten (an atomic replace is a new inode) gets another name.  None when ``path`` cannot
    be stat'ed or ``TMDSUB_HASH_CACHE`` is ``off``."""
    import hashlib
    import os

    root = os.environ.get("TMDSUB_HASH_CACHE", "")
    if root == "off":
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = f"{os.path.realpath(path)}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|{st.st_dev}"
    base = Path(root) if root else Path.home() / ".cache" / "tmdsub" / "store-hashes"
    return base / (hashlib.sha256(key.encode()).hexdigest() + ".txt")


def streamed_content_hash(path: str, progress=None) -> str:
    """:func:`tmdlib.store.streamed_store_hash` of the store at ``path`` (the store's content hash, a
    chunk of graphs at a time, without the pool in memory: MOSES, 10 GB).

    Remembered per store file (:func:`_hash_cache_file`): the stages after ingest each check their inputs against
    the store, and a pass over 1.58 M molecules takes ~40 s; the file's identity, not its content, keys it."""
    from . import io

    cached = _hash_cache_file(path)
    if cached is not None and cached.is_file():
        value = cached.read_text().strip()
        if len(value) == 64:
            return value
    value = streamed_store_hash(path, progress)
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            io.write_text(cached, value + "\n")
        except OSError:  # a read-only home: the hash is computed again next time
            pass
    return value


def check_matrix_meta(matrix: str, graphs: str, store_hash, depth: int, weights, trust: bool = False) -> dict | None:
    """Refuse a TMD matrix that is not the one its ``meta.json`` (beside it) describes, or that was made for another
    store, depth or weights (:func:`tmdlib.distance.blocks.check_matrix_meta`).

    A matrix without ``meta.json`` is refused unless ``trust`` (``--trust-matrix``: the user vouches for it; it is
    then used unchecked).  Returns the meta (None when trusted without one).
    """
    import json

    from tmdlib.distance.blocks import check_matrix_meta as check

    meta_path = Path(matrix).with_name("meta.json")
    if not meta_path.is_file():
        if trust:
            return None
        raise InputError(matrix, f"no {meta_path.name} beside this TMD matrix, so nothing says which graph store, "
                                 "depth and weights it was computed for; recompute it with `tmdsub tmd-matrix`, or "
                                 "pass --trust-matrix to use it unchecked")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InputError(meta_path, f"not a readable TMD meta file: {err}") from None
    return check(matrix, meta, meta_path, graphs, store_hash, depth, weights)


# --------------------------------------------------------------------------------- the store as one object
class Store(GraphStore):
    """The stage's graph store (:class:`tmdlib.store.GraphStore`), its streamed content hash remembered per store file
    (:func:`streamed_content_hash`)."""

    def __init__(self, path: str):
        super().__init__(path, missing="graph store not found (run `tmdsub ingest` first)")

    def streamed_hash(self) -> str:
        return streamed_content_hash(self.path)


def open_store(path: str) -> Store:
    """The graph store at ``path`` as a :class:`Store` (nothing read yet but its existence)."""
    return Store(path)
