"""Tasks of the scalable TMD coreset: parts on workers, and the caches that make a killed run resume.

* :func:`part_mapper` -- the pipeline's ``map_parts`` for
  :func:`tmdlib.select.scalable.scalable_coreset` (and ``tmd_coreset(..., engine="scalable")``): one part
  solved here with its exact pairs persisted, several parts fanned out as Prefect tasks and cached.
* :func:`solve_parts_task` -- a few parts (:class:`tmdlib.select.scalable.PartSpec`) as one Prefect task run.
  A spec carries its part's graphs (compact arrays) and the task returns arrays: a worker needs no file of the
  client's, so local processes and a Dask cluster on other machines run it alike.
* :class:`PartCache` -- finished parts, one ``.npz`` each under ``<cache>/parts/``, named by a hash of the
  part's graph contents, its budget, the selection parameters and the engine's fingerprint.  Written by
  the client as results arrive; a rerun skips every finished part.
* :class:`PairStore` -- exact TMD pairs of a run solved in this process (a single part, e.g. DD),
  appended to ``<cache>/pairs/`` in chunks as they are computed; a rerun loads them, and the
  (deterministic) algorithm replays without recomputing any stored pair.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np
from prefect import task

from tmdlib import GraphDataset
from tmdlib.select.scalable import PartResult, PartSpec, part_engine, solve_part

from . import io


class PartBatch:
    """The specs of one task run, boxed: runners walk a list argument (Prefect, to resolve futures in it) and may
    rebuild what they walk (Dask turned each :class:`~tmdlib.select.scalable.PartSpec` of a list, and Prefect's
    ``quote``, into plain tuples); an object of its own they pass as it is."""

    __slots__ = ("specs",)

    def __init__(self, specs):
        self.specs = list(specs)


@task(name="coreset-parts", retries=1, retry_delay_seconds=1, persist_result=False)
def solve_parts_task(batch: PartBatch) -> list[PartResult]:
    """:func:`tmdlib.select.scalable.solve_part` of a few parts, one after the other, in one task run (runs
    wherever the task runner puts it; how many: :func:`parts_per_task`)."""
    return [solve_part(spec) for spec in batch.specs]


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()


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
    """

    def __init__(self, cache_dir: str | Path, hashes: list[str], params: dict):
        from tmdlib.distance.fingerprint import engine_fingerprint

        self.dir = Path(cache_dir) / "parts"
        self.hashes = hashes
        self.base = _digest("coreset-part-1", engine_fingerprint(), sorted(params.items()))
        io.remove_stale_temps(self.dir) if self.dir.exists() else None

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
        try:
            with np.load(path, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        except (OSError, ValueError, KeyError):
            return None

    @staticmethod
    def save(path: Path, result: dict) -> None:
        def writer(p):
            with open(p, "wb") as fh:
                np.savez(fh, **{k: np.asarray(v) for k, v in result.items()})
        io._write_with(path, writer)


class PairStore:
    """Exact TMD values of graph pairs, persisted in chunks, keyed by the graphs' content hashes.

    The store is sharded by part: the pairs of a part (for a single-part run, the pool) live under
    ``<cache>/pairs/<part key>/``, the key a digest of the part's graphs and the TMD parameters, so a run
    reads only the pairs of its own graphs (a DD selection does not load NCI1's pairs), whatever else the
    cache holds.  :attr:`loaded` counts the stored pairs read, :attr:`reused` those of them the run asked for.
    Chunks of the older flat layout (directly under ``pairs/``) are not read.
    """

    def __init__(self, cache_dir: str | Path, hashes: list[str], depth: int, weights, flush_every: int | None = None,
                 flush_seconds: float = 5.0):
        from tmdlib.distance.fingerprint import engine_fingerprint

        root = Path(cache_dir) / "pairs"
        salt = _digest("tmd-pair-1", engine_fingerprint(), depth, list(np.asarray(weights, float).tolist()))
        # one 64-bit id per graph (content hash + parameters); a pair's key is the two ids, smaller first
        self.ids = np.array([int(_digest(salt, h)[:16], 16) for h in hashes], dtype=np.uint64)
        self.shard = _digest("pair-shard-1", salt, *np.unique(self.ids).tolist())[:24]
        self.dir = root / self.shard
        self.dir.mkdir(parents=True, exist_ok=True)
        io.remove_stale_temps(self.dir)
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
        PartCache.save(self.dir / f"{name}.npz", {"a": a, "b": b, "v": v})
        self.pending, self.npending = [], 0


class Progress:
    """One status line on stderr with the elapsed time and, for counted work, an ETA."""

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


def _stub(specs, i: int) -> PartSpec:
    """Spec ``i`` without reading its graphs where ``specs`` can (a :class:`~tmdlib.select.scalable.PartPlan`)."""
    return specs.stub(i) if hasattr(specs, "stub") else specs[i]


@contextlib.contextmanager
def outside_parent_task():
    """Submit tasks from inside a task as if from the flow: Prefect's process and Dask runners ship the serialized
    context with every submitted task, and a task's context includes *its* parameters -- for the select task, the
    pool and everything passed with it, copied into every part's payload (measured: 1.8 GB peak for a 160,000-graph
    pool).  Outside the parent task's context a part carries only its own graphs."""
    from prefect.context import TaskRunContext

    token = TaskRunContext.__var__.set(None)
    try:
        yield
    finally:
        TaskRunContext.__var__.reset(token)


def release_freed_memory() -> bool:
    """Hand the C heap's free pages back to the system (glibc ``malloc_trim(0)``; elsewhere nothing).

    The client of a long run of parts allocates each part's payload (hundreds of KB, pickled in Prefect's
    resolver thread) and result (unpickled in its result thread) in other threads' malloc arenas; once freed,
    glibc keeps those pages, scattered between live blocks, and the resident memory grew ~0.23 MB per part
    (MOSES 200 k at 1 %, 256 parts) although Python held no more (tracemalloc: flat).  Returns whether it ran.
    """
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (loaded once)."""
    import ctypes
    import ctypes.util

    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), "malloc_trim", None)
    except OSError:
        return None


#: Parts done between two :func:`release_freed_memory` calls of :func:`run_parts`.
TRIM_EVERY = 16

#: Parts submitted and not yet finished at any time (``TMDSUB_PARTS_IN_FLIGHT``): enough to keep every worker
#: of a cluster busy, while the client holds the graphs of only these parts.  They go in task runs of
#: :func:`parts_per_task` parts (8 task runs in flight at 8 parts each): a cluster of more than ~8 workers
#: wants a larger value.
PARTS_IN_FLIGHT = 64

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


def run_parts(specs, cache: PartCache | None, submit=None, in_flight: int | None = None) -> list[PartResult]:
    """Results of every part: cached ones read, the others run and saved.

    At most ``in_flight`` parts are submitted and unfinished at a time, each spec made (its graphs read) just
    before it is submitted, so the client never holds the graphs of the whole pool.  By default the parts go
    to the flow's task runner a few per task run (:func:`solve_parts_task`, :func:`parts_per_task`); each part
    is cached and counted as its task run finishes.

    Parameters
    ----------
    specs : sequence of PartSpec
        One per part (:func:`tmdlib.select.scalable.plan_parts`: a lazy :class:`~tmdlib.select.scalable.PartPlan`).
    cache : PartCache, optional
        Finished parts (None: nothing read or saved).
    submit : callable, optional
        ``submit(spec) -> future`` of one part's :class:`PartResult` (default: :func:`solve_parts_task`
        ``.submit`` of a few specs at a time on the flow's runner).
    in_flight : int, optional
        Default :data:`PARTS_IN_FLIGHT` (or ``TMDSUB_PARTS_IN_FLIGHT``).

    Returns
    -------
    list of PartResult
        Aligned with ``specs``.
    """
    from prefect.futures import as_completed

    paths = [cache.path(_stub(specs, i)) if cache else None for i in range(len(specs))]
    results: list[PartResult | None] = [cache.result(p) if cache else None for p in paths]
    todo = [i for i, r in enumerate(results) if r is None]
    progress = Progress("coreset parts", len(specs), len(specs) - len(todo))
    if len(todo) < len(specs):  # a rerun says what it did not have to solve
        progress.show(f"({len(specs) - len(todo)} read from the cache)")
    per = 1 if submit else parts_per_task(len(todo))
    if per > 1:  # chosen from the parts: say so
        status_line(f"coreset parts: {len(todo)} to solve, {per} per task run (TMDSUB_PARTS_PER_TASK sets it)")
    window = max(1, int(in_flight or os.environ.get("TMDSUB_PARTS_IN_FLIGHT", PARTS_IN_FLIGHT)) // per)
    queue = iter(todo)
    futures: dict = {}
    pairs = solved = 0

    def send(group: list[int]):
        if submit:
            return submit(specs[group[0]])
        return solve_parts_task.submit(PartBatch(specs[i] for i in group))  # boxed: no runner walks or rebuilds it

    def top_up() -> None:
        while len(futures) < window:
            group = [i for _, i in zip(range(per), queue)]  # the next `per` parts (range first: none lost)
            if not group:
                return
            futures[send(group)] = group

    with outside_parent_task():
        top_up()
        while futures:
            for fut in as_completed(list(futures)):
                group = futures.pop(fut)
                done = [fut.result()] if submit else fut.result()
                for i, res in zip(group, done, strict=True):
                    if cache:
                        cache.save(paths[i], res.to_arrays())
                    results[i] = res
                    pairs += int(res.pairs_computed)
                progress.step(len(group), note=f"{pairs} exact pairs this run")
                if (solved + len(group)) // TRIM_EVERY > solved // TRIM_EVERY:  # the freed payloads' and results'
                    release_freed_memory()  # pages, back to the system
                solved += len(group)
                break  # refill the window as soon as one task run is done
            top_up()
    return results  # type: ignore[return-value]


def solve_here(spec: PartSpec, cache_dir: str | Path | None = None, hashes: list[str] | None = None,
               threads: int | None = None) -> PartResult:
    """One part solved in this process; with ``cache_dir`` its exact pairs persisted through :class:`PairStore`
    as they come (a rerun replays the deterministic search from them).  Progress on stderr.

    ``hashes``: content hashes of the part's graphs (default computed); ``threads``: numba threads of the
    exact TMD (default ``spec.num_threads``).
    """
    from tmdlib.distance.weights import resolve_weights

    progress = Progress("coreset (one part)")
    exact = part_engine(spec, threads)
    store = None
    if cache_dir:
        store = PairStore(cache_dir, part_hashes(spec.ds) if hashes is None else hashes, spec.depth,
                          resolve_weights(spec.depth, spec.weights))
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


def part_mapper(cache_dir: str | Path | None, pool, depth: int, weights, seed: int, part_size: int,
                threads: int | None = None, submit=None, hashes=None):
    """The pipeline's ``map_parts`` for :func:`tmdlib.select.scalable.scalable_coreset`, resumable via ``cache_dir``.

    * One part (pools up to ``part_size`` graphs): :func:`solve_here` -- solved in this process, exact
      pairs persisted as they come (:class:`PairStore`).
    * Several parts: one :func:`solve_part_task` each on the running flow's task runner (processes, or a
      Dask cluster), a bounded number in flight, finished parts cached (:class:`PartCache`,
      :func:`run_parts`; nothing cached without ``cache_dir``).

    Progress with an ETA on stderr.

    Parameters
    ----------
    cache_dir : str or Path, optional
    pool : GraphDataset or StoredGraphs
        The pool being selected from (its graphs' content hashes key the caches; computed only if needed).
    depth, weights, seed, part_size
        The selection's parameters (the caches' keys): the specs handed to ``map_parts`` must have the same.
    threads : int, optional
        numba threads of the exact TMD of a part solved here.
    submit : callable, optional
        ``submit(spec) -> future`` (default :func:`solve_part_task` ``.submit``).
    hashes : list of str or ndarray of bytes, optional
        The pool's graph content hashes (:func:`part_hashes`) when the caller already has them.

    Returns
    -------
    callable
        ``map_parts(specs) -> list of PartResult``, aligned with ``specs``.
    """
    from tmdlib.distance.weights import resolve_weights

    weights = resolve_weights(depth, weights)
    params = {"depth": depth, "weights": weights.tolist(), "seed": seed, "part_size": part_size}
    known = [hashes]

    def pool_hashes():
        if known[0] is None:
            known[0] = part_hashes(pool)
        return known[0]

    def map_parts(specs) -> list[PartResult]:
        for s in (_stub(specs, i) for i in range(len(specs))):  # other parameters must not use these keys
            if (s.depth, s.seed) != (depth, seed) or not np.array_equal(resolve_weights(s.depth, s.weights), weights):
                raise ValueError(f"part planned with depth={s.depth}, seed={s.seed}, weights={s.weights!r}; this "
                                 f"mapper was made for depth={depth}, seed={seed}, weights={weights.tolist()}")
        if len(specs) == 1:
            spec = specs[0]
            return [solve_here(spec, cache_dir, [pool_hashes()[i] for i in spec.positions.tolist()] if cache_dir
                               else None, threads)]
        return run_parts(specs, PartCache(cache_dir, pool_hashes(), params) if cache_dir else None, submit)

    return map_parts


def on_disk(array: np.ndarray, folder: str | Path | None = None, index: np.ndarray | None = None,
            chunk: int = 1 << 20) -> np.ndarray:
    """``array`` (or ``array[index]``) as a read-only memory map of a scratch file in ``folder`` that is unlinked
    at once.

    The same values, paged in from disk only when read: an array of one entry per graph that is needed
    late (the pool's content hashes, read when the parts' caches are looked up) takes no memory in between,
    while the partition's passes run.  With ``index`` the entries are gathered ``chunk`` at a time into the file,
    never copied whole (the training pool's hashes of 10⁷ molecules: 512 MB).  No file is left behind, whatever
    happens next.
    """
    import tempfile

    array = np.asarray(array)
    index = None if index is None else np.asarray(index, dtype=np.int64)
    size = len(array) if index is None else index.size
    Path(folder or tempfile.gettempdir()).mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=folder, prefix="tmdsub-", suffix=".npy") as fh:  # unlinked on close
        out = np.lib.format.open_memmap(fh.name, mode="w+", dtype=array.dtype, shape=(size,))
        for start in range(0, size, chunk):
            stop = start + chunk
            out[start:stop] = array[start:stop] if index is None else array[index[start:stop]]
        out.flush()
        del out
        return np.load(fh.name, mmap_mode="r")  # the mapping outlives the file's name


def part_hashes(ds, progress=None):
    """Content hash of each graph (the TMD stage's block hashes), in pool order.

    A pool in memory: a list of hex strings.  A pool read from its store a chunk at a time
    (:class:`~tmdlib.datasets.stored.StoredGraphs`): an ndarray of 64-byte ASCII hex (``S64``; 64 bytes per graph
    instead of ~120 for a Python string), with status lines to ``progress`` (e.g. :func:`status_line`) while
    the store is read.  The caches key parts and pairs by the same bytes either way.
    """
    from tmdlib.datasets.identity import graph_hashes
    from tmdlib.select.scalable import Countdown

    if isinstance(ds, GraphDataset):
        return graph_hashes(ds)
    return ds.map_chunks(graph_hashes, np.empty(0, dtype="S64"),
                         progress=Countdown("content hashes (reading the store)", len(ds), progress))


def status_line(line: str) -> None:
    """A status line of a long stage, on stderr (where :class:`Progress` writes)."""
    print(line, file=sys.stderr, flush=True)
