"""Node subsampling (tmdlib.select.nodes): candidates, Theorem 4.2 selection, dataset-level API."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from tmdlib import Graph, GraphDataset, tree_norm
from tmdlib.select import feature_distance_matrix
from tmdlib.select.nodes import (WINNER_NAMES, bfs_subset, combined_subsample, core_numbers, graph_seeds,
                          induced_subdataset, kcore_subset, node_budgets, node_candidates, random_walk_subset,
                          select_nodes, subsample_nodes)


def make_graph(n, edges, x=None):
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2).T
    ei = np.concatenate([e, e[::-1]], axis=1) if e.size else np.zeros((2, 0), np.int64)
    return Graph(np.ones((n, 1)) if x is None else np.asarray(x, float), ei)


def random_graph(rng, n, p, d=3, isolated=0):
    iu = np.triu_indices(n, 1)
    keep = rng.random(iu[0].size) < p
    edges = np.stack([iu[0][keep], iu[1][keep]], 1)
    return make_graph(n + isolated, edges, rng.normal(size=(n + isolated, d)))


def tn(g, nodes):
    return tree_norm(g.subgraph(nodes))


TRIANGLE_TAIL = make_graph(6, [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 5)])
STAR = make_graph(6, [(0, i) for i in range(1, 6)])  # centre 0, leaves 1..5


def test_node_budgets():
    assert node_budgets([0, 1, 9, 10, 30], fraction=0.1).tolist() == [0, 1, 1, 1, 3]
    assert node_budgets([0, 2, 9], count=4).tolist() == [0, 2, 4]
    with pytest.raises(ValueError):
        node_budgets([3], fraction=0.0)


def test_triangle_with_tail_known_answer():
    # unit features, L = 4, pascal weights [1/3, 1, 3]: coefficients c = [1, 3, 3, 1].
    # Triangle: every node has 2 neighbours inside, z_l = 2^l -> TN = 3 * (1 + 3*2 + 3*4 + 8) = 81.
    nodes, eps = select_nodes(TRIANGLE_TAIL, k=3)
    assert nodes.tolist() == [0, 1, 2]
    assert tn(TRIANGLE_TAIL, nodes) == pytest.approx(81.0)
    assert eps == pytest.approx(tree_norm(TRIANGLE_TAIL) - 81.0)
    assert select_nodes(TRIANGLE_TAIL, fraction=0.5)[0].tolist() == [0, 1, 2]


def test_heavy_feature_decides():
    # path 0-1-2-3 with feature norms 1, 1, 1, 10 and k = 2: best is the edge {2, 3}
    g = make_graph(4, [(0, 1), (1, 2), (2, 3)], x=[[1.0], [1.0], [1.0], [10.0]])
    nodes, eps = select_nodes(g, k=2)
    assert nodes.tolist() == [2, 3]
    assert tn(g, nodes) == pytest.approx(11 * (1 + 3 + 3 + 1))
    assert eps == pytest.approx(tree_norm(g) - 88.0)


def test_epsilon_is_tmd_to_subgraph():
    """Lemma 4.5 (T = S) / Theorem 4.2 against the exact TMD engine: eps = TN(G) - TN(G[S]) = TMD(G, G[S])."""
    tmd_mod = pytest.importorskip("tmdlib.distance._engine")
    rng = np.random.default_rng(0)
    for trial in range(4):
        g = random_graph(rng, 7, 0.35, d=2, isolated=trial % 2)
        for method in ("tmd", "random", "rw", "kcore"):
            nodes, eps = select_nodes(g, k=3, method=method, seed=trial)
            assert eps == pytest.approx(tmd_mod.tmd(g, g.subgraph(nodes)), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("bfs_mode", ["fill", "paper"])
def test_selection_is_best_candidate(bfs_mode):
    """The kernel's choice equals the brute-force argmax of tree_norm over node_candidates()."""
    rng = np.random.default_rng(1)
    for trial in range(6):
        g = random_graph(rng, 14, 0.2, isolated=2 if trial % 3 == 0 else 0)
        for k in (1, 3, 6):
            cands = node_candidates(g, k, seed=trial, bfs_mode=bfs_mode, graph_id=7)
            norms = [tn(g, s) for s in cands.all()]
            best = int(np.argmax(norms))
            nodes, eps = select_nodes(g, k=k, seed=trial, bfs_mode=bfs_mode, graph_id=7)
            assert np.isclose(tn(g, nodes), norms[best], rtol=1e-12)
            assert eps == pytest.approx(tree_norm(g) - norms[best], rel=1e-9, abs=1e-9)
            # every candidate respects the budget; fill/rw/kcore use it exactly
            assert all(len(s) <= k for s in cands.all())
            if bfs_mode == "fill":
                assert all(len(s) == k for s in cands.all())
            # single-candidate baselines pick exactly that candidate
            assert np.array_equal(select_nodes(g, k=k, method="rw", seed=trial, graph_id=7)[0], cands.rw)
            assert np.array_equal(select_nodes(g, k=k, method="kcore")[0], cands.kcore)


