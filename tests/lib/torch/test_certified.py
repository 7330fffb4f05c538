"""Certified mode (tmdlib.torch.certified): a GIN whose stability constant is fixed by a spectral-norm budget.

* the projection is exact (‖W‖₂ = β after projecting a larger matrix, untouched inside the ball);
* after training every ‖W‖₂ ≤ β, so the measured constant is ≤ c_cert = β^(2·layers+1);
* the stability inequality |h(G_a) − h(G_b)| ≤ c_cert · TMD(G_a, G_b) holds on sampled MUTAG pairs for
  trained constrained models;
* the certified bound is never below the observed gap on the training set: c·ε bounds the
  label-consistent gap (Lemma 3.2 as stated: the loss a function of the graph), and c·ε plus the
  label term bounds the gap with the real labels; the split is exact;
* the pipeline switch (``train_flow(lipschitz_budget=...)``, ``evaluate_flow``): pipeline/test_certified_flows.py.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tmdlib.torch.certified import (certified_constant, certify, label_aware_gap, parse_budget, project_,
                              spectral_norms, stability_constant, train_certified, train_from_config)
from tmdlib.torch.gin import GIN, TrainConfig, bce_losses, lipschitz_bound, predict_logits
from tmdlib.torch.pyg import to_pyg

torch.set_num_threads(1)

LAYERS = 3
N_TRAIN = 80
K = 8
BUDGETS = [0.5, 1.0]


def logits64(model, graphs, y=None):
    m = GIN(**model.config).double()
    m.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    return predict_logits(m, [to_pyg(g, dtype=torch.float64) for g in graphs])


# ------------------------------------------------------------------------------------ projection
def test_parse_budget():
    for none in (None, 0, 0.0, "0", "none", "None", "null", ""):
        assert parse_budget(none) is None
    assert parse_budget("0.5") == 0.5 and parse_budget(2) == 2.0
    assert parse_budget("0.5,1,1,1,1,1,2") == [0.5, 1, 1, 1, 1, 1, 2]
    for bad in (-1, "abc", float("inf"), "0.5,-1", True):
        with pytest.raises(ValueError):
            parse_budget(bad)


def test_projection_is_exact():
    torch.manual_seed(0)
    model = GIN(7, hidden=32, layers=LAYERS)
    before = spectral_norms(model)
    beta = 0.3
    assert min(before) > beta  # every matrix starts outside the ball
    returned = project_(model, beta)
    assert returned == pytest.approx(before, rel=1e-12)
    after = spectral_norms(model)
    assert after == pytest.approx([beta] * 7, rel=1e-6)  # W <- W * beta / ||W||_2: the norm is the budget
    project_(model, beta, strict=True)
    assert all(n <= beta for n in spectral_norms(model))  # strict: not even a rounding ulp above
    # direction kept: the projected matrix is a positive multiple of the original
    torch.manual_seed(0)
    ref = GIN(7, hidden=32, layers=LAYERS)
    w0, w1 = ref.convs[1].mlp[0].weight.double(), model.convs[1].mlp[0].weight.double()
    assert torch.allclose(w1, w0 * (beta / before[2]), rtol=1e-6, atol=1e-9)
    # inside the ball nothing changes
    state = {k: v.clone() for k, v in model.state_dict().items()}
    project_(model, 10.0)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    # per-matrix budgets
    budgets = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.05]
    project_(model, budgets, strict=True)
    assert all(n <= b * (1 + 1e-12) for n, b in zip(spectral_norms(model), budgets))
    with pytest.raises(ValueError):
        project_(model, [0.5, 0.5])


def test_certified_constant():
    assert certified_constant(3, 0.5) == pytest.approx(0.5 ** 7)
    assert certified_constant(3, [1, 1, 1, 1, 1, 1, 0.25]) == pytest.approx(0.25)
    assert certified_constant(2, 2.0) == pytest.approx(32.0)
    assert certified_constant(3, 1.0, eta=2.0) == pytest.approx(8.0)  # kappa = eta^(L-1) with Pascal weights


# ------------------------------------------------------------------- trained constrained models
@pytest.fixture(scope="module")
def setting(mutag):
    """MUTAG: 80 training graphs, their TMD matrix, a k = 8 coreset, 30 random pairs and their TMD."""
    from tmdlib.select import kmedoids_coreset
    from tmdlib.distance import tmd_matrix

    sub = mutag.take(np.arange(N_TRAIN))
    D = tmd_matrix(sub, depth=LAYERS + 1, weights="pascal")
    cr = kmedoids_coreset(D, K, seed=0)
    rng = np.random.default_rng(7)
    pairs = rng.choice(N_TRAIN, size=(30, 2))
    return {"ds": sub, "D": D, "cr": cr, "pairs": pairs, "y": np.asarray(sub.y, dtype=np.float64)}


@pytest.fixture(scope="module")
def trained(setting):
    """Constrained GINs trained on the coreset (and one on all 80 graphs), per budget."""
    ds, cr, y = setting["ds"], setting["cr"], setting["y"]
    core = [to_pyg(ds[int(i)], y[i], weight=float(t)) for i, t in zip(cr.medoids, cr.tau)]
    full = [to_pyg(g, yy) for g, yy in zip(ds, y)]
    cfg = TrainConfig(hidden=32, epochs=30, seed=0, device="cpu")
    out = {b: train_certified(core, cfg, b).model for b in BUDGETS}
    out["full"] = train_certified(full, TrainConfig(hidden=32, epochs=8, seed=1, device="cpu"), 0.5).model
    return out


def test_constraint_holds_after_training(trained):
    for b in BUDGETS:
        model = trained[b]
        norms = spectral_norms(model)
        assert all(n <= b for n in norms), norms
        cert = certify(model, b)
        assert cert["constraint_ok"] and cert["valid"] and not cert["conditions"]
        assert cert["c"] == cert["c_certified"] == pytest.approx(b ** 7)
        assert cert["c_measured"] == pytest.approx(lipschitz_bound(model)["c"])
        assert cert["c_measured"] <= cert["c_certified"]
        # training pushes the weights against the ball: the budget is active, so c_cert is not loose
        assert max(norms) == pytest.approx(b, rel=1e-5)
    assert all(n <= 0.5 for n in spectral_norms(trained["full"]))


def test_stability_inequality_on_mutag_pairs(setting, trained):
    from tmdlib.distance import tmd

    ds, pairs = setting["ds"], setting["pairs"]
    D = np.array([tmd(ds[int(a)], ds[int(b)], depth=LAYERS + 1, weights="pascal") for a, b in pairs])
    assert D == pytest.approx(setting["D"][pairs[:, 0], pairs[:, 1]], rel=1e-9)
    for key in BUDGETS + ["full"]:
        model = trained[key]
        c = certified_constant(LAYERS, 0.5 if key == "full" else key)
        z = logits64(model, list(ds))
        dh = np.abs(z[pairs[:, 0]] - z[pairs[:, 1]])
        assert np.all(dh <= c * D * (1 + 1e-9) + 1e-12), (key, (dh / np.maximum(c * D, 1e-300)).max())
        # and on every graph against its medoid (the pairs Lemma 3.2 uses)
        a = setting["cr"].assignment
        da = np.abs(z - z[a])
        assert np.all(da <= c * setting["D"][np.arange(len(ds)), a] * (1 + 1e-9) + 1e-12)


def test_certified_bound_never_below_observed_gap(setting, trained):
    ds, cr, y = setting["ds"], setting["cr"], setting["y"]
    rng = np.random.default_rng(0)
    for key in BUDGETS + ["full"]:
        model = trained[key]
        c = certify(model, 0.5 if key == "full" else key)["c"]
        z = logits64(model, list(ds))
        for labels in (y, y[cr.assignment], rng.integers(0, 2, y.size).astype(float)):
            r = label_aware_gap(z, labels, cr.medoids, cr.tau, cr.assignment, c, cr.epsilon)
            # Lemma 3.2 (loss as a function of the graph: each graph scored with its medoid's label)
            assert r["gap_label_consistent"] <= r["c_epsilon"] * (1 + 1e-9) + 1e-12
            assert r["lemma_holds_label_consistent"]
            # with the real labels: c*eps + (1/n) sum_{y_i != y_a(i)} |z_i| always bounds the observed gap
            assert r["bound_with_labels_holds"] and r["gap_observed"] <= r["bound_with_labels"] + 1e-12
            # the split is exact
            L = bce_losses(z, labels)
            g_signed = float(np.dot(cr.tau, L[cr.medoids]) / L.size - L.mean())
            assert r["gap_signed"] == pytest.approx(g_signed, abs=1e-12)
            cons = bce_losses(z, labels[cr.assignment])
            cons_signed = float(np.dot(cr.tau, cons[cr.medoids]) / L.size - cons.mean())
            assert g_signed == pytest.approx(cons_signed + r["label_term"], abs=1e-12)
        # clusters with pure labels: the plain certificate c*eps bounds the observed gap
        pure = label_aware_gap(z, y[cr.assignment], cr.medoids, cr.tau, cr.assignment, c, cr.epsilon)
        assert pure["lemma_holds"] and pure["label_term"] == 0.0


def test_train_from_config_routes(setting):
    ds, y = setting["ds"], setting["y"]
    data = [to_pyg(ds[i], y[i]) for i in range(10)]
    base = {"hidden": 8, "epochs": 2, "seed": 3, "device": "cpu"}
    plain = train_from_config(data, {**base, "lipschitz_budget": None}).model
    plain2 = train_from_config(data, dict(base)).model
    assert all(torch.equal(a, b) for a, b in zip(plain.state_dict().values(), plain2.state_dict().values()))
    cert = train_from_config(data, {**base, "lipschitz_budget": 0.2}).model
    assert all(n <= 0.2 for n in spectral_norms(cert))
    assert stability_constant(cert, 0.2)["c"] == pytest.approx(0.2 ** 7)
    assert stability_constant(plain, None)["c"] == pytest.approx(lipschitz_bound(plain)["c"])
    with pytest.raises(ValueError, match="bias"):
        train_certified(data, TrainConfig(hidden=8, epochs=1, bias=True, device="cpu"), 0.5)
