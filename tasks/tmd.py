"""TMD tasks: pair lists now; the matrix's blocks with the pipeline (planned by :mod:`tmdlib.distance.blocks`)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from prefect import task

from tmdlib import GraphDataset
from tmdlib.distance.blocks import chunk_file

from . import io


@task(name="tmd-pairs", persist_result=False)
def tmd_pairs(ds: GraphDataset, i: np.ndarray, j: np.ndarray, depth: int, weights) -> np.ndarray:
    """TMD of each listed pair (positions into ``ds``), shape ``(len(i),)``."""
    from tmdlib.distance import tmd_pairs as _pairs

    return _pairs(ds, i, j, depth=depth, weights=weights)


@task(name="write-pairs-csv", persist_result=False)
def write_pairs_csv(out: str, ids_i: np.ndarray, ids_j: np.ndarray, values: np.ndarray) -> str:
    """Write ``i,j,tmd`` atomically (full float precision)."""
    import pyarrow.csv as pacsv

    table = pa.table({"i": pa.array(ids_i, pa.int64()), "j": pa.array(ids_j, pa.int64()),
                      "tmd": pa.array(values, pa.float64())})
    with io.atomic_path(out) as tmp:
        pacsv.write_csv(table, tmp)
    return out



def record_chunks(cache_dir: str, hashes: list[str], chunks: list[tuple[int, int]]) -> None:
    """Record the hash list of every chunk of a plan (:func:`tmdlib.distance.blocks.chunk_file`; atomic, idempotent)."""
    for a, b in chunks:
        path = chunk_file(cache_dir, hashes[a:b])
        if not path.exists():
            io.write_json(path, hashes[a:b])


@task(name="tmd-block", retries=2, retry_delay_seconds=1, persist_result=False)
def compute_block(rows: GraphDataset, cols: GraphDataset | None, depth: int, weights,
                  threads: int | None = None) -> np.ndarray:
    """One block of the TMD matrix from the block's own graphs (``cols=None``: the symmetric block of ``rows``).

    The graphs travel with the task (compact arrays), and the values travel back: a worker needs no
    file of the client's, so local processes and a Dask cluster on other machines run the same task.
    The client writes the block file.
    """
    from tmdlib.distance import tmd_block, tmd_matrix

    if cols is None:
        values = tmd_matrix(rows, depth=depth, weights=weights, num_threads=threads)
    else:
        values = tmd_block(rows, cols, depth=depth, weights=weights, num_threads=threads)
    return np.asarray(values, dtype=np.float64)
