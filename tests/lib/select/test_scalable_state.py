"""The scalable engine's parts: the nearest-medoid search, the swap state, part specs and results, the mapper."""
from __future__ import annotations

import copy
import dataclasses
import pickle
import re

import numpy as np
import pytest

import tmdlib
from tmdlib.distance._lower import LowerBound
from tmdlib.select import tmd_coreset
from tmdlib.select._certificate import certificate_from_assignment
from tmdlib.select.scalable import (EngineInfo, PairCache, PartResult, PartSpec, SwapState, Verdict, nearest_two,
                                    auto_pair_budget, plan_parts, scalable_coreset, solve_part)


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


def test_nearest_two_cuts_the_round_that_would_pass_the_budget(mutag, mutag_D):
    lb = LowerBound.of(mutag)
    med = np.array([4, 40, 77, 120, 160])
    pts = np.arange(len(mutag))
    free = nearest_two(pts, med, lb.block(pts, med), PairCache(lambda i, j: mutag_D[i, j], len(mutag)))
    first_round = pts.size - med.size
    for budget in (first_round + 1, first_round + 50):
        cache = PairCache(lambda i, j: mutag_D[i, j], len(mutag))
        near = nearest_two(pts, med, lb.block(pts, med), cache, max_pairs=budget)
        assert cache.computed == budget  # not a pair more than the budget once the first round is done
        assert np.allclose(near.d1, mutag_D[pts, med[near.n1]])  # every distance exact
        assert np.all(near.d1 >= free.d1)  # and never nearer than the true nearest medoid
    assert np.sum(near.d1 > free.d1) < np.sum(nearest_two(
        pts, med, lb.block(pts, med), PairCache(lambda i, j: mutag_D[i, j], len(mutag)), max_pairs=0).d1 > free.d1)


def test_a_tight_budget_goes_to_the_graphs_not_to_the_medoids_pivots(mutag, mutag_D):
    """Below one pair per graph and medoid, the medoids' distances to each other are not computed."""
    n = len(mutag)
    bound = LowerBound.of(mutag).matrix()
    med = np.array([0, 1, 2, 3, 4])
    tight = PairCache(lambda i, j: mutag_D[i, j], n)
    SwapState(bound, tight, med, np.zeros(n, bool), max_pairs=n * med.size - 1)
    roomy = PairCache(lambda i, j: mutag_D[i, j], n)
    SwapState(bound, roomy, med, np.zeros(n, bool), max_pairs=n * med.size)
    pivots = {int(a) * n + int(b) for a in med for b in med if a < b}
    assert not pivots & set(tight.keys().tolist()) and pivots & set(roomy.keys().tolist())


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


