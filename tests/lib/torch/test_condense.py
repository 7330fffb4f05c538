"""Condensation baselines (DosCond, KiDD): exact properties of their parts and each method end to end on tiny data."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch

from tmdlib import Graph, GraphDataset
from tmdlib.torch.condense import condense
from tmdlib.torch.condense._common import (class_budget, dense_from_graphs, dense_gin_forward, discrete_structure,
                                          relaxed_structure)
from tmdlib.torch.condense._doscond import group_loss, matching_distance
from tmdlib.torch.condense._kidd import dense_side, krr_predict, lite_gntk, orthogonality, sparse_side
from tmdlib.torch.gin import GIN
from tmdlib.torch.pyg import dataset_to_pyg


@pytest.fixture(autouse=True)
def one_torch_thread():
    """One intra-op thread: tiny tensors on a loaded machine run ~100x slower with more."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def random_graph(rng, n, d, feature=None, p=0.4):
    """Connected-ish random simple graph: a path plus random chords; one-hot features."""
    edges = {(i, i + 1) for i in range(n - 1)}
    edges |= {(i, j) for i in range(n) for j in range(i + 2, n) if rng.random() < p / 2}
    ei = np.array([[u for u, v in edges] + [v for u, v in edges], [v for u, v in edges] + [u for u, v in edges]])
    cols = rng.integers(0, d, n) if feature is None else np.full(n, feature)
    return Graph(np.eye(d)[cols], ei.reshape(2, -1))


def tiny(n_graphs=24, d=3, seed=0, same_size=None):
    rng = np.random.default_rng(seed)
    gs = [random_graph(rng, same_size or int(rng.integers(5, 10)), d) for _ in range(n_graphs)]
    y = (np.arange(n_graphs) % 3 == 0).astype(float)  # 8 positives, 16 negatives
    return GraphDataset.from_graphs(gs, y=y)


# ----------------------------------------------------------------------------------------------
# Shared parts
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pool", ["add", "mean"])
def test_dense_forward_equals_sparse_gin_on_discrete_graphs(pool):
    ds = tiny(6, same_size=7)
    torch.manual_seed(0)
    model = GIN(ds.num_features, 16, 3, 1, pool)
    X, A = dense_from_graphs(ds, np.arange(len(ds)), 7)
    b = Batch.from_data_list(dataset_to_pyg(ds))
    sparse = model(b.x, b.edge_index, b.batch, b.num_graphs)
    assert torch.allclose(dense_gin_forward(model, X, A), sparse, atol=1e-5)


def test_dense_from_graphs_truncates_and_pads():
    g = Graph(np.eye(3)[[0, 1, 2, 0]], np.array([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]]))  # path 0-1-2-3
    ds = GraphDataset.from_graphs([g])
    X, A = dense_from_graphs(ds, np.array([0]), 3)  # truncated: induced path 0-1-2
    assert A[0].tolist() == [[0, 1, 0], [1, 0, 1], [0, 1, 0]] and X[0].tolist() == np.eye(3).tolist()
    X, A = dense_from_graphs(ds, np.array([0]), 6)  # padded: two zero rows, no edges
    assert X[0, 4:].abs().sum() == 0 and A[0, 4:].abs().sum() == 0 and A[0].sum() == 6


def test_structure_relaxation_and_discretisation():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 6, 6) * 3
    soft = relaxed_structure(logits, 0.5, gen)
    assert torch.allclose(soft, soft.transpose(1, 2)) and soft.diagonal(dim1=1, dim2=2).abs().max() == 0
    assert soft.min() >= 0 and soft.max() <= 1
    hard = discrete_structure(logits)
    sym = (logits + logits.transpose(1, 2)) / 2
    assert torch.equal(hard, ((sym > 0).float() * (1 - torch.eye(6))))
    # with confident logits and a low temperature the relaxed sample is the discrete graph
    sure = 20.0 * (2 * hard - 1)
    assert torch.allclose(relaxed_structure(sure, 0.01, gen), hard * 1.0, atol=1e-6)


