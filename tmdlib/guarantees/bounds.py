r"""The loss guarantees of Jain et al. as numbers: observed gaps next to their bounds (pure numpy).

Graph coreset (Lemma 3.2, Corollary 3.3).  For training graphs :math:`X = \{G_1..G_n\}`, a coreset
:math:`\mathcal I` with cluster sizes :math:`\tau` (:math:`\sum_{j \in \mathcal I} \tau_j = n`) and medoid objective
:math:`\varepsilon = f_{\mathrm{TMD}}(\mathcal I; X)`, and any model :math:`h` with stability constant
:math:`c = M \prod_\ell \Phi_\ell`,

.. math:: \mathrm{gap}(h) = \Big|\frac1n \sum_{i\in\mathcal I}\tau_i \mathcal L(h(G_i)) -
          \frac1n \sum_{i \in [n]} \mathcal L(h(G_i))\Big| \le c\,\varepsilon ,

and a minimiser :math:`\hat h` of the τ-weighted coreset loss has excess loss on :math:`X` of at most
:math:`2 c \varepsilon` over the best model of the class (here: a model trained on all of :math:`X`).

Node subsampling (Corollary 4.1).  With :math:`\varepsilon_i = \mathrm{TMD}(G_i, G_i[S_i]) =
\mathrm{TN}(G_i) - \mathrm{TN}(G_i[S_i])`, per graph :math:`|\mathcal L(h(G_i)) - \mathcal L(h(G_i[S_i]))| \le
c\,\varepsilon_i`, so the mean loss gap is at most :math:`c \cdot \frac1n\sum_i \varepsilon_i` and the excess loss
of the model trained on the subgraphs at most :math:`2c \cdot \frac1n \sum_i\varepsilon_i`.  With graph weights
(a node-subsampled coreset) the means are τ-weighted: :math:`\sum_i \tau_i \varepsilon_i / \sum_i \tau_i`.
"""
from __future__ import annotations

import numpy as np

from ..select.coreset import medoids_objective

__all__ = ["medoid_objective", "cluster_sizes", "weighted_subset_loss", "coreset_gap", "lemma_bound",
           "erm_bound", "excess_loss", "node_epsilon_mean", "node_gap", "node_bounds"]


def _vec(a, name: str) -> np.ndarray:
    v = np.asarray(a, dtype=np.float64).ravel()
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be finite")
    return v


def medoid_objective(D, medoids) -> float:
    r""":math:`f_D(\mathcal I; X) = \frac1n \sum_i \min_{j\in\mathcal I} D_{ij}`; ``medoids`` are positions into ``D``."""
    D = np.asarray(D, dtype=np.float64)
    med = np.asarray(medoids, dtype=np.int64).ravel()
    if D.ndim != 2 or D.shape[0] != D.shape[1] or med.size == 0:
        raise ValueError("D must be square and medoids non-empty")
    return medoids_objective(D, med)


def cluster_sizes(D, medoids) -> np.ndarray:
    r"""τ of the nearest-medoid assignment (ties to the first listed medoid; a medoid counts itself).

    Returns ``(k,)`` int64 aligned with ``medoids`` as given.
    """
    D = np.asarray(D, dtype=np.float64)
    med = np.asarray(medoids, dtype=np.int64).ravel()
    pos = np.argmin(D[:, med], axis=1)
    pos[med] = np.arange(med.size)
    return np.bincount(pos, minlength=med.size).astype(np.int64)


def weighted_subset_loss(losses, subset, tau, n: int | None = None) -> float:
    r""":math:`\frac1n \sum_{i\in\mathcal I} \tau_i \mathcal L_i`.

    Parameters
    ----------
    losses : array_like, shape (n,)
        Per-graph losses of the full training set.
    subset : array_like of int, shape (k,)
        Positions of the coreset graphs in ``losses``.
    tau : array_like, shape (k,)
        Weights aligned with ``subset``.
    n : int, optional
        Normaliser (default ``len(losses)``).
    """
    L = _vec(losses, "losses")
    idx = np.asarray(subset, dtype=np.int64).ravel()
    t = _vec(tau, "tau")
    if idx.size != t.size:
        raise ValueError(f"subset ({idx.size}) and tau ({t.size}) differ in length")
    n = L.size if n is None else int(n)
    return float(np.dot(t, L[idx]) / n) if n else float("nan")


