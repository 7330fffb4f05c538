r"""The parts of a pool: one part solved where it lands (:class:`PartSpec`, :func:`solve_part`, small parts on their
full matrix), the pool split into parts of similar structure (:func:`partition`, :func:`pool_embedding`) and
planned with their budgets (:func:`plan_parts`, a lazy :class:`PartPlan`); the sizes and budgets themselves are
decided in :mod:`tmdlib.select._plan`."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from ...distance._lower import LowerBound, structure_embedding
from ..._graph import GraphDataset
from .._plan import (_bisection, _give_fixed_room, auto_per_cluster, part_budgets, resolve_max_pairs,
                    resolve_part_size)
from ._pairs import Countdown, Exact, PairCache, ProgressFn
from ._swaps import PartResult, SearchStats, refine_kmedoids

__all__ = ["EXHAUSTIVE_PART", "PartSpec", "part_engine", "solve_part", "partition", "pool_embedding", "PartPlan",
           "plan_parts", "solve_in_order"]


#: Parts of at most this many graphs are solved on their full exact matrix (n(n-1)/2 pairs, fewer than
#: the search would spend), exactly as the exact engine does: same FasterPAM restarts, same medoids.
EXHAUSTIVE_PART = 64


def _exhaustive(cache: PairCache, k: int, seed: int, candidates, fixed, restarts: int = 5) -> PartResult:
    """k-medoids of a small part on its full exact matrix (the exact engine's algorithm)."""
    from .._coreset import assign_to_medoids, kmedoids_coreset

    n = cache.n
    iu, ju = np.triu_indices(n, 1)
    D = np.zeros((n, n))
    D[iu, ju] = cache.get(iu, ju)
    D[ju, iu] = D[iu, ju]
    res = kmedoids_coreset(D, min(k, n), seed=seed, restarts=restarts, candidates=candidates, fixed=fixed)
    med, assignment, _ = assign_to_medoids(D, res.medoids)
    return PartResult(med, assignment, D[np.arange(n), assignment], cache.computed, proxy_loss=float(res.loss),
                      stats=SearchStats(exhaustive=True))


@dataclass(frozen=True, eq=False)
class PartSpec:
    """One part of a pool, self-contained: all :func:`solve_part` needs, so it can be solved anywhere.

    Picklable (it travels to process and Dask workers with the part's graphs).

    Attributes
    ----------
    ds : GraphDataset or None
        The part's ``m`` graphs (None in :meth:`PartPlan.stub`).
    k : int
        The part's share of the budget (never below its fixed medoids).
    positions : ndarray of int64, shape (m,)
        Positions of the part's graphs in the pool.
    depth, weights
        TMD parameters.
    seed : int
    candidates, fixed : ndarray of bool, shape (m,), optional
        Graphs of the part allowed to / required to be medoids.
    max_pairs : float, optional
        The part's share of the budget of exact pairs (``max_pairs * m / n``).
    num_threads : int, optional
        numba threads of the exact TMD computations.
    per_cluster : int, optional
        Swap candidates tried per cluster and round (:func:`refine_kmedoids`; default its own, 4).
    """

    ds: GraphDataset
    k: int
    positions: np.ndarray
    depth: int = 4
    weights: Any = "pascal"
    seed: int = 0
    candidates: np.ndarray | None = None
    fixed: np.ndarray | None = None
    max_pairs: float | None = None
    num_threads: int | None = None
    per_cluster: int | None = None


def part_engine(spec: PartSpec, num_threads: int | None = None):
    """The exact engine of one part: a :class:`~tmdlib.distance._engine.PairEngine` on ``spec.ds`` told that the
    search will ask for about every graph's distance to every medoid (``m k`` pairs; more where the bounds
    prune little), so that molecules' parts make their table of trees at once.  ``num_threads``: default
    ``spec.num_threads``."""
    from ...distance._engine import PairEngine

    return PairEngine(spec.ds, spec.depth, spec.weights,
                      num_threads=spec.num_threads if num_threads is None else num_threads,
                      expected_pairs=len(spec.ds) * int(spec.k))


def solve_part(spec: PartSpec, exact: Exact | None = None, progress: ProgressFn | None = None) -> PartResult:
    """Solve one part: :func:`refine_kmedoids` of its graphs with exact TMD on demand.

    Parts of at most :data:`EXHAUSTIVE_PART` graphs are solved on their full exact matrix instead.

    Parameters
    ----------
    spec : PartSpec
    exact : callable, optional
        ``exact(i, j) -> d`` on positions of ``spec.ds`` (e.g. a persisted store in front of the engine).
        Default: :func:`part_engine` of ``spec``.
    progress : callable, optional
        Called with a status line after the proxy and after each swap round, and every 10 s while exact
        pairs are computed (:meth:`PairCache.status`: the phase, its ETA, the pairs and the budget).

    Returns
    -------
    PartResult
        In positions of ``spec.ds``; ``pairs_computed`` and ``seconds`` of this call.
    """
    from threadpoolctl import threadpool_limits

    t0 = time.perf_counter()
    if exact is None:
        exact = part_engine(spec)
    cache = PairCache(exact, len(spec.ds), progress=progress, size=spec.ds.nodes_per_graph)
    # a part's BLAS calls are small (the feature table's SVD, a few hundred pairs' least squares); BLAS threads
    # left spinning after them take the cores from the numba TMD kernels: 22 % of a MOSES part's time on 2 cores
    with threadpool_limits(limits=1, user_api="blas"):
        if len(spec.ds) <= EXHAUSTIVE_PART:
            out = _exhaustive(cache, int(spec.k), spec.seed, spec.candidates, spec.fixed)
        else:
            lb = LowerBound.of(spec.ds, spec.depth, spec.weights)
            extra = {} if spec.per_cluster is None else {"per_cluster": int(spec.per_cluster)}
            out = refine_kmedoids(lb, cache, int(spec.k), seed=spec.seed, candidates=spec.candidates,
                                  fixed=spec.fixed, max_pairs=spec.max_pairs, progress=progress, **extra)
    return replace(out, pairs_computed=cache.computed, seconds=time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------------- parts of a pool

def partition(emb: np.ndarray, part_size: int, *, chunk: int = 1 << 18,
              progress: ProgressFn | None = None) -> list[np.ndarray]:
    r"""Split graphs ``0..n-1`` into parts of at most ``part_size`` graphs that are close to each other.

    Recursive bisection at the median of the first principal direction of ``emb`` (one row per graph,
    e.g. :func:`tmdlib.distance._lower.structure_embedding`), so a part holds graphs of similar structure;
    deterministic.  A group :math:`I` of :math:`m` graphs is split by the order of
    :math:`(E_I - \bar E_I)\,v`, where :math:`v` is 20 power iterations
    :math:`v \leftarrow X^\top (X v) / \lVert\cdot\rVert` on the centred rows
    :math:`X = E_I - \bar E_I` from :math:`v_0 = \mathbf 1/\sqrt d`; the first :math:`\lfloor m/2 \rfloor`
    go left.

    Memory is the embedding plus ``O(n)`` indices and one block of ``chunk`` centred rows: ``X`` is never
    formed for a group of more than ``chunk`` graphs (its rows are gathered and centred a block at a time in
    every iteration), so a 10^7-graph pool does not hold a second copy of its embedding.  A group of at most
    ``chunk`` graphs is centred whole, in one block.

    Parameters
    ----------
    emb : ndarray, shape (n, d)
        One row per graph (float32 kept, anything else as float64).
    part_size : int
        Largest part.
    chunk : int, optional
        Rows per block of centred rows (the results depend on it only through floating-point summation order,
        and not at all for groups of at most ``chunk`` graphs).
    progress : callable, optional
        Status lines (:class:`Countdown`): parts made, with an ETA from the rows projected
        (:func:`split_work`).

    Returns
    -------
    list of ndarray of int64
        The parts, each an array of row positions; together a partition of ``0..n-1``.
    """
    emb = np.asarray(emb, dtype=np.float64 if emb.dtype != np.float32 else np.float32)
    chunk = max(int(chunk), 1)
    n = emb.shape[0]
    total_parts, total_work = _bisection(n, part_size)
    status = Countdown("partition", total_parts, progress, unit="parts")
    out: list[np.ndarray] = []
    stack = [np.arange(n)]
    work = 0
    while stack:
        idx = stack.pop()
        if idx.size <= part_size:
            out.append(idx)
            status(len(out), work, total_work)
            continue
        order = np.argsort(_principal_projection(emb, idx, chunk), kind="stable")
        work += idx.size
        half = idx.size // 2
        stack.append(idx[order[half:]])
        stack.append(idx[order[:half]])
    return out


def _principal_projection(emb: np.ndarray, idx: np.ndarray, chunk: int) -> np.ndarray:
    """``(emb[idx] - mean) @ v`` for the top principal direction ``v`` of ``emb[idx]`` (see :func:`partition`).

    A group of at most ``chunk`` rows is centred once, whole; a larger one a block at a time in every pass (the
    whole pool's rows read as slices, a group's gathered).
    """
    m = idx.size
    whole = m == emb.shape[0]  # idx is arange(n)
    if m <= chunk:
        if whole:
            x = emb - emb.mean(axis=0)
        else:
            x = emb[idx]
            x -= x.mean(axis=0)

        def blocks():
            yield x
    else:
        def rows(s: int) -> np.ndarray:
            return emb[s:s + chunk] if whole else emb[idx[s:s + chunk]]

        mean = (sum(rows(s).sum(axis=0, dtype=np.float64) for s in range(0, m, chunk)) / m).astype(emb.dtype)

        def blocks():
            for s in range(0, m, chunk):
                yield rows(s) - mean
    v = np.ones(emb.shape[1], dtype=emb.dtype) / math.sqrt(emb.shape[1])
    for _ in range(20):
        w = np.zeros_like(v)
        for b in blocks():
            w += b.T @ (b @ v)
        nv = np.linalg.norm(w)
        if nv == 0:
            break
        v = w / nv
    return np.concatenate([b @ v for b in blocks()])


def pool_embedding(ds, depth: int = 4, weights="pascal", progress: ProgressFn | None = None) -> np.ndarray:
    """:func:`~tmdlib.distance._lower.structure_embedding` of a pool held in memory, or of one read a chunk at a
    time (:class:`~tmdlib.datasets._stored.StoredGraphs`, with status lines to ``progress``): the same rows, one
    per graph."""
    if isinstance(ds, GraphDataset):
        return structure_embedding(ds, depth, weights)
    return ds.map_chunks(lambda chunk: structure_embedding(chunk, depth, weights),
                         np.zeros((0, int(depth) * 8 + 1), np.float32),
                         progress=Countdown("structure embedding (reading the store)", len(ds), progress))


class PartPlan(Sequence):
    """The parts of a pool as a sequence of :class:`PartSpec`, each made when it is asked for.

    ``plan[p]`` reads part ``p``'s graphs (``pool.take`` in memory, or a
    :class:`~tmdlib.datasets._stored.PartReader` for a pool on disk) and builds its spec, so a mapper that
    holds only the parts in flight holds only their graphs.  :meth:`stub` is the spec without its graphs
    (``ds=None``: budgets, positions and masks, e.g. to key a cache).  :meth:`close` removes a reader's scratch.
    """

    def __init__(self, pool, parts: list[np.ndarray], stubs: list[PartSpec], reader=None):
        self.pool, self.parts, self.stubs, self.reader = pool, parts, stubs, reader

    def __len__(self) -> int:
        return len(self.stubs)

    def __getitem__(self, p):
        if isinstance(p, slice):
            return [self[i] for i in range(*p.indices(len(self)))]
        graphs = self.reader.load(p) if self.reader is not None else self.pool.take(self.parts[p])
        return replace(self.stubs[p], ds=graphs)

    def __iter__(self):
        return (self[p] for p in range(len(self)))

    def stub(self, p: int) -> PartSpec:
        """Part ``p``'s spec without its graphs."""
        return self.stubs[p]

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()


def plan_parts(ds, k: int, depth: int = 4, weights="pascal", *, seed: int = 0, candidates=None,
               fixed=None, part_size: int | str = "auto", max_pairs: float | str | None = "auto",
               num_threads: int | None = None, scratch_dir=None,
               progress: ProgressFn | None = None) -> tuple[list[np.ndarray], PartPlan]:
    """Split a pool into parts and give each its budget.

    Pools of at most ``part_size`` graphs (``"auto"``: :func:`auto_part_size`) are one part; larger ones are
    split by :func:`partition` of their structure embedding (:func:`pool_embedding`).  Budgets:
    :func:`part_budgets`, then every part keeps at least its fixed medoids (the others give way).

    Parameters
    ----------
    ds : GraphDataset or StoredGraphs
        The pool, in memory or read from its store a chunk at a time
        (:class:`~tmdlib.datasets._stored.StoredGraphs`: its graphs are then grouped by part in a scratch file
        under ``scratch_dir``, see :meth:`~tmdlib.datasets._stored.StoredGraphs.part_reader`).
    progress : callable, optional
        Status lines with an ETA of each phase over the whole pool (:class:`Countdown`): the embedding, the
        partition, the grouping by part.

    Returns
    -------
    parts : list of ndarray of int64
        Positions into ``ds`` of each part's graphs (``parts[p] is specs[p].positions``).
    specs : PartPlan
        One :class:`PartSpec` per part for :func:`solve_part`, each made (its graphs read) when indexed.
    """
    n = len(ds)
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, {n}], got {k}")
    max_pairs = resolve_max_pairs(max_pairs, ds.nodes_per_graph)
    part_size = resolve_part_size(part_size, n, k)
    cand = None if candidates is None else np.asarray(candidates, bool)
    fix = None if fixed is None else np.asarray(fixed, bool)
    parts = ([np.arange(n)] if n <= part_size
             else partition(pool_embedding(ds, depth, weights, progress), part_size, progress=progress))
    budgets = part_budgets(np.array([p.size for p in parts]), k)
    if fix is not None:
        budgets = _give_fixed_room(budgets, np.array([int(fix[p].sum()) for p in parts]))
    per_cluster = auto_per_cluster(n)
    stubs = [PartSpec(None, int(b), p, depth, weights, seed, None if cand is None else cand[p],
                      None if fix is None else fix[p], None if max_pairs is None else float(max_pairs) * p.size / n,
                      num_threads, per_cluster)
             for p, b in zip(parts, budgets)]
    reader = None if isinstance(ds, GraphDataset) else ds.part_reader(
        parts, scratch_dir, progress=Countdown("grouping the graphs by part (reading the store)", n, progress))
    return parts, PartPlan(ds, parts, stubs, reader)


def solve_in_order(specs: Sequence[PartSpec], progress: ProgressFn | None = None) -> list[PartResult]:
    """The default ``map_parts``: :func:`solve_part` of every part here, one after the other.

    ``progress`` gets the single part's own status lines, or one line per finished part.
    """
    results: list[PartResult] = []
    for i, spec in enumerate(specs):
        results.append(solve_part(spec, progress=progress if len(specs) == 1 else None))
        if progress and len(specs) > 1:
            progress(f"part {i + 1}/{len(specs)} done ({sum(r.pairs_computed for r in results)} exact pairs)")
    return results