def test_bfs_paper_mode_on_star_returns_fewer_than_k():
    assert bfs_subset(STAR, 0, 4, "paper").tolist() == [0]  # ball of radius 1 has 6 > 4 nodes
    assert bfs_subset(STAR, 3, 4, "paper").tolist() == [0, 3]  # leaf, centre; the other leaves overflow
    assert bfs_subset(STAR, 0, 4, "fill").tolist() == [0, 1, 2, 3]  # next level in id order
    assert bfs_subset(STAR, 5, 4, "fill").tolist() == [0, 1, 2, 5]
    assert bfs_subset(STAR, 0, 6, "paper").tolist() == list(range(6))
    # paper-mode selection keeps fewer nodes and is never better than fill
    nodes_p, eps_p = select_nodes(STAR, k=4, bfs_mode="paper")
    nodes_f, eps_f = select_nodes(STAR, k=4, bfs_mode="fill")
    assert len(nodes_f) == 4 and eps_f <= eps_p


def test_fill_dominates_paper():
    """Claim behind the default: fill(v) contains paper(v), so TN(G[fill(v)]) >= TN(G[paper(v)])."""
    rng = np.random.default_rng(2)
    for trial in range(5):
        g = random_graph(rng, 16, 0.15, isolated=trial % 2)
        for k in (2, 5, 9):
            for v in range(g.num_nodes):
                p, f = bfs_subset(g, v, k, "paper"), bfs_subset(g, v, k, "fill")
                assert set(p) <= set(f) and len(f) == k
                assert tn(g, f) >= tn(g, p) - 1e-9
            assert select_nodes(g, k=k, bfs_mode="fill")[1] <= select_nodes(g, k=k, bfs_mode="paper")[1] + 1e-9


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 4), st.floats(0.0, 3.0))
def test_tree_norm_monotone_under_adding_nodes(seed, depth, w):
    """All terms of Algorithm 1 are non-negative, so S subset of S' implies TN(G[S]) <= TN(G[S'])."""
    rng = np.random.default_rng(seed)
    g = random_graph(rng, 10, 0.3)
    big = np.flatnonzero(rng.random(10) < 0.7)
    small = big[rng.random(big.size) < 0.5]
    assert tree_norm(g.subgraph(small), depth, w) <= tree_norm(g.subgraph(big), depth, w) + 1e-9


def test_bfs_paper_definition_levels():
    """Paper definition: all nodes at distance <= l_k, the deepest level with ball size <= k."""
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(3)
    g = random_graph(rng, 15, 0.2)
    gx = nx.Graph(list(map(tuple, g.edge_index.T)))
    gx.add_nodes_from(range(g.num_nodes))
    for v in range(g.num_nodes):
        dist = nx.single_source_shortest_path_length(gx, v)
        for k in (1, 4, 8):
            levels = sorted(set(dist.values()))
            lk = max(l for l in levels if sum(1 for d in dist.values() if d <= l) <= k)
            expect = sorted(u for u, d in dist.items() if d <= lk)
            assert bfs_subset(g, v, k, "paper").tolist() == expect


