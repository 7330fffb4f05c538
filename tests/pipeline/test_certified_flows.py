"""The train and evaluate flows in certified mode (the library side: lib/torch/test_certified.py)."""
from __future__ import annotations

import json

import pytest
import torch

torch.set_num_threads(1)


# ------------------------------------------------------------------------------------ the pipeline
def test_flows_in_certified_mode(tmp_path, monkeypatch):
    from flows.evaluate import evaluate_flow
    from flows.train import train_flow
    from tmdlib.torch.options import resolve_config
    from helpers import make_inputs
    from tmdlib import InputError
    from flows.config.evaluate import EvaluateStageConfig
    from flows.config.train import TrainStageConfig

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    inp = make_inputs(tmp_path / "in")
    out = tmp_path / "out"
    opts = TrainStageConfig(epochs=1, hidden=8, layers=3, lr=0.01, seed=0, device="cpu")
    assert "lipschitz_budget" not in resolve_config("MUTAG", opts, "0")
    with pytest.raises(InputError, match="lipschitz-budget"):
        resolve_config("MUTAG", opts, "-2")
    with pytest.raises(InputError, match="no-bias"):
        resolve_config("MUTAG", TrainStageConfig(epochs=1, hidden=8, lr=0.01, device="cpu", bias=True), "0.5")
    info = train_flow(inp["graphs"], inp["selection"], inp["labels"], str(out / "model.pt"), str(out / "train.json"),
                      cfg=TrainStageConfig(epochs=4, hidden=16, lipschitz_budget="0.5", log_mlflow=True))
    saved = json.loads((out / "train.json").read_text())
    assert saved["certified"] and saved["config"]["lipschitz_budget"] == 0.5
    lip = saved["lipschitz"]
    assert lip["c"] == saved["c_certified"] == pytest.approx(0.5 ** 7)
    assert lip["constraint_ok"] and lip["c_measured"] <= lip["c"] and max(lip["spectral_norms"]) <= 0.5

    from mlflow import MlflowClient

    run = MlflowClient().get_run(info["mlflow"]["run_id"])
    assert run.data.params["certified"] == "True" and run.data.params["train.lipschitz_budget"] == "0.5"
    assert run.data.metrics["c_certified"] == pytest.approx(0.5 ** 7)
    assert run.data.metrics["constraint_ok"] == 1.0

    m = evaluate_flow(inp["graphs"], inp["selection"], str(out / "model.pt"), str(out / "train.json"),
                      str(out / "metrics.json"), str(out / "bound_vs_gap.png"), matrix=inp["matrix"],
                      cfg=EvaluateStageConfig(fractions="0.5", sweep_epochs=2, full_epochs=2, log_mlflow=False))
    b = m["bound"]
    assert m["certified"] and b["certified"] and b["constraint_ok"]
    assert b["c"] == pytest.approx(0.5 ** 7) and b["c_class"] == pytest.approx(0.5 ** 7)  # same class for both
    assert b["c_epsilon"] == pytest.approx(0.5 ** 7 * b["epsilon"])
    assert b["lemma_holds_label_consistent"] and b["bound_with_labels_holds"]
    assert b["gap_observed"] <= b["bound_with_labels"]
    assert m["sweep"][0]["certified"] and m["sweep"][0]["c"] == pytest.approx(0.5 ** 7)

    # the CLI switch: --lipschitz-budget 0 / none is the ordinary GIN, a bad value exits 2
    from typer.testing import CliRunner

    from flows.cli import app

    args = ["train", "--graphs", inp["graphs"], "--selection", inp["selection"], "--labels", inp["labels"],
            "--model-out", str(out / "m2.pt"), "--info-out", str(out / "t2.json"), "--epochs", "1", "--hidden", "8",
            "--no-mlflow"]
    r = CliRunner().invoke(app, args + ["--lipschitz-budget", "0.25"])
    assert r.exit_code == 0, r.output
    t2 = json.loads((out / "t2.json").read_text())
    assert t2["certified"] and t2["lipschitz"]["c"] == pytest.approx(0.25 ** 7) and "certified" in r.output
    r = CliRunner().invoke(app, args + ["--lipschitz-budget", "none"])  # "0" parses the same (resolve_config above)
    assert r.exit_code == 0, r.output
    t2 = json.loads((out / "t2.json").read_text())
    assert not t2["certified"] and "lipschitz_budget" not in t2["config"] and t2["c_certified"] is None
    r = CliRunner().invoke(app, args + ["--lipschitz-budget", "-1"])
    assert r.exit_code == 2 and "lipschitz-budget" in r.output