def test_tried_candidates_are_exact_pivots_that_save_pairs_not_swaps(mutag, mutag_D, monkeypatch):
    """Every candidate tried keeps its exact distances (a pivot for the triangle bounds of the candidates after
    it): the search makes the same swaps to the same objective as with the medoids alone as pivots, for fewer
    exact pairs."""
    from tmdlib.select.scalable import refine_kmedoids

    lb = LowerBound.of(mutag)

    def run():
        cache = PairCache(lambda i, j: mutag_D[i, j], len(mutag))
        return refine_kmedoids(lb, cache, 12, seed=0), cache

    with_pivots, cache = run()
    seen = []
    monkeypatch.setattr(SwapState, "_new_pivot", lambda self, x: seen.append(x) or np.full(len(mutag), np.nan))
    medoids_only, cache0 = run()
    monkeypatch.undo()
    assert np.array_equal(with_pivots.medoids, medoids_only.medoids) and with_pivots.swaps == medoids_only.swaps
    assert with_pivots.distance.sum() == pytest.approx(medoids_only.distance.sum(), rel=1e-12)
    assert len(seen) > 10 and cache.computed < cache0.computed
    import tmdlib.select.scalable._swaps as scal  # a few pivots kept, fewer used: the same search still
    monkeypatch.setattr(scal, "MAX_TRIED", 5)
    monkeypatch.setattr(scal, "MAX_PIVOTS", 2)
    capped, cache2 = run()
    assert np.array_equal(capped.medoids, with_pivots.medoids) and cache0.computed >= cache2.computed
    monkeypatch.undo()
    # the rows are the candidates' exact distances
    state = SwapState(lb.matrix(), PairCache(lambda i, j: mutag_D[i, j], len(mutag)), np.arange(5), np.zeros(len(mutag), bool))
    judged = [x for x in range(5, 80) if state.try_swap(x, 1e-9).verdict is not Verdict.PRUNED]
    rows = state.tried
    assert rows.shape[0] == len(judged) > 8 and state._tried.shape[0] >= len(judged)  # grown past its first 8 rows
    monkeypatch.setattr(scal, "MAX_TRIED", 6)
    ring = SwapState(lb.matrix(), PairCache(lambda i, j: mutag_D[i, j], len(mutag)), np.arange(5), np.zeros(len(mutag), bool))
    judged_ring = [x for x in range(5, 80) if ring.try_swap(x, 1e-9).verdict is not Verdict.PRUNED]
    assert len(judged_ring) > 6 and ring.tried.shape[0] == 6  # the newest overwrite the oldest
    last = judged_ring[-1]
    assert ring.tried[(len(judged_ring) - 1) % 6, last] == 0.0
    monkeypatch.undo()
    for r, x in enumerate(judged):
        known = ~np.isnan(rows[r])
        assert rows[r, x] == 0.0 and np.allclose(rows[r, known], mutag_D[x, known])


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
    assert a.info.to_json() == {"parts": 2, "part_size": 100, "swaps": b.info.swaps,
                                "max_pairs": float(auto_pair_budget(mutag.nodes_per_graph)), "per_cluster": None}
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
    assert list((tmp_path / "pairs").glob("*/*.npz"))
    capsys.readouterr()
    b = tmd_coreset(mutag, 19, engine="scalable", map_parts=part_mapper(str(tmp_path), mutag, 4, "pascal", 0, 4000))
    err = capsys.readouterr().err
    assert "exact pairs of these graphs from an earlier run" in err and ", 0 computed now" in err
    c = tmd_coreset(mutag, 19, engine="scalable")
    for x in (a, b):
        assert np.array_equal(x.medoids, c.medoids) and np.array_equal(x.distance, c.distance)
        assert x.pairs_computed == c.pairs_computed and x.info == c.info


def test_pair_store_reads_only_the_pairs_of_its_own_graphs(mutag, tmp_path, capsys):
    """The pair cache is sharded by part: a pool reads none of another pool's pairs, and reports what it reused."""
    from tasks.coreset import part_mapper
    from tmdlib.select.scalable.cache import PairStore

    first, other = mutag.take(np.arange(100)), mutag.take(np.arange(100, 188))
    tmd_coreset(first, 10, engine="scalable", map_parts=part_mapper(str(tmp_path), first, 4, "pascal", 0, 4000))
    assert len(list((tmp_path / "pairs").iterdir())) == 1
    capsys.readouterr()
    b = tmd_coreset(other, 9, engine="scalable", map_parts=part_mapper(str(tmp_path), other, 4, "pascal", 0, 4000))
    err = capsys.readouterr().err
    assert "from an earlier run" not in err  # nothing of the first pool was read
    assert re.search(rf"{b.pairs_computed} exact pairs used: 0 read from the cache \(0 stored\), [1-9]\d* computed now",
                     err)
    assert len(list((tmp_path / "pairs").iterdir())) == 2
    from tmdlib.select.scalable.cache import part_hashes
    from tmdlib.distance import resolve_weights

    store = PairStore(tmp_path, part_hashes(first), 4, resolve_weights(4, "pascal"))
    assert store.loaded > 0 and store.reused == 0
    again = PairStore(tmp_path, part_hashes(first)[::-1], 4, resolve_weights(4, "pascal"))
    assert again.shard == store.shard  # the part's graphs, not their order, name the shard
    # a chunk of the older flat layout is reported, not read
    (tmp_path / "pairs" / "0123.npz").write_bytes(b"")
    c = tmd_coreset(other, 9, engine="scalable", map_parts=part_mapper(str(tmp_path), other, 4, "pascal", 0, 4000))
    err = capsys.readouterr().err
    assert "1 pair chunks of an older cache layout" in err
    assert f"{c.pairs_computed} read from the cache" in err and np.array_equal(c.medoids, b.medoids)


