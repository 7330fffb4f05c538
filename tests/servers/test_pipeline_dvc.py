"""The pipeline under a real `dvc repro`, in a temporary git repository (fresh-clone conditions)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import git_workspace, mlflow_server_at, pipeline_env


def _sh(args, cwd, env, timeout=900):
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, prefect_server):
    """A git repo holding the project's tracked files (MUTAG raw data only), with a small budget; its stages log to
    a real `mlflow server` on 127.0.0.1 whose store is the workspace's mlflow.db."""
    env = pipeline_env(prefect_server)
    ws = git_workspace(tmp_path_factory.mktemp("ws"), env)
    with mlflow_server_at(tmp_path_factory.mktemp("mlflow"), f"sqlite:///{ws / 'mlflow.db'}") as url:
        yield ws, {**env, "MLFLOW_TRACKING_URI": url}


def _ran(stdout: str) -> set[str]:
    """Stages DVC ran, without the ``@<dataset>`` of the foreach."""
    return {line.split("'")[1].partition("@")[0] for line in stdout.splitlines() if line.startswith("Running stage '")}


def test_repro_end_to_end_then_nothing_then_only_downstream_of_select(workspace):
    ws, env = workspace
    res = _sh([str(Path(sys.executable).parent / "dvc"), "repro"], ws, env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _ran(res.stdout) == {"ingest", "tmd", "select", "nodes", "label_requests", "labels", "train",
                                "train_nodes", "evaluate", "evaluate_nodes", "predict", "audit"}
    sel = json.loads((ws / "data/selection/MUTAG/selection.json").read_text())
    assert sel["k"] == 15 and len(sel["medoids"]) == 15 and sel["epsilon"] > 0
    assert (ws / "data/labels/MUTAG/label_requests.csv").read_text().startswith('"graph_id"')
    metrics = json.loads((ws / "data/metrics/MUTAG/metrics.json").read_text())
    assert metrics["bound"]["c_epsilon"] >= metrics["bound"]["gap_observed"]
    assert (ws / "data/metrics/MUTAG/bound_vs_gap.png").stat().st_size > 1000
    assert (ws / "mlflow.db").exists()
    lock = yaml.safe_load((ws / "dvc.lock").read_text())
    assert set(lock["stages"]) >= {f"{s}@MUTAG" for s in ("ingest", "tmd", "select", "train", "evaluate")}

    res = _sh([str(Path(sys.executable).parent / "dvc"), "repro"], ws, env)
    assert res.returncode == 0 and not _ran(res.stdout), res.stdout

    params = yaml.safe_load((ws / "params.yaml").read_text())
    params["select"]["fraction"] = 0.2
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    res = _sh([str(Path(sys.executable).parent / "dvc"), "repro"], ws, env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _ran(res.stdout) == {"select", "label_requests", "labels", "train", "train_nodes", "evaluate",
                                "evaluate_nodes", "predict", "audit"}
    assert json.loads((ws / "data/selection/MUTAG/selection.json").read_text())["k"] == 30

    # Runs are tagged with provenance: git sha and the dvc.lock md5 of their inputs.
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=env["MLFLOW_TRACKING_URI"])  # the server the stages logged to
    exp = client.get_experiment_by_name("tmdsub")
    runs = client.search_runs([exp.experiment_id], filter_string="tags.`tmdsub.stage` = 'train'")
    assert runs
    tags = runs[0].data.tags
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ws, capture_output=True, text=True).stdout.strip()
    assert tags["git_sha"] == sha
    lock = yaml.safe_load((ws / "dvc.lock").read_text())
    sel_md5 = next(o["md5"] for o in lock["stages"]["select@MUTAG"]["outs"])
    assert tags["dvc.md5.data/selection/MUTAG/selection.json"] == sel_md5

    # The audit report names the run, the commit and the dvc.lock md5s, and the train run links to it.
    assert (ws / "data/audit/MUTAG/report.html").stat().st_size > 1000
    train_run = json.loads((ws / "data/models/MUTAG/train.json").read_text())["mlflow"]["run_id"]
    assert client.get_run(train_run).data.tags["tmdsub.audit_report"] == "data/audit/MUTAG/report.html"
    report = (ws / "data/audit/MUTAG/report.md").read_text()
    assert train_run in report and sha in report and sel_md5 in report

    # As MLflow users expect: the training view, runs named after their stage, datasets, a registered model per run.
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    every = client.search_runs([exp.experiment_id])
    names = [r.info.run_name for r in every]
    assert sorted(set(names)) == ["evaluate@MUTAG", "evaluate_nodes@MUTAG", "predict@MUTAG", "train@MUTAG",
                                  "train_nodes@MUTAG"]
    assert names.count("train@MUTAG") == 2  # the first repro and the one after select.fraction changed
    latest_train = client.get_run(train_run)
    inputs = {d.dataset.name: d for d in latest_train.inputs.dataset_inputs}
    assert set(inputs) == {"MUTAG", "MUTAG-labels", "MUTAG-selection"}
    store = inputs["MUTAG"].dataset
    content = json.loads(store.profile)["content_sha256"]
    assert store.digest == content[:32] and json.loads(store.source)["uri"] == "data/graphs/MUTAG.parquet"
    assert content in (ws / "data/audit/MUTAG/report.md").read_text()  # the audit report's content hash
    assert json.loads(inputs["MUTAG-selection"].dataset.profile)["k"] == 30
    versions = sorted(client.search_model_versions("name = 'tmdsub-MUTAG'"), key=lambda v: int(v.version))
    assert [v.version for v in versions] == ["1", "2"] and versions[-1].run_id == train_run
    info = json.loads((ws / "data/models/MUTAG/train.json").read_text())
    assert info["mlflow"]["model"]["version"] == "2" and versions[-1].tags["model_sha256"] == info["model_sha256"]
    assert versions[-1].tags["test_metric"] == "accuracy"
    assert float(versions[-1].tags["test_value"]) == pytest.approx(
        json.loads((ws / "data/metrics/MUTAG/metrics.json").read_text())["test"]["coreset_model"])

    res = _sh([str(Path(sys.executable).parent / "tmdsub"), "summary"], ws, env)
    assert res.returncode == 0 and "label_requests.csv" in res.stdout and "evaluate" in res.stdout
    assert "train@MUTAG" in res.stdout and "registered model tmdsub-MUTAG: latest v2" in res.stdout

    # Several datasets: one more entry in base.datasets adds a whole pipeline for it (DVC foreach).
    params["base"]["datasets"]["COX2"] = "COX2"
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    res = _sh([str(Path(sys.executable).parent / "dvc"), "stage", "list"], ws, env)
    assert res.returncode == 0, res.stderr
    listed = {line.split()[0] for line in res.stdout.splitlines() if line.strip()}
    assert {"ingest@COX2", "tmd@COX2", "evaluate@COX2", "ingest@MUTAG", "evaluate@MUTAG"} <= listed


