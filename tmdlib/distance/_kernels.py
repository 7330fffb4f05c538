"""Numba kernels of the TMD engine: distance tables between tree ids, root assignments, pairs.

Notation (see :mod:`tmdlib.distance._engine`): a *block* compares the computation trees of a
set of row graphs with those of a set of column graphs.  At level ``l`` the
distinct tree ids of the row graphs are numbered ``0..R_l-1`` (row-local) and
those of the column graphs ``0..C_l-1`` (column-local); the table
``T_l[i, j]`` holds :math:`\\mathrm{TD}` between row id ``i`` and column id ``j``.

Child problems with at most 4 trees per side are padded with blank trees and
enumerated in place (:func:`level_table`).  Larger ones and every root-level
problem go to :func:`ot_ranges`: trees common to both multisets are cancelled
first (valid because :math:`\\mathrm{TD}` is a pseudometric, so in an optimal
plan the common mass can stay in place), then the rest is solved exactly as a
rectangular assignment (:mod:`tmdlib.distance.assign`): by a recursion over
column subsets on the shapes where it is faster, up to
:data:`~tmdlib.distance.assign.SUBSET_MAX` columns (the 5-6-neighbour nodes of
protein graphs; :func:`~tmdlib.distance.assign.subsets_pay`), else by shortest
augmenting paths.

:func:`pair_tmd` / :func:`pair_list` run the same recursion on node-level tables
of one pair at a time (no ids), for single pairs and for data without shared trees; :func:`pair_list_top`
(:mod:`tmdlib.distance._toplevel`) from a table of the trees one level below the root.
"""
from __future__ import annotations

from contextlib import contextmanager

import numba
import numpy as np
from numba import njit, prange

from .assign import _min3, assign_rect, assign_small, assign_subsets, ot_work, subsets_pay

__all__ = ["feature_table", "level_table", "root_pairs", "ot_ranges", "pair_tmd", "pair_tmd_wide", "pair_list",
           "feature_distances", "feature_lookup", "pair_values", "serial_if", "PARALLEL_MIN_NODE_PAIRS",
           "WIDE_PAIR_NODE_PAIRS", "pairs_are_small"]

#: Lanes per numba thread of the row loops (:func:`_level_rows`, :func:`_pair_rows`): each lane allocates its
#: scratch once and takes every ``lanes``-th row pair (row ``t`` and its mirror ``R - 1 - t``, so lanes get even
#: work); several per thread so that a thread slowed by the machine does not hold the others back.
SCRATCH_LANES = 4

def _lanes() -> int:
    """Lanes of the row loops for the current number of numba threads (:data:`SCRATCH_LANES` each)."""
    return SCRATCH_LANES * numba.get_num_threads()


#: Root-level work (node pairs :math:`\sum |V_i||V_j|` over the pairs of a call) below which the pair
#: kernels run on one thread.  The work of a pair grows with both graphs' sizes, so the threshold is on
#: node pairs, not on the number of pairs: ~1000 pairs of 22-atom molecules run serially (a thread
#: hand-off costs more), while two pairs of 300-node proteins (DD, ~0.1 s each) already use every thread.
PARALLEL_MIN_NODE_PAIRS = 250_000


def pairs_are_small(node_ptr, gi, gj) -> bool:
    """Whether the listed graph pairs are too little work for a parallel region (see
    :data:`PARALLEL_MIN_NODE_PAIRS`); ``gi``, ``gj`` index graphs by ``node_ptr``."""
    sizes = np.diff(np.asarray(node_ptr)).astype(np.float64)
    return _little_work(sizes[gi] * sizes[gj])


def _little_work(work: np.ndarray) -> bool:
    """:func:`pairs_are_small` from the pairs' work (node pairs :math:`|V_i||V_j|` each, shape ``(P,)``)."""
    return work.size < 2 or float(work.sum()) < PARALLEL_MIN_NODE_PAIRS


@contextmanager
def serial_if(small: bool):
    """Run numba parallel kernels on one thread while the work is small.

    A parallel region costs a thread hand-off; on a busy machine that can take
    milliseconds, far more than a small table or a few pairs need.
    """
    if not small:
        yield
        return
    old = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(old)


