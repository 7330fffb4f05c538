"""A partly answered coreset (tmdlib.select.partial): weights and epsilon over the answered medoids, on MUTAG."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import RAW


@pytest.fixture(scope="module")
def mutag():
    from tmdlib import tmd_matrix
    from tmdlib.datasets import load_builtin
    from tmdlib.datasets import to_dataset

    ds = to_dataset(load_builtin("MUTAG", RAW)).take(np.arange(40))
    return ds, tmd_matrix(ds, 4)


def test_unanswered_medoids_graphs_go_to_the_nearest_answered_medoid(mutag):
    from tmdlib.select._certificate import certificate_from_matrix
    from tmdlib.select import kmedoids_coreset
    from tmdlib.select.partial import answered_certificate

    ds, D = mutag
    cs = kmedoids_coreset(D, 6, seed=0, restarts=1)
    cert = certificate_from_matrix(D, cs.medoids)
    answered = cs.medoids[[0, 2, 3, 5]]  # the lab answered 4 of 6
    part = answered_certificate(cert, answered, D=D)
    # recomputation: graphs of answered medoids stay; the others (unanswered medoids too) take the nearest answered
    keep = np.isin(cert.assignment, answered)
    want = cert.assignment.copy()
    want[~keep] = answered[np.argmin(D[np.ix_(np.flatnonzero(~keep), answered)], axis=1)]
    assert np.array_equal(part.assignment, want) and np.array_equal(part.medoids, np.sort(answered))
    assert part.tau.tolist() == [int((want == m).sum()) for m in np.sort(answered)] and part.tau.sum() == len(ds)
    eps = D[np.arange(len(ds)), want].sum()
    assert part.epsilon == pytest.approx(eps) and part.epsilon >= cert.epsilon
    assert part.info["moved"] == int((~keep).sum()) and part.info["unanswered"] == 2
    # without the matrix: the moved graphs' TMDs computed, the same certificate
    lazy = answered_certificate(cert, answered, ds, 4)
    assert np.array_equal(lazy.assignment, part.assignment)
    assert lazy.epsilon == pytest.approx(part.epsilon, rel=1e-9)
    # every medoid answered: nothing moves
    full = answered_certificate(cert, cs.medoids, D=D)
    assert full.epsilon == pytest.approx(cert.epsilon) and full.info["moved"] == 0


def test_answered_must_be_medoids(mutag):
    from tmdlib.select._certificate import certificate_from_matrix
    from tmdlib.select.partial import answered_certificate

    _, D = mutag
    cert = certificate_from_matrix(D, [1, 5, 9])
    with pytest.raises(ValueError, match="no answered medoid"):
        answered_certificate(cert, [], D=D)
    with pytest.raises(ValueError, match="not medoids"):
        answered_certificate(cert, [2], D=D)
