r"""k-medoids under TMD without the :math:`n \times n` matrix, with an exact certificate.

The engine behind ``tmd_coreset(..., engine="scalable")`` (:mod:`tmdlib.select.certificate`).

Ingredients
-----------
* **Lower bounds** :math:`\mathrm{LB}(i, j) \le \mathrm{TMD}(G_i, G_j)` from level histograms, level
  means and tree norms (:class:`tmdlib.distance.lower.LowerBound`): ``O(L |E|)`` to build, ``O(L F)``
  per pair, ~0.8 of TMD (median) on molecules.
* **Exact distances on demand**: a :class:`PairCache` in front of a batched exact TMD function
  (local threads, processes or a Dask cluster); every pair is computed at most once and counted.

Algorithm (one part of at most ``part_size`` graphs: :func:`refine_kmedoids`)
-----------------------------------------------------------------------------
1. *Proxy*: FasterPAM on a fitted estimate of TMD (least squares on the three lower bounds, from a few
   hundred exact pairs of the part: :func:`fit_proxy`) gives ``k`` starting medoids.
2. *Exact nearest and second-nearest medoid* of every graph (:func:`nearest_two`): medoids are tried
   in increasing LB order and the search stops when the next LB is at least the second-best exact
   distance found -- so the result is the exact nearest (and second-nearest) medoid, with far fewer
   than ``n k`` exact distances.  :class:`SwapState` holds the medoids and these two per graph.
3. *Restricted eager swaps* (FasterPAM's swap rule on exact distances, :meth:`SwapState.try_swap` /
   :meth:`SwapState.apply`): for a candidate non-medoid ``x`` only graphs with
   :math:`\mathrm{LB}(i, x) < d_2(i)` can change medoid, so only those exact distances are needed.
   Candidates: per cluster, the members most central under the proxy.  Rounds repeat until no swap improves
   the objective by more than ``tol``.
4. *Certificate*: each graph, its exact nearest medoid and that exact distance.

Larger pools are split into parts of graphs close under the lower bound (:func:`plan_parts`: recursive
bisection along the main axis of the level-mean embedding); each part gets ``k`` in proportion to its
size and is solved as above (:func:`solve_part` of a :class:`PartSpec`, giving a :class:`PartResult`),
so the cost grows linearly in ``n`` for a fixed part size, and every part can run on its own worker
(``map_parts`` of :func:`scalable_coreset`).  The union of the parts' medoids is the coreset
(:func:`combine_parts`); each graph is certified by its nearest medoid in its part (Lemma 3.2 holds for
any assignment).
"""
from __future__ import annotations

import enum
import math
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, ClassVar, NamedTuple, Sequence

import numpy as np

from ..distance.lower import LowerBound, structure_embedding
from ..graph import GraphDataset

__all__ = ["PairCache", "Nearest", "nearest_two", "nearest_medoids", "SwapState", "SwapTrial", "Verdict", "SearchStats",
           "refine_kmedoids", "fit_proxy", "Countdown", "FIT_PAIRS", "PartSpec", "PartResult", "PartPlan", "part_engine",
           "solve_part", "partition", "split_work", "part_budgets", "plan_parts",
           "pool_embedding", "auto_part_size", "resolve_part_size", "count_parts", "fit_part_size", "auto_pair_budget",
           "resolve_max_pairs",
           "solve_in_order", "EngineInfo", "ScalableCoreset", "combine_parts", "scalable_coreset", "EXHAUSTIVE_PART"]

Exact = Callable[[np.ndarray, np.ndarray], np.ndarray]
ProgressFn = Callable[[str], None]


#: Seconds between two status lines of a :class:`Countdown`.
STATUS_SECONDS = 10.0


class Countdown:
    """Status lines of one phase counted in units of work: ``<what>: <done>/<total> <unit> (<pct>%), ETA <s>s,
    elapsed <s>s`` to ``progress``, at most one every ``every`` seconds, and one when the work is done (unless
    the whole phase took less than ``every`` seconds: a short phase stays quiet).

    Call it with the work done so far; ``work`` and ``total_work`` (default: the count itself) give the share of
    the work the ETA is taken from, when the count shown is not proportional to it (the partition's parts).
    """

    def __init__(self, what: str, total: float, progress: ProgressFn | None, unit: str = "graphs",
                 every: float | None = None):
        self.what, self.total, self.progress, self.unit = what, float(total), progress, unit
        self.every = STATUS_SECONDS if every is None else float(every)
        self.t0 = self._last = time.monotonic()
        self.lines = 0

    def __call__(self, done: float, work: float | None = None, total_work: float | None = None) -> None:
        now = time.monotonic()
        if self.progress is None or now - self._last < self.every and (done < self.total or not self.lines):
            return
        self._last, self.lines = now, self.lines + 1
        whole = self.total if work is None else total_work
        frac = (done if work is None else work) / whole if whole else 1.0
        eta = (now - self.t0) * (1.0 - frac) / frac if frac > 0 else float("nan")
        self.progress(f"{self.what}: {done:,.0f}/{self.total:,.0f} {self.unit} ({100.0 * frac:.0f}%), "
                      f"ETA {eta:.0f}s, elapsed {now - self.t0:.0f}s")


