r"""A random forest on ECFP4 count vectors: the second model family beside the GIN.

scikit-learn's ``RandomForestRegressor`` (``task="regression"``) or ``RandomForestClassifier``
(``task="classification"``, binary or multiclass) on the ``(n, 2048)`` ECFP4 count matrix
(:func:`tmdlib.chem._fingerprints.ecfp4_counts`), the baseline of MoleculeACE (van Tilborg et al.
2022) and most QSAR benchmarks.

Coreset weights
---------------
A coreset's :math:`\tau` goes in as ``sample_weight``: the forest then fits the τ-weighted training
loss of Lemma 3.2, :math:`\sum_j \tau_j \, \ell(h(x_{p_j}), y_{p_j})`.  scikit-learn's trees weight every
impurity sum by ``sample_weight``, so without bootstrapping (``bootstrap=False``) a weight of 2 is
the same tree as the row written twice (``min_samples_leaf`` / ``min_samples_split`` count rows,
not weight; leave them at their defaults for that equivalence).  With bootstrapping (the default)
the equivalence holds in distribution only, and how depends on the scikit-learn version: 1.9 (the
one tested) draws the bootstrap rows with probability proportional to the weight (as many draws
as rows; ``max_samples=1.0`` draws :math:`\sum_i w_i`, the duplicated set's size), older releases
draw uniformly and multiply the counts by the weights.

Missing targets
---------------
Rows whose target is NaN are dropped (with their weights) before fitting; the fitted model records
how many in ``model.n_dropped_nan_``.  An infinite target, or no row left, is an error.

Defaults
--------
``n_estimators=500`` (MoleculeACE's grid: 100-1000), ``max_features="sqrt"`` (45 of the 2048
positions per split; MoleculeACE's grid has ``sqrt``/``log2``/all, and all 2048 makes a forest about
45 times slower), ``min_samples_leaf=1``, ``bootstrap=True``, ``n_jobs=1`` (the machines are shared;
raise it explicitly).  Any other keyword goes to the scikit-learn estimator.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .._errors import InputError
from ._fingerprints import ecfp4_counts

__all__ = ["TASKS", "REGRESSES", "featurize", "fit_forest", "predict", "predict_proba"]

#: Accepted values of ``task``.
TASKS = ("regression", "classification")
#: Whether each of :data:`TASKS` fits real-valued targets (a regressor) rather than classes (a classifier).
REGRESSES = {"regression": True, "classification": False}


def featurize(smiles_or_counts) -> np.ndarray:
    """The count matrix of a list of SMILES, or a given 2-D numeric matrix unchanged.

    Parameters
    ----------
    smiles_or_counts : sequence of str, length n, or array_like, shape (n, d)
        SMILES (turned into ECFP4 counts, float32, shape (n, 2048)) or an already computed numeric
        feature matrix (normally :func:`~tmdlib.chem._fingerprints.ecfp4_counts`).

    Returns
    -------
    ndarray, shape (n, d)

    Raises
    ------
    InputError
        A SMILES RDKit cannot parse (its position named), or a numeric input that is not 2-D or not finite.
    """
    if isinstance(smiles_or_counts, np.ndarray) and smiles_or_counts.dtype.kind in "biuf":
        X = smiles_or_counts
        if X.ndim != 2:
            raise InputError(None, f"a feature matrix must be 2-D (n, d), got shape {X.shape}")
        if X.dtype.kind == "f" and not np.isfinite(X).all():
            raise InputError(None, "the feature matrix has non-finite entries")
        return X
    return ecfp4_counts(list(smiles_or_counts))


def check_weights(sample_weight, n: int) -> np.ndarray | None:
    """``sample_weight`` as float64 ``(n,)`` (None stays None); :class:`InputError` for another shape, a negative or
    a non-finite weight."""
    if sample_weight is None:
        return None
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (n,):
        raise InputError(None, f"sample_weight must have shape ({n},), got {w.shape}")
    if not np.isfinite(w).all() or (w < 0).any():
        raise InputError(None, "sample_weight must be finite and >= 0")
    return w


def _targets(y, n: int, task: str) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise InputError(None, f"y must have shape ({n},) (one target per molecule), got {y.shape}")
    if REGRESSES[task] or y.dtype.kind == "f":
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError):
            raise InputError(None, "regression targets must be numbers") from None
        if np.isinf(y).any():
            i = int(np.flatnonzero(np.isinf(y))[0])
            raise InputError(None, f"target at position {i} is infinite")
    return y


def fit_forest(smiles_or_counts, y, sample_weight=None, task: str = "regression", seed: int = 0,
               n_estimators: int = 500, *, max_features="sqrt", min_samples_leaf: int = 1,
               bootstrap: bool = True, n_jobs: int = 1, **params):
    r"""Fit a random forest on ECFP4 counts, optionally τ-weighted.

    Parameters
    ----------
    smiles_or_counts : sequence of str, length n, or ndarray, shape (n, d)
        Training molecules as SMILES, or their count matrix (:func:`featurize`).
    y : array_like, shape (n,)
        Targets: real numbers (regression) or class labels (classification; numbers or strings).
        NaN marks a missing target: the row is dropped.
    sample_weight : array_like, shape (n,), optional
        Non-negative finite weights, e.g. a coreset's :math:`\tau` (aligned with the rows).
    task : {"regression", "classification"}
    seed : int, default 0
        ``random_state`` of the forest (bootstrap draws and feature subsets).
    n_estimators : int, default 500
    max_features : int, float or {"sqrt", "log2"} or None, default "sqrt"
        Features tried per split (None: all).
    min_samples_leaf : int, default 1
    bootstrap : bool, default True
    n_jobs : int, default 1
    **params
        Any other keyword of ``RandomForestRegressor`` / ``RandomForestClassifier``.

    Returns
    -------
    sklearn.ensemble.RandomForestRegressor or RandomForestClassifier
        Fitted; ``n_dropped_nan_`` is the number of rows dropped for a NaN target.

    Raises
    ------
    InputError
        Shapes that do not match, an infinite target, negative or non-finite weights, all
        targets missing, fewer than two classes, a SMILES RDKit cannot parse.
    """
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    if task not in TASKS:
        raise InputError(None, f"task must be one of {', '.join(TASKS)}, got {task!r}")
    X = featurize(smiles_or_counts)
    n = X.shape[0]
    y = _targets(y, n, task)
    keep = ~np.isnan(y) if y.dtype.kind == "f" else np.ones(n, dtype=bool)
    w = check_weights(sample_weight, n)
    if w is not None:
        w = w[keep]
    dropped = int(n - keep.sum())
    if not keep.any():
        raise InputError(None, f"all {n} targets are missing (NaN)")
    X, y = X[keep] if dropped else X, y[keep]
    if task == "classification" and np.unique(y).size < 2:
        raise InputError(None, "classification needs at least two classes among the targets")
    cls = RandomForestRegressor if REGRESSES[task] else RandomForestClassifier
    model = cls(n_estimators=int(n_estimators), max_features=max_features, min_samples_leaf=min_samples_leaf,
                bootstrap=bootstrap, n_jobs=n_jobs, random_state=int(seed), **params)
    model.fit(X, y, sample_weight=w)
    model.n_dropped_nan_ = dropped
    return model


def predict(model, smiles_or_counts) -> np.ndarray:
    """Predictions of a fitted forest.

    Parameters
    ----------
    model : fitted forest from :func:`fit_forest`
    smiles_or_counts : sequence of str, length m, or ndarray, shape (m, d)

    Returns
    -------
    ndarray, shape (m,)
        Real values (regression) or class labels (classification).
    """
    return model.predict(featurize(smiles_or_counts))


def predict_proba(model, smiles_or_counts) -> np.ndarray:
    """Class probabilities of a fitted classification forest.

    Returns
    -------
    ndarray of float64, shape (m, n_classes)
        Columns in the order of ``model.classes_``.
    """
    if not hasattr(model, "predict_proba"):
        raise InputError(None, "predict_proba needs a classification forest (task='classification')")
    return model.predict_proba(featurize(smiles_or_counts))
