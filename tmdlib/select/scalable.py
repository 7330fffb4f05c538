r"""k-medoids under TMD without the :math:`n \times n` matrix, with an exact certificate.

The engine behind ``tmd_coreset(..., engine="scalable")`` (:mod:`tmdlib.select.certificate`).

Ingredients
-----------
* **Lower bounds** :math:`\mathrm{LB}(i, j) \le \mathrm{TMD}(G_i, G_j)` from level histograms, level
  means and tree norms (:class:`tmdlib.distance.lower.LowerBound`): ``O(L |E|)`` to build, ``O(L F)``
  per pair, ~0.8 of TMD (median) on molecules.
* **Exact distances on demand**: a :class:`PairCache` in front of a batched exact TMD function
  (local threads, processes or a Dask cluster); every pair is computed at most once and counted.

Algorithm (one part of at most ``part_size`` graphs)
-----------------------------------------------------
1. *Proxy*: FasterPAM on the lower-bound matrix of the part gives ``k`` starting medoids.
2. *Exact nearest and second-nearest medoid* of every graph by a pruned search: medoids are tried
   in increasing LB order and the search stops when the next LB is at least the second-best exact
   distance found -- so the result is the exact nearest (and second-nearest) medoid, with far fewer
   than ``n k`` exact distances.
3. *Restricted eager swaps* (FasterPAM's swap rule on exact distances): for a candidate
   non-medoid ``x`` only graphs with :math:`\mathrm{LB}(i, x) < d_2(i)` can change medoid, so only
   those exact distances are needed.  Candidates: per cluster, the members most central under LB.
   Rounds repeat until no swap improves the objective by more than ``tol``.
4. *Certificate*: each graph, its exact nearest medoid and that exact distance.

Larger pools are split into parts of graphs close under the lower bound (recursive bisection along
the main axis of the level-mean embedding); each part gets ``k`` in proportion to its size and is
solved as above, so the cost grows linearly in ``n`` for a fixed part size, and every part's exact
pairs can run on its own worker.  The union of the parts' medoids is the coreset; each graph is
certified by its nearest medoid in its part (Lemma 3.2 holds for any assignment).
"""
from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np

from ..distance.lower import LowerBound, structure_embedding

__all__ = ["PairCache", "refine_kmedoids", "partition", "part_budgets", "nearest_medoids", "solve_part",
           "scalable_coreset"]


