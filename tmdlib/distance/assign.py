r"""Exact min-cost assignment solvers (numba, float64) used by the TMD engine.

With unit masses and equal cardinalities, the unnormalised optimal transport of
Definition 2.5 is a linear program over doubly stochastic matrices whose
vertices are permutation matrices (Birkhoff-von Neumann), so

.. math:: \mathrm{OT}(X, Y) = \min_{\sigma \in S_k} \sum_{r=0}^{k-1} C_{r, \sigma(r)},

an assignment problem.  Padding ``X`` (size ``p``) with ``q - p`` blank trees
against ``Y`` (size ``q``) turns it into a *rectangular* problem: every unmatched
``y`` pays its blank distance ``b_y``, so

.. math:: \mathrm{OT}(\rho(X, Y)) = \sum_{s} b_s
          + \min_{\sigma: [p] \hookrightarrow [q]} \sum_{r} (C_{r, \sigma(r)} - b_{\sigma(r)}),

which needs ``p`` augmentations instead of ``q``.

Solvers:

* :func:`assign_small` -- enumeration for square ``k <= 4`` (at most 24 permutations);
* :func:`assign_subsets` -- a recursion over column subsets for ``p <= q <=`` :data:`SUBSET_MAX`
  (the child problems of graphs whose nodes have 5-7 neighbours, e.g. proteins);
* :func:`assign_rect` -- shortest augmenting paths with dual potentials (the
  Jonker-Volgenant / Crouse formulation also used by SciPy's
  ``linear_sum_assignment``) for any ``p <= q``, started from a row reduction.

Both are exact: they return the optimal value, summed from an optimal matching
(float rounding can only choose among plans whose costs agree to ~1e-15).

Both refuse non-finite input: if any cost is NaN or infinite (or the costs are so large that their
sum overflows), they return NaN instead of a value, and :func:`assign_rect` also returns NaN if a
shortest-path search finds no finite path (possible only after an overflow), so neither ever indexes
with an unset (-1) column.  The engine turns a NaN into an error; with features within
:data:`tmdlib._graph.FEATURE_LIMIT` and the range check of :mod:`tmdlib.distance._limits` it cannot occur.
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["assign_small", "assign_subsets", "assign_rect", "rect_work", "ot_work", "subsets_pay", "costs_finite",
           "SUBSET_MAX"]

#: Largest number of columns solved by :func:`assign_subsets` (its table has ``2**SUBSET_MAX`` entries); wider
#: problems go to :func:`assign_rect`.
SUBSET_MAX = 6
_POPCOUNT = np.array([bin(m).count("1") for m in range(1 << SUBSET_MAX)], dtype=np.int64)
_LOWEST_BIT = np.array([0] + [(m & -m).bit_length() - 1 for m in range(1, 1 << SUBSET_MAX)], dtype=np.int64)


@njit(cache=True, inline="always")
def costs_finite(c, nr, nc):
    """Whether the block ``c[:nr, :nc]`` is finite (its sum is: NaN and inf propagate; an overflowing
    sum of finite costs also counts as non-finite, which only ever refuses, never passes, a bad input)."""
    s = 0.0
    for i in range(nr):
        for j in range(nc):
            s += c[i, j]
    return np.isfinite(s)


@njit(cache=True, inline="always")
def _min3(c, r0, r1, r2, a, b, d):
    """Optimal value of the 3x3 sub-problem on rows ``r0, r1, r2`` and columns ``a, b, d``."""
    best = c[r0, a] + c[r1, b] + c[r2, d]
    v = c[r0, a] + c[r1, d] + c[r2, b]
    if v < best:
        best = v
    v = c[r0, b] + c[r1, a] + c[r2, d]
    if v < best:
        best = v
    v = c[r0, b] + c[r1, d] + c[r2, a]
    if v < best:
        best = v
    v = c[r0, d] + c[r1, a] + c[r2, b]
    if v < best:
        best = v
    v = c[r0, d] + c[r1, b] + c[r2, a]
    if v < best:
        best = v
    return best


@njit(cache=True)
def assign_small(c, k):
    """Exact assignment value of the square block ``c[:k, :k]`` by enumeration.

    Parameters
    ----------
    c : ndarray of float64, shape (>= k, >= k)
    k : int
        ``0 <= k <= 4``.

    Returns
    -------
    float
        :math:`\\min_\\sigma \\sum_r c_{r, \\sigma(r)}`; NaN if a cost is not finite.
    """
    if k == 0:
        return 0.0
    if not costs_finite(c, k, k):
        return np.nan
    if k == 1:
        return c[0, 0]
    if k == 2:
        a = c[0, 0] + c[1, 1]
        b = c[0, 1] + c[1, 0]
        return a if a < b else b
    if k == 3:
        return _min3(c, 0, 1, 2, 0, 1, 2)
    best = c[0, 0] + _min3(c, 1, 2, 3, 1, 2, 3)
    v = c[0, 1] + _min3(c, 1, 2, 3, 0, 2, 3)
    if v < best:
        best = v
    v = c[0, 2] + _min3(c, 1, 2, 3, 0, 1, 3)
    if v < best:
        best = v
    v = c[0, 3] + _min3(c, 1, 2, 3, 0, 1, 2)
    if v < best:
        best = v
    return best


@njit(cache=True)
def assign_subsets(c, nr, nc, f):
    """Exact value of the rectangular assignment problem on ``c[:nr, :nc]``, ``nr <= nc <= SUBSET_MAX``.

    Rows are matched in order: with :math:`f(\\emptyset) = 0` and, for a set :math:`S` of columns,

    .. math:: f(S) = \\min_{j \\in S} f(S \\setminus \\{j\\}) + c_{|S|-1,\\,j},

    :math:`f(S)` is the cheapest way to match rows ``0..|S|-1`` onto exactly the columns in :math:`S`, and
    the optimum is :math:`\\min_{|S| = nr} f(S)`.  :math:`\\sum_{r \\le nr} r\\binom{nc}{r} \\le nc\\,2^{nc-1}`
    additions with no data-dependent control flow beyond a minimum (192 for a 6 x 6 problem), cheaper than
    the augmenting-path search of :func:`assign_rect` on the 5- and 6-sided child problems of protein graphs
    (measured by ``benchmarks/pair_cost.py``; from 7 columns on the search is as fast or faster).
    The value is summed along an optimal matching in row order, as :func:`assign_rect` sums it.

    Parameters
    ----------
    c : ndarray of float64, shape (>= nr, >= nc)
    nr, nc : int
        Problem size, ``0 <= nr <= nc <= SUBSET_MAX``.
    f : ndarray of float64, shape (>= 2**nc,)
        Scratch (:func:`ot_work`).

    Returns
    -------
    float
        :math:`\\min_{\\sigma: [nr] \\hookrightarrow [nc]} \\sum_i c_{i, \\sigma(i)}`; NaN if a cost is not finite.
    """
    if nr == 0:
        return 0.0
    if not costs_finite(c, nr, nc):
        return np.nan
    best = np.inf
    f[0] = 0.0
    for mask in range(1, 1 << nc):
        r = _POPCOUNT[mask] - 1
        if r >= nr:
            continue
        v = np.inf
        m = mask
        while m:
            j = _LOWEST_BIT[m]
            x = f[mask ^ (1 << j)] + c[r, j]
            if x < v:
                v = x
            m &= m - 1
        f[mask] = v
        if r == nr - 1 and v < best:
            best = v
    return best


@njit(cache=True, inline="always")
def subsets_pay(nr, nc):
    """Whether :func:`assign_subsets` beats :func:`assign_rect` on an ``nr x nc`` problem (``nr <= nc``).

    Measured on random costs, one thread (``benchmarks/pair_cost.py``): up to 5 columns always (1.5-3.6x); at 6
    columns with 1-2 rows or 5-6 rows (1.15-2.9x), not with 3-4 rows (0.9-1.0x: most of the 64 subsets are
    visited for few rows); from 7 columns never.
    """
    if nc <= 5:
        return True
    return nc == SUBSET_MAX and (nr <= 2 or nr >= 5)


@njit(cache=True)
def rect_work(kmax):
    """Scratch arrays for :func:`assign_rect` with up to ``kmax`` columns.

    Returns
    -------
    tuple
        ``(u, v, spc)`` float64, ``(path, row4col, col4row, remaining)`` int64 and
        ``(sr, sc)`` bool, each of shape ``(kmax + 1,)``.
    """
    n = kmax + 1
    return (np.empty(n), np.empty(n), np.empty(n), np.empty(n, np.int64), np.empty(n, np.int64),
            np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.bool_), np.empty(n, np.bool_))


@njit(cache=True)
def ot_work(kmax):
    """Scratch of one OT solve (:func:`tmdlib.distance._kernels.ot_ranges`): the arrays of :func:`rect_work`
    followed by the subset table of :func:`assign_subsets` (``2**SUBSET_MAX`` float64)."""
    u, v, spc, path, row4col, col4row, remaining, sr, sc = rect_work(kmax)
    return u, v, spc, path, row4col, col4row, remaining, sr, sc, np.empty(1 << SUBSET_MAX)


@njit(cache=True)
def assign_rect(c, nr, nc, u, v, spc, path, row4col, col4row, remaining, sr, sc):
    """Exact value of the rectangular assignment problem on ``c[:nr, :nc]``, ``nr <= nc``.

    .. math:: \\min_{\\sigma: [nr] \\hookrightarrow [nc]} \\sum_{i} c_{i, \\sigma(i)}

    Dual potentials ``u`` (rows) and ``v <= 0`` (columns, 0 on free columns) keep
    reduced costs :math:`c_{ij} - u_i - v_j \\ge 0`; rows start from a row
    reduction (``u_i = min_j c_ij``, greedy matching on tight edges), then each
    free row is matched by a Dijkstra search for a shortest augmenting path.
    O(nr^2 nc) time; costs may be negative.

    Parameters
    ----------
    c : ndarray of float64, shape (>= nr, >= nc)
    nr, nc : int
        Problem size, ``nr <= nc``.
    u, v, spc, path, row4col, col4row, remaining, sr, sc : ndarray
        Scratch from :func:`rect_work` (at least ``nc`` entries).

    Returns
    -------
    float
        The optimal value, summed over the optimal matching; NaN if a cost is not finite (or a search
        finds no finite augmenting path, which needs an overflow): never an index of -1.
    """
    if not costs_finite(c, nr, nc):
        return np.nan
    inf = np.inf
    for j in range(nc):
        v[j] = 0.0
        row4col[j] = -1
    for i in range(nr):
        row = c[i]
        best = row[0]
        bj = 0
        for j in range(1, nc):
            x = row[j]
            if x < best:
                best = x
                bj = j
        u[i] = best
        if row4col[bj] < 0:
            row4col[bj] = i
            col4row[i] = bj
        else:
            col4row[i] = -1
    for cur in range(nr):
        if col4row[cur] >= 0:
            continue
        nrem = nc
        for it in range(nc):
            remaining[it] = nc - 1 - it
            spc[it] = inf
            sc[it] = False
        for it in range(nr):
            sr[it] = False
        minval = 0.0
        i = cur
        sink = -1
        while sink < 0:
            index = -1
            lowest = inf
            sr[i] = True
            ui = u[i]
            row = c[i]
            for it in range(nrem):
                j = remaining[it]
                r = minval + row[j] - ui - v[j]
                if r < spc[j]:
                    path[j] = i
                    spc[j] = r
                s = spc[j]
                if s < lowest or (s == lowest and row4col[j] < 0):
                    lowest = s
                    index = it
            if index < 0:  # no finite reduced cost left: only after an overflow; refuse, never index with -1
                return np.nan
            minval = lowest
            j = remaining[index]
            if row4col[j] < 0:
                sink = j
            else:
                i = row4col[j]
            sc[j] = True
            nrem -= 1
            remaining[index] = remaining[nrem]
        u[cur] += minval
        for i in range(nr):
            if sr[i] and i != cur:
                u[i] += minval - spc[col4row[i]]
        for j in range(nc):
            if sc[j]:
                v[j] -= minval - spc[j]
        j = sink
        while True:
            i = path[j]
            row4col[j] = i
            t = col4row[i]
            col4row[i] = j
            j = t
            if i == cur:
                break
    total = 0.0
    for i in range(nr):
        total += c[i, col4row[i]]
    return total
