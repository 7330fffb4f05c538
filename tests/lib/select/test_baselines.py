"""Graph-subsampling baselines (tmdlib.select._baselines): random, feature medoids, WL kernel."""
from __future__ import annotations

import numpy as np
import pytest

from tmdlib import Graph, GraphDataset
from tmdlib.select import feature_distance_matrix, random_selection, wl_distance_matrix
from tmdlib.select._baselines import initial_node_labels, mean_features, wl_feature_matrix, wl_kernel_matrix, wl_labels
from tmdlib.select import kmedoids_coreset


def make_graph(n, edges, x=None):
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2).T
    ei = np.concatenate([e, e[::-1]], axis=1) if e.size else np.zeros((2, 0), np.int64)
    return Graph(np.ones((n, 1)) if x is None else np.asarray(x, float), ei)


TRIANGLE = make_graph(3, [(0, 1), (1, 2), (2, 0)])
PATH3 = make_graph(3, [(0, 1), (1, 2)])


def test_random_selection():
    a = random_selection(50, 7, seed=3)
    assert a.tolist() == sorted(set(a.tolist())) and a.size == 7 and a.min() >= 0 and a.max() < 50
    assert np.array_equal(a, random_selection(50, 7, seed=3))
    assert not np.array_equal(a, random_selection(50, 7, seed=4))
    assert random_selection(4, 4).tolist() == [0, 1, 2, 3]
    for k in (0, 51):
        with pytest.raises(ValueError):
            random_selection(50, k)


def test_feature_distance_by_hand():
    ds = GraphDataset.from_graphs([
        make_graph(2, [(0, 1)], x=[[1.0, 0.0], [0.0, 1.0]]),  # mean (0.5, 0.5)
        make_graph(1, [], x=[[1.0, 0.0]]),  # mean (1, 0)
        Graph.empty(2),  # mean (0, 0)
        make_graph(3, [(0, 1)], x=[[3.0, 0.0], [0.0, 0.0], [0.0, 0.0]]),  # mean (1, 0)
    ])
    assert np.allclose(mean_features(ds), [[0.5, 0.5], [1, 0], [0, 0], [1, 0]])
    d = feature_distance_matrix(ds)
    s = np.sqrt(0.5)
    assert np.allclose(d, [[0, s, s, s], [s, 0, 1, 0], [s, 1, 0, 1], [s, 0, 1, 0]])
    assert np.array_equal(d, d.T) and np.all(np.diagonal(d) == 0)
    res = kmedoids_coreset(d, 2)
    assert res.epsilon == pytest.approx(min(d[:, [i, j]].min(1).mean() for i in range(4) for j in range(i + 1, 4)))


def test_wl_kernel_by_hand():
    # h = 1, all labels equal.  Triangle: 3 x a, then 3 x (a,{a,a}).  Path: 3 x a, then 2 x (a,{a}), 1 x (a,{a,a}).
    # k(T,T) = 9 + 9 = 18, k(P,P) = 9 + 4 + 1 = 14, k(T,P) = 9 + 3 = 12.
    ds = GraphDataset.from_graphs([TRIANGLE, PATH3])
    k = wl_kernel_matrix(ds, 1, normalize=False)
    assert np.allclose(k, [[18, 12], [12, 14]])
    kn = wl_kernel_matrix(ds, 1)
    assert np.allclose(kn, [[1, 12 / np.sqrt(18 * 14)], [12 / np.sqrt(18 * 14), 1]])
    d = wl_distance_matrix(ds, 1)
    assert d[0, 1] == pytest.approx(np.sqrt(2 - 2 * 12 / np.sqrt(18 * 14)))
    assert wl_distance_matrix(ds, 0)[0, 1] == pytest.approx(0.0)  # same label histogram
    assert wl_feature_matrix(ds, 1).shape == (2, 3)  # labels: a | (a,{a,a}), (a,{a})


def test_wl_labels_use_exact_feature_rows():
    g = make_graph(4, [(0, 1), (2, 3)], x=[[0, 1.0], [1.0, 0], [0, 1.0], [1.0, 0]])
    h = make_graph(2, [(0, 1)], x=[[0.0, 1.0], [1.0, 1e-9]])  # differs from g by 1e-9 -> new label
    ds = GraphDataset.from_graphs([g, h])
    lab0 = initial_node_labels(ds)
    assert lab0[0] == lab0[2] == lab0[4] and lab0[1] == lab0[3] != lab0[5]
    labs = wl_labels(ds, 2)
    assert len(labs) == 3 and labs[1][0] == labs[1][2] and labs[1][4] != labs[1][0]


def test_wl_empty_and_isolated():
    ds = GraphDataset.from_graphs([TRIANGLE, Graph.empty(1), Graph.empty(1), make_graph(2, [])])
    d = wl_distance_matrix(ds, 2)
    assert d[1, 2] == 0 and d[0, 1] == pytest.approx(1.0) and d[3, 1] == pytest.approx(1.0)
    assert np.all(d <= np.sqrt(2) + 1e-12) and np.array_equal(d, d.T)


def test_wl_invariant_to_node_order():
    rng = np.random.default_rng(0)
    graphs, perms = [], []
    for n in (5, 7, 6):
        iu = np.triu_indices(n, 1)
        keep = rng.random(iu[0].size) < 0.4
        x = np.eye(3)[rng.integers(0, 3, n)]
        g = make_graph(n, np.stack([iu[0][keep], iu[1][keep]], 1), x)
        p = rng.permutation(n)
        inv = np.argsort(p)
        graphs.append(g)
        perms.append(Graph(g.x[p], inv[g.edge_index]))
    a = wl_distance_matrix(GraphDataset.from_graphs(graphs), 3)
    b = wl_distance_matrix(GraphDataset.from_graphs(perms), 3)
    assert np.allclose(a, b, atol=1e-12)


@pytest.mark.parametrize("h", [1, 2, 3])
def test_wl_matches_grakel_on_mutag(mutag, h):
    pytest.importorskip("grakel")
    ds = mutag.take(np.arange(40))
    ours = wl_distance_matrix(ds, h)
    ref = wl_distance_matrix(ds, h, backend="grakel")
    assert np.allclose(ours, ref, atol=1e-12)


def test_wl_matches_grakel_with_isolated_nodes():
    pytest.importorskip("grakel")
    ds = GraphDataset.from_graphs([TRIANGLE, PATH3, make_graph(4, [(0, 1)]), make_graph(5, [(0, 1), (1, 2), (3, 4)])])
    assert np.allclose(wl_distance_matrix(ds, 3), wl_distance_matrix(ds, 3, backend="grakel"), atol=1e-12)
    with pytest.raises(ValueError):
        wl_distance_matrix(ds, 3, backend="nope")