class PairCache:
    r"""Exact distances on demand: each unordered pair is computed once, by batches.

    Parameters
    ----------
    exact : callable
        ``exact(i, j) -> d`` for int arrays of equal length (positions), returning float array.
    n : int
        Number of graphs (positions ``0..n-1``).
    progress : callable, optional
        Receives a status line (:meth:`status`) at most every ``every`` seconds while exact pairs are
        computed.  The search names what the pairs are for (:attr:`phase`) and how far it is
        (:attr:`plan`), which gives the ETA.
    every : float
        Seconds between two status lines.
    size : ndarray of float, shape (n,), optional
        A size per graph (its node count): a batch is then sent to ``exact`` in slices of at most
        ``slice_cost`` in :math:`\sum_k \mathrm{size}_{i_k}\,\mathrm{size}_{j_k}` (:meth:`slices`), so that a
        status line comes between slices of a long batch (a DD pair costs ~0.3 s).  The slices depend on
        the pairs only, never on time: a run gives the same bits with or without progress.
    slice_cost : float
        The largest slice, in the units above (``5e6``: ~60 DD pairs, 10-30 s on two cores; ~10,000 molecule
        pairs).
    min_group : int
        The exact engine's smallest block (:class:`~tmdlib.distance.engine.PairEngine`): groups of fewer
        pairs sharing a graph are computed one pair at a time and are sliced together.

    Attributes
    ----------
    computed : int
        Distinct pairs computed so far (the count every budget and report uses).
    calls, seconds
        Batches sent to ``exact`` and the time they took.
    phase : str or callable
        What the current pairs are for (a callable is evaluated when a line is shown).
    plan : callable, optional
        ``plan() -> (done, total)`` of the current phase, in the phase's own units (pairs, candidates).
    max_pairs : float
        The budget of exact pairs, shown with its own ETA when finite.

    Notes
    -----
    Up to :data:`DENSE_CACHE_MAX` graphs (a part) the distances are kept in a dense ``(n, n)`` matrix (NaN =
    not computed; looked up with array indexing), beyond it in a dict keyed by pair (a pool's certificate).
    """

    def __init__(self, exact: Exact, n: int, progress: ProgressFn | None = None, every: float = 10.0,
                 size: np.ndarray | None = None, slice_cost: float = 5e6, min_group: int = 4):
        self.exact = exact
        self.n = int(n)
        self._dense = np.full((self.n, self.n), np.nan) if self.n <= DENSE_CACHE_MAX else None
        self._store: dict[int, float] = {}
        self.computed = 0
        self.calls = 0
        self.seconds = 0.0
        self.progress, self.every = progress, float(every)
        self.size = None if size is None else np.asarray(size, dtype=np.float64)
        self.slice_cost, self.min_group = float(slice_cost), int(min_group)
        self.max_pairs = np.inf
        self.phase: str | Callable[[], str] = "exact pairs"
        self.plan: Callable[[], tuple[float, float]] | None = None
        self._phase_start = (time.monotonic(), 0)
        self._last_line = time.monotonic()

    def start_phase(self, phase, plan: Callable[[], tuple[float, float]] | None = None) -> None:
        """Name what the next pairs are for; ``plan() -> (done, total)`` gives the phase's ETA."""
        self.phase, self.plan = phase, plan
        self._phase_start = (time.monotonic(), self.computed)

    def status(self) -> str:
        """``<phase>: <done>/<total> (ETA), <computed> exact pairs (<rate>/s)[, budget <c>/<max> (ETA)]``."""
        now = time.monotonic()
        t0, c0 = self._phase_start
        phase = self.phase() if callable(self.phase) else self.phase
        line = f"{phase}:"
        if self.plan is not None:
            done, total = self.plan()
            if total > 0:
                eta = (now - t0) / done * (total - done) if done > 0 else float("nan")
                line += f" {done:.0f}/{total:.0f} ({100.0 * done / total:.0f}%, ETA {eta:.0f}s),"
        rate = (self.computed - c0) / max(now - t0, 1e-9)
        line += f" {self.computed} exact pairs ({rate:.3g}/s)"
        if np.isfinite(self.max_pairs) and self.max_pairs > 0:
            left = max(self.max_pairs - self.computed, 0.0)
            eta = left / rate if rate > 0 else float("nan")
            line += f", budget {self.computed}/{self.max_pairs:.0f} (ETA {eta:.0f}s)"
        return line

    def _beat(self) -> None:
        if self.progress is not None and time.monotonic() - self._last_line >= self.every:
            self._last_line = time.monotonic()
            self.progress(self.status())

    def _compute(self, ks: np.ndarray) -> np.ndarray:
        """``exact`` of the pair keys ``ks``, in slices of bounded cost when sizes are known (:meth:`slices`)."""
        i, j = ks // self.n, ks % self.n
        if self.size is None:
            return np.asarray(self.exact(i, j), dtype=np.float64)
        out, shown = np.empty(ks.size), 0
        pieces = self.slices(i, j)
        for r, sel in enumerate(pieces):
            out[sel] = np.asarray(self.exact(i[sel], j[sel]), dtype=np.float64)
            if r + 1 < len(pieces):
                self.computed += sel.size  # counted as they come, so the status line moves
                shown += sel.size
                self._beat()
        self.computed -= shown  # the caller counts the batch once
        return out

    def slices(self, i: np.ndarray, j: np.ndarray) -> list[np.ndarray]:
        r"""Split a batch of pairs into slices of cost at most :attr:`slice_cost` (:math:`\mathrm{size}_i\,\mathrm{size}_j`
        per pair), keeping together the pairs that share a graph on the side with fewer distinct graphs (the
        exact engine computes each such group of at least :attr:`min_group` pairs as one block); a group
        costlier than a slice is cut in even pieces of at least ``min_group`` pairs; the pairs of smaller
        groups (computed one by one, in parallel) come last, in slices of their own.  Depends on the pairs
        only, so the same batch always gives the same slices.

        Returns
        -------
        list of ndarray of int64
            Indices into the batch, covering it once.
        """
        cost = self.size[i] * self.size[j]
        if float(cost.sum()) <= self.slice_cost:  # most batches: one slice, nothing to group
            return [np.arange(i.size)]
        side = j if np.unique(i).size >= np.unique(j).size else i
        values, count = np.unique(side, return_counts=True)
        # groups the engine computes as blocks first, then the pairs it computes one by one (in parallel
        # with each other: kept together in slices of their own rather than a few beside each block)
        big = count[np.searchsorted(values, side)] >= self.min_group
        order = np.lexsort((np.arange(side.size), side, ~big))
        cost = self.size[i[order]] * self.size[j[order]]
        key = np.where(big[order], side[order], -1)
        bounds = np.flatnonzero(np.diff(key)) + 1
        atoms = []  # (start, stop) into order: whole groups, or even pieces of a costly group
        for a, b in zip(np.r_[0, bounds], np.r_[bounds, order.size]):
            c = float(cost[a:b].sum())
            if key[a] < 0:  # the pairs computed one by one: any cut will do
                m = max(1, min(b - a, math.ceil(c / self.slice_cost)))
            else:  # a block: pieces of at least min_group pairs, so each stays a block
                m = max(1, min((b - a) // self.min_group, math.ceil(c / self.slice_cost)))
            edges = np.linspace(a, b, m + 1).round().astype(np.int64)
            atoms.extend(zip(edges[:-1].tolist(), edges[1:].tolist()))
        out, cur, cur_cost = [], [], 0.0
        for a, b in atoms:
            c = float(cost[a:b].sum())
            if cur and cur_cost + c > self.slice_cost:
                out.append(np.concatenate([order[x:y] for x, y in cur]))
                cur, cur_cost = [], 0.0
            cur.append((a, b))
            cur_cost += c
        if cur:
            out.append(np.concatenate([order[x:y] for x, y in cur]))
        return out

    def keys(self) -> np.ndarray:
        """Keys ``min(i, j) * n + max(i, j)`` of the pairs computed so far, sorted, shape ``(computed,)``."""
        if self._dense is not None:
            lo, hi = np.nonzero(~np.isnan(self._dense))  # stored at [min, max] only: row-major is key order
            return lo * self.n + hi
        return np.sort(np.fromiter(self._store.keys(), dtype=np.int64, count=len(self._store)))

    def get(self, i, j) -> np.ndarray:
        """Exact distances of pairs ``(i[k], j[k])``, shape ``(P,)`` (``0`` where ``i[k] == j[k]``)."""
        i = np.asarray(i, dtype=np.int64)
        j = np.asarray(j, dtype=np.int64)
        lo, hi = np.minimum(i, j), np.maximum(i, j)
        if self._dense is not None:
            return self._get_dense(lo, hi)
        out = np.zeros(i.size)
        keys = lo * self.n + hi
        todo = {}
        for pos, (key, a, b) in enumerate(zip(keys.tolist(), lo.tolist(), hi.tolist())):
            if a == b:
                continue
            v = self._store.get(key)
            if v is None:
                todo.setdefault(key, []).append(pos)
            else:
                out[pos] = v
        if todo:
            ks = np.fromiter(todo.keys(), dtype=np.int64, count=len(todo))
            vals = self._batch(ks)
            for key, v in zip(ks.tolist(), vals.tolist()):
                self._store[key] = v
                for pos in todo[key]:
                    out[pos] = v
        return out

    def _get_dense(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """:meth:`get` on the dense matrix: the same pairs computed, in the same order (first occurrence)."""
        out = self._dense[lo, hi]
        out[lo == hi] = 0.0
        miss = np.flatnonzero(np.isnan(out))
        if miss.size:
            keys, first = np.unique(lo[miss] * self.n + hi[miss], return_index=True)
            ks = keys[np.argsort(first, kind="stable")]
            self._dense[ks // self.n, ks % self.n] = self._batch(ks)
            out[miss] = self._dense[lo[miss], hi[miss]]
        return out

    def _batch(self, ks: np.ndarray) -> np.ndarray:
        """Compute the new pair keys ``ks`` (one batch: counted, timed, a status line when due)."""
        t0 = time.perf_counter()
        vals = self._compute(ks)
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        self.computed += ks.size
        self._beat()
        return vals


#: Largest ``n`` for which a :class:`PairCache` keeps a dense matrix (``8 n^2`` bytes: 32 MiB here; a part of
#: 1,000 graphs: 8 MB); a larger pool's cache is a dict of the pairs computed.
DENSE_CACHE_MAX = 2048


# ---------------------------------------------------------------------------------------------- nearest medoids

class Nearest(NamedTuple):
    """Result of :func:`nearest_two`: slots into ``medoids`` and exact distances, each of shape ``(P,)``."""

    n1: np.ndarray
    n2: np.ndarray | None
    d1: np.ndarray
    d2: np.ndarray | None


def nearest_two(points: np.ndarray, medoids: np.ndarray, bounds: np.ndarray, cache: PairCache, *,
                second: bool = True, known: np.ndarray | None = None, max_pairs: float = np.inf) -> Nearest:
    r"""Exact nearest (and second-nearest) medoid of each point, pruned by lower bounds.

    Point :math:`i` tries the medoids :math:`m` in increasing order of :math:`\mathrm{LB}(i, m)` and stops
    at the first one with :math:`\mathrm{LB}(i, m) \ge s(i)`, the stopping distance: :math:`d_2(i)`, its
    second-best exact distance so far (``second=True``), or :math:`d_1(i)`, its best (``second=False``).
    Since :math:`\mathrm{TMD}(i, m) \ge \mathrm{LB}(i, m) \ge s(i)` for every medoid not tried, none of them
    can enter the best two (the best one): the result is exact.  With ``known``, a medoid :math:`m` is
    also skipped when the pivot bound :math:`\max_p |d(i, p) - d(m, p)| \ge s(i)` (triangle inequality
    through medoids :math:`p` whose distances to both are known).

    Parameters
    ----------
    points : ndarray of int64, shape (P,)
        Positions of the points.
    medoids : ndarray of int64, shape (k,)
        Positions of the medoids, sorted ascending.
    bounds : ndarray of float64, shape (P, k)
        :math:`\mathrm{LB}(\text{points}[r], \text{medoids}[c])`.
    cache : PairCache
    second : bool
        Also find the exact second-nearest medoid (else ``n2``, ``d2`` are ``None``).
    known : ndarray of float64, shape (n, k), optional
        Exact point-medoid distances computed so far (NaN = unknown), columns aligned with ``medoids``;
        receives every distance computed here.
    max_pairs : float
        Budget on ``cache.computed``.  The first round always runs (every point then has an exact distance
        to its LB-nearest medoid: a valid, if looser, assignment); a later round that would pass the budget
        is cut to the pairs whose lower bound lies furthest below the point's best distance, and the search
        stops there.

    Returns
    -------
    Nearest
        ``n1``, ``n2``: int64 slots into ``medoids`` of the nearest and second-nearest medoid (``-1`` if
        none, e.g. ``k = 1``); ``d1``, ``d2``: their exact distances (``inf`` if none).  A medoid is its
        own nearest medoid (distance 0, even when another medoid is identical to it).
    """
    P, k = bounds.shape
    n1 = np.full(P, -1, np.int64)
    n2 = np.full(P, -1, np.int64)
    d1 = np.full(P, np.inf)
    d2 = np.full(P, np.inf)
    stop = d2 if second else d1  # updated in place below
    if P:
        order = np.argsort(bounds, axis=1, kind="stable")
        sorted_lb = np.take_along_axis(bounds, order, axis=1)
        t = np.zeros(P, np.int64)  # next medoid to try, per point (into order's row)
        rows = np.arange(P)
        first = True
        own_plan = cache.progress is not None and cache.plan is None
        if own_plan:  # pairs done / at most to do: every untried medoid whose LB is still below the stop
            c0, cols = cache.computed, np.arange(k)

            def plan() -> tuple[float, float]:
                left = int(((cols[None, :] >= t[:, None]) & (sorted_lb < stop[:, None])).sum())
                if np.isfinite(max_pairs):  # the budget ends the search once the first round is done
                    left = min(left, max(int(max_pairs - cache.computed), int((t == 0).sum())))
                return cache.computed - c0, cache.computed - c0 + left

            cache.plan = plan
        while first or cache.computed < max_pairs:
            first_round, first = first, False
            live = rows[t < k]
            live = live[sorted_lb[live, t[live]] < stop[live]]
            if live.size == 0:
                break
            m = order[live, t[live]]
            if known is not None and np.isfinite(stop[live]).any():
                with np.errstate(invalid="ignore"):
                    piv = np.nanmax(np.abs(known[points[live]] - known[medoids[m]]), axis=1, initial=0.0)
                skip = piv >= stop[live]
                t[live[skip]] += 1
                live, m = live[~skip], m[~skip]
                if live.size == 0:
                    continue
            if not first_round and cache.computed + live.size > max_pairs:
                # the round would overrun the budget: only the pairs most likely to shorten a point's distance to
                # its medoid, those whose lower bound lies furthest below that distance
                keep = int(max_pairs - cache.computed)
                if keep <= 0:
                    break
                best = np.argsort(sorted_lb[live, t[live]] / np.maximum(d1[live], 1e-300), kind="stable")[:keep]
                live, m = live[best], m[best]
            d = cache.get(points[live], medoids[m])
            if known is not None:
                known[points[live], m] = d
            better1 = d < d1[live]
            better2 = ~better1 & (d < d2[live])
            b1, b2 = live[better1], live[better2]
            n2[b1], d2[b1] = n1[b1], d1[b1]
            n1[b1], d1[b1] = m[better1], d[better1]
            n2[b2], d2[b2] = m[better2], d[better2]
            t[live] += 1
        if own_plan:
            cache.plan = None
        slot = np.searchsorted(medoids, points)
        own = np.flatnonzero((slot < k) & (medoids[np.minimum(slot, k - 1)] == points) & (n1 != slot))
        n2[own], d2[own] = n1[own], d1[own]
        n1[own], d1[own] = slot[own], 0.0
    return Nearest(n1, n2, d1, d2) if second else Nearest(n1, None, d1, None)


def nearest_medoids(lb: LowerBound, cache: PairCache, medoids, chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Exact nearest medoid of every graph (:func:`nearest_two` with ``second=False``, chunk by chunk).

    Parameters
    ----------
    lb : LowerBound
        Summaries of the ``n`` graphs.
    cache : PairCache
    medoids : array_like of int, shape (k,)
    chunk : int
        Graphs per block of lower bounds (memory: ``chunk * k`` floats).

    Returns
    -------
    assignment : ndarray of int64, shape (n,)
        The nearest medoid (a position) of each graph; a medoid is its own.
    distance : ndarray of float64, shape (n,)
        Its exact TMD.
    """
    med = np.unique(np.asarray(medoids, dtype=np.int64))
    n = len(lb)
    assignment, distance = np.empty(n, np.int64), np.empty(n)
    a = 0  # the closure below reads the loop's current a
    cache.start_phase("nearest medoid of every graph (graphs)", lambda: (a, n))
    for a in range(0, n, chunk):
        pts = np.arange(a, min(n, a + chunk))
        near = nearest_two(pts, med, lb.block(pts, med), cache, second=False)
        assignment[pts], distance[pts] = med[near.n1], near.d1
    return assignment, distance


# ---------------------------------------------------------------------------------------------- swap state

def _swap_gain(aff, dx, n1, d1, d2, fixed_slots, k) -> tuple[float, int]:
    r"""FasterPAM's best swap for a new medoid ``x``: ``(change of the objective, slot to remove)``.

    Removing medoid ``m`` costs :math:`\sum_{n_1(i)=m} (d_2(i) - d_1(i))`; adding ``x`` moves every
    graph with :math:`d(i, x) < d_1(i)` to ``x`` and caps the removal cost of the others at
    :math:`d(i, x)`.  Only graphs ``aff`` (those with :math:`\mathrm{LB}(i, x) < d_2(i)`) can matter;
    ``dx[r]`` is :math:`d(\text{aff}[r], x)` (or a lower bound of it: the change is non-decreasing in
    every :math:`d(i, x)`, so bounds give a lower bound of the change).  Fixed slots are never removed.
    """
    loss = d2 - d1  # each graph's cost of losing its medoid, before x
    closer = dx < d1[aff]
    i1 = aff[closer]
    acc = float((dx[closer] - d1[i1]).sum())
    loss[i1] = 0.0  # they move to x whichever medoid goes
    mid = ~closer & (dx < d2[aff])
    i2 = aff[mid]
    loss[i2] = dx[mid] - d1[i2]  # x caps the cost (also where d2 is unknown, inf, under a pair budget)
    delta = np.bincount(n1, weights=loss, minlength=k)
    delta[fixed_slots] = np.inf
    m = int(np.argmin(delta))
    return acc + float(delta[m]), m


class Verdict(enum.Enum):
    """Outcome of :meth:`SwapState.try_swap`."""

    PRUNED = "pruned"      # the lower bounds alone rule out a gain (no exact pair computed)
    REJECTED = "rejected"  # exact distances showed no gain
    IMPROVES = "improves"  # the swap lowers the objective by more than the tolerance


@dataclass(frozen=True, eq=False)
class SwapTrial:
    r"""A candidate swap ``x`` in, ``medoids[slot]`` out, as judged by :meth:`SwapState.try_swap`.

    Attributes
    ----------
    x : int
        The candidate medoid (a position).
    verdict : Verdict
    change : float
        Change of the objective :math:`\sum_i d_1(i)` (negative = better); NaN unless computed exactly.
    slot : int
        Slot of the medoid to remove (``IMPROVES`` only).
    aff : ndarray of int64, shape (A,)
        Graphs that may change medoid: :math:`\mathrm{LB}(i, x) < d_2(i)` (``IMPROVES`` only).
    dx : ndarray of float64, shape (A,)
        Their exact :math:`\mathrm{TMD}(i, x)` (``IMPROVES`` only).
    """

    x: int
    verdict: Verdict
    change: float = math.nan
    slot: int = -1
    aff: np.ndarray | None = None
    dx: np.ndarray | None = None


#: Candidates a :class:`SwapState` keeps as pivots (their exact distances: ``MAX_TRIED * n`` floats at most) ...
MAX_TRIED = 1024
#: ... and how many of them, the nearest to the candidate, bound its distances (``MAX_PIVOTS * |aff|`` per trial).
MAX_PIVOTS = 64


def _covers_nearest(max_pairs: float, n: int, k: int) -> bool:
    """Whether a pair budget holds one pair per graph and medoid (``n * k``): below it, the whole budget goes to the
    graphs' nearest medoids (no pivots between medoids in :class:`SwapState`, no proxy fit in :func:`refine_kmedoids`)."""
    return max_pairs >= n * k


class SwapState:
    r"""Medoids of one part, with every graph's exact nearest and second-nearest medoid.

    The state of FasterPAM's eager swap search, on exact distances computed only where the lower bound
    cannot decide.  The objective is :math:`\sum_i d_1(i)`.

    Parameters
    ----------
    bound : ndarray of float64, shape (n, n)
        Lower-bound matrix of the part (every pruning test reads it).
    cache : PairCache
        Exact distances between positions ``0..n-1``.
    medoids : ndarray of int64, shape (k,)
        Starting medoids, sorted ascending.
    fixed : ndarray of bool, shape (n,)
        Graphs that must stay medoids.
    max_pairs : float
        Budget of exact pairs (see :func:`nearest_two`).

    Attributes
    ----------
    medoids : ndarray of int64, shape (k,)
        Sorted; a *slot* is a position in this array.
    n1, n2 : ndarray of int64, shape (n,)
        Slot of each graph's nearest / second-nearest medoid (``n2 = -1`` when ``k = 1``).
    d1, d2 : ndarray of float64, shape (n,)
        Their exact distances (``d2 = inf`` when ``k = 1``).
    known : ndarray of float64, shape (n, k)
        Exact :math:`\mathrm{TMD}(i, \text{medoids}[c])` computed so far, NaN where unknown: the medoids
        act as pivots for triangle-inequality bounds.
    """

    def __init__(self, bound: np.ndarray, cache: PairCache, medoids: np.ndarray, fixed: np.ndarray,
                 max_pairs: float = np.inf):
        n = bound.shape[0]
        self.bound, self.cache, self.fixed, self.max_pairs = bound, cache, fixed, max_pairs
        self.medoids = np.asarray(medoids, np.int64)
        self.known = np.full((n, self.k), np.nan)
        # candidates tried so far, with their exact distances to the graphs they were compared with (NaN
        # elsewhere): pivots for the triangle bounds of later candidates, beside the medoids
        self._tried = np.full((min(8, MAX_TRIED), n), np.nan)  # doubles when full, up to MAX_TRIED rows
        self._ntried = 0  # candidates tried so far (the newest overwrites the oldest past MAX_TRIED)
        self.n1, self.n2 = np.empty(n, np.int64), np.empty(n, np.int64)
        self.d1, self.d2 = np.empty(n), np.empty(n)
        # medoids first: their rows are the pivots' distances for everyone else
        cache.start_phase("nearest two medoids of every graph (pairs, at most)")
        cache.max_pairs = max_pairs
        # a budget below one pair per graph and medoid cannot pay for everything the search may ask: the
        # medoids' distances to each other (pivots for the others' pruning) then stop after their first round,
        # which costs nothing (a medoid is its own nearest), and the budget goes to the other graphs' nearest
        # medoids, which make the objective (on DD 10 % these pivots took 2,870 of a 2,834-pair budget)
        self._renew(self.medoids, None if _covers_nearest(max_pairs, n, self.k) else cache.computed)
        self._renew(np.setdiff1d(np.arange(n), self.medoids))

    @property
    def k(self) -> int:
        """Number of medoids."""
        return int(self.medoids.size)

    @property
    def objective(self) -> float:
        r""":math:`\sum_i d_1(i)`, the exact k-medoids objective of the current medoids."""
        return float(self.d1.sum())

    @property
    def assignment(self) -> np.ndarray:
        """Nearest medoid (a position) of each graph, shape ``(n,)``."""
        return self.medoids[self.n1]

    def _renew(self, idx: np.ndarray, max_pairs: float | None = None) -> Nearest:
        """Recompute the nearest two medoids of graphs ``idx`` (exact, pruned)."""
        near = nearest_two(idx, self.medoids, self.bound[np.ix_(idx, self.medoids)], self.cache, known=self.known,
                           max_pairs=self.max_pairs if max_pairs is None else max_pairs)
        self.n1[idx], self.n2[idx], self.d1[idx], self.d2[idx] = near
        return near

    def gain(self, aff: np.ndarray, dx: np.ndarray) -> tuple[float, int]:
        """Best ``(change, slot)`` of swapping in a graph at distances ``dx`` from ``aff`` (:func:`_swap_gain`)."""
        return _swap_gain(aff, dx, self.n1, self.d1, self.d2, self.fixed[self.medoids], self.k)

    def try_swap(self, x: int, tol: float) -> SwapTrial:
        r"""Judge swapping ``x`` in, computing exact distances only while a gain is still possible.

        A swap is accepted when its change of the objective is below :math:`-\mathrm{tol}\sum_i d_1(i)`.
        The change computed with lower bounds of :math:`d(i, x)` is a lower bound of the true change, so
        ``x`` is *pruned* when even that shows no gain; otherwise the exact :math:`d(i, x)` of the affected
        graphs are computed in order of promise, in doubling batches, and the search is *rejected* as
        soon as the bound (exact so far, LB for the rest) shows no gain.
        """
        need = -tol * max(float(self.d1.sum()), 1e-300)
        bx = self.bound[x].copy()
        aff = np.flatnonzero(bx < self.d2)
        if self.k > 1 and self.gain(aff, bx[aff])[0] >= need:
            return SwapTrial(x, Verdict.PRUNED)
        aff = self._tighten(x, bx, aff)
        dx = self._exact_while_promising(x, aff, bx[aff].copy(), need)
        if dx is None:
            return SwapTrial(x, Verdict.REJECTED)
        if self.k == 1:  # replace the only medoid: every graph moves to x
            change, slot = float(dx.sum() - self.d1.sum()), 0
        else:
            change, slot = self.gain(aff, dx)
        if not change < need:
            return SwapTrial(x, Verdict.REJECTED, change)
        return SwapTrial(x, Verdict.IMPROVES, change, slot, aff, dx)

    @property
    def tried(self) -> np.ndarray:
        """Shape ``(T, n)``: exact distances of the last ``T`` candidates tried (at most :data:`MAX_TRIED`) to
        every graph they were compared with (NaN elsewhere; 0 to themselves); in the order they were tried until
        the rows wrap around."""
        return self._tried[:min(self._ntried, MAX_TRIED)]

    def _new_pivot(self, x: int) -> np.ndarray:
        """A new row of :attr:`tried` for candidate ``x`` (a view to fill in)."""
        rows = self._tried.shape[0]
        if self._ntried == rows and rows < MAX_TRIED:
            grown = np.full((min(2 * rows, MAX_TRIED), self._tried.shape[1]), np.nan)
            grown[:rows] = self._tried
            self._tried = grown
        row = self._tried[self._ntried % MAX_TRIED]
        row[:] = np.nan
        row[x] = 0.0
        self._ntried += 1
        return row

    def _tighten(self, x: int, bx: np.ndarray, aff: np.ndarray) -> np.ndarray:
        r"""Raise ``bx[aff]`` in place to the pivot bounds :math:`\max_p |d(i, p) - d(x, p)|` over pivots ``p``
        whose distances to both ``i`` and ``x`` are known -- the medoids, and the candidates tried before
        ``x`` -- and return the graphs still affected."""
        piv = np.flatnonzero(~np.isnan(self.known[x]))
        if piv.size and aff.size:
            with np.errstate(invalid="ignore"):
                tri = np.nanmax(np.abs(self.known[np.ix_(aff, piv)] - self.known[x, piv]), axis=1, initial=0.0)
            bx[aff] = np.maximum(bx[aff], tri)
            aff = aff[bx[aff] < self.d2[aff]]
        tried = self.tried
        rows = np.flatnonzero(~np.isnan(tried[:, x]))
        if rows.size > MAX_PIVOTS:  # the nearest to x: their bounds are the tightest (d(x, p) -> 0: d(i, p) -> d(i, x))
            rows = rows[np.argsort(tried[rows, x], kind="stable")[:MAX_PIVOTS]]
        if rows.size and aff.size:
            with np.errstate(invalid="ignore"):
                tri = np.nanmax(np.abs(tried[np.ix_(rows, aff)] - tried[rows, x][:, None]), axis=0, initial=0.0)
            bx[aff] = np.maximum(bx[aff], tri)
            aff = aff[bx[aff] < self.d2[aff]]
        return aff

    def _exact_while_promising(self, x: int, aff: np.ndarray, est: np.ndarray, need: float) -> np.ndarray | None:
        """Replace the bounds ``est`` of ``d(aff, x)`` by exact distances, most promising first (doubling
        batches from 16); ``None`` as soon as the partly exact estimate shows no gain below ``need``."""
        order = np.argsort(est - self.d1[aff], kind="stable")
        done, step = 0, 16
        row = self._new_pivot(x)
        while done < aff.size:
            sel = order[done:done + step]
            est[sel] = row[aff[sel]] = self.cache.get(np.full(sel.size, x), aff[sel])
            done += sel.size
            step *= 2
            if done < aff.size and self.k > 1 and self.gain(aff, est)[0] >= need:
                return None
        return est

    def apply(self, trial: SwapTrial) -> np.ndarray:
        """Make the improving swap ``trial``; return the medoid graphs whose clusters changed.

        The slots are re-sorted; only the graphs touched by the swap -- those whose nearest or second-nearest
        medoid was removed, those now closer to ``x`` than their second-nearest, and the removed medoid --
        get their nearest two recomputed.
        """
        x, aff, dx = trial.x, trial.aff, trial.dx
        old = self.medoids[trial.slot]
        med = self.medoids.copy()
        med[trial.slot] = x
        self.known[:, trial.slot] = np.nan
        self.known[aff, trial.slot] = dx
        self.known[x, trial.slot] = 0.0
        order = np.argsort(med, kind="stable")
        self.medoids, self.known = med[order], self.known[:, order]
        inv = np.empty_like(order)
        inv[order] = np.arange(order.size)
        self.n1 = np.where(self.n1 >= 0, inv[np.maximum(self.n1, 0)], -1)
        self.n2 = np.where(self.n2 >= 0, inv[np.maximum(self.n2, 0)], -1)
        new_slot = int(np.searchsorted(self.medoids, x))
        touched = (self.n1 == new_slot) | (self.n2 == new_slot)  # they pointed at the removed medoid's slot
        touched[aff[dx < self.d2[aff]]] = True
        touched[old] = True
        idx = np.flatnonzero(touched)
        before = self.medoids[self.n1[idx][self.n1[idx] >= 0]]
        after = self._renew(idx).n1
        return np.unique(np.concatenate([before, self.medoids[after], [old, x]]))


@dataclass
class SearchStats:
    """Counters of one part's search (diagnostics; not part of the certificate).

    Attributes
    ----------
    initial_pairs : int
        Exact pairs spent on the proxy's fit and the proxy medoids' nearest two.
    fit_pairs : int
        Of these, the sample the proxy was fitted on (:func:`fit_proxy`).
    tried, pruned, rejected : int
        Candidates judged; of these, ruled out by the lower bounds alone, and by exact distances.
    rejected_pairs, swap_pairs : int
        Exact pairs spent on rejected candidates, and on accepted swaps (their trial and update).
    exhaustive : bool
        The part was solved on its full exact matrix (:data:`EXHAUSTIVE_PART`).
    """

    initial_pairs: int = 0
    fit_pairs: int = 0
    tried: int = 0
    pruned: int = 0
    rejected: int = 0
    rejected_pairs: int = 0
    swap_pairs: int = 0
    exhaustive: bool = False

    def to_json(self) -> dict:
        """The counters as a JSON-ready dict."""
        return asdict(self)


class _RetryMemo:
    """A rejected candidate is tried again only after a swap changed its cluster (or it moved to another)."""

    def __init__(self):
        self.changed_at: dict[int, int] = {}         # medoid graph -> swap count after the last change of its cluster
        self.rejected_at: dict[int, tuple[int, int]] = {}  # candidate -> (its medoid, swap count) when rejected

    def skip(self, x: int, home: int) -> bool:
        prev = self.rejected_at.get(x)
        return prev is not None and prev[0] == home and self.changed_at.get(home, -1) < prev[1]

    def reject(self, x: int, home: int, swaps: int) -> None:
        self.rejected_at[x] = (home, swaps)

    def changed(self, graphs: np.ndarray, swaps: int) -> None:
        for g in graphs.tolist():
            self.changed_at[g] = swaps


def _candidates(assign: np.ndarray, medoids: np.ndarray, proxy: np.ndarray, per_cluster: int, allowed: np.ndarray,
                rng: np.random.Generator, max_cluster: int = 400, share: float = 0.2) -> np.ndarray:
    """Per cluster, its most central non-medoid members under ``proxy`` (an ``(n, n)`` estimate of the distances):
    ``ceil(share * size)``, at most ``per_cluster``.

    ``assign`` holds slots into ``medoids``; centrality is the sum of the proxy to (a sample of at most
    ``max_cluster``) members of the cluster.
    """
    out = []
    is_med = np.zeros(assign.size, bool)
    is_med[medoids] = True
    for c in range(medoids.size):
        members = np.flatnonzero(assign == c)
        members = members[allowed[members] & ~is_med[members]]
        if members.size == 0:
            continue
        ref = members if members.size <= max_cluster else rng.choice(members, max_cluster, replace=False)
        score = proxy[np.ix_(members, ref)].sum(axis=1)
        take = min(per_cluster, max(1, math.ceil(share * members.size)))
        out.append(members[np.argsort(score, kind="stable")[:take]])
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def _swap_round(state: SwapState, cand: np.ndarray, memo: _RetryMemo, stats: SearchStats, tol: float,
                swaps: int, round_no: int = 1) -> int:
    """One eager pass over the candidates ``cand``: each improving swap is made at once.

    ``swaps`` is the swap count before the round (the memo's clock); returns the count after it.
    """
    cache = state.cache
    pos = 0  # the closures below read the loop's current pos and swaps
    cache.start_phase(lambda: f"swap round {round_no}: {swaps} swaps so far (candidates)",
                      lambda: (pos, cand.size))
    for pos, x in enumerate(cand.tolist()):
        if cache.computed >= state.max_pairs:
            break
        if np.any(state.medoids == x):
            continue
        home = int(state.medoids[state.n1[x]])
        if memo.skip(x, home):
            continue
        stats.tried += 1
        c0 = cache.computed
        trial = state.try_swap(x, tol)
        if trial.verdict is Verdict.PRUNED:
            stats.pruned += 1
        elif trial.verdict is Verdict.REJECTED:
            stats.rejected += 1
            stats.rejected_pairs += cache.computed - c0
            memo.reject(x, home, swaps)
        else:
            changed = state.apply(trial)
            swaps += 1
            memo.changed(changed, swaps)
            stats.swap_pairs += cache.computed - c0
    return swaps


# ---------------------------------------------------------------------------------------------- one part

@dataclass(eq=False)
class PartResult:
    r"""k-medoids of one part, in positions ``0..m-1`` of the part.

    Attributes
    ----------
    medoids : ndarray of int64, shape (k,)
        Sorted.
    assignment : ndarray of int64, shape (m,)
        Nearest medoid (a position) of each graph; a medoid is its own.
    distance : ndarray of float64, shape (m,)
        Exact :math:`\mathrm{TMD}(G_i, G_{\text{assignment}[i]})`.
    pairs_computed : int
        Exact TMD evaluations spent on the part.
    rounds, swaps : int
        Swap rounds run, swaps made.
    proxy_loss : float
        FasterPAM's objective on the lower-bound (or, exhaustive, the exact) matrix.
    seconds : float
    stats : SearchStats, optional
    """

    medoids: np.ndarray
    assignment: np.ndarray
    distance: np.ndarray
    pairs_computed: int = 0
    rounds: int = 0
    swaps: int = 0
    proxy_loss: float = 0.0
    seconds: float = 0.0
    stats: SearchStats | None = None

    #: The fields a part cache stores (:meth:`to_arrays`): all that :func:`combine_parts` reads.
    ARRAYS: ClassVar[tuple[str, ...]] = ("medoids", "assignment", "distance", "pairs_computed", "rounds", "swaps")

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The :data:`ARRAYS` fields as numpy arrays (``np.savez``-ready)."""
        return {name: np.asarray(getattr(self, name)) for name in self.ARRAYS}

    @classmethod
    def from_arrays(cls, arrays) -> "PartResult":
        """Inverse of :meth:`to_arrays` (any mapping with those keys, e.g. a loaded ``.npz``)."""
        return cls(np.asarray(arrays["medoids"], np.int64), np.asarray(arrays["assignment"], np.int64),
                   np.asarray(arrays["distance"], np.float64), int(arrays["pairs_computed"]),
                   int(arrays.get("rounds", 0)), int(arrays["swaps"]))

    @classmethod
    def all_medoids(cls, m: int) -> "PartResult":
        """``k >= m``: every graph is its own medoid."""
        med = np.arange(m)
        return cls(med, med.copy(), np.zeros(m))


def refine_kmedoids(lb: LowerBound, cache: PairCache, k: int, *, seed: int = 0, candidates: np.ndarray | None = None,
                    fixed: np.ndarray | None = None, restarts: int = 3, per_cluster: int = 4, max_rounds: int = 6,
                    tol: float = 1e-9, min_round_gain: float = 1e-3, max_pairs: float | None = None,
                    fit_pairs: int | None = None, progress: ProgressFn | None = None) -> PartResult:
    r"""k-medoids of ``len(lb)`` graphs with exact distances only where the lower bound cannot decide.

    FasterPAM on a *fitted proxy* gives the starting medoids: TMD estimated from the three lower bounds of
    each pair, :math:`\hat d = \max(0, c_0 h + c_1 m + c_2 t + c_3)`, with :math:`c` fitted by least squares on
    a sample of exact pairs of these graphs (:func:`fit_proxy`; on most MOSES parts its medoids are a few per
    cent better in the exact objective than the bound's own).  A :class:`SwapState` then makes eager swaps
    (:meth:`SwapState.try_swap`) among per-cluster candidates, the most central under the proxy
    (:func:`_candidates`), round after round, minimising the exact objective
    :math:`\sum_i \min_{m} \mathrm{TMD}(G_i, G_m)`; every pruning test reads the lower bounds, never the proxy.

    Parameters
    ----------
    lb : LowerBound
        Summaries of the ``n`` graphs (positions ``0..n-1``).
    cache : PairCache
        Exact distances between positions.
    k : int
        Number of medoids, ``1 <= k <= n``.
    seed : int
    candidates : ndarray of bool, shape (n,), optional
        Graphs allowed to be medoids (default all).
    fixed : ndarray of bool, shape (n,), optional
        Graphs that must be medoids (e.g. already labelled).
    restarts : int
        FasterPAM restarts on the proxy matrix.
    per_cluster : int
        Swap candidates tried per cluster and round.
    max_rounds : int
        Swap rounds.
    tol : float
        Minimal relative improvement of a swap.
    min_round_gain : float
        Stop after a round that improved the objective by less than this fraction.
    max_pairs : int, optional
        Budget of exact TMD evaluations: no new swap is tried once it is spent (the assignment stays
        exact and certified; it is only less optimised).  Default: no budget.
    fit_pairs : int, optional
        Exact pairs sampled to fit the proxy (kept in the cache; :attr:`SearchStats.fit_pairs`).  Default
        :data:`FIT_PAIRS`, at most 5 % of a budget and an eighth of the part's pairs; 0, a sample too small to
        fit, or a budget below ``n * k`` pairs (all of it goes to the nearest medoids) starts from the lower-bound
        matrix itself.
    progress : callable, optional
        Called with a short status line.

    Returns
    -------
    PartResult
        ``pairs_computed`` is ``cache.computed``; ``stats`` is ``None`` when ``k >= n``.
    """
    from .coreset import kmedoids_coreset

    n = len(lb)
    rng = np.random.default_rng(seed)
    allowed = np.ones(n, bool) if candidates is None else np.asarray(candidates, bool).copy()
    fix = np.zeros(n, bool) if fixed is None else np.asarray(fixed, bool)
    allowed |= fix
    if k >= n:
        return PartResult.all_medoids(n)
    budget = np.inf if max_pairs is None else float(max_pairs)
    # a budget below one pair per graph and medoid is spent on the nearest medoids (see SwapState): a fit's pairs
    # would come out of those (DD 10 %: 300 of 7,935, and an epsilon 0.8 % larger), so such a search starts from
    # the bound itself
    wanted = (FIT_PAIRS if fit_pairs is None else fit_pairs) if _covers_nearest(budget, n, k) else 0
    before = cache.computed
    coef = fit_proxy(lb, cache, _fit_sample_size(n, budget, wanted), seed)
    fitted = cache.computed - before
    if coef is None:
        bound = est = lb.matrix()  # the lower bounds of the part: the proxy, and every pruning test
    else:
        bound, est = lb.matrices(coef)  # the lower bounds (every pruning test) and the fitted proxy
    proxy = kmedoids_coreset(est, k, seed=seed, restarts=restarts,
                             candidates=None if candidates is None and fixed is None else allowed,
                             fixed=fix if fix.any() else None)
    state = SwapState(bound, cache, np.sort(proxy.medoids), fix, budget)
    if progress:
        progress(f"proxy medoids: exact objective {state.d1.sum():.6g} ({cache.computed} exact pairs)")
    stats, memo = SearchStats(initial_pairs=cache.computed, fit_pairs=fitted), _RetryMemo()
    swaps, rounds = 0, 0
    for rounds in range(1, max_rounds + 1):
        start_obj, start_swaps = state.objective, swaps
        swaps = _swap_round(state, _candidates(state.n1, state.medoids, est, per_cluster, allowed, rng), memo,
                            stats, tol, swaps, rounds)
        if progress:
            progress(f"round {rounds}: {swaps - start_swaps} swaps, objective {state.d1.sum():.6g} "
                     f"({cache.computed} exact pairs)")
        if (swaps == start_swaps or start_obj - state.d1.sum() < min_round_gain * start_obj
                or cache.computed >= state.max_pairs):
            break
    return PartResult(state.medoids, state.assignment, state.d1, cache.computed, rounds, swaps, float(proxy.loss),
                      stats=stats)


#: Exact pairs a part samples to fit its proxy (:func:`fit_proxy`): ~1.5 % of a MOSES part's search.
FIT_PAIRS = 300


def _fit_sample_size(n: int, max_pairs: float, wanted: int) -> int:
    """``wanted``, at most 5 % of a pair budget and an eighth of the ``n (n - 1) / 2`` pairs; 0 below 16."""
    size = min(int(wanted), n * (n - 1) // 16, int(0.05 * max_pairs) if np.isfinite(max_pairs) else int(wanted))
    return size if size >= 16 else 0


def fit_proxy(lb: LowerBound, cache: PairCache, size: int, seed: int = 0) -> np.ndarray | None:
    r"""Least-squares fit of TMD on the three lower bounds of a pair, from ``size`` random exact pairs.

    The lower bound :math:`\max(h, m, t)` (:class:`~tmdlib.distance.lower.LowerBound`) is a poor proxy for
    k-medoids: it is ~0.6-0.8 of TMD and its ratio varies between pairs.  Fitting
    :math:`\mathrm{TMD} \approx c_0 h + c_1 m + c_2 t + c_3` on pairs drawn uniformly from the part
    (:math:`h, m, t` as in :meth:`~tmdlib.distance.lower.LowerBound.components`) gives an estimate whose
    FasterPAM medoids start the exact search closer to its end.  The estimate is not a bound: pruning never
    reads it.  The pairs are computed through ``cache`` (counted, and reused by the search).

    Parameters
    ----------
    lb : LowerBound
        Summaries of the ``n`` graphs.
    cache : PairCache
    size : int
        Pairs to draw (:math:`i \ne j`, with replacement); ``0`` fits nothing.
    seed : int

    Returns
    -------
    ndarray of float64, shape (4,), or None
        :math:`c`, rounded to four significant digits; ``None`` when ``size`` is 0 or the fit is not finite.
    """
    n = len(lb)
    if size <= 0 or n < 2:
        return None
    rng = np.random.default_rng([seed, 0x71D])  # its own stream: the search's draws stay as they were
    i = rng.integers(0, n, size)
    j = (i + rng.integers(1, n, size)) % n  # never i
    y = cache.get(i, j)
    x = np.column_stack([lb.components(i, j), np.ones(size)])
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    if not np.all(np.isfinite(coef)):
        return None
    # four significant digits: exact pairs computed through other paths of the engine (blocks, slices, per pair)
    # agree to rounding, and the proxy's medoids must not depend on that rounding
    return np.array([float(f"{c:.4g}") for c in coef])


#: Parts of at most this many graphs are solved on their full exact matrix (n(n-1)/2 pairs, fewer than
#: the search would spend), exactly as the exact engine does: same FasterPAM restarts, same medoids.
EXHAUSTIVE_PART = 64


def _exhaustive(cache: PairCache, k: int, seed: int, candidates, fixed, restarts: int = 5) -> PartResult:
    """k-medoids of a small part on its full exact matrix (the exact engine's algorithm)."""
    from .coreset import assign_to_medoids, kmedoids_coreset

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


def part_engine(spec: PartSpec, num_threads: int | None = None):
    """The exact engine of one part: a :class:`~tmdlib.distance.engine.PairEngine` on ``spec.ds`` told that the
    search will ask for about every graph's distance to every medoid (``m k`` pairs; more where the bounds
    prune little), so that molecules' parts make their table of trees at once.  ``num_threads``: default
    ``spec.num_threads``."""
    from ..distance.engine import PairEngine

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
    t0 = time.perf_counter()
    if exact is None:
        exact = part_engine(spec)
    cache = PairCache(exact, len(spec.ds), progress=progress, size=spec.ds.nodes_per_graph)
    if len(spec.ds) <= EXHAUSTIVE_PART:
        out = _exhaustive(cache, int(spec.k), spec.seed, spec.candidates, spec.fixed)
    else:
        lb = LowerBound.of(spec.ds, spec.depth, spec.weights)
        out = refine_kmedoids(lb, cache, int(spec.k), seed=spec.seed, candidates=spec.candidates, fixed=spec.fixed,
                              max_pairs=spec.max_pairs, progress=progress)
    return replace(out, pairs_computed=cache.computed, seconds=time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------------- parts of a pool

def partition(emb: np.ndarray, part_size: int, *, chunk: int = 1 << 18,
              progress: ProgressFn | None = None) -> list[np.ndarray]:
    r"""Split graphs ``0..n-1`` into parts of at most ``part_size`` graphs that are close to each other.

    Recursive bisection at the median of the first principal direction of ``emb`` (one row per graph,
    e.g. :func:`tmdlib.distance.lower.structure_embedding`), so a part holds graphs of similar structure;
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


def split_work(n: int, part_size: int) -> int:
    """Rows :func:`partition` projects to split ``n`` graphs into parts of at most ``part_size``: the sizes of
    every group it splits, summed (each costs a projection of its rows).  ``O(log n)``, like
    :func:`count_parts`."""
    return _bisection(n, part_size)[1]


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


def count_parts(n: int, part_size: int) -> int:
    """The number of parts :func:`partition` makes of ``n`` graphs (one part when ``n <= part_size``).

    The bisection splits ``m`` graphs into ``m // 2`` and ``m - m // 2``, so the count depends on ``n`` and
    ``part_size`` only: ``O(log n)`` work, no embedding needed.
    """
    return _bisection(n, part_size)[0]


def _bisection(n: int, part_size: int) -> tuple[int, int]:
    """``(parts, rows projected)`` of :func:`partition`'s bisection of ``n`` graphs into parts of at most
    ``part_size`` (:func:`count_parts`, :func:`split_work`): a walk over the distinct group sizes."""
    n, part_size = int(n), int(part_size)
    if part_size < 1:
        raise ValueError(f"part_size must be >= 1, got {part_size}")
    memo: dict[int, tuple[int, int]] = {}

    def walk(m: int) -> tuple[int, int]:
        if m <= part_size:
            return (1 if m > 0 else 0), 0
        if m not in memo:
            (a, ra), (b, rb) = walk(m // 2), walk(m - m // 2)
            memo[m] = a + b, m + ra + rb
        return memo[m]

    return walk(n)


def fit_part_size(part_size: int, n: int, k: int) -> int:
    r"""The smallest part size :math:`\ge` ``part_size`` whose partition of ``n`` graphs has at most ``k`` parts.

    Every part needs a medoid of its own (a graph is certified by the nearest medoid of its part), so a small
    coreset of a large pool -- 0.1 % of 160,000 graphs is k = 160, fewer than the 256 parts of at most 1,000
    graphs -- takes larger parts: here 128 parts of 1,250 graphs.  Deterministic in ``(part_size, n, k)``.

    Parameters
    ----------
    part_size : int
        The part size asked for (or chosen from the pool).
    n : int
        Pool size.
    k : int
        Medoids in all, :math:`1 \le k \le n`.

    Returns
    -------
    int
        ``part_size`` itself when its parts are at most ``k``.
    """
    part_size, n, k = int(part_size), int(n), int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if count_parts(n, part_size) <= k:
        return part_size
    lo, hi = part_size + 1, max(n, part_size + 1)  # count_parts(n, n) = 1 <= k; the count only falls as m grows
    while lo < hi:
        mid = (lo + hi) // 2
        if count_parts(n, mid) <= k:
            hi = mid
        else:
            lo = mid + 1
    return lo


def part_budgets(sizes, k: int) -> np.ndarray:
    """Medoids per part: proportional to size (largest remainders), at least 1 per non-empty part, summing to k."""
    sizes = np.asarray(sizes, dtype=np.int64)
    n = int(sizes.sum())
    if k > n:
        raise ValueError(f"k = {k} > n = {n}")
    if k < int((sizes > 0).sum()):
        raise ValueError(f"k = {k} medoids for {int((sizes > 0).sum())} parts: every part needs one (larger parts: "
                         "see fit_part_size)")
    raw = sizes * k / n
    out = np.maximum(np.floor(raw).astype(np.int64), (sizes > 0).astype(np.int64))
    out = np.minimum(out, sizes)
    while out.sum() > k:
        j = int(np.argmax(np.where(out > 1, out - raw, -np.inf)))
        out[j] -= 1
    while out.sum() < k:
        j = int(np.argmax(np.where(out < sizes, raw - out, -np.inf)))
        out[j] += 1
    return out


def _give_fixed_room(budgets: np.ndarray, need: np.ndarray) -> np.ndarray:
    """Raise each part's budget to its fixed medoids ``need``, taking from the parts with most to spare."""
    while (budgets < need).any():
        j = int(np.argmax(need - budgets))
        budgets[j] += 1
        donors = np.flatnonzero(budgets > np.maximum(need, 1))
        budgets[donors[np.argmax(budgets[donors] - need[donors])]] -= 1
    return budgets


#: Exact-TMD work per graph of the pool that the search may spend when its budget is chosen from the pool
#: (``max_pairs="auto"``), in node pairs: a pair of graphs of :math:`|V_i|` and :math:`|V_j|` nodes costs about
#: :math:`|V_i||V_j|` (its computation trees, level by level).  Pools of small graphs never reach it (MOSES at 1 %
#: spends ~35 pairs of ~470 node pairs per graph, under 1 % of it; NCI1 at 10 % ~11 %); pools of large, hardly
#: repeating graphs are held to it (DD, 942 training graphs of 288 nodes: 7,935 pairs, ~0.14 CPU s each, 10 min
#: on 2 cores for an epsilon 1.7 % below what 10,000 pairs gave before the budget went to the graphs first).
AUTO_PAIR_WORK = 7e5


def auto_pair_budget(nodes_per_graph) -> int:
    r"""The search's budget of exact pairs chosen from the pool (``max_pairs="auto"``).

    .. math:: B = \left\lceil \frac{W\,n}{\bar v^{2}} \right\rceil

    with :math:`W` = :data:`AUTO_PAIR_WORK` node pairs of work per graph, :math:`n` graphs and :math:`\bar v`
    their mean number of nodes (:math:`\bar v^2` the mean work of a pair).  Deterministic: the same pool gets
    the same budget, and so the same coreset, on every machine.  The certificate is exact whatever the budget.

    Parameters
    ----------
    nodes_per_graph : array_like of int, shape (n,)

    Returns
    -------
    int
        At least ``n`` (one exact pair per graph).
    """
    v = np.asarray(nodes_per_graph, dtype=np.float64)
    if v.size == 0:
        return 0
    mean = max(float(v.mean()), 1.0)
    return max(int(math.ceil(AUTO_PAIR_WORK * v.size / (mean * mean))), int(v.size))


def resolve_max_pairs(max_pairs, nodes_per_graph) -> float | None:
    """``max_pairs`` as a number of pairs: ``"auto"`` -> :func:`auto_pair_budget`; ``None`` or ``0`` -> None (no
    budget); a positive number as it is."""
    if isinstance(max_pairs, str):
        if max_pairs != "auto":
            raise ValueError(f"max_pairs must be a number of pairs, 0 / None (no budget) or 'auto'; got {max_pairs!r}")
        return float(auto_pair_budget(nodes_per_graph))
    if max_pairs is None or max_pairs == 0:
        return None
    if not max_pairs > 0:
        raise ValueError(f"max_pairs must be positive, 0 / None (no budget) or 'auto'; got {max_pairs!r}")
    return float(max_pairs)


#: Part size of pools up to :data:`AUTO_PART_SWITCH` graphs (``part_size="auto"``).
AUTO_PART_SIZE = 4000
#: Part size of larger pools (``part_size="auto"``).
AUTO_PART_SIZE_LARGE = 1000
#: Pool size above which ``part_size="auto"`` takes :data:`AUTO_PART_SIZE_LARGE`.
AUTO_PART_SWITCH = 100_000


def auto_part_size(n: int) -> int:
    r"""The part size chosen from the pool (``part_size="auto"``): :data:`AUTO_PART_SIZE` (4000) for pools of at
    most :data:`AUTO_PART_SWITCH` (100,000) graphs, :data:`AUTO_PART_SIZE_LARGE` (1000) above.

    Why (BENCHMARKS.md, "MOSES: part size vs time and ε"): the exact pairs a graph costs grow with the size of
    its part (MOSES at 1 %: ~32 per graph in parts of 1000, ~102 in parts of 4000), so the search costs
    :math:`O(n \cdot c(m))` and parts of 4000 took 3.1× the CPU of parts of 1000 for an ε 13 % smaller.  Up to
    10⁵ graphs that is minutes on two cores and the better ε is worth them; past it the pool is held to the
    cheaper parts (1.27 M MOSES graphs: ~2 CPU hours instead of ~6).  Deterministic in ``n``: the same pool gets
    the same parts (and coreset) on every machine.

    Parameters
    ----------
    n : int
        Pool size.

    Returns
    -------
    int
    """
    return AUTO_PART_SIZE if int(n) <= AUTO_PART_SWITCH else AUTO_PART_SIZE_LARGE


def resolve_part_size(part_size, n: int, k: int | None = None) -> int:
    """``part_size`` as a number of graphs: ``"auto"`` or None -> :func:`auto_part_size` of the pool; an integer
    of at least 2 as it is; with ``k`` given, raised where needed so that every part gets a medoid
    (:func:`fit_part_size`)."""
    if k is not None:
        return fit_part_size(resolve_part_size(part_size, n), n, k)
    if part_size is None or part_size == "auto":
        return auto_part_size(n)
    if isinstance(part_size, str):
        try:
            part_size = int(part_size)
        except ValueError:
            raise ValueError(f"part_size must be a number of graphs (>= 2) or 'auto'; got {part_size!r}") from None
    if isinstance(part_size, bool) or int(part_size) != part_size or part_size < 2:
        raise ValueError(f"part_size must be a number of graphs (>= 2) or 'auto'; got {part_size!r}")
    return int(part_size)


def pool_embedding(ds, depth: int = 4, weights="pascal", progress: ProgressFn | None = None) -> np.ndarray:
    """:func:`~tmdlib.distance.lower.structure_embedding` of a pool held in memory, or of one read a chunk at a
    time (:class:`~tmdlib.datasets.stored.StoredGraphs`, with status lines to ``progress``): the same rows, one
    per graph."""
    if isinstance(ds, GraphDataset):
        return structure_embedding(ds, depth, weights)
    return ds.map_chunks(lambda chunk: structure_embedding(chunk, depth, weights),
                         np.zeros((0, int(depth) * 8 + 1), np.float32),
                         progress=Countdown("structure embedding (reading the store)", len(ds), progress))


class PartPlan(Sequence):
    """The parts of a pool as a sequence of :class:`PartSpec`, each made when it is asked for.

    ``plan[p]`` reads part ``p``'s graphs (``pool.take`` in memory, or a
    :class:`~tmdlib.datasets.stored.PartReader` for a pool on disk) and builds its spec, so a mapper that
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
        (:class:`~tmdlib.datasets.stored.StoredGraphs`: its graphs are then grouped by part in a scratch file
        under ``scratch_dir``, see :meth:`~tmdlib.datasets.stored.StoredGraphs.part_reader`).
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
    stubs = [PartSpec(None, int(b), p, depth, weights, seed, None if cand is None else cand[p],
                      None if fix is None else fix[p], None if max_pairs is None else float(max_pairs) * p.size / n,
                      num_threads)
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


@dataclass(frozen=True)
class EngineInfo:
    """What the scalable engine reports in a certificate's ``info``.

    Attributes
    ----------
    parts : int
    part_size : int
    swaps : int
        Swaps made over all parts.
    max_pairs : float, optional
        The budget of exact pairs (as given).
    """

    parts: int
    part_size: int
    swaps: int
    max_pairs: float | None

    def to_json(self) -> dict:
        """``{"parts", "part_size", "swaps", "max_pairs"}``, JSON-ready."""
        return asdict(self)


@dataclass(frozen=True, eq=False)
class ScalableCoreset:
    r"""The pool's coreset from its parts: medoids, the nearest-in-part assignment, exact distances.

    Attributes
    ----------
    medoids : ndarray of int64, shape (k,)
        Sorted positions into the pool.
    assignment : ndarray of int64, shape (n,)
        Medoid (a position) of each graph.
    distance : ndarray of float64, shape (n,)
        Exact :math:`\mathrm{TMD}(G_i, G_{\text{assignment}[i]})`.
    pairs_computed : int
        Exact TMD evaluations over all parts.
    info : EngineInfo
    """

    medoids: np.ndarray
    assignment: np.ndarray
    distance: np.ndarray
    pairs_computed: int
    info: EngineInfo

    def certificate(self):
        """The :class:`~tmdlib.select.certificate.CoresetCertificate` of this coreset (engine ``"scalable"``)."""
        from .evidence import certificate_from_assignment

        return certificate_from_assignment(self.medoids, self.assignment, self.distance, self.pairs_computed,
                                           "scalable", self.info.to_json())


def combine_parts(n: int, parts: Sequence[np.ndarray], results: Sequence, part_size: int = 0,
                  max_pairs: float | None = None) -> ScalableCoreset:
    """The pool's coreset from its parts' results (positions mapped back; medoids sorted).

    Parameters
    ----------
    n : int
        Pool size.
    parts : sequence of ndarray of int64
        Positions of each part's graphs in the pool.
    results : sequence of PartResult
        Aligned with ``parts`` (mappings with :data:`PartResult.ARRAYS` keys are accepted too).
    part_size, max_pairs
        Reported in :class:`EngineInfo`.
    """
    results = [r if isinstance(r, PartResult) else PartResult.from_arrays(r) for r in results]
    medoids, assignment, distance = [], np.empty(n, np.int64), np.empty(n)
    for p, r in zip(parts, results):
        medoids.append(p[np.asarray(r.medoids, np.int64)])
        assignment[p] = p[np.asarray(r.assignment, np.int64)]
        distance[p] = np.asarray(r.distance, np.float64)
    info = EngineInfo(len(parts), int(part_size), int(sum(int(r.swaps) for r in results)), max_pairs)
    return ScalableCoreset(np.sort(np.concatenate(medoids)), assignment, distance,
                           int(sum(int(r.pairs_computed) for r in results)), info)


def scalable_coreset(ds, k: int, depth: int = 4, weights="pascal", *, seed: int = 0, candidates=None,
                     fixed=None, part_size: int | str = "auto", max_pairs: float | str | None = "auto",
                     num_threads: int | None = None,
                     map_parts: Callable[[Sequence[PartSpec]], Sequence[PartResult]] | None = None,
                     progress: ProgressFn | None = None, scratch_dir=None) -> ScalableCoreset:
    r"""TMD k-medoids coreset of ``ds`` without the :math:`n \times n` matrix, with its exact certificate.

    The one implementation of plan → solve parts → combine: :func:`plan_parts`, then
    ``map_parts(specs)`` (default :func:`solve_in_order`), then :func:`combine_parts`.

    Parameters
    ----------
    ds : GraphDataset or StoredGraphs
        The ``n`` graphs to cover: in memory, or a pool on disk read a chunk at a time
        (:class:`~tmdlib.datasets.stored.StoredGraphs`; memory then holds a chunk or the parts in flight,
        never the pool).
    k : int
        Number of medoids.
    depth, weights
        TMD parameters.
    seed : int
    candidates, fixed : array_like of bool, shape (n,), optional
        Graphs allowed to / required to be medoids.
    part_size : int or "auto"
        Largest part solved as one k-medoids problem (larger pools are partitioned, see :func:`partition`);
        ``"auto"`` (default): chosen from the pool size (:func:`auto_part_size`: 4000, 1000 past 10⁵ graphs).
    max_pairs : int or "auto", optional
        Budget of exact TMD evaluations of the search over all parts (split in proportion to part sizes);
        ``"auto"`` (default): chosen from the pool (:func:`auto_pair_budget`); None or 0: none.  The
        certificate is exact whatever the budget.
    num_threads : int, optional
        numba threads of the exact TMD computations.
    map_parts : callable, optional
        ``map_parts(specs) -> results``: a :class:`PartResult` per :class:`PartSpec` of the sequence ``specs``
        (a :class:`PartPlan`: ``specs[p]`` reads part ``p``'s graphs, ``specs.stub(p)`` does not), in the same
        order, however obtained -- :func:`solve_part` on process or Dask workers, a cache of finished parts,
        persisted exact pairs (``solve_part(spec, exact=...)``).  The pipeline's:
        :func:`tasks.coreset.part_mapper`.  Default: :func:`solve_in_order` here.
    progress : callable, optional
        Status lines of the plan's passes over the pool (:func:`plan_parts`) and of the default mapper (a
        ``map_parts`` reports its own).
    scratch_dir : path, optional
        Where a :class:`~tmdlib.datasets.stored.StoredGraphs` pool's graphs are grouped by part (default: the
        system's temporary folder); removed at the end.

    Returns
    -------
    ScalableCoreset
        Medoids, assignment, exact distances, pairs computed and :class:`EngineInfo`;
        :meth:`ScalableCoreset.certificate` (what :func:`tmdlib.select.certificate.tmd_coreset` returns)
        turns it into a certificate.
    """
    max_pairs = resolve_max_pairs(max_pairs, ds.nodes_per_graph)
    part_size = resolve_part_size(part_size, len(ds), k if 1 <= k <= len(ds) else None)  # plan_parts checks k
    parts, specs = plan_parts(ds, k, depth, weights, seed=seed, candidates=candidates, fixed=fixed,
                              part_size=part_size, max_pairs=max_pairs, num_threads=num_threads,
                              scratch_dir=scratch_dir, progress=progress)
    try:
        results = solve_in_order(specs, progress) if map_parts is None else list(map_parts(specs))
    finally:
        specs.close()
    if len(results) != len(specs):
        raise ValueError(f"map_parts returned {len(results)} results for {len(specs)} parts")
    return combine_parts(len(ds), parts, results, part_size, max_pairs)