def test_class_budget_by_hand():
    y = np.array([0] * 70 + [1] * 30)
    # proportional: the smaller class gets floor(30 * 10 / 100) = 3, the larger the rest
    assert class_budget(y, 10, "proportional") == {0: 7, 1: 3}
    assert class_budget(y, 3, "proportional") == {0: 2, 1: 1}  # max(1, floor(0.9)) = 1
    # balanced: k // 2 each, the remainder to the larger class
    assert class_budget(y, 7, "balanced") == {0: 4, 1: 3}
    # fewer graphs than classes: the larger class first
    assert class_budget(y, 1, "proportional") == class_budget(y, 1, "balanced") == {0: 1, 1: 0}
    with pytest.raises(ValueError):
        class_budget(np.array([0] * 9 + [1]), 6, "balanced")  # class 1 has 1 graph, needs 3


# ----------------------------------------------------------------------------------------------
# DosCond: one-step gradient matching
# ----------------------------------------------------------------------------------------------
def _grads(model, loss):
    return torch.autograd.grad(loss, list(model.parameters()), create_graph=True)


@pytest.mark.parametrize("target", [1, None])
def test_doscond_matching_is_zero_when_synthetic_set_is_the_real_batch(target):
    ds = tiny(8, same_size=6)
    torch.manual_seed(1)
    model = GIN(ds.num_features, 16, 3)
    b = Batch.from_data_list(dataset_to_pyg(ds))
    g_real = [g.detach() for g in _grads(model, group_loss(model(b.x, b.edge_index, b.batch, b.num_graphs), target))]
    X, A = dense_from_graphs(ds, np.arange(len(ds)), 6)
    g_syn = _grads(model, group_loss(dense_gin_forward(model, X, A), target))
    assert float(matching_distance(g_syn, g_real).detach()) < 1e-10
    # and positive for another synthetic set
    g_other = _grads(model, group_loss(dense_gin_forward(model, X[:3] * 0.5, A[:3]), target))
    assert float(matching_distance(g_other, g_real).detach()) > 1e-3


def test_doscond_label_free_loss_is_bce_without_its_label_term():
    z = torch.tensor([-2.0, 0.0, 3.0])
    bce0 = torch.nn.functional.binary_cross_entropy_with_logits(z, torch.zeros(3))
    assert torch.allclose(group_loss(z, None), bce0)  # softplus(z) - y z with the y z term dropped
    assert torch.allclose(group_loss(z, 1), bce0 - z.mean())


def test_doscond_matching_loss_decreases_under_its_own_optimisation():
    ds = tiny(12, same_size=6)
    torch.manual_seed(2)
    model = GIN(ds.num_features, 16, 3)
    b = Batch.from_data_list(dataset_to_pyg(ds))
    g_real = [g.detach() for g in _grads(model, group_loss(model(b.x, b.edge_index, b.batch, b.num_graphs), 1))]
    X, A = dense_from_graphs(ds, np.arange(3), 6)
    X = (X * 0 + 0.3).requires_grad_(True)
    opt = torch.optim.Adam([X], lr=0.05)
    losses = []
    for _ in range(150):
        loss = matching_distance(_grads(model, group_loss(dense_gin_forward(model, X, A), 1)), g_real)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.2 * losses[0]


# ----------------------------------------------------------------------------------------------
# KiDD: LiteGNTK and kernel ridge regression
# ----------------------------------------------------------------------------------------------
def _explicit_lite_gntk(x1, a1, x2, a2, layers):
    """LiteGNTK by its definition: aggregate, one ReLU NTK layer, (layers - 1) propagations of Theta, sum."""
    h1, h2 = (np.eye(len(a1)) + a1) @ x1, (np.eye(len(a2)) + a2) @ x2
    s = h1 @ h2.T
    nn_ = np.linalg.norm(h1, axis=1)[:, None] * np.linalg.norm(h2, axis=1)[None, :]
    rho = np.clip(s / np.where(nn_ > 0, nn_, 1), -1 + 1e-6, 1 - 1e-6)
    theta = s * (math.pi - np.arccos(rho)) / math.pi + nn_ * (rho * (math.pi - np.arccos(rho)) +
                                                             np.sqrt(1 - rho ** 2)) / math.pi
    for _ in range(layers - 1):
        theta = (np.eye(len(a1)) + a1) @ theta @ (np.eye(len(a2)) + a2).T
    return theta.sum()


