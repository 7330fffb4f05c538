r"""Cheap lower bounds on the Tree Mover's Distance, for pruning and proxies.

Let :math:`W_\ell = \prod_{t=1}^{\ell} w(L-t)` be the weight of level :math:`\ell` of a depth-:math:`L`
computation tree (:math:`W_0 = 1`; the coefficients of Algorithm 1) and :math:`c_\ell(G) \in \mathbb R^F`
the *level histogram* of :math:`G`: the number of walks of length :math:`\ell` in :math:`G` that end at
a node whose feature is row :math:`r` of the feature table,
:math:`c_\ell(G)_r = \mathbf 1^\top A^\ell [f^v = r]`.  Three bounds hold for every pair of graphs:

1. **Level histograms.**  An optimal TMD transport matches root trees, then (recursively) their
   children; at level :math:`\ell` it couples the multisets of level-:math:`\ell` descendants, whose
   features are distributed as :math:`c_\ell(G)` and :math:`c_\ell(G')`, padded with blank (zero)
   features.  Unconstrained optimal transport of those features costs no more, so

   .. math:: \mathrm{TMD}(G, G') \ge \sum_\ell W_\ell\, \mathrm{OT}(c_\ell(G), c_\ell(G'))
             \ge \sum_\ell W_\ell \big(a \min(P_\ell, Q_\ell) + b\,|P_\ell - Q_\ell|\big),

   with :math:`P_\ell = \sum_r (c_\ell(G) - c_\ell(G'))_r^+`, :math:`Q_\ell` the negative part,
   :math:`b` the smallest norm of a non-zero feature row (the cost of matching it with a blank) and
   :math:`a = \min(\min_{r \ne s} \lVert f_r - f_s \rVert, 2b)` (the cheapest way to move a unit
   between two rows).  For one-hot features the inner bound is the exact OT.
2. **Level means** (the sum of a 1-Lipschitz tree embedding):
   :math:`\sum_\ell W_\ell \lVert (c_\ell(G) - c_\ell(G'))^\top F \rVert_2`, with :math:`F` the table.
3. **Tree norms** (triangle inequality through the empty graph): :math:`|\mathrm{TN}(G) - \mathrm{TN}(G')|`.

:class:`LowerBound` holds the per-graph summaries (``O(L |E|)`` to build) and evaluates
:math:`\max` of the three for pairs or blocks in compiled loops.  With continuous features (nearly
all rows distinct) the histograms are skipped and bounds 2-3 are used.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from .._graph import GraphDataset
from ._weights import resolve_weights

__all__ = ["LowerBound", "level_weights", "level_counts", "structure_embedding"]

#: Feature tables with more rows than this use only the mean and tree-norm bounds.
MAX_HISTOGRAM_ROWS = 4096


def level_weights(depth: int, weights="pascal") -> np.ndarray:
    r"""Shape ``(L,)``: :math:`W_\ell = \prod_{t=1}^{\ell} w(L-t)`, :math:`W_0 = 1`."""
    w = resolve_weights(depth, weights)
    out = np.ones(int(depth))
    for ell in range(1, int(depth)):
        out[ell] = out[ell - 1] * w[depth - 1 - ell]
    return out


def level_counts(ds: GraphDataset, depth: int = 4, weights="pascal"):
    r"""Yield ``(level, W_level, counts)``: the weighted level histograms, one sparse ``(G, F)`` matrix per level.

    ``counts[g, r]`` = :math:`c_\ell(G_g)_r`, the walks of length :math:`\ell` in graph ``g`` that end at a node
    with (distinct) feature row ``r`` of :func:`tmdlib.distance._ids.dataset_feature_ids`; ``O(|E|)`` per level.
    """
    from ._ids import dataset_feature_ids

    W = level_weights(depth, weights)
    n, G = ds.num_nodes, len(ds)
    fid, rows = dataset_feature_ids(ds)
    adj = sp.csr_matrix((np.ones(ds.indices.size), ds.indices, ds.indptr), shape=(n, n))
    gon = ds.graph_of_node
    walks = np.ones(n)
    for lev, wl in enumerate(W):
        if lev:
            walks = adj @ walks
        counts = sp.csr_matrix((walks, (gon, fid)), shape=(G, rows.shape[0]))
        counts.sum_duplicates()
        yield lev, float(wl), counts


def structure_embedding(ds: GraphDataset, depth: int = 4, weights="pascal", dims: int = 8,
                        seed: int = 0) -> np.ndarray:
    r"""A small float32 embedding of each graph for partitioning large pools: level means, projected.

    Per level, :math:`W_\ell c_\ell(G)^\top F R` with a fixed Gaussian projection ``R`` of the features to
    ``dims`` dimensions, and the tree norm: shape ``(G, L * dims + 1)``; memory ``O(G L dims)`` whatever
    the feature width (MOSES: 1.6 M graphs in ~0.2 GB).
    """
    from ._ids import dataset_feature_ids

    _, rows = dataset_feature_ids(ds)
    rng = np.random.default_rng(seed)
    proj = rows @ rng.normal(size=(rows.shape[1], dims)) / np.sqrt(dims)
    norms = np.linalg.norm(rows, axis=1) if rows.size else np.zeros(0)
    out = np.zeros((len(ds), int(depth) * dims + 1), dtype=np.float32)
    for lev, wl, counts in level_counts(ds, depth, weights):
        out[:, lev * dims:(lev + 1) * dims] = wl * (counts @ proj)
        out[:, -1] += wl * (counts @ norms)
    return out


@dataclass(frozen=True, eq=False)
class LowerBound:
    r"""Per-graph summaries that bound TMD from below (see the module docstring).

    Attributes
    ----------
    hist : ndarray of float64, shape (G, L, F') or (G, L, 0)
        :math:`W_\ell c_\ell(G)` over the non-zero feature rows (empty with continuous features).
    means : ndarray of float64, shape (G, L, r)
        :math:`W_\ell c_\ell(G)^\top F` in an orthonormal basis of the table's row space
        (:math:`r \le \min(F, d)`; norms of differences are those of the full vectors).
    tree_norm : ndarray of float64, shape (G,)
        :math:`\mathrm{TN}(G)`.
    a, b : float
        Constants of the histogram bound.
    """

    hist: np.ndarray
    means: np.ndarray
    tree_norm: np.ndarray
    a: float
    b: float

    @classmethod
    def of(cls, ds: GraphDataset, depth: int = 4, weights="pascal") -> "LowerBound":
        """Summaries of every graph of ``ds``: ``L`` sparse products with the adjacency, ``O(L |E|)``."""
        from ._ids import dataset_feature_ids

        W = level_weights(depth, weights)
        G = len(ds)
        fid, rows = dataset_feature_ids(ds)
        norms = np.linalg.norm(rows, axis=1) if rows.size else np.zeros(0)
        nonzero = norms > 0
        use_hist = rows.shape[0] <= MAX_HISTOGRAM_ROWS
        # histogram columns of the rows some node of ds has: a row no graph uses is 0 in every histogram and adds
        # nothing to a bound (the same bounds, bit for bit), but a store's table may hold many such rows (a part
        # of a large pool uses few of them): they cost O(F) per pair for nothing
        used = np.zeros(rows.shape[0], bool)
        used[fid] = True
        keep = np.flatnonzero(nonzero & used)
        col_of = np.full(rows.shape[0], -1, np.int64)
        col_of[keep] = np.arange(keep.size)
        F = keep.size if use_hist else 0
        # means live in the row space of the table: ||c^T rows|| = ||c^T U S|| (rows = U S V^T), so with
        # fewer distinct rows than features they are stored in F dimensions (OGB atoms: 73-ish vs 174)
        basis = rows
        if 0 < rows.shape[0] < rows.shape[1]:
            u, sv, _ = np.linalg.svd(rows, full_matrices=False)
            basis = u * sv
        elif 0 < used.sum() < rows.shape[1]:  # a table of more rows than features, of which ds uses few: the
            u, sv, _ = np.linalg.svd(rows[used], full_matrices=False)  # row space of those (unused rows count 0)
            basis = np.zeros((rows.shape[0], sv.size))
            basis[used] = u * sv
        hist = np.zeros((G, len(W), F))
        means = np.zeros((G, len(W), basis.shape[1]))
        tn = np.zeros(G)
        for lev, wl, counts in level_counts(ds, depth, weights):
            means[:, lev] = wl * (counts @ basis)
            tn += wl * (counts @ norms)
            if use_hist:
                c = counts.tocoo()
                m = col_of[c.col] >= 0
                np.add.at(hist[:, lev], (c.row[m], col_of[c.col[m]]), wl * c.data[m])
        b = float(norms[nonzero].min()) if nonzero.any() else 0.0
        if use_hist and np.count_nonzero(nonzero) > 1:  # a and b over every non-zero row, as before the columns
            kr = rows[nonzero]
            sq = np.einsum("ij,ij->i", kr, kr)
            d2 = np.maximum(sq[:, None] + sq[None, :] - 2 * kr @ kr.T, 0)
            np.fill_diagonal(d2, np.inf)
            a = float(min(np.sqrt(d2.min()), 2 * b))
        else:
            a = 2 * b
        return cls(hist, means, tn, a, b)

    def __len__(self) -> int:
        return int(self.tree_norm.size)

    def take(self, index) -> "LowerBound":
        """Summaries of the graphs at positions ``index``."""
        idx = np.asarray(index, dtype=np.int64)
        return LowerBound(self.hist[idx], self.means[idx], self.tree_norm[idx], self.a, self.b)

    def pairs(self, i, j) -> np.ndarray:
        """Lower bounds of listed pairs, shape ``(P,)``."""
        i = np.ascontiguousarray(i, dtype=np.int64)
        j = np.ascontiguousarray(j, dtype=np.int64)
        return _pairs(self.hist, self.means, self.tree_norm, self.a, self.b, i, j)

    def block(self, rows, cols) -> np.ndarray:
        """Lower bounds between graphs ``rows`` and ``cols``, shape ``(len(rows), len(cols))``."""
        r = np.ascontiguousarray(rows, dtype=np.int64)
        c = np.ascontiguousarray(cols, dtype=np.int64)
        return _block(self.hist, self.means, self.tree_norm, self.a, self.b, r, c)

    def matrix(self) -> np.ndarray:
        """All-pairs lower bounds, shape ``(G, G)`` (symmetric, zero diagonal)."""
        from ._kernels import _mirror

        out = _matrix(self.hist, self.means, self.tree_norm, self.a, self.b, np.zeros(0), np.zeros((0, 0)))
        _mirror(out)  # a tiled copy: writing each value's mirror at once strides through the matrix's columns
        return out

    def components(self, i, j) -> np.ndarray:
        r"""The three bounds of listed pairs apart, shape ``(P, 3)``: columns :math:`h` (level histograms),
        :math:`m` (level means) and :math:`t` (tree norms); :meth:`pairs` is their row-wise maximum."""
        i = np.ascontiguousarray(i, dtype=np.int64)
        j = np.ascontiguousarray(j, dtype=np.int64)
        return _components(self.hist, self.means, self.tree_norm, self.a, self.b, i, j)

    def matrices(self, coef) -> tuple[np.ndarray, np.ndarray]:
        r"""All-pairs lower bounds and a fitted estimate of TMD, in one pass over the pairs.

        Parameters
        ----------
        coef : array_like of float, shape (4,)
            :math:`c`: the estimate of a pair is :math:`\max(0,\, c_0 h + c_1 m + c_2 t + c_3)` from its three
            bounds (:meth:`components`), e.g. least squares on a sample of exact pairs.  Not a bound.

        Returns
        -------
        bound, estimate : ndarray of float64, shape (G, G)
            Symmetric, zero diagonal; ``bound`` is :meth:`matrix`, bit for bit.
        """
        from ._kernels import _mirror

        c = np.ascontiguousarray(coef, dtype=np.float64).reshape(4)
        fit = np.zeros((len(self), len(self)))
        out = _matrix(self.hist, self.means, self.tree_norm, self.a, self.b, c, fit)
        _mirror(out)
        _mirror(fit)
        return out, fit


@njit(cache=True, inline="always")
def _one(hist, means, tn, a, b, i, j):
    h, m, t = _three(hist, means, tn, a, b, i, j)
    return max(h, m, t)


@njit(cache=True, inline="always")
def _three(hist, means, tn, a, b, i, j):
    """The three bounds of a pair: histograms, level means, tree norms."""
    L, F = hist.shape[1], hist.shape[2]
    d = means.shape[2]
    h = 0.0
    m = 0.0
    for lev in range(L):
        p = 0.0
        q = 0.0
        for r in range(F):
            z = hist[i, lev, r] - hist[j, lev, r]
            if z > 0:
                p += z
            else:
                q -= z
        h += a * min(p, q) + b * abs(p - q)
        s = 0.0
        for t in range(d):
            z = means[i, lev, t] - means[j, lev, t]
            s += z * z
        m += np.sqrt(s)
    return h, m, abs(tn[i] - tn[j])


@njit(cache=True, parallel=True)
def _pairs(hist, means, tn, a, b, i, j):
    out = np.empty(i.size)
    for k in prange(i.size):
        out[k] = _one(hist, means, tn, a, b, i[k], j[k])
    return out


@njit(cache=True, parallel=True)
def _components(hist, means, tn, a, b, i, j):
    out = np.empty((i.size, 3))
    for k in prange(i.size):
        out[k, 0], out[k, 1], out[k, 2] = _three(hist, means, tn, a, b, i[k], j[k])
    return out


@njit(cache=True, parallel=True)
def _block(hist, means, tn, a, b, rows, cols):
    out = np.empty((rows.size, cols.size))
    for x in prange(rows.size):
        for y in range(cols.size):
            out[x, y] = _one(hist, means, tn, a, b, rows[x], cols[y])
    return out


@njit(cache=True)
def _matrix_row(hist, means, tn, a, b, x, out, coef, fit):
    with_fit = fit.shape[0] > 0
    for y in range(x + 1, out.shape[0]):
        h, m, t = _three(hist, means, tn, a, b, x, y)
        out[x, y] = max(h, m, t)
        if with_fit:
            fit[x, y] = max(coef[0] * h + coef[1] * m + coef[2] * t + coef[3], 0.0)


@njit(cache=True, parallel=True)
def _matrix(hist, means, tn, a, b, coef, fit):
    r"""The upper triangle of the all-pairs bounds (each bound is symmetric in its two graphs, bit for bit: the
    positive and negative parts swap, norms and absolute values do not change; :meth:`LowerBound.matrix` mirrors
    it), rows ``t`` and ``G-1-t`` together so that the threads get even work.  With ``fit`` of shape ``(G, G)``
    (else ``(0, 0)``), also the upper triangle of the fitted estimate :math:`\max(0, c_0 h + c_1 m + c_2 t + c_3)`
    from the same three bounds of each pair (:meth:`LowerBound.matrices`), written into ``fit``."""
    g = tn.size
    out = np.zeros((g, g))
    half = (g + 1) // 2
    for t in prange(half):
        _matrix_row(hist, means, tn, a, b, t, out, coef, fit)
        if g - 1 - t != t:
            _matrix_row(hist, means, tn, a, b, g - 1 - t, out, coef, fit)
    return out

