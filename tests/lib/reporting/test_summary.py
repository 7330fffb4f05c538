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


def test_summary_names_the_stages_another_tmdsub_made_and_the_rerun(workspace, monkeypatch):
    """Issue 70 item 6: each stage's JSON records the tmdsub that wrote it; summary compares it with the installed
    one and params.yaml's tool.version and says how to rerun."""
    from tasks import io

    monkeypatch.setattr(io, "tool_version", lambda: "0.2.0")
    stages = [("select@POOL", ["data/selection/POOL/selection.json"]), ("tmd@POOL", ["data/tmd/POOL"]),
              ("train@POOL", ["data/models/POOL/model.pt", "data/models/POOL/train.json"]),
              ("ingest@POOL", ["data/graphs/POOL.parquet"])]
    _write(workspace, "data/selection/POOL/selection.json", io.stamped({"k": 3}))  # the installed version
    _write(workspace, "data/tmd/POOL/meta.json", {"graphs": 9, io.VERSION_FIELD: "0.1.0"})
    _write(workspace, "data/models/POOL/train.json", {"model": "svm"})  # before versions were recorded
    (workspace / "params.yaml").write_text('tool:\n  version: "0.1.0"   # a comment\n')
    lines = summary.version_lines(stages, str(workspace))
    assert lines[0] == "Tool version: tmdsub 0.2.0; params.yaml tool.version 0.1.0"
    assert lines[1] == ("  stale, made by another version: tmd@POOL (tmdsub 0.1.0), train@POOL (no version recorded: "
                        "made before tmdsub recorded it)")
    assert "`tmdsub upgrade` (sets tool.version: 0.2.0 in params.yaml), then `dvc repro`" in lines[2]
    from flows.project import upgrade_project

    assert upgrade_project(workspace) == {"path": str(workspace / "params.yaml"), "previous": "0.1.0",
                                          "version": "0.2.0"}
    assert (workspace / "params.yaml").read_text() == 'tool:\n  version: "0.2.0"   # a comment\n'
    assert summary.version_lines(stages, str(workspace))[2] == (
        "  to rerun them: `dvc repro` (tool.version is the installed one: DVC reruns every stage)")
    for p in ("data/tmd/POOL/meta.json", "data/models/POOL/train.json"):
        _write(workspace, p, io.stamped({}))
    assert summary.version_lines(stages, str(workspace)) == [
        "Tool version: tmdsub 0.2.0; params.yaml tool.version 0.2.0; every stage's output was made by it"]
    (workspace / "params.yaml").write_text("base: {}\n")  # the checkout: no tool.version, nothing to upgrade
    with pytest.raises(Exception, match="no tool.version"):
        upgrade_project(workspace)
