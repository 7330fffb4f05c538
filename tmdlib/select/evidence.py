r"""The evidence a coreset carries: :class:`CoresetCertificate` (Lemma 3.2 for any assignment).

A leaf module (numpy only), so that every engine -- the exact one in :mod:`tmdlib.select._certificate`, the scalable
one in :mod:`tmdlib.select.scalable` -- can build certificates without importing the other.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["CoresetCertificate", "certificate_from_assignment"]


@dataclass(frozen=True, eq=False)
class CoresetCertificate:
    r"""A coreset and the exact evidence for its bound.

    Attributes
    ----------
    medoids : ndarray of int64, shape (k,)
        Positions of the selected graphs :math:`\mathcal I`, sorted ascending.
    assignment : ndarray of int64, shape (n,)
        Position of the medoid each graph is assigned to (a medoid is assigned to itself).
    distance : ndarray of float64, shape (n,)
        Exact :math:`\mathrm{TMD}(G_i, G_{a(i)})`.
    tau : ndarray of int64, shape (k,)
        Cluster sizes aligned with ``medoids``; ``tau.sum() == n``.
    epsilon : float
        :math:`\varepsilon_\Sigma = \sum_i` ``distance[i]``.
    pairs_computed : int
        Exact TMD evaluations made by the selection and the certificate.
    engine : str
        ``"exact"`` or ``"scalable"``.
    info : dict
        Engine-specific facts (restarts, rounds, proxy losses, ...), JSON-ready.
    """

    medoids: np.ndarray
    assignment: np.ndarray
    distance: np.ndarray
    tau: np.ndarray
    epsilon: float
    pairs_computed: int
    engine: str
    info: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Number of graphs covered."""
        return int(self.assignment.size)

    @property
    def k(self) -> int:
        """Number of medoids."""
        return int(self.medoids.size)

    @property
    def epsilon_mean(self) -> float:
        r""":math:`\varepsilon = f_{\mathrm{TMD}}(\mathcal I; X) = \varepsilon_\Sigma / n` (Lemma 3.2's quantity)."""
        return float(self.epsilon / self.n) if self.n else 0.0


def certificate_from_assignment(medoids, assignment, distance, pairs_computed: int, engine: str,
                                info=None) -> CoresetCertificate:
    r"""The certificate of any assignment of the graphs to medoids (Lemma 3.2 needs no more).

    Parameters
    ----------
    medoids : array_like of int, shape (k,)
        Positions of the medoids, sorted ascending.
    assignment : array_like of int, shape (n,)
        Medoid (a position) of each graph; a medoid is its own.
    distance : array_like of float, shape (n,)
        Exact :math:`\mathrm{TMD}(G_i, G_{a(i)})`.
    pairs_computed : int
    engine : str
    info : dict or object with ``to_json()``, optional
        Engine facts (e.g. :class:`tmdlib.select.scalable.EngineInfo`).

    Returns
    -------
    CoresetCertificate
        With :math:`\tau_j = |a^{-1}(j)|` and :math:`\varepsilon_\Sigma = \sum_i` ``distance[i]``.
    """
    med = np.asarray(medoids, dtype=np.int64)
    pos = np.searchsorted(med, assignment)
    tau = np.bincount(pos, minlength=med.size).astype(np.int64)
    dist = np.asarray(distance, dtype=np.float64)
    if info is not None and hasattr(info, "to_json"):
        info = info.to_json()
    return CoresetCertificate(med, np.asarray(assignment, dtype=np.int64), dist, tau, float(dist.sum()),
                              int(pairs_computed), engine, dict(info or {}))
