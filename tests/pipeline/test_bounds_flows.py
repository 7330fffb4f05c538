"""The train / evaluate flows and the CLI commands behind the loss guarantees (the library side:
lib/guarantees/test_bounds.py)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import make_inputs

torch.set_num_threads(1)


def test_train_and_evaluate_flows(tmp_path):
    from flows.evaluate import evaluate_flow
    from flows.train import train_flow
    from flows.config.evaluate import EvaluateStageConfig
    from flows.config.train import TrainStageConfig

    inp = make_inputs(tmp_path / "in", with_nodes=True)
    out = tmp_path / "out"
    info = train_flow(inp["graphs"], inp["selection"], inp["labels"], str(out / "model.pt"), str(out / "train.json"),
                      cfg=TrainStageConfig(epochs=4, hidden=16, log_mlflow=False))
    saved = json.loads((out / "train.json").read_text())
    assert saved["labels_source"] == "benchmark-standin" and saved["labels_used"] == len(inp["sel"]["medoids"])
    assert len(saved["losses"]) == 4 and saved["device"] == "cpu"
    assert saved["lipschitz"]["valid"] and len(saved["lipschitz"]["per_layer"]) == 4
    assert saved["lipschitz"]["c"] == pytest.approx(float(np.prod(saved["lipschitz"]["per_layer"])))
    assert saved["config"]["batch_size"] == 16 and saved["model"]["hidden"] == 16
    assert info["model_sha256"] == saved["model_sha256"]

    m = evaluate_flow(inp["graphs"], inp["selection"], str(out / "model.pt"), str(out / "train.json"),
                      str(out / "metrics.json"), str(out / "bound_vs_gap.png"), matrix=inp["matrix"],
                      cfg=EvaluateStageConfig(fractions="0.1,0.5", sweep_epochs=3, log_mlflow=False))
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["labels_for_evaluation"] == "dataset (benchmark mode)"
    assert saved["test"]["metric"] == "accuracy" and 0.0 <= saved["test"]["coreset_model"] <= 1.0
    b = saved["bound"]
    assert b["epsilon"] == pytest.approx(inp["sel"]["epsilon"]) == pytest.approx(b["epsilon_matrix"])  # old format
    assert b["tau_matches_tmd_assignment"] and b["lemma_applies"] and b["valid"]
    assert b["c_epsilon"] == pytest.approx(b["c"] * b["epsilon"])
    assert b["erm_bound"] == pytest.approx(2 * max(b["c"], b["c_full_model"]) * b["epsilon"])
    assert b["excess_loss"] == pytest.approx(b["coreset_model_train_loss"] - b["full_model_train_loss"])
    assert b["lemma_holds"] and b["gap_observed"] <= b["c_epsilon"]
    assert [p["fraction"] for p in saved["sweep"]] == [0.1, 0.5]
    assert all(p["gap_observed"] <= p["c_epsilon"] for p in saved["sweep"])
    assert (out / "bound_vs_gap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert m["bound"]["c"] == b["c"]
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary files left

    # node-subsampled training and Corollary 4.1
    train_flow(inp["graphs"], inp["selection"], inp["labels"], str(out / "mn.pt"), str(out / "tn.json"),
               nodes=inp["nodes"], cfg=TrainStageConfig(epochs=3, hidden=16, log_mlflow=False))
    tn = json.loads((out / "tn.json").read_text())
    assert tn["node_subsampling"] and tn["node_epsilon_mean"] > 0
    mn = evaluate_flow(inp["graphs"], inp["selection"], str(out / "mn.pt"), str(out / "tn.json"), str(out / "mn.json"),
                       str(out / "mn.png"), nodes=inp["nodes"], cfg=EvaluateStageConfig(log_mlflow=False))
    nd = mn["nodes"]
    assert nd["bound"] == pytest.approx(nd["c"] * nd["epsilon_mean"])
    assert nd["per_graph_violations"] == 0 and nd["lemma_holds"] and nd["gap_observed"] <= nd["bound"]
    assert mn["bound"]["erm_bound_with_nodes"] > mn["bound"]["erm_bound"]
    assert mn["sweep"] == [] and mn["bound"]["tau_matches_tmd_assignment"] is None


def test_training_reads_only_the_label_file(tmp_path):
    """The store has no labels at all: training works from labels.csv; a missing label is an error."""
    from flows.train import train_flow
    from tmdlib import InputError
    from flows.config.evaluate import EvaluateStageConfig
    from flows.config.train import TrainStageConfig

    inp = make_inputs(tmp_path / "in", n_train=20, n_test=5, labels_nan=True)
    out = tmp_path / "out"
    info = train_flow(inp["graphs"], inp["selection"], inp["labels"], str(out / "model.pt"), str(out / "t.json"),
                      cfg=TrainStageConfig(epochs=2, hidden=8, log_mlflow=False))
    assert info["labels_used"] == len(inp["sel"]["medoids"])
    lines = Path(inp["labels"]).read_text().splitlines()
    Path(inp["labels"]).write_text("\n".join(lines[:-1]) + "\n")
    # a medoid without a label: a selection without its certificate's assignment cannot be reweighted (the
    # pipeline's selections can: tests/pipeline/test_production_flows.py trains on partial answers)
    with pytest.raises(InputError, match="no label.*no assignment to reweight by"):
        train_flow(inp["graphs"], inp["selection"], inp["labels"], str(out / "m2.pt"), str(out / "t2.json"),
                   cfg=TrainStageConfig(epochs=1, hidden=8, log_mlflow=False))
    assert not (out / "m2.pt").exists()
    Path(inp["labels"]).write_text(lines[0] + "\n")
    with pytest.raises(InputError, match="none of the .* selected graphs has a label"):
        train_flow(inp["graphs"], inp["selection"], inp["labels"], str(out / "m3.pt"), str(out / "t3.json"),
                   cfg=TrainStageConfig(epochs=1, hidden=8, log_mlflow=False))
    assert not (out / "m3.pt").exists()
    # a store without labels is production: evaluation measures nothing the lab did not label
    from flows.evaluate import evaluate_flow

    m = evaluate_flow(inp["graphs"], inp["selection"], str(out / "model.pt"), str(out / "t.json"), str(out / "m.json"),
                      str(out / "p.png"), cfg=EvaluateStageConfig(log_mlflow=False))
    assert m["mode"] == "production" and m["test"]["coreset_model"] is None
    assert m["pool_estimate"]["value"] is None and "no audit sample" in m["pool_estimate"]["note"]


def test_commands_are_typer_compatible(tmp_path):
    """train_command / evaluate_command register on a Typer app; bad input exits 2 with one error line."""
    import typer
    from typer.testing import CliRunner

    from flows.evaluate import evaluate_command
    from flows.train import train_command

    app = typer.Typer()
    app.command("train")(train_command)
    app.command("evaluate")(evaluate_command)
    runner = CliRunner()
    help_text = runner.invoke(app, ["train", "--help"]).output
    assert "--selection" in help_text and "--torch-threads" in help_text
    assert "--fractions" in runner.invoke(app, ["evaluate", "--help"]).output
    (tmp_path / "sel.json").write_text("[]")
    res = runner.invoke(app, ["train", "--graphs", str(tmp_path / "missing.parquet"), "--selection",
                              str(tmp_path / "sel.json"), "--labels", str(tmp_path / "l.csv"), "--model-out",
                              str(tmp_path / "m.pt"), "--info-out", str(tmp_path / "t.json"), "--no-mlflow"])
    assert res.exit_code == 2 and "error:" in res.output
    res = runner.invoke(app, ["train", "--graphs", "g", "--selection", "s", "--labels", "l", "--model-out", "m",
                              "--info-out", "t", "--epochs", "-1", "--no-mlflow"])
    assert res.exit_code == 2 and "--epochs" in res.output
    assert not (tmp_path / "m.pt").exists()
