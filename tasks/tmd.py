"""TMD tasks: pair lists now; sharded matrix blocks with the pipeline."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from prefect import task

from tmdlib import GraphDataset

from . import io


@task(name="tmd-pairs", persist_result=False)
def tmd_pairs(ds: GraphDataset, i: np.ndarray, j: np.ndarray, depth: int, weights) -> np.ndarray:
    """TMD of each listed pair (positions into ``ds``), shape ``(len(i),)``."""
    from tmdlib.tmd import tmd_pairs as _pairs

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
