"""Loss guarantees as numbers (tmdlib.guarantees._bounds), Lemma 3.2 on real data, evaluate on a sample, bad inputs.  The
train / evaluate flows and the CLI commands: pipeline/test_bounds_flows.py."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from helpers import make_inputs
from tmdlib.guarantees import _bounds as bounds

torch.set_num_threads(1)


# ------------------------------------------------------------------------------- hand-made numbers
def test_gap_formula_by_hand():
    losses = [1.0, 2.0, 3.0, 4.0]
    # coreset {0, 2} with tau (3, 1): (1/4)(3*1 + 1*3) = 1.5; full mean 2.5
    assert bounds.weighted_subset_loss(losses, [0, 2], [3, 1]) == pytest.approx(1.5)
    g = bounds.coreset_gap(losses, [0, 2], [3, 1])
    assert g == {"full": 2.5, "weighted": 1.5, "signed": -1.0, "gap": 1.0, "tau_sum": 4.0, "n": 4}
    assert bounds.coreset_gap(losses, [0, 1, 2, 3], [1, 1, 1, 1])["gap"] == 0.0
    assert bounds.lemma_bound(3.0, 0.5) == 1.5 and bounds.erm_bound(3.0, 0.5) == 3.0
    assert bounds.excess_loss(0.7, 0.5) == pytest.approx(0.2)
    with pytest.raises(ValueError):
        bounds.weighted_subset_loss(losses, [0, 2], [1.0])
    with pytest.raises(ValueError):
        bounds.weighted_subset_loss([np.nan, 1.0], [0], [1.0])


def test_verdict_informative_and_vacuous_by_hand():
    """c·ε below the full-data model's training loss is informative; at or above it, vacuous (and says so)."""
    v = bounds.bound_verdict(0.2, 0.45, holds=True, gap_observed=0.05)
    assert v["verdict"] == "informative" and v["informative"] and v["loss_scale"] == 0.45
    assert v["loss_scale_source"] == "full_model_train_loss" and v["ratio"] == pytest.approx(0.2 / 0.45)
    assert v["below_ln2"] and v["ln2"] == pytest.approx(np.log(2))
    assert v["sentence"].startswith("Bound informative: c·ε = 0.2 < loss scale 0.45")
    assert v["holds_text"] == "holds (informative: c·ε = 0.2 vs loss scale 0.45)"

    v = bounds.bound_verdict(117444.7, 0.452, holds=True, gap_observed=2.1825)
    assert v["verdict"] == "vacuous" and not v["informative"] and v["below_ln2"] is False
    assert v["sentence"].startswith("Bound vacuous: c·ε = 1.174e+05 ≥ loss scale 0.452")
    assert "says nothing about the loss" in v["sentence"] and "2.6e+05× the scale" in v["sentence"]
    assert v["holds_text"] == "holds (vacuous: c·ε = 1.174e+05 vs loss scale 0.452)"
    # the boundary: equal to the scale is vacuous (the bound must be strictly below)
    assert bounds.bound_verdict(0.45, 0.45)["verdict"] == "vacuous"
    # ln 2 is the scale only when no usable full-data loss is recorded
    for missing in (None, float("nan"), 0.0, -1.0, "x"):
        v = bounds.bound_verdict(0.5, missing)
        assert v["loss_scale_source"] == "ln2" and v["loss_scale"] == pytest.approx(np.log(2))
        assert v["verdict"] == "informative" and "constant ½ predictor" in v["sentence"]
    # a full-data loss above ln 2 stays the scale (same criterion as the certified sweep's non_vacuous)
    assert bounds.bound_verdict(0.75, 0.8)["verdict"] == "informative"
    assert bounds.bound_verdict(0.75, 0.8)["below_ln2"] is False


