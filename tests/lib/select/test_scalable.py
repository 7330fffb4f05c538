"""The scalable TMD coreset: lower bounds, the exact certificate, parts, pair budgets, the engine choice.  Through the CLI
(bad input, resume): pipeline/test_scalable_flows.py; on Dask workers: servers/test_scalable_servers.py."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import RAW, examples

import tmdlib
from tmdlib.datasets import load_builtin
from tmdlib.distance._lower import LowerBound
from tmdlib.select import resolve_engine, tmd_coreset, verify_certificate
from tmdlib.select._certificate import certify_medoids
from tmdlib.select import kmedoids_coreset
from tmdlib.select.scalable import (FIT_PAIRS, PairCache, _fit_sample_size, count_parts, fit_part_size, fit_proxy,
                                   part_budgets, partition, refine_kmedoids, resolve_part_size)


@pytest.fixture(scope="module")
def mutag_ds():
    return tmdlib.datasets.to_dataset(load_builtin("MUTAG", RAW))


@pytest.fixture(scope="module")
def mutag_D(mutag_ds):
    return tmdlib.tmd_matrix(mutag_ds)


# ---------------------------------------------------------------------------------------------- lower bounds

def test_lower_bound_never_exceeds_tmd_on_all_mutag_pairs(mutag_ds, mutag_D):
    lb = LowerBound.of(mutag_ds).matrix()
    iu = np.triu_indices(len(mutag_ds), 1)
    assert np.all(lb[iu] <= mutag_D[iu] * (1 + 1e-12) + 1e-9)
    assert np.allclose(np.diag(lb), 0.0)
    pos = mutag_D[iu] > 0  # MUTAG has repeated graphs (TMD 0; their bound is 0 too)
    assert np.all(lb[iu][~pos] == 0)
    ratio = lb[iu][pos] / mutag_D[iu][pos]
    assert np.median(ratio) > 0.5  # it is a useful bound, not a trivial one


def test_the_three_bounds_apart_and_the_fitted_estimate(mutag_ds):
    """components' row-wise maximum is the bound, bit for bit; matrices() gives matrix() bit for bit beside the
    fitted estimate max(0, c . [h, m, t, 1]), symmetric with a zero diagonal."""
    lb = LowerBound.of(mutag_ds)
    n = len(mutag_ds)
    i, j = np.triu_indices(n, 1)
    parts = lb.components(i, j)
    assert parts.shape == (i.size, 3) and np.all(parts >= 0)
    assert np.array_equal(parts.max(axis=1), lb.pairs(i, j))
    coef = np.array([0.7, 0.4, 0.1, -2.0])
    bound, est = lb.matrices(coef)
    assert np.array_equal(bound, lb.matrix())
    want = np.maximum(parts @ coef[:3] + coef[3], 0.0)
    assert np.allclose(est[i, j], want, rtol=1e-12, atol=1e-12)
    assert np.array_equal(est, est.T) and np.all(np.diag(est) == 0)
    assert (est[i, j] == 0).any() and (est[i, j] > 0).any()  # the clip at 0 is exercised, and not everywhere


def test_the_fitted_proxy_estimates_tmd_better_than_the_bound(mutag_ds, mutag_D):
    """fit_proxy: deterministic, rounded, its pairs computed through the cache (counted); on pairs it was not fitted
    on, its estimate is closer to TMD than the lower bound is."""
    n = len(mutag_ds)
    lb = LowerBound.of(mutag_ds)
    cache = PairCache(lambda a, b: mutag_D[a, b], n)
    coef = fit_proxy(lb, cache, 200, seed=3)
    assert coef.shape == (4,) and 0 < cache.computed <= 200
    assert np.array_equal(coef, fit_proxy(lb, PairCache(lambda a, b: mutag_D[a, b], n), 200, seed=3))
    assert all(float(f"{c:.4g}") == c for c in coef)
    assert fit_proxy(lb, cache, 0) is None
    bound, est = lb.matrices(coef)
    i, j = np.triu_indices(n, 1)
    seen = np.isin(i * n + j, cache.keys())
    err_fit = np.abs(est[i, j] - mutag_D[i, j])[~seen].mean()
    err_lb = np.abs(bound[i, j] - mutag_D[i, j])[~seen].mean()
    assert err_fit < 0.8 * err_lb


def test_fit_sample_size_follows_the_budget_and_the_part():
    assert _fit_sample_size(1000, np.inf, FIT_PAIRS) == FIT_PAIRS
    assert _fit_sample_size(1000, 2000.0, FIT_PAIRS) == 100        # 5 % of a budget
    assert _fit_sample_size(40, np.inf, FIT_PAIRS) == 40 * 39 // 16    # an eighth of the part's pairs
    assert _fit_sample_size(1000, 200.0, FIT_PAIRS) == 0           # too few to fit: the bound is the proxy
    assert _fit_sample_size(10, np.inf, FIT_PAIRS) == 0


def test_the_search_without_a_fit_starts_from_the_bound(mutag_ds, mutag_D):
    """fit_pairs=0: no sample, FasterPAM on the lower bounds; both searches end certified and close to exact."""
    n = len(mutag_ds)
    ex = kmedoids_coreset(mutag_D, 19, seed=0, restarts=5)
    for fit in (0, None):
        cache = PairCache(lambda a, b: mutag_D[a, b], n)
        res = refine_kmedoids(LowerBound.of(mutag_ds), cache, 19, fit_pairs=fit)
        if fit == 0:
            assert res.stats.fit_pairs == 0
        else:  # distinct pairs of the sample (a pair drawn twice is computed once)
            assert 0.9 * FIT_PAIRS <= res.stats.fit_pairs <= _fit_sample_size(n, np.inf, FIT_PAIRS) == FIT_PAIRS
        assert np.allclose(res.distance, mutag_D[np.arange(n), res.assignment])
        assert res.distance.sum() <= 1.10 * ex.loss


def test_a_budget_below_one_pair_per_graph_and_medoid_fits_no_proxy(mutag_ds, mutag_D):
    """Such a budget goes to the nearest medoids (DD 10 %): no pairs are spent on a fit, and the search is the one
    that starts from the bound."""
    n, k = len(mutag_ds), 19
    runs = [refine_kmedoids(LowerBound.of(mutag_ds), PairCache(lambda a, b: mutag_D[a, b], n), k, max_pairs=n * k - 1,
                            fit_pairs=fit) for fit in (None, 0)]
    assert runs[0].stats.fit_pairs == 0
    assert np.array_equal(runs[0].medoids, runs[1].medoids) and np.array_equal(runs[0].distance, runs[1].distance)
    roomy = refine_kmedoids(LowerBound.of(mutag_ds), PairCache(lambda a, b: mutag_D[a, b], n), k, max_pairs=n * k)
    assert roomy.stats.fit_pairs > 0


def test_lower_bound_on_molecules_with_wide_one_hot_features():
    ds = tmdlib.datasets.to_dataset(load_builtin("ogbg-molbace", RAW)).take(np.arange(60))
    D = tmdlib.tmd_matrix(ds)
    lb = LowerBound.of(ds).matrix()
    assert np.all(lb <= D * (1 + 1e-12) + 1e-9)


def test_the_scalable_engine_memory_estimate_is_what_it_holds():
    """Per graph: embedding, hash, ids and results; per part: its own summaries -- a 10⁷ pool fits in GB, where
    summaries of the whole pool (8 n L (F + d)) would ask for 128 GiB and refuse it."""
    from tmdlib.select._certificate import engine_memory_bytes

    n, rows, width = 8_000_000, 364, 174  # the constructed 10⁷ store's training pool at 0.1 %
    need = engine_memory_bytes("scalable", np.full(n, 21), n // 1000, width, rows)
    assert n * 236 < need < 2 * 2**30 and 8 * n * 4 * (rows + width) > 60 * need
    more = engine_memory_bytes("scalable", np.full(2 * n, 21), n // 1000, width, rows, part_size=3906)
    less = engine_memory_bytes("scalable", np.full(n, 21), n // 1000, width, rows, part_size=3906)
    assert abs(more - less - n * 236) < 2**20  # linear in n at a fixed part size (k_m differs: 2 against 4)


def test_lower_bound_ignores_feature_rows_no_graph_uses():
    """A store's table may hold rows that a part's graphs never use (a pool of 10⁷ molecules, its parts of 1,000):
    the bounds are those of the used rows, and their cost no longer grows with the unused ones."""
    from tmdlib import GraphDataset

    ds = tmdlib.datasets.to_dataset(load_builtin("ogbg-molbace", RAW)).take(np.arange(60))
    used = np.unique(ds.feature_index)
    d = ds.features.shape[1]
    extra = np.zeros((d + 20, d))  # far from every row and from each other: the bound's constants a, b stay
    extra[np.arange(d + 20), np.arange(d + 20) % d] = 10.0 + np.arange(d + 20)
    wide = GraphDataset(node_ptr=ds.node_ptr, edge_ptr=ds.edge_ptr, src=ds.src, dst=ds.dst,
                        graph_ids=ds.graph_ids, features=np.vstack([ds.features, extra]),
                        feature_index=ds.feature_index)
    assert wide.features.shape[0] > wide.features.shape[1] > used.size  # more rows than features, few used
    lb, lw = LowerBound.of(ds), LowerBound.of(wide)
    assert (lw.a, lw.b) == (lb.a, lb.b)
    assert lw.hist.shape[2] == lb.hist.shape[2] <= used.size and lw.means.shape[2] <= used.size
    np.testing.assert_array_equal(lw.hist, lb.hist)  # the histogram columns of the used rows, the same numbers
    D = tmdlib.tmd_matrix(ds)
    np.testing.assert_allclose(lw.matrix(), lb.matrix(), rtol=1e-9, atol=1e-9)
    assert np.all(lw.matrix() <= D * (1 + 1e-12) + 1e-9)


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 4), st.sampled_from(["pascal", 1.0, 0.5]), st.booleans())
def test_lower_bound_property(seed, depth, weights, continuous):
    """Random graphs, discrete or continuous features, any depth and weights: LB <= TMD."""
    rng = np.random.default_rng(seed)
    graphs = []
    for _ in range(6):
        n = int(rng.integers(0, 7))
        x = rng.normal(size=(n, 2)) if continuous else np.eye(3)[rng.integers(0, 3, n)]
        edges = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.4]
        ei = np.array([[u for u, v in edges] + [v for u, v in edges], [v for u, v in edges] + [u for u, v in edges]])
        graphs.append(tmdlib.Graph(x.reshape(n, -1) if n else np.zeros((0, 2 if continuous else 3)),
                                   ei.reshape(2, -1).astype(np.int64)))
    ds = tmdlib.GraphDataset.from_graphs(graphs)
    D = tmdlib.tmd_matrix(ds, depth, weights)
    lb = LowerBound.of(ds, depth, weights).matrix()
    assert np.all(lb <= D * (1 + 1e-9) + 1e-9)


# ---------------------------------------------------------------------------------------------- certificate

@pytest.mark.parametrize("engine", ["exact", "scalable"])
def test_certificate_is_honest_against_the_full_matrix(mutag_ds, mutag_D, engine):
    """distance, epsilon, tau and the nearest-medoid assignment agree with the full matrix."""
    cert = tmd_coreset(mutag_ds, 19, engine=engine, seed=0)
    n = len(mutag_ds)
    assert cert.engine == engine and cert.k == 19 and cert.n == n
    assert np.allclose(cert.distance, mutag_D[np.arange(n), cert.assignment], rtol=1e-9, atol=1e-12)
    assert cert.epsilon == pytest.approx(cert.distance.sum(), rel=1e-12)
    assert cert.epsilon_mean == pytest.approx(cert.epsilon / n)
    nearest = mutag_D[:, cert.medoids].min(axis=1)
    assert np.allclose(cert.distance, nearest, rtol=1e-9, atol=1e-12)  # each graph has its nearest medoid
    assert np.array_equal(cert.tau, np.bincount(np.searchsorted(cert.medoids, cert.assignment), minlength=19))
    assert cert.tau.sum() == n and np.array_equal(cert.assignment[cert.medoids], cert.medoids)
    verify_certificate(mutag_ds, cert)
    if engine == "scalable":
        assert cert.pairs_computed < n * (n - 1) // 2  # fewer exact pairs than the matrix


def test_scalable_equals_exact_where_the_search_space_is_exhausted(mutag_ds):
    """A pool small enough to solve on its full matrix gets exactly the exact engine's coreset."""
    small = mutag_ds.take(np.arange(40))
    for k in (1, 3, 8):
        a, b = tmd_coreset(small, k, engine="scalable", seed=2), tmd_coreset(small, k, engine="exact", seed=2)
        assert np.array_equal(a.medoids, b.medoids) and a.epsilon == pytest.approx(b.epsilon, rel=1e-12)


