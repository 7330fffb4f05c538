"""Every task type end to end through the real flows: ingest -> select -> label requests -> labels import ->
train -> evaluate -> audit, on small real molecule sets (MoleculeACE's measured Ki for regression; labels derived
from the molecules for the multi-class and multi-task sets, with gaps).  Labels are checked where they enter."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from helpers import RAW, ROOT
from tmdlib import InputError
from flows.config.nodes import NodesStageConfig

N = 48  # molecules per test set (the first rows of MoleculeACE's CHEMBL2835_Ki)


def _rows() -> list[dict]:
    with open(RAW / "MoleculeACE" / "CHEMBL2835_Ki.csv", newline="") as fh:
        return list(csv.DictReader(fh))[:N]


def _write_csv(path: Path, rows: list[dict], columns: list[str]) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return path


def _dataset(tmp: Path, kind: str) -> tuple[Path, list[str]]:
    """A CSV of ``kind`` (regression: measured -log Ki; multiclass: 3 potency bins; multitask: 2 binary assays
    with gaps) and its label columns."""
    rows = _rows()
    y = np.array([float(r["y"]) for r in rows])
    if kind == "regression":
        return _write_csv(tmp / "data.csv", rows, ["smiles", "y", "split", "cliff_mol"]), ["y"]
    if kind == "multiclass":
        cut = np.quantile(y, [1 / 3, 2 / 3])
        for r, v in zip(rows, y):
            r["potency"] = str(int(np.searchsorted(cut, v)) * 5)  # classes 0, 5, 10 (not indices)
        return _write_csv(tmp / "data.csv", rows, ["smiles", "potency", "split"]), ["potency"]
    for i, (r, v) in enumerate(zip(rows, y)):  # multitask: two assays, some molecules not measured in one
        r["active"] = "" if i % 5 == 0 else str(int(v > np.median(y)))
        r["bulky"] = "" if i % 7 == 3 else str(int(len(r["smiles"]) > 45))
    return _write_csv(tmp / "data.csv", rows, ["smiles", "active", "bulky", "split"]), ["active", "bulky"]


def _label_file(path: Path, store: str, requests: str, columns: list[str], source: Path) -> Path:
    """The labelling team's answer for the requested graphs, in the source CSV's own values."""
    import pyarrow.parquet as pq

    src = list(csv.DictReader(open(source, newline="")))
    gids = pq.read_table(requests).column("graph_id").to_pylist()
    head = ["graph_id", "label"] if len(columns) == 1 else ["graph_id", *columns]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(head)
        for g in gids:
            w.writerow([g] + [src[g][c] for c in columns])
    return path


@pytest.mark.parametrize("kind", ["regression", "multiclass", "multitask"])
def test_task_type_end_to_end(kind, tmp_path, monkeypatch):
    from flows.audit import audit_flow
    from flows.config.audit import AuditPaths
    from flows.evaluate import evaluate_flow
    from flows.ingest import ingest_flow
    from flows.config.ingest import IngestStageConfig
    from flows.labels import label_requests_flow, labels_import_flow
    from flows.select import select_flow
    from flows.config.select import SelectStageConfig
    from flows.tmd import tmd_matrix_flow
    from flows.train import train_flow
    from tmdlib.store import read_task
    from flows.config.evaluate import EvaluateStageConfig
    from flows.config.train import TrainStageConfig

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    source, columns = _dataset(tmp_path, kind)
    d = {k: str(tmp_path / v) for k, v in {
        "graphs": "DS.parquet", "matrix": "tmd/matrix.npy", "meta": "tmd/meta.json", "selection": "selection.json",
        "labels": "labels", "model": "model.pt", "train": "train.json", "metrics": "metrics.json",
        "plot": "bound.png", "audit": "audit"}.items()}
    summary = ingest_flow(smiles_csv=str(source), name="DS", out=d["graphs"], cfg=IngestStageConfig(
        label_column=columns, split_column="split", keep_column=["cliff_mol"] if kind == "regression" else None))
    task = read_task(d["graphs"])
    assert task.type == kind and summary["graphs"] == N
    if kind == "multiclass":
        assert task.classes == (0.0, 5.0, 10.0)
    tmd_matrix_flow(d["graphs"], d["matrix"], d["meta"], str(tmp_path / "cache"))
    sel = select_flow(d["graphs"], d["selection"], matrix=d["matrix"], cfg=SelectStageConfig(fraction=0.25, restarts=1))
    split = [r["split"] for r in _rows()]
    written = json.loads(Path(d["selection"]).read_text())
    assert written["test_ids"] == [i for i, s in enumerate(split) if s == "test"]  # the dataset's own split
    assert "test_ids" not in sel and sel["medoids"] == written["medoids"]  # per-graph lists only in the file
    man = label_requests_flow(d["graphs"], d["selection"], d["labels"])
    requests = str(Path(d["labels"]) / "label_requests.parquet")
    answer = _label_file(tmp_path / "answer.csv", d["graphs"], requests, columns, source)
    labels_import_flow(d["graphs"], requests, str(answer), d["labels"])
    assert json.loads((Path(d["labels"]) / "labels.json").read_text())["store_content_sha256"] == sel[
        "store_content_sha256"] == man["store_content_sha256"]
    info = train_flow(d["graphs"], d["selection"], str(Path(d["labels"]) / "labels.csv"), d["model"], d["train"],
                      cfg=TrainStageConfig(epochs=3, hidden=16, log_mlflow=True, lipschitz_budget="none"))
    assert info["task"]["type"] == kind and info["model"]["out_dim"] == task.output_dim
    assert info["mlflow"]["model"]["registered_model"] == "tmdsub-DS"
    m = evaluate_flow(d["graphs"], d["selection"], d["model"], d["train"], d["metrics"], d["plot"], matrix=d["matrix"],
                      tmd_meta=d["meta"], cfg=EvaluateStageConfig(full_epochs=2, log_mlflow=True))
    headline = {"regression": "rmse", "multiclass": "accuracy", "multitask": "rocauc"}[kind]
    assert m["test"]["metric"] == headline and m["task"]["type"] == kind
    b = m["bound"]
    assert b["loss"] == {"regression": "huber", "multiclass": "ce", "multitask": "bce"}[kind]
    assert b["loss_scale_source"] == "trivial_predictor" and b["loss_scale"] > 0
    assert b["lemma_holds_label_consistent"] and b["bound_with_labels_holds"]
    if kind == "regression":
        assert set(m["test"]["coreset_metrics"]) >= {"rmse", "mae", "r2", "spearman"}
        assert m["test"]["coreset_model"] > 0.05  # an RMSE in log units, de-standardised
    files = {"graphs": d["graphs"], "tmd_meta": d["meta"], "selection": d["selection"],
             "requests": requests, "manifest": str(Path(d["labels"]) / "manifest.json"),
             "labels_meta": str(Path(d["labels"]) / "labels.json"), "train_info": d["train"], "metrics": d["metrics"],
             "plot": d["plot"]}
    nodes = tmp_path / "nodes.parquet"
    from flows.select import nodes_flow

    nodes_flow(d["graphs"], str(nodes), cfg=NodesStageConfig(fraction=0.5))
    (tmp_path / "metrics_nodes.json").write_text(json.dumps({"nodes": None}))
    res = audit_flow(AuditPaths("DS", files["graphs"], files["tmd_meta"], files["selection"], str(nodes),
                                files["requests"], files["manifest"], files["labels_meta"], files["train_info"],
                                files["metrics"], str(tmp_path / "metrics_nodes.json"), files["plot"], d["audit"],
                                params=str(ROOT / "params.yaml"), lock=str(tmp_path / "dvc.lock")))
    report = Path(res["files"]["markdown"]).read_text()
    assert f"| task | {kind} |" in report and headline in report


@pytest.mark.parametrize("kind,bad,message", [
    ("regression", "abc", "is not a number, a qualified number"),
    ("multiclass", "7", "is not one of the classes 0, 5, 10"),
    ("multitask", "2", r"is not a binary label \(0 or 1\); the dataset's task is multitask"),
])
def test_labels_are_checked_where_they_enter(kind, bad, message, tmp_path):
    """A label that does not fit the dataset's task is refused at import, with its line, and nothing is written."""
    from flows.ingest import ingest_flow
    from flows.config.ingest import IngestStageConfig
    from flows.labels import label_requests_flow, labels_import_flow
    from flows.select import select_flow
    from flows.config.select import SelectStageConfig

    source, columns = _dataset(tmp_path, kind)
    store = str(tmp_path / "DS.parquet")
    ingest_flow(smiles_csv=str(source), name="DS", out=store,
                cfg=IngestStageConfig(label_column=columns, split_column="split"))
    select_flow(store, str(tmp_path / "sel.json"), cfg=SelectStageConfig(method="random", fraction=0.25))
    label_requests_flow(store, str(tmp_path / "sel.json"), str(tmp_path / "labels"))
    requests = str(tmp_path / "labels" / "label_requests.parquet")
    answer = _label_file(tmp_path / "answer.csv", store, requests, columns, source)
    lines = answer.read_text().splitlines()
    cells = lines[2].split(",")
    cells[1] = bad
    lines[2] = ",".join(cells)
    answer.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=message) as err:
        labels_import_flow(store, requests, str(answer), str(tmp_path / "labels"))
    assert err.value.path == str(answer) and err.value.line == 3
    assert not (tmp_path / "labels" / "labels.csv").exists()