@njit(cache=True)
def ot_ranges(g_a, l_a, b_a, s0, e0, g_b, l_b, b_b, s1, e1, table, cbuf, ra, rb, wk):
    """Unnormalised OT between two padded multisets of trees, exactly.

    The multisets are ``A = positions s0..e0-1`` of the row arrays and
    ``B = positions s1..e1-1`` of the column arrays.  Trees present in both are
    cancelled (TD is a pseudometric, so an optimal plan may leave common mass in
    place); of the remainders (sizes ``p``, ``q``) the smaller is padded with
    blank trees.  Sizes up to 4 are enumerated; larger problems are solved as the
    rectangular assignment :math:`\\sum_s b_s + \\min_\\sigma \\sum_r (C_{r\\sigma(r)} - b_{\\sigma(r)})`
    (see :mod:`tmdlib.distance.assign`): :func:`~tmdlib.distance.assign.assign_subsets` on the shapes
    where it is faster (:func:`~tmdlib.distance.assign.subsets_pay`, at most
    :data:`~tmdlib.distance.assign.SUBSET_MAX` trees on the larger side), else
    :func:`~tmdlib.distance.assign.assign_rect`.

    Parameters
    ----------
    g_a, g_b : ndarray of int64
        Global tree ids, sorted ascending within each range (repeats allowed).
    l_a, l_b : ndarray of int64
        Row-local / column-local ids into ``table``.
    b_a, b_b : ndarray of float64
        Distance of each tree to a blank tree.
    s0, e0, s1, e1 : int
        The two ranges.
    table : ndarray of float64, shape (R, C)
        Tree distances between row-local and column-local ids.
    cbuf : ndarray of float64, shape (>= k, >= k), ``k = max(e0 - s0, e1 - s1)``
        Scratch cost matrix.
    ra, rb : ndarray of int64, shape (>= k,)
        Scratch for the uncancelled positions.
    wk : tuple
        Scratch of :func:`tmdlib.distance.assign.ot_work`.

    Returns
    -------
    float
        :math:`\\mathrm{OT}_{\\mathrm{TD}}(\\rho(A, B))` with unit masses.
    """
    i = s0
    j = s1
    pa = 0
    pb = 0
    while i < e0 and j < e1:
        x, y = g_a[i], g_b[j]
        if x == y:
            i += 1
            j += 1
        elif x < y:
            ra[pa] = i
            pa += 1
            i += 1
        else:
            rb[pb] = j
            pb += 1
            j += 1
    while i < e0:
        ra[pa] = i
        pa += 1
        i += 1
    while j < e1:
        rb[pb] = j
        pb += 1
        j += 1
    if pa == 0:
        s = 0.0
        for t in range(pb):
            s += b_b[rb[t]]
        return s
    if pb == 0:
        s = 0.0
        for t in range(pa):
            s += b_a[ra[t]]
        return s
    if pa == 1 and pb == 1:
        return table[l_a[ra[0]], l_b[rb[0]]]
    k = pa if pa > pb else pb
    if k <= 4:
        for r in range(pa):
            row = table[l_a[ra[r]]]
            for c in range(pb):
                cbuf[r, c] = row[l_b[rb[c]]]
            blank_r = b_a[ra[r]]
            for c in range(pb, k):
                cbuf[r, c] = blank_r
        for r in range(pa, k):
            for c in range(pb):
                cbuf[r, c] = b_b[rb[c]]
        return assign_small(cbuf, k)
    u, v, spc, path, row4col, col4row, remaining, sr, sc, f = wk
    base = 0.0
    if pa <= pb:
        for c in range(pb):
            base += b_b[rb[c]]
        for r in range(pa):
            row = table[l_a[ra[r]]]
            for c in range(pb):
                t = rb[c]
                cbuf[r, c] = row[l_b[t]] - b_b[t]
        if subsets_pay(pa, pb):
            return base + assign_subsets(cbuf, pa, pb, f)
        return base + assign_rect(cbuf, pa, pb, u, v, spc, path, row4col, col4row, remaining, sr, sc)
    for r in range(pa):
        t = ra[r]
        blank_r = b_a[t]
        base += blank_r
        row = table[l_a[t]]
        for c in range(pb):
            cbuf[c, r] = row[l_b[rb[c]]] - blank_r
    if subsets_pay(pb, pa):
        return base + assign_subsets(cbuf, pb, pa, f)
    return base + assign_rect(cbuf, pb, pa, u, v, spc, path, row4col, col4row, remaining, sr, sc)


@njit(cache=True)
def _mirror_tiles(out, bi, bs):
    """Copy the strict upper triangle into the lower one for tile row ``bi``."""
    n = out.shape[0]
    i0 = bi * bs
    i1 = min(n, i0 + bs)
    for bj in range(bi + 1):
        j0 = bj * bs
        for i in range(i0, i1):
            for j in range(j0, min(i, j0 + bs)):
                out[i, j] = out[j, i]


@njit(cache=True, parallel=True)
def _mirror_parallel(out, bs):
    nb = (out.shape[0] + bs - 1) // bs
    half = (nb + 1) // 2
    for t in prange(half):
        _mirror_tiles(out, t, bs)
        if nb - 1 - t != t:
            _mirror_tiles(out, nb - 1 - t, bs)


@njit(cache=True)
def _mirror_serial(out, bs):
    nb = (out.shape[0] + bs - 1) // bs
    for t in range(nb):
        _mirror_tiles(out, t, bs)


