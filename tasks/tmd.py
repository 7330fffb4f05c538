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
    from tmdlib.distance.engine import tmd_pairs as _pairs

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


# ----------------------------------------------------------------------------------------------
# Sharded, resumable TMD matrix
# ----------------------------------------------------------------------------------------------
def blocks_of_chunks(chunks: list[tuple[int, int]]) -> list[tuple[int, int, int, int]]:
    """Upper-triangular blocks: one per pair ``a <= b`` of consecutive position ranges ``chunks``."""
    return [(r0, r1, c0, c1) for a, (r0, r1) in enumerate(chunks) for (c0, c1) in chunks[a:]]


# A chunk is a run of consecutive graphs that forms one side of blocks.  Chunks used before are
# recorded (by the content hashes of their graphs) in ``<cache>/chunks/``; a new plan reuses every
# old chunk it finds again, so after graphs are appended (or removed) every block between two old
# chunks has the same content key as before and only blocks touching new graphs are computed.

def chunk_index(cache_dir: str) -> dict[str, list[list[str]]]:
    """Chunks recorded in ``cache_dir/chunks``: first graph hash -> hash lists, longest first."""
    import json
    from pathlib import Path

    index: dict[str, list[list[str]]] = {}
    folder = Path(cache_dir) / "chunks"
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            hashes = json.loads(f.read_text())
        except (OSError, ValueError):
            continue  # a damaged index entry only costs reuse, never correctness
        if isinstance(hashes, list) and hashes and all(isinstance(h, str) for h in hashes):
            index.setdefault(hashes[0], []).append(hashes)
    for lists in index.values():
        lists.sort(key=len, reverse=True)
    return index


def record_chunks(cache_dir: str, hashes: list[str], chunks: list[tuple[int, int]]) -> None:
    """Record the hash list of every chunk of a plan (atomic, idempotent)."""
    import hashlib
    from pathlib import Path

    for a, b in chunks:
        part = hashes[a:b]
        name = hashlib.sha256("|".join(part).encode()).hexdigest()[:32]
        path = Path(cache_dir) / "chunks" / f"{name}.json"
        if not path.exists():
            io.write_json(path, part)


def plan_chunks(hashes: list[str], block_size: int, index: dict[str, list[list[str]]]) -> list[tuple[int, int]]:
    """Split positions ``0..n-1`` into chunks, reusing recorded chunks where the graphs match.

    Walking the graphs in order, a recorded chunk (the longest, of at most ``block_size`` graphs, so a
    smaller block size is honoured) whose hash list matches the graphs starting here is taken whole;
    graphs matched by none are grouped into new chunks of at most ``block_size``.  With an empty index
    this is the plain split into ``block_size`` runs.
    """
    n, b = len(hashes), max(1, block_size)
    chunks: list[tuple[int, int]] = []
    pending = None

    def flush(end: int) -> None:
        chunks.extend((s, min(s + b, end)) for s in range(pending, end, b))

    i = 0
    while i < n:
        match = next((c for c in index.get(hashes[i], ()) if len(c) <= b and hashes[i:i + len(c)] == c), None)
        if match is None:
            pending = i if pending is None else pending
            i += 1
            continue
        if pending is not None:
            flush(i)
            pending = None
        chunks.append((i, i + len(match)))
        i += len(match)
    if pending is not None:
        flush(n)
    return chunks


def block_pairs(block: tuple[int, int, int, int]) -> int:
    """Graph pairs a block computes: ``m(m-1)/2`` on the diagonal, ``rows x cols`` off it."""
    r0, r1, c0, c1 = block
    return (r1 - r0) * (r1 - r0 - 1) // 2 if (r0, r1) == (c0, c1) else (r1 - r0) * (c1 - c0)


def block_key(hashes: list[str], block: tuple[int, int, int, int], depth: int, weights) -> str:
    """Content hash naming a block file: the graphs it covers, every parameter and the engine's code.

    The engine enters by :func:`tmdlib.distance.engine_fingerprint` (its source files and the numpy and
    numba versions): after any change of the engine every block is recomputed, never served stale.
    """
    import hashlib
    import json

    from tmdlib.distance.fingerprint import engine_fingerprint

    r0, r1, c0, c1 = block
    h = hashlib.sha256()
    h.update(json.dumps({"engine": engine_fingerprint(), "depth": int(depth),
                         "weights": np.asarray(weights, dtype=float).tolist()}).encode())
    for part in (hashes[r0:r1], ["|"], hashes[c0:c1]):
        for s in part:
            h.update(s.encode())
    return h.hexdigest()[:32]


