"""The audit sample, the pool estimate and its interval, split-conformal predictions."""
from __future__ import annotations

import numpy as np
import pytest

from tmdlib.datasets import TaskSpec
from tmdlib.models.evaluate import pool_estimate
from tmdlib.select.audit import audit_members, audit_size, default_audit_size, graph_keys


def test_audit_members_depend_on_ids_and_seed_only_and_are_uniform():
    ids = np.arange(10_000) * 7 + 3
    a = audit_members(ids, 500, seed=0)
    assert len(a) == 500 and np.all(np.diff(a) > 0)
    assert np.array_equal(audit_members(ids[::-1].copy(), 500, 0), np.sort(len(ids) - 1 - a))  # order-free
    grown = audit_members(np.concatenate([ids, np.arange(10_000, 10_100) * 7 + 3]), 500, 0)
    assert len(np.intersect1d(grown, a)) >= 490  # a grown pool keeps (almost) all of its audit members
    assert not np.array_equal(audit_members(ids, 500, seed=1), a)
    k = graph_keys(ids)
    counts = np.histogram(k, bins=10, range=(0, 1))[0]
    assert counts.min() > 850 and counts.max() < 1150  # uniform
    assert default_audit_size(1282) == 65 and default_audit_size(100) == 20 and default_audit_size(100_000) == 200
    assert audit_size(0.05, 1000) == 50 and audit_size("40", 1000) == 40 and audit_size("0", 1000) == 0
    with pytest.raises(ValueError):
        audit_size(-1, 10)


def test_pool_estimate_interval_covers_the_pool_metric_at_about_the_nominal_rate():
    rng = np.random.default_rng(0)
    pool_y = rng.normal(size=20_000)
    pool_pred = pool_y + rng.normal(scale=0.5, size=20_000)
    truth = float(np.sqrt(np.mean((pool_pred - pool_y) ** 2)))
    hits = 0
    for t in range(40):
        idx = rng.choice(20_000, size=150, replace=False)
        est = pool_estimate(pool_pred[idx, None], pool_y[idx], "regression", confidence=0.9, n_boot=300, seed=t)
        assert est["ci_low"] <= est["value"] <= est["ci_high"] and est["n_audit"] == 150
        hits += est["ci_low"] <= truth <= est["ci_high"]
    assert hits >= 30  # nominal 36 of 40


def test_pool_estimate_says_why_there_is_no_interval():
    est = pool_estimate(np.zeros((1, 1)), np.array([1.0]), "regression")
    assert est["value"] == pytest.approx(1.0) and est["ci_low"] is None and "no interval" in est["note"]
    est = pool_estimate(np.zeros((0, 1)), np.zeros(0), "regression")
    assert est["value"] is None and "nothing to estimate" in est["note"]


def test_conformal_regression_covers_new_members_at_the_nominal_rate():
    pytest.importorskip("crepes")
    from tmdlib.models.predict import calibrate

    rng = np.random.default_rng(1)
    y = rng.normal(size=5000)
    pred = y + rng.standard_t(3, size=5000) * 0.3
    cal = calibrate(pred[:300, None], y[:300], TaskSpec("regression"), confidence=0.9)
    p = cal.predict(pred[300:, None])
    covered = np.mean((p["lower"][:, 0] <= y[300:]) & (y[300:] <= p["upper"][:, 0]))
    assert 0.87 <= covered <= 0.93 and cal.n_calibration == 300 and cal.note is None


def test_conformal_classification_sets_hold_the_true_class():
    pytest.importorskip("crepes")
    from tmdlib.models.predict import calibrate

    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, size=4000)
    logit = (2 * y - 1) * 1.0 + rng.normal(size=4000)
    cal = calibrate(logit[:400, None], y[:400], TaskSpec("binary"), confidence=0.9)
    p = cal.predict(logit[400:, None])
    hold = np.mean([float(t) in s for t, s in zip(y[400:], p["prediction_set"])])
    assert hold >= 0.87 and p["probabilities"].shape == (3600, 2)
    few = calibrate(logit[:1, None], y[:1], TaskSpec("binary"))
    assert few.predict(logit[:3, None])["prediction_set"] is None and "fewer than 2" in few.note