def _mirror(out):
    """Make the square ``out`` symmetric from its upper triangle (tiled copy)."""
    if out.shape[0] >= 2048:
        _mirror_parallel(out, 64)
    else:
        _mirror_serial(out, 64)


@njit(cache=True, parallel=True)
def _feature_rows(rows_a, rows_b, symmetric, out):
    nr, nc, d = rows_a.shape[0], rows_b.shape[0], rows_a.shape[1]
    for i in prange(nr):
        j0 = i if symmetric else 0
        for j in range(j0, nc):
            s = 0.0
            for t in range(d):
                z = rows_a[i, t] - rows_b[j, t]
                s += z * z
            out[i, j] = np.sqrt(s)


def feature_table(rows_a, rows_b, symmetric):
    """Level-0 table: Euclidean distances between feature rows.

    Parameters
    ----------
    rows_a : ndarray of float64, shape (R, d)
    rows_b : ndarray of float64, shape (C, d)
    symmetric : bool
        ``rows_a`` equals ``rows_b``: compute the upper triangle and mirror it.

    Returns
    -------
    ndarray of float64, shape (R, C)
        :math:`\\lVert a_i - b_j \\rVert_2`.
    """
    out = np.empty((rows_a.shape[0], rows_b.shape[0]))
    with serial_if(out.size * max(rows_a.shape[1], 1) < 200_000):
        _feature_rows(np.ascontiguousarray(rows_a), np.ascontiguousarray(rows_b), symmetric, out)
    if symmetric:
        _mirror(out)
    return out


@njit(cache=True)
def _level_span(i0, i1, symmetric, feat_a, ptr_a, g_a, l_a, b_a, feat_b, ptr_b, g_b, l_b, b_b,
                prev, table0, w, out, cbuf, ra, rb, wk):
    """Fill rows ``i0..i1-1`` of a level table (columns ``j >= i`` only if ``symmetric``).

    Child problems of at most 3 trees per side (molecules' nodes: 99 %) are solved in place as
    rectangular assignments, :math:`\\sum b_{\\text{long}} + \\min_\\sigma \\sum_r (C_{r\\sigma(r)} - b_{\\sigma(r)})`
    over the injective maps of the shorter side (at most 6), with no function call: a numba call with
    array arguments costs about as much as the small problem itself.  Up to 4 trees per side they are padded
    and enumerated (:func:`~tmdlib.distance.assign.assign_small`); larger ones go to :func:`ot_ranges`.
    A non-finite cost makes the entry NaN, as the solvers do.
    """
    nc = out.shape[1]
    for i in range(i0, i1):
        s0, e0 = ptr_a[i], ptr_a[i + 1]
        na = e0 - s0
        blank_a = 0.0
        for t in range(s0, e0):
            blank_a += b_a[t]
        fa = feat_a[i]
        j0 = i if symmetric else 0
        for j in range(j0, nc):
            s1, e1 = ptr_b[j], ptr_b[j + 1]
            nb = e1 - s1
            if nb == 0:
                ot = blank_a
            elif na == 0:
                ot = 0.0
                for t in range(s1, e1):
                    ot += b_b[t]
            elif na <= 3 and nb <= 3:
                # rows: the shorter side (p trees), columns: the longer (q); d[r, c] = C - blank of column c
                chk = 0.0
                if na <= nb:
                    p, q = na, nb
                    ot = 0.0
                    for c in range(nb):
                        ot += b_b[s1 + c]
                    for r in range(na):
                        x = l_a[s0 + r]
                        for c in range(nb):
                            v = prev[x, l_b[s1 + c]] - b_b[s1 + c]
                            cbuf[r, c] = v
                            chk += v
                else:
                    p, q = nb, na
                    ot = blank_a
                    for r in range(nb):
                        y = l_b[s1 + r]
                        for c in range(na):
                            v = prev[l_a[s0 + c], y] - b_a[s0 + c]
                            cbuf[r, c] = v
                            chk += v
                if p == 1:
                    best = cbuf[0, 0]
                    for c in range(1, q):
                        if cbuf[0, c] < best:
                            best = cbuf[0, c]
                elif p == 2:
                    best = cbuf[0, 0] + cbuf[1, 1]
                    v = cbuf[0, 1] + cbuf[1, 0]
                    if v < best:
                        best = v
                    if q == 3:
                        v = cbuf[0, 0] + cbuf[1, 2]
                        if v < best:
                            best = v
                        v = cbuf[0, 2] + cbuf[1, 0]
                        if v < best:
                            best = v
                        v = cbuf[0, 1] + cbuf[1, 2]
                        if v < best:
                            best = v
                        v = cbuf[0, 2] + cbuf[1, 1]
                        if v < best:
                            best = v
                else:
                    best = _min3(cbuf, 0, 1, 2, 0, 1, 2)
                ot += best + 0.0 * chk  # NaN if any cost is NaN or infinite
            elif na <= 4 and nb <= 4:
                k = na if na > nb else nb
                for r in range(na):
                    lr = l_a[s0 + r]
                    for c in range(nb):
                        cbuf[r, c] = prev[lr, l_b[s1 + c]]
                    for c in range(nb, k):
                        cbuf[r, c] = b_a[s0 + r]
                for r in range(na, k):
                    for c in range(nb):
                        cbuf[r, c] = b_b[s1 + c]
                ot = assign_small(cbuf, k)
            else:
                ot = ot_ranges(g_a, l_a, b_a, s0, e0, g_b, l_b, b_b, s1, e1, prev, cbuf, ra, rb, wk)
            out[i, j] = table0[fa, feat_b[j]] + w * ot