def test_scalable_is_close_to_exact_with_few_pairs(mutag_ds, mutag_D):
    n = len(mutag_ds)
    ex = kmedoids_coreset(mutag_D, 19, seed=0, restarts=5)
    cert = tmd_coreset(mutag_ds, 19, engine="scalable", seed=0)
    assert cert.epsilon <= 1.10 * ex.loss
    assert cert.pairs_computed <= 0.15 * n * n


def test_certify_medoids_of_any_selection_without_the_matrix(mutag_ds, mutag_D):
    med = [4, 40, 77, 120, 160]
    a = certify_medoids(mutag_ds, med)
    b = certify_medoids(mutag_ds, med, D=mutag_D)
    assert np.array_equal(a.assignment, b.assignment)
    assert np.allclose(a.distance, b.distance, rtol=1e-9) and a.pairs_computed < len(mutag_ds) * len(med)


def test_verify_certificate_catches_a_forged_distance(mutag_ds):
    cert = tmd_coreset(mutag_ds, 10, engine="scalable")
    forged = type(cert)(cert.medoids, cert.assignment, cert.distance * 0.9, cert.tau, cert.epsilon * 0.9,
                        cert.pairs_computed, cert.engine)
    with pytest.raises(ValueError, match="distance"):
        verify_certificate(mutag_ds, forged)


