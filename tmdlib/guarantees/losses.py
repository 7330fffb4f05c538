r"""The losses of each task type, their Lipschitz constants, label terms and loss scales (pure numpy).

Lemma 3.2 needs a loss :math:`\mathcal L(z; y)` that is :math:`M`-Lipschitz in the model output :math:`z \in
\mathbb R^D` (L2 norm); then :math:`c = M\,\kappa\,\lVert W_{out}\rVert_2\prod_\ell\Phi_\ell` and the coreset gap
is at most :math:`c\,\varepsilon`.  Per graph, a loss averages over the graph's observed targets
:math:`O_i \subseteq \{1..T\}` (missing labels contribute nothing; a graph with none has loss 0):

================  ==========================================================  ==================================
loss              per-graph :math:`\mathcal L(z; y)`                          :math:`M` (L2, in :math:`z`)
================  ==========================================================  ==================================
``bce``           :math:`\frac1{|O|}\sum_{t\in O}\mathrm{BCE}(z_t; y_t)`      1 (:math:`|\sigma(z) - y| < 1`
                  (binary: T = 1; multi-task: masked)                         per output, averaged over O)
``ce``            :math:`-z_y + \log\sum_c e^{z_c}` (multi-class)             :math:`\sqrt 2`
                                                                              (:math:`\lVert p - e_y\rVert_2`)
``l1``            :math:`\frac1{|O|}\sum_{t\in O}|z_t - y_t|`                 1
``huber``         :math:`\frac1{|O|}\sum_{t\in O} H_\delta(z_t - y_t)`        :math:`\delta`
``mse``           :math:`\frac1{|O|}\sum_{t\in O}(z_t - y_t)^2`               none: **uncertified** (unbounded
                                                                              gradient)
================  ==========================================================  ==================================

(:math:`H_\delta(r) = r^2/2` for :math:`|r|\le\delta`, :math:`\delta(|r| - \delta/2)` beyond.)  The bound on the
average over :math:`O`: :math:`\frac1{|O|}\sum_{t\in O}|z_t - z'_t| \le \lVert z - z'\rVert_2/\sqrt{|O|} \le
\lVert z - z'\rVert_2` times the per-output constant.

Regression targets are standardised on the labelled coreset (:math:`(y - \mu)/\sigma`, τ-weighted), so losses,
:math:`\varepsilon`-bounds and loss scales are in standard deviations of the target; reports de-standardise
predictions for RMSE / MAE.

**Labels.**  Lemma 3.2 treats the loss as a function of the graph alone.  With each graph's own label the
signed gap splits exactly into a label-consistent part (every graph scored with its medoid's label: at most
:math:`c\varepsilon`) and the **label term** :math:`\frac1n\sum_i[\mathcal L(z_i; y_i) - \mathcal L(z_i;
y_{a(i)})]`, bounded by :func:`label_term_bound`: for L1 and Huber model-free,
:math:`M\cdot\frac1n\sum_i \lVert y_i - y_{a(i)}\rVert` (mean over the commonly observed targets); for BCE / CE by
the model's outputs (:math:`|z_i|`, :math:`|z_{y} - z_{y'}|`).

**Loss scale** of the verdict (:func:`trivial_loss`): the loss of the trivial predictor, what a model that
learned nothing scores: :math:`\ln 2` (binary, multi-task), :math:`\ln C` (multi-class), and for regression the
loss of predicting the labelled coreset's mean.
"""
from __future__ import annotations

import math

import numpy as np

from ..datasets._task import LOSSES, weighted_moments  # the losses that fit each task type: the task module's table

__all__ = ["LOSSES", "TRIVIAL_PREDICTOR", "default_loss", "check_loss", "loss_lipschitz", "per_graph_losses",
           "trivial_loss", "label_term_bound", "Standardizer"]

#: The trivial predictor of each task type (:func:`trivial_loss`): the constant ½ (BCE: ln 2), the uniform
#: distribution over the classes (cross-entropy: ln C), or the labelled coreset's mean.
TRIVIAL_PREDICTOR = {"binary": "constant", "multitask": "constant", "multiclass": "uniform", "regression": "mean"}


def default_loss(task_type: str) -> str:
    """The default loss of a task type (``bce``, ``ce`` or ``huber``)."""
    return LOSSES[task_type][0]


def check_loss(task_type: str, loss: str | None) -> str:
    """``loss`` (or the default when None / ``"auto"``), checked against the task type."""
    if loss in (None, "", "auto"):
        return default_loss(task_type)
    if loss not in LOSSES[task_type]:
        raise ValueError(f"loss {loss!r} does not fit a {task_type} task: {', '.join(LOSSES[task_type])}")
    return loss