def test_disconnected_and_isolated():
    # two triangles {0,1,2}, {3,4,5} and isolated nodes 6, 7
    g = make_graph(8, [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)])
    assert bfs_subset(g, 4, 5, "paper").tolist() == [3, 4, 5]
    assert bfs_subset(g, 4, 5, "fill").tolist() == [0, 1, 3, 4, 5]  # continue from the smallest unvisited id
    assert bfs_subset(g, 7, 3, "fill").tolist() == [0, 1, 7]
    assert bfs_subset(g, 7, 3, "paper").tolist() == [7]
    for seed in range(5):
        rw = random_walk_subset(g, 7, seed=seed)
        assert len(set(rw)) == 7
    nodes, eps = select_nodes(g, k=6)
    assert nodes.tolist() == [0, 1, 2, 3, 4, 5] and eps == pytest.approx(2.0)  # only the isolated nodes' |f| lost
    iso = make_graph(3, [])
    for method in ("tmd", "random", "rw", "kcore"):
        nodes, eps = select_nodes(iso, k=2, method=method)
        assert len(nodes) == 2 and eps == pytest.approx(1.0)


def test_small_and_empty_graphs():
    g = make_graph(3, [(0, 1)])
    nodes, eps = select_nodes(g, k=3)
    assert nodes.tolist() == [0, 1, 2] and eps == 0.0
    assert select_nodes(g, fraction=1.0)[1] == 0.0
    empty = Graph.empty(1)
    nodes, eps = select_nodes(empty, fraction=0.5)
    assert nodes.size == 0 and eps == 0.0
    assert select_nodes(make_graph(1, []), fraction=0.1)[0].tolist() == [0]
    with pytest.raises(ValueError):
        select_nodes(g)
    with pytest.raises(ValueError):
        select_nodes(g, k=1, method="bogus")
    with pytest.raises(ValueError):
        select_nodes(g, k=1, bfs_mode="bogus")


def test_random_walk_subset_is_connected_and_seeded():
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(4)
    # a long path is hard for a walk with restarts (far nodes are rarely reached); the stall rule
    # (jump to an unvisited neighbour of the visited set) keeps it progressing and connected
    path = [(i, i + 1) for i in range(59)]
    g = make_graph(60, path)
    for seed in range(3):
        s = random_walk_subset(g, 40, seed=seed)
        assert len(s) == 40 and np.all(np.diff(s) == 1)  # connected on a path = consecutive ids
    assert random_walk_subset(g, 60, seed=0).tolist() == list(range(60))
    g = random_graph(rng, 30, 0.2)
    gx = nx.Graph(list(map(tuple, g.edge_index.T)))
    assert nx.is_connected(gx)
    for seed in range(5):
        s = random_walk_subset(g, 12, seed=seed)
        assert nx.is_connected(gx.subgraph(s.tolist()))
    assert np.array_equal(random_walk_subset(g, 12, seed=1), random_walk_subset(g, 12, seed=1))
    assert not all(np.array_equal(random_walk_subset(g, 12, seed=0), random_walk_subset(g, 12, seed=s))
                   for s in range(1, 6))


def test_core_numbers_match_networkx():
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(5)
    for trial in range(5):
        g = random_graph(rng, 25, 0.2, isolated=2)
        gx = nx.Graph(list(map(tuple, g.edge_index.T)))
        gx.add_nodes_from(range(g.num_nodes))
        ref = nx.core_number(gx)
        assert core_numbers(g).tolist() == [ref[v] for v in range(g.num_nodes)]


def test_kcore_subset_order():
    assert core_numbers(TRIANGLE_TAIL).tolist() == [2, 2, 2, 1, 1, 1]
    # core 2 first, then degree (3 and 4 have degree 2, 5 has 1), then id
    assert kcore_subset(TRIANGLE_TAIL, 4).tolist() == [0, 1, 2, 3]
    assert kcore_subset(TRIANGLE_TAIL, 5).tolist() == [0, 1, 2, 3, 4]