def test_a_model_worse_than_the_mean_is_reported_and_its_bound_never_called_informative():
    """Issue 61: the production evaluation scores the constant predictor (the τ-weighted mean of the coreset's labels)
    on the audit sample with the model's metric; a model worse than it is said so, and a c·ε below the loss scale is
    then 'worse than constant', not 'informative'."""
    from tmdlib.models.evaluate import compare_with_constant, constant_outputs
    from tmdlib.reporting.verdict import coreset_verdicts, verdict_lines

    task = TaskSpec("regression")
    rng = np.random.default_rng(0)
    y_train, y_audit = rng.normal(5, 1, 80), rng.normal(5, 1, 60)
    const, what = constant_outputs(task, y_train, np.full(80, 2.0), len(y_audit))
    assert const.shape == (60, 1) and np.allclose(const, y_train.mean()) and "mean" in what
    bad = pool_estimate((y_audit + rng.normal(0, 2.3, 60))[:, None], y_audit, "regression", confidence=0.9)
    good = pool_estimate((y_audit + rng.normal(0, 0.3, 60))[:, None], y_audit, "regression", confidence=0.9)
    worse = compare_with_constant(bad, const, y_audit, task, what)
    better = compare_with_constant(good, const, y_audit, task, what)
    assert worse["worse"] is True and worse["sentence"].startswith("worse than predicting the mean")
    assert better["worse"] is False and worse["value"] == pytest.approx(better["value"])
    assert worse["value"] == pytest.approx(float(np.sqrt(np.mean((y_audit - y_train.mean()) ** 2))))
    bound = {"c_epsilon": 0.01, "loss_scale": 1.0, "loss_scale_what": "the mean's loss", "certified": True,
             "constraint_ok": True, "valid": True}
    assert coreset_verdicts(bound)["lemma"]["verdict"] == "informative"
    v = coreset_verdicts({**bound, "worse_than_constant": True, "constant_note": worse["sentence"]})["lemma"]
    assert v["verdict"] == "worse than constant" and not v["informative"] and "informative" not in v["sentence"][:20]
    assert "worse than predicting the mean" in v["sentence"]
    lines = verdict_lines({"pool_estimate": bad, "constant_predictor": worse, "bound": bound, "mode": "production"})
    assert lines[1].startswith("Constant predictor: worse than predicting the mean")
    # classes: the majority class (binary: the logit of the positive rate; multi-class: the log frequencies)
    p, _ = constant_outputs(TaskSpec("binary"), np.array([1, 1, 1, 0.0]), None, 3)
    assert np.allclose(1 / (1 + np.exp(-p)), 0.75)
    q, w = constant_outputs(TaskSpec("multiclass", classes=(0, 1, 2)), np.array([2, 2, 0.0]), None, 2)
    assert q.shape == (2, 3) and q[0].argmax() == 2 and "majority" in w


def test_production_measurement_of_a_model_worse_than_the_mean_calls_no_bound_informative():
    """The issue-61 case end to end through :func:`production_measurement`: a model far off (here an SVM trained on
    labels shifted by 3 log units) with a tiny certified c·ε: its estimate is worse than the constant's, and the
    verdict on c·ε is 'worse than constant', not 'informative'."""
    pytest.importorskip("rdkit")
    import csv

    from helpers import RAW
    from tmdlib.models import Inputs, get_model
    from tmdlib.models.evaluate import production_measurement
    from tmdlib.reporting.verdict import verdict_lines

    rows = list(csv.DictReader(open(RAW / "MoleculeACE" / "CHEMBL204_Ki.csv", newline="")))[:160]
    smiles, y = [r["smiles"] for r in rows], np.array([float(r["y"]) for r in rows])
    task = TaskSpec("regression")
    core, audit = np.arange(100), np.arange(100, 160)
    model = get_model("svm").build().fit(Inputs(smiles=[smiles[i] for i in core]), y[core] + 3.0, task=task)
    model.certificate = lambda: {"c": 1e-6, "certified": True, "constraint_ok": True, "valid": True}
    m = production_measurement(model, Inputs(smiles=[smiles[i] for i in core]), y[core], np.ones(100),
                               Inputs(smiles=[smiles[i] for i in audit]), y[audit], n_pool=160, epsilon=10.0)
    const = m["constant_predictor"]
    assert const["worse"] is True and m["pool_estimate"]["value"] > const["value"]
    assert m["bound"]["worse_than_constant"] is True and m["bound"]["c_epsilon"] < m["bound"]["loss_scale"]
    lines = verdict_lines({**m, "mode": "production"})
    assert "worse than predicting the mean" in lines[1]
    assert lines[2].startswith("Lemma 3.2 (coreset loss gap): Bound not informative")


def test_calibration_members_and_a_pool_chunk():
    """Production calibrates on the labelled audit members, benchmark mode on the test split; a chunk of the pool's
    predictions carries its ids, SMILES, compound ids, columns and whether each member is labelled."""
    from tmdlib.datasets._task import BINARY
    from tmdlib.models.predict import calibration_members, pool_chunk

    ids = np.array([10, 11, 12, 13], dtype=np.int64)
    sel = {"audit_ids": [12, 13], "test_ids": [11, 10]}
    pos, y, what = calibration_members(ids, sel, BINARY, labels={13: 1.0}, where="labels.csv")
    assert pos.tolist() == [3] and y.tolist() == [1.0] and what.startswith("1 labelled audit graphs")
    pos, y, what = calibration_members(ids, sel, BINARY, y=np.array([[0.0], [1.0], [0.0], [1.0]]))
    assert pos.tolist() == [1, 0] and y.tolist() == [1.0, 0.0] and what.startswith("2 test-split graphs")
    t = pool_chunk(ids[:2], {"prediction": [0.1, 0.9]}, np.array([11]), ["C", "CC"], ["a", None])
    assert t.column_names == ["graph_id", "smiles", "compound_id", "prediction", "labelled"]
    assert t.column("labelled").to_pylist() == [False, True]
    assert pool_chunk(ids[:1], {}, np.array([], dtype=np.int64)).column_names == ["graph_id", "labelled"]


def test_the_table_of_a_users_smiles_file():
    from types import SimpleNamespace

    from tmdlib.models.predict import smiles_table

    rows = SimpleNamespace(line=[2, 3], smiles=["CCO", None], reason=[None, "no molecule"])
    t = smiles_table(rows, {"prediction": [0.5, None]})
    assert t.column_names == ["line", "smiles", "prediction", "reason"]
    assert t.column("reason").to_pylist() == [None, "no molecule"]
