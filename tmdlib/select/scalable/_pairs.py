r"""Exact TMD on demand and the nearest medoids it decides: :class:`PairCache` (each pair computed once, counted,
held to a budget), :class:`Countdown` (status lines with an ETA), :func:`nearest_two` / :func:`nearest_medoids`
(the exact nearest medoids, pruned by lower bounds)."""
from __future__ import annotations

import math
import time
from typing import Callable, NamedTuple

import numpy as np

from ...distance._lower import LowerBound

__all__ = ["Exact", "ProgressFn", "STATUS_SECONDS", "Countdown", "PairCache", "DENSE_CACHE_MAX", "Nearest", "nearest_two",
           "nearest_medoids"]

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
        The exact engine's smallest block (:class:`~tmdlib.distance._engine.PairEngine`): groups of fewer
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


