"""Training and measuring for every task type (tmdlib.torch.fit / measure), on small real data."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import RAW
from tmdlib.datasets import TaskSpec


@pytest.fixture(scope="module")
def mutag():
    from tmdlib.datasets import read_tu, to_dataset

    return to_dataset(read_tu(RAW / "MUTAG", "MUTAG"))


CFG = {"hidden": 16, "layers": 2, "pool": "add", "eta": 1.0, "bias": False, "lr": 0.01, "batch_size": 16,
       "epochs": 3, "seed": 0, "device": "cpu"}


def _labels(ds, kind):
    rng = np.random.default_rng(0)
    n = len(ds)
    if kind == "binary":
        return TaskSpec("binary"), ds.y.copy()
    if kind == "multiclass":
        return TaskSpec("multiclass", ("y",), (0, 1, 2)), rng.integers(0, 3, n).astype(float)
    if kind == "multitask":
        y = np.column_stack([ds.y, rng.integers(0, 2, n)]).astype(float)
        y[rng.random(y.shape) < 0.3] = np.nan
        return TaskSpec("multitask", ("a", "b")), y
    y = ds.nodes_per_graph.astype(float) * 10 + 100 + rng.normal(0, 1, n)  # regression in odd units
    return TaskSpec("regression", ("size",)), y


@pytest.mark.parametrize("kind", ["binary", "multiclass", "multitask", "regression"])
def test_fit_and_measure_each_task(mutag, kind):
    from tmdlib.torch.fit import fit, predict, task_head
    from tmdlib.torch.measure import bound_point, measure
    from tmdlib.torch.pyg import dataset_to_pyg

    task, y = _labels(mutag, kind)
    ds = mutag.__class__(features=mutag.features, feature_index=mutag.feature_index, node_ptr=mutag.node_ptr,
                         edge_ptr=mutag.edge_ptr, src=mutag.src, dst=mutag.dst, graph_ids=mutag.graph_ids, y=y)
    train, test = np.arange(150), np.arange(150, 188)
    import tmdlib

    sel = tmdlib.select_graphs(ds.take(train), "tmd", k=15, seed=0, engine="exact")
    pos = train[sel.positions]
    res = fit(ds, pos, y[pos], sel.tau, CFG, task)
    assert res.model.config["out_dim"] == task.output_dim
    assert res.head.task == task and len(res.losses) == 3 and np.isfinite(res.losses).all()
    out = predict(res.model, dataset_to_pyg(ds, positions=test), res.head)
    assert out.shape == (38, task.output_dim)
    if kind == "regression":  # de-standardised: predictions live in the targets' units, not in z-scores
        assert res.head.standardizer.mean[0] > 100 and np.abs(out).mean() > 10
    m = measure(ds, res.model, res.head, CFG, train_pos=train, test_pos=test, subset=sel.positions, tau=sel.tau,
                epsilon=sel.epsilon_mean, assignment=sel.certificate.assignment, weights="pascal")
    b = m["bound"]
    assert b["loss"] == res.head.loss and b["loss_scale"] > 0
    # Lemma 3.2 with the label term always holds (the loss is M-Lipschitz; labels split off exactly)
    assert b["bound_with_labels_holds"] and b["lemma_holds_label_consistent"]
    assert m["test"]["metric"] == {"binary": "accuracy", "multiclass": "accuracy", "multitask": "rocauc",
                                   "regression": "rmse"}[kind]
    assert m["reference"]["attempts"]


def test_regression_certificate_inequality_on_real_pairs(mutag):
    """|L(h(G_i); y) - L(h(G_j); y)| <= c TMD(G_i, G_j) for the Huber loss (M = delta) with a trained GIN."""
    import tmdlib
    from tmdlib.torch.fit import fit, losses_on
    from tmdlib.torch.pyg import dataset_to_pyg

    task = TaskSpec("regression")
    y = mutag.nodes_per_graph.astype(float)
    pos = np.arange(40)
    res = fit(mutag, pos, y[pos], np.ones(40), {**CFG, "epochs": 2}, task, loss="huber", delta=0.5)
    c = res.lipschitz["c"]
    assert res.lipschitz["M"] == 0.5
    data = dataset_to_pyg(mutag, positions=pos)
    D = tmdlib.tmd_matrix(mutag.take(pos), 3, "pascal")
    same = np.full(40, 1.0)  # one label for all: the loss is then a function of the graph alone
    L = losses_on(res.model, data, same, res.head)
    assert np.all(np.abs(L[:, None] - L[None, :]) <= c * D * (1 + 1e-9) + 1e-9)