def coreset_gap(losses, subset, tau) -> dict:
    r"""Observed quantities of Lemma 3.2 for one model.

    Returns
    -------
    dict
        ``full`` :math:`= \frac1n\sum_i \mathcal L_i`, ``weighted`` :math:`= \frac1n\sum_{i\in\mathcal I}\tau_i\mathcal L_i`,
        ``signed`` = weighted − full, ``gap`` = its absolute value, ``tau_sum`` and ``n``
        (Lemma 3.2 presumes ``tau_sum == n``).
    """
    L = _vec(losses, "losses")
    full = float(L.mean()) if L.size else float("nan")
    weighted = weighted_subset_loss(L, subset, tau)
    return {"full": full, "weighted": weighted, "signed": weighted - full, "gap": abs(weighted - full),
            "tau_sum": float(np.sum(tau)), "n": int(L.size)}


def lemma_bound(c: float, epsilon: float) -> float:
    r"""Right-hand side of Lemma 3.2: :math:`c\,\varepsilon`."""
    return float(c) * float(epsilon)


def erm_bound(c: float, epsilon: float) -> float:
    r"""Right-hand side of Corollary 3.3 / 4.1: :math:`2 c\,\varepsilon`."""
    return 2.0 * float(c) * float(epsilon)


def excess_loss(subsampled_model_loss: float, reference_model_loss: float) -> float:
    r"""Excess training loss :math:`\frac1n\sum_i\mathcal L(\hat h(G_i)) - \frac1n\sum_i\mathcal L(h_{\mathrm{ref}}(G_i))`.

    With :math:`h_{\mathrm{ref}}` trained on the whole training set (a stand-in for the minimiser),
    Corollary 3.3 bounds it by :math:`2c\varepsilon` (it can be negative: training is not exact ERM).
    """
    return float(subsampled_model_loss) - float(reference_model_loss)


def node_epsilon_mean(epsilon, weights=None) -> float:
    r""":math:`\frac1n\sum_i\varepsilon_i`, or :math:`\sum_i \tau_i\varepsilon_i / \sum_i\tau_i` with ``weights``."""
    e = _vec(epsilon, "epsilon")
    if e.size == 0:
        return float("nan")
    if np.any(e < 0):
        raise ValueError("node epsilons must be >= 0")
    if weights is None:
        return float(e.mean())
    w = _vec(weights, "weights")
    if w.size != e.size:
        raise ValueError(f"weights ({w.size}) and epsilon ({e.size}) differ in length")
    return float(np.dot(w, e) / w.sum())


def node_gap(losses_full, losses_sub, weights=None) -> dict:
    r"""Observed loss change from :math:`G_i` to :math:`G_i[S_i]` for one model.

    Returns
    -------
    dict
        ``gap`` = :math:`|\overline{\mathcal L(h(G[S]))} - \overline{\mathcal L(h(G))}|` (the quantity
        bounded by :math:`c \cdot \bar\varepsilon`), ``mean_abs`` = mean of the per-graph
        :math:`|\Delta\mathcal L_i|` (also bounded by it), ``max_abs``: the largest
        :math:`|\Delta\mathcal L_i|` (bounded per graph by :math:`c\varepsilon_i`).  Means are
        weighted by ``weights`` when given.
    """
    a = _vec(losses_full, "losses_full")
    b = _vec(losses_sub, "losses_sub")
    if a.size != b.size:
        raise ValueError("losses_full and losses_sub differ in length")
    w = np.ones_like(a) if weights is None else _vec(weights, "weights")
    if a.size == 0:
        return {"gap": float("nan"), "mean_abs": float("nan"), "max_abs": float("nan")}
    d = b - a
    return {"gap": float(abs(np.dot(w, d) / w.sum())), "mean_abs": float(np.dot(w, np.abs(d)) / w.sum()),
            "max_abs": float(np.abs(d).max())}


def node_bounds(c: float, epsilon, weights=None) -> dict:
    r"""``epsilon_mean``, ``bound`` :math:`= c\bar\varepsilon` (loss gap), ``erm_bound`` :math:`= 2c\bar\varepsilon`."""
    m = node_epsilon_mean(epsilon, weights)
    return {"epsilon_mean": m, "bound": lemma_bound(c, m), "erm_bound": erm_bound(c, m)}