def read_block(path, shape: tuple[int, int] | None = None) -> np.ndarray | None:
    """A finished block, or None if absent, unreadable or not ``shape`` float64 (then it is recomputed).

    Writes are atomic (temporary file + fsync + rename), so a torn block never has the final name;
    the checks here also reject a block damaged afterwards, which is then recomputed and replaced.
    """
    from pathlib import Path

    p = Path(path)
    if not p.exists():
        return None
    try:
        values = np.load(p, allow_pickle=False)
    except (ValueError, OSError, EOFError):
        return None
    if values.dtype != np.float64 or (shape is not None and values.shape != tuple(shape)):
        return None
    return values


def block_shape(block: tuple[int, int, int, int]) -> tuple[int, int]:
    """``(rows, cols)`` of a planned block."""
    r0, r1, c0, c1 = block
    return r1 - r0, c1 - c0


def matrix_memory_bytes(n: int, block_size: int) -> int:
    """Peak memory of the merge: the ``n x n`` float64 matrix plus two blocks in flight."""
    b = min(max(1, block_size), max(n, 1))
    return 8 * n * n + 2 * 8 * b * b


def check_matrix_fits(n: int, block_size: int, path: str | None = None) -> int:
    """Refuse up front (InputError) a matrix whose merge would not fit in memory; returns the bytes needed."""
    from tmdlib import InputError
    from tmdlib.datasets.limits import format_size, memory_budget

    need = matrix_memory_bytes(n, block_size)
    avail = memory_budget()
    if need > avail:
        raise InputError(path, f"the {n} x {n} TMD matrix needs {format_size(need)} of memory to assemble "
                               f"({format_size(8 * n * n)} float64 plus block buffers), but only {format_size(avail)} is "
                               f"available; run on a machine with more memory, or select on a subset")
    return need


@task(name="tmd-block", retries=2, retry_delay_seconds=1, persist_result=False)
def compute_block(rows: GraphDataset, cols: GraphDataset | None, depth: int, weights,
                  threads: int | None = None) -> np.ndarray:
    """One block of the TMD matrix from the block's own graphs (``cols=None``: the symmetric block of ``rows``).

    The graphs travel with the task (compact arrays), and the values travel back: a worker needs no
    file of the client's, so local processes and a Dask cluster on other machines run the same task.
    The client writes the block file.
    """
    from tmdlib.distance.engine import tmd_block, tmd_matrix

    if cols is None:
        values = tmd_matrix(rows, depth=depth, weights=weights, num_threads=threads)
    else:
        values = tmd_block(rows, cols, depth=depth, weights=weights, num_threads=threads)
    return np.asarray(values, dtype=np.float64)


def block_graphs(ds: GraphDataset, block: tuple[int, int, int, int]) -> tuple[GraphDataset, GraphDataset | None]:
    """The graphs a block needs: rows, and columns unless the block is symmetric."""
    r0, r1, c0, c1 = block
    rows = ds.take(np.arange(r0, r1))
    return rows, (None if (r0, r1) == (c0, c1) else ds.take(np.arange(c0, c1)))


def merge_blocks(n: int, blocks: list[tuple[int, int, int, int]], paths: list[str]) -> np.ndarray:
    """Assemble the symmetric ``(n, n)`` matrix with zero diagonal from finished blocks."""
    mat = np.zeros((n, n), dtype=np.float64)
    for (r0, r1, c0, c1), p in zip(blocks, paths):
        values = read_block(p, (r1 - r0, c1 - c0))
        if values is None:
            raise RuntimeError(f"TMD block {p} is missing or has the wrong shape")
        mat[r0:r1, c0:c1] = values
        mat[c0:c1, r0:r1] = values.T
    np.fill_diagonal(mat, 0.0)
    return mat
