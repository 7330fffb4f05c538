r"""Models chemists trust on ECFP4 counts: a MinMax-kernel SVM, the random forest and gradient boosting.

Three scikit-learn estimators (``fit(X, y, sample_weight=None)``, ``predict(X)``; the classifiers also
``predict_proba``) on the ``(n, 2048)`` float32 ECFP4 count matrix of :func:`tmdlib.chem._fingerprints.ecfp4_counts`
(a sequence of SMILES is turned into it first), each with a persistence that needs no pickle:
``to_arrays() -> dict[str, numpy.ndarray]`` (plain arrays, scalars as 0-d arrays, strings as unicode arrays; what
``numpy.savez`` writes and ``numpy.load(allow_pickle=False)`` reads back) and the classmethod
``from_arrays(arrays)``.

================================  ====================================================================================
:func:`minmax_kernel`             :math:`K(a, b) = \sum_k \min(a_k, b_k) / \sum_k \max(a_k, b_k)` (Tanimoto on bits),
                                  exact and in blocks: integer counts by matrix products of level indicators
:class:`TanimotoSVR`              :math:`\varepsilon`-SVR on the precomputed kernel, targets standardised inside
:class:`TanimotoSVC`              C-SVC on the precomputed kernel, Platt probabilities; one-vs-rest for > 2 classes
:class:`ECFPForest`               the random forest of :mod:`tmdlib.chem._forest`, predicted by a vectorised walk of
                                  its node arrays
:class:`ECFPBoosting`             scikit-learn's histogram gradient boosting, predicted the same way
================================  ====================================================================================

Weights
-------
``sample_weight`` (a coreset's :math:`\tau`) multiplies each row's loss: the SVMs minimise
:math:`\tfrac12\lVert w\rVert^2 + C \sum_i \tau_i \, \ell(f(x_i), y_i)` (libsvm's per-row :math:`C_i = C\tau_i`,
so a weight of 2 is the row written twice), the trees weight every impurity sum or gradient by it.  Rows of weight
0 are dropped before fitting; rows whose target is NaN are dropped with their weights (``n_dropped_nan_``).

Defaults
--------
Chosen by measurement on the 30 MoleculeACE train splits with an inner validation (never the test split):
``benchmarks/moleculeace_models.py tune`` and ``reports/results/molecules/full_data.md``.
"""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin

from .._errors import InputError
from .estimator import estimator_spec
from ._forest import REGRESSES, TASKS, check_weights

__all__ = ["minmax_kernel", "TanimotoSVR", "TanimotoSVC", "ECFPForest", "ECFPBoosting", "SVM", "RF", "GBM"]

#: Rows of the first argument per kernel block: a block of the kernel is ``block x m`` float64.
KERNEL_BLOCK = 2048


# ---------------------------------------------------------------------------------------------------- input checks
def _features(X, n_features: int | None = None, *, nonnegative: bool = False) -> np.ndarray:
    """A 2-D finite numeric matrix (SMILES are turned into ECFP4 counts), float32 when it holds small counts."""
    if not (isinstance(X, np.ndarray) and X.dtype.kind in "biuf"):
        if isinstance(X, (str, bytes)):
            raise InputError(None, "expected a count matrix or a sequence of SMILES, got a single string")
        try:
            arr = np.asarray(X)
        except (TypeError, ValueError):
            arr = None
        if arr is not None and arr.dtype.kind in "biuf":
            X = arr
        else:
            from ._fingerprints import ecfp4_counts

            X = ecfp4_counts(list(X))
    if X.ndim != 2:
        raise InputError(None, f"a feature matrix must be 2-D (n, d), got shape {X.shape}")
    if X.shape[0] == 0:
        raise InputError(None, "the feature matrix has no rows")
    if X.dtype.kind == "f" and not np.isfinite(X).all():
        raise InputError(None, "the feature matrix has non-finite entries")
    if nonnegative and (X < 0).any():
        raise InputError(None, "the MinMax kernel needs non-negative features (counts or bits)")
    if n_features is not None and X.shape[1] != n_features:
        raise InputError(None, f"the model was fitted on {n_features} features, got {X.shape[1]}")
    return X


def _rows(X, y, sample_weight, *, regression: bool):
    """Validated (X, y, w, dropped): NaN targets and zero weights removed; w is None or float64."""
    n = X.shape[0]
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise InputError(None, f"y must have shape ({n},) (one target per row), got {y.shape}")
    if regression or y.dtype.kind == "f":
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError):
            raise InputError(None, "regression targets must be numbers") from None
        if np.isinf(y).any():
            raise InputError(None, f"target at position {int(np.flatnonzero(np.isinf(y))[0])} is infinite")
        keep = ~np.isnan(y)
    elif y.dtype.kind == "O":
        raise InputError(None, "class labels must be numbers or strings of one type")
    else:
        keep = np.ones(n, dtype=bool)
    w = check_weights(sample_weight, n)
    dropped = int(n - keep.sum())
    if w is not None:
        keep &= w > 0
    if not keep.any():
        raise InputError(None, f"no row to fit: all {n} targets are missing (NaN) or weighted 0")
    if not keep.all():
        X, y, w = X[keep], y[keep], (None if w is None else w[keep])
    return X, y, w, dropped


def _scalar(arrays: dict, key: str):
    if key not in arrays:
        raise InputError(None, f"the arrays lack {key!r}")
    return np.asarray(arrays[key]).item()


def _array(arrays: dict, key: str, dtype=None) -> np.ndarray:
    if key not in arrays:
        raise InputError(None, f"the arrays lack {key!r}")
    a = np.asarray(arrays[key])
    if a.dtype.kind == "O":
        raise InputError(None, f"array {key!r} holds Python objects; only plain numeric or unicode arrays load")
    return a if dtype is None else a.astype(dtype, copy=False)