@njit(cache=True, parallel=True)
def _level_rows(feat_a, ptr_a, g_a, l_a, b_a, feat_b, ptr_b, g_b, l_b, b_b, prev, table0, w,
                symmetric, kmax, out, lanes):
    nr = ptr_a.shape[0] - 1
    half = (nr + 1) // 2
    k1 = kmax + 1
    lanes = max(1, min(half, lanes))
    for lane in prange(lanes):  # one scratch per lane, rows t = lane, lane + lanes, ... with their mirrors
        cbuf = np.empty((k1, k1))
        ra = np.empty(k1, np.int64)
        rb = np.empty(k1, np.int64)
        wk = ot_work(k1)
        for t in range(lane, half, lanes):
            _level_span(t, t + 1, symmetric, feat_a, ptr_a, g_a, l_a, b_a, feat_b, ptr_b, g_b, l_b, b_b,
                        prev, table0, w, out, cbuf, ra, rb, wk)
            i2 = nr - 1 - t
            if i2 != t:
                _level_span(i2, i2 + 1, symmetric, feat_a, ptr_a, g_a, l_a, b_a, feat_b, ptr_b, g_b, l_b, b_b,
                            prev, table0, w, out, cbuf, ra, rb, wk)


def level_table(feat_a, ptr_a, g_a, l_a, b_a, feat_b, ptr_b, g_b, l_b, b_b, prev, table0, w,
                symmetric, kmax):
    """Tree distances at one level from the table of the level below.

    For row id ``i`` (features ``feat_a[i]``, children at positions
    ``ptr_a[i]:ptr_a[i+1]``) and column id ``j``:

    .. math::

        T[i, j] = T_0[f_i, f_j]
            + w \\cdot \\mathrm{OT}_{T_{\\text{prev}}}\\big(\\rho(\\mathrm{ch}(i), \\mathrm{ch}(j))\\big).

    Parameters
    ----------
    feat_a : ndarray of int64, shape (R,)
        Row of ``table0`` of each row id.
    ptr_a : ndarray of int64, shape (R + 1,)
        CSR pointer into the children arrays.
    g_a, l_a, b_a : ndarray, shape (nnz_a,)
        Children: global id (sorted within each row id), row-local id into
        ``prev``, blank distance.
    feat_b, ptr_b, g_b, l_b, b_b
        Same for the column ids (``feat_b`` indexes columns of ``table0``).
    prev : ndarray of float64, shape (R', C')
        Table of the level below.
    table0 : ndarray of float64, shape (R_0, C_0)
        Feature distances.
    w : float
        Weight of this level.
    symmetric : bool
        Rows and columns are the same id set: fill the upper triangle and mirror.
    kmax : int
        Largest number of children of any id.

    Returns
    -------
    ndarray of float64, shape (R, C)
    """
    out = np.empty((ptr_a.shape[0] - 1, ptr_b.shape[0] - 1))
    with serial_if(out.size < 50_000):
        _level_rows(feat_a, ptr_a, g_a, l_a, b_a, feat_b, ptr_b, g_b, l_b, b_b, prev, table0, float(w),
                    symmetric, kmax, out, _lanes())
    if symmetric:
        _mirror(out)
    return out


@njit(cache=True)
def _pair_row(i, symmetric, ptr_a, g_a, l_a, b_a, ptr_b, g_b, l_b, b_b, table, out, cbuf, ra, rb, wk):
    """Fill row ``i`` of a block of graph distances (columns ``j > i`` only if ``symmetric``)."""
    nc = out.shape[1]
    s0, e0 = ptr_a[i], ptr_a[i + 1]
    orow = out[i]
    if symmetric:
        orow[i] = 0.0
    j0 = i + 1 if symmetric else 0
    for j in range(j0, nc):
        orow[j] = ot_ranges(g_a, l_a, b_a, s0, e0, g_b, l_b, b_b, ptr_b[j], ptr_b[j + 1], table,
                            cbuf, ra, rb, wk)


