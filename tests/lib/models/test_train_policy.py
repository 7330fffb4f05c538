"""The train stage's model policy as pure functions (tmdlib.models.policy, tmdlib.torch.options,
tmdlib.select.answered): what ``auto`` trains, the certified setting, the weights, the champion rule, the control
arms' split."""
from __future__ import annotations

import numpy as np
import pytest

from tmdlib import InputError
from tmdlib.datasets import TaskSpec
from tmdlib.models.evaluate import control_arms, production_members
from tmdlib.models.policy import (certified_asked, certified_setting, champion_decision, model_for, parse_target,
                                  recipe_for, train_model)
from tmdlib.models import default_model, get_model
from tmdlib.models._registry import SVM_MAX_TRAIN, graph_default
from tmdlib.select.answered import training_weights


def test_auto_is_the_registry_default_and_a_name_is_kept():
    reg = TaskSpec("regression")
    for molecules in (False, True):
        for budget, target in (("none", None), ("0.5", None), ("0", 0.25)):
            certified = certified_asked(budget, target)
            assert model_for("auto", budget, target, molecules, reg) == default_model(molecules, reg, certified)
            assert model_for(None, budget, target, molecules, reg) == graph_default(certified)
    assert model_for("auto", "none", None, True, reg, n_train=SVM_MAX_TRAIN + 1) == "lgbm"
    assert model_for("auto", "none", None, True, reg, graphs_only=True) == graph_default(False)
    assert model_for("auto", "none", None) == graph_default(False)  # no task: checked before any file is read
    assert model_for("rf", "0.5", None, True, reg) == "rf"
    assert train_model("auto", "none", None, True, reg, nodes=True) == (get_model(graph_default(False)), None)
    spec, note = train_model("svm", "0.5", None, True, reg, nodes=True)  # a named molecule model gives way
    assert spec.name == graph_default(True) and "node subsampling" in note
    assert train_model("auto", "none", None, True, reg, nodes=False) == (get_model("svm"), None)


def test_target_recipe_and_certified_setting():
    assert [parse_target(t) for t in (None, "", "0", "off", 0, "0.25")] == [None] * 5 + [0.25]
    for bad in ("-1", "x", float("inf")):
        with pytest.raises(InputError):
            parse_target(bad)
    assert recipe_for("certified-gin", "auto") == get_model("certified-gin").auto_recipe
    assert recipe_for("svm", "auto") == "default" and recipe_for("gin", "paper-b2") == "paper-b2"
    cert = get_model("certified-gin")
    assert certified_setting(get_model("gin"), "0.5", "ball", None) == (None, None)
    assert certified_setting(cert, "0.5", None, None) == ("0.5", None)
    assert certified_setting(cert, "none", None, 0.25) == (cert.defaults.get("lipschitz_budget"), None)
    assert certified_setting(cert, "none", None, None) == (cert.defaults.get("lipschitz_budget"),
                                                           cert.defaults.get("lipschitz_mode"))


def test_training_weights_follow_the_selection_mode():
    w, how = training_weights([3.0, 1.0], "auto", {"mode": "benchmark"})
    assert how == "tau" and w.tolist() == [3.0, 1.0]
    w, how = training_weights([3.0, 1.0], "auto", {"mode": "production"})
    assert how == "none" and w.tolist() == [1.0, 1.0]


def test_champion_rule():
    assert champion_decision("rmse", None, "1", "rmse", 0.5)[0] is False
    assert champion_decision("rmse", 0.6, None, None, None)[0] is True
    assert champion_decision("rmse", 0.6, "1", "roc_auc", 0.9)[0] is True
    assert champion_decision("rmse", 0.5, "1", "rmse", 0.5)[0] is True
    assert champion_decision("rmse", 0.6, "1", "rmse", 0.5) == (False, "test rmse 0.6 > 0.5 of champion v1 (worse)")
    assert champion_decision("roc_auc", 0.9, "1", "roc_auc", 0.8)[0] is True


def test_champion_verdict_reads_the_versions_tags():
    from tmdlib.models.policy import champion_verdict, decision_line, registered_version

    new = {"test_metric": "rmse", "test_value": "0.6"}
    v = champion_verdict("2", new, "1", {"test_metric": "rmse", "test_value": "0.5"})
    assert v == {"metric": "rmse", "value": 0.6, "champion_before": "1", "champion_value": 0.5, "promoted": False,
                 "reason": "test rmse 0.6 > 0.5 of champion v1 (worse)"}
    assert champion_verdict("2", new, None, {})["promoted"] is True
    assert champion_verdict("2", {"test_value": "nan"}, None, {})["value"] is None
    assert champion_verdict("1", new, "1", new)["reason"] == "already the champion"
    assert decision_line(False, "worse", "run 3") == "Champion decision (run 3): not promoted - worse."
    assert registered_version({"mlflow": {"model": {"registered_model": "m", "version": "4"}}}) == ("m", "4")
    assert registered_version({}) == (None, None)


class _Model:
    def __init__(self, inputs):
        self.inputs, self.name = inputs, "svm"


def test_control_arms_split_the_round_and_production_members_keep_the_labelled():
    sel = {"medoids": [1, 2, 3, 4, 5, 6], "tau": [1, 1, 1, 1, 1, 1], "audit_ids": [7, 8, 9],
           "rounds": {"control_ids": [4, 5], "strategy_new_ids": [6]}}
    labels = {g: float(g) for g in (1, 2, 4, 6, 7, 9)}
    med, tau, audit = production_members({}, sel, labels)
    assert med.tolist() == [1, 2, 4, 6] and tau.tolist() == [1, 1, 1, 1] and audit.tolist() == [7, 9]
    seen = {}

    def fake(make, inputs_of, labels_of, base, control, strategy, audit, task, **kw):
        seen.update(base=base.tolist(), control=control.tolist(), strategy=strategy.tolist(), audit=list(audit))
        return {"verdict": "undecided"}

    import tmdlib.models.evaluate as ev

    real, ev.compare_arms = ev.compare_arms, fake
    try:
        out = control_arms(_Model("molecules"), "svm", sel, labels, audit, TaskSpec("regression"), None, None,
                           confidence=0.9, seed=0)
    finally:
        ev.compare_arms = real
    assert out == {"verdict": "undecided"}
    assert seen == {"base": [1, 2], "control": [4], "strategy": [6], "audit": [7, 9]}
    assert control_arms(_Model("graphs"), "gin", sel, labels, audit, None, None, None, confidence=0.9,
                        seed=0)["verdict"] == "undecided"
    assert control_arms(_Model("molecules"), "svm", {**sel, "rounds": {}}, labels, audit, None, None, None,
                        confidence=0.9, seed=0) is None
    assert "not compared" in control_arms(_Model("molecules"), "nope", sel, labels, audit, None, None, None,
                                          confidence=0.9, seed=0)["note"]
    assert np.asarray(audit).dtype == np.int64


def test_evaluation_tags():
    from tmdlib.models.policy import evaluation_tags, tagged_value

    assert evaluation_tags("rmse", None) == {"test_metric": "rmse", "test_value": "nan"}
    tags = evaluation_tags("rmse", 0.25, "run-1")
    assert tags["evaluate_run_id"] == "run-1" and tagged_value(tags) == 0.25