def _check_kind(arrays: dict, kind: str) -> None:
    got = str(_scalar(arrays, "kind"))
    if got != kind:
        raise InputError(None, f"these arrays are a {got!r} model, not a {kind!r}")


def _classes(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    classes, codes = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise InputError(None, "classification needs at least two classes among the targets")
    return classes, codes


# ------------------------------------------------------------------------------------------------------ the kernel
def _integer_valued(X: np.ndarray) -> bool:
    return X.dtype.kind in "biu" or bool(np.all(X == np.round(X)) and X.max(initial=0) < 2 ** 20)


def _min_sums_counts(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    r""":math:`S_{ij} = \sum_k \min(A_{ik}, B_{jk})` for non-negative integer counts, exactly.

    :math:`\min(a, b) = \sum_{t \ge 1} [a \ge t]\,[b \ge t]` for integers, so :math:`S` is a sum over the levels
    :math:`t` of products of 0/1 matrices, each restricted to the columns where both sides reach :math:`t`
    (level 1 is one dense product; higher levels touch few columns).  Every partial sum is an integer below
    :math:`2^{24}`, hence exact in float32 whatever the summation order of the BLAS.
    """
    out = (A >= 1).astype(np.float32) @ (B >= 1).astype(np.float32).T
    top = int(min(A.max(initial=0), B.max(initial=0)))
    for t in range(2, top + 1):
        cols = np.flatnonzero((A >= t).any(axis=0) & (B >= t).any(axis=0))
        if cols.size == 0:
            break
        out += (A[:, cols] >= t).astype(np.float32) @ (B[:, cols] >= t).astype(np.float32).T
    return out.astype(np.float64)


def _min_sums_real(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """The same sums for non-negative reals, directly (slow: meant for small or non-count inputs)."""
    A, B = A.astype(np.float64), B.astype(np.float64)
    out = np.empty((A.shape[0], B.shape[0]))
    step = max(1, int(2 ** 22 // max(1, B.shape[0] * A.shape[1])))
    for i in range(0, A.shape[0], step):
        out[i:i + step] = np.minimum(A[i:i + step, None, :], B[None, :, :]).sum(axis=2)
    return out


def minmax_kernel(A, B=None, *, block: int = KERNEL_BLOCK) -> np.ndarray:
    r"""The MinMax (Tanimoto) kernel between the rows of two non-negative matrices.

    .. math:: K(a, b) = \frac{\sum_k \min(a_k, b_k)}{\sum_k \max(a_k, b_k)}
              = \frac{S}{\lVert a\rVert_1 + \lVert b\rVert_1 - S}, \quad S = \sum_k \min(a_k, b_k),

    with :math:`K(0, 0) = 1`.  On 0/1 bit vectors it is the Tanimoto similarity :math:`|A \cap B| / |A \cup B|`;
    on counts it is the weighted Jaccard similarity, a positive semi-definite kernel (Ralaivola et al. 2005), so an
    SVM on it solves a convex problem.  Integer-valued inputs (ECFP counts) are computed exactly by matrix products
    of level indicators (:math:`\min(a, b) = \sum_{t\ge1}[a\ge t][b\ge t]`); other non-negative reals directly.

    Parameters
    ----------
    A : array_like, shape (n, d)
        Non-negative features (ECFP4 counts or bits).
    B : array_like, shape (m, d), optional
        Second set; ``A`` itself when omitted.
    block : int, default 2048
        Rows of ``A`` per block (a block's kernel is ``block x m`` float64).

    Returns
    -------
    ndarray of float64, shape (n, m)
        Values in [0, 1]; symmetric with unit diagonal when ``B`` is omitted.

    Raises
    ------
    InputError
        Not 2-D, non-finite or negative entries, different numbers of columns, ``block < 1``.
    """
    A = _features(A, nonnegative=True)
    B = A if B is None else _features(B, A.shape[1], nonnegative=True)
    if int(block) < 1:
        raise InputError(None, f"block must be >= 1, got {block}")
    integer = _integer_valued(A) and _integer_valued(B)
    if integer:
        A32, B32 = A.astype(np.float32, copy=False), B.astype(np.float32, copy=False)
    norm_b = B.sum(axis=1, dtype=np.float64)
    out = np.empty((A.shape[0], B.shape[0]))
    for i in range(0, A.shape[0], int(block)):
        a = A[i:i + int(block)]
        s = _min_sums_counts(A32[i:i + int(block)], B32) if integer else _min_sums_real(a, B)
        union = a.sum(axis=1, dtype=np.float64)[:, None] + norm_b[None, :] - s
        with np.errstate(invalid="ignore", divide="ignore"):
            out[i:i + int(block)] = np.where(union > 0, s / np.where(union > 0, union, 1.0), 1.0)
    return out


def _kernel_apply(X: np.ndarray, sv: np.ndarray, coef: np.ndarray, intercept: np.ndarray, block: int,
                  index=None) -> np.ndarray:
    r""":math:`f(x) = \sum_j K(x, s_j)\,\alpha_{jc} + b_c` for every row of ``X`` (blocks of rows), shape (m, c).

    Integer counts (ECFP4) go through ``index`` (:class:`tmdlib.chem._minmax.MinMaxIndex` of ``sv``: only each row's
    non-zero positions, the same kernel values); other inputs through :func:`minmax_kernel`."""
    out = np.empty((X.shape[0], coef.shape[1]))
    if index is not None and sv.shape[0]:
        try:  # the index checks each row's non-zero entries (no rounded copy of X)
            for i in range(0, X.shape[0], block):
                out[i:i + block] = index.scan(X[i:i + block], coef)[0] + intercept
            return out
        except InputError:  # not counts: the dense route computes the same kernel on reals
            pass
    for i in range(0, X.shape[0], block):
        xb = X[i:i + block]
        out[i:i + block] = (minmax_kernel(xb, sv, block=block) @ coef if sv.shape[0] else 0.0) + intercept
    return out


# ------------------------------------------------------------------------------------------------------- the SVMs
class _KernelMachine:
    r"""What the two Tanimoto SVMs share: the checks of ``C`` and ``block``, the kept support vectors, the decision
    values :math:`\sum_j K(x, s_j)\,\alpha_{jc} + b_c`, and the arrays both persist (their own keys added)."""

    _kind = ""

    def _check_params(self) -> None:
        if not (np.isfinite(self.C) and self.C > 0):
            raise InputError(None, f"C must be > 0, got {self.C}")
        if int(self.block) < 1:
            raise InputError(None, f"block must be >= 1, got {self.block}")

    def _keep(self, X: np.ndarray, support: np.ndarray, dropped: int) -> None:
        self.support_ = np.asarray(support, dtype=np.int64)
        self.support_vectors_ = np.ascontiguousarray(X[self.support_], dtype=np.float32)
        self.n_features_in_ = int(X.shape[1])
        self.n_dropped_nan_ = dropped

    def _decision(self, X, coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
        X = _features(X, self.n_features_in_, nonnegative=True)
        return _kernel_apply(X, self.support_vectors_, coef, intercept, int(self.block), self._sv_index())

    def _sv_index(self):
        """The support vectors' :class:`~tmdlib.chem._minmax.MinMaxIndex` (built once; None for non-count ones)."""
        sv = self.support_vectors_
        if getattr(self, "_index_of", None) is not sv:  # the very array it was built from (refits replace it)
            from ._minmax import MAX_COUNT, MinMaxIndex

            ok = sv.size and _integer_valued(sv) and sv.max() <= MAX_COUNT
            self._index, self._index_of = (MinMaxIndex(sv) if ok else None), sv
        return self._index

    def _machine_arrays(self) -> dict[str, np.ndarray]:
        return {"kind": np.array(self._kind), "support_vectors": self.support_vectors_, "dual_coef": self.dual_coef_,
                "intercept": np.asarray(self.intercept_), "C": np.array(float(self.C)),
                "tol": np.array(float(self.tol)), "block": np.array(int(self.block)),
                "n_features_in": np.array(self.n_features_in_), "n_dropped_nan": np.array(self.n_dropped_nan_)}

    @classmethod
    def _from_machine_arrays(cls, arrays: dict, **options):
        _check_kind(arrays, cls._kind)
        m = cls(C=float(_scalar(arrays, "C")), tol=float(_scalar(arrays, "tol")), block=int(_scalar(arrays, "block")),
                **options)
        m.support_vectors_ = _array(arrays, "support_vectors", np.float32)
        m.dual_coef_ = _array(arrays, "dual_coef", np.float64)
        m.n_features_in_ = int(_scalar(arrays, "n_features_in"))
        m.n_dropped_nan_ = int(_scalar(arrays, "n_dropped_nan"))
        return m


class TanimotoSVR(_KernelMachine, RegressorMixin, BaseEstimator):
    r"""Support vector regression on ECFP4 counts with the MinMax / Tanimoto kernel.

    The targets are standardised inside (:math:`z = (y - \mu)/\sigma`, :math:`\mu, \sigma` the
    ``sample_weight``-weighted mean and standard deviation; ``scale_y=False`` keeps :math:`z = y`), then
    scikit-learn's ``SVR(kernel="precomputed")`` solves

    .. math:: \min_{f, b}\ \tfrac12 \lVert f \rVert_{\mathcal H_K}^2
              + C \sum_i w_i \max(0, |f(x_i) + b - z_i| - \varepsilon),

    and only the support vectors are kept: :math:`\hat y(x) = \mu + \sigma\,(\sum_j \alpha_j K(x, s_j) + b)`,
    computed in blocks of ``block`` rows (the cost of a prediction is one kernel row per support vector, so
    millions of molecules stream through).

    Parameters
    ----------
    C : float, default 5.0
        Regularisation (per-row :math:`C w_i`); chosen by inner validation on the MoleculeACE train splits.
    epsilon : float, default 0.05
        Width of the insensitive tube, in units of the standardised target.
    scale_y : bool, default True
        Standardise the targets inside the estimator (``epsilon`` is then relative to their spread).
    tol : float, default 1e-3
        libsvm's stopping tolerance.
    cache_size : float, default 200
        libsvm's kernel cache (MB; the kernel is precomputed, so this hardly matters).
    block : int, default 2048
        Rows per kernel block at prediction.

    Attributes
    ----------
    support_vectors_ : ndarray of float32, shape (n_sv, d)
    dual_coef_ : ndarray of float64, shape (n_sv,)
        :math:`\alpha_j` (signed).
    intercept_ : float
        :math:`b`, in standardised units.
    y_mean_, y_scale_ : float
        :math:`\mu, \sigma`.
    n_features_in_ : int
    n_dropped_nan_ : int
        Rows dropped for a NaN target.
    """

    def __init__(self, C: float = 5.0, epsilon: float = 0.05, scale_y: bool = True, tol: float = 1e-3,
                 cache_size: float = 200.0, block: int = KERNEL_BLOCK):
        self.C = C
        self.epsilon = epsilon
        self.scale_y = scale_y
        self.tol = tol
        self.cache_size = cache_size
        self.block = block

    _kind = "svr"

    def _check_params(self) -> None:
        super()._check_params()
        if not (np.isfinite(self.epsilon) and self.epsilon >= 0):
            raise InputError(None, f"epsilon must be >= 0, got {self.epsilon}")

    def fit(self, X, y, sample_weight=None):
        """Fit on counts ``X`` (n, d) and real targets ``y`` (n,), rows weighted by ``sample_weight``.

        Returns
        -------
        self

        Raises
        ------
        InputError
            Bad shapes, negative / non-finite features or weights, infinite targets, nothing left to fit.
        """
        from sklearn.svm import SVR

        self._check_params()
        X = _features(X, nonnegative=True)
        X, y, w, dropped = _rows(X, y, sample_weight, regression=True)
        ww = np.ones(len(y)) if w is None else w
        mean = float(np.average(y, weights=ww)) if self.scale_y else 0.0
        scale = float(np.sqrt(np.average((y - mean) ** 2, weights=ww))) if self.scale_y else 1.0
        scale = scale if scale > 0 else 1.0
        svr = SVR(kernel="precomputed", C=float(self.C), epsilon=float(self.epsilon), tol=float(self.tol),
                  cache_size=float(self.cache_size))
        svr.fit(minmax_kernel(X, block=int(self.block)), (y - mean) / scale, sample_weight=w)
        self._keep(X, svr.support_, dropped)
        self.dual_coef_ = np.asarray(svr.dual_coef_, dtype=np.float64).ravel()
        self.intercept_ = float(svr.intercept_[0])
        self.y_mean_, self.y_scale_ = mean, scale
        return self

    def predict(self, X) -> np.ndarray:
        r"""Predicted targets :math:`\mu + \sigma (\sum_j \alpha_j K(x, s_j) + b)`, shape (m,), float64."""
        f = self._decision(X, self.dual_coef_[:, None], np.array([self.intercept_]))
        return self.y_mean_ + self.y_scale_ * f[:, 0]

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The fitted model as plain arrays: support vectors, dual coefficients, intercept, target scaling, options."""
        return {**self._machine_arrays(), "y_mean": np.array(self.y_mean_), "y_scale": np.array(self.y_scale_),
                "epsilon": np.array(float(self.epsilon)), "scale_y": np.array(bool(self.scale_y))}

    @classmethod
    def from_arrays(cls, arrays: dict) -> "TanimotoSVR":
        """The model :meth:`to_arrays` wrote (no pickle).  InputError for missing keys or another kind."""
        m = cls._from_machine_arrays(arrays, epsilon=float(_scalar(arrays, "epsilon")),
                                     scale_y=bool(_scalar(arrays, "scale_y")))
        m.dual_coef_ = m.dual_coef_.ravel()
        if m.support_vectors_.ndim != 2 or m.dual_coef_.shape[0] != m.support_vectors_.shape[0]:
            raise InputError(None, "support_vectors and dual_coef disagree in length")
        m.intercept_ = float(_scalar(arrays, "intercept"))
        m.y_mean_, m.y_scale_ = float(_scalar(arrays, "y_mean")), float(_scalar(arrays, "y_scale"))
        return m


def _platt(decision: np.ndarray, A, B) -> np.ndarray:
    r"""Platt's sigmoid :math:`P(\text{positive} \mid f) = 1 / (1 + \exp(A f + B))`, without overflow."""
    z = A * decision + B
    return np.exp(-np.logaddexp(0.0, z))


def _fit_platt(f: np.ndarray, positive: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    r"""Platt's :math:`(A, B)` minimising the weighted log loss of :math:`1/(1 + e^{A f + B})` against his
    regularised targets :math:`t_+ = (N_+ + 1)/(N_+ + 2)`, :math:`t_- = 1/(N_- + 2)` (N: weighted class sizes)."""
    from scipy.optimize import minimize

    n_pos, n_neg = float(w[positive].sum()), float(w[~positive].sum())
    t = np.where(positive, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))

    def loss(ab):
        z = ab[0] * f + ab[1]
        soft = np.logaddexp(0.0, z)  # -log p = soft, -log(1 - p) = soft - z
        p = np.exp(-soft)
        g = w * (t - p)  # d loss / d z
        return float(np.sum(w * (t * soft + (1.0 - t) * (soft - z)))), np.array([np.sum(g * f), np.sum(g)])

    res = minimize(loss, np.array([0.0, np.log((n_neg + 1.0) / (n_pos + 1.0))]), jac=True, method="L-BFGS-B")
    return float(res.x[0]), float(res.x[1])


class TanimotoSVC(_KernelMachine, ClassifierMixin, BaseEstimator):
    r"""Support vector classification on ECFP4 counts with the MinMax / Tanimoto kernel.

    Two classes: scikit-learn's ``SVC(kernel="precomputed")``, the soft-margin problem
    :math:`\min \tfrac12\lVert f\rVert^2 + C\sum_i w_i \max(0, 1 - s_i (f(x_i) + b))` with :math:`s_i = \pm1`
    (``+1`` for ``classes_[1]``); decision :math:`f(x) = \sum_j \alpha_j K(x, s_j) + b`, label ``classes_[1]``
    where :math:`f > 0`; probabilities by Platt scaling :math:`P(\text{classes\_[1]}) = 1/(1 + \exp(A f + B))`,
    :math:`A, B` minimising the weighted log loss of out-of-fold decision values (stratified 5-fold, seeded by
    ``seed``; Platt's regularised targets), as libsvm does, computed here (scikit-learn 1.9 deprecates
    ``SVC(probability=True)``).  More than two classes: one such machine per class against the
    rest (one-vs-rest), label = the largest decision value, probabilities = the per-class Platt probabilities
    normalised to sum 1.  Only the union of the support vectors is kept.

    Parameters
    ----------
    C : float, default 5.0
    probability : bool, default True
        Fit the Platt sigmoid (five extra fits per machine); without it ``predict_proba`` is refused.
    seed : int, default 0
        Seed of the Platt cross-validation folds.
    tol : float, default 1e-3
    block : int, default 2048

    Attributes
    ----------
    classes_ : ndarray, shape (k,)
    support_vectors_ : ndarray of float32, shape (n_sv, d)
    dual_coef_ : ndarray of float64, shape (n_sv, c)
        One column per machine (c = 1 for two classes, else k).
    intercept_ : ndarray, shape (c,)
    prob_a_, prob_b_ : ndarray, shape (c,)
        Platt parameters (NaN without ``probability``).
    """

    _kind = "svc"

    def __init__(self, C: float = 5.0, probability: bool = True, seed: int = 0, tol: float = 1e-3,
                 block: int = KERNEL_BLOCK):
        self.C = C
        self.probability = probability
        self.seed = seed
        self.tol = tol
        self.block = block

    def fit(self, X, y, sample_weight=None):
        """Fit on counts ``X`` (n, d) and class labels ``y`` (n,), rows weighted by ``sample_weight``.

        Raises
        ------
        InputError
            Bad shapes, negative / non-finite features or weights, fewer than two classes.
        """
        self._check_params()
        X = _features(X, nonnegative=True)
        X, y, w, dropped = _rows(X, y, sample_weight, regression=False)
        self.classes_, codes = _classes(y)
        K = minmax_kernel(X, block=int(self.block))
        targets = [codes == 1] if self.classes_.size == 2 else [codes == c for c in range(self.classes_.size)]
        ww = np.ones(len(codes)) if w is None else w
        parts = []
        for positive in targets:
            svc = self._svc().fit(K, positive.astype(np.int64), sample_weight=w)
            a, b = self._calibrate(K, positive, ww) if self.probability else (np.nan, np.nan)
            parts.append((svc.support_, np.asarray(svc.dual_coef_, dtype=np.float64).ravel(),
                          float(svc.intercept_[0]), a, b))
        union = np.unique(np.concatenate([p[0] for p in parts]))
        coef = np.zeros((union.size, len(parts)))
        for c, (sup, dual, *_rest) in enumerate(parts):
            coef[np.searchsorted(union, sup), c] = dual
        self._keep(X, union, dropped)
        self.dual_coef_ = coef
        self.intercept_ = np.array([p[2] for p in parts])
        self.prob_a_, self.prob_b_ = np.array([p[3] for p in parts]), np.array([p[4] for p in parts])
        return self

    def _svc(self):
        from sklearn.svm import SVC

        return SVC(kernel="precomputed", C=float(self.C), tol=float(self.tol))

    def _calibrate(self, K: np.ndarray, positive: np.ndarray, w: np.ndarray) -> tuple[float, float]:
        """Platt's (A, B) on out-of-fold decision values (stratified folds, at most 5, seeded)."""
        from sklearn.model_selection import StratifiedKFold

        folds = int(min(5, positive.sum(), (~positive).sum()))
        if folds < 2:
            svc = self._svc().fit(K, positive.astype(np.int64), sample_weight=w)
            return _fit_platt(svc.decision_function(K), positive, w)
        f = np.empty(len(positive))
        for fit, out in StratifiedKFold(folds, shuffle=True, random_state=int(self.seed)).split(K, positive):
            if np.unique(positive[fit]).size < 2:
                f[out] = 0.0
                continue
            svc = self._svc().fit(K[np.ix_(fit, fit)], positive[fit].astype(np.int64), sample_weight=w[fit])
            f[out] = svc.decision_function(K[np.ix_(out, fit)])
        return _fit_platt(f, positive, w)

    def decision_function(self, X) -> np.ndarray:
        r""":math:`f(x)`: shape (m,) for two classes (positive: ``classes_[1]``), else (m, k) one-vs-rest."""
        f = self._decision(X, self.dual_coef_, self.intercept_)
        return f[:, 0] if self.classes_.size == 2 else f

    def predict(self, X) -> np.ndarray:
        """Class labels, shape (m,): the sign of the decision (two classes) or its argmax (one-vs-rest)."""
        f = self.decision_function(X)
        return self.classes_[(f > 0).astype(np.int64)] if f.ndim == 1 else self.classes_[np.argmax(f, axis=1)]

    def predict_proba(self, X) -> np.ndarray:
        """Platt probabilities, shape (m, k), columns in the order of ``classes_``, rows summing to 1."""
        if not self.probability:
            raise InputError(None, "predict_proba needs probability=True at fit")
        f = self.decision_function(X)
        if f.ndim == 1:
            p1 = _platt(f, self.prob_a_[0], self.prob_b_[0])
            return np.column_stack([1.0 - p1, p1])
        p = _platt(f, self.prob_a_[None, :], self.prob_b_[None, :])
        return p / p.sum(axis=1, keepdims=True)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The fitted model as plain arrays: classes, support vectors, dual coefficients, intercepts, Platt, options."""
        return {**self._machine_arrays(), "classes": _plain(self.classes_), "prob_a": self.prob_a_,
                "prob_b": self.prob_b_, "probability": np.array(bool(self.probability)),
                "seed": np.array(int(self.seed))}

    @classmethod
    def from_arrays(cls, arrays: dict) -> "TanimotoSVC":
        """The model :meth:`to_arrays` wrote (no pickle)."""
        m = cls._from_machine_arrays(arrays, probability=bool(_scalar(arrays, "probability")),
                                     seed=int(_scalar(arrays, "seed")))
        m.classes_ = _array(arrays, "classes")
        m.intercept_ = _array(arrays, "intercept", np.float64)
        m.prob_a_, m.prob_b_ = _array(arrays, "prob_a", np.float64), _array(arrays, "prob_b", np.float64)
        c = 1 if m.classes_.size == 2 else m.classes_.size
        if m.dual_coef_.shape != (m.support_vectors_.shape[0], c) or m.intercept_.shape != (c,):
            raise InputError(None, "support_vectors, dual_coef, intercept and classes disagree in shape")
        return m


def _plain(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind == "O":
        a = a.astype(str)
    return a


# ---------------------------------------------------------------------------------------------- trees as arrays
class _Trees:
    r"""Many binary trees as flat node arrays, walked for all rows and trees at once.

    Node :math:`v` of tree :math:`t` (global index ``offsets[t] + v``) sends a row left when
    :math:`x_{\text{feature}[v]} \le \text{threshold}[v]`, right otherwise; a leaf (``left == -1``) holds
    ``value[v]`` (shape (c,)).  The walk starts every (row, tree) at the tree's root and repeats
    ``node = left[node] if x[feature[node]] <= threshold[node] else right[node]`` for the pairs not yet at a leaf,
    so its cost is the total length of the paths (pairs that reached a leaf drop out).
    """

    def __init__(self, left, right, feature, threshold, value, offsets, *, dtype):
        self.left, self.right = left.astype(np.int64), right.astype(np.int64)
        self.feature, self.threshold = feature.astype(np.int64), threshold.astype(np.float64)
        self.value, self.offsets = value.astype(np.float64), offsets.astype(np.int64)
        self.dtype = dtype
        n = self.left.shape[0]
        if not (self.right.shape == self.feature.shape == self.threshold.shape == (n,) and self.value.shape[0] == n
                and self.offsets.ndim == 1 and self.offsets[0] == 0 and self.offsets[-1] == n
                and (np.diff(self.offsets) > 0).all()):
            raise InputError(None, "tree node arrays disagree in length or offsets")
        tree = np.repeat(np.arange(self.offsets.size - 1), np.diff(self.offsets))
        leaf = self.left < 0
        base = self.offsets[tree]
        if (~leaf & ((self.left + base >= self.offsets[tree + 1]) | (self.right + base >= self.offsets[tree + 1])
                     | (self.right < 0))).any():
            raise InputError(None, "a tree's child index points outside its tree")
        self._go_left = np.where(leaf, np.arange(n), self.left + base)
        self._go_right = np.where(leaf, np.arange(n), self.right + base)
        self._feature = np.where(leaf, 0, self.feature)
        self._threshold = np.where(leaf, np.inf, self.threshold)

    def leaves(self, X: np.ndarray, block: int = 1024) -> np.ndarray:
        """Global leaf index of every (row, tree), shape (m, T)."""
        X = np.asarray(X, dtype=self.dtype)
        out = np.empty((X.shape[0], self.offsets.size - 1), dtype=np.int64)
        n_trees = self.offsets.size - 1
        is_leaf = self.left < 0
        for i in range(0, X.shape[0], block):
            xb = X[i:i + block]
            node = np.broadcast_to(self.offsets[:-1], (xb.shape[0], n_trees)).reshape(-1).copy()
            row = np.repeat(np.arange(xb.shape[0]), n_trees)
            active = np.flatnonzero(~is_leaf[node])
            while active.size:  # only the (row, tree) pairs not yet at a leaf move on
                cur = node[active]
                left = xb[row[active], self._feature[cur]] <= self._threshold[cur]
                nxt = np.where(left, self._go_left[cur], self._go_right[cur])
                node[active] = nxt
                active = active[~is_leaf[nxt]]
            out[i:i + block] = node.reshape(xb.shape[0], n_trees)
        return out

    def arrays(self, prefix: str = "") -> dict[str, np.ndarray]:
        return {f"{prefix}children_left": self.left, f"{prefix}children_right": self.right,
                f"{prefix}feature": self.feature, f"{prefix}threshold": self.threshold,
                f"{prefix}value": self.value, f"{prefix}tree_offsets": self.offsets}

    @classmethod
    def from_arrays(cls, arrays: dict, dtype, prefix: str = "") -> "_Trees":
        return cls(*(_array(arrays, f"{prefix}{k}") for k in ("children_left", "children_right", "feature",
                                                                "threshold", "value", "tree_offsets")), dtype=dtype)


def _blockwise(X: np.ndarray, fn, block: int = 4096) -> np.ndarray:
    """``fn`` applied to blocks of rows of ``X``, stacked (bounded memory for millions of rows)."""
    return np.concatenate([fn(X[i:i + block]) for i in range(0, X.shape[0], block)])


def _forest_trees(model) -> _Trees:
    """The node arrays of a fitted scikit-learn forest; ``value`` per node: (1,) regression, class fractions."""
    trees = [e.tree_ for e in model.estimators_]
    sizes = np.array([t.node_count for t in trees])
    value = np.concatenate([t.value[:, 0, :] for t in trees])
    if value.shape[1] > 1:
        value = value / value.sum(axis=1, keepdims=True)
    return _Trees(np.concatenate([t.children_left for t in trees]), np.concatenate([t.children_right for t in trees]),
                  np.concatenate([t.feature for t in trees]), np.concatenate([t.threshold for t in trees]), value,
                  np.concatenate([[0], np.cumsum(sizes)]), dtype=np.float32)


class ECFPForest(BaseEstimator):
    r"""The random forest of :func:`tmdlib.chem._forest.fit_forest` as an estimator with array persistence.

    Fitting is :func:`~tmdlib.chem._forest.fit_forest` unchanged (same defaults: 500 trees, ``max_features="sqrt"``,
    bootstrap, the row weights as ``sample_weight``).  The fitted trees are then held as node arrays and predicted
    by a vectorised walk (:class:`_Trees`): regression :math:`\hat y(x) = \frac1T \sum_t v_t(\text{leaf}_t(x))`,
    classification :math:`P(c \mid x) = \frac1T \sum_t p_{t,c}(\text{leaf}_t(x))` (leaf class fractions), label the
    argmax; the comparison is scikit-learn's (``float32(x) <= threshold``), so the predictions are scikit-learn's.

    Parameters
    ----------
    task : {"regression", "classification"}
    n_estimators : int, default 500
    max_features : int, float, {"sqrt", "log2"} or None, default "sqrt"
    min_samples_leaf : int, default 1
    bootstrap : bool, default True
    seed : int, default 0
    n_jobs : int, default 1
    """

    def __init__(self, task: str = "regression", n_estimators: int = 500, max_features="sqrt",
                 min_samples_leaf: int = 1, bootstrap: bool = True, seed: int = 0, n_jobs: int = 1):
        self.task = task
        self.n_estimators = n_estimators
        self.max_features = max_features
        self.min_samples_leaf = min_samples_leaf
        self.bootstrap = bootstrap
        self.seed = seed
        self.n_jobs = n_jobs

    def fit(self, X, y, sample_weight=None):
        """Fit :func:`~tmdlib.chem._forest.fit_forest` on counts ``X`` and targets ``y`` (its checks apply)."""
        from ._forest import fit_forest

        X = _features(X)
        model = fit_forest(X, y, sample_weight=sample_weight, task=self.task, seed=self.seed,
                           n_estimators=self.n_estimators, max_features=self.max_features,
                           min_samples_leaf=self.min_samples_leaf, bootstrap=self.bootstrap, n_jobs=self.n_jobs)
        self.trees_ = _forest_trees(model)
        self.classes_ = getattr(model, "classes_", None)
        self.n_features_in_ = int(X.shape[1])
        self.n_dropped_nan_ = int(model.n_dropped_nan_)
        return self

    def _mean_value(self, X) -> np.ndarray:
        X = _features(X, self.n_features_in_)
        return _blockwise(X, lambda xb: self.trees_.value[self.trees_.leaves(xb)].mean(axis=1))

    def predict(self, X) -> np.ndarray:
        """Mean of the trees' leaf values (regression), or the class of largest mean probability."""
        v = self._mean_value(X)
        return v[:, 0] if self.classes_ is None else self.classes_[np.argmax(v, axis=1)]

    def predict_proba(self, X) -> np.ndarray:
        """Mean leaf class fractions, shape (m, k), columns in the order of ``classes_``."""
        if self.classes_ is None:
            raise InputError(None, "predict_proba needs a classification forest (task='classification')")
        return self._mean_value(X)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Each tree's node arrays (concatenated, ``tree_offsets`` marking the trees), classes and options."""
        out = {"kind": np.array("forest"), "task": np.array(self.task), **self.trees_.arrays(),
               "n_estimators": np.array(int(self.n_estimators)), "min_samples_leaf": np.array(self.min_samples_leaf),
               "max_features": np.array(str(self.max_features)), "bootstrap": np.array(bool(self.bootstrap)),
               "seed": np.array(int(self.seed)), "n_features_in": np.array(self.n_features_in_),
               "n_dropped_nan": np.array(self.n_dropped_nan_)}
        if self.classes_ is not None:
            out["classes"] = _plain(self.classes_)
        return out

    @classmethod
    def from_arrays(cls, arrays: dict) -> "ECFPForest":
        """The model :meth:`to_arrays` wrote (no pickle); ``max_features`` comes back as written (a string)."""
        _check_kind(arrays, "forest")
        m = cls(task=str(_scalar(arrays, "task")), n_estimators=int(_scalar(arrays, "n_estimators")),
                max_features=str(_scalar(arrays, "max_features")),
                min_samples_leaf=_scalar(arrays, "min_samples_leaf"), bootstrap=bool(_scalar(arrays, "bootstrap")),
                seed=int(_scalar(arrays, "seed")))
        m.trees_ = _Trees.from_arrays(arrays, np.float32)
        m.classes_ = _array(arrays, "classes") if "classes" in arrays else None
        m.n_features_in_ = int(_scalar(arrays, "n_features_in"))
        m.n_dropped_nan_ = int(_scalar(arrays, "n_dropped_nan"))
        return m


def _boosting_trees(model) -> tuple[_Trees, np.ndarray]:
    """The node arrays of a fitted HistGradientBoosting model and the column (class) each tree adds to."""
    nodes = [p.nodes for per_iteration in model._predictors for p in per_iteration]
    column = np.array([c for per_iteration in model._predictors for c in range(len(per_iteration))])
    if any(n["is_categorical"].any() for n in nodes):
        raise InputError(None, "categorical splits are not supported by the array form")
    sizes = np.array([len(n) for n in nodes])
    cat = np.concatenate
    leaf = cat([n["is_leaf"].astype(bool) for n in nodes])
    trees = _Trees(np.where(leaf, -1, cat([n["left"].astype(np.int64) for n in nodes])),
                   np.where(leaf, -1, cat([n["right"].astype(np.int64) for n in nodes])),
                   cat([n["feature_idx"] for n in nodes]), cat([n["num_threshold"] for n in nodes]),
                   cat([n["value"] for n in nodes])[:, None], np.concatenate([[0], np.cumsum(sizes)]),
                   dtype=np.float64)
    return trees, column


class ECFPBoosting(BaseEstimator):
    r"""Gradient-boosted trees on ECFP4 counts: scikit-learn's ``HistGradientBoostingRegressor`` / ``Classifier``.

    Regression fits :math:`F_M(x) = F_0 + \sum_{m=1}^{M} \eta\, h_m(x)` to the squared error (each :math:`h_m` a
    least-squares tree on the negative gradient, leaves shrunk by the learning rate :math:`\eta`, an
    :math:`\ell_2` penalty ``l2_regularization`` on the leaf values); classification to the log loss (one tree per
    iteration for two classes, :math:`P(\text{classes\_[1]}) = \sigma(F)`; k trees per iteration and a softmax for
    k > 2).  ``sample_weight`` weights every gradient and Hessian.  Early stopping is off (reproducible fits).
    The fitted trees are held as node arrays (threshold on the raw counts; the counts have no missing values) and
    predicted by the same vectorised walk as :class:`ECFPForest`.

    Parameters
    ----------
    task : {"regression", "classification"}
    learning_rate : float, default 0.05
    max_iter : int, default 500
    max_leaf_nodes : int, default 31
    min_samples_leaf : int, default 10
    l2_regularization : float, default 0.0
    max_features : float, default 0.3
        Fraction of the features tried at each split (scikit-learn's feature subsampling).
    seed : int, default 0
    """

    def __init__(self, task: str = "regression", learning_rate: float = 0.05, max_iter: int = 500,
                 max_leaf_nodes: int = 31, min_samples_leaf: int = 10, l2_regularization: float = 0.0,
                 max_features: float = 0.3, seed: int = 0):
        self.task = task
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf
        self.l2_regularization = l2_regularization
        self.max_features = max_features
        self.seed = seed

    def fit(self, X, y, sample_weight=None):
        """Fit on features ``X`` (n, d) and targets ``y`` (n,), rows weighted by ``sample_weight``."""
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

        if self.task not in TASKS:
            raise InputError(None, f"task must be regression or classification, got {self.task!r}")
        X = _features(X)
        X, y, w, dropped = _rows(X, y, sample_weight, regression=REGRESSES[self.task])
        cls = HistGradientBoostingRegressor if REGRESSES[self.task] else HistGradientBoostingClassifier
        if self.task == "classification":
            _classes(y)
        model = cls(learning_rate=float(self.learning_rate), max_iter=int(self.max_iter),
                    max_leaf_nodes=int(self.max_leaf_nodes), min_samples_leaf=int(self.min_samples_leaf),
                    l2_regularization=float(self.l2_regularization), max_features=float(self.max_features),
                    early_stopping=False, random_state=int(self.seed))
        model.fit(X, y, sample_weight=w)
        self.trees_, self.tree_column_ = _boosting_trees(model)
        self.baseline_ = np.asarray(model._baseline_prediction, dtype=np.float64).reshape(-1)
        self.classes_ = getattr(model, "classes_", None)
        self.n_features_in_ = int(X.shape[1])
        self.n_dropped_nan_ = dropped
        return self

    def _raw(self, X) -> np.ndarray:
        X = _features(X, self.n_features_in_)

        def raw(xb):
            vals = self.trees_.value[self.trees_.leaves(xb), 0]
            return self.baseline_[None, :] + np.column_stack(
                [vals[:, self.tree_column_ == c].sum(axis=1) for c in range(self.baseline_.size)])

        return _blockwise(X, raw)

    def predict(self, X) -> np.ndarray:
        """Real predictions (regression) or the most probable class, shape (m,)."""
        raw = self._raw(X)
        if self.classes_ is None:
            return raw[:, 0]
        return self.classes_[(raw[:, 0] > 0).astype(np.int64)] if raw.shape[1] == 1 \
            else self.classes_[np.argmax(raw, axis=1)]

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities (sigmoid or softmax of the raw scores), shape (m, k)."""
        if self.classes_ is None:
            raise InputError(None, "predict_proba needs a classification model (task='classification')")
        raw = self._raw(X)
        if raw.shape[1] == 1:
            p1 = 1.0 / (1.0 + np.exp(-raw[:, 0]))
            return np.column_stack([1.0 - p1, p1])
        e = np.exp(raw - raw.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Every tree's node arrays, the column each adds to, the baseline, classes and options."""
        out = {"kind": np.array("gbm"), "task": np.array(self.task), **self.trees_.arrays(),
               "tree_column": self.tree_column_, "baseline": self.baseline_,
               "learning_rate": np.array(float(self.learning_rate)), "max_iter": np.array(int(self.max_iter)),
               "max_leaf_nodes": np.array(int(self.max_leaf_nodes)),
               "min_samples_leaf": np.array(int(self.min_samples_leaf)),
               "l2_regularization": np.array(float(self.l2_regularization)),
               "max_features": np.array(float(self.max_features)), "seed": np.array(int(self.seed)),
               "n_features_in": np.array(self.n_features_in_), "n_dropped_nan": np.array(self.n_dropped_nan_)}
        if self.classes_ is not None:
            out["classes"] = _plain(self.classes_)
        return out

    @classmethod
    def from_arrays(cls, arrays: dict) -> "ECFPBoosting":
        """The model :meth:`to_arrays` wrote (no pickle)."""
        _check_kind(arrays, "gbm")
        m = cls(task=str(_scalar(arrays, "task")), learning_rate=float(_scalar(arrays, "learning_rate")),
                max_iter=int(_scalar(arrays, "max_iter")), max_leaf_nodes=int(_scalar(arrays, "max_leaf_nodes")),
                min_samples_leaf=int(_scalar(arrays, "min_samples_leaf")),
                l2_regularization=float(_scalar(arrays, "l2_regularization")),
                max_features=float(_scalar(arrays, "max_features")), seed=int(_scalar(arrays, "seed")))
        m.trees_ = _Trees.from_arrays(arrays, np.float64)
        m.tree_column_ = _array(arrays, "tree_column", np.int64)
        m.baseline_ = _array(arrays, "baseline", np.float64).reshape(-1)
        if m.tree_column_.shape != (m.trees_.offsets.size - 1,):
            raise InputError(None, "tree_column must name one column per tree")
        m.classes_ = _array(arrays, "classes") if "classes" in arrays else None
        m.n_features_in_ = int(_scalar(arrays, "n_features_in"))
        m.n_dropped_nan_ = int(_scalar(arrays, "n_dropped_nan"))
        return m


# ------------------------------------------------------------------------------------------- the registered models
def _svm(task, options):
    return {"regression": TanimotoSVR, "classification": TanimotoSVC}[task.estimator_kind](**options)


def _forest(task, options):
    return ECFPForest(task=task.estimator_kind, **options)


def _boosting(task, options):
    return ECFPBoosting(task=task.estimator_kind, **options)


#: The registered models (:data:`tmdlib.models._registry.ENTRY_POINTS`), trained through
#: :class:`tmdlib.chem.estimator.EstimatorModel`.
SVM = estimator_spec("svm", _svm, summary="support vector machine, Tanimoto (MinMax) kernel on ECFP4 counts",
                     title="SVM (Tanimoto kernel on ECFP4 counts)")
RF = estimator_spec("rf", _forest, summary="random forest on ECFP4 counts (500 trees)",
                    title="random forest (ECFP4 counts)", seeded=True, quick={"n_estimators": 10})
GBM = estimator_spec("gbm", _boosting, summary="gradient boosting on ECFP4 counts",
                     title="gradient boosting (ECFP4 counts)", seeded=True, quick={"max_iter": 20})