def test_lite_gntk_equals_its_explicit_propagation_dense_and_sparse():
    ds = tiny(5, d=4)
    N = int(ds.nodes_per_graph.max())
    X, A = dense_from_graphs(ds, np.arange(5), N)
    Xd, Ad = X.double(), A.double()
    K = lite_gntk(dense_side(Xd, Ad, 3), 5, dense_side(Xd, Ad, 3), 5).numpy()
    ref = np.array([[_explicit_lite_gntk(Xd[i].numpy(), Ad[i].numpy(), Xd[j].numpy(), Ad[j].numpy(), 3)
                     for j in range(5)] for i in range(5)])
    assert np.allclose(K, ref, rtol=1e-9)
    assert np.allclose(K, K.T) and np.linalg.eigvalsh(K).min() > -1e-8 * np.abs(K).max()
    b = Batch.from_data_list(dataset_to_pyg(ds, dtype=torch.float64))
    Ks = lite_gntk(sparse_side(b.x, b.edge_index, b.batch, 3), 5, dense_side(Xd, Ad, 3), 5).numpy()
    assert np.allclose(Ks, ref, rtol=1e-9)  # zero padding changes nothing


def test_kidd_krr_separates_two_well_separated_classes():
    rng = np.random.default_rng(3)
    gs = [random_graph(rng, int(rng.integers(5, 9)), 2, feature=c) for c in (0, 1) for _ in range(10)]
    y = np.array([0] * 10 + [1] * 10)
    ds = GraphDataset.from_graphs(gs)
    b = Batch.from_data_list(dataset_to_pyg(ds, dtype=torch.float64))
    support = np.array([0, 10])  # one graph per class
    X, A = dense_from_graphs(ds, support, 8)
    s_side = dense_side(X.double(), A.double(), 3)
    K_ss = lite_gntk(s_side, 2, s_side, 2)
    K_ts = lite_gntk(sparse_side(b.x, b.edge_index, b.batch, 3), 20, s_side, 2)
    pred = krr_predict(K_ts, K_ss, torch.eye(2, dtype=torch.float64), 1e-6)
    assert pred.argmax(1).tolist() == y.tolist()
    # the support itself is fitted (nearly interpolated)
    assert torch.allclose(pred[support], torch.eye(2, dtype=torch.float64), atol=1e-4)
    # orthogonality regulariser: 0 for an orthogonal Gram matrix, positive otherwise
    assert float(orthogonality(torch.diag(torch.tensor([2.0, 5.0], dtype=torch.float64)))) < 1e-12
    assert float(orthogonality(K_ss)) > 0


# ----------------------------------------------------------------------------------------------
# Each method end to end
# ----------------------------------------------------------------------------------------------
FAST = {"steps": 4, "batch_real": 8, "anneal_steps": 4}


@pytest.mark.parametrize("method", ["doscond", "kidd"])
@pytest.mark.parametrize("labelled", [True, False])
def test_method_end_to_end_shapes_budget_determinism(method, labelled):
    ds = tiny(24)
    y = ds.y if labelled else None
    k = 5
    gin = {"hidden": 8, "layers": 3, "pool": "add", "eta": 1.0, "bias": False, "lr": 0.01, "epochs": 3}
    res = condense(method, ds, k, labels=y, seed=7, gin=gin, **FAST)
    mult = 1.0 if method == "doscond" else 2.0
    N = int(round(mult * ds.nodes_per_graph.mean()))
    assert len(res.graphs) == k == len(res.source) and len(set(res.source.tolist())) == k
    assert res.num_nodes == N and res.uses_labels is labelled and res.seconds >= 0 and len(res.losses) == 4
    for g in res.graphs:
        assert g.x.shape == (N, ds.num_features) and torch.isfinite(g.x).all()
        ei = g.edge_index
        assert ei.shape[0] == 2 and (ei[0] != ei[1]).all() and (ei.numel() == 0 or int(ei.max()) < N)
        assert sorted(map(tuple, ei.T.tolist())) == sorted(map(tuple, ei.flip(0).T.tolist()))  # symmetric
        assert float(g.weight) == 1.0
        assert ("y" in g) is labelled and (g.y is not None) is labelled
        Graph(g.x.numpy(), ei.numpy())  # a valid simple graph
    if labelled:
        classes = [int(g.y) for g in res.graphs]
        scheme = "proportional" if method == "doscond" else "balanced"
        want = class_budget(ds.y.astype(int), k, scheme)
        assert {c: classes.count(c) for c in want} == want
        assert all(ds.y[s] == c for s, c in zip(res.source, classes))  # class-dependent initialisation
    again = condense(method, ds, k, labels=y, seed=7, gin=gin, **FAST)
    assert np.array_equal(again.source, res.source)
    for a, b in zip(again.graphs, res.graphs):
        assert torch.equal(a.x, b.x) and torch.equal(a.edge_index, b.edge_index)
    other = condense(method, ds, k, labels=y, seed=8, gin=gin, **FAST)
    assert not np.array_equal(other.source, res.source) or any(
        not torch.equal(a.x, b.x) for a, b in zip(other.graphs, res.graphs))