def small_dataset(rng, sizes=(9, 0, 1, 12, 6, 15), ids=None):
    graphs = [random_graph(rng, n, 0.3) if n else Graph.empty(3) for n in sizes]
    return GraphDataset.from_graphs(graphs, graph_ids=ids if ids is not None else 100 + np.arange(len(graphs)))


@pytest.mark.parametrize("method", ["tmd", "random", "rw", "kcore"])
def test_dataset_level_matches_per_graph(method):
    rng = np.random.default_rng(6)
    ds = small_dataset(rng)
    res = subsample_nodes(ds, 0.4, method, seed=11)
    assert res.mask.sum() == res.k.sum()
    for g in range(len(ds)):
        a, b = ds.node_ptr[g], ds.node_ptr[g + 1]
        nodes, eps = select_nodes(ds[g], fraction=0.4, method=method, seed=11, graph_id=int(ds.graph_ids[g]))
        assert np.array_equal(np.flatnonzero(res.mask[a:b]), nodes)
        assert res.epsilon[g] == pytest.approx(eps)
        assert res.tree_norm[g] == pytest.approx(tree_norm(ds[g]))
    assert res.winner[1] == -1 and res.winner[2] == 0  # empty graph, single node kept whole
    assert set(WINNER_NAMES[w] for w in res.winner) <= set(WINNER_NAMES.values())
    # a graph's selection does not depend on the other graphs (seeded by graph id)
    sub = subsample_nodes(ds.take([5, 3]), 0.4, method, seed=11)
    for new, old in ((0, 5), (1, 3)):
        assert np.array_equal(sub.mask[sub_slice(ds.take([5, 3]), new)], res.mask[sub_slice(ds, old)])
    again = subsample_nodes(ds, 0.4, method, seed=11)
    assert np.array_equal(again.mask, res.mask)


def sub_slice(ds, g):
    return slice(int(ds.node_ptr[g]), int(ds.node_ptr[g + 1]))


def test_graph_seeds_stable():
    s = graph_seeds(0, [1, 2, 3])
    assert np.array_equal(s, graph_seeds(0, [1, 2, 3])) and len(set(s)) == 3
    assert not np.array_equal(s, graph_seeds(1, [1, 2, 3]))
    assert s.min() >= 0 and s.max() < 2**32


def test_induced_subdataset_matches_subgraph():
    rng = np.random.default_rng(7)
    ds = small_dataset(rng)
    res = subsample_nodes(ds, 0.5, "tmd")
    sub = induced_subdataset(ds, res.mask)
    assert len(sub) == len(ds) and np.array_equal(sub.graph_ids, ds.graph_ids)
    assert np.array_equal(sub.nodes_per_graph, res.k)
    for g in range(len(ds)):
        ref = ds[g].subgraph(np.flatnonzero(res.mask[sub_slice(ds, g)]))
        got = sub[g]
        assert np.array_equal(got.x, ref.x)
        assert np.array_equal(got.indptr, ref.indptr) and np.array_equal(got.indices, ref.indices)
        assert tree_norm(got) == pytest.approx(res.kept_tree_norm[g])
    with pytest.raises(ValueError):
        induced_subdataset(ds, res.mask[:-1])


def test_paper_mode_on_mutag(mutag):
    fill = subsample_nodes(mutag, 0.3, "tmd", bfs_mode="fill")
    paper = subsample_nodes(mutag, 0.3, "tmd", bfs_mode="paper")
    assert np.all(fill.epsilon <= paper.epsilon + 1e-9)
    assert paper.mask.sum() <= fill.mask.sum() == fill.k.sum()
    rand = subsample_nodes(mutag, 0.3, "random")
    assert fill.mean_epsilon <= rand.mean_epsilon