def test_a_long_search_shows_each_phase_with_an_eta(mutag):
    """Status lines come while exact pairs are computed (the phase, its progress, an ETA, the budget), and showing
    them (batches sent in slices) changes nothing in the result."""
    lines = []
    spec = plan_parts(mutag, 19, part_size=4000)[1][0]
    quiet = solve_part(spec)
    heard = solve_part(spec, progress=lines.append)
    assert np.array_equal(quiet.medoids, heard.medoids) and np.array_equal(quiet.distance, heard.distance)
    assert quiet.pairs_computed == heard.pairs_computed
    # every=0: a line after every slice of exact pairs
    lines.clear()
    from tmdlib.select.scalable import LowerBound as LB, refine_kmedoids

    from tmdlib.distance._engine import PairEngine

    # small slices: several status lines inside one batch, and the same bits as whole batches
    cache = PairCache(PairEngine(mutag), len(mutag), progress=lines.append, every=0.0,
                      size=np.diff(mutag.node_ptr), slice_cost=2000.0)
    res = refine_kmedoids(LB.of(mutag), cache, 19, max_pairs=2000, progress=lines.append)
    silent = refine_kmedoids(LB.of(mutag), PairCache(PairEngine(mutag), len(mutag), size=np.diff(mutag.node_ptr),
                                                     slice_cost=2000.0), 19, max_pairs=2000)
    assert np.array_equal(res.medoids, silent.medoids) and np.array_equal(res.distance, silent.distance)
    # other slices group pairs otherwise inside the engine (block or per pair): the same values to rounding
    whole = refine_kmedoids(LB.of(mutag), PairCache(PairEngine(mutag), len(mutag)), 19, max_pairs=2000)
    assert np.array_equal(res.medoids, whole.medoids) and np.allclose(res.distance, whole.distance, rtol=1e-12)
    nearest = [s for s in lines if s.startswith("nearest two medoids of every graph")]
    assert nearest and all("ETA" in s and "exact pairs (" in s for s in nearest)
    assert any("budget" in s and "/2000" in s for s in nearest)
    # the phase's "at most" counts no pair past the budget (2000 < 188 * 19: no medoid pivots, one phase)
    import re
    totals = [int(re.search(r": (\d+)/(\d+) \(", s).group(2)) for s in nearest]
    assert totals and max(totals) <= 2000
    rounds = [s for s in lines if s.startswith("swap round 1")]
    assert rounds and all("(candidates):" in s for s in rounds)
    assert res.pairs_computed == cache.computed


def test_a_long_run_of_parts_hands_freed_heap_pages_back(mutag, tmp_path, monkeypatch):
    """Every ``TRIM_EVERY`` parts done, the client returns the C heap's free pages (glibc ``malloc_trim``): the
    parts' payloads and results are freed in other threads' arenas, and the resident memory grew with the parts
    without it (measured; the Python heap stayed flat)."""
    import sys as _sys

    import tasks.coreset as tc

    assert tc.release_freed_memory() is _sys.platform.startswith("linux")  # glibc here; nothing elsewhere
    calls = []
    monkeypatch.setattr(tc, "release_freed_memory", lambda: calls.append(1))
    monkeypatch.setattr(tc, "TRIM_EVERY", 1)
    mapper = tc.part_mapper(str(tmp_path), mutag, 4, "pascal", 0, 60, submit=lambda spec: _Done(solve_part(spec)))
    res = tmd_coreset(mutag, 19, engine="scalable", part_size=60, map_parts=mapper)
    assert len(calls) == res.info["parts"] >= 3