@pytest.mark.parametrize("method", ["doscond-nolabel", "kidd-nolabel"])
def test_label_free_variant_never_reads_labels(method):
    from tmdlib.experiment.protocol import condense_graphs

    ds = tiny(30)
    y = ds.y.copy()
    perm = np.random.default_rng(0).permutation(y)
    train = np.arange(3, 30)
    gin = {"hidden": 8, "layers": 3, "pool": "add", "eta": 1.0, "bias": False}
    opts = {"steps": 3, "batch_real": 8}
    d1, k1, _, v1 = condense_graphs(ds, y, train, method, 0.2, 5, gin, opts)
    ds_perm = GraphDataset.from_graphs(list(ds), y=perm)  # a different ds.y as well
    d2, k2, _, v2 = condense_graphs(ds_perm, perm, train, method, 0.2, 5, gin, opts)
    assert k1 == k2 == math.ceil(0.2 * len(train)) == len(d1) and v1 is None and v2 is None
    for a, b in zip(d1, d2):
        assert torch.equal(a.x, b.x) and torch.equal(a.edge_index, b.edge_index)
    # labels attached afterwards: those of the source graphs, one per synthetic graph
    base = method.removesuffix("-nolabel")
    src = condense(base, ds.take(train), k1, labels=None, seed=5, gin=gin, **opts).source
    assert [float(g.y) for g in d1] == y[train[src]].tolist()
    assert [float(g.y) for g in d2] == perm[train[src]].tolist()


def test_labelled_variant_holds_out_a_validation_set():
    from tmdlib.experiment.protocol import condense_graphs, validation_split

    ds = tiny(40)
    train = np.arange(40)
    rest, val = validation_split(train, 3)
    assert len(val) == 5 and len(np.intersect1d(rest, val)) == 0 and len(rest) + len(val) == 40
    data, k, seconds, v = condense_graphs(ds, ds.y, train, "kidd", 0.1, 3, {}, {"steps": 2, "batch_real": 8})
    assert np.array_equal(v, val) and k == 4 == len(data) and seconds >= 0
    with pytest.raises(Exception):
        condense_graphs(ds, ds.y, train, "kidd-typo", 0.1, 3, {})


def test_bad_budget_and_labels_are_refused():
    ds = tiny(10)
    with pytest.raises(ValueError):
        condense("kidd", ds, 0)
    with pytest.raises(ValueError):
        condense("doscond", ds, 11)
    with pytest.raises(ValueError):
        condense("doscond", ds, 3, labels=np.full(10, 0.5))
    with pytest.raises(ValueError):
        condense("kidd", ds, 3, steps=1, not_an_option=1)
    with pytest.raises(ValueError):
        condense("mirage", ds, 3)


# ----------------------------------------------------------------------------------------------
# Experiment integration: one cell, the grid options, the results file, the reports
# ----------------------------------------------------------------------------------------------
def test_run_cell_with_condensation_methods(mutag):
    from tmdlib.experiment import COLUMNS, protocol

    opts = {"doscond": {"steps": 2, "batch_real": 16}, "kidd": {"steps": 2, "batch_real": 16}}
    for method in ("doscond", "kidd-nolabel"):
        rows = protocol.run_cell({"dataset": "MUTAG", "kind": "graph", "method": method, "arch": "gin", "trial": 1,
                                  "epochs": 2, "fractions": [0.05, 0.1], "condense_options": opts}, mutag, {})
        assert [r["k"] for r in rows] == [8, 15] and all(set(COLUMNS) <= set(r) for r in rows)
        assert all(math.isnan(r["epsilon"]) and r["select_seconds"] > 0 and 0 <= r["value"] <= 1 for r in rows)


