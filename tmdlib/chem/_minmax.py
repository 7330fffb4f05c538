r"""Exact MinMax (Tanimoto) similarities of many count vectors to one fixed set, on sparse fingerprints.

A pool of millions of molecules is compared with the few thousand a model was trained on twice: the Tanimoto SVM's
decision :math:`\sum_j \alpha_j K(x, s_j) + b` over its support vectors, and the applicability domain's nearest
trained molecules (:mod:`tmdlib.chem.domain`).  The dense route (:func:`tmdlib.chem.models.minmax_kernel`: matrix
products of level indicators over all 2,048 positions) costs :math:`O(m\,n\,d)`; an ECFP4 count vector of a
drug-like molecule has about 40 non-zero positions of 2,048, so :class:`MinMaxIndex` walks only those.

For a query :math:`x` and the reference rows :math:`b_1..b_n`

.. math:: S_j = \sum_{k:\,x_k > 0} \min(x_k, b_{jk}), \qquad
          K(x, b_j) = \frac{S_j}{\lVert x\rVert_1 + \lVert b_j\rVert_1 - S_j} \quad (K = 1 \text{ when both are } 0),

where the sum runs over the query's non-zero positions only (:math:`\min(0, \cdot) = 0`).  A position held by at
least :data:`DENSE_SHARE` of the reference rows is stored as a dense row of :math:`n` counts (one vectorised pass per
query); the others as postings lists of (row, count).  Counts are integers, so :math:`S_j` is exact and :math:`K` is
the same float64 value the dense route gives; only the summation order of :math:`\sum_j \alpha_j K_j` differs
(rounding, about :math:`10^{-16}` relative).

Compiled with numba (serial: callers fan out over processes, one chunk of the pool each).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .._errors import InputError

__all__ = ["MinMaxIndex", "DENSE_SHARE", "sparse_rows"]

#: A position present in at least this share of the reference rows is stored densely.
DENSE_SHARE = 1 / 16
#: The largest count the index stores exactly (uint16 rows).
MAX_COUNT = np.iinfo(np.uint16).max


def sparse_rows(A: np.ndarray, what: str = "counts") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr (m+1,), indices (nnz,), counts (nnz,), norms (m,))`` of the rows of a non-negative integer matrix
    ``A`` (m, d): its non-zero positions row by row (CSR), their counts and the rows' sums (float64).  Only the
    non-zero entries are checked (no copy of ``A``); InputError names ``what`` when one is negative, not an integer
    or above :data:`MAX_COUNT`."""
    rows, cols = np.nonzero(A)
    vals = A[rows, cols]
    if vals.size and (not np.all(np.isfinite(vals)) or vals.min() < 0 or vals.max() > MAX_COUNT
                      or not np.all(vals == np.round(vals))):
        raise InputError(None, f"{what} must be integers in [0, {MAX_COUNT}]")
    indptr = np.zeros(A.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=A.shape[0]), out=indptr[1:])
    norms = np.bincount(rows, weights=vals.astype(np.float64), minlength=A.shape[0])  # integer sums: exact
    return indptr, cols.astype(np.int32), vals.astype(np.int32), norms


@njit(cache=True)
def _scan(q_ptr, q_idx, q_cnt, q_norm, dense_of, D, p_ptr, p_row, p_cnt, b_norm, W, out, top_sims):
    n = b_norm.size
    m = q_norm.size
    c_out = W.shape[1]
    top = top_sims.shape[1]
    acc = np.zeros(n, dtype=np.int32)
    for i in range(m):
        acc[:] = 0
        for p in range(q_ptr[i], q_ptr[i + 1]):
            k = q_idx[p]
            c = q_cnt[p]
            r = dense_of[k]
            if r >= 0:
                for j in range(n):
                    v = np.int32(D[r, j])
                    acc[j] += v if v < c else c
            else:
                for t in range(p_ptr[k], p_ptr[k + 1]):
                    v = p_cnt[t]
                    acc[p_row[t]] += v if v < c else c
        qn = q_norm[i]
        for j in range(n):
            s = np.float64(acc[j])
            u = qn + b_norm[j] - s
            kv = s / u if u > 0 else 1.0
            for c in range(c_out):
                out[i, c] += kv * W[j, c]
            if top > 0 and kv > top_sims[i, top - 1]:
                t = top - 1
                while t > 0 and top_sims[i, t - 1] < kv:
                    top_sims[i, t] = top_sims[i, t - 1]
                    t -= 1
                top_sims[i, t] = kv


