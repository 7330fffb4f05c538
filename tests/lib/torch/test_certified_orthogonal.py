"""Certified mode, ``"orthogonal"`` architecture: MaxMin activations, orthonormal matrices, the budget c as readout scale.

* MaxMin is norm-preserving, 1-Lipschitz in L2 and maps 0 to 0 (the conditions of the TMD stability bound);
* the polar projection leaves every singular value at 1 (strictly ≤ 1 after rounding);
* the certified constant is the budget itself, and after training the measured constant is ≤ it;
* the stability inequality |h(G_a) − h(G_b)| ≤ c · TMD(G_a, G_b) holds on MUTAG pairs for trained models, and
  c·ε bounds the label-consistent coreset gap;
* a model whose scale exceeds the budget is not certified; configs, saved models and the dense serving wrapper
  carry the architecture; the pipeline switch ``--lipschitz-mode orthogonal``.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tmdlib.torch.certified import (certified_constant, certify, describe, label_aware_gap, orthogonalize_,
                                    parse_mode, spectral_norms, stability_constant, train_certified,
                                    train_from_config)
from tmdlib.torch.gin import GIN, MaxMin, TrainConfig, build_model, lipschitz_bound, model_config, predict_logits
from tmdlib.torch.pyg import to_pyg

torch.set_num_threads(1)

LAYERS = 3
N_TRAIN = 60
K = 6
C = 0.004


def logits64(model, graphs):
    m = GIN(**model.config).double()
    m.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    return predict_logits(m, [to_pyg(g, dtype=torch.float64) for g in graphs])


def test_maxmin_is_norm_preserving_and_1_lipschitz():
    torch.manual_seed(0)
    act = MaxMin()
    x, y = torch.randn(500, 16, dtype=torch.float64), torch.randn(500, 16, dtype=torch.float64)
    fx, fy = act(x), act(y)
    assert torch.allclose(fx.norm(dim=1), x.norm(dim=1), rtol=1e-12)
    assert bool(((fx - fy).norm(dim=1) <= (x - y).norm(dim=1) * (1 + 1e-12)).all())
    assert torch.equal(act(torch.zeros(3, 4)), torch.zeros(3, 4))
    # each pair (a_i, b_i) of the two halves is sorted: max first
    assert torch.equal(act(torch.tensor([[1.0, -2.0, 3.0, 5.0]])), torch.tensor([[3.0, 5.0, 1.0, -2.0]]))
    with pytest.raises(ValueError, match="even"):
        act(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="even"):
        GIN(7, hidden=9, act="maxmin")
    with pytest.raises(ValueError, match="act"):
        GIN(7, hidden=8, act="tanh")
    with pytest.raises(ValueError, match="scale"):
        GIN(7, hidden=8, scale=0.0)


def test_orthogonalize_gives_unit_singular_values():
    torch.manual_seed(1)
    model = GIN(7, hidden=32, layers=LAYERS, act="maxmin")
    before = spectral_norms(model)
    returned = orthogonalize_(model)
    assert returned == pytest.approx(before, rel=1e-6)
    for _, w in [(n, p) for n, p in model.named_parameters() if p.ndim == 2]:
        sv = torch.linalg.svdvals(w.detach().double())
        assert torch.allclose(sv, torch.ones_like(sv), atol=1e-6)
    # the readout (a row vector) is normalised: its direction is kept
    w_out = model.out.weight.detach().double()
    assert float(w_out.norm()) == pytest.approx(1.0, abs=1e-6)
    orthogonalize_(model, strict=True)
    assert all(n <= 1.0 for n in spectral_norms(model))


def test_constant_and_modes():
    assert parse_mode(None) == parse_mode("") == "ball" and parse_mode("Orthogonal") == "orthogonal"
    with pytest.raises(ValueError, match="mode"):
        parse_mode("spectral")
    assert certified_constant(3, 0.002, mode="orthogonal") == pytest.approx(0.002)
    assert certified_constant(3, 0.002, eta=2.0, mode="orthogonal") == pytest.approx(0.016)  # kappa = eta^3
    with pytest.raises(ValueError, match="one budget"):
        certified_constant(3, [1, 1, 1, 1, 1, 1, 0.1], mode="orthogonal")
    assert "0.002" in describe(0.002, mode="orthogonal") and "MaxMin" in describe(0.002, mode="orthogonal")


@pytest.fixture(scope="module")
def setting(mutag):
    """MUTAG: 60 training graphs, their TMD matrix, a k = 6 coreset and orthogonal-mode models trained on it."""
    from tmdlib.distance import tmd_matrix
    from tmdlib.select import kmedoids_coreset

    sub = mutag.take(np.arange(N_TRAIN))
    D = tmd_matrix(sub, depth=LAYERS + 1, weights="pascal")
    cr = kmedoids_coreset(D, K, seed=0)
    y = np.asarray(sub.y, dtype=np.float64)
    core = [to_pyg(sub[int(i)], y[i], weight=float(t)) for i, t in zip(cr.medoids, cr.tau)]
    full = [to_pyg(g, yy) for g, yy in zip(sub, y)]
    models = {"core": train_certified(core, TrainConfig(hidden=16, epochs=25, seed=0, device="cpu"), C,
                                      mode="orthogonal").model,
              "full": train_certified(full, TrainConfig(hidden=16, epochs=4, seed=1, device="cpu"), C,
                                      mode="orthogonal").model}
    return {"ds": sub, "D": D, "cr": cr, "y": y, "models": models}


def test_trained_models_are_certified(setting):
    for model in setting["models"].values():
        assert model.config["act"] == "maxmin" and model.config["scale"] == C
        assert all(n <= 1.0 for n in spectral_norms(model))
        cert = certify(model, C, mode="orthogonal")
        assert cert["constraint_ok"] and cert["valid"] and not cert["conditions"], cert["conditions"]
        assert cert["c"] == cert["c_certified"] == pytest.approx(C)
        assert cert["c_measured"] == pytest.approx(lipschitz_bound(model)["c"])
        assert cert["c_measured"] <= cert["c_certified"]
        # orthonormal, not merely inside the ball: the whole budget is in use
        assert cert["c_measured"] == pytest.approx(C, rel=1e-5)
        assert stability_constant(model, C, mode="orthogonal")["c"] == pytest.approx(C)


def test_stability_inequality_and_lemma_on_mutag(setting):
    ds, D, cr, y = setting["ds"], setting["D"], setting["cr"], setting["y"]
    for model in setting["models"].values():
        z = logits64(model, list(ds))
        assert np.ptp(z) > 0  # not a constant predictor: MaxMin units do not die
        dz = np.abs(z[:, None] - z[None, :])
        assert np.all(dz <= C * D * (1 + 1e-9) + 1e-12), float((dz / np.maximum(C * D, 1e-300)).max())
        r = label_aware_gap(z, y, cr.medoids, cr.tau, cr.assignment, C, cr.epsilon)
        assert r["lemma_holds_label_consistent"] and r["bound_with_labels_holds"]


def test_scale_above_the_budget_is_not_certified(setting):
    model = setting["models"]["core"]
    bigger = GIN(**{**model.config, "scale": 2 * C})
    bigger.load_state_dict(model.state_dict())
    cert = certify(bigger, C, mode="orthogonal")
    assert not cert["constraint_ok"] and not cert["valid"]
    assert any("scale" in c for c in cert["conditions"])
    # a ball-mode certificate does not cover a scaled model either
    assert not certify(GIN(7, hidden=8, scale=2.0), 1.0)["valid"]


def test_config_save_load_and_serving_keep_the_architecture(setting, tmp_path):
    from tmdlib.torch.serving import DenseBatchGIN, dense_batch

    model = setting["models"]["core"]
    cfg = model_config(model)
    assert cfg["act"] == "maxmin" and cfg["scale"] == C
    path = tmp_path / "m.pt"
    torch.save(model.state_dict(), path)
    again = build_model(cfg)
    again.load_state_dict(torch.load(path, weights_only=True))
    graphs = [to_pyg(g) for g in list(setting["ds"])[:12]]
    z = predict_logits(model, graphs)
    assert np.array_equal(z, predict_logits(again, graphs))
    dense = DenseBatchGIN(again).eval()
    with torch.no_grad():
        zd = dense(dense_batch(graphs)).reshape(-1).double().numpy()
    assert np.allclose(zd, z, rtol=1e-5, atol=1e-6)
    # old configs (no act / scale keys) still build the paper's GIN
    old = {k: v for k, v in cfg.items() if k not in ("act", "scale")}
    assert build_model(old).config["act"] == "relu" and build_model(old).config["scale"] == 1.0


def test_train_from_config_routes_the_mode(setting):
    ds, y = setting["ds"], setting["y"]
    data = [to_pyg(ds[i], y[i]) for i in range(10)]
    base = {"hidden": 8, "epochs": 2, "seed": 3, "device": "cpu", "lipschitz_budget": 0.01}
    orth = train_from_config(data, {**base, "lipschitz_mode": "orthogonal"}).model
    ball = train_from_config(data, dict(base)).model
    assert orth.config["act"] == "maxmin" and orth.config["scale"] == 0.01
    assert ball.config["act"] == "relu" and ball.config["scale"] == 1.0
    assert all(n <= 0.01 for n in spectral_norms(ball))
    with pytest.raises(ValueError, match="one budget"):
        train_from_config(data, {**base, "lipschitz_budget": [1] * 6 + [0.1], "lipschitz_mode": "orthogonal"})


def test_resolve_config_checks_the_mode():
    from dataclasses import replace

    from tmdlib.torch.options import resolve_config
    from flows.config.train import TrainStageConfig
    from tmdlib import InputError

    opts = TrainStageConfig(epochs=5, hidden=None, layers=3, batch_size=None, lr=0.01, seed=0, device="cpu",
                            pool="add", eta=1.0, bias=False)
    cfg = resolve_config("MUTAG", opts, lipschitz_budget="0.003", lipschitz_mode="orthogonal")
    assert cfg["lipschitz_budget"] == 0.003 and cfg["lipschitz_mode"] == "orthogonal"
    assert "lipschitz_mode" not in resolve_config("MUTAG", opts, lipschitz_budget="0.5", lipschitz_mode="ball")
    assert "lipschitz_mode" not in resolve_config("MUTAG", opts, lipschitz_budget="none", lipschitz_mode="orthogonal")
    with pytest.raises(InputError, match="lipschitz-mode"):
        resolve_config("MUTAG", opts, lipschitz_budget="0.5", lipschitz_mode="spectral")
    with pytest.raises(InputError, match="even"):
        resolve_config("MUTAG", replace(opts, hidden=9), lipschitz_budget="0.5", lipschitz_mode="orthogonal")


def test_flows_in_orthogonal_mode(tmp_path):
    import json

    from typer.testing import CliRunner

    from flows.cli import app
    from flows.evaluate import evaluate_flow
    from helpers import make_inputs
    from flows.config.evaluate import EvaluateStageConfig

    inp = make_inputs(tmp_path / "in")
    out = tmp_path / "out"
    args = ["train", "--graphs", inp["graphs"], "--selection", inp["selection"], "--labels", inp["labels"],
            "--model-out", str(out / "model.pt"), "--info-out", str(out / "train.json"), "--epochs", "4",
            "--hidden", "16", "--no-mlflow", "--lipschitz-budget", "0.003"]
    r = CliRunner().invoke(app, args + ["--lipschitz-mode", "orthogonal"])
    assert r.exit_code == 0, r.output
    saved = json.loads((out / "train.json").read_text())
    assert saved["certified"] and saved["config"]["lipschitz_mode"] == "orthogonal"
    assert saved["model"]["act"] == "maxmin" and saved["model"]["scale"] == 0.003
    lip = saved["lipschitz"]
    assert lip["c"] == saved["c_certified"] == pytest.approx(0.003) and lip["lipschitz_mode"] == "orthogonal"
    assert lip["constraint_ok"] and lip["c_measured"] <= lip["c"] * (1 + 1e-6)
    m = evaluate_flow(inp["graphs"], inp["selection"], str(out / "model.pt"), str(out / "train.json"),
                      str(out / "metrics.json"), str(out / "bound_vs_gap.png"), matrix=inp["matrix"],
                      cfg=EvaluateStageConfig(fractions="0.5", sweep_epochs=2, full_epochs=2, log_mlflow=False))
    b = m["bound"]
    assert m["lipschitz_mode"] == "orthogonal" and b["constraint_ok"]
    assert b["c"] == pytest.approx(0.003) and b["c_class"] == pytest.approx(0.003)
    assert b["lemma_holds_label_consistent"] and b["bound_with_labels_holds"]
    assert m["sweep"][0]["c"] == pytest.approx(0.003)
    r = CliRunner().invoke(app, args + ["--lipschitz-mode", "spectral"])
    assert r.exit_code == 2 and "lipschitz-mode" in r.output


def test_lipschitz_target_sets_the_certificate(tmp_path):
    import json

    from typer.testing import CliRunner

    from flows.cli import app
    from tmdlib.torch.options import target_budget
    from helpers import make_inputs
    from tmdlib import InputError
    from tmdlib.torch.certified import certified_constant

    assert target_budget(None, 50.0, "s", 3, 1.0, "pascal", "orthogonal") is None
    assert target_budget("0", 50.0, "s", 3, 1.0, "pascal", "orthogonal") is None
    assert target_budget(0.25, 50.0, "s", 3, 1.0, "pascal", "orthogonal") == pytest.approx(0.005)
    beta = target_budget(0.25, 50.0, "s", 3, 1.0, "pascal", "ball")
    assert certified_constant(3, beta) == pytest.approx(0.005)  # beta^7 = target / eps
    for bad in (-1, "x", float("nan")):
        with pytest.raises(InputError, match="lipschitz-target"):
            target_budget(bad, 50.0, "s", 3, 1.0, "pascal", "orthogonal")
    with pytest.raises(InputError, match="epsilon_mean"):
        target_budget(0.25, None, "sel.json", 3, 1.0, "pascal", "orthogonal")

    inp = make_inputs(tmp_path / "in")
    from tasks.io import read_selection

    eps = read_selection(inp["selection"])["epsilon_mean"]
    out = tmp_path / "out"
    args = ["train", "--graphs", inp["graphs"], "--selection", inp["selection"], "--labels", inp["labels"],
            "--model-out", str(out / "model.pt"), "--info-out", str(out / "train.json"), "--epochs", "2",
            "--hidden", "8", "--no-mlflow", "--lipschitz-budget", "none", "--lipschitz-mode", "orthogonal",
            "--lipschitz-target", "0.3"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    saved = json.loads((out / "train.json").read_text())
    assert saved["certified"] and saved["lipschitz_target"] == 0.3
    assert saved["lipschitz"]["c"] * eps == pytest.approx(0.3)  # the certificate is the target
    r = CliRunner().invoke(app, args[:-1] + ["-0.5"])
    assert r.exit_code == 2 and "lipschitz-target" in r.output
