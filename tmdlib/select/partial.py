r"""A coreset whose lab answered only part of it: the weights and the certificate over the answered medoids.

A medoid without a label cannot stand for its cluster.  The rule (docs/pipeline.md#labels): every graph whose
medoid is answered keeps it; the graphs of an unanswered medoid -- the medoid itself included -- go to their
nearest *answered* medoid (exact TMD; ties to the lowest position).  The result is again an assignment of all
:math:`n` graphs to labelled medoids, so Lemma 3.2 holds for it as for any assignment: :math:`\tau_j` counts the
graphs now assigned to answered medoid :math:`j`, and :math:`\varepsilon_\Sigma = \sum_i \mathrm{TMD}(G_i,
G_{a'(i)})` sums the new distances -- never smaller than before (a graph only moves away from a medoid it can no
longer use).  Only the moved graphs cost TMD evaluations: (moved graphs) x (answered medoids), or none with the
matrix.
"""
from __future__ import annotations

import numpy as np

from .evidence import CoresetCertificate, certificate_from_assignment

__all__ = ["answered_certificate"]


def answered_certificate(cert: CoresetCertificate, answered, dataset=None, depth: int = 4, weights="pascal", *,
                         D: np.ndarray | None = None, num_threads: int | None = None) -> CoresetCertificate:
    r"""The certificate of a coreset restricted to its answered medoids (the rule in the module docstring).

    Parameters
    ----------
    cert : CoresetCertificate
        The selection's certificate (positions ``0..n-1``).
    answered : array_like of int
        Positions of the medoids that have a label (a subset of ``cert.medoids``; at least one).
    dataset : GraphDataset, optional
        The ``n`` graphs, to compute the moved graphs' TMDs (not needed with ``D``).
    depth, weights
        The TMD's, as the selection's.
    D : ndarray, shape (n, n), optional
        The exact TMD matrix.
    num_threads : int, optional

    Returns
    -------
    CoresetCertificate
        Medoids = the answered ones (sorted), the new assignment and distances, :math:`\tau`, :math:`\varepsilon`;
        ``info`` adds ``moved`` (graphs reassigned), ``unanswered`` (medoids dropped) and ``epsilon_before``.

    Raises
    ------
    ValueError
        No answered medoid, or an answered position that is not a medoid.
    """
    med = np.asarray(cert.medoids, dtype=np.int64)
    ans = np.unique(np.asarray(answered, dtype=np.int64))
    if ans.size == 0:
        raise ValueError("no answered medoid: a coreset needs at least one labelled graph")
    stray = np.setdiff1d(ans, med)
    if stray.size:
        raise ValueError(f"answered positions that are not medoids: {stray[:10].tolist()}")
    assignment = np.asarray(cert.assignment, dtype=np.int64).copy()
    distance = np.asarray(cert.distance, dtype=np.float64).copy()
    moved = np.flatnonzero(~np.isin(assignment, ans))
    if moved.size:
        if D is not None:
            block = np.asarray(D, dtype=np.float64)[np.ix_(moved, ans)]
        else:
            if dataset is None:
                raise ValueError("the moved graphs' TMDs need the dataset or the matrix D")
            from ..distance._engine import tmd_block

            block = tmd_block(dataset.take(moved), dataset.take(ans), depth, weights, num_threads=num_threads)
        near = np.argmin(block, axis=1)  # first minimum: the lowest position (ans sorted)
        assignment[moved] = ans[near]
        distance[moved] = block[np.arange(moved.size), near]
    assignment[ans] = ans
    distance[ans] = 0.0
    info = {**cert.info, "moved": int(moved.size), "unanswered": int(med.size - ans.size),
            "epsilon_before": float(cert.epsilon)}
    return certificate_from_assignment(ans, assignment, distance, cert.pairs_computed + int(moved.size * ans.size
                                                                                            if D is None else 0),
                                       cert.engine, info)
