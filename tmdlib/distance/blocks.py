"""The full TMD matrix planned as blocks: chunks of consecutive graphs, blocks keyed by content, the merge.

A *chunk* is a run of consecutive graphs that forms one side of blocks; a *block* ``(r0, r1, c0, c1)`` covers
rows ``r0:r1`` and columns ``c0:c1`` of the upper triangle (``r0 <= c0``).  Chunks used before are recorded (by
the content hashes of their graphs) in ``<cache>/chunks/`` (:func:`chunk_file`); a new plan reuses every old
chunk it finds again (:func:`plan_chunks`), so after graphs are appended (or removed) every block between two old
chunks has the same content key (:func:`block_key`) as before and only blocks touching new graphs are computed.
The cache folder is the caller's; the blocks' values are computed by :func:`tmdlib.distance._engine.tmd_block` /
:func:`~tmdlib.distance._engine.tmd_matrix` and assembled by :func:`merge_blocks`; a finished matrix is checked
against the meta written beside it by :func:`check_matrix_meta`.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from .._graph import GraphDataset

__all__ = ["blocks_of_chunks", "chunk_index", "chunk_file", "plan_chunks", "block_pairs", "block_key", "read_block",
           "block_shape", "block_graphs", "matrix_memory_bytes", "check_matrix_fits", "merge_blocks",
           "check_matrix_meta"]


def blocks_of_chunks(chunks: list[tuple[int, int]]) -> list[tuple[int, int, int, int]]:
    """Upper-triangular blocks: one per pair ``a <= b`` of consecutive position ranges ``chunks``."""
    return [(r0, r1, c0, c1) for a, (r0, r1) in enumerate(chunks) for (c0, c1) in chunks[a:]]


def chunk_index(cache_dir: str) -> dict[str, list[list[str]]]:
    """Chunks recorded in ``cache_dir/chunks``: first graph hash -> hash lists, longest first."""
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


def chunk_file(cache_dir: str | Path, hashes: list[str]) -> Path:
    """The file recording one chunk (its graphs' content hashes ``hashes``, a JSON list) under ``cache_dir/chunks``:
    named by a hash of the list, so recording a chunk twice writes one file."""
    name = hashlib.sha256("|".join(hashes).encode()).hexdigest()[:32]
    return Path(cache_dir) / "chunks" / f"{name}.json"


def plan_chunks(hashes: list[str], block_size: int, index: dict[str, list[list[str]]]) -> list[tuple[int, int]]:
    """Split positions ``0..n-1`` into chunks, reusing recorded chunks where the graphs match.

    Walking the graphs in order, a recorded chunk (the longest, of at most ``block_size`` graphs, so a
    smaller block size is honoured) whose hash list matches the graphs starting here is taken whole;
    graphs matched by none are grouped into new chunks of at most ``block_size``.  With an empty index
    this is the plain split into ``block_size`` runs.

    Parameters
    ----------
    hashes : list of str, length n
        Content hash of each graph, in matrix order.
    block_size : int
        Most graphs per chunk (at least 1).
    index : dict
        :func:`chunk_index` of the cache: first graph hash -> recorded hash lists, longest first.

    Returns
    -------
    list of (int, int)
        Consecutive position ranges ``[start, stop)`` covering ``0..n-1`` in order.
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

    Parameters
    ----------
    hashes : list of str
        Content hash of each graph, in matrix order.
    block : (int, int, int, int)
        ``(r0, r1, c0, c1)``.
    depth : int
    weights : array_like
        The resolved level weights, length ``depth``.

    Returns
    -------
    str
        32 hex digits of sha256 over the engine fingerprint, depth, weights, then the row graphs' hashes, ``"|"``
        and the column graphs' hashes.
    """
    from ._fingerprint import engine_fingerprint

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
    from ..datasets.limits import format_size, memory_budget
    from .._errors import InputError

    need = matrix_memory_bytes(n, block_size)
    avail = memory_budget()
    if need > avail:
        raise InputError(path, f"the {n} x {n} TMD matrix needs {format_size(need)} of memory to assemble "
                               f"({format_size(8 * n * n)} float64 plus block buffers), but only {format_size(avail)} is "
                               f"available; run on a machine with more memory, or select on a subset")
    return need


def block_graphs(ds: GraphDataset, block: tuple[int, int, int, int]) -> tuple[GraphDataset, GraphDataset | None]:
    """The graphs a block needs: rows, and columns unless the block is symmetric."""
    r0, r1, c0, c1 = block
    rows = ds.take(np.arange(r0, r1))
    return rows, (None if (r0, r1) == (c0, c1) else ds.take(np.arange(c0, c1)))


def merge_blocks(n: int, blocks: list[tuple[int, int, int, int]], paths: list[str]) -> np.ndarray:
    """Assemble the symmetric ``(n, n)`` matrix with zero diagonal from finished blocks.

    Parameters
    ----------
    n : int
        Graphs in the matrix.
    blocks : list of (int, int, int, int)
        The plan (:func:`blocks_of_chunks`): block ``(r0, r1, c0, c1)`` fills ``M[r0:r1, c0:c1]`` and its transpose.
    paths : list of str
        The ``.npy`` file of each block (:func:`read_block`), aligned with ``blocks``.

    Returns
    -------
    ndarray of float64, shape (n, n)

    Raises
    ------
    RuntimeError
        A block file is missing or has the wrong shape.
    """
    mat = np.zeros((n, n), dtype=np.float64)
    for (r0, r1, c0, c1), p in zip(blocks, paths):
        values = read_block(p, (r1 - r0, c1 - c0))
        if values is None:
            raise RuntimeError(f"TMD block {p} is missing or has the wrong shape")
        mat[r0:r1, c0:c1] = values
        mat[c0:c1, r0:r1] = values.T
    np.fill_diagonal(mat, 0.0)
    return mat


def check_matrix_meta(matrix: str, meta, meta_path, graphs: str, store_hash, depth: int, weights) -> dict:
    """Refuse a TMD matrix that is not the one ``meta`` describes, or that was made for another store, depth or
    weights.

    Parameters
    ----------
    matrix : str
        The matrix file (``.npy``): its sha256 is checked against ``matrix_sha256`` (a matrix edited, reordered or
        swapped after it was written is refused).
    meta : object
        The matrix's meta document as read (a dict when well-formed).
    meta_path : str or Path
        Its file, named in the messages.
    graphs : str
        The graph store the command was given (named in the message).
    store_hash : str or callable
        That store's :func:`tmdlib.datasets._identity.store_content_hash`, or a function returning it (called only
        when the meta records one: :data:`~tmdlib.datasets._identity.STORE_HASH_KEY`).
    depth : int
    weights : str or array_like
        As given; compared after :func:`tmdlib.distance._weights.resolve_weights`.

    Returns
    -------
    dict
        ``meta``.

    Raises
    ------
    InputError
        Naming the matrix and every mismatch (both hashes where they differ), in one line.
    """
    from ..datasets._checksums import sha256_file
    from ..datasets._identity import STORE_HASH_KEY
    from .._errors import InputError
    from ._weights import resolve_weights

    problems = []
    recorded = meta.get("matrix_sha256")
    if recorded is not None and Path(matrix).is_file():
        actual = sha256_file(matrix)
        if actual != recorded:
            problems.append(f"matrix sha256 {actual[:16]}... is not the {recorded[:16]}... its meta.json records (the "
                            "file changed after the tmd stage wrote it)")
    want = meta.get(STORE_HASH_KEY)
    if want is not None:
        have = store_hash() if callable(store_hash) else store_hash
        if want != have:
            problems.append(f"graph store content sha256 {str(want)[:16]}... != {graphs}'s {have[:16]}...")
    if "depth" in meta and meta["depth"] != depth:
        problems.append(f"depth {meta['depth']} != --depth {depth}")
    elif "weights" in meta:
        mine = resolve_weights(depth, weights)
        try:
            theirs = np.asarray(meta["weights"], dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError(meta_path, f"'weights' must be a list of numbers, got {meta['weights']!r}") from None
        if theirs.shape != mine.shape or not np.allclose(theirs, mine, rtol=1e-12, atol=0.0):
            problems.append(f"weights {theirs.tolist()} != --weights {mine.tolist()}")
    if problems:
        raise InputError(matrix, f"TMD matrix does not match this run ({meta_path}): {'; '.join(problems)} "
                                 f"(recompute it with `tmdsub tmd-matrix` for this store, depth and weights)")
    return meta
