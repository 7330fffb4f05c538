"""Train and evaluate runs logged to a real `mlflow server` over HTTP, read back with MlflowClient: the experiment kind,
run names, dataset inputs, the registered model (it loads and predicts as model.pt) and the champion alias rule."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from helpers import make_inputs, mlflow_server_at

torch.set_num_threads(1)


@pytest.fixture
def mlflow_server(tmp_path):
    """`mlflow server` on 127.0.0.1 with an sqlite store and a local artifact root; always stopped."""
    with mlflow_server_at(tmp_path / "mlflow-server") as url:
        yield url


def test_train_and_evaluate_log_to_mlflow_server(mlflow_server, tmp_path, monkeypatch):
    from mlflow import MlflowClient

    from flows.evaluate import evaluate_flow
    from flows.train import train_flow
    from flows.config.evaluate import EvaluateStageConfig
    from flows.config.train import TrainStageConfig

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    inp = make_inputs(tmp_path / "in", n_train=30, n_test=10)
    out = tmp_path / "out"
    info = train_flow(inp["graphs"], inp["selection"], inp["labels"], str(out / "model.pt"), str(out / "train.json"),
                      cfg=TrainStageConfig(epochs=3, hidden=8, experiment="tmdsub-test"))
    assert info["mlflow"]["tracking_uri"] == mlflow_server
    m = evaluate_flow(inp["graphs"], inp["selection"], str(out / "model.pt"), str(out / "train.json"),
                      str(out / "metrics.json"), str(out / "bound_vs_gap.png"), matrix=inp["matrix"],
                      cfg=EvaluateStageConfig(fractions="0.5", sweep_epochs=2, experiment="tmdsub-test"))

    client = MlflowClient(tracking_uri=mlflow_server)
    run = client.get_run(info["mlflow"]["run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.params["train.epochs"] == "3" and run.data.params["dataset"] == "MUTAG"
    assert run.data.metrics["c"] == pytest.approx(info["lipschitz"]["c"])
    assert run.data.metrics["phi.1"] == pytest.approx(info["lipschitz"]["per_layer"][0])
    history = client.get_metric_history(run.info.run_id, "train_loss")
    assert [h.step for h in sorted(history, key=lambda h: h.step)] == [0, 1, 2]
    assert [h.value for h in sorted(history, key=lambda h: h.step)] == pytest.approx(info["losses"])
    # logged while training went: before the run's final metrics (logged after training) ...
    assert max(h.timestamp for h in history) <= min(m.timestamp for m in client.get_metric_history(run.info.run_id, "c"))
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


def _inputs(run) -> dict:
    """``{dataset name: (digest, source uri, context, profile)}`` of a run's dataset inputs."""
    out = {}
    for d in run.inputs.dataset_inputs:
        ctx = {t.key: t.value for t in d.tags}.get("mlflow.data.context")
        out[d.dataset.name] = (d.dataset.digest, json.loads(d.dataset.source)["uri"], ctx, json.loads(d.dataset.profile))
    return out


