r"""What makes a killed scalable selection resume: finished parts and exact pairs cached by content, in a folder the
caller names, and one part solved here with its pairs persisted as they come.

* :class:`PartCache` -- finished parts, one ``.npz`` each under ``<cache>/parts/``, named by a hash of the
  part's graph contents, its budget, the selection parameters and the engine's fingerprint; a rerun skips every
  finished part.
* :class:`PairStore` -- exact TMD pairs of a part solved in this process (a single part, e.g. DD), appended to
  ``<cache>/pairs/<part key>/`` in chunks as they are computed; a rerun loads them, and the (deterministic)
  search replays without recomputing any stored pair (:func:`solve_here`).
* :func:`part_hashes` -- the graphs' content hashes that key both; :func:`check_part_params` -- the parts handed
  to a cache's mapper were planned with the parameters that key it.
* :func:`parts_per_task` -- how many parts one unit of work of a runner solves; :class:`Progress` and
  :func:`status_line` -- the status lines on stderr.

How a file is written and what an interrupted writer left is cleaned is the caller's (:class:`CacheFiles`: the
pipeline writes atomically); every reader here treats an unreadable file as absent, so a torn one is recomputed.
"""
from __future__ import annotations

import hashlib
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..._graph import GraphDataset
from ._parts import PartSpec, part_engine, solve_part
from ._swaps import PartResult

__all__ = ["CacheFiles", "PartCache", "PairStore", "Progress", "status_line", "parts_per_task", "MAX_PARTS_PER_TASK",
           "MIN_TASK_RUNS", "spec_stub", "check_part_params", "solve_here", "part_hashes", "write_npz"]


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()


