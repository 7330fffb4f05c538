"""GIN model, τ-weighted training, the Lipschitz constant, devices and model files (tmdlib.torch.gin, tasks.train)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tmdlib import Graph
from tmdlib.torch.gin import (GIN, TrainConfig, alive_units, bce_losses, evaluate, lipschitz_bound, model_config, pick_device,
                       predict_logits, tmd_factor, train_gin, weighted_bce)
from tmdlib.torch.pyg import to_pyg

torch.set_num_threads(1)  # small models: one thread is fastest on a shared machine and bit-reproducible

TRIANGLE = np.array([[0, 1, 1, 2, 2, 0], [1, 0, 2, 1, 0, 2]])
PATH3 = np.array([[0, 1, 1, 2], [1, 0, 2, 1]])


def toy_data(weights=None):
    """Separable toy set: triangles with feature [1, 0] (label 1) vs paths with feature [0, 1] (label 0)."""
    graphs = []
    for k in range(8):
        if k % 2 == 0:
            g, y = Graph(np.tile([1.0, 0.0], (3, 1)) * (1 + 0.1 * k), TRIANGLE), 1.0
        else:
            g, y = Graph(np.tile([0.0, 1.0], (3, 1)) * (1 + 0.1 * k), PATH3), 0.0
        extra = {} if weights is None else {"weight": float(weights[k])}
        graphs.append(to_pyg(g, y, **extra))
    return graphs


def batch_of(data):
    from torch_geometric.data import Batch

    return Batch.from_data_list(data)


def params_close(m1, m2, atol=1e-6):
    return all(torch.allclose(a, b, atol=atol) for a, b in zip(m1.parameters(), m2.parameters()))


# --------------------------------------------------------------------------------------- model
def test_forward_shapes(mutag):
    torch.manual_seed(0)
    model = GIN(mutag.num_features, hidden=16, layers=3)
    data = [to_pyg(mutag[g]) for g in range(5)]
    b = batch_of(data)
    out = model(b.x, b.edge_index, b.batch)
    assert out.shape == (5, 1)
    # a graph with no nodes at the end still gets an output row (bias only)
    empty = Graph.empty(mutag.num_features)
    b2 = batch_of(data + [to_pyg(empty)])
    out2 = model(b2.x, b2.edge_index, b2.batch, b2.num_graphs)
    assert out2.shape == (6, 1)
    assert torch.allclose(out2[:5], out)
    assert torch.allclose(out2[5], model.out.bias)
    assert predict_logits(model, data).shape == (5,)
    assert GIN(7, 8, 2, out_dim=3)(b.x, b.edge_index, b.batch).shape == (5, 3)


def test_layer_is_paper_form():
    """z_v <- phi(z_v + eta * sum of neighbours), checked against a dense computation."""
    torch.manual_seed(1)
    g = Graph(np.random.default_rng(0).random((3, 2)), PATH3)
    for eta in (1.0, 0.3):
        model = GIN(2, hidden=4, layers=1, eta=eta).double()
        A = np.zeros((3, 3))
        A[PATH3[0], PATH3[1]] = 1
        pre = torch.tensor((np.eye(3) + eta * A) @ g.x)
        z = model.convs[0].mlp(pre)
        expect = model.out(z.sum(0))
        got = predict_logits(model, [to_pyg(g, dtype=torch.float64)])
        assert got[0] == pytest.approx(float(expect.detach()), rel=1e-12)


def test_bad_model_arguments():
    for kwargs in ({"pool": "max"}, {"eta": 0.0}, {"layers": 0}):
        with pytest.raises(ValueError):
            GIN(3, **kwargs)


# ------------------------------------------------------------------------------- tau weighting
def test_weight_zero_removes_and_weight_two_duplicates_in_the_loss():
    torch.manual_seed(0)
    model = GIN(2, hidden=8, layers=2)
    data = toy_data()

    def loss_and_grad(items, w):
        model.zero_grad()
        b = batch_of(items)
        loss = weighted_bce(model(b.x, b.edge_index, b.batch), b.y, torch.tensor(w, dtype=torch.float32))
        loss.backward()
        return float(loss.detach()), [p.grad.clone() for p in model.parameters()]

    base = [1.0] * 8
    l0, g0 = loss_and_grad(data, [0.0] + base[1:])
    l_rm, g_rm = loss_and_grad(data[1:], base[1:])
    assert l0 == pytest.approx(l_rm, rel=1e-6)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(g0, g_rm))
    l2, g2 = loss_and_grad(data, [2.0] + base[1:])
    l_dup, g_dup = loss_and_grad([data[0]] + data, [1.0] * 9)
    assert l2 == pytest.approx(l_dup, rel=1e-6)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(g2, g_dup))
    assert abs(l2 - l0) > 1e-3  # the weight matters


def test_training_weights_are_real():
    """Full-batch training: weight 0 == graph removed, weight 2 == graph duplicated (same trajectory)."""
    cfg = TrainConfig(hidden=8, layers=2, epochs=15, batch_size=64, seed=3, device="cpu")
    w0 = [0.0] + [1.0] * 7
    a = train_gin(toy_data(w0), cfg)
    b = train_gin(toy_data()[1:], cfg)
    assert params_close(a.model, b.model)
    w2 = [2.0] + [1.0] * 7
    c = train_gin(toy_data(w2), cfg)
    d = train_gin([toy_data()[0]] + toy_data(), cfg)
    assert params_close(c.model, d.model)
    plain = train_gin(toy_data(), cfg)
    assert not params_close(c.model, plain.model)
    assert a.losses == pytest.approx(b.losses, rel=1e-5)


def test_training_reduces_loss_and_separates():
    data = toy_data()
    res = train_gin(data, TrainConfig(hidden=16, layers=2, epochs=40, batch_size=4, seed=0, device="cpu"))
    assert res.losses[-1] < 0.25 * res.losses[0]
    z = predict_logits(res.model, data)
    y = np.array([float(d.y) for d in data])
    assert evaluate(z, y, "accuracy") == 1.0
    assert evaluate(z, y, "rocauc") == 1.0
    assert bce_losses(z, y).mean() == pytest.approx(float(
        torch.nn.functional.binary_cross_entropy_with_logits(torch.tensor(z), torch.tensor(y))), rel=1e-9)
    assert res.device == "cpu"


def test_alive_units_detects_a_collapsed_network():
    """A layer whose every unit is negative on all (non-negative) inputs outputs 0 everywhere: the network is
    dead (constant output, zero gradient below the readout), and alive_units says so; a trained network is alive."""
    data = toy_data()
    trained = train_gin(data, TrainConfig(hidden=8, epochs=30, batch_size=8, seed=0, device="cpu")).model
    alive = alive_units(trained, data)
    assert len(alive) == 3 and min(alive) > 0 and max(alive) <= 8
    dead = GIN(2, hidden=8, layers=3)
    dead.load_state_dict(trained.state_dict())
    with torch.no_grad():
        dead.convs[1].mlp[0].weight.copy_(-dead.convs[1].mlp[0].weight.abs())  # layer-1 inputs are >= 0 (ReLU)
    assert alive_units(dead, data)[0] == alive[0] and alive_units(dead, data)[1:] == [0, 0]
    z = predict_logits(dead, data)
    assert np.ptp(z) == 0.0  # every graph gets the readout bias
    assert alive_units(trained, data, max_graphs=1)[0] <= alive[0]


def test_training_is_seeded():
    cfg = TrainConfig(hidden=8, layers=2, epochs=5, batch_size=3, seed=7, device="cpu")
    a, b = train_gin(toy_data(), cfg), train_gin(toy_data(), cfg)
    assert a.losses == b.losses and params_close(a.model, b.model, atol=0)
    c = train_gin(toy_data(), TrainConfig(hidden=8, layers=2, epochs=5, batch_size=3, seed=8, device="cpu"))
    assert not params_close(a.model, c.model)


# --------------------------------------------------------------------------- Lipschitz bound
def test_on_loss_sees_every_epoch_loss_while_training_runs():
    """The callback gets (epoch, loss) after each epoch, in order; certified training and the pipeline's config
    entry point pass it through."""
    from tmdlib.torch.certified import train_from_config

    cfg = TrainConfig(hidden=8, layers=2, epochs=4, batch_size=3, seed=0, device="cpu")
    seen = []

    def on_loss(epoch, loss):
        seen.append((epoch, loss))

    res = train_gin(toy_data(), cfg, on_loss=on_loss)
    assert seen == list(enumerate(res.losses)) and len(seen) == 4
    for budget in (None, 2.0):
        calls = []
        res = train_from_config(toy_data(), {**cfg.to_dict(), "lipschitz_budget": budget},
                                on_loss=lambda e, v: calls.append((e, v)))
        assert calls == list(enumerate(res.losses))


def test_lipschitz_bound_is_product_of_spectral_norms():
    torch.manual_seed(0)
    model = GIN(7, hidden=32, layers=3)
    res = lipschitz_bound(model, M=1)
    expect = []
    for conv in model.convs:
        lin = [m for m in conv.mlp if isinstance(m, torch.nn.Linear)]
        assert len(lin) == 2
        expect.append(np.prod([np.linalg.svd(m.weight.detach().double().numpy(), compute_uv=False)[0] for m in lin]))
    expect.append(np.linalg.svd(model.out.weight.detach().double().numpy(), compute_uv=False)[0])
    assert res["per_layer"] == pytest.approx(expect, rel=1e-10)
    assert res["c"] == pytest.approx(float(np.prod(expect)), rel=1e-10)
    assert res["kappa"] == 1.0 and res["valid"] and res["conditions"] == []
    assert lipschitz_bound(model, M=2.5)["c"] == pytest.approx(2.5 * res["c"], rel=1e-12)


def test_tmd_factor_pascal_and_eta():
    pascal = [1 / 3, 1.0, 3.0]
    assert tmd_factor(1.0, 3) == pytest.approx(1.0)
    assert tmd_factor(0.5, 3) == pytest.approx(1.0)
    assert tmd_factor(2.0, 3) == pytest.approx(8.0)  # eta^(L-1)
    assert tmd_factor(2.0, 3, [2 * w for w in pascal]) == pytest.approx(1.0)  # weights scaled by eta
    assert tmd_factor(1.0, 3, 1.0) == pytest.approx(3.0)  # uniform weights: binom(3,1)/1 = 3
    assert tmd_factor(1.0, 1) == 1.0  # one layer, depth 2: weight 1


def test_bound_validity_flags():
    torch.manual_seed(0)
    assert not lipschitz_bound(GIN(3, 4, 2, pool="mean"))["valid"]
    biased = lipschitz_bound(GIN(3, 4, 2, bias=True))
    assert not biased["valid"] and "bias" in biased["conditions"][0]
    zero_bias = GIN(3, 4, 2, bias=True)
    with torch.no_grad():
        for conv in zero_bias.convs:
            for m in conv.mlp:
                if isinstance(m, torch.nn.Linear):
                    m.bias.zero_()
    assert lipschitz_bound(zero_bias)["valid"]


# ------------------------------------------------------------------------------------ device
def test_pick_device(monkeypatch):
    if not torch.cuda.is_available():
        assert pick_device("auto").type == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert pick_device("auto") == torch.device("cuda")
    assert pick_device("cpu") == torch.device("cpu")


def test_cuda_training_if_present():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    res = train_gin(toy_data(), TrainConfig(hidden=8, layers=2, epochs=3, device="auto"))
    assert res.device.startswith("cuda")
    assert next(res.model.parameters()).device.type == "cpu"


# ------------------------------------------------------------------------------- model files
def test_save_load_weights_only(tmp_path):
    """A GIN's file is its state dict as plain tensors (loads with weights_only=True); the registry rebuilds it."""
    from tasks.train import load_model, save_model
    from tmdlib.models import task_head
    from tmdlib.datasets._task import BINARY
    from tmdlib.torch.model import GINModel

    torch.manual_seed(0)
    model = GINModel.__new__(GINModel)
    model.model, model.name, model.recipe, model.cfg = GIN(2, hidden=8, layers=2, eta=0.5), "gin", "default", {}
    model.result, model.head = None, task_head(BINARY)
    path = tmp_path / "sub" / "model.pt"
    config = save_model(model, str(path))
    state = torch.load(path, weights_only=True)
    assert set(state) == set(model.model.state_dict())
    loaded = load_model(str(path), {"model_state": config})
    data = toy_data()
    assert np.array_equal(predict_logits(model.model, data), predict_logits(loaded.model, data))
    assert loaded.model.config["eta"] == 0.5
    assert [p.name for p in path.parent.iterdir()] == ["model.pt"]  # atomic write leaves no temp file
    from tmdlib import InputError

    with pytest.raises(InputError, match="does not match"):
        load_model(str(path), {"model_state": {**config, "model": {**model_config(model.model), "hidden": 16}}})
    (tmp_path / "bad.pt").write_bytes(b"not a model")
    with pytest.raises(InputError):
        load_model(str(tmp_path / "bad.pt"), {"model_state": config})