def test_part_mapper_several_parts_cached(mutag, tmp_path, capsys):
    from tasks.coreset import part_mapper
    from tmdlib._runtime import on_disk
    from tmdlib.select.scalable.cache import part_hashes

    calls = []

    def submit(spec):
        calls.append(spec.k)
        return _Done(solve_part(spec))

    opts = {"engine": "scalable", "part_size": 100}
    a = tmd_coreset(mutag, 19, map_parts=part_mapper(str(tmp_path), mutag, 4, "pascal", 0, 100, submit=submit), **opts)
    assert len(calls) == 2 and len(list((tmp_path / "parts").glob("*.npz"))) == 2
    capsys.readouterr()
    b = tmd_coreset(mutag, 19, map_parts=part_mapper(str(tmp_path), mutag, 4, "pascal", 0, 100, submit=submit), **opts)
    assert len(calls) == 2  # every part read from the cache, and the rerun says so
    assert "coreset parts: 2/2 (100.0%)" in capsys.readouterr().err and np.array_equal(a.medoids, b.medoids)
    spilled = on_disk(np.array(part_hashes(mutag), dtype="S64"), tmp_path / "scratch")  # the select flow's hashes
    assert isinstance(spilled, np.memmap) and not spilled.flags.writeable and not any((tmp_path / "scratch").iterdir())
    e = tmd_coreset(mutag, 19, map_parts=part_mapper(str(tmp_path), mutag, 4, "pascal", 0, 100, submit=submit,
                                                    hashes=spilled), **opts)
    assert len(calls) == 2 and np.array_equal(e.medoids, b.medoids)  # the same keys from the file's bytes
    every = np.array(part_hashes(mutag), dtype="S64")
    picked = np.array([5, 0, 187, 5, 42])
    gathered = on_disk(every, tmp_path / "scratch", picked, chunk=2)  # gathered a chunk at a time into the file
    assert np.array_equal(gathered, every[picked]) and not any((tmp_path / "scratch").iterdir())
    c = tmd_coreset(mutag, 19, **opts)
    for x in (a, b):
        assert np.array_equal(x.medoids, c.medoids) and np.array_equal(x.distance, c.distance)
        assert x.pairs_computed == c.pairs_computed and x.info == c.info
    # no cache dir: plain submits
    d = tmd_coreset(mutag, 19, map_parts=part_mapper(None, mutag, 4, "pascal", 0, 100, submit=submit), **opts)
    assert len(calls) == 4 and np.array_equal(d.medoids, c.medoids)


def test_parts_go_to_the_runner_a_few_per_task_run(mutag, tmp_path, monkeypatch, capsys):
    """Many parts are dealt to the flow's task runner a few per task run (Prefect's bookkeeping per task run was
    ~10 % of a molecule part's CPU); every part is still cached and counted as its task run finishes."""
    from prefect import flow

    from tasks.coreset import part_mapper
    from tmdlib.select.scalable.cache import MAX_PARTS_PER_TASK, MIN_TASK_RUNS, parts_per_task

    assert parts_per_task(2 * MIN_TASK_RUNS - 1) == 1 and parts_per_task(2 * MIN_TASK_RUNS) == 2
    assert parts_per_task(10**6) == MAX_PARTS_PER_TASK >= 2 and parts_per_task(0) == 1
    opts = {"engine": "scalable", "part_size": 20}
    ref = tmd_coreset(mutag, 19, **opts)
    monkeypatch.setenv("TMDSUB_PARTS_PER_TASK", "3")
    assert parts_per_task(5) == 3

    @flow
    def select():
        return tmd_coreset(mutag, 19, map_parts=part_mapper(str(tmp_path), mutag, 4, "pascal", 0, 20), **opts)

    got = select()
    err = capsys.readouterr().err
    parts = ref.info["parts"]
    assert parts == 16 and f"coreset parts: {parts} to solve, 3 per task run" in err
    assert f"coreset parts: {parts}/{parts} (100.0%)" in err and len(list((tmp_path / "parts").glob("*.npz"))) == parts
    assert np.array_equal(got.medoids, ref.medoids) and np.array_equal(got.distance, ref.distance)
    assert got.pairs_computed == ref.pairs_computed


def test_part_mapper_refuses_parts_planned_with_other_parameters(mutag, tmp_path):
    from tasks.coreset import part_mapper

    mapper = part_mapper(str(tmp_path), mutag, 4, "pascal", 0, 100)
    with pytest.raises(ValueError, match="this mapper was made for"):
        tmd_coreset(mutag, 19, engine="scalable", seed=1, part_size=100, map_parts=mapper)
    assert not (tmp_path / "parts").exists()