def test_labelled_graphs_stay_medoids(mutag_ds):
    fixed = np.zeros(len(mutag_ds), bool)
    fixed[[3, 90, 150]] = True
    cert = tmd_coreset(mutag_ds, 12, engine="scalable", fixed=fixed, part_size=70)
    assert set(np.flatnonzero(fixed)) <= set(cert.medoids.tolist()) and cert.k == 12
    verify_certificate(mutag_ds, cert)


def test_parts_cover_the_pool_and_budgets_sum_to_k(mutag_ds):
    from tmdlib.distance._lower import structure_embedding

    parts = partition(structure_embedding(mutag_ds), 50)
    assert all(p.size <= 50 for p in parts)
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(len(mutag_ds)))
    b = part_budgets([p.size for p in parts], 19)
    assert b.sum() == 19 and np.all(b >= 1)
    cert = tmd_coreset(mutag_ds, 19, engine="scalable", part_size=50)
    verify_certificate(mutag_ds, cert)
    assert cert.info["parts"] == len(parts)


def test_partition_holds_no_copy_of_the_embedding():
    """A group larger than one block is centred a block at a time: the 10^7 pool's first split held a centred copy."""
    import tracemalloc

    emb = np.random.default_rng(1).normal(size=(200_000, 33)).astype(np.float32)
    tracemalloc.start()
    try:
        parts = partition(emb, 1000, chunk=4096)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 0.35 * emb.nbytes  # indices and projections only (one copy would be >= 1.0)
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(emb.shape[0]))


