"""Train and evaluate runs logged to a real `mlflow server` over HTTP, read back with MlflowClient."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import free_port, stop_process, wait_http
from test_bounds import make_inputs

torch.set_num_threads(1)


@pytest.fixture
def mlflow_server(tmp_path):
    """`mlflow server` on 127.0.0.1 with an sqlite store and a local artifact root; always stopped."""
    port = free_port()
    home = tmp_path / "mlflow-server"
    home.mkdir()
    log = open(home / "server.log", "w")
    cmd = [str(Path(sys.executable).with_name("mlflow")), "server",
           "--backend-store-uri", f"sqlite:///{home / 'db.sqlite'}",
           "--default-artifact-root", str(home / "art"),
           "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=home)
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_http(f"{url}/health", timeout=90, proc=proc)
        except (TimeoutError, RuntimeError) as err:
            log.flush()
            raise RuntimeError(f"{err}\n{(home / 'server.log').read_text()[-3000:]}") from None
        yield url
    finally:
        stop_process(proc)
        log.close()


@pytest.mark.server
def test_train_and_evaluate_log_to_mlflow_server(mlflow_server, tmp_path, monkeypatch):
    from mlflow import MlflowClient

    from flows.evaluate import evaluate_flow
    from flows.train import train_flow

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    inp = make_inputs(tmp_path / "in", n_train=30, n_test=10)
    out = tmp_path / "out"
    info = train_flow(inp["graphs"], inp["selection"], inp["labels"], str(out / "model.pt"), str(out / "train.json"),
                      epochs=3, hidden=8, experiment="tmdsub-test")
    assert info["mlflow"]["tracking_uri"] == mlflow_server
    m = evaluate_flow(inp["graphs"], inp["selection"], str(out / "model.pt"), str(out / "train.json"),
                      str(out / "metrics.json"), str(out / "bound_vs_gap.png"), matrix=inp["matrix"],
                      fractions="0.5", sweep_epochs=2, experiment="tmdsub-test")

    client = MlflowClient(tracking_uri=mlflow_server)
    run = client.get_run(info["mlflow"]["run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.params["train.epochs"] == "3" and run.data.params["dataset"] == "MUTAG"
    assert run.data.metrics["c"] == pytest.approx(info["lipschitz"]["c"])
    assert run.data.metrics["phi.1"] == pytest.approx(info["lipschitz"]["per_layer"][0])
    history = client.get_metric_history(run.info.run_id, "train_loss")
    assert [h.step for h in sorted(history, key=lambda h: h.step)] == [0, 1, 2]
    tags = run.data.tags
    assert tags["tmdsub.stage"] == "train" and tags["labels_source"] == "benchmark-standin"
    assert len(tags["params_hash"]) == 16 and tags["git_sha"] and tags["git_dirty"] in ("true", "false", "unknown")
    assert len(tags[f"dvc.md5.{inp['graphs']}"]) == 32

    ev = client.get_run(m["mlflow"]["run_id"])
    assert ev.info.status == "FINISHED" and ev.info.experiment_id == run.info.experiment_id
    b = m["bound"]
    assert ev.data.metrics["bound.c_epsilon"] == pytest.approx(b["c_epsilon"])
    assert ev.data.metrics["bound.gap_observed"] == pytest.approx(b["gap_observed"])
    assert ev.data.metrics["bound.erm_bound"] == pytest.approx(b["erm_bound"])
    assert ev.data.metrics["bound.excess_loss"] == pytest.approx(b["excess_loss"])
    assert ev.data.metrics["test_accuracy"] == pytest.approx(m["test"]["coreset_model"])
    assert ev.data.tags["labels_for_evaluation"] == "dataset (benchmark mode)"
    assert ev.data.tags["tmdsub.stage"] == "evaluate"
    assert len(client.get_metric_history(ev.info.run_id, "sweep.c_epsilon")) == 1
    names = {a.path for a in client.list_artifacts(ev.info.run_id)}
    assert {"metrics.json", "bound_vs_gap.png"} <= names
    local = client.download_artifacts(ev.info.run_id, "metrics.json", str(tmp_path / "dl"))
    assert json.loads(Path(local).read_text())["bound"]["c"] == pytest.approx(b["c"])