def test_runs_look_as_mlflow_users_expect_and_the_model_is_an_mlflow_model(mlflow_server, tmp_path, monkeypatch):
    import mlflow.pyfunc
    import mlflow.pytorch
    import numpy as np
    from mlflow import MlflowClient

    from flows.evaluate import evaluate_flow
    from flows.train import train_flow
    from tasks.graphs import load_graph_store
    from tasks.train import load_model
    from tmdlib.datasets import content_hash
    from tmdlib.datasets import graph_hashes
    from tmdlib.torch.gin import predict_logits
    from tmdlib.torch.pyg import dataset_to_pyg
    from tmdlib.torch.serving import dense_batch
    from flows.config.evaluate import EvaluateStageConfig
    from flows.config.train import TrainStageConfig

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    inp = make_inputs(tmp_path / "in", n_train=30, n_test=10)
    out = tmp_path / "out"
    info = train_flow(inp["graphs"], inp["selection"], inp["labels"], str(out / "model.pt"), str(out / "train.json"),
                      cfg=TrainStageConfig(epochs=3, hidden=8))
    m = evaluate_flow(inp["graphs"], inp["selection"], str(out / "model.pt"), str(out / "train.json"),
                      str(out / "metrics.json"), str(out / "bound_vs_gap.png"), cfg=EvaluateStageConfig(full_epochs=1))
    client = MlflowClient(tracking_uri=mlflow_server)

    # the experiment opens on MLflow's model-training view; runs are named <stage>@<DATASET>
    exp = client.get_experiment_by_name("tmdsub")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    train_run, eval_run = client.get_run(info["mlflow"]["run_id"]), client.get_run(m["mlflow"]["run_id"])
    assert train_run.info.run_name == "train@MUTAG" and eval_run.info.run_name == "evaluate@MUTAG"

    # dataset inputs: the store (digest = its content hash), the label file and the selection
    ds = load_graph_store(inp["graphs"])
    sha = content_hash(ds.graph_ids, graph_hashes(ds))
    got = _inputs(train_run)
    assert set(got) == {"MUTAG", "MUTAG-labels", "MUTAG-selection"}
    assert got["MUTAG"][:3] == (sha[:32], inp["graphs"], "training") and got["MUTAG"][3]["content_sha256"] == sha
    assert got["MUTAG"][3]["graphs"] == 40
    assert got["MUTAG-labels"][1:3] == (inp["labels"], "training") and got["MUTAG-labels"][3]["labels"] == 6
    assert got["MUTAG-selection"][1:3] == (inp["selection"], "training") and got["MUTAG-selection"][3]["k"] == 6
    got = _inputs(eval_run)
    assert set(got) == {"MUTAG", "MUTAG-selection"} and got["MUTAG"][:3] == (sha[:32], inp["graphs"], "evaluation")
    assert got["MUTAG-selection"][0] == _inputs(train_run)["MUTAG-selection"][0]
    assert [mi.model_id for mi in eval_run.inputs.model_inputs] == [info["mlflow"]["model"]["model_id"]]

    # the model is registered as tmdsub-MUTAG, names its train run and model.pt, and carries its test metric
    assert info["mlflow"]["model"]["registered_model"] == "tmdsub-MUTAG"
    (version,) = client.search_model_versions("name = 'tmdsub-MUTAG'")
    assert version.version == info["mlflow"]["model"]["version"] == "1" and version.run_id == train_run.info.run_id
    assert version.tags["model_sha256"] == info["model_sha256"] and version.tags["dataset"] == "MUTAG"
    assert version.tags["test_metric"] == "accuracy"
    assert float(version.tags["test_value"]) == pytest.approx(m["test"]["coreset_model"])
    assert version.tags["evaluate_run_id"] == eval_run.info.run_id and "tau-weighted" in version.description

    # mlflow.pytorch.load_model gives the same predictions as model.pt, on every graph of the store
    gin = load_model(str(out / "model.pt"), info).model
    data = dataset_to_pyg(ds)
    expected = predict_logits(gin, data)
    loaded = mlflow.pytorch.load_model("models:/tmdsub-MUTAG/1")
    got = loaded(dense_batch(data, ds.num_features)).detach().double().numpy().ravel()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)  # float32; a matmul sums in another order
    # ... and so does the served form (pyfunc: one float32 array in, logits out), as its signature says
    served = mlflow.pyfunc.load_model("models:/tmdsub-MUTAG/1")
    assert served.metadata.get_input_schema().inputs[0].shape == (-1, -1, -1)
    batch = dense_batch(data[:7], ds.num_features).numpy()
    np.testing.assert_allclose(np.asarray(served.predict(batch)).ravel(), expected[:7], rtol=1e-5, atol=1e-6)
    # the logged input example is a dense batch of training graphs (B, n, 1 + d + n); the output signature (B, 1)
    example = np.asarray(served.input_example)
    assert example.dtype == np.float32 and example.ndim == 3 and example.shape[0] >= 2
    assert example.shape[2] == 1 + ds.num_features + example.shape[1]
    assert served.metadata.get_output_schema().inputs[0].shape == (-1, 1)
    np.testing.assert_allclose(np.asarray(served.predict(example)).ravel(),
                               loaded(torch.as_tensor(example)).detach().numpy().ravel(), rtol=1e-6, atol=1e-6)


def test_epoch_losses_reach_the_server_while_training_runs(mlflow_server, tmp_path, monkeypatch):
    """Each epoch's loss is on the server (step = epoch) before the next epoch trains: read back from inside the
    training loop of train_flow.  With the default interval, epochs are batched, and the last always goes out."""
    from mlflow import MlflowClient

    import flows.train as train_module
    from flows.train import train_flow
    from flows.config.train import TrainStageConfig

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    client = MlflowClient(tracking_uri=mlflow_server)
    inp = make_inputs(tmp_path / "in", n_train=30, n_test=10)
    real = train_module.fit_task
    seen = {}

    def spy(spec, options, *args, **kwargs):
        on_loss = options.get("on_loss")  # the GIN's options carry the live metric
        assert on_loss is not None and on_loss.key == "train_loss"
        on_loss.interval = 0.0  # send every epoch at once

        def callback(epoch, value):
            on_loss(epoch, value)
            seen[epoch] = sorted(m.step for m in client.get_metric_history(on_loss.run_id, "train_loss"))
            assert client.get_run(on_loss.run_id).info.status == "RUNNING"

        return real(spec, {**options, "on_loss": callback}, *args, **kwargs)

    monkeypatch.setattr(train_module, "fit_task", spy)
    info = train_flow(inp["graphs"], inp["selection"], inp["labels"], str(tmp_path / "model.pt"),
                      str(tmp_path / "train.json"), cfg=TrainStageConfig(epochs=4, hidden=8))
    assert seen == {e: list(range(e + 1)) for e in range(4)}
    history = sorted(client.get_metric_history(info["mlflow"]["run_id"], "train_loss"), key=lambda m: m.step)
    assert [m.value for m in history] == pytest.approx(info["losses"])

    # batching (the default): nothing before the interval, the last epoch always, flush sends the rest
    from tasks.tracking import LiveMetric, start_run

    run = start_run("train", {}, [], "tmdsub-live", "live@TEST")
    live = LiveMetric(run["run_id"], "loss", last_step=5, interval=3600.0)
    live(0, 1.0)
    live(1, 0.5)
    assert client.get_metric_history(run["run_id"], "loss") == []
    live(5, 0.25)
    assert sorted(m.step for m in client.get_metric_history(run["run_id"], "loss")) == [0, 1, 5]
    live(6, float("nan"))  # not finite: skipped
    live(7, 0.125)
    live.flush()
    assert sorted(m.step for m in client.get_metric_history(run["run_id"], "loss")) == [0, 1, 5, 7]