def test_verdict_without_epsilon_and_in_certified_mode():
    v = bounds.bound_verdict(None, 0.45, holds=None)
    assert v["verdict"] == "unknown" and v["ratio"] is None and v["below_ln2"] is None
    assert v["sentence"].startswith("Bound unknown: no ε was recorded") and v["holds_text"] == "n/a"
    assert bounds.bound_verdict(float("nan"), 0.45)["verdict"] == "unknown"
    # certified: c fixed before training; a violated constraint means c·ε proves nothing
    ok = bounds.bound_verdict(0.1, 0.45, certified=True, constraint_ok=True, holds=True)
    assert ok["verdict"] == "informative" and "(certified c)" in ok["sentence"]
    bad = bounds.bound_verdict(0.1, 0.45, certified=True, constraint_ok=False, holds=True)
    assert bad["verdict"] == "invalid" and "constraint violated" in bad["sentence"]
    assert bad["holds_text"].startswith("holds (invalid:")
    cond = bounds.bound_verdict(5.0, 0.45, valid=False, conditions=["mean pooling"])
    assert cond["verdict"] == "invalid" and "(mean pooling)" in cond["sentence"]
    # the observed gap above an informative c·ε: only the label term can do that, and the sentence says so
    lab = bounds.bound_verdict(0.05, 0.45, holds=False, gap_observed=0.3)
    assert lab["holds_text"] == "does not hold: observed gap 0.3 > c·ε = 0.05" and "label term" in lab["sentence"]


def test_verdict_of_metrics_json():
    """The verdict lines of a metrics.json / metrics_nodes.json as evaluate writes them."""
    from tmdlib.reporting.verdict import coreset_verdicts, node_verdicts, verdict_lines

    m = {"certified": True, "bound": {"c_epsilon": 0.21, "gap_observed": 0.02, "lemma_holds": True,
                                      "erm_bound": 0.84, "excess_loss": 0.01, "corollary_holds": True,
                                      "full_model_train_loss": 0.45, "certified": True, "constraint_ok": True,
                                      "valid": True, "bound_with_labels": 0.9, "bound_with_labels_holds": True},
         "nodes": {"bound": 3.0, "gap_observed": 0.1, "lemma_holds": True}}
    v = coreset_verdicts(m["bound"])
    assert [v[k]["verdict"] for k in ("lemma", "corollary", "with_labels")] == ["informative", "vacuous", "vacuous"]
    n = node_verdicts(m["nodes"], m["bound"])
    assert n["lemma"]["verdict"] == "vacuous" and n["lemma"]["loss_scale"] == 0.45 and n["corollary"] is None
    lines = verdict_lines(m)
    assert lines[0].startswith("Lemma 3.2 (coreset loss gap): Bound informative: c·ε (certified c) = 0.21")
    assert [line.split(":")[0] for line in lines] == [
        "Lemma 3.2 (coreset loss gap)", "Lemma 3.2 with the label term", "Corollary 3.3 (excess training loss)",
        "Corollary 4.1 (node subsampling, loss gap)"]
    assert verdict_lines({})[0].startswith("Lemma 3.2 (coreset loss gap): Bound unknown")
    assert node_verdicts(None) is None and coreset_verdicts(None)["with_labels"] is None
    nodes_run = {"bound": {**m["bound"], "erm_bound_with_nodes": 0.3, "certified": False}}
    assert coreset_verdicts(nodes_run["bound"])["corollary"]["sentence"].startswith(
        "Bound informative: 2c·(ε + Στε_i/n) = 0.3 <")


def test_medoid_objective_and_cluster_sizes_by_hand():
    pos = np.array([0.0, 1.0, 2.0, 10.0, 12.0])
    D = np.abs(pos[:, None] - pos[None, :])
    assert bounds.medoid_objective(D, [1, 3]) == pytest.approx((1 + 0 + 1 + 0 + 2) / 5)
    assert bounds.cluster_sizes(D, [1, 3]).tolist() == [3, 2]
    assert bounds.cluster_sizes(D, [3, 1]).tolist() == [2, 3]


def test_node_quantities_by_hand():
    assert bounds.node_epsilon_mean([1.0, 3.0]) == 2.0
    assert bounds.node_epsilon_mean([1.0, 3.0], weights=[3, 1]) == pytest.approx(1.5)
    nb = bounds.node_bounds(2.0, [1.0, 3.0])
    assert nb == {"epsilon_mean": 2.0, "bound": 4.0, "erm_bound": 8.0}
    ng = bounds.node_gap([1.0, 2.0], [1.5, 1.0])
    assert ng["gap"] == pytest.approx(0.25) and ng["mean_abs"] == pytest.approx(0.75) and ng["max_abs"] == 1.0
    with pytest.raises(ValueError):
        bounds.node_epsilon_mean([-1.0])


def test_agrees_with_coreset_module():
    from tmdlib.select import kmedoids_coreset

    rng = np.random.default_rng(0)
    pts = rng.random((30, 2))
    D = np.linalg.norm(pts[:, None] - pts[None, :], axis=-1)
    cr = kmedoids_coreset(D, 5, seed=1)
    assert bounds.medoid_objective(D, cr.medoids) == pytest.approx(cr.epsilon, rel=1e-12)
    assert bounds.cluster_sizes(D, cr.medoids).tolist() == cr.tau.tolist()