class MinMaxIndex:
    r"""The reference rows ``B`` of MinMax similarities, indexed by position (module doc).

    Parameters
    ----------
    B : array_like, shape (n, d)
        Non-negative integer counts (ECFP4 counts of the trained molecules or of an SVM's support vectors), each at
        most :data:`MAX_COUNT`.

    Raises
    ------
    InputError
        Not 2-D, negative, non-integer or too large counts.
    """

    def __init__(self, B):
        B = np.asarray(B)
        if B.ndim != 2:
            raise InputError(None, f"reference counts must be 2-D, got shape {B.shape}")
        self.n, self.d = B.shape
        ptr, idx, cnt, self.norm = sparse_rows(B, "reference counts")
        row = np.repeat(np.arange(self.n, dtype=np.int32), np.diff(ptr))
        df = np.bincount(idx, minlength=self.d)
        dense = np.flatnonzero(df >= max(1.0, DENSE_SHARE * self.n))
        self.dense_of = np.full(self.d, -1, dtype=np.int32)
        self.dense_of[dense] = np.arange(dense.size, dtype=np.int32)
        in_dense = self.dense_of[idx] >= 0
        self.D = np.zeros((dense.size, self.n), dtype=np.uint16)
        self.D[self.dense_of[idx[in_dense]], row[in_dense]] = cnt[in_dense]
        idx, row, cnt = idx[~in_dense], row[~in_dense], cnt[~in_dense]
        order = np.lexsort((row, idx))  # position-major: one postings list per position, rows ascending
        self.p_ptr = np.zeros(self.d + 1, dtype=np.int64)
        np.cumsum(np.bincount(idx, minlength=self.d), out=self.p_ptr[1:])
        self.p_row, self.p_cnt = row[order], cnt[order]

    def scan(self, A, weights=None, top: int = 0) -> tuple[np.ndarray | None, np.ndarray | None]:
        r"""The weighted sums and the largest similarities of the rows of ``A`` to the reference rows.

        Parameters
        ----------
        A : array_like, shape (m, d)
            Non-negative integer counts of the queries.
        weights : array_like, shape (n, c), optional
            :math:`W`: the first result is :math:`\sum_j K(a_i, b_j)\,W_{jc}`.
        top : int, default 0
            How many of the largest similarities of each query to return (at most ``n``).

        Returns
        -------
        sums : ndarray of float64, shape (m, c), or None without ``weights``
        top_similarities : ndarray of float64, shape (m, top), descending, or None when ``top`` is 0
        """
        A = np.asarray(A)
        if A.ndim != 2 or A.shape[1] != self.d:
            raise InputError(None, f"queries must have shape (m, {self.d}), got {A.shape}")
        W = np.zeros((self.n, 0)) if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
        if W.shape[0] != self.n or W.ndim != 2:
            raise InputError(None, f"weights must have shape ({self.n}, c), got {W.shape}")
        top = min(int(top), self.n)
        q_ptr, q_idx, q_cnt, q_norm = sparse_rows(A, "query counts")
        out = np.zeros((A.shape[0], W.shape[1]))
        tops = np.full((A.shape[0], max(top, 0)), -1.0)
        if self.n:
            _scan(q_ptr, q_idx, q_cnt, q_norm, self.dense_of, self.D, self.p_ptr, self.p_row, self.p_cnt,
                  self.norm, W, out, tops)
        return (None if weights is None else out), (tops if top > 0 else None)
