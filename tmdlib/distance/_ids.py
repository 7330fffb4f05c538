"""Canonical ids of computation trees (exact Weisfeiler-Lehman refinement).

Two computation trees :math:`T^{\\ell+1}_u(G)` and :math:`T^{\\ell+1}_v(G')` are
identical (as rooted trees with features, up to reordering of children) iff

* :math:`f^u = f^v` exactly, and
* the multisets of their children :math:`\\{T^{\\ell}_x : x \\in N(u)\\}` and
  :math:`\\{T^{\\ell}_y : y \\in N(v)\\}` are equal.

So the id of a depth-:math:`(\\ell+1)` tree is the pair (feature id, sorted
multiset of the children's depth-:math:`\\ell` ids); level 0 ids are the distinct
feature rows.  Every tree distance only depends on the two ids, which lets the
engine memoise distances between ids instead of between nodes.

The refinement uses an open-addressing hash table whose collisions are resolved
by comparing the keys exactly, so ids are exact (no hash-collision risk).
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["feature_ids", "dataset_feature_ids", "refine", "tree_ids"]


def feature_ids(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Level-0 ids: index of each node's exact feature row among the distinct rows.

    Parameters
    ----------
    x : ndarray of float64, shape (N, d)

    Returns
    -------
    fid : ndarray of int64, shape (N,)
        ``x[v] == rows[fid[v]]``.
    rows : ndarray of float64, shape (F, d)
        The distinct feature rows.
    """
    if x.shape[0] == 0:
        return np.zeros(0, np.int64), np.zeros((0, x.shape[1]))
    rows, fid = np.unique(x, axis=0, return_inverse=True)
    return fid.reshape(-1).astype(np.int64), np.ascontiguousarray(rows, dtype=np.float64)


def dataset_feature_ids(ds) -> tuple[np.ndarray, np.ndarray]:
    """Level-0 ids of every node of a :class:`~tmdlib._graph.GraphDataset`, from its feature table.

    Only the ``F`` table rows are compared (never the dense ``(N, d)`` matrix).

    Returns
    -------
    fid : ndarray of int64, shape (N,)
    rows : ndarray of float64, shape (F', d)
        The distinct feature rows, ``F' <= F``.
    """
    table = ds.features
    if table.shape[0] == 0:
        return np.zeros(0, np.int64), np.zeros((0, table.shape[1]))
    rows, inv = np.unique(table, axis=0, return_inverse=True)
    return inv.reshape(-1).astype(np.int64)[ds.feature_index], np.ascontiguousarray(rows, dtype=np.float64)


@njit(cache=True, inline="always")
def _mix(h, k):
    """One round of a 64-bit multiply-xorshift hash combine."""
    h ^= np.uint64(k) + np.uint64(0x9E3779B97F4A7C15) + (h << np.uint64(6)) + (h >> np.uint64(2))
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(31)
    return h


@njit(cache=True)
def refine(fid, prev, indptr, indices):
    """One WL refinement step: ids of depth-(l+1) trees from ids of depth-l trees.

    Parameters
    ----------
    fid : ndarray of int64, shape (N,)
        Level-0 (feature) id of every node.
    prev : ndarray of int64, shape (N,)
        Level-l id of every node.
    indptr, indices : ndarray of int64
        CSR adjacency, shapes (N + 1,) and (M,).

    Returns
    -------
    new : ndarray of int64, shape (N,)
        Level-(l+1) id of every node, numbered in order of first appearance.
    rep : ndarray of int64, shape (U,)
        A representative node of each new id.
    seq : ndarray of int64, shape (M,)
        ``seq[indptr[v]:indptr[v+1]]`` is the sorted multiset of the children's
        level-l ids of node ``v``.
    """
    n = fid.shape[0]
    m = indices.shape[0]
    seq = np.empty(m, np.int64)
    for v in range(n):
        s, e = indptr[v], indptr[v + 1]
        for t in range(s, e):
            seq[t] = prev[indices[t]]
        if e - s > 1:
            seq[s:e] = np.sort(seq[s:e])
    size = 1
    while size < 2 * n + 2:
        size *= 2
    mask = np.uint64(size - 1)
    table = np.full(size, -1, np.int64)
    new = np.empty(n, np.int64)
    rep = np.empty(n, np.int64)
    count = 0
    for v in range(n):
        s, e = indptr[v], indptr[v + 1]
        h = _mix(np.uint64(0x51ED270B27A8F0C3), fid[v])
        h = _mix(h, e - s)
        for t in range(s, e):
            h = _mix(h, seq[t])
        slot = np.int64(h & mask)
        while True:
            r = table[slot]
            if r < 0:
                table[slot] = v
                new[v] = count
                rep[count] = v
                count += 1
                break
            rs, re_ = indptr[r], indptr[r + 1]
            same = fid[r] == fid[v] and re_ - rs == e - s
            if same:
                for t in range(e - s):
                    if seq[rs + t] != seq[s + t]:
                        same = False
                        break
            if same:
                new[v] = new[r]
                break
            slot = (slot + 1) & (size - 1)
    return new, rep[:count].copy(), seq


def tree_ids(fid: np.ndarray, indptr: np.ndarray, indices: np.ndarray, depth: int):
    """Canonical ids of the computation trees of depth 1..``depth`` of every node.

    Parameters
    ----------
    fid : ndarray of int64, shape (N,)
        Level-0 ids (see :func:`feature_ids`).
    indptr, indices : ndarray of int64
        CSR adjacency over the N nodes (neighbour lists need not be sorted).
    depth : int
        Tree depth :math:`L \\ge 1`.

    Returns
    -------
    ids : list of ndarray of int64, length L
        ``ids[l][v]`` is the id of :math:`T^{l+1}_v`; ``ids[0] = fid``.
    reps : list of ndarray of int64, length L
        ``reps[l][a]`` is a node whose level-l id is ``a`` (``reps[0]`` is ``None``).
    seqs : list of ndarray of int64, length L
        ``seqs[l]`` (l >= 1) holds, in CSR order, the sorted children ids at level
        ``l - 1`` of each node (``seqs[0]`` is ``None``).
    """
    ids, reps, seqs = [fid], [None], [None]
    for _ in range(1, depth):
        new, rep, seq = refine(fid, ids[-1], indptr, indices)
        ids.append(new)
        reps.append(rep)
        seqs.append(seq)
    return ids, reps, seqs