class PairCache:
    """Exact distances on demand: each unordered pair is computed once, by batches.

    Parameters
    ----------
    exact : callable
        ``exact(i, j) -> d`` for int arrays of equal length (positions), returning float array.
    n : int
        Number of graphs (positions ``0..n-1``).
    """

    def __init__(self, exact: Callable[[np.ndarray, np.ndarray], np.ndarray], n: int):
        self.exact = exact
        self.n = int(n)
        self.store: dict[int, float] = {}
        self.computed = 0
        self.calls = 0
        self.seconds = 0.0

    def get(self, i, j) -> np.ndarray:
        """Exact distances of pairs ``(i[k], j[k])``, shape ``(P,)``."""
        i = np.asarray(i, dtype=np.int64)
        j = np.asarray(j, dtype=np.int64)
        out = np.zeros(i.size)
        lo, hi = np.minimum(i, j), np.maximum(i, j)
        keys = lo * self.n + hi
        todo = {}
        for pos, (key, a, b) in enumerate(zip(keys.tolist(), lo.tolist(), hi.tolist())):
            if a == b:
                continue
            v = self.store.get(key)
            if v is None:
                todo.setdefault(key, []).append(pos)
            else:
                out[pos] = v
        if todo:
            ks = np.fromiter(todo.keys(), dtype=np.int64, count=len(todo))
            t0 = time.perf_counter()
            vals = np.asarray(self.exact(ks // self.n, ks % self.n), dtype=np.float64)
            self.seconds += time.perf_counter() - t0
            self.calls += 1
            self.computed += ks.size
            for key, v in zip(ks.tolist(), vals.tolist()):
                self.store[key] = v
                for pos in todo[key]:
                    out[pos] = v
        return out


def _nearest_two(points: np.ndarray, medoids: np.ndarray, lb: np.ndarray, cache: PairCache,
                 known: np.ndarray | None = None, max_pairs: float = np.inf):
    """Exact nearest and second-nearest medoid of each point (pruned by LB).

    ``known`` (shape (n, k), NaN = unknown) receives every point-medoid distance computed.  Once
    ``cache.computed`` reaches ``max_pairs`` the search stops after its first round (every point
    then has an exact distance to its LB-nearest medoid, a valid if looser assignment).

    Returns
    -------
    n1, n2 : ndarray of int64, shape (P,)
        Positions (into ``medoids``) of the nearest and second-nearest medoid (``-1`` if k = 1).
    d1, d2 : ndarray of float64, shape (P,)
        Their exact distances (``d2 = inf`` if k = 1).
    """
    P, k = points.size, medoids.size
    n1 = np.full(P, -1, np.int64)
    n2 = np.full(P, -1, np.int64)
    d1 = np.full(P, np.inf)
    d2 = np.full(P, np.inf)
    if P == 0:
        return n1, n2, d1, d2
    bounds = lb[np.ix_(points, medoids)]
    order = np.argsort(bounds, axis=1, kind="stable")
    sorted_lb = np.take_along_axis(bounds, order, axis=1)
    t = np.zeros(P, np.int64)
    rows = np.arange(P)
    first = True
    while True:
        if not first and cache.computed >= max_pairs:
            break
        first = False
        live = rows[(t < k)]
        if live.size == 0:
            break
        live = live[sorted_lb[live, t[live]] < d2[live]]
        if live.size == 0:
            break
        m = order[live, t[live]]
        if known is not None and np.isfinite(d2[live]).any():
            # pivot bound through medoids p whose distances to the point and to medoid m are both known
            with np.errstate(invalid="ignore"):
                piv = np.nanmax(np.abs(known[points[live]] - known[medoids[m]]), axis=1, initial=0.0)
            skip = piv >= d2[live]
            t[live[skip]] += 1
            live, m = live[~skip], m[~skip]
            if live.size == 0:
                continue
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
    # a medoid is its own nearest medoid (distance 0, even if another medoid is identical)
    is_med = np.searchsorted(medoids, points)
    hit = (is_med < k) & (medoids[np.minimum(is_med, k - 1)] == points)
    for p in np.flatnonzero(hit & (n1 != is_med)):
        n2[p], d2[p] = n1[p], d1[p]
        n1[p], d1[p] = is_med[p], 0.0
    return n1, n2, d1, d2


def _swap_gain(aff, dx, n1, d1, d2, fixed_slots, k) -> tuple[float, int]:
    """FasterPAM's best swap for a new medoid ``x``: ``(change of the objective, slot to remove)``.

    Removing medoid ``m`` costs :math:`\sum_{n_1(i)=m} (d_2(i) - d_1(i))`; adding ``x`` moves every
    graph with :math:`d(i, x) < d_1(i)` to ``x`` and caps the removal cost of the others at
    :math:`d(i, x)`.  Only graphs ``aff`` (those with :math:`\mathrm{LB}(i, x) < d_2(i)`) can matter.
    """
    delta = np.bincount(n1, weights=d2 - d1, minlength=k)
    closer = dx < d1[aff]
    i1 = aff[closer]
    acc = float((dx[closer] - d1[i1]).sum())
    np.add.at(delta, n1[i1], d1[i1] - d2[i1])
    mid = ~closer & (dx < d2[aff])
    i2 = aff[mid]
    np.add.at(delta, n1[i2], dx[mid] - d2[i2])
    delta[fixed_slots] = np.inf
    m = int(np.argmin(delta))
    return acc + float(delta[m]), m


def nearest_medoids(lb: LowerBound, cache: PairCache, medoids, chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Exact nearest medoid of every graph (LB-pruned; lower bounds computed chunk by chunk).

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
    for a in range(0, n, chunk):
        pts = np.arange(a, min(n, a + chunk))
        bounds = lb.block(pts, med)
        n1, _, d1, _ = _nearest_one(pts, bounds, med, cache)
        assignment[pts], distance[pts] = med[n1], d1
    return assignment, distance


def _nearest_one(points, bounds, medoids, cache):
    """Exact nearest medoid of ``points`` given their lower bounds to ``medoids`` (rows of ``bounds``)."""
    P, k = bounds.shape
    order = np.argsort(bounds, axis=1, kind="stable")
    sorted_lb = np.take_along_axis(bounds, order, axis=1)
    n1 = np.full(P, -1, np.int64)
    d1 = np.full(P, np.inf)
    t = np.zeros(P, np.int64)
    rows = np.arange(P)
    while True:
        live = rows[t < k]
        live = live[sorted_lb[live, t[live]] < d1[live]]
        if live.size == 0:
            break
        m = order[live, t[live]]
        d = cache.get(points[live], medoids[m])
        better = d < d1[live]
        n1[live[better]], d1[live[better]] = m[better], d[better]
        t[live] += 1
    hit = np.searchsorted(medoids, points)
    own = (hit < k) & (medoids[np.minimum(hit, k - 1)] == points)
    n1[own], d1[own] = hit[own], 0.0
    return n1, None, d1, None


def _candidates(assign: np.ndarray, medoids: np.ndarray, lb: np.ndarray, per_cluster: int, allowed: np.ndarray,
                rng: np.random.Generator, max_cluster: int = 400, share: float = 0.2) -> np.ndarray:
    """Per cluster, its most central non-medoid members under LB: ``ceil(share * size)``, at most ``per_cluster``."""
    out = []
    is_med = np.zeros(assign.size, bool)
    is_med[medoids] = True
    for c in range(medoids.size):
        members = np.flatnonzero(assign == c)
        members = members[allowed[members] & ~is_med[members]]
        if members.size == 0:
            continue
        ref = members if members.size <= max_cluster else rng.choice(members, max_cluster, replace=False)
        score = lb[np.ix_(members, ref)].sum(axis=1)
        take = min(per_cluster, max(1, math.ceil(share * members.size)))
        out.append(members[np.argsort(score, kind="stable")[:take]])
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def refine_kmedoids(lb: LowerBound, cache: PairCache, k: int, *, seed: int = 0, candidates: np.ndarray | None = None,
                    fixed: np.ndarray | None = None, restarts: int = 3, per_cluster: int = 4, max_rounds: int = 6,
                    tol: float = 1e-9, min_round_gain: float = 1e-3, max_pairs: float | None = None,
                    progress: Callable[[str], None] | None = None) -> dict:
    r"""k-medoids of ``len(lb)`` graphs with exact distances only where the lower bound cannot decide.

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
    progress : callable, optional
        Called with a short status line.

    Returns
    -------
    dict
        ``medoids`` (sorted positions), ``assignment`` (medoid position per graph), ``distance`` (exact),
        ``proxy_loss``, ``rounds``, ``swaps``.
    """
    from .coreset import kmedoids_coreset

    n = len(lb)
    rng = np.random.default_rng(seed)
    allowed = np.ones(n, bool) if candidates is None else np.asarray(candidates, bool).copy()
    fix = np.zeros(n, bool) if fixed is None else np.asarray(fixed, bool)
    allowed |= fix
    if k >= n:
        med = np.arange(n)
        return {"medoids": med, "assignment": med.copy(), "distance": np.zeros(n), "proxy_loss": 0.0,
                "rounds": 0, "swaps": 0}
    bound = lb.matrix()  # the lower bounds of the part: the proxy, and every pruning test below
    res = kmedoids_coreset(bound, k, seed=seed, restarts=restarts,
                           candidates=None if candidates is None and fixed is None else allowed,
                           fixed=fix if fix.any() else None)
    med = np.sort(res.medoids)
    pts = np.arange(n)
    known = np.full((n, k), np.nan)  # exact point-medoid distances computed so far (medoids act as pivots)
    budget = np.inf if max_pairs is None else float(max_pairs)
    n1, n2 = np.empty(n, np.int64), np.empty(n, np.int64)
    d1, d2 = np.empty(n), np.empty(n)
    rest = np.setdiff1d(pts, med)
    for group in (med, rest):  # medoids first: their rows are the pivots' distances for everyone else
        n1[group], n2[group], d1[group], d2[group] = _nearest_two(group, med, bound, cache, known, budget)
    if progress:
        progress(f"proxy medoids: exact objective {d1.sum():.6g} ({cache.computed} exact pairs)")
    swaps, rounds = 0, 0
    stats = {"initial_pairs": cache.computed, "tried": 0, "pruned": 0, "rejected": 0, "rejected_pairs": 0,
             "swap_pairs": 0}
    # a rejected candidate is tried again only after a swap touched its cluster (or it moved)
    changed_at: dict[int, int] = {}    # medoid graph -> swap counter of the last change of its cluster
    rejected_at: dict[int, tuple] = {}  # candidate -> (its medoid, swap counter) when rejected
    for rounds in range(1, max_rounds + 1):
        improved = 0
        start_obj = float(d1.sum())
        cand = _candidates(n1, med, bound, per_cluster, allowed, rng)
        for x in cand.tolist():
            if cache.computed >= budget:
                break
            if np.any(med == x):
                continue
            home = int(med[n1[x]])
            prev = rejected_at.get(x)
            if prev is not None and prev[0] == home and changed_at.get(home, -1) < prev[1]:
                continue
            bx = bound[x].copy()
            aff = np.flatnonzero(bx < d2)
            # The change of the objective is non-decreasing in every d(i, x): with the lower bounds in
            # place of the exact distances it is a lower bound of the true change.  No gain possible:
            # skip x without computing anything exact.
            stats["tried"] += 1
            if med.size > 1 and _swap_gain(aff, bx[aff], n1, d1, d2, fix[med], med.size)[0] >= -tol * max(
                    float(d1.sum()), 1e-300):
                stats["pruned"] += 1
                continue
            c0 = cache.computed
            # pivot bounds through the medoids: d(i, x) >= |d(i, m) - d(x, m)| for every medoid m whose
            # distances to both i and x are known (no new exact pair needed)
            piv = np.flatnonzero(~np.isnan(known[x]))
            if piv.size and aff.size:
                with np.errstate(invalid="ignore"):
                    tri = np.nanmax(np.abs(known[np.ix_(aff, piv)] - known[x, piv]), axis=1, initial=0.0)
                bx[aff] = np.maximum(bx[aff], tri)
                aff = aff[bx[aff] < d2[aff]]
            # exact distances in order of promise, stopping as soon as the bound says no gain is possible
            est = bx[aff].copy()
            order = np.argsort(est - d1[aff], kind="stable")
            done, step, rejected = 0, 16, False
            while done < aff.size:
                sel = order[done:done + step]
                est[sel] = cache.get(np.full(sel.size, x), aff[sel])
                done += sel.size
                step *= 2
                if done < aff.size and med.size > 1 and _swap_gain(aff, est, n1, d1, d2, fix[med], med.size)[0] >= \
                        -tol * max(float(d1.sum()), 1e-300):
                    rejected = True
                    break
            if rejected:
                stats["rejected"] += 1
                stats["rejected_pairs"] += cache.computed - c0
                rejected_at[x] = (home, swaps)
                continue
            dx = est
            if med.size == 1:  # replace the only medoid: every graph moves to x
                change = float(dx.sum() - d1.sum())
                m = 0
            else:
                change, m = _swap_gain(aff, dx, n1, d1, d2, fix[med], med.size)
            if not change < -tol * max(float(d1.sum()), 1e-300):
                stats["rejected"] += 1
                stats["rejected_pairs"] += cache.computed - c0
                rejected_at[x] = (home, swaps)
                continue
            old = med[m]
            med = med.copy()
            med[m] = x
            known[:, m] = np.nan
            known[aff, m] = dx
            known[x, m] = 0.0
            order = np.argsort(med, kind="stable")
            med = med[order]
            known = known[:, order]
            # points touched by the swap: assigned to / second to the removed medoid, or now closer to x
            inv = np.empty_like(order)
            inv[order] = np.arange(order.size)
            n1 = np.where(n1 >= 0, inv[np.maximum(n1, 0)], -1)
            n2 = np.where(n2 >= 0, inv[np.maximum(n2, 0)], -1)
            new_pos = int(np.searchsorted(med, x))
            touched = np.zeros(n, bool)
            touched[(n1 == new_pos) | (n2 == new_pos)] = True  # they pointed at the removed medoid's slot
            touched[aff[dx < d2[aff]]] = True
            touched[old] = True
            idx = np.flatnonzero(touched)
            before = med[n1[idx][n1[idx] >= 0]]
            a1, a2, e1, e2 = _nearest_two(idx, med, bound, cache, known, budget)
            for g in np.unique(np.concatenate([before, med[a1], [old, x]])).tolist():
                changed_at[g] = swaps + 1
            n1[idx], n2[idx], d1[idx], d2[idx] = a1, a2, e1, e2
            stats["swap_pairs"] += cache.computed - c0
            swaps += 1
            improved += 1
        if progress:
            progress(f"round {rounds}: {improved} swaps, objective {d1.sum():.6g} ({cache.computed} exact pairs)")
        if not improved or start_obj - d1.sum() < min_round_gain * start_obj or cache.computed >= budget:
            break
    return {"medoids": med, "assignment": med[n1], "distance": d1, "proxy_loss": float(res.loss),
            "rounds": rounds, "swaps": swaps, "stats": stats}


def partition(emb: np.ndarray, part_size: int) -> list[np.ndarray]:
    """Split graphs ``0..n-1`` into parts of at most ``part_size`` graphs that are close to each other.

    Recursive bisection at the median of the first principal direction of ``emb`` (one row per graph,
    e.g. :func:`tmdlib.distance.lower.structure_embedding`), so a part holds graphs of similar structure;
    deterministic.
    """
    emb = np.asarray(emb, dtype=np.float64 if emb.dtype != np.float32 else np.float32)
    out: list[np.ndarray] = []
    stack = [np.arange(emb.shape[0])]
    while stack:
        idx = stack.pop()
        if idx.size <= part_size:
            out.append(idx)
            continue
        x = emb[idx] - emb[idx].mean(axis=0)
        # top principal direction by a few power iterations (deterministic start)
        v = np.ones(x.shape[1], dtype=x.dtype) / math.sqrt(x.shape[1])
        for _ in range(20):
            v = x.T @ (x @ v)
            nv = np.linalg.norm(v)
            if nv == 0:
                break
            v /= nv
        order = np.argsort(x @ v, kind="stable")
        half = idx.size // 2
        stack.append(idx[order[half:]])
        stack.append(idx[order[:half]])
    return out


def part_budgets(sizes, k: int) -> np.ndarray:
    """Medoids per part: proportional to size (largest remainders), at least 1 per non-empty part, summing to k."""
    sizes = np.asarray(sizes, dtype=np.int64)
    n = int(sizes.sum())
    if k > n:
        raise ValueError(f"k = {k} > n = {n}")
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


#: Parts of at most this many graphs are solved on their full exact matrix (n(n-1)/2 pairs, fewer than
#: the search would spend), exactly as the exact engine does: same FasterPAM restarts, same medoids.
EXHAUSTIVE_PART = 64


def _exhaustive(cache: PairCache, k: int, seed: int, candidates, fixed, restarts: int = 5) -> dict:
    """k-medoids of a small part on its full exact matrix (the exact engine's algorithm)."""
    from .coreset import assign_to_medoids, kmedoids_coreset

    n = cache.n
    iu, ju = np.triu_indices(n, 1)
    D = np.zeros((n, n))
    D[iu, ju] = cache.get(iu, ju)
    D[ju, iu] = D[iu, ju]
    res = kmedoids_coreset(D, min(k, n), seed=seed, restarts=restarts, candidates=candidates, fixed=fixed)
    med, assignment, _ = assign_to_medoids(D, res.medoids)
    return {"medoids": med, "assignment": assignment, "distance": D[np.arange(n), assignment],
            "proxy_loss": float(res.loss), "rounds": 0, "swaps": 0, "stats": {"exhaustive": True}}


def solve_part(ds, k: int, depth: int = 4, weights="pascal", *, seed: int = 0, candidates=None, fixed=None,
               max_pairs: float | None = None, num_threads: int | None = None,
               exact: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
               progress: Callable[[str], None] | None = None) -> dict:
    """One part: :func:`refine_kmedoids` of the graphs of ``ds`` with exact TMD on demand.

    Self-contained (takes only the part's graphs), so it can run on a remote worker.

    Returns
    -------
    dict
        ``medoids``, ``assignment``, ``distance`` (positions into ``ds``), ``pairs_computed``, ``rounds``,
        ``swaps``, ``seconds``, ``stats``.
    """
    from ..distance.engine import PairEngine

    t0 = time.perf_counter()
    if exact is None:
        exact = PairEngine(ds, depth, weights, num_threads=num_threads)
    cache = PairCache(exact, len(ds))
    if len(ds) <= EXHAUSTIVE_PART:
        out = _exhaustive(cache, int(k), seed, candidates, fixed)
    else:
        lb = LowerBound.of(ds, depth, weights)
        out = refine_kmedoids(lb, cache, int(k), seed=seed, candidates=candidates, fixed=fixed, max_pairs=max_pairs,
                              progress=progress)
    out.update(pairs_computed=cache.computed, seconds=time.perf_counter() - t0)
    return out


def plan_parts(ds, k: int, depth: int = 4, weights="pascal", *, seed: int = 0, candidates=None, fixed=None,
               part_size: int = 4000, max_pairs: float | None = None,
               num_threads: int | None = None) -> tuple[list[np.ndarray], list[dict]]:
    """Split a pool into parts and give each its budget: ``(parts, specs)`` for :func:`solve_part`.

    ``parts[p]`` are positions into ``ds``; ``specs[p]`` the keyword arguments of :func:`solve_part`
    for that part (``ds`` = the part's graphs, ``k`` its share of the budget, never below its fixed
    medoids), so a part can be solved anywhere.
    """
    n = len(ds)
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, {n}], got {k}")
    cand = None if candidates is None else np.asarray(candidates, bool)
    fix = None if fixed is None else np.asarray(fixed, bool)
    parts = [np.arange(n)] if n <= part_size else partition(structure_embedding(ds, depth, weights), part_size)
    budgets = part_budgets(np.array([p.size for p in parts]), k)
    if fix is not None:  # every part keeps at least its fixed medoids; the others give way
        need = np.array([int(fix[p].sum()) for p in parts])
        while (budgets < need).any():
            j = int(np.argmax(need - budgets))
            budgets[j] += 1
            donors = np.flatnonzero(budgets > np.maximum(need, 1))
            budgets[donors[np.argmax(budgets[donors] - need[donors])]] -= 1
    specs = [{"ds": ds.take(p), "k": int(b), "depth": depth, "weights": weights, "seed": seed,
              "candidates": None if cand is None else cand[p], "fixed": None if fix is None else fix[p],
              "max_pairs": None if max_pairs is None else float(max_pairs) * p.size / n, "num_threads": num_threads}
             for p, b in zip(parts, budgets)]
    return parts, specs


def combine_parts(n: int, parts: list[np.ndarray], results: list[dict], part_size: int = 0,
                  max_pairs: float | None = None) -> dict:
    """The pool's coreset from its parts' results (positions mapped back; medoids sorted)."""
    medoids, assignment, distance = [], np.empty(n, np.int64), np.empty(n)
    for p, r in zip(parts, results):
        medoids.append(p[np.asarray(r["medoids"], np.int64)])
        assignment[p] = p[np.asarray(r["assignment"], np.int64)]
        distance[p] = np.asarray(r["distance"], np.float64)
    med = np.sort(np.concatenate(medoids))
    pairs = int(sum(int(r["pairs_computed"]) for r in results))
    info = {"parts": len(parts), "part_size": int(part_size), "swaps": int(sum(int(r["swaps"]) for r in results)),
            "max_pairs": max_pairs}
    return {"medoids": med, "assignment": assignment, "distance": distance, "pairs_computed": pairs, "info": info}


def scalable_coreset(ds, k: int, depth: int = 4, weights="pascal", *, seed: int = 0, candidates=None, fixed=None,
                     part_size: int = 4000, max_pairs: float | None = None, num_threads: int | None = None,
                     map_parts: Callable | None = None, progress: Callable[[str], None] | None = None):
    r"""TMD k-medoids coreset of ``ds`` without the :math:`n \times n` matrix, with its exact certificate.

    :func:`plan_parts`, then :func:`solve_part` on every part (here, one after the other, or by
    ``map_parts``), then :func:`combine_parts`.

    Parameters
    ----------
    ds : GraphDataset
        The ``n`` graphs to cover.
    k : int
        Number of medoids.
    depth, weights
        TMD parameters.
    seed : int
    candidates, fixed : array_like of bool, shape (n,), optional
        Graphs allowed to / required to be medoids.
    part_size : int
        Largest part solved as one k-medoids problem (larger pools are partitioned, see :func:`partition`).
    max_pairs : int, optional
        Budget of exact TMD evaluations over all parts (split in proportion to part sizes).
    num_threads : int, optional
        numba threads of the exact TMD computations.
    map_parts : callable, optional
        ``map_parts(specs) -> list of results`` (the pipeline fans parts out to processes or a Dask
        cluster and caches them).  Default: solve the parts one after the other here.
    progress : callable, optional

    Returns
    -------
    dict
        ``medoids`` (sorted positions), ``assignment``, ``distance`` (exact, per graph), ``pairs_computed``
        and ``info``; :func:`tmdlib.select.certificate.tmd_coreset` turns it into a certificate.
    """
    parts, specs = plan_parts(ds, k, depth, weights, seed=seed, candidates=candidates, fixed=fixed,
                              part_size=part_size, max_pairs=max_pairs, num_threads=num_threads)
    if map_parts is None:
        results = []
        for i, spec in enumerate(specs):
            results.append(solve_part(**spec, progress=progress if len(specs) == 1 else None))
            if progress and len(specs) > 1:
                progress(f"part {i + 1}/{len(specs)} done ({sum(r['pairs_computed'] for r in results)} exact pairs)")
    else:
        results = map_parts(specs)
    return combine_parts(len(ds), parts, results, part_size, max_pairs)
