"""k-medoids coresets on precomputed distance matrices (tmdlib.select._coreset)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from tmdlib.select import assign_to_medoids, budget_to_k, kmedoids_coreset, medoids_objective, validate_distance_matrix


def line_matrix(pos):
    pos = np.asarray(pos, dtype=float)
    return np.abs(pos[:, None] - pos[None, :])


# two well-separated clusters, shuffled: A = {0, 1, 2}, B = {100, 101, 103}
POS = np.array([101.0, 2.0, 0.0, 103.0, 1.0, 100.0])
#   medoids: position 1.0 (index 4) and 101.0 (index 0); loss = (1 + 0 + 1) + (1 + 0 + 2) = 5


@pytest.mark.parametrize("fraction,n,k", [(0.1, 30, 3), (0.01, 10, 1), (1.0, 5, 5), (0.5, 0, 0), (0.25, 7, 2),
                                          (0.3, 10, 3), (0.07, 100, 7)])
def test_budget_to_k_fraction(fraction, n, k):
    assert budget_to_k(n, fraction=fraction) == k


def test_budget_to_k_count_and_errors():
    assert budget_to_k(10, count=3) == 3
    assert budget_to_k(2, count=5) == 2
    for kwargs in ({}, {"fraction": 0.1, "count": 1}, {"fraction": 0.0}, {"fraction": 1.5}, {"count": 0}):
        with pytest.raises(ValueError):
            budget_to_k(10, **kwargs)


@pytest.mark.parametrize("bad,msg", [
    (np.zeros((2, 3)), "square"),
    (np.zeros((0, 0)), "empty"),
    (np.array([[0.0, np.nan], [np.nan, 0.0]]), "non-finite"),
    (np.array([[0.0, -1.0], [-1.0, 0.0]]), "negative"),
    (np.array([[0.0, 1.0], [2.0, 0.0]]), "symmetric"),
    (np.array([[1.0, 1.0], [1.0, 0.0]]), "diagonal"),
])
def test_validate_distance_matrix_errors(bad, msg):
    with pytest.raises(ValueError, match=msg):
        validate_distance_matrix(bad)
    with pytest.raises(ValueError, match=msg):
        kmedoids_coreset(bad, 1)


def test_validate_symmetrises_tiny_noise():
    d = np.array([[0.0, 1.0, 2.0], [1.0 + 1e-13, 1e-14, 3.0], [2.0, 3.0, 0.0]])
    out = validate_distance_matrix(d)
    assert np.array_equal(out, out.T) and np.all(np.diagonal(out) == 0)


@pytest.mark.parametrize("method", ["fasterpam", "swap", "sklearn-extra", "sklearn-extra-alternate"])
def test_two_clusters_known_answer(method):
    if method.startswith("sklearn-extra"):
        pytest.importorskip("sklearn_extra.cluster")
    res = kmedoids_coreset(line_matrix(POS), 2, seed=3, method=method)
    assert res.medoids.tolist() == [0, 4]
    assert res.assignment.tolist() == [0, 4, 4, 0, 4, 0]
    assert res.tau.tolist() == [3, 3]
    assert res.loss == pytest.approx(5.0)
    assert res.epsilon == pytest.approx(5.0 / 6.0)
    assert res.labels.tolist() == [0, 1, 1, 0, 1, 0]
    assert np.allclose(res.weights, [0.5, 0.5])
    assert res.method.startswith(method.split("-alt")[0]) and res.seed == 3


def test_assignment_ties_and_duplicate_medoids():
    # point 1 is equidistant from medoids 0 and 2 -> goes to 0; points 3, 4 are identical
    pos = [0.0, 1.0, 2.0, 10.0, 10.0]
    d = line_matrix(pos)
    med, assignment, tau = assign_to_medoids(d, [4, 2, 0, 3])
    assert med.tolist() == [0, 2, 3, 4]
    assert assignment.tolist() == [0, 0, 2, 3, 4]  # medoid 4 stays its own medoid despite D[4, 3] = 0
    assert tau.tolist() == [2, 1, 1, 1]
    assert medoids_objective(d, med) == pytest.approx(1.0 / 5)
    with pytest.raises(ValueError):
        assign_to_medoids(d, [0, 0])


def test_epsilon_is_recomputed_medoids_objective():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 3))
    d = cdist(x, x)
    res = kmedoids_coreset(d, 7, seed=1)
    assert res.epsilon == pytest.approx(d[:, res.medoids].min(axis=1).mean(), rel=1e-12)
    assert res.loss == pytest.approx(res.epsilon * 60)
    assert res.tau.sum() == 60 and np.all(res.tau >= 1)
    assert np.all(np.diff(res.medoids) > 0)
    assert min(res.restart_losses) == pytest.approx(res.loss)
    # consistency: the assignment is the nearest-medoid map
    assert np.allclose(d[np.arange(60), res.assignment], d[:, res.medoids].min(axis=1))


def test_deterministic_by_seed():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(80, 2))
    d = cdist(x, x)
    for method in ("fasterpam", "swap"):
        a = kmedoids_coreset(d, 9, seed=5, method=method)
        b = kmedoids_coreset(d, 9, seed=5, method=method)
        assert np.array_equal(a.medoids, b.medoids) and a.restart_losses == b.restart_losses


def test_edge_budgets():
    d = line_matrix([0.0, 1.0, 5.0, 6.0, 7.0])
    full = kmedoids_coreset(d, 5)
    assert full.medoids.tolist() == [0, 1, 2, 3, 4] and full.epsilon == 0 and full.tau.tolist() == [1] * 5
    one = kmedoids_coreset(d, 1, method="swap")  # 1-medoid: PAM swaps reach the global optimum
    assert one.medoids.tolist() == [int(np.argmin(d.sum(axis=1)))]
    for k in (0, 6, 2.5):
        with pytest.raises(ValueError):
            kmedoids_coreset(d, k)
    with pytest.raises(ValueError, match="method"):
        kmedoids_coreset(d, 2, method="nope")


def brute_force(d, k, cand=None, fixed=()):
    n = d.shape[0]
    pool = range(n) if cand is None else cand
    best = None
    for comb in itertools.combinations(pool, k):
        if not set(fixed) <= set(comb):
            continue
        val = d[:, list(comb)].min(axis=1).sum()
        if best is None or val < best - 1e-12:
            best = val
    return best


def test_swap_with_candidates_and_fixed():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(12, 2))
    d = cdist(x, x)
    cand = np.array([0, 2, 3, 5, 7, 8, 11])
    res = kmedoids_coreset(d, 3, seed=0, candidates=cand)
    assert set(res.medoids) <= set(cand) and res.method == "swap"
    mask = np.zeros(12, bool)
    mask[cand] = True
    assert np.array_equal(kmedoids_coreset(d, 3, seed=0, candidates=mask).medoids, res.medoids)
    # local optimality: no single swap within the candidates improves the loss
    for m in res.medoids:
        for c in set(cand) - set(res.medoids):
            alt = [c if v == m else v for v in res.medoids]
            assert d[:, alt].min(axis=1).sum() >= res.loss - 1e-9
    assert res.loss <= brute_force(d, 3, cand) * 1.05
    fx = kmedoids_coreset(d, 3, seed=0, fixed=[1, 4])
    assert {1, 4} <= set(fx.medoids)
    assert fx.loss == pytest.approx(brute_force(d, 3, fixed=(1, 4)))  # one free medoid: swaps are exhaustive
    with pytest.raises(ValueError):
        kmedoids_coreset(d, 3, candidates=[0, 1])
    with pytest.raises(ValueError):
        kmedoids_coreset(d, 1, fixed=[0, 1])
    with pytest.raises(ValueError):
        kmedoids_coreset(d, 2, candidates=cand, method="sklearn-extra")


def test_swap_matches_fasterpam_quality():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(150, 4))
    d = cdist(x, x)
    fp = kmedoids_coreset(d, 10, seed=0, method="fasterpam")
    sw = kmedoids_coreset(d, 10, seed=0, method="swap")
    assert sw.loss <= fp.loss * 1.02 and fp.loss <= sw.loss * 1.02


@pytest.mark.parametrize("method", ["fasterpam", "swap", "sklearn-extra", "sklearn-extra-alternate"])
def test_duplicate_points(method):
    """Two groups of identical points, k = 4: distinct medoids, ties to the lowest medoid, epsilon 0."""
    if method.startswith("sklearn-extra"):
        pytest.importorskip("sklearn_extra.cluster")
    d = np.zeros((6, 6))
    d[:3, 3:] = d[3:, :3] = 1.0
    res = kmedoids_coreset(d, 4, method=method)
    assert np.unique(res.medoids).size == 4 and res.epsilon == 0.0 and res.tau.sum() == 6
    first = {g: min(m for m in res.medoids if (m < 3) == (g < 3)) for g in range(6)}
    for i in range(6):
        expect = i if i in res.medoids else first[i]
        assert res.assignment[i] == expect