@njit(cache=True, parallel=True)
def _pair_rows(ptr_a, g_a, l_a, b_a, ptr_b, g_b, l_b, b_b, table, symmetric, kmax, out, lanes):
    nr = ptr_a.shape[0] - 1
    half = (nr + 1) // 2
    k1 = kmax + 1
    lanes = max(1, min(half, lanes))
    for lane in prange(lanes):  # as in _level_rows: one scratch per lane
        cbuf = np.empty((k1, k1))
        ra = np.empty(k1, np.int64)
        rb = np.empty(k1, np.int64)
        wk = ot_work(k1)
        for t in range(lane, half, lanes):
            _pair_row(t, symmetric, ptr_a, g_a, l_a, b_a, ptr_b, g_b, l_b, b_b, table, out, cbuf, ra, rb, wk)
            i2 = nr - 1 - t
            if i2 != t:
                _pair_row(i2, symmetric, ptr_a, g_a, l_a, b_a, ptr_b, g_b, l_b, b_b, table, out, cbuf, ra, rb, wk)


def root_pairs(ptr_a, g_a, l_a, b_a, ptr_b, g_b, l_b, b_b, table, symmetric, kmax):
    """TMD between every row graph and every column graph: one root-level OT per pair.

    Parameters
    ----------
    ptr_a : ndarray of int64, shape (Ga + 1,)
        Graph ``i`` owns root trees at positions ``ptr_a[i]:ptr_a[i+1]``.
    g_a, l_a, b_a : ndarray, shape (Na,)
        Root trees: global id (sorted within each graph), row-local id into
        ``table``, blank distance.
    ptr_b, g_b, l_b, b_b
        Same for the column graphs.
    table : ndarray of float64, shape (R, C)
        Root-level tree distances.
    symmetric : bool
        Row and column graphs are the same list: fill ``j > i``, mirror, zero diagonal.
    kmax : int
        Largest graph size.

    Returns
    -------
    ndarray of float64, shape (Ga, Gb)
    """
    out = np.empty((ptr_a.shape[0] - 1, ptr_b.shape[0] - 1))
    node_pairs = float(ptr_a[-1]) * float(ptr_b[-1])  # root-level work: sum over pairs of |V_i| |V_j|
    with serial_if(min(out.shape) == 0 or out.size < 2 or node_pairs < PARALLEL_MIN_NODE_PAIRS):
        _pair_rows(ptr_a, g_a, l_a, b_a, ptr_b, g_b, l_b, b_b, table, symmetric, kmax, out, _lanes())
    if symmetric:
        _mirror(out)
    return out


@njit(cache=True)
def _cross_distances(a, b):
    """Euclidean distances between the rows of ``a`` (n1, d) and of ``b`` (n2, d), shape ``(n1, n2)``."""
    n1, n2 = a.shape[0], b.shape[0]
    d = a.shape[1]
    out = np.empty((n1, n2))
    for i in range(n1):
        for j in range(n2):
            s = 0.0
            for t in range(d):
                z = a[i, t] - b[j, t]
                s += z * z
            out[i, j] = np.sqrt(s)
    return out


@njit(cache=True)
def _row_norms(x):
    """Euclidean norm of every row of ``x`` (n, d), shape ``(n,)``."""
    n, d = x.shape
    out = np.empty(n)
    for i in range(n):
        s = 0.0
        for t in range(d):
            s += x[i, t] * x[i, t]
        out[i] = np.sqrt(s)
    return out


@njit(cache=True)
def _pair_start(x1, x2):
    """Node-level feature distances ``(n1, n2)`` and feature norms of one pair (level 0 of :func:`pair_tmd`)."""
    return _cross_distances(x1, x2), _row_norms(x1), _row_norms(x2)


@njit(cache=True)
def feature_distances(table):
    """Distances between the rows of a feature table and their norms, with :func:`_pair_start`'s arithmetic.

    Parameters
    ----------
    table : ndarray of float64, shape (F, d)

    Returns
    -------
    fdist : ndarray of float64, shape (F, F)
        :math:`\\lVert f_r - f_s \\rVert_2`, the same bits as :func:`_pair_start` gives two nodes of rows r, s.
    fnorm : ndarray of float64, shape (F,)
        :math:`\\lVert f_r \\rVert_2`.
    """
    return _cross_distances(table, table), _row_norms(table)


@njit(cache=True)
def _pair_start_rows(f1, f2, fdist, fnorm):
    """:func:`_pair_start` of two graphs whose nodes have feature rows ``f1``, ``f2``, looked up in the
    tables of :func:`feature_distances` (no pass over the feature columns)."""
    n1, n2 = f1.shape[0], f2.shape[0]
    t0 = np.empty((n1, n2))
    for i in range(n1):
        drow = fdist[f1[i]]
        for j in range(n2):
            t0[i, j] = drow[f2[j]]
    nrm1 = np.empty(n1)
    for i in range(n1):
        nrm1[i] = fnorm[f1[i]]
    nrm2 = np.empty(n2)
    for j in range(n2):
        nrm2[j] = fnorm[f2[j]]
    return t0, nrm1, nrm2