def write_npz(path: Path, arrays: dict) -> None:
    """``arrays`` as one ``.npz`` at ``path`` (its folder made): the default writer of :class:`CacheFiles`."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        np.savez(fh, **{k: np.asarray(v) for k, v in arrays.items()})


def _keep_all(folder: Path) -> None:
    """Nothing to clean: the default of :class:`CacheFiles`."""


@dataclass(frozen=True)
class CacheFiles:
    """How the caches write their files and clean their folders.

    Attributes
    ----------
    write : callable
        ``write(path, arrays)``: one ``.npz`` of the dict ``arrays`` at ``path`` (default :func:`write_npz`; the
        pipeline's writes atomically).
    tidy : callable
        ``tidy(folder)``: removes what a killed writer left in ``folder`` (default: nothing).
    """

    write: Callable[[Path, dict], object] = write_npz
    tidy: Callable[[Path], object] = _keep_all


class PartCache:
    """Finished parts of a scalable selection, keyed by content (see the module docstring).

    Parameters
    ----------
    cache_dir : str or Path
        Parts go to ``<cache_dir>/parts/``.
    hashes : list of str
        Content hash of each graph of the pool (:func:`part_hashes`).
    params : dict
        The selection parameters every part shares (depth, resolved weights, seed, part size).
    files : CacheFiles, optional
        How parts are written and the folder cleaned (default :class:`CacheFiles`).
    """

    def __init__(self, cache_dir: str | Path, hashes: list[str], params: dict, files: CacheFiles | None = None):
        from ...distance._fingerprint import engine_fingerprint

        self.dir = Path(cache_dir) / "parts"
        self.hashes = hashes
        self.files = files or CacheFiles()
        self.base = _digest("coreset-part-1", engine_fingerprint(), sorted(params.items()))
        self.files.tidy(self.dir) if self.dir.exists() else None

    def path(self, spec: PartSpec) -> Path:
        """The file of a part: hash of its graphs' contents, its budget, its search's candidates per cluster (when
        not the default) and its masks."""
        masks = (spec.candidates, spec.fixed)
        search = () if spec.per_cluster is None else (f"per_cluster={int(spec.per_cluster)}",)
        key = _digest(self.base, spec.k, spec.max_pairs, *search, *(self.hashes[i] for i in spec.positions.tolist()),
                      *(b"" if m is None else np.packbits(np.asarray(m, bool)).tobytes() for m in masks))
        return self.dir / f"{key}.npz"

    def result(self, path: Path) -> PartResult | None:
        """The part stored at ``path``, or ``None`` (absent or unreadable: solve it again)."""
        arrays = self.load(path) if path.exists() else None
        try:
            return None if arrays is None else PartResult.from_arrays(arrays)
        except KeyError:
            return None

    @staticmethod
    def load(path: Path) -> dict | None:
        """The arrays of an ``.npz`` file, or None when it cannot be read."""
        try:
            with np.load(path, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        except (OSError, ValueError, KeyError):
            return None

    def save(self, path: Path, result: dict) -> None:
        """Write a finished part's arrays (:meth:`PartResult.to_arrays`) at ``path``."""
        self.files.write(path, result)


class PairStore:
    """Exact TMD values of graph pairs, persisted in chunks, keyed by the graphs' content hashes.

    The store is sharded by part: the pairs of a part (for a single-part run, the pool) live under
    ``<cache>/pairs/<part key>/``, the key a digest of the part's graphs and the TMD parameters, so a run
    reads only the pairs of its own graphs (a DD selection does not load NCI1's pairs), whatever else the
    cache holds.  :attr:`loaded` counts the stored pairs read, :attr:`reused` those of them the run asked for.
    Chunks of the older flat layout (directly under ``pairs/``) are not read.

    Parameters
    ----------
    cache_dir : str or Path
        Pairs go to ``<cache_dir>/pairs/<part key>/``.
    hashes : list of str or ndarray of bytes
        Content hash of each graph of the part (:func:`part_hashes`), in the part's order.
    depth : int
    weights : array_like
        The resolved level weights (they key the pairs with the depth and the engine's fingerprint).
    flush_every : int, optional
        New pairs per chunk (default ``TMDSUB_PAIR_FLUSH`` or 25,000).
    flush_seconds : float, default 5.0
        A chunk is written at least this often while pairs come.
    files : CacheFiles, optional
        How chunks are written and the folder cleaned.
    """

    def __init__(self, cache_dir: str | Path, hashes: list[str], depth: int, weights, flush_every: int | None = None,
                 flush_seconds: float = 5.0, files: CacheFiles | None = None):
        from ...distance._fingerprint import engine_fingerprint

        root = Path(cache_dir) / "pairs"
        salt = _digest("tmd-pair-1", engine_fingerprint(), depth, list(np.asarray(weights, float).tolist()))
        # one 64-bit id per graph (content hash + parameters); a pair's key is the two ids, smaller first
        self.ids = np.array([int(_digest(salt, h)[:16], 16) for h in hashes], dtype=np.uint64)
        self.shard = _digest("pair-shard-1", salt, *np.unique(self.ids).tolist())[:24]
        self.dir = root / self.shard
        self.dir.mkdir(parents=True, exist_ok=True)
        self.files = files or CacheFiles()
        self.files.tidy(self.dir)
        self.legacy = sum(1 for _ in root.glob("*.npz"))  # the older flat layout: not read
        self.values: dict[tuple[int, int], float] = {}
        for f in sorted(self.dir.glob("*.npz")):
            chunk = PartCache.load(f)
            if chunk is None:
                continue
            for a, b, v in zip(chunk["a"].tolist(), chunk["b"].tolist(), chunk["v"].tolist()):
                self.values[(a, b)] = v
        self.loaded = len(self.values)
        self.fresh: dict[tuple[int, int], float] = {}  # pairs computed by this run (where contents repeat)
        self.new = 0  # pairs computed by this run
        self.reused = 0
        self.pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (a, b, v) not yet in a chunk
        self.npending = 0
        # a chunk every flush_every new pairs (TMDSUB_PAIR_FLUSH) or flush_seconds, whichever comes first
        self.flush_every = int(flush_every or os.environ.get("TMDSUB_PAIR_FLUSH", 25_000))
        self.flush_seconds = float(flush_seconds)
        self.last_flush = time.monotonic()

    def wrap(self, exact):
        """``exact(i, j)`` that serves stored pairs (counted in :attr:`reused`) and stores the new ones.

        With nothing stored and no two graphs of the same content (a part's first run: the common case), no pair
        can be served, and the pairs go to ``exact`` and into the pending chunk as arrays, with no work per pair
        in Python (MOSES: 40 M pairs)."""
        distinct = np.unique(self.ids).size == self.ids.size

        def cached(i, j):
            i, j = np.asarray(i, np.int64), np.asarray(j, np.int64)
            a, b = self.ids[i], self.ids[j]
            lo, hi = np.minimum(a, b), np.maximum(a, b)
            if distinct and not self.values:
                out = np.asarray(exact(i, j), dtype=np.float64)
                self._keep(lo, hi, out)
                return out
            lo_l, hi_l = lo.tolist(), hi.tolist()
            out = np.empty(i.size)
            miss = []
            for k, key in enumerate(zip(lo_l, hi_l)):
                v = self.values.get(key)
                if v is not None:
                    self.reused += 1
                else:
                    v = self.fresh.get(key)  # computed this run (two graphs with the same content)
                if v is None:
                    miss.append(k)
                else:
                    out[k] = v
            if miss:
                miss = np.asarray(miss)
                vals = np.asarray(exact(i[miss], j[miss]), dtype=np.float64)
                out[miss] = vals
                for k, v in zip(miss.tolist(), vals.tolist()):
                    self.fresh[(lo_l[k], hi_l[k])] = v
                self._keep(lo[miss], hi[miss], vals)
            return out
        return cached

    def _keep(self, a: np.ndarray, b: np.ndarray, v: np.ndarray) -> None:
        """Queue new pairs for the next chunk; write it when due."""
        self.pending.append((a, b, v))
        self.npending += a.size
        self.new += a.size
        if self.npending >= self.flush_every or time.monotonic() - self.last_flush > self.flush_seconds:
            self.flush()

    def flush(self) -> None:
        """Write the pairs computed since the last flush as one chunk (atomically)."""
        self.last_flush = time.monotonic()
        if not self.pending:
            return
        a, b, v = (np.concatenate(x) for x in zip(*self.pending))
        a, b, v = a.astype(np.uint64), b.astype(np.uint64), v.astype(np.float64)
        name = _digest(*a.tolist()[:4], *b.tolist()[:4], len(a), time.time_ns())[:24]
        self.files.write(self.dir / f"{name}.npz", {"a": a, "b": b, "v": v})
        self.pending, self.npending = [], 0


class Progress:
    """One status line on stderr with the elapsed time and, for counted work, an ETA.

    Parameters
    ----------
    what : str
        What is counted (the line's head).
    total : int, optional
        The work to do (None: no count, the elapsed time only).
    done : int, default 0
        Work already done when counting starts (a rerun's cached parts: left out of the ETA's rate).
    """

    def __init__(self, what: str, total: int | None = None, done: int = 0):
        self.what, self.total, self.done, self.start_done, self.t0 = what, total, done, done, time.monotonic()

    def step(self, n: int = 1, note: str = "") -> None:
        self.done += n
        self.show(note)

    def show(self, note: str = "") -> None:
        el = time.monotonic() - self.t0
        if self.total:
            new = self.done - self.start_done
            eta = 0.0 if self.done >= self.total else el / new * (self.total - self.done) if new else float("nan")
            head = f"{self.done}/{self.total} ({100.0 * self.done / self.total:5.1f}%), ETA {eta:7.1f}s"
        else:
            head = ""
        print(f"{self.what}: {head}{', ' if head else ''}elapsed {el:7.1f}s {note}", file=sys.stderr, flush=True)


def spec_stub(specs, i: int) -> PartSpec:
    """Spec ``i`` without reading its graphs where ``specs`` can (a :class:`~tmdlib.select.scalable.PartPlan`)."""
    return specs.stub(i) if hasattr(specs, "stub") else specs[i]


#: Most parts one task run solves (:func:`parts_per_task`), and the task runs a long run of parts is cut
#: into at least.
MAX_PARTS_PER_TASK = 8
MIN_TASK_RUNS = 64


def parts_per_task(parts: int) -> int:
    """Parts one task run solves when ``parts`` parts are to be solved (``TMDSUB_PARTS_PER_TASK`` sets it).

    Every task run costs Prefect's bookkeeping (its states through the API, a payload and a result through the
    runner): ~0.1 CPU s in the worker and ~0.04 s in the API server, measured on MOSES 200 k's 256 parts of ~0.9
    CPU s (BENCHMARKS.md).  So a run of at least 2 x :data:`MIN_TASK_RUNS` parts is dealt in task runs of up to
    :data:`MAX_PARTS_PER_TASK` parts -- still at least :data:`MIN_TASK_RUNS` of them, so that workers finish
    together (the last task run is a few parts' work) and a failed task run retries a few parts only.
    """
    env = os.environ.get("TMDSUB_PARTS_PER_TASK")
    if env:
        return max(1, int(env))
    return max(1, min(MAX_PARTS_PER_TASK, int(parts) // MIN_TASK_RUNS))


def check_part_params(specs, depth: int, seed: int, weights: np.ndarray) -> None:
    """Refuse parts planned with another depth, seed or weights than those a cache was keyed by.

    Parameters
    ----------
    specs : sequence of PartSpec
        The parts handed to a mapper (only their stubs are read: :func:`spec_stub`).
    depth, seed : int
    weights : ndarray
        The resolved weights the mapper was made for.

    Raises
    ------
    ValueError
        Naming both sets of parameters.
    """
    from ...distance._weights import resolve_weights

    for s in (spec_stub(specs, i) for i in range(len(specs))):  # other parameters must not use these keys
        if (s.depth, s.seed) != (depth, seed) or not np.array_equal(resolve_weights(s.depth, s.weights), weights):
            raise ValueError(f"part planned with depth={s.depth}, seed={s.seed}, weights={s.weights!r}; this "
                             f"mapper was made for depth={depth}, seed={seed}, weights={weights.tolist()}")


def solve_here(spec: PartSpec, cache_dir: str | Path | None = None, hashes: list[str] | None = None,
               threads: int | None = None, files: CacheFiles | None = None) -> PartResult:
    """One part solved in this process; with ``cache_dir`` its exact pairs persisted through :class:`PairStore`
    as they come (a rerun replays the deterministic search from them).  Progress on stderr.

    Parameters
    ----------
    spec : PartSpec
    cache_dir : str or Path, optional
        Where the pairs are kept (None: nothing read or written).
    hashes : list of str, optional
        Content hashes of the part's graphs (default computed: :func:`part_hashes`).
    threads : int, optional
        numba threads of the exact TMD (default ``spec.num_threads``).
    files : CacheFiles, optional
        How the pair chunks are written.

    Returns
    -------
    PartResult
        What :func:`~tmdlib.select.scalable.solve_part` returns, the same with or without the cache.
    """
    from ...distance._weights import resolve_weights

    progress = Progress("coreset (one part)")
    exact = part_engine(spec, threads)
    store = None
    if cache_dir:
        store = PairStore(cache_dir, part_hashes(spec.ds) if hashes is None else hashes, spec.depth,
                          resolve_weights(spec.depth, spec.weights), files=files)
        exact = store.wrap(exact)
        if store.loaded:
            progress.show(f"({store.loaded} exact pairs of these graphs from an earlier run)")
        if store.legacy:
            progress.show(f"({store.legacy} pair chunks of an older cache layout in {store.dir.parent} are not "
                          f"read; delete them to free the disk)")
    try:
        result = solve_part(spec, exact=exact, progress=progress.show)
    finally:
        if store is not None:
            store.flush()
    if store is not None:
        same = result.pairs_computed - store.reused - store.new
        progress.show(f"{result.pairs_computed} exact pairs used: {store.reused} read from the cache "
                      f"({store.loaded} stored), {store.new} computed now"
                      + (f", {same} of graphs identical to a computed pair's" if same else ""))
    return result


def part_hashes(ds, progress=None):
    """Content hash of each graph (the TMD stage's block hashes), in pool order.

    A pool in memory: a list of hex strings.  A pool read from its store a chunk at a time
    (:class:`~tmdlib.datasets._stored.StoredGraphs`): an ndarray of 64-byte ASCII hex (``S64``; 64 bytes per graph
    instead of ~120 for a Python string), with status lines to ``progress`` (e.g. :func:`status_line`) while
    the store is read.  The caches key parts and pairs by the same bytes either way.
    """
    from ...datasets._identity import graph_hashes
    from ._pairs import Countdown

    if isinstance(ds, GraphDataset):
        return graph_hashes(ds)
    return ds.map_chunks(graph_hashes, np.empty(0, dtype="S64"),
                         progress=Countdown("content hashes (reading the store)", len(ds), progress))


def status_line(line: str) -> None:
    """A status line of a long stage, on stderr (where :class:`Progress` writes)."""
    print(line, file=sys.stderr, flush=True)
