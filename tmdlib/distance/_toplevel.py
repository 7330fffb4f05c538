"""Numba kernels of listed pairs computed from a table one level below the root (:func:`pair_list_top`).

The universe's table :math:`T_{L-2}` between all of its level-:math:`(L-2)` trees is made once by
:class:`~tmdlib.distance._engine.PairEngine`; a pair then builds only its root-level table and solves the root OT
with the kernels of :mod:`tmdlib.distance._kernels`.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._kernels import _deal_listed_pairs, _level_span, _pair_scratch, ot_ranges

__all__ = ["pair_list_top"]


@njit(cache=True, parallel=True)
def pair_list_top(node_ptr, gi, gj, rep_ptr, root, rep_of, root_blank, rep_feat, ch_ptr, ch, ch_blank, top, fdist, w,
                  lanes=1):
    r"""TMD of listed pairs from a table of every tree distance one level below the root (parallel over pairs).

    For a universe whose level-:math:`(L-2)` trees are few (molecules: a few thousand per part), the
    table :math:`T_{L-2}` between all of them is made once (:class:`~tmdlib.distance._engine.PairEngine`);
    a pair then builds only its root-level table, between the *distinct* root trees of the two graphs
    (a graph's nodes whose depth-:math:`L` trees are equal share one row: 13 % of a molecule's nodes),

    .. math:: M[u, v] = \lVert f_u - f_v \rVert + w\, \mathrm{OT}_{T_{L-2}}\big(\rho(\mathrm{ch}(u), \mathrm{ch}(v))\big),

    children looked up by their level-:math:`(L-2)` ids, and solves the root OT over the nodes, with the
    trees the two graphs share cancelled (TD is a pseudometric), instead of the :math:`L - 1` node-level tables
    of :func:`~tmdlib.distance._kernels.pair_list` (values agree to rounding).  Every array a pair reads is in the order of tree ids, never
    of nodes, and the pair is oriented by content (:func:`_content_after`): a value is a function of the two
    graphs' contents, bit for bit.

    Parameters
    ----------
    node_ptr, gi, gj, lanes
        As in :func:`~tmdlib.distance._kernels.pair_list`.
    rep_ptr : ndarray of int64, shape (G + 1,)
        CSR pointer of each graph's distinct root trees (its *representatives*).
    root, rep_of, root_blank : ndarray, shape (N,)
        Per graph, its nodes in the order of their root-tree ids (positions ``node_ptr[g]:node_ptr[g+1]``):
        the root id (sorted within the graph), the representative (local to the graph) and the root tree's
        distance to the blank tree.
    rep_feat : ndarray of int64, shape (R,)
        Feature row (into ``fdist``) of each representative.
    ch_ptr : ndarray of int64, shape (R + 1,)
        CSR pointer of the representatives' children.
    ch, ch_blank : ndarray, shape (nnz,)
        Children's level-:math:`(L-2)` ids (rows and columns of ``top``; sorted within each representative)
        and their distances to the blank tree.
    top : ndarray of float64, shape (U, U)
        :math:`T_{L-2}` between all level-:math:`(L-2)` ids.
    fdist : ndarray of float64, shape (F, F)
        :func:`~tmdlib.distance._kernels.feature_distances` of the feature table.
    w : float
        Weight of the root level, ``weights[L - 2]``.

    Returns
    -------
    ndarray of float64, shape (P,)
    """
    p = gi.shape[0]
    out = np.empty(p)
    seq, ptr = _deal_listed_pairs(node_ptr, gi, gj, lanes)
    for lane in prange(max(1, lanes)):
        for q in range(ptr[lane], ptr[lane + 1]):
            k = seq[q]
            g1, g2 = gi[k], gj[k]
            if _content_after(root, node_ptr, g1, g2):
                g1, g2 = g2, g1
            out[k] = _pair_top(node_ptr, g1, g2, rep_ptr, root, rep_of, root_blank, rep_feat, ch_ptr, ch, ch_blank,
                               top, fdist, w)
    return out


@njit(cache=True)
def _content_after(root, node_ptr, g1, g2):
    """Whether ``g1`` comes after ``g2`` in an order of the graphs' contents (node count, then their sorted root
    ids): :func:`pair_list_top` computes each pair in that orientation, so its value depends on the two graphs'
    contents only -- the same bits for ``(i, j)`` and ``(j, i)``, and for any copy of either graph."""
    a0, a1 = node_ptr[g1], node_ptr[g1 + 1]
    b0, b1 = node_ptr[g2], node_ptr[g2 + 1]
    if a1 - a0 != b1 - b0:
        return a1 - a0 > b1 - b0
    for t in range(a1 - a0):
        if root[a0 + t] != root[b0 + t]:
            return root[a0 + t] > root[b0 + t]
    return False


@njit(cache=True)
def _pair_top(node_ptr, g1, g2, rep_ptr, root, rep_of, root_blank, rep_feat, ch_ptr, ch, ch_blank, top, fdist, w):
    """One pair of :func:`pair_list_top`."""
    a0, a1 = node_ptr[g1], node_ptr[g1 + 1]
    b0, b1 = node_ptr[g2], node_ptr[g2 + 1]
    r0, r1 = rep_ptr[g1], rep_ptr[g1 + 1]
    q0, q1 = rep_ptr[g2], rep_ptr[g2 + 1]
    ip1 = ch_ptr[r0:r1 + 1] - ch_ptr[r0]
    ip2 = ch_ptr[q0:q1 + 1] - ch_ptr[q0]
    l_a = ch[ch_ptr[r0]:ch_ptr[r1]]
    l_b = ch[ch_ptr[q0]:ch_ptr[q1]]
    cbuf, ra, rb, wk = _pair_scratch(a1 - a0, b1 - b0)
    table = np.empty((r1 - r0, q1 - q0))
    _level_span(0, r1 - r0, False, rep_feat[r0:r1], ip1, l_a, l_a, ch_blank[ch_ptr[r0]:ch_ptr[r1]],
                rep_feat[q0:q1], ip2, l_b, l_b, ch_blank[ch_ptr[q0]:ch_ptr[q1]], top, fdist, w, table,
                cbuf, ra, rb, wk)
    return ot_ranges(root, rep_of, root_blank, a0, a1, root, rep_of, root_blank, b0, b1, table, cbuf, ra, rb, wk)