@pytest.mark.parametrize("whole", [True, False])
def test_partition_blocks_give_the_principal_projection(whole):
    """Block by block or whole, the split is along the top principal direction of the group's rows."""
    from tmdlib.select.scalable import _principal_projection

    rng = np.random.default_rng(2)
    emb = rng.normal(size=(30_000, 6)) * [9.0, 3.0, 1.0, 1.0, 0.5, 0.1] + 50.0
    idx = np.arange(emb.shape[0]) if whole else np.sort(rng.choice(emb.shape[0], 20_000, replace=False))
    x = emb[idx] - emb[idx].mean(axis=0)
    top = np.linalg.svd(x, full_matrices=False)[2][0]
    one = _principal_projection(emb, idx, 1 << 18)
    blocks = _principal_projection(emb, idx, 1000)
    np.testing.assert_allclose(blocks, one, rtol=1e-9, atol=1e-9 * np.abs(one).max())
    np.testing.assert_allclose(np.abs(one), np.abs(x @ top), rtol=1e-6, atol=1e-6 * np.abs(one).max())


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5000), st.integers(1, 400))
def test_count_parts_is_the_partitions_count(n, m):
    emb = np.random.default_rng(n).normal(size=(n, 2))
    assert count_parts(n, m) == len(partition(emb, m))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 300))
def test_split_work_is_the_rows_the_partition_projects(n, m):
    from tmdlib.select import scalable
    from tmdlib.select.scalable import _parts as scalable_parts

    seen = []
    real = scalable_parts._principal_projection
    try:
        scalable_parts._principal_projection = lambda emb, idx, chunk: (seen.append(idx.size),
                                                                        real(emb, idx, chunk))[1]
        partition(np.random.default_rng(n).normal(size=(n, 2)), m)
    finally:
        scalable_parts._principal_projection = real
    assert scalable.split_work(n, m) == sum(seen)