def loss_lipschitz(loss: str, delta: float = 1.0) -> tuple[float | None, str]:
    r""":math:`M` of a loss in the model output (L2), or None when it has none (MSE), and a sentence why.

    Returns
    -------
    M : float or None
    why : str
    """
    if loss == "bce":
        return 1.0, "BCE with logits: |sigmoid(z) - y| < 1 per output, averaged over the observed tasks (M = 1)"
    if loss == "ce":
        return math.sqrt(2.0), "cross-entropy in the logits: ||softmax(z) - e_y||_2 <= sqrt 2 (M = sqrt 2)"
    if loss == "l1":
        return 1.0, "L1 in standardised targets: 1 per output, averaged over the observed targets (M = 1)"
    if loss == "huber":
        return float(delta), f"Huber(delta={delta:g}) in standardised targets: |H'| <= delta (M = {delta:g})"
    if loss == "mse":
        return None, ("MSE has no Lipschitz constant (its gradient grows with the residual): the bound is "
                      "reported as uncertified; use huber or l1 for a certificate")
    raise ValueError(f"unknown loss {loss!r}")


def _observed(Y: np.ndarray) -> np.ndarray:
    return ~np.isnan(Y)


def per_graph_losses(z, y, loss: str, delta: float = 1.0) -> np.ndarray:
    r"""Per-graph losses of outputs ``z`` against labels ``y`` (the table of the module doc).

    Parameters
    ----------
    z : array_like, shape (n,) or (n, D)
        Model outputs (logits; standardised predictions for regression).
    y : array_like, shape (n,) or (n, T)
        Labels (class indices for ``ce``; standardised targets for regression); NaN = missing.
    loss : str
    delta : float
        Huber's δ.

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    Z = np.asarray(z, dtype=np.float64)
    Y = np.asarray(y, dtype=np.float64)
    Z = Z.reshape(len(Z), -1)
    Y = Y.reshape(len(Y), -1)
    if loss == "ce":
        m = Z.max(axis=1, keepdims=True)
        lse = (m + np.log(np.exp(Z - m).sum(axis=1, keepdims=True)))[:, 0]
        yi = np.nan_to_num(Y[:, 0], nan=0.0).astype(np.int64)
        out = lse - Z[np.arange(len(Z)), yi]
        return np.where(np.isnan(Y[:, 0]), 0.0, out)
    if Z.shape[1] != Y.shape[1]:
        raise ValueError(f"outputs have {Z.shape[1]} columns, labels {Y.shape[1]}")
    obs = _observed(Y)
    Yv = np.where(obs, Y, 0.0)
    if loss == "bce":
        per = np.maximum(Z, 0) - Z * Yv + np.log1p(np.exp(-np.abs(Z)))
    elif loss == "l1":
        per = np.abs(Z - Yv)
    elif loss == "mse":
        per = (Z - Yv) ** 2
    elif loss == "huber":
        r = np.abs(Z - Yv)
        per = np.where(r <= delta, 0.5 * r * r, delta * (r - 0.5 * delta))
    else:
        raise ValueError(f"unknown loss {loss!r}")
    cnt = obs.sum(axis=1)
    return np.where(cnt > 0, (per * obs).sum(axis=1) / np.maximum(cnt, 1), 0.0)


def trivial_loss(task_type: str, loss: str, y=None, weights=None, num_classes: int = 0,
                 delta: float = 1.0) -> tuple[float, str]:
    r"""The loss scale of the verdict: the mean loss of the trivial predictor, and a sentence naming it.

    Parameters
    ----------
    task_type, loss : str
    y : array_like, shape (k,) or (k, T), optional
        Regression: the labelled coreset's *standardised* targets (the trivial predictor predicts their mean).
    weights : array_like, shape (k,), optional
        τ of the coreset graphs (the mean is τ-weighted, as the training loss).
    num_classes : int
        :math:`C` (multi-class).

    Returns
    -------
    scale : float
    what : str
    """
    trivial = TRIVIAL_PREDICTOR.get(task_type, "mean")
    if trivial == "constant":
        return math.log(2.0), "ln 2: BCE of the constant ½ predictor"
    if trivial == "uniform":
        c = max(int(num_classes), 2)
        return math.log(c), f"ln {c}: cross-entropy of the uniform predictor over {c} classes"
    if y is None:
        raise ValueError("a regression loss scale needs the coreset's targets")
    Y = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
    w = np.ones(len(Y)) if weights is None else np.asarray(weights, dtype=np.float64)
    obs = _observed(Y)
    mean = np.array([np.average(Y[obs[:, t], t], weights=w[obs[:, t]]) if obs[:, t].any() else 0.0
                     for t in range(Y.shape[1])])
    L = per_graph_losses(np.broadcast_to(mean, Y.shape), Y, loss, delta)
    has = obs.any(axis=1)
    scale = float(np.average(L[has], weights=w[has])) if has.any() else float("nan")
    return scale, f"{loss} loss of predicting the labelled coreset's mean (standardised targets)"


def label_term_bound(loss: str, z, y, y_assigned, delta: float = 1.0) -> dict:
    r"""The label term of Lemma 3.2 and its bound, per the module doc.

    Parameters
    ----------
    loss : str
    z : array_like, shape (n,) or (n, D)
        Outputs of the model on the ``n`` pool graphs.
    y, y_assigned : array_like, shape (n,) or (n, T)
        Each graph's label and its medoid's label.

    Returns
    -------
    dict
        ``label_term`` (signed, :math:`\frac1n\sum_i[\mathcal L(z_i; y_i) - \mathcal L(z_i; y_{a(i)})]`),
        ``label_term_bound`` (:math:`\frac1n\sum_i|\cdot|`, what the model's outputs give),
        ``label_term_model_free`` (L1 / Huber: :math:`M\frac1n\sum_i\lVert y_i - y_{a(i)}\rVert_\mathrm{mean}`,
        else None), ``label_mismatch_fraction``.
    """
    L_own = per_graph_losses(z, y, loss, delta)
    L_med = per_graph_losses(z, y_assigned, loss, delta)
    Y = np.asarray(y, dtype=np.float64).reshape(len(L_own), -1)
    Ya = np.asarray(y_assigned, dtype=np.float64).reshape(len(L_own), -1)
    both = _observed(Y) & _observed(Ya)
    differ = (np.isnan(Y) != np.isnan(Ya)) | (both & (Y != Ya))
    n = max(len(L_own), 1)
    free = None
    if loss in ("l1", "huber"):
        M = 1.0 if loss == "l1" else float(delta)
        gaps = np.where(both, np.abs(Y - Ya), 0.0)
        cnt = both.sum(axis=1)
        per = np.where(cnt > 0, gaps.sum(axis=1) / np.maximum(cnt, 1), 0.0)
        mask_differs = (_observed(Y) != _observed(Ya)).any(axis=1)
        free = None if mask_differs.any() else float(M * per.sum() / n)
    return {"label_term": float((L_own - L_med).sum() / n), "label_term_bound": float(np.abs(L_own - L_med).sum() / n),
            "label_term_model_free": free, "label_mismatch_fraction": float(differ.any(axis=1).mean()) if len(L_own) else
            float("nan")}


class Standardizer:
    r"""Per-target affine map :math:`y \mapsto (y - \mu)/\sigma` fitted on the labelled coreset (τ-weighted).

    Attributes
    ----------
    mean, std : ndarray of float64, shape (T,)
        :math:`\mu`, :math:`\sigma` (:math:`\sigma = 1` where a target has no spread).
    """

    def __init__(self, mean, std):
        self.mean = np.asarray(mean, dtype=np.float64).ravel()
        self.std = np.asarray(std, dtype=np.float64).ravel()

    @classmethod
    def fit(cls, y, weights=None) -> "Standardizer":
        """Fitted on labels ``y`` ``(n, T)`` (NaN missing), τ-weighted by ``weights``
        (:func:`tmdlib.datasets._task.weighted_moments`)."""
        return cls(*weighted_moments(np.asarray(y, dtype=np.float64).reshape(len(y), -1), weights))

    @classmethod
    def identity(cls, T: int = 1) -> "Standardizer":
        return cls(np.zeros(T), np.ones(T))

    @property
    def scales(self) -> bool:
        """Whether the map changes anything (False: the identity, which every task but regression trains with)."""
        return bool(np.any(self.mean != 0.0) or np.any(self.std != 1.0))

    @property
    def target_scale(self) -> tuple | None:
        """``(mean, std)`` that a served model maps its outputs back to the targets' units with; None when
        :attr:`scales` is False."""
        return (self.mean, self.std) if self.scales else None

    def _rows(self, a) -> np.ndarray:
        """``a`` as ``(n, T)`` rows (no rows: ``(0, T)``, which ``reshape(0, -1)`` cannot infer)."""
        A = np.asarray(a, dtype=np.float64)
        return A.reshape(len(A), -1) if A.size else A.reshape(0, self.mean.size)

    def transform(self, y) -> np.ndarray:
        return (self._rows(y) - self.mean) / self.std

    def inverse(self, z) -> np.ndarray:
        return self._rows(z) * self.std + self.mean

    def to_dict(self) -> dict:
        return {"mean": self.mean.tolist(), "std": self.std.tolist()}

    @classmethod
    def from_dict(cls, d: dict | None, T: int = 1) -> "Standardizer":
        return cls.identity(T) if not d else cls(d["mean"], d["std"])