@pytest.mark.parametrize("order", ["nodes-first", "graphs-first"])
def test_combined_subsample(order):
    rng = np.random.default_rng(8)
    ds = small_dataset(rng, sizes=(9, 7, 12, 6, 15, 8, 10, 5), ids=np.arange(8))
    res = combined_subsample(ds, feature_distance_matrix, k=3, node_fraction=0.5, order=order, seed=2)
    cs = res.coreset
    assert len(res.dataset) == 3 and np.array_equal(res.dataset.graph_ids, ds.graph_ids[cs.medoids])
    assert cs.tau.sum() == len(ds)
    full_nodes = subsample_nodes(ds, 0.5, seed=2)
    for j, g in enumerate(cs.medoids):  # the training graphs are the node-subsampled medoids
        ref = ds[g].subgraph(np.flatnonzero(full_nodes.mask[sub_slice(ds, g)]))
        assert np.array_equal(res.dataset[j].x, ref.x) and np.array_equal(res.dataset[j].indices, ref.indices)
    if order == "nodes-first":
        assert res.epsilon_nodes == pytest.approx(full_nodes.mean_epsilon)
        sub = induced_subdataset(ds, full_nodes.mask)
        assert res.epsilon_graphs == pytest.approx(feature_distance_matrix(sub)[:, cs.medoids].min(1).mean())
    else:
        assert res.epsilon_nodes == pytest.approx((cs.tau * full_nodes.epsilon[cs.medoids]).sum() / len(ds))
        assert res.epsilon_graphs == pytest.approx(feature_distance_matrix(ds)[:, cs.medoids].min(1).mean())
    assert res.epsilon_total == pytest.approx(res.epsilon_graphs + res.epsilon_nodes)
    with pytest.raises(ValueError):
        combined_subsample(ds, feature_distance_matrix, 3, 0.5, order="sideways")


def test_combined_bound_with_tmd():
    """With D = TMD, every original graph is within eps_i + D'(i, a(i)) of its training graph."""
    tmd_mod = pytest.importorskip("tmdlib.distance._engine")
    rng = np.random.default_rng(9)
    ds = small_dataset(rng, sizes=(6, 5, 7, 4, 6, 5), ids=np.arange(6))
    res = combined_subsample(ds, lambda d: tmd_mod.tmd_matrix(d), k=2, node_fraction=0.5, order="nodes-first")
    sub = induced_subdataset(ds, res.nodes.mask)
    pos = {int(m): j for j, m in enumerate(res.coreset.medoids)}
    total = 0.0
    for i in range(len(ds)):
        a = int(res.coreset.assignment[i])
        d = tmd_mod.tmd(ds[i], res.dataset[pos[a]])
        assert d <= res.nodes.epsilon[i] + tmd_mod.tmd(sub[i], sub[a]) + 1e-9
        total += d
    assert total / len(ds) <= res.epsilon_total + 1e-9


@pytest.mark.parametrize("depth,weights", [(1, "pascal"), (2, "pascal"), (3, 0.5), (5, "pascal"), (6, [0.2, 1, 2, 0.5, 3])])
def test_kernel_tree_norms_any_depth(depth, weights):
    """The compiled tree norms (P/Q split of 1^T A^l x) agree with tree_norm at every depth."""
    rng = np.random.default_rng(10)
    ds = small_dataset(rng)
    res = subsample_nodes(ds, 0.5, "tmd", depth=depth, weights=weights)
    for g in range(len(ds)):
        assert res.tree_norm[g] == pytest.approx(tree_norm(ds[g], depth, weights), rel=1e-12)
        kept = ds[g].subgraph(np.flatnonzero(res.mask[sub_slice(ds, g)]))
        assert res.kept_tree_norm[g] == pytest.approx(tree_norm(kept, depth, weights), rel=1e-12)
        cands = node_candidates(ds[g], int(res.k[g]), seed=0, graph_id=int(ds.graph_ids[g])).all()
        if ds[g].num_nodes > res.k[g]:
            best = max(tree_norm(ds[g].subgraph(c), depth, weights) for c in cands)
            assert res.kept_tree_norm[g] == pytest.approx(best, rel=1e-12)