def test_grid_methods_option_and_needed_matrices():
    from tmdlib.experiment._grid import resolve_profile
    from tmdlib import InputError
    from tmdlib.experiment import needed_matrices

    p = resolve_profile("quick", methods="doscond,kidd-nolabel,random,rw")
    assert p["graph_methods"] == ["doscond", "kidd-nolabel", "random"] and p["node_methods"] == ["random", "rw"]
    assert needed_matrices(p) == ("tmd",)  # Random's ε column reads TMD
    assert needed_matrices(resolve_profile("quick", methods="doscond,kidd")) == ()
    assert needed_matrices(resolve_profile("quick")) == ("tmd", "feature", "wl")
    assert needed_matrices(resolve_profile("quick", kinds="node")) == ()
    with pytest.raises(InputError, match="--methods"):
        resolve_profile("quick", methods="doscond,mirage")


def test_old_results_file_without_select_seconds_reads_as_nan(tmp_path):
    from tmdlib.experiment import read_results, rows_to_csv

    old = ("dataset,kind,method,fraction,trial,arch,epochs,metric,value,k,n_train,n_test,epsilon,final_loss,"
           "train_seconds\nMUTAG,graph,tmd,0.05,0,gin,50,accuracy,0.7,8,150,38,1.5,0.3,2.0\n")
    path = tmp_path / "MUTAG.csv"
    path.write_text(old)
    rows = read_results(str(path))
    assert len(rows) == 1 and math.isnan(rows[0]["select_seconds"]) and rows[0]["value"] == 0.7
    assert rows_to_csv(rows).splitlines()[0].endswith(",train_seconds,select_seconds")


def test_reports_show_condensation_rows_beside_the_papers():
    from tmdlib.reporting import tables
    from tmdlib.reporting.paper import dataset_report, paper_method, read_paper, summary_markdown

    assert paper_method("doscond", "with") == "doscond" and paper_method("kidd", "without") == "kidd-nolabel"
    assert paper_method("tmd", "without") == "tmd"
    from helpers import ROOT
    paper = read_paper(str(ROOT / "reports" / "paper_results.csv"))
    mutag = paper[("MUTAG", "graph", "gin")]
    assert {"tmd", "doscond", "kidd", "doscond-nolabel", "kidd-nolabel"} <= set(mutag)
    assert mutag["kidd"][0.06] == (0.75, 0.10) and mutag["kidd-nolabel"][0.04] == (0.44, 0.17)  # the LaTeX
    rows = []
    for m, base in (("tmd", 0.7), ("random", 0.6), ("doscond", 0.9), ("kidd-nolabel", 0.4)):
        for t in range(3):
            for f in (0.01, 0.02):
                rows.append({"dataset": "MUTAG", "kind": "graph", "method": m, "fraction": f, "trial": t,
                             "arch": "gin", "epochs": 50, "metric": "accuracy", "value": base + 0.01 * t,
                             "epsilon": float("nan") if m in ("doscond", "kidd-nolabel") else 1.0,
                             "select_seconds": 0.5 if m == "tmd" else 2.0})
    text, summ, _ = dataset_report("MUTAG", rows, paper, {"tmd": 12.5})
    doscond = next(ln for ln in text.splitlines() if ln.startswith("| DosCond (labels) |"))
    assert "**" not in doscond and "| – | 0 |" in doscond  # best mean, but unranked: no mark, W "–"
    tmd = next(ln for ln in text.splitlines() if ln.startswith("| TMD |"))
    assert "**0.71±0.02**" in tmd and "| 2 | 0 |" in tmd
    assert "*DosCond (labels) (paper)*" in text and "*KiDD (no labels) (paper)*" in text
    assert "Selection cost" in text and "TMD 12.5 s" in text
    assert summ[0]["ours"]["doscond"] == ("–", 0) and summ[0]["ours"]["kidd-nolabel"] == (0, 2)
    md = summary_markdown(summ, "full")
    assert "| DosCond (labels) | –/0" in md and "tmd 12.5 s" in md
    assert tables.METHOD_LABELS["kidd-nolabel"] == "KiDD (no labels)"
