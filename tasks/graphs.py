"""Reading the graph store and small CSV inputs, shared by every stage."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from prefect import task

from tmdlib import GraphDataset, InputError


@task(name="load-graph-store", persist_result=False)
def load_graph_store(path: str) -> GraphDataset:
    """Read and validate ``data/graphs/<DATASET>.parquet`` into a :class:`GraphDataset`."""
    from tmdlib.datasets import read_graph_parquet

    if not Path(path).exists():
        raise InputError(path, "graph store not found (run `tmdsub ingest` first)")
    return GraphDataset.from_arrow(read_graph_parquet(path))


def read_id_pairs(path: str, known_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Read a CSV with integer columns ``i,j`` of graph ids; return row positions into ``known_ids``.

    Raises :class:`InputError` naming the file, the (1-based, header = 1) line and the problem.
    """
    from .io import read_text_csv

    table = read_text_csv(path, ("i", "j"), what="pairs file")
    lookup = {int(g): k for k, g in enumerate(known_ids)}
    out = []
    for col in ("i", "j"):
        values = table.column(col).to_pylist()
        pos = np.empty(len(values), dtype=np.int64)
        for row, v in enumerate(values):
            try:
                gid = int(v)
            except (TypeError, ValueError):
                raise InputError(path, f"column {col!r}: {v!r} is not an integer graph id", line=row + 2) from None
            if gid not in lookup:
                raise InputError(path, f"column {col!r}: graph id {gid} is not in the dataset", line=row + 2)
            pos[row] = lookup[gid]
        out.append(pos)
    return out[0], out[1]


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


def store_segments(path: str, n: int) -> list[int]:
    """Graph counts of the base and of each appended batch of a graph store (``[n]`` without batches)."""
    import json

    import pyarrow.parquet as pq

    from tmdlib.datasets.append import META_BATCHES

    meta = pq.read_schema(path).metadata or {}
    batches = [int(c) for _name, c in json.loads(meta.get(META_BATCHES.encode(), b"[]"))]
    return [n - sum(batches)] + batches


def store_graph_ids(path: str) -> np.ndarray:
    """The ``graph_id`` column of a Parquet file (graph store, label requests); nothing else is read."""
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=["graph_id"]).column("graph_id").to_numpy()