def test_slices_keep_the_engines_groups_and_bound_the_cost():
    """A batch is cut into slices of bounded cost that cover it once: a group of pairs sharing a graph (the engine's
    block) is cut only when costlier than a slice, and then in pieces that are still blocks (>= min_group pairs);
    pairs of smaller groups (computed one by one) come last, together; the same batch, the same slices."""
    size = np.array([10.0] * 9 + [100.0, 10.0])
    cache = PairCache(lambda i, j: np.zeros(i.size), 11, size=size, slice_cost=450.0)
    i = np.r_[np.arange(9), 0, 1, 2]
    j = np.r_[np.full(9, 9), 10, 10, 10]  # j has fewer distinct graphs: a block of graph 9 (9 pairs), 3 pairs of 10
    pieces = cache.slices(i, j)
    assert np.array_equal(np.sort(np.concatenate(pieces)), np.arange(i.size))
    assert all(len(set(j[p].tolist())) == 1 for p in pieces)
    blocks = [p for p in pieces if j[p[0]] == 9]
    assert len(blocks) == 2 and all(p.size >= 4 for p in blocks)  # 9,000 > 450: cut, but each piece a block
    assert set(pieces[-1].tolist()) == {9, 10, 11}  # the one-by-one pairs, last and together
    again = cache.slices(i, j)
    assert len(again) == len(pieces) and all(np.array_equal(a, b) for a, b in zip(pieces, again))
    small = PairCache(lambda i, j: np.zeros(i.size), 11, size=size, slice_cost=1e9)
    assert len(small.slices(i, j)) == 1  # a cheap batch stays whole


# ---------------------------------------------------------------------------------------------- a pool on disk