def test_the_partition_and_the_plan_say_how_far_they_are(tmp_path, monkeypatch):
    """Status lines of the passes over a pool: counted, with an ETA, the last one at the end; none for a phase
    shorter than the interval."""
    import pyarrow.parquet as pq

    from tmdlib.datasets import read_tu
    from tmdlib.datasets import StoredGraphs
    from tmdlib.select.scalable import Countdown, _pairs as pairs, plan_parts

    lines = []
    parts = partition(np.random.default_rng(0).normal(size=(5000, 3)), 100, progress=lines.append)
    assert lines == []  # well under STATUS_SECONDS: quiet
    monkeypatch.setattr(pairs, "STATUS_SECONDS", 0.0)  # Countdown's module
    parts = partition(np.random.default_rng(0).normal(size=(5000, 3)), 100, progress=lines.append)
    assert len(lines) == len(parts) == 64
    assert lines[0].startswith("partition: 1/64 parts (") and "ETA" in lines[0] and "elapsed" in lines[0]
    assert lines[-1].startswith("partition: 64/64 parts (100%), ETA 0s")
    pcts = [int(ln.split("(")[1].split("%")[0]) for ln in lines]
    assert pcts == sorted(pcts) and pcts[0] > 0  # the share of the rows projected, not of the parts made

    store = tmp_path / "MUTAG.parquet"
    pq.write_table(read_tu(RAW / "MUTAG", "MUTAG"), store, row_group_size=50)
    lines.clear()
    _, plan = plan_parts(StoredGraphs(store, chunk_rows=50), 10, part_size=30, progress=lines.append)
    plan.close()
    heads = [ln.split(":")[0] for ln in lines]
    assert heads == ["structure embedding (reading the store)"] * 4 + ["partition"] * len(plan) + \
        ["grouping the graphs by part (reading the store)"] * 4
    assert lines[3].startswith("structure embedding (reading the store): 188/188 graphs (100%), ETA 0s")

    shown = []
    clock = Countdown("phase", 10, shown.append, unit="things", every=3600.0)
    clock(3)
    clock(10)
    assert shown == []  # finished before the first interval: nothing to say
    clock = Countdown("phase", 10, shown.append, every=0.0)
    clock(5, work=1, total_work=4)
    assert shown == [shown[0]] and shown[0].startswith("phase: 5/10 graphs (25%), ETA ")
    Countdown("one part", 1, shown.append, unit="parts", every=0.0)(1, work=0, total_work=0)  # nothing to split
    assert shown[-1].startswith("one part: 1/1 parts (100%), ETA 0s")


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 200_000), st.integers(2, 5000), st.integers(1, 300))
def test_fit_part_size_is_the_smallest_size_with_a_medoid_per_part(n, m, k):
    k = min(k, n)
    fit = fit_part_size(m, n, k)
    assert fit >= m and count_parts(n, fit) <= k
    assert fit == m or count_parts(n, fit - 1) > k
    assert resolve_part_size(m, n, k) == fit and resolve_part_size(m, n) == m


def test_fewer_medoids_than_parts_take_larger_parts(mutag_ds):
    # 188 graphs in parts of at most 20 would be 16 parts; k = 5 needs parts of at most 47 (4 parts)
    assert count_parts(len(mutag_ds), 20) == 16 and fit_part_size(20, len(mutag_ds), 5) == 47
    with pytest.raises(ValueError, match="every part needs one"):
        part_budgets([20] * 16, 5)
    cert = tmd_coreset(mutag_ds, 5, engine="scalable", part_size=20)
    verify_certificate(mutag_ds, cert)
    assert cert.k == 5 and cert.info["parts"] == 4 and cert.info["part_size"] == 47


def test_pair_budget_is_respected_and_the_certificate_stays_exact(mutag_ds, mutag_D):
    n = len(mutag_ds)
    lb = LowerBound.of(mutag_ds)
    cache = PairCache(lambda i, j: mutag_D[i, j], n)
    out = refine_kmedoids(lb, cache, 19, seed=0, max_pairs=600)
    # the search stops once the budget is spent; a swap tried before that may finish past it
    assert cache.computed <= 600 + n
    assert np.allclose(out.distance, mutag_D[np.arange(n), out.assignment])


def test_engine_choice():
    assert resolve_engine("auto", [20] * 200) == "exact"            # MUTAG-sized: the matrix is cheap
    assert resolve_engine("auto", [284] * 1178) == "scalable"       # DD: ~15 CPU-h of matrix
    assert resolve_engine("auto", [22] * 30000) == "scalable"       # too many graphs for a matrix
    assert resolve_engine("exact", [284] * 1178) == "exact"
    with pytest.raises(ValueError, match="engine must be one of"):
        resolve_engine("fast", [1])


# ---------------------------------------------------------------------------------------------- pipeline