def test_binary_float_label_refused_at_import(tmp_path):
    """The issue's case: a float label for a binary task is refused by `labels import`, not first by `train`."""
    from flows.ingest import ingest_flow
    from flows.config.ingest import IngestStageConfig
    from flows.labels import label_requests_flow, labels_import_flow
    from flows.select import select_flow
    from flows.config.select import SelectStageConfig

    rows = _rows()
    for r in rows:
        r["label"] = str(int(float(r["y"]) > -1))
    src = _write_csv(tmp_path / "b.csv", rows, ["smiles", "label"])
    store = str(tmp_path / "B.parquet")
    ingest_flow(smiles_csv=str(src), name="B", out=store, cfg=IngestStageConfig(label_column=["label"]))
    select_flow(store, str(tmp_path / "sel.json"), cfg=SelectStageConfig(method="random", fraction=0.25))
    label_requests_flow(store, str(tmp_path / "sel.json"), str(tmp_path / "labels"))
    requests = str(tmp_path / "labels" / "label_requests.parquet")
    import pyarrow.parquet as pq

    gids = pq.read_table(requests).column("graph_id").to_pylist()
    (tmp_path / "lab.csv").write_text("graph_id,label\n" + "".join(
        f"{g},{0.3010299956639812 if i == 0 else 1}\n" for i, g in enumerate(gids)))
    with pytest.raises(InputError, match=r"lab.csv:2: label 0.3010299956639812 is not a binary label"):
        labels_import_flow(store, requests, str(tmp_path / "lab.csv"), str(tmp_path / "labels"))
    assert not (tmp_path / "labels" / "labels.csv").exists()