# ----------------------------------------------------------------------- Lemma 3.2 on real data
@pytest.fixture(scope="module")
def mutag40(mutag):
    from tmdlib.distance import tmd_matrix

    sub = mutag.take(np.arange(40))
    return sub, tmd_matrix(sub, depth=4, weights="pascal")


def _losses(model, ds, y):
    from tmdlib.torch.gin import bce_losses, predict_logits
    from tmdlib.torch.pyg import to_pyg

    z = predict_logits(model, [to_pyg(g, dtype=torch.float64) for g in ds])
    return bce_losses(z, y)


@pytest.mark.parametrize("k", [4, 10])
def test_lemma_3_2_random_models_mutag(mutag40, k):
    from tmdlib.select import kmedoids_coreset
    from tmdlib.torch.gin import GIN, lipschitz_bound

    ds, D = mutag40
    cr = kmedoids_coreset(D, k, seed=0)
    for seed in range(3):
        torch.manual_seed(seed)
        model = GIN(ds.num_features, hidden=32, layers=3).double()
        c = lipschitz_bound(model, M=1.0)["c"]
        L = _losses(model, ds, ds.y)
        gap = bounds.coreset_gap(L, cr.medoids, cr.tau)
        assert gap["tau_sum"] == len(ds)
        assert gap["gap"] <= bounds.lemma_bound(c, cr.epsilon) * (1 + 1e-9)
        # the per-graph step of the proof: |L_i - L_a(i)| <= c * TMD(G_i, G_a(i)) (BCE is 1-Lipschitz)
        a = cr.assignment
        assert np.all(np.abs(L - L[a]) <= c * D[np.arange(len(ds)), a] * (1 + 1e-9) + 1e-12)
        # The lemma's proof scores each graph and its medoid with the SAME label.  With labels that differ
        # from the medoid's an extra label term appears (tmdlib.torch.certified.label_aware_gap); an unconstrained
        # GIN's huge c hides it, a certified one does not.  Check the label-consistent form on random labels:
        yr = np.random.default_rng(seed).integers(0, 2, len(ds)).astype(float)
        consistent = _losses(model, ds, yr[a])  # graph i scored with its medoid's label
        assert bounds.coreset_gap(consistent, cr.medoids, cr.tau)["gap"] <= c * cr.epsilon * (1 + 1e-9)


def test_lemma_3_2_trained_model_and_corollary(mutag40):
    from tmdlib.select import kmedoids_coreset
    from tmdlib.torch.gin import TrainConfig, lipschitz_bound, train_gin
    from tmdlib.torch.pyg import to_pyg

    ds, D = mutag40
    cr = kmedoids_coreset(D, 8, seed=0)
    cfg = TrainConfig(hidden=32, epochs=10, seed=0, device="cpu")
    core = [to_pyg(ds[int(i)], ds.y[i], weight=float(t)) for i, t in zip(cr.medoids, cr.tau)]
    m_core = train_gin(core, cfg).model.double()
    m_full = train_gin([to_pyg(g, y) for g, y in zip(ds, ds.y)], cfg).model.double()
    c_core, c_full = lipschitz_bound(m_core)["c"], lipschitz_bound(m_full)["c"]
    L_core, L_full = _losses(m_core, ds, ds.y), _losses(m_full, ds, ds.y)
    assert bounds.coreset_gap(L_core, cr.medoids, cr.tau)["gap"] <= c_core * cr.epsilon
    excess = bounds.excess_loss(L_core.mean(), L_full.mean())
    assert excess <= bounds.erm_bound(max(c_core, c_full), cr.epsilon)