@njit(cache=True)
def _blank_next(nrm, ip, b, w):
    """Blank distance of every node's tree one level up: its feature norm plus ``w`` times its children's."""
    n = nrm.shape[0]
    out = np.empty(n)
    for i in range(n):
        s = 0.0
        for t in range(ip[i], ip[i + 1]):
            s += b[t]
        out[i] = nrm[i] + w * s
    return out


@njit(cache=True)
def _pair_scratch(n1, n2):
    """Scratch of every OT of one pair (the root problem is the largest): ``cbuf, ra, rb, wk``."""
    kmax = max(n1, n2) + 1
    return np.empty((kmax, kmax)), np.empty(kmax, np.int64), np.empty(kmax, np.int64), ot_work(kmax)


@njit(cache=True)
def _pair_root(table, bl1, bl2, cbuf, ra, rb, wk):
    """The root-level OT of one pair from its top node-level table (trees of the two graphs never cancel)."""
    n1, n2 = table.shape
    roots_a = np.arange(n1)
    roots_b = np.arange(n2)
    return ot_ranges(roots_a, roots_a, bl1, 0, n1, roots_b + n1, roots_b, bl2, 0, n2, table, cbuf, ra, rb, wk)


@njit(cache=True)
def pair_tmd(x1, ip1, ix1, x2, ip2, ix2, w):
    """TMD of one pair of graphs, the original algorithm's node-level recursion in numba.

    ``M_l[i, j]`` (TD between the depth-``l+1`` trees of node ``i`` of graph 1 and
    node ``j`` of graph 2) is built level by level from ``M_{l-1}`` over the
    neighbour lists, then the root OT is solved; every OT is an exact
    assignment.  O(L n1 n2) small problems; used for single pairs and sparse
    pair lists where shared tables do not pay off.  One thread (it runs inside
    :func:`pair_list`'s parallel loop); :func:`pair_tmd_wide` splits each level's rows
    across threads instead.

    Parameters
    ----------
    x1, x2 : ndarray of float64, shapes (n1, d), (n2, d)
    ip1, ix1, ip2, ix2 : ndarray of int64
        CSR adjacency of each graph with local node ids.
    w : ndarray of float64, shape (L - 1,)

    Returns
    -------
    float
    """
    t0, nrm1, nrm2 = _pair_start(x1, x2)
    return _pair_levels(t0, nrm1, nrm2, ip1, ix1, ip2, ix2, w)


@njit(cache=True)
def _pair_levels(t0, nrm1, nrm2, ip1, ix1, ip2, ix2, w):
    """:func:`pair_tmd` from its node-level feature distances ``t0`` (n1, n2) and feature norms."""
    n1, n2 = t0.shape
    cbuf, ra, rb, wk = _pair_scratch(n1, n2)
    feat_a = np.arange(n1)
    feat_b = np.arange(n2)
    g_b = ix2 + n1  # never equal to a node id of graph 1: no cancellation
    bl1 = nrm1.copy()
    bl2 = nrm2.copy()
    table = t0
    for lev in range(w.shape[0]):
        b_a = bl1[ix1]
        b_b = bl2[ix2]
        out = np.empty((n1, n2))
        _level_span(0, n1, False, feat_a, ip1, ix1, ix1, b_a, feat_b, ip2, g_b, ix2, b_b, table, t0, w[lev],
                    out, cbuf, ra, rb, wk)
        table, bl1, bl2 = out, _blank_next(nrm1, ip1, b_a, w[lev]), _blank_next(nrm2, ip2, b_b, w[lev])
    return _pair_root(table, bl1, bl2, cbuf, ra, rb, wk)


@njit(cache=True)
def pair_tmd_wide(x1, ip1, ix1, x2, ip2, ix2, w, lanes):
    """:func:`pair_tmd` with each level's rows split across the numba threads (:func:`_level_rows`).

    The same arithmetic in the same order, so the same value bit for bit; for one large pair (two
    proteins of thousands of nodes take seconds), where a parallel loop over pairs would leave every
    thread but one idle.  Must not be called from inside a parallel loop.  ``lanes``: :func:`_lanes`.
    """
    n1, n2 = x1.shape[0], x2.shape[0]
    t0, nrm1, nrm2 = _pair_start(x1, x2)
    kmax = 1
    for i in range(n1):
        kmax = max(kmax, ip1[i + 1] - ip1[i])
    for j in range(n2):
        kmax = max(kmax, ip2[j + 1] - ip2[j])
    feat_a = np.arange(n1)
    feat_b = np.arange(n2)
    g_b = ix2 + n1
    bl1 = nrm1.copy()
    bl2 = nrm2.copy()
    table = t0
    for lev in range(w.shape[0]):
        b_a = bl1[ix1]
        b_b = bl2[ix2]
        out = np.empty((n1, n2))
        _level_rows(feat_a, ip1, ix1, ix1, b_a, feat_b, ip2, g_b, ix2, b_b, table, t0, w[lev], False, kmax, out,
                    lanes)
        table, bl1, bl2 = out, _blank_next(nrm1, ip1, b_a, w[lev]), _blank_next(nrm2, ip2, b_b, w[lev])
    return _pair_root(table, bl1, bl2, *_pair_scratch(n1, n2))


