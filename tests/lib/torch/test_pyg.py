"""The one-call PyG API (tmdlib.torch.pyg.select_coreset / subsample_nodes): units.  Equality with the CLI and the
shipped example: pipeline/test_pyg_cli.py."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.datasets import FakeDataset
from torch_geometric.loader import DataLoader

from tmdlib import tmd_matrix
from tmdlib.select import kmedoids_coreset, verify_certificate
from tmdlib.torch.pyg import select_coreset, subsample_nodes, to_graph_dataset

torch.set_num_threads(1)


def fake(n: int = 30, seed: int = 0, **kw) -> FakeDataset:
    torch.manual_seed(seed)
    args = {"num_graphs": n, "avg_num_nodes": 10, "avg_degree": 3, "num_channels": 3, "num_classes": 2, **kw}
    return FakeDataset(**args)


# ----------------------------------------------------------------------------------------------
# units
# ----------------------------------------------------------------------------------------------
def test_coreset_is_the_kmedoids_of_the_tmd_matrix_with_its_certificate():
    ds = fake(25)
    c = select_coreset(ds, fraction=0.2, seed=3)
    gd = to_graph_dataset(ds)
    D = tmd_matrix(gd, 4, "pascal")
    ref = kmedoids_coreset(D, 5, seed=3)
    assert c.indices.tolist() == ref.medoids.tolist()
    assert c.weights.tolist() == ref.tau.astype(float).tolist() and float(c.weights.sum()) == len(ds)
    # epsilon: the exact TMD of every graph to its medoid, summed; epsilon_mean = epsilon / n (Lemma 3.2's f_TMD)
    assert c.epsilon == pytest.approx(float(D[np.arange(25), c.assignment.numpy()].sum()), rel=1e-12)
    assert c.epsilon == pytest.approx(float(D[:, ref.medoids].min(axis=1).sum()), rel=1e-12)
    assert c.epsilon_mean == pytest.approx(c.epsilon / 25) and c.n == 25 and c.k == 5
    verify_certificate(gd, c.certificate)


def test_labels_are_never_read_and_lists_work_like_datasets():
    ds = fake(20)
    base = select_coreset(ds, count=4)
    graphs = []
    for i in range(len(ds)):
        g = ds[i].clone()
        g.y = torch.tensor([float((i * 7) % 3)])  # other labels
        graphs.append(g)
    assert select_coreset(graphs, count=4).indices.tolist() == base.indices.tolist()
    no_y = [Data(x=ds[i].x, edge_index=ds[i].edge_index) for i in range(len(ds))]
    same = select_coreset(no_y, count=4)
    assert same.indices.tolist() == base.indices.tolist() and same.epsilon == base.epsilon


def test_subset_is_a_weighted_pyg_dataset_ready_for_a_tau_weighted_loss():
    ds = fake(24)
    c = select_coreset(ds, fraction=0.25)
    sub = c.subset()
    assert len(sub) == c.k and sub.positions.tolist() == c.indices.tolist()
    assert sub.num_features == ds.num_features
    for g, pos, tau in zip(sub, c.indices.tolist(), c.weights.tolist()):
        assert torch.equal(g.x, ds[pos].x) and torch.equal(g.edge_index, ds[pos].edge_index)
        assert torch.equal(g.y, ds[pos].y) and g.weight.tolist() == [tau]
    batch = next(iter(DataLoader(sub, batch_size=len(sub))))
    assert batch.weight.shape == (c.k,) and float(batch.weight.sum()) == len(ds)
    # a tau-weighted sum over the coreset equals the sum over all graphs when the loss is constant per cluster
    per_graph = torch.arange(len(ds), dtype=torch.float64)
    cluster_value = per_graph[c.assignment]  # each graph takes its medoid's value
    assert float((per_graph[c.indices] * c.weights).sum()) == pytest.approx(float(cluster_value.sum()))


def test_graphs_without_features_get_a_constant_one():
    ds = fake(15)
    bare = [Data(edge_index=ds[i].edge_index, num_nodes=ds[i].num_nodes) for i in range(len(ds))]
    c = select_coreset(bare, count=3)
    assert c.constant_feature and c.k == 3 and float(c.weights.sum()) == 15
    gd = to_graph_dataset(bare)
    assert gd.num_features == 1 and np.all(gd.x == 1.0)
    with_ones = [Data(x=torch.ones(g.num_nodes, 1), edge_index=g.edge_index) for g in bare]
    assert select_coreset(with_ones, count=3).indices.tolist() == c.indices.tolist()
    mixed = [bare[0], with_ones[1]]
    with pytest.raises(ValueError, match="every graph x, or none"):
        select_coreset(mixed, count=1)


def test_edges_are_made_simple_and_undirected():
    x = torch.eye(3)
    one_way = Data(x=x, edge_index=torch.tensor([[0, 1, 1], [1, 2, 1]]))  # one direction, a self-loop
    both = Data(x=x, edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]))
    a, b = to_graph_dataset([one_way]), to_graph_dataset([both])
    assert a.src.tolist() == b.src.tolist() == [0, 1, 1, 2] and a.dst.tolist() == b.dst.tolist() == [1, 0, 2, 1]


def test_bad_input_is_a_clear_error():
    ds = fake(4)
    with pytest.raises(TypeError, match="not one Data"):
        select_coreset(ds[0], count=1)
    with pytest.raises(ValueError, match="exactly one of"):
        select_coreset(ds)
    with pytest.raises(ValueError, match="widths differ"):
        select_coreset([Data(x=torch.ones(2, 1), edge_index=torch.zeros(2, 0, dtype=torch.long)),
                        Data(x=torch.ones(2, 2), edge_index=torch.zeros(2, 0, dtype=torch.long))], count=1)
    with pytest.raises(ValueError, match="NaN"):
        select_coreset([Data(x=torch.tensor([[float("nan")]]), edge_index=torch.zeros(2, 0, dtype=torch.long))],
                       count=1)
    with pytest.raises(ValueError, match="outside"):
        select_coreset([Data(x=torch.ones(2, 1), edge_index=torch.tensor([[0], [5]]))], count=1)


def test_node_subsampling_keeps_a_fraction_and_reports_epsilon():
    from tmdlib import subsample_nodes as lib_subsample

    ds = fake(12)
    ns = subsample_nodes(ds, 0.5)
    ref = lib_subsample(to_graph_dataset(ds), 0.5)
    assert ns.epsilon.tolist() == ref.epsilon.tolist() and ns.epsilon_mean == pytest.approx(ref.mean_epsilon)
    subs = ns.subset()
    for g, kept, sub in zip(ds, ns.nodes, subs):
        assert len(kept) == int(np.ceil(0.5 * g.num_nodes)) and sub.num_nodes == len(kept)
        assert torch.equal(sub.x, g.x[kept]) and torch.equal(sub.y, g.y)