def test_a_pool_read_from_its_store_gives_the_same_coreset(tmp_path, monkeypatch):
    """The scalable engine on a StoredGraphs pool (chunks, parts grouped in a scratch file) returns exactly what it
    returns on the pool in memory; the embedding that partitions it is the same row for row; the pipeline's mapper
    keeps at most ``in_flight`` parts submitted; the scratch file is removed."""
    import pyarrow.parquet as pq

    from helpers import RAW
    from tasks.coreset import part_mapper
    from tmdlib.datasets import read_tu, to_dataset
    from tmdlib.datasets import StoredGraphs
    from tmdlib.distance._lower import structure_embedding
    from tmdlib.select.scalable import pool_embedding

    table = read_tu(RAW / "NCI1", "NCI1").slice(0, 900)
    path = tmp_path / "nci.parquet"
    pq.write_table(table, path, row_group_size=200)
    rows = np.arange(0, 900, 3) + 1
    mem = to_dataset(table).take(rows)
    disk = StoredGraphs(path, chunk_rows=128).subset(rows)
    assert np.array_equal(pool_embedding(disk), structure_embedding(mem))
    scratch = tmp_path / "scratch"
    opts = {"part_size": 80, "max_pairs": "auto"}
    a = scalable_coreset(mem, 12, **opts)
    b = scalable_coreset(disk, 12, scratch_dir=scratch, **opts)
    assert a.info.parts >= 4
    for f in ("medoids", "assignment", "distance"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert a.pairs_computed == b.pairs_computed and not any(scratch.iterdir())

    outstanding, peak = [], [0]

    class _Later:  # a future that finishes when the mapper waits for it
        _final_state = True

        def __init__(self, spec):
            outstanding.append(self)
            peak[0] = max(peak[0], len(outstanding))
            self.value = solve_part(spec)

        def result(self):
            if self in outstanding:
                outstanding.remove(self)
            return self.value

    mapper = part_mapper(str(tmp_path / "cache"), disk, 4, "pascal", 0, 80, submit=_Later)
    monkeypatch.setenv("TMDSUB_PARTS_IN_FLIGHT", "2")
    c = tmd_coreset(disk, 12, engine="scalable", map_parts=mapper, scratch_dir=scratch, **opts)
    assert peak[0] == 2 and np.array_equal(c.medoids, a.medoids) and np.array_equal(c.distance, a.distance)


def test_parts_are_submitted_without_the_parent_tasks_parameters():
    """Prefect ships the serialized context (a task's own parameters included) with every task a process or Dask
    runner runs: parts submitted from the select task must not carry the pool it was given."""
    from prefect import flow, task
    from prefect.context import serialize_context

    from tasks.coreset import outside_parent_task

    @task(persist_result=False)
    def parent(big):
        inside = serialize_context()["task_run_context"]
        with outside_parent_task():
            outside = serialize_context()["task_run_context"]
        return "big" in str(inside.get("parameters", {})), outside

    @flow
    def run():
        return parent(["big"] * 3)

    had, outside = run()
    assert had and outside == {}


def test_part_size_chosen_from_the_pool(mutag):
    """``part_size="auto"``: 4000 up to 10⁵ graphs, 1000 above; the choice is what the plan and the info use."""
    from tmdlib.select._certificate import engine_memory_bytes
    from tmdlib.select.scalable import (AUTO_PART_SWITCH, auto_part_size, partition, pool_embedding,
                                        resolve_part_size)

    assert auto_part_size(1) == auto_part_size(AUTO_PART_SWITCH) == 4000
    assert auto_part_size(AUTO_PART_SWITCH + 1) == auto_part_size(10**7) == 1000
    assert resolve_part_size("auto", 5) == resolve_part_size(None, 5) == 4000
    assert resolve_part_size("auto", 200_000) == 1000
    assert resolve_part_size(50, 10**6) == resolve_part_size("50", 10**6) == 50
    for bad in (1, 0, -3, 2.5, "many", True):
        with pytest.raises(ValueError, match="part_size"):
            resolve_part_size(bad, 100)
    parts, plan = plan_parts(mutag, 10)  # 188 graphs: one part
    assert len(parts) == 1 and parts[0].size == len(mutag)
    res = scalable_coreset(mutag, 10)
    assert res.info.part_size == 4000 and res.info.parts == 1
    # an explicit size still splits, and the auto choice equals passing the chosen number
    assert len(plan_parts(mutag, 10, part_size=60)[0]) == len(partition(pool_embedding(mutag), 60))
    a = engine_memory_bytes("scalable", np.full(300_000, 20), 3000, 7, 7)
    assert a == engine_memory_bytes("scalable", np.full(300_000, 20), 3000, 7, 7, part_size=1000)


def test_pair_cache_dense_and_dict_stores_compute_the_same_pairs(mutag, mutag_D, monkeypatch):
    """A part's cache (a dense matrix) and a pool's (a dict) ask ``exact`` for the same new pairs, in the same
    order and batches, and answer every lookup alike: repeats, both orders of a pair, ``i == j``."""
    import tmdlib.select.scalable._pairs as S

    n = len(mutag)
    rng = np.random.default_rng(3)
    batches = [rng.integers(0, n, size=(2, s)) for s in (50, 200, 7, 400)]
    batches.append(np.stack([batches[1][1], batches[1][0]]))  # the same pairs, other way round: all cached
    runs = {}
    for name, limit in (("dense", n), ("dict", n - 1)):
        monkeypatch.setattr(S, "DENSE_CACHE_MAX", limit)
        asked = []

        def exact(i, j):
            asked.append((i.copy(), j.copy()))
            return mutag_D[i, j]

        cache = PairCache(exact, n)
        assert (cache._dense is not None) == (name == "dense")
        got = [cache.get(i, j) for i, j in batches]
        for (i, j), v in zip(batches, got):
            assert np.array_equal(v, mutag_D[i, j])
        runs[name] = (asked, got, cache.computed, cache.keys())
    (a1, g1, c1, k1), (a2, g2, c2, k2) = runs["dense"], runs["dict"]
    assert c1 == c2 == k1.size and np.array_equal(k1, k2) and len(a1) == len(a2) == 4
    for (i1, j1), (i2, j2) in zip(a1, a2):
        assert np.array_equal(i1, i2) and np.array_equal(j1, j2)


def test_pair_store_first_run_of_distinct_graphs_keeps_every_pair(mutag, tmp_path, capsys, monkeypatch):
    """Graphs of distinct contents and an empty store (a part's first run): every pair the search computes is
    written, in chunks of ``TMDSUB_PAIR_FLUSH`` pairs, and a second run reads them all and computes none."""
    from tasks.coreset import part_mapper
    from tmdlib.select.scalable.cache import PairStore, part_hashes
    from tmdlib.distance import resolve_weights

    _, first = np.unique(part_hashes(mutag), return_index=True)
    pool = mutag.take(np.sort(first))
    assert len(set(part_hashes(pool))) == len(pool) < len(mutag)
    monkeypatch.setenv("TMDSUB_PAIR_FLUSH", "100")
    a = tmd_coreset(pool, 12, engine="scalable", map_parts=part_mapper(str(tmp_path), pool, 4, "pascal", 0, 4000))
    err = capsys.readouterr().err
    assert f"{a.pairs_computed} exact pairs used: 0 read from the cache (0 stored), {a.pairs_computed} computed now" in err
    store = PairStore(tmp_path, part_hashes(pool), 4, resolve_weights(4, "pascal"))
    chunks = len(list(store.dir.glob("*.npz")))  # each of at least 100 pairs but the last
    assert store.loaded == a.pairs_computed and 1 < chunks <= a.pairs_computed // 100 + 1
    b = tmd_coreset(pool, 12, engine="scalable", map_parts=part_mapper(str(tmp_path), pool, 4, "pascal", 0, 4000))
    err = capsys.readouterr().err
    assert f"{a.pairs_computed} read from the cache" in err and ", 0 computed now" in err
    assert np.array_equal(a.medoids, b.medoids) and np.array_equal(a.distance, b.distance)


def test_swap_gain_with_an_unknown_second_medoid():
    """Under a pair budget a graph's second-nearest medoid may be unknown (d2 = inf); a candidate closer than it caps
    the graph's cost of losing its medoid, and the change stays finite (it was inf - inf = NaN: every such swap was
    rejected)."""
    from tmdlib.select.scalable import _swap_gain

    n1 = np.array([0, 0, 1])
    d1 = np.array([1.0, 2.0, 1.0])
    d2 = np.array([np.inf, 5.0, 3.0])
    aff = np.array([0, 1, 2])
    dx = np.array([1.5, 1.0, 10.0])  # graph 1 moves to x (-1); graph 0 would lose medoid 0 at 0.5, graph 2 medoid 1 at 2
    with np.errstate(invalid="raise"):
        change, slot = _swap_gain(aff, dx, n1, d1, d2, np.zeros(0, np.int64), 2)
    assert (change, slot) == (-0.5, 0)
    # a medoid whose member has no other known medoid and no closer x cannot be removed
    change, slot = _swap_gain(np.array([1, 2]), np.array([1.0, 10.0]), n1, d1, d2, np.zeros(0, np.int64), 2)
    assert slot == 1 and change == -1.0 + 2.0


def test_large_pools_try_fewer_swap_candidates(mutag, mutag_D, tmp_path):
    """Past ``AUTO_PART_SWITCH`` graphs the parts try ``PER_CLUSTER_LARGE`` candidates per cluster and round; the
    option reaches the search, keys the part cache, and a part searched either way is exactly certified."""
    from tmdlib.select.scalable.cache import PartCache
    from tmdlib.select.scalable import (AUTO_PART_SWITCH, PER_CLUSTER_LARGE, auto_per_cluster, plan_parts,
                                        solve_part)

    assert auto_per_cluster(AUTO_PART_SWITCH) is None and auto_per_cluster(10**7) == PER_CLUSTER_LARGE == 2
    _, plan = plan_parts(mutag, 12)
    assert plan.stub(0).per_cluster is None  # a small pool keeps the fuller search
    spec = plan[0]
    wide, narrow = solve_part(spec), solve_part(dataclasses.replace(spec, per_cluster=1))
    assert narrow.stats.tried <= wide.stats.tried
    for r in (wide, narrow):  # every assignment exact: the distances are the true TMDs to the medoids
        np.testing.assert_allclose(r.distance, mutag_D[np.arange(len(mutag)), r.assignment], rtol=1e-9)
    cache = PartCache(tmp_path, ["h"] * len(mutag), {"depth": 4})
    assert cache.path(spec) != cache.path(dataclasses.replace(spec, per_cluster=2))