def test_remote_push_then_pull_on_a_fresh_clone(workspace, tmp_path):
    """`tmdsub remote` sets params.yaml's local-folder remote; `dvc push`; a fresh clone pulls the same bytes."""
    ws, env = workspace
    dvc, tmdsub = (str(Path(sys.executable).parent / name) for name in ("dvc", "tmdsub"))
    params = yaml.safe_load((ws / "params.yaml").read_text())
    params["base"]["datasets"].pop("COX2", None)  # listed, never run, by the end-to-end test
    remote = tmp_path / "remote"
    params["remote"]["url"] = os.path.relpath(remote, ws)  # relative to the repository root
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    res = _sh([dvc, "repro"], ws, env)  # nothing to do after the end-to-end test
    assert res.returncode == 0, res.stdout + res.stderr

    res = _sh([tmdsub, "remote"], ws, env)
    assert res.returncode == 0 and str(remote) in res.stdout, res.stdout + res.stderr
    assert f"url = {remote}" in (ws / ".dvc/config").read_text()  # absolute: the same folder from any clone
    for cmd in (["git", "add", "-A"], ["git", "commit", "-qm", "results + team remote"]):
        subprocess.run(cmd, cwd=ws, env=env, check=True, capture_output=True)
    res = _sh([dvc, "push"], ws, env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert any(p.is_file() for p in remote.rglob("*"))

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ws), str(clone)], env=env, check=True, capture_output=True)
    res = _sh([dvc, "pull"], clone, env)
    assert res.returncode == 0, res.stdout + res.stderr
    lock = yaml.safe_load((ws / "dvc.lock").read_text())
    outs = [o["path"] for entry in lock["stages"].values() for o in entry.get("outs", [])]
    assert len(outs) > 10
    for rel in outs:  # an out is a file or a directory (the TMD stage's data/tmd/<dataset>)
        files = sorted(p.relative_to(ws) for p in [ws / rel, *(ws / rel).rglob("*")] if p.is_file())
        assert files, rel
        for f in files:
            assert (clone / f).read_bytes() == (ws / f).read_bytes(), f
    res = _sh([dvc, "status"], clone, env)
    assert res.returncode == 0 and "up to date" in res.stdout, res.stdout + res.stderr


