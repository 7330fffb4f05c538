"""``tmdsub summary`` opens with the verdict on the loss bounds (DVC and MLflow replaced by their answers)."""
from __future__ import annotations

import json
import re

import pytest

from flows import summary

METRICS = {"test": {"metric": "accuracy", "coreset_model": 0.7631, "full_model": 0.7895},
           "certified": False,
           "bound": {"epsilon": 56.853, "c": 2065.7, "c_epsilon": 117444.7, "gap_observed": 2.1825, "lemma_holds": True,
                     "erm_bound": 2157798.0, "excess_loss": 1.99955, "corollary_holds": True, "certified": False,
                     "full_model_train_loss": 0.452, "valid": True}}
NODES = {**METRICS, "nodes": {"epsilon_mean": 356.58, "bound": 855498.4, "gap_observed": 4.6489, "lemma_holds": True,
                              "erm_bound": 1710996.8, "excess_loss": 0.3, "corollary_holds": True}}


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    outs = [("evaluate@MUTAG", ["data/metrics/MUTAG/metrics.json", "data/metrics/MUTAG/bound_vs_gap.png"]),
            ("evaluate_nodes@MUTAG", ["data/metrics/MUTAG/metrics_nodes.json"]),
            ("evaluate@COX2", ["data/metrics/COX2/metrics.json"])]
    monkeypatch.setattr(summary, "stage_outputs", lambda root=".": outs)
    monkeypatch.setattr(summary, "latest_runs", lambda *a, **k: [])
    monkeypatch.setattr(summary, "registered_models", lambda *a, **k: [])
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    return tmp_path


def _write(root, path, doc):
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(json.dumps(doc))


def test_summary_opens_with_the_verdict(workspace):
    _write(workspace, "data/metrics/MUTAG/metrics.json", METRICS)
    _write(workspace, "data/metrics/MUTAG/metrics_nodes.json", NODES)
    certified = {**METRICS, "certified": True,
                 "bound": {**METRICS["bound"], "certified": True, "constraint_ok": True, "c": 0.004, "c_epsilon": 0.23}}
    _write(workspace, "data/metrics/COX2/metrics.json", certified)
    lines = summary.summary_text(str(workspace)).splitlines()
    assert lines[0].startswith("Verdict on the loss bounds")
    assert lines[1] == "  data/metrics/MUTAG/metrics.json:"
    assert lines[2].startswith("    Lemma 3.2 (coreset loss gap): Bound vacuous: c·ε = 1.174e+05 ≥ loss scale 0.452")
    text = "\n".join(lines)
    assert "Corollary 4.1 (node subsampling, loss gap): Bound vacuous: c·mean ε_i = 8.555e+05" in text
    assert "Bound informative: c·ε (certified c) = 0.23 < loss scale 0.452" in text
    assert not re.search(r"holds\W*yes", text, re.I)
    assert text.index("Verdict") < text.index("Artifacts (from dvc.yaml):") < text.index("test accuracy 0.763")


def test_summary_before_any_metrics_and_without_epsilon(workspace):
    lines = summary.summary_text(str(workspace)).splitlines()
    assert lines[:2] == ["Verdict on the loss bounds (informative: below the loss scale; vacuous: true but says "
                         "nothing):", "  (no metrics yet: run the pipeline up to evaluate, dvc repro)"]
    no_eps = {**METRICS, "bound": {"c": 2065.7, "gap_observed": 2.18, "full_model_train_loss": 0.452}}
    _write(workspace, "data/metrics/MUTAG/metrics.json", no_eps)
    text = summary.summary_text(str(workspace))
    assert "Lemma 3.2 (coreset loss gap): Bound unknown: no ε was recorded" in text
    assert "eps n/a, c*eps n/a, observed gap 2.18" in text  # no crash on the missing numbers
