"""The audit flow on a small real MUTAG run linked from its MLflow train run, the CLI's error path, and the HTML page in a
real headless Chromium (the facts and their rendering: lib/reporting/test_audit.py)."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
import yaml

from helpers import HAVE_CHROMIUM, NO_CHROMIUM, RAW, ROOT, open_in_chromium, run_cli
from tmdlib import InputError
from flows.config.nodes import NodesStageConfig


BARE_HOLDS = re.compile(r"holds\s*(?:\||:|</th>\s*<td>)\s*yes", re.I)  # "holds | yes", "holds: yes", HTML cells


def _opening(md: str) -> str:
    """The first paragraph after the title and the first heading."""
    return [block for block in md.split("\n\n")[1:] if not block.startswith("#")][0]


# ------------------------------------------------------------------------------------------------ a real run
@pytest.fixture(scope="module")
def mutag_run(tmp_path_factory):
    """Every stage output the audit reads, made by the real flows on 40 MUTAG graphs (tiny models), with the
    train run logged to a private MLflow store; yields ``(paths, env)``."""
    from flows.evaluate import evaluate_flow
    from flows.labels import label_requests_flow, labels_import_flow
    from flows.select import nodes_flow, select_flow
    from flows.config.select import SelectStageConfig
    from flows.tmd import tmd_matrix_flow
    from flows.train import train_flow
    from tmdlib.datasets import read_tu, write_graph_parquet
    from flows.config.evaluate import EvaluateStageConfig
    from flows.config.train import TrainStageConfig

    d = tmp_path_factory.mktemp("audit-run")
    env = {"MLFLOW_TRACKING_URI": f"sqlite:///{d / 'mlflow.db'}"}
    p = {"graphs": str(d / "MUTAG.parquet"), "matrix": str(d / "matrix.npy"), "tmd_meta": str(d / "meta.json"),
         "selection": str(d / "selection.json"), "nodes": str(d / "nodes.parquet"), "labels_dir": str(d / "labels"),
         "requests": str(d / "labels/label_requests.parquet"), "manifest": str(d / "labels/manifest.json"),
         "labels_meta": str(d / "labels/labels.json"), "model": str(d / "model.pt"),
         "train_info": str(d / "train.json"), "metrics": str(d / "metrics.json"),
         "metrics_nodes": str(d / "metrics_nodes.json"), "plot": str(d / "bound_vs_gap.png"),
         "params": str(ROOT / "params.yaml"), "lock": str(d / "dvc.lock"),
         "out_dir": str(d / "audit"), "mlflow_uri": env["MLFLOW_TRACKING_URI"]}
    write_graph_parquet(read_tu(RAW / "MUTAG", "MUTAG").slice(0, 40), p["graphs"])
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        tmd_matrix_flow(p["graphs"], p["matrix"], p["tmd_meta"], str(d / "cache"))
        select_flow(p["graphs"], p["selection"], matrix=p["matrix"], cfg=SelectStageConfig(fraction=0.2, restarts=1))
        nodes_flow(p["graphs"], p["nodes"], cfg=NodesStageConfig(fraction=0.5))
        label_requests_flow(p["graphs"], p["selection"], p["labels_dir"])
        labels_import_flow(p["graphs"], p["requests"], "benchmark-standin", p["labels_dir"])
        train_flow(p["graphs"], p["selection"], str(d / "labels/labels.csv"), p["model"], p["train_info"],
                   cfg=TrainStageConfig(epochs=2, hidden=8, experiment="tmdsub-audit-test"))
        common = dict(matrix=p["matrix"], tmd_meta=p["tmd_meta"])
        evaluate_flow(p["graphs"], p["selection"], p["model"], p["train_info"], p["metrics"], p["plot"],
                      cfg=EvaluateStageConfig(fractions="0.5", sweep_epochs=1, full_epochs=1, log_mlflow=False),
                      **common)
        evaluate_flow(p["graphs"], p["selection"], p["model"], p["train_info"], p["metrics_nodes"],
                      str(d / "bound_vs_gap_nodes.png"), nodes=p["nodes"],
                      cfg=EvaluateStageConfig(full_epochs=1, log_mlflow=False), **common)
        # dvc.lock as `dvc repro` leaves it while the audit stage runs: upstream entries of two datasets
        sel_md5 = hashlib.md5(Path(p["selection"]).read_bytes()).hexdigest()
        Path(p["lock"]).write_text(yaml.safe_dump({"schema": "2.0", "stages": {
            "select@MUTAG": {"cmd": "tmdsub select", "outs": [{"path": p["selection"], "md5": sel_md5}]},
            "select@COX2": {"cmd": "tmdsub select", "outs": [{"path": "cox2.json", "md5": "f" * 32}]},
            "audit@MUTAG": {"cmd": "tmdsub audit", "outs": [{"path": "old.md", "md5": "e" * 32}]}}}))
        yield p, env


def _audit_args(p: dict) -> list:
    return [p[k] for k in ("graphs", "tmd_meta", "selection", "nodes", "requests", "manifest", "labels_meta",
                           "train_info", "metrics", "metrics_nodes", "plot", "out_dir")]


@pytest.fixture(scope="module")
def audited(mutag_run):
    """The audit flow run on :func:`mutag_run`; yields ``(result, paths)``."""
    from flows.audit import audit_flow
    from flows.config.audit import AuditPaths

    p, _ = mutag_run
    return audit_flow(AuditPaths("MUTAG", *_audit_args(p), params=p["params"], lock=p["lock"])), p


def test_audit_flow_reports_the_run_and_links_it_from_mlflow(audited):
    from mlflow import MlflowClient

    res, p = audited
    out = Path(p["out_dir"])
    assert sorted(f.name for f in out.iterdir()) == ["bound_vs_gap.png", "counts.png", "report.html", "report.md"]
    assert (out / "bound_vs_gap.png").read_bytes() == Path(p["plot"]).read_bytes()
    info = json.loads(Path(p["train_info"]).read_text())
    run_id = info["mlflow"]["run_id"]  # train.json names its run (written before the run was finished)
    f = res["facts"]
    sel = json.loads(Path(p["selection"]).read_text())
    manifest = json.loads(Path(p["manifest"]).read_text())
    assert f["provenance"]["mlflow_run_id"] == run_id and len(f["provenance"]["git_sha"]) == 40
    assert f["graphs"]["kept"] == len(sel["medoids"]) and f["graphs"]["total"] == len(sel["train_ids"])
    assert f["graphs"]["dropped"] == len(sel["train_ids"]) - len(sel["medoids"])
    assert f["graphs"]["test"] == len(sel["test_ids"]) and f["data"]["graphs"] == 40
    assert f["data"]["store_sha256"] == manifest["dataset_sha256"]
    assert 0 < f["nodes"]["kept"] < f["nodes"]["total"] == f["data"]["nodes"]
    assert f["labels"]["requested"] == manifest["requested"] and f["labels"]["pool"] == len(sel["train_ids"])
    assert f["bound"]["epsilon"] == pytest.approx(sel["epsilon_mean"]) == pytest.approx(sel["epsilon"] / sel["n_train"])
    assert all(ok for _, ok, _ in f["checks"]), f["checks"]
    assert info["collapsed"] is False and min(info["alive_units"]) > 0  # train.json: the dead-network probe
    assert any(what.startswith("trained GIN is not collapsed") for what, _, _ in f["checks"])
    assert set(f["lock"]) == {"select@MUTAG"} and f["params"]["select.fraction"] is not None

    md = (out / "report.md").read_text()
    assert md.splitlines()[2] == "## Verdict" and re.match(r"Bound (informative|vacuous|invalid): c·ε", _opening(md))
    assert not BARE_HOLDS.search(md) and not BARE_HOLDS.search((out / "report.html").read_text())
    for fact in (run_id, f["provenance"]["git_sha"], f["data"]["store_sha256"], f["data"]["content_sha256"],
                 f["lock"]["select@MUTAG"]["outs"][p["selection"]], "![", "(counts.png)", "(bound_vs_gap.png)"):
        assert fact in md, fact

    client = MlflowClient(tracking_uri=p["mlflow_uri"])
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.params["train.epochs"] == "2"
    assert run.data.tags["tmdsub.audit_report"] == str(out / "report.html")
    assert "audit/report.html" in run.data.tags["mlflow.note.content"]
    logged = {a.path for a in client.list_artifacts(run_id, "audit")}
    assert logged == {f"audit/{n}" for n in ("report.md", "report.html", "counts.png", "bound_vs_gap.png")}
    assert {a.path for a in client.list_artifacts(run_id)} >= {"train.json", "audit"}


def test_bad_input_writes_no_report(mutag_run, tmp_path):
    """A corrupt input is one InputError naming the file, and nothing is written."""
    from flows.audit import audit_flow
    from flows.config.audit import AuditPaths

    p, env = mutag_run
    bad = {**p, "manifest": str(tmp_path / "manifest.json"), "out_dir": str(tmp_path / "audit")}
    Path(bad["manifest"]).write_text("{not json")
    with pytest.raises(InputError, match="manifest.json: not valid JSON"):
        audit_flow(AuditPaths("MUTAG", *_audit_args(bad), params=p["params"], lock=p["lock"]))
    assert not Path(bad["out_dir"]).exists()


def test_cli_missing_input_is_one_error_line(mutag_run, tmp_path):
    p, env = mutag_run
    opts = ["--graphs", "--tmd-meta", "--selection", "--nodes", "--requests", "--manifest", "--labels-meta",
            "--train-info", "--metrics", "--metrics-nodes", "--plot", "--out-dir"]
    values = _audit_args({**p, "metrics": str(tmp_path / "missing.json"), "out_dir": str(tmp_path / "audit")})
    args = [x for pair in zip(opts, values) for x in pair]
    res = run_cli("audit", "MUTAG", *args, "--params", p["params"], "--lock", p["lock"], env=env)
    assert res.returncode == 2, res.stdout + res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {tmp_path / 'missing.json'}: not found (run the pipeline up to the stage that "
                      "writes it: dvc repro)"], res.stderr
    assert not (tmp_path / "audit").exists()


# ------------------------------------------------------------------------------------------------ real browser
@pytest.mark.skipif(not HAVE_CHROMIUM, reason=NO_CHROMIUM)
def test_report_renders_in_headless_chromium(audited):
    res, p = audited
    f = res["facts"]
    page_file = Path(p["out_dir"]) / "report.html"
    text, images, problems, requests = open_in_chromium(page_file)
    for fact in ("tmdsub audit report: MUTAG", f["provenance"]["mlflow_run_id"], f["provenance"]["git_sha"],
                 f["data"]["store_sha256"], f["data"]["content_sha256"], "Graphs kept and dropped",
                 "Nodes kept and dropped", "ε and the bound", "labelling cost saved",
                 "dvc repro audit@MUTAG", f"{f['bound']['epsilon']:.4g}", str(f["graphs"]["dropped"])):
        assert fact in text, fact
    assert len(images) == 2 and all(done and width > 0 for done, width, _ in images), images
    assert problems == [] and requests == [page_file.as_uri()], (problems, requests)
