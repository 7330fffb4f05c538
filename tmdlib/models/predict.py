r"""Predictions with intervals: split-conformal prediction on held-out labelled members (the audit sample).

The model is trained on the coreset; the calibration set :math:`\mathcal C` is labelled and was never trained on (in
production the audit sample, :mod:`tmdlib.select.audit`; in benchmark mode the test split).  With the maintained
library ``crepes`` (Boström et al.):

* **regression** (per target): the absolute residuals :math:`|y_j - \hat y_j|` on :math:`\mathcal C` calibrate a
  ``crepes.ConformalRegressor``; the interval of a member is :math:`\hat y \pm q`, :math:`q` the
  :math:`\lceil(|\mathcal C|+1)\gamma\rceil`-th smallest residual — it covers the true value with probability at
  least :math:`\gamma` (``confidence``) for a member exchangeable with :math:`\mathcal C` (any pool member outside the
  coreset, as the audit sample is uniform over them);
* **classification** (binary, multi-class): the non-conformity :math:`1 - \hat p_{y}` of the true class on
  :math:`\mathcal C` calibrates a ``crepes.ConformalClassifier``; a member's prediction set holds every class whose
  conformal p-value exceeds :math:`1-\gamma` (it contains the true class with probability at least :math:`\gamma`),
  and its class probabilities are the model's (sigmoid / softmax of its outputs).

**Normalised** regression (``sigmas``, :mod:`tmdlib.chem.domain`): with a difficulty :math:`\sigma(x) > 0` per
member (the Tanimoto distance to the trained molecules), the scores are :math:`|y_j - \hat y_j| / \sigma_j` and the
interval :math:`\hat y \pm q\,\sigma(x)` (crepes' ``sigmas``): the same coverage, wider far from the training set.

With fewer than 2 calibration members no interval is given (``lower`` / ``upper`` null) and the result says why.
"""
from __future__ import annotations

import numpy as np

__all__ = ["Calibrated", "calibrate", "probabilities"]


def probabilities(outputs, task) -> np.ndarray:
    """Class probabilities ``(m, C)`` from outputs in task units (binary: ``(m, 2)``, columns 0 and 1)."""
    Z = np.asarray(outputs, dtype=np.float64).reshape(len(outputs), -1)
    if not task.class_indices:  # binary: one logit
        p = 1.0 / (1.0 + np.exp(-Z[:, 0]))
        return np.column_stack([1 - p, p])
    Z = Z - Z.max(axis=1, keepdims=True)
    E = np.exp(Z)
    return E / E.sum(axis=1, keepdims=True)


class Calibrated:
    """A split-conformal predictor for one trained model (module doc); :meth:`predict` gives the columns of the
    predictions file.

    Attributes
    ----------
    task : TaskSpec
    confidence : float
    n_calibration : int
    note : str or None
        Why there are no intervals, when there are none.
    """

    def __init__(self, task, confidence: float, predictors: list, n_calibration: int, note: str | None = None,
                 normalised: bool = False):
        self.task, self.confidence, self.predictors = task, float(confidence), predictors
        self.n_calibration, self.note, self.normalised = int(n_calibration), note, bool(normalised)

    def predict(self, outputs, sigmas=None) -> dict:
        """Columns for the members whose outputs (task units) are ``outputs`` ``(m, D)``.

        ``sigmas`` ``(m,)``: the members' difficulties, needed when calibrated with them (:func:`calibrate`).

        Returns
        -------
        dict
            Regression: ``prediction`` ``(m, T)``, ``lower`` / ``upper`` ``(m, T)`` (NaN without calibration).
            Classification: ``prediction`` ``(m,)`` (the most probable class, in the labels' values),
            ``probabilities`` ``(m, C)``, ``prediction_set`` (list of lists of class values; None without
            calibration).
        """
        Z = np.asarray(outputs, dtype=np.float64).reshape(len(outputs), -1)
        m = len(Z)
        if self.task.is_regression:
            if self.normalised and sigmas is None:
                raise ValueError("calibrated with difficulties (sigmas): predict needs the members' sigmas")
            sig = np.asarray(sigmas, dtype=np.float64) if self.normalised else None
            lower = np.full_like(Z, np.nan)
            upper = np.full_like(Z, np.nan)
            for j, cr in enumerate(self.predictors):
                if cr is not None and m:
                    iv = cr.predict_int(Z[:, j], sigmas=sig, confidence=self.confidence)
                    lower[:, j], upper[:, j] = iv[:, 0], iv[:, 1]
            return {"prediction": Z, "lower": lower, "upper": upper}
        P = probabilities(Z, self.task)
        values = self.class_values()
        out = {"prediction": values[P.argmax(axis=1)], "probabilities": P, "prediction_set": None}
        cc = self.predictors[0] if self.predictors else None
        if cc is not None and m:
            sets = cc.predict_set(1.0 - P, confidence=self.confidence, smoothing=False)
            out["prediction_set"] = [[float(values[c]) for c in np.flatnonzero(row)] for row in sets]
        return out

    def class_values(self) -> np.ndarray:
        return (np.asarray(self.task.classes, dtype=np.float64) if self.task.class_indices
                else np.array([0.0, 1.0]))


def calibrate(outputs_cal, y_cal, task, confidence: float = 0.9, sigmas=None) -> Calibrated:
    r"""Fit the conformal predictor on the calibration members' outputs (task units) and labels as stored.

    Parameters
    ----------
    outputs_cal : array_like, shape (c, D)
    y_cal : array_like, shape (c,) or (c, T)
        Labels (multi-class: class indices); NaN = missing (left out).
    task : TaskSpec
    confidence : float
        :math:`\gamma \in (0, 1)`.
    sigmas : array_like, shape (c,), optional
        The calibration members' difficulties (> 0): normalised conformal regression (ignored for classes).

    Returns
    -------
    Calibrated
    """
    from crepes import ConformalClassifier, ConformalRegressor

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if (task.is_classification and not task.single_label):
        raise ValueError("prediction sets for multi-task labels are not supported (one binary task at a time)")
    Z = np.asarray(outputs_cal, dtype=np.float64)
    Z = Z.reshape(len(Z), -1) if Z.size else np.zeros((0, task.output_dim))
    Y = np.asarray(y_cal, dtype=np.float64)
    Y = Y.reshape(len(Y), -1) if Y.size else np.zeros((0, task.num_targets if task.is_regression else 1))
    few = "fewer than 2 labelled calibration (audit) members: no intervals"
    if task.is_regression:
        sig = None if sigmas is None else np.asarray(sigmas, dtype=np.float64).reshape(-1)
        preds, sizes = [], []
        for j in range(Y.shape[1]):
            obs = ~np.isnan(Y[:, j])
            sizes.append(int(obs.sum()))
            if obs.sum() < 2:
                preds.append(None)
                continue
            cr = ConformalRegressor()
            cr.fit(residuals=Y[obs, j] - Z[obs, j], sigmas=None if sig is None else sig[obs])
            preds.append(cr)
        n = min(sizes) if sizes else 0
        return Calibrated(task, confidence, preds, n, None if all(p is not None for p in preds) else few,
                          normalised=sig is not None)
    obs = ~np.isnan(Y[:, 0])
    if obs.sum() < 2:
        return Calibrated(task, confidence, [], int(obs.sum()), few)
    P = probabilities(Z[obs], task)
    y = Y[obs, 0].astype(np.int64)
    cc = ConformalClassifier()
    cc.fit(alphas=1.0 - P[np.arange(len(y)), y])
    return Calibrated(task, confidence, [cc], int(obs.sum()))
