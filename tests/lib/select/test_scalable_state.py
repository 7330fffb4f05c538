"""The scalable engine's parts: the nearest-medoid search, the swap state, part specs and results, the mapper."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import tmdlib
from tmdlib.distance.lower import LowerBound
from tmdlib.select.certificate import certificate_from_assignment, tmd_coreset
from tmdlib.select.scalable import (EngineInfo, PairCache, PartResult, PartSpec, SwapState, Verdict, nearest_two,
                                    plan_parts, scalable_coreset, solve_part)


@pytest.fixture(scope="module")
def mutag_D(mutag):
    return tmdlib.tmd_matrix(mutag)


def _brute_two(D, points, med):
    """Nearest and second-nearest medoid distances by brute force (a medoid is its own nearest)."""
    d = D[np.ix_(points, med)].copy()
    own = med[None, :] == points[:, None]
    d[own] = -1.0  # sorts first
    s = np.sort(d, axis=1)
    return np.maximum(s[:, 0], 0.0), s[:, 1] if med.size > 1 else np.full(points.size, np.inf)


def _check_exact(state: SwapState, D):
    pts = np.arange(D.shape[0])
    d1, d2 = _brute_two(D, pts, state.medoids)
    assert np.allclose(state.d1, d1) and np.allclose(state.d2, d2)
    assert np.allclose(state.d1, D[pts, state.assignment])
    assert np.array_equal(state.assignment[state.medoids], state.medoids)


@pytest.mark.parametrize("second", [True, False])
def test_nearest_two_is_exact_and_pruned(mutag, mutag_D, second):
    lb = LowerBound.of(mutag)
    med = np.array([4, 40, 41, 77, 120, 160])
    pts = np.arange(len(mutag))
    cache = PairCache(lambda i, j: mutag_D[i, j], len(mutag))
    near = nearest_two(pts, med, lb.block(pts, med), cache, second=second)
    d1, d2 = _brute_two(mutag_D, pts, med)
    assert np.allclose(near.d1, d1) and np.allclose(mutag_D[pts, med[near.n1]], near.d1)
    assert np.array_equal(near.n1[med], np.arange(med.size))  # a medoid is its own
    if second:
        assert np.allclose(near.d2, d2)
    else:
        assert near.n2 is None and near.d2 is None
    assert cache.computed < pts.size * med.size  # the lower bounds spared pairs


def test_nearest_two_budget_stops_after_the_first_round(mutag, mutag_D):
    lb = LowerBound.of(mutag)
    med = np.array([4, 40, 77, 120, 160])
    pts = np.arange(len(mutag))
    cache = PairCache(lambda i, j: mutag_D[i, j], len(mutag))
    near = nearest_two(pts, med, lb.block(pts, med), cache, max_pairs=0)
    # one exact distance per non-medoid (its LB-nearest medoid): a valid, exact, if looser assignment
    assert cache.computed == pts.size - med.size
    assert np.allclose(near.d1, mutag_D[pts, med[near.n1]])


def test_swap_state_try_and_apply_stay_exact(mutag, mutag_D):
    n = len(mutag)
    bound = LowerBound.of(mutag).matrix()
    cache = PairCache(lambda i, j: mutag_D[i, j], n)
    state = SwapState(bound, cache, np.array([0, 1, 2, 3, 4]), np.zeros(n, bool))
    _check_exact(state, mutag_D)
    made = 0
    for x in range(5, n):
        before = state.objective
        trial = state.try_swap(x, 1e-9)
        assert trial.verdict in Verdict
        if trial.verdict is not Verdict.IMPROVES:
            continue
        trial_med = state.medoids.copy()
        trial_med[trial.slot] = x
        expect = mutag_D[:, trial_med].min(axis=1).sum()
        assert trial.change == pytest.approx(expect - before, rel=1e-9, abs=1e-9)  # the gain is the true one
        state.apply(trial)
        made += 1
        assert np.all(np.diff(state.medoids) > 0) and x in state.medoids
        assert state.objective == pytest.approx(expect, rel=1e-12)
        _check_exact(state, mutag_D)
        if made == 5:
            break
    assert made == 5


def test_fixed_medoids_are_never_swapped_out(mutag, mutag_D):
    n = len(mutag)
    fixed = np.zeros(n, bool)
    fixed[[0, 1]] = True
    state = SwapState(LowerBound.of(mutag).matrix(), PairCache(lambda i, j: mutag_D[i, j], n), np.array([0, 1, 2]),
                      fixed)
    for x in range(3, n):
        trial = state.try_swap(x, 1e-9)
        if trial.verdict is Verdict.IMPROVES:
            assert state.medoids[trial.slot] not in (0, 1)
            state.apply(trial)
    assert {0, 1} <= set(state.medoids.tolist())


def test_part_specs_and_results_travel(mutag):
    parts, specs = plan_parts(mutag, 19, part_size=100)
    assert all(isinstance(s, PartSpec) and s.positions is p for s, p in zip(specs, parts))
    assert sum(s.k for s in specs) == 19
    assert pickle.dumps(specs[0])  # picklable: specs travel to worker processes and Dask workers
    res = solve_part(copy.deepcopy(specs[0]))
    back = PartResult.from_arrays(res.to_arrays())  # through a part cache's .npz
    for key in PartResult.ARRAYS:
        assert np.array_equal(getattr(back, key), getattr(res, key))
    assert pickle.dumps(res)  # results travel back


def test_map_parts_decides_where_parts_run(mutag):
    seen = []

    def map_parts(specs):
        seen.extend(specs)
        return [solve_part(s) for s in reversed(specs)][::-1]

    a = scalable_coreset(mutag, 19, part_size=100, map_parts=map_parts)
    b = scalable_coreset(mutag, 19, part_size=100)
    assert len(seen) == a.info.parts == 2
    assert np.array_equal(a.medoids, b.medoids) and np.array_equal(a.distance, b.distance)
    assert a.info.to_json() == {"parts": 2, "part_size": 100, "swaps": b.info.swaps, "max_pairs": None}
    with pytest.raises(ValueError, match="results for 2 parts"):
        scalable_coreset(mutag, 19, part_size=100, map_parts=lambda specs: [])
    cert = tmd_coreset(mutag, 19, engine="scalable", part_size=100, map_parts=map_parts)
    assert np.array_equal(cert.medoids, a.medoids) and cert.info == a.info.to_json()


def test_certificate_from_assignment_is_public(mutag):
    cert = certificate_from_assignment([2, 5], [2, 2, 2, 5, 5, 5], [0.0, 1, 1, 2, 0, 2], 7, "scalable",
                                       EngineInfo(1, 10, 0, None))
    assert cert.tau.tolist() == [3, 3] and cert.epsilon == 6.0 and cert.info["parts"] == 1


# ---------------------------------------------------------------------------------------------- the pipeline's mapper

class _Done:
    """A finished future (what the mapper's ``submit`` returns): Prefect's wait / as_completed see it as done."""

    _final_state = True

    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


def test_part_mapper_one_part_persists_exact_pairs(mutag, tmp_path, capsys):
    from tasks.coreset import part_mapper

    mapper = part_mapper(str(tmp_path), mutag, 4, "pascal", 0, 4000)
    a = tmd_coreset(mutag, 19, engine="scalable", map_parts=mapper)
    assert list((tmp_path / "pairs").glob("*.npz"))
    capsys.readouterr()
    b = tmd_coreset(mutag, 19, engine="scalable", map_parts=part_mapper(str(tmp_path), mutag, 4, "pascal", 0, 4000))
    assert "exact pairs from an earlier run" in capsys.readouterr().err
    c = tmd_coreset(mutag, 19, engine="scalable")
    for x in (a, b):
        assert np.array_equal(x.medoids, c.medoids) and np.array_equal(x.distance, c.distance)
        assert x.pairs_computed == c.pairs_computed and x.info == c.info


def test_part_mapper_several_parts_cached(mutag, tmp_path):
    from tasks.coreset import part_mapper

    calls = []

    def submit(spec):
        calls.append(spec.k)
        return _Done(solve_part(spec))

    opts = {"engine": "scalable", "part_size": 100}
    a = tmd_coreset(mutag, 19, map_parts=part_mapper(str(tmp_path), mutag, 4, "pascal", 0, 100, submit=submit), **opts)
    assert len(calls) == 2 and len(list((tmp_path / "parts").glob("*.npz"))) == 2
    b = tmd_coreset(mutag, 19, map_parts=part_mapper(str(tmp_path), mutag, 4, "pascal", 0, 100, submit=submit), **opts)
    assert len(calls) == 2  # every part read from the cache
    c = tmd_coreset(mutag, 19, **opts)
    for x in (a, b):
        assert np.array_equal(x.medoids, c.medoids) and np.array_equal(x.distance, c.distance)
        assert x.pairs_computed == c.pairs_computed and x.info == c.info
    # no cache dir: plain submits
    d = tmd_coreset(mutag, 19, map_parts=part_mapper(None, mutag, 4, "pascal", 0, 100, submit=submit), **opts)
    assert len(calls) == 4 and np.array_equal(d.medoids, c.medoids)


def test_part_mapper_refuses_parts_planned_with_other_parameters(mutag, tmp_path):
    from tasks.coreset import part_mapper

    mapper = part_mapper(str(tmp_path), mutag, 4, "pascal", 0, 100)
    with pytest.raises(ValueError, match="this mapper was made for"):
        tmd_coreset(mutag, 19, engine="scalable", seed=1, part_size=100, map_parts=mapper)
    assert not (tmp_path / "parts").exists()