def test_committing_labels_to_the_ledger_does_not_retrain(workspace):
    """`tmdsub labels commit` grows the ledger: selection keeps the same medoids (now all labelled), nothing is
    requested, labels.csv/labels.json keep their bytes, so training and evaluation are not rerun."""
    ws, env = workspace
    dvc, tmdsub = (str(Path(sys.executable).parent / name) for name in ("dvc", "tmdsub"))
    params = yaml.safe_load((ws / "params.yaml").read_text())
    params["base"]["datasets"].pop("COX2", None)
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert _sh([dvc, "repro"], ws, env).returncode == 0
    before = {p: (ws / p).read_bytes() for p in ("data/selection/MUTAG/selection.json", "data/labels/MUTAG/labels.csv",
                                                 "data/labels/MUTAG/labels.json")}
    k = len(json.loads(before["data/selection/MUTAG/selection.json"])["medoids"])  # the budget of params.yaml
    res = _sh([tmdsub, "labels", "commit", "MUTAG"], ws, env)
    assert res.returncode == 0 and f"{k} measurements added" in res.stdout, res.stdout + res.stderr
    res = _sh([dvc, "repro"], ws, env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _ran(res.stdout) == {"select", "label_requests", "labels", "audit"}
    assert all((ws / p).read_bytes() == b for p, b in before.items())
    manifest = json.loads((ws / "data/labels/MUTAG/manifest.json").read_text())
    assert manifest["requested"] == 0 and manifest["reused"] == k


def test_a_users_scikit_learn_factory_trains_through_dvc_repro(tmp_path, prefect_server):
    """train.model names the user's own factory (a module in the repository): it trains on a molecule set's ECFP4
    counts through `dvc repro`, and evaluate reports the task's metrics for it (no c·ε: no TMD constant)."""
    import csv

    from helpers import RAW

    env = {**pipeline_env(prefect_server), "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'ws' / 'mlflow.db'}"}
    ws = tmp_path / "ws"
    ws.mkdir()
    ws = git_workspace(ws, env)
    rows = list(csv.DictReader(open(RAW / "MoleculeACE" / "CHEMBL2835_Ki.csv", newline="")))[:120]
    with open(ws / "data" / "raw" / "MOLS.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([["smiles", "y"]] + [[r["smiles"], r["y"]] for r in rows])
    (ws / "my_models.py").write_text("from sklearn.linear_model import Ridge\n\n\n"
                                     "def make_model():\n    return Ridge(alpha=3.0)\n")
    params = yaml.safe_load((ws / "params.yaml").read_text())
    params["base"]["datasets"] = {"MOLS": "MOLS.csv"}
    params["train"]["model"] = "my_models:make_model"
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    dvc = str(Path(sys.executable).parent / "dvc")
    res = _sh([dvc, "repro", "train@MOLS", "evaluate@MOLS", "predict@MOLS"], ws, env)
    assert res.returncode == 0, res.stdout + res.stderr
    info = json.loads((ws / "data/models/MOLS/train.json").read_text())
    assert info["model_name"] == "my_models:make_model" and info["task"]["type"] == "regression"
    assert info["model_options"]["estimator"] == "Ridge" and info["model_options"]["params"]["alpha"] == 3.0
    metrics = json.loads((ws / "data/metrics/MOLS/metrics.json").read_text())
    assert metrics["test"]["metric"] == "rmse" and metrics["test"]["coreset_model"] > 0
    assert {"rmse", "mae", "r2", "spearman"} <= set(metrics["test"]["coreset_metrics"])
    assert metrics["bound"]["c_epsilon"] is None and "no Lipschitz constant" in metrics["bound"]["lipschitz_note"]
    assert (ws / "data/predictions/MOLS/predictions.parquet").is_file()