# --------------------------------------------------------------------------------------- serving
@pytest.mark.parametrize("pool,bias", [("add", False), ("mean", True)])
def test_dense_batch_gin_is_the_gin(mutag, pool, bias):
    """The one-tensor form (what MLflow logs) computes the GIN's logits: padding, biases (phi(0) != 0), mean
    readout and graphs without edges included."""
    from tmdlib.torch.gin import predict_logits
    from tmdlib.torch.pyg import dataset_to_pyg
    from tmdlib.torch.serving import DenseBatchGIN, dense_batch

    data = dataset_to_pyg(mutag, positions=np.arange(40))
    data.append(to_pyg(Graph(np.eye(7)[:2], np.zeros((2, 0), dtype=np.int64))))  # no edges
    torch.manual_seed(1)
    gin = GIN(mutag.num_features, hidden=16, layers=3, pool=pool, bias=bias)
    dense = DenseBatchGIN(gin).eval()
    batch = dense_batch(data)
    n = max(int(g.num_nodes) for g in data)
    assert batch.shape == (len(data), n, 1 + mutag.num_features + n) and batch.dtype == torch.float32
    with torch.no_grad():
        got = dense(batch).double().numpy().ravel()
        alone = dense(dense_batch(data[3:4], mutag.num_features)).double().numpy().ravel()  # less padding
    expected = predict_logits(gin, data)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(alone, expected[3:4], rtol=1e-5, atol=1e-6)


def test_dense_batch_gin_exports_with_dynamic_batch_and_node_count(mutag):
    """torch.export (MLflow's default 'pt2' format) traces it once for any batch size and node count."""
    from tmdlib.torch.pyg import dataset_to_pyg
    from tmdlib.torch.serving import DenseBatchGIN, dense_batch

    data = dataset_to_pyg(mutag, positions=np.arange(12))
    torch.manual_seed(0)
    dense = DenseBatchGIN(GIN(mutag.num_features, hidden=8, layers=2)).eval()
    ex = dense_batch(data[:3])
    dims = {0: torch.export.Dim.AUTO, 1: torch.export.Dim.AUTO, 2: torch.export.Dim.AUTO}
    program = torch.export.export(dense, (ex,), dynamic_shapes=(dims,)).module()
    for part in (data[:3], data[3:10], data[10:12]):
        b = dense_batch(part, mutag.num_features)
        torch.testing.assert_close(program(b), dense(b))
