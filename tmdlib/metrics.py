r"""Test metrics as the field reports them, per task type (pure numpy / scipy).

=============  ====================================================================  ==================
task type      metrics                                                               headline
=============  ====================================================================  ==================
binary         accuracy (logit > 0), ROC-AUC                                         accuracy (TU) or
                                                                                     ROC-AUC (OGB)
multiclass     accuracy (arg-max), macro-F1                                          accuracy
multitask      mean ROC-AUC over the tasks that have both classes among the          ROC-AUC
               labelled test graphs (OGB's evaluator), accuracy over observed pairs
regression     RMSE, MAE, R², Spearman ρ (mean over targets; de-standardised)        RMSE (lower is
                                                                                     better)
=============  ====================================================================  ==================

Missing labels (NaN) are left out of every metric.  :func:`score` returns all of a task's metrics;
:func:`headline` names the one reports lead with, and :func:`higher_is_better` its direction.
"""
from __future__ import annotations

import numpy as np

__all__ = ["score", "headline", "higher_is_better", "roc_auc", "METRICS"]

#: Metrics of each task type, headline first.
METRICS = {"binary": ("accuracy", "rocauc"), "multiclass": ("accuracy", "macro_f1"),
           "multitask": ("rocauc", "accuracy"), "regression": ("rmse", "mae", "r2", "spearman")}
#: The headline on OGB sets (name starting with ``ogbg``) where it is not the first of :data:`METRICS`.
OGB_HEADLINE = {"binary": "rocauc"}


def headline(task_type: str, dataset: str = "") -> str:
    """The metric reports lead with: ROC-AUC on OGB binary sets (the paper's Section 5), else the first."""
    first = METRICS[task_type][0]
    return OGB_HEADLINE.get(task_type, first) if dataset.lower().startswith("ogbg") else first


def higher_is_better(metric: str) -> bool:
    """False for the error metrics (RMSE, MAE)."""
    return metric not in ("rmse", "mae")


def roc_auc(scores, labels) -> float:
    r"""ROC-AUC of ``scores`` for binary ``labels`` (ties count ½; Mann–Whitney U), NaN with one class only."""
    from scipy.stats import rankdata

    s = np.asarray(scores, dtype=np.float64).ravel()
    y = np.asarray(labels, dtype=np.float64).ravel()
    pos, neg = int((y == 1).sum()), int((y == 0).sum())
    if pos == 0 or neg == 0:
        return float("nan")
    r = rankdata(s)
    return float((r[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))


def _macro_f1(pred: np.ndarray, y: np.ndarray, classes: int) -> float:
    f1 = []
    for c in range(classes):
        tp = np.sum((pred == c) & (y == c))
        fp = np.sum((pred == c) & (y != c))
        fn = np.sum((pred != c) & (y == c))
        if tp + fp + fn == 0:
            continue  # class absent from labels and predictions
        f1.append(2 * tp / (2 * tp + fp + fn))
    return float(np.mean(f1)) if f1 else float("nan")


def score(outputs, y, task_type: str, num_classes: int = 0) -> dict:
    r"""All metrics of a task type.

    Parameters
    ----------
    outputs : array_like, shape (n,) or (n, D)
        Logits (binary: one; multi-class: C; multi-task: T) or, for regression, predictions in the target's
        own units (de-standardised).
    y : array_like, shape (n,) or (n, T)
        Labels (multi-class: class indices); NaN = missing.
    task_type : str
    num_classes : int
        :math:`C` (multi-class).

    Returns
    -------
    dict
        The metrics of :data:`METRICS` (NaN where undefined, e.g. no labelled graph), and ``n`` (labelled
        graphs scored).
    """
    Z = np.asarray(outputs, dtype=np.float64)
    Y = np.asarray(y, dtype=np.float64)
    Z = Z.reshape(len(Z), -1)
    Y = Y.reshape(len(Y), -1)
    if task_type not in _SCORES:
        raise ValueError(f"unknown task type {task_type!r}")
    return _SCORES[task_type](Z, Y, ~np.isnan(Y), int(num_classes))


def _binary(Z: np.ndarray, Y: np.ndarray, obs: np.ndarray, num_classes: int) -> dict:
    o = obs[:, 0]
    z, t = Z[o, 0], Y[o, 0]
    return {"accuracy": float(np.mean((z > 0) == (t == 1))) if t.size else _NAN, "rocauc": roc_auc(z, t),
            "n": int(o.sum())}


def _multiclass(Z: np.ndarray, Y: np.ndarray, obs: np.ndarray, num_classes: int) -> dict:
    o = obs[:, 0]
    pred, t = Z[o].argmax(axis=1), Y[o, 0].astype(np.int64)
    return {"accuracy": float(np.mean(pred == t)) if t.size else _NAN,
            "macro_f1": _macro_f1(pred, t, max(num_classes, Z.shape[1])), "n": int(o.sum())}


def _multitask(Z: np.ndarray, Y: np.ndarray, obs: np.ndarray, num_classes: int) -> dict:
    aucs = [roc_auc(Z[obs[:, j], j], Y[obs[:, j], j]) for j in range(Y.shape[1])]
    aucs = [a for a in aucs if np.isfinite(a)]
    acc = float(np.mean((Z[obs] > 0) == (Y[obs] == 1))) if obs.any() else _NAN
    return {"rocauc": float(np.mean(aucs)) if aucs else _NAN, "accuracy": acc, "tasks_scored": len(aucs),
            "n": int(obs.any(axis=1).sum())}


def _regression(Z: np.ndarray, Y: np.ndarray, obs: np.ndarray, num_classes: int) -> dict:
    from scipy.stats import spearmanr

    nan = _NAN
    rmse, mae, r2, rho = [], [], [], []
    for j in range(Y.shape[1]):
        o = obs[:, j]
        if not o.any():
            continue
        e = Z[o, j] - Y[o, j]
        rmse.append(float(np.sqrt(np.mean(e * e))))
        mae.append(float(np.mean(np.abs(e))))
        var = float(np.sum((Y[o, j] - Y[o, j].mean()) ** 2))
        r2.append(1.0 - float(np.sum(e * e)) / var if var > 0 else nan)
        if o.sum() > 1 and np.ptp(Z[o, j]) > 0 and np.ptp(Y[o, j]) > 0:
            rho.append(float(spearmanr(Z[o, j], Y[o, j]).statistic))
        else:
            rho.append(nan)
    m = lambda v: float(np.nanmean(v)) if v and np.isfinite(v).any() else nan  # noqa: E731
    return {"rmse": m(rmse), "mae": m(mae), "r2": m(r2), "spearman": m(rho), "n": int(obs.any(axis=1).sum())}


_NAN = float("nan")
#: The scorer of each task type (its metrics: :data:`METRICS`).
_SCORES = {"binary": _binary, "multiclass": _multiclass, "multitask": _multitask, "regression": _regression}