@njit(cache=True)
def _deal_pairs(work, lanes):
    """Pairs dealt to ``lanes`` lanes, heaviest first, each to the lane with the least work so far.

    Returns ``seq`` (P,), the pairs lane after lane, and ``ptr`` (lanes + 1,), lane ``l`` owning
    ``seq[ptr[l]:ptr[l+1]]``: no lane holds more than the mean work plus one pair's.
    """
    p = work.shape[0]
    order = np.argsort(-work, kind="mergesort")
    load = np.zeros(lanes)
    lane_of = np.empty(p, np.int64)
    for t in range(p):
        k = order[t]
        best = 0
        for lane in range(1, lanes):
            if load[lane] < load[best]:
                best = lane
        lane_of[k] = best
        load[best] += work[k]
    ptr = np.zeros(lanes + 1, np.int64)
    for k in range(p):
        ptr[lane_of[k] + 1] += 1
    for lane in range(lanes):
        ptr[lane + 1] += ptr[lane]
    fill = ptr[:-1].copy()
    seq = np.empty(p, np.int64)
    for t in range(p):
        k = order[t]
        seq[fill[lane_of[k]]] = k
        fill[lane_of[k]] += 1
    return seq, ptr


@njit(cache=True)
def _deal_listed_pairs(node_ptr, gi, gj, lanes):
    """:func:`_deal_pairs` of the graph pairs ``(gi[k], gj[k])`` by their work :math:`|V_i||V_j|` (``node_ptr``:
    the graphs' node ranges) to ``max(1, lanes)`` lanes."""
    p = gi.shape[0]
    work = np.empty(p)
    for k in range(p):
        work[k] = float(node_ptr[gi[k] + 1] - node_ptr[gi[k]]) * float(node_ptr[gj[k] + 1] - node_ptr[gj[k]])
    return _deal_pairs(work, max(1, lanes))


@njit(cache=True, parallel=True)
def pair_list(table, fid, indptr, indices, node_ptr, gi, gj, w, fdist, fnorm, lanes=1):
    """TMD of listed pairs of a concatenated dataset (parallel over pairs).

    Parameters
    ----------
    table : ndarray of float64, shape (F, d)
        Feature table; node ``v`` has features ``table[fid[v]]``.
    fid : ndarray of int64, shape (N,)
    indptr, indices : ndarray of int64
        Global CSR adjacency (global node ids).
    node_ptr : ndarray of int64, shape (G + 1,)
    gi, gj : ndarray of int64, shape (P,)
        Graph positions of the pairs.
    w : ndarray of float64, shape (L - 1,)
    fdist, fnorm : ndarray of float64, shapes (F, F), (F,)
        :func:`feature_distances` of ``table``, or shapes (0, 0), (0,): each pair computes its
        feature distances from the rows (the same bits either way).
    lanes : int
        Lanes of the loop, one per numba thread: the pairs are dealt to them by their work
        :math:`|V_i||V_j|` (:func:`_deal_pairs`), so a thread does not idle while another finishes a run
        of large pairs (a static split of the loop over pairs would give each thread a contiguous run).

    Returns
    -------
    ndarray of float64, shape (P,)
    """
    p = gi.shape[0]
    lookup = fdist.shape[0] > 0
    out = np.empty(p)
    seq, ptr = _deal_listed_pairs(node_ptr, gi, gj, lanes)
    for lane in prange(max(1, lanes)):
        for q in range(ptr[lane], ptr[lane + 1]):
            k = seq[q]
            out[k] = _pair_in_list(table, fid, indptr, indices, node_ptr, gi[k], gj[k], w, fdist, fnorm, lookup)
    return out