def test_champion_alias_goes_only_to_a_version_that_is_not_worse(mlflow_server, tmp_path, monkeypatch):
    """Three real retrainings: good labels (first champion), flipped labels (worse: stays out), good labels again
    (equal: takes the alias).  The scheduled run's task reads the version from train.json and decides once."""
    from mlflow import MlflowClient

    from flows.evaluate import evaluate_flow
    from flows.train import train_flow
    from tasks.registry import consider_for_champion, promote_champions
    from flows.config.evaluate import EvaluateStageConfig
    from flows.config.train import TrainStageConfig

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    inp = make_inputs(tmp_path / "in", n_train=60, n_test=60, fraction=0.5)
    flipped = tmp_path / "in" / "flipped.csv"
    rows = (tmp_path / "in" / "labels.csv").read_text().splitlines()
    flipped.write_text("\n".join([rows[0]] + [f"{r.split(',')[0]},{1.0 - float(r.split(',')[1])}" for r in rows[1:]]))

    def retrain(labels: str, where: Path) -> tuple[dict, float]:
        info = train_flow(inp["graphs"], inp["selection"], labels, str(where / "model.pt"), str(where / "train.json"),
                          labels_meta=str(tmp_path / "in" / "labels.json"), cfg=TrainStageConfig(epochs=30, hidden=16))
        m = evaluate_flow(inp["graphs"], inp["selection"], str(where / "model.pt"), str(where / "train.json"),
                          str(where / "metrics.json"), str(where / "plot.png"), cfg=EvaluateStageConfig(full_epochs=1))
        return info, m["test"]["coreset_model"]

    client = MlflowClient(tracking_uri=mlflow_server)
    good, acc_good = retrain(inp["labels"], tmp_path / "v1")
    first = consider_for_champion("tmdsub-MUTAG", good["mlflow"]["model"]["version"], "test")
    assert first["promoted"] and first["reason"].startswith("no champion yet")
    assert str(client.get_model_version_by_alias("tmdsub-MUTAG", "champion").version) == "1"

    bad, acc_bad = retrain(str(flipped), tmp_path / "v2")
    assert acc_bad < acc_good, (acc_bad, acc_good)  # the premise: trained on flipped labels, it is worse
    second = consider_for_champion("tmdsub-MUTAG", bad["mlflow"]["model"]["version"], "test")
    assert not second["promoted"] and second["champion_before"] == "1" and "(worse)" in second["reason"]
    assert str(client.get_model_version_by_alias("tmdsub-MUTAG", "champion").version) == "1"
    v2 = client.get_model_version("tmdsub-MUTAG", "2")
    assert v2.tags["champion_decision"] == "not promoted" and v2.tags["champion_reason"] == second["reason"]
    assert "Champion decision (test): not promoted" in v2.description

    # the same training again, through the scheduled run's task (train.json in data/models/MUTAG/)
    ws = tmp_path / "ws"
    again, acc_again = retrain(inp["labels"], ws / "data" / "models" / "MUTAG")
    assert acc_again == acc_good and again["mlflow"]["model"]["version"] == "3"
    monkeypatch.chdir(ws)
    (third,) = promote_champions.fn(["MUTAG"], "scheduled run")
    assert third["promoted"] and third["version"] == "3" and "(not worse)" in third["reason"]
    assert third["champion_before"] == "1" and third["champion_value"] == pytest.approx(acc_good)
    assert str(client.get_model_version_by_alias("tmdsub-MUTAG", "champion").version) == "3"
    (later,) = promote_champions.fn(["MUTAG"], "next run")  # nothing retrained: no second decision
    assert later["decided_before"] and later["promoted"] and later["version"] == "3"
