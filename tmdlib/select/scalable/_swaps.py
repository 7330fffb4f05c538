r"""One part's search: the swap state (:class:`SwapState`: FasterPAM's eager swaps on exact distances, pruned by
lower bounds), its rounds (:func:`refine_kmedoids`, giving a :class:`PartResult`) and the proxy that starts them
(:func:`fit_proxy`)."""
from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np

from ...distance._lower import LowerBound
from ._pairs import Nearest, PairCache, ProgressFn, nearest_two

__all__ = ["Verdict", "SwapTrial", "MAX_TRIED", "MAX_PIVOTS", "SwapState", "SearchStats", "PartResult", "refine_kmedoids",
           "FIT_PAIRS", "fit_proxy"]


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
    from .._coreset import kmedoids_coreset

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

    The lower bound :math:`\max(h, m, t)` (:class:`~tmdlib.distance._lower.LowerBound`) is a poor proxy for
    k-medoids: it is ~0.6-0.8 of TMD and its ratio varies between pairs.  Fitting
    :math:`\mathrm{TMD} \approx c_0 h + c_1 m + c_2 t + c_3` on pairs drawn uniformly from the part
    (:math:`h, m, t` as in :meth:`~tmdlib.distance._lower.LowerBound.components`) gives an estimate whose
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


