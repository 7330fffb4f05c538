"""Scheduled runs served by `tmdsub schedule` against a real Prefect server (the intake, remote and cron checks:
pipeline/test_schedule.py).

The server test serves the deployment with `tmdsub schedule` against a real Prefect server on
127.0.0.1, drops a batch of new graphs into data/incoming/, triggers a run and checks everything it
leaves: the batch appended, dvc.lock committed, the remote filled, the run record, the MLflow run.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import RAW, ROOT, git_workspace, pipeline_env, stop_process
from tu_writer import write_tu_folder


BIN = Path(sys.executable).parent


DEPLOYMENT = "scheduled-run/test"


@pytest.fixture(scope="module")
def mutag_table():
    from tmdlib.datasets import read_tu

    return read_tu(RAW / "MUTAG", "MUTAG")


def _wait_deployment(client, proc, log: Path, timeout: float = 180.0):
    """The served deployment, once `tmdsub schedule` has registered it."""
    from prefect.exceptions import ObjectNotFound

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"tmdsub schedule exited: {log.read_text()[-3000:]}"
        try:
            return client.read_deployment_by_name(DEPLOYMENT)
        except ObjectNotFound:
            time.sleep(1)
    raise TimeoutError(f"deployment not registered: {log.read_text()[-3000:]}")


def _wait_final(client, run_id, proc, log: Path, timeout: float = 900.0):
    """The flow run once it reached a final state."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = client.read_flow_run(run_id)
        if run.state is not None and run.state.is_final():
            return run
        assert proc.poll() is None, f"tmdsub schedule exited: {log.read_text()[-3000:]}"
        time.sleep(3)
    raise TimeoutError(f"flow run not finished: {log.read_text()[-3000:]}")