@njit(cache=True)
def _pair_in_list(table, fid, indptr, indices, node_ptr, g1, g2, w, fdist, fnorm, lookup):
    """One pair of :func:`pair_list`."""
    a0, a1 = node_ptr[g1], node_ptr[g1 + 1]
    b0, b1 = node_ptr[g2], node_ptr[g2 + 1]
    ip1 = indptr[a0:a1 + 1] - indptr[a0]
    ix1 = indices[indptr[a0]:indptr[a1]] - a0
    ip2 = indptr[b0:b1 + 1] - indptr[b0]
    ix2 = indices[indptr[b0]:indptr[b1]] - b0
    if lookup:
        t0, nrm1, nrm2 = _pair_start_rows(fid[a0:a1], fid[b0:b1], fdist, fnorm)
    else:
        t0, nrm1, nrm2 = _pair_start(table[fid[a0:a1]], table[fid[b0:b1]])
    return _pair_levels(t0, nrm1, nrm2, ip1, ix1, ip2, ix2, w)


#: Work of one pair (node pairs :math:`|V_i||V_j|`) from which it is computed alone on every thread
#: (:func:`pair_tmd_wide`) instead of as one iteration of :func:`pair_list`'s loop over pairs: about a
#: second of work (two 1000-node proteins).  A batch of DD pairs often holds one or two such pairs beside
#: many small ones, and a loop over pairs then leaves all threads but one waiting for them.
WIDE_PAIR_NODE_PAIRS = 1_000_000


#: Feature tables of at most this many rows are turned into a table of row distances (:func:`feature_distances`,
#: 32 MiB at the limit) for the pairs of :func:`pair_values`; molecules and proteins have tens of rows.
FEATURE_LOOKUP_ROWS = 2048


def feature_lookup(table, pair_node_pairs: float = np.inf) -> tuple[np.ndarray, np.ndarray]:
    """:func:`feature_distances` of ``table`` where it pays, else empty tables (``pair_list``'s fallback).

    It pays when the table has at most :data:`FEATURE_LOOKUP_ROWS` rows and its ``F**2`` row pairs are fewer than
    the node pairs whose feature distances it replaces (``pair_node_pairs``; default: as many as it takes).
    """
    table = np.asarray(table)
    f = table.shape[0]
    if f == 0 or f > FEATURE_LOOKUP_ROWS or float(f) * f > pair_node_pairs:
        return np.zeros((0, 0)), np.zeros(0)
    return feature_distances(np.ascontiguousarray(table, dtype=np.float64))


def pair_values(table, fid, indptr, indices, node_ptr, gi, gj, w, lookup=None) -> np.ndarray:
    """TMD of listed pairs (the arguments of :func:`pair_list`), each pair on the threads it can use.

    Pairs of at least :data:`WIDE_PAIR_NODE_PAIRS` node pairs go one at a time through
    :func:`pair_tmd_wide` (rows of each level across the threads); the others through :func:`pair_list`
    (pairs across the threads, on one thread while they are little work: :func:`pairs_are_small`).
    Every pair's value is the same bits either way.  ``lookup``: the ``(fdist, fnorm)`` of
    :func:`feature_lookup` for ``table`` when the caller keeps them across calls (default: made here when they pay).

    Returns
    -------
    ndarray of float64, shape (P,)
    """
    gi = np.asarray(gi, np.int64)
    gj = np.asarray(gj, np.int64)
    sizes = np.diff(np.asarray(node_ptr)).astype(np.float64)
    work = sizes[gi] * sizes[gj]
    wide = work >= WIDE_PAIR_NODE_PAIRS
    fdist, fnorm = feature_lookup(table, float(work.sum())) if lookup is None else lookup
    if numba.get_num_threads() < 2 or not wide.any():  # one loop over pairs, as before wide pairs
        with serial_if(_little_work(work)):
            return pair_list(table, fid, indptr, indices, node_ptr, gi, gj, w, fdist, fnorm, numba.get_num_threads())
    out = np.empty(gi.size)
    rest = np.flatnonzero(~wide)
    if rest.size:
        with serial_if(_little_work(work[rest])):
            out[rest] = pair_list(table, fid, indptr, indices, node_ptr, gi[rest], gj[rest], w, fdist, fnorm,
                                  numba.get_num_threads())
    for k in np.flatnonzero(wide):
        out[k] = pair_tmd_wide(*_one_graph(table, fid, indptr, indices, node_ptr, gi[k]),
                               *_one_graph(table, fid, indptr, indices, node_ptr, gj[k]), w, _lanes())
    return out


def _one_graph(table, fid, indptr, indices, node_ptr, g):
    """``(x, indptr, indices)`` of graph ``g`` of a concatenated dataset, with local node ids."""
    a0, a1 = int(node_ptr[g]), int(node_ptr[g + 1])
    x = np.ascontiguousarray(table[fid[a0:a1]], dtype=np.float64)
    ip = np.ascontiguousarray(indptr[a0:a1 + 1] - indptr[a0], dtype=np.int64)
    ix = np.ascontiguousarray(indices[indptr[a0]:indptr[a1]] - a0, dtype=np.int64)
    return x, ip, ix