# ------------------------------------------------------------------------- flows (train, evaluate)
def test_evaluate_on_a_sample_of_a_large_pool(tmp_path):
    """--sample: the coreset is scored exactly, the full training loss is a sample estimate with its standard
    error, the reference model is marked as trained on the sample, and the numbers are those of the sample."""
    from flows.evaluate import evaluate_flow
    from flows.train import train_flow
    from tasks.train import load_model
    from tmdlib.torch.gin import bce_losses as bounds_losses
    from tmdlib.guarantees import _bounds as bounds
    from tmdlib.torch.gin import predict_logits
    from tmdlib.torch.pyg import dataset_to_pyg
    from flows.config.evaluate import EvaluateStageConfig
    from flows.config.train import TrainStageConfig

    inp = make_inputs(tmp_path / "in", n_train=90, n_test=50)
    out = tmp_path / "out"
    train_flow(inp["graphs"], inp["selection"], inp["labels"], str(out / "model.pt"), str(out / "train.json"),
               cfg=TrainStageConfig(epochs=3, hidden=16, log_mlflow=False))
    m = evaluate_flow(inp["graphs"], inp["selection"], str(out / "model.pt"), str(out / "train.json"),
                      str(out / "m.json"), str(out / "p.png"), matrix=inp["matrix"],
                      cfg=EvaluateStageConfig(fractions="0.5", sweep_epochs=2, log_mlflow=False, sample=40))
    n_train = len(inp["sel"]["train_ids"])
    assert m["n_train"] == n_train and m["sample"]["train_sample"] == 40 and m["sample"]["n_train"] == n_train
    assert m["test"]["n"] == min(40, len(inp["sel"]["test_ids"])) and "sample of 40" in m["test"]["full_model_trained_on"]
    b = m["bound"]
    assert b["sampled"] == 40 and b["n_train"] == n_train and b["coreset_model_train_loss_stderr"] > 0
    assert m["sweep"] == [] and b["epsilon_matrix"] is None  # no matrix check at this size
    # by hand: the same seeded sample, the model's losses
    ds, sel, train = inp["ds"], inp["sel"], inp["train"]
    rng = np.random.default_rng(m["seed"])
    pick = np.sort(rng.choice(n_train, size=40, replace=False))
    info = json.loads((out / "train.json").read_text())
    net = load_model(str(out / "model.pt"), info).model
    y = ds.y[train]
    L = bounds_losses(predict_logits(net, dataset_to_pyg(ds, positions=train, y=y)), y)
    pos = {int(g): k for k, g in enumerate(ds.graph_ids[train])}
    subset = np.array([pos[g] for g in sel["medoids"]])
    assert b["coreset_model_train_loss"] == pytest.approx(L[pick].mean(), rel=1e-5)
    assert b["weighted_loss"] == pytest.approx(bounds.weighted_subset_loss(L, subset, sel["tau"]), rel=1e-5)
    assert b["coreset_model_train_loss_stderr"] == pytest.approx(L[pick].std(ddof=1) / np.sqrt(40), rel=1e-4)


def test_bad_selection_and_labels(tmp_path):
    from tasks.io import read_labels, read_selection
    from tmdlib import InputError

    p = tmp_path / "sel.json"
    base = {"train_ids": [0, 1, 2], "test_ids": [3], "medoids": [1], "tau": [3.0], "epsilon": 0.5}
    for bad, msg in [({"medoids": [3]}, "not in 'train_ids'"), ({"tau": [1.0, 2.0]}, "aligned"),
                     ({"test_ids": [2]}, "overlap"), ({"medoids": [1.5]}, "not an integer"),
                     ({"epsilon": "x"}, "epsilon")]:
        p.write_text(json.dumps({**base, **bad}))
        with pytest.raises(InputError, match=msg):
            read_selection(str(p))
    p.write_text("{not json")
    with pytest.raises(InputError, match="JSON"):
        read_selection(str(p))
    lab = tmp_path / "labels.csv"
    lab.write_text("graph_id,y\n1,1.0\n2,0.5\n")
    with pytest.raises(InputError, match=r"labels.csv:3: .*binary"):
        read_labels(str(lab))
    lab.write_text("graph_id,y\n1,1\n1,0\n")
    with pytest.raises(InputError, match="duplicate graph_id 1 on lines 2, 3"):
        read_labels(str(lab))
    lab.write_text("graph_id,y\n1,1\n2,0\n")
    labels, meta = read_labels(str(lab))
    assert labels == {1: 1.0, 2: 0.0} and meta == {"source": "unknown"}


def test_small_parsers():
    from flows.config.evaluate import parse_fractions
    from tmdlib.datasets import metric_for
    from tmdlib import InputError

    assert parse_fractions("0.5, 0.1,0.5") == [0.1, 0.5] and parse_fractions("") == [] and parse_fractions(None) == []
    for bad in ("0", "1.5", "x"):
        with pytest.raises(InputError):
            parse_fractions(bad)
    assert metric_for("ogbg-molbace") == "rocauc" and metric_for("MUTAG") == "accuracy"