def test_scheduled_run_ingests_reruns_pushes_and_records(prefect_server, tmp_path, mutag_table):
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    env = pipeline_env(prefect_server)
    ws, remote = git_workspace(tmp_path / "ws", env, remote_url="../remote"), tmp_path / "remote"
    res = subprocess.run([str(BIN / "tmdsub"), "remote"], cwd=ws, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    # An earlier labelling round: the matrix of the 188 graphs (blocks cached) and 15 graphs labelled.
    res = subprocess.run([str(BIN / "dvc"), "repro", "labels@MUTAG"], cwd=ws, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    first_medoids = set(json.loads((ws / "data/selection/MUTAG/selection.json").read_text())["medoids"])
    subprocess.run(["git", "add", "-A"], cwd=ws, env=env, check=True, capture_output=True)
    subprocess.run(["git", "commit", "-qm", "team remote, first round"], cwd=ws, env=env, check=True,
                   capture_output=True)
    sha_before = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ws, capture_output=True, text=True).stdout.strip()

    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([str(BIN / "tmdsub"), "schedule", "--cron", "0 3 * * *", "--name", "test",
                                 "--workspace", str(ws)], cwd=tmp_path, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        with temporary_settings({PREFECT_API_URL: prefect_server}), get_client(sync_client=True) as client:
            deployment = _wait_deployment(client, proc, log)
            assert [s.schedule.cron for s in deployment.schedules] == ["0 3 * * *"]
            assert deployment.parameters == {"workspace": str(ws)}
            write_tu_folder(mutag_table.slice(0, 3), ws / "data/incoming/MUTAG/new-graphs", "new")
            run = run_deployment(DEPLOYMENT, timeout=0)
            final = _wait_final(client, run.id, proc, log)
        assert final.state.is_completed(), f"{final.state}: {log.read_text()[-4000:]}"
    finally:
        stop_process(proc)

    # The batch moved from the drop folder into data/append and was appended to the graph store.
    assert not any((ws / "data/incoming/MUTAG").iterdir())
    (batch,) = [p for p in (ws / "data/append/MUTAG").iterdir()]
    assert batch.name.endswith("Z-new-graphs") and (batch / "new_A.txt").is_file()
    import pyarrow.parquet as pq

    assert pq.read_metadata(ws / "data/graphs/MUTAG.parquet").num_rows == 188 + 3

    # The run record names everything to reproduce it; the commit and the remote hold it.
    (record_path,) = list((ws / "data/runs").glob("*.json"))
    rec = json.loads(record_path.read_text())
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ws, capture_output=True, text=True).stdout.strip()
    assert rec["status"] == "FINISHED" and rec["pushed"] and rec["committed"]
    assert rec["git_sha_before"] == sha_before and rec["git_sha_after"] == head != sha_before
    assert [b["batch"] for b in rec["batches"]] == [f"data/append/MUTAG/{batch.name}"]
    assert rec["batches"][0]["graphs"] == 3
    assert {"ingest@MUTAG", "tmd@MUTAG", "train@MUTAG", "evaluate@MUTAG"} <= set(rec["stages_ran"])

    # Only what changed was recomputed: the 3 new rows and columns of the TMD matrix ...
    assert rec["tmd"] == [f"MUTAG: 191x191 TMD matrix (2/3 blocks, {3 * 188 + 3} pairs computed) -> "
                          f"data/tmd/MUTAG/matrix.npy"], rec["tmd"]
    # ... and only the new labels were requested: the first round's 15 labels joined the ledger first.
    assert rec["labels_committed"] == ["MUTAG: 15 measurements added to data/labelled/MUTAG.csv (15 graphs labelled)"]
    sel = json.loads((ws / "data/selection/MUTAG/selection.json").read_text())
    manifest = json.loads((ws / "data/labels/MUTAG/manifest.json").read_text())
    assert first_medoids <= set(sel["medoids"]) and manifest["reused"] == 15
    assert manifest["requested"] == sel["k"] - 15 == 1
    assert rec["audit_reports"] == ["data/audit/MUTAG/report.html"]
    assert rec["remote"] == f"team {remote}"
    committed = subprocess.run(["git", "show", "--name-only", "--format=", "HEAD"], cwd=ws, capture_output=True,
                               text=True).stdout.split()
    assert "dvc.lock" in committed and f"data/append/MUTAG/{batch.name}/new_A.txt" in committed
    assert "data/labelled/MUTAG.csv" in committed
    for args in (["status"], ["status", "--cloud"]):  # the commit is reproducible; the remote holds its data
        res = subprocess.run([str(BIN / "dvc"), *args], cwd=ws, env=env, capture_output=True, text=True)
        assert res.returncode == 0 and ("up to date" in res.stdout or "in sync" in res.stdout), res.stdout

    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{ws / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("tmdsub-schedule").experiment_id])
    assert run.info.run_id == rec["mlflow_run_id"] and run.info.status == "FINISHED"
    assert run.data.tags["schedule.git_sha_after"] == head and run.data.tags["git_sha"] == head
    assert run.data.tags["schedule.pushed"] == "True" and "ingest@MUTAG" in run.data.tags["schedule.stages_ran"]
    assert run.data.metrics["graphs_appended"] == 3
    # The retrained model is registered and, with no champion before it, takes the alias (the record says why).
    (decision,) = rec["champion"]
    assert decision["dataset"] == "MUTAG" and decision["registered_model"] == "tmdsub-MUTAG" and decision["promoted"]
    assert decision["reason"].startswith("no champion yet; test accuracy")
    champion = client.get_model_version_by_alias("tmdsub-MUTAG", "champion")
    train_info = json.loads((ws / "data/models/MUTAG/train.json").read_text())
    assert str(champion.version) == decision["version"] == train_info["mlflow"]["model"]["version"]
    assert champion.tags["champion_decision"] == "promoted" and "promoted" in run.data.tags["schedule.champion"]
    logged = client.download_artifacts(run.info.run_id, record_path.name, str(ws.parent))
    assert json.loads(Path(logged).read_text()) == rec


def test_a_bad_batch_fails_the_run_in_one_line_moves_nothing_and_is_recorded(prefect_server, tmp_path):
    from mlflow import MlflowClient

    ws = tmp_path / "ws"
    (ws / "data/incoming/MUTAG").mkdir(parents=True)
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy2(ROOT / name, ws / name)
    (ws / "data/incoming/MUTAG/bad.parquet").write_bytes(b"not parquet")
    env = {**os.environ, "PREFECT_API_URL": prefect_server}
    env.pop("MLFLOW_TRACKING_URI", None)
    res = subprocess.run([str(BIN / "tmdsub"), "retrain", "--workspace", str(ws)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stdout + res.stderr
    line = res.stderr.splitlines()[-1]  # (above it only MLflow's note that it created mlflow.db)
    assert "Traceback" not in res.stderr and "error:" not in res.stderr.replace(line, ""), res.stderr
    assert line.startswith("error: data/incoming/MUTAG/bad.parquet: ") and "nothing was moved" in line
    assert (ws / "data/incoming/MUTAG/bad.parquet").is_file() and not (ws / "data/append").exists()
    (record_path,) = list((ws / "data/runs").glob("*.json"))
    rec = json.loads(record_path.read_text())
    assert rec["status"] == "FAILED" and "bad.parquet" in rec["error"] and rec["batches"] == []
    client = MlflowClient(tracking_uri=f"sqlite:///{ws / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("tmdsub-schedule").experiment_id])
    assert run.info.status == "FAILED" and run.info.run_id == rec["mlflow_run_id"]
