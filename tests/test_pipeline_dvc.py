"""The pipeline under a real `dvc repro`, in a temporary git repository (fresh-clone conditions)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT

pytestmark = pytest.mark.server  # uses a real Prefect server for fast stage start-up


def _sh(args, cwd, env, timeout=900):
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, prefect_server):
    """A git repo holding the project's tracked files (MUTAG raw data only), with a small budget."""
    ws = tmp_path_factory.mktemp("ws")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    for rel in files:
        if rel.startswith("data/raw/") and not (rel.startswith("data/raw/MUTAG/") or rel == "data/raw/SHA256SUMS"):
            continue
        if rel.startswith(("reports/", "benchmarks/")) or rel == "dvc.lock" or not (ROOT / rel).is_file():
            continue
        dst = ws / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dst)
    params = yaml.safe_load((ws / "params.yaml").read_text())
    params["train"]["epochs"] = 5
    params["evaluate"]["fractions"] = "0.1,0.2"
    params["evaluate"]["sweep_epochs"] = 3
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "PREFECT_API_URL": prefect_server, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "DVC_NO_ANALYTICS": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=ws, env=env, check=True, capture_output=True)
    return ws, env


def _ran(stdout: str) -> set[str]:
    """Stages DVC ran, without the ``@<dataset>`` of the foreach."""
    return {line.split("'")[1].partition("@")[0] for line in stdout.splitlines() if line.startswith("Running stage '")}


def test_repro_end_to_end_then_nothing_then_only_downstream_of_select(workspace):
    ws, env = workspace
    res = _sh([str(Path(sys.executable).parent / "dvc"), "repro"], ws, env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _ran(res.stdout) == {"ingest", "tmd", "select", "nodes", "label_requests", "labels", "train",
                                "train_nodes", "evaluate", "evaluate_nodes"}
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
                                "evaluate_nodes"}
    assert json.loads((ws / "data/selection/MUTAG/selection.json").read_text())["k"] == 30

    # Runs are tagged with provenance: git sha and the dvc.lock md5 of their inputs.
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{ws / 'mlflow.db'}")
    exp = client.get_experiment_by_name("tmdsub")
    runs = client.search_runs([exp.experiment_id], filter_string="tags.`tmdsub.stage` = 'train'")
    assert runs
    tags = runs[0].data.tags
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ws, capture_output=True, text=True).stdout.strip()
    assert tags["git_sha"] == sha
    lock = yaml.safe_load((ws / "dvc.lock").read_text())
    sel_md5 = next(o["md5"] for o in lock["stages"]["select@MUTAG"]["outs"])
    assert tags["dvc.md5.data/selection/MUTAG/selection.json"] == sel_md5

    res = _sh([str(Path(sys.executable).parent / "tmdsub"), "summary"], ws, env)
    assert res.returncode == 0 and "label_requests.csv" in res.stdout and "evaluate" in res.stdout

    # Several datasets: one more entry in base.datasets adds a whole pipeline for it (DVC foreach).
    params["base"]["datasets"]["COX2"] = "COX2"
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    res = _sh([str(Path(sys.executable).parent / "dvc"), "stage", "list"], ws, env)
    assert res.returncode == 0, res.stderr
    listed = {line.split()[0] for line in res.stdout.splitlines() if line.strip()}
    assert {"ingest@COX2", "tmd@COX2", "evaluate@COX2", "ingest@MUTAG", "evaluate@MUTAG"} <= listed
