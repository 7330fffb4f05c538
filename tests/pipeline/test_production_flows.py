"""Production mode end to end through the real flows (issue 52): a SMILES pool without labels, label requests with
an audit sample, a lab played from a hidden column that answers part of them, the task fixed by its answer, a
molecule model, the pool estimate with its interval, predictions with intervals for every pool molecule, and the
next round.  Regression: MoleculeACE's CHEMBL204_Ki (measured -log Ki); classification: OGB's BACE (its class).
Nothing is set by hand: not the task, not the model's inputs."""
from __future__ import annotations

import csv
import gzip
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from helpers import RAW
from flows.config.predict import PredictStageConfig

N = 360


def _regression_rows():
    rows = list(csv.DictReader(open(RAW / "MoleculeACE" / "CHEMBL204_Ki.csv", newline="")))[:N]
    return [r["smiles"] for r in rows], [float(r["y"]) for r in rows]


def _classification_rows():
    with gzip.open(RAW / "ogbg_molbace" / "mapping" / "mol.csv.gz", "rt") as fh:
        rows = list(csv.DictReader(fh))
    rng = np.random.default_rng(0)
    pick = np.sort(rng.choice(len(rows), size=N, replace=False))  # both classes, in the file's proportions
    return [rows[i]["smiles"] for i in pick], [int(rows[i]["Class"]) for i in pick]


def _walk(tmp, smiles, hidden, model, skip_every=8):
    """Ingest → TMD → select → requests → the lab (skips every ``skip_every``-th coreset request) → import →
    train → evaluate → predict; returns what each step gave."""
    from flows.evaluate import evaluate_flow
    from flows.ingest import ingest_flow
    from flows.config.ingest import IngestStageConfig
    from flows.labels import label_requests_flow, labels_import_flow
    from flows.predict import predict_flow
    from flows.select import select_flow
    from flows.config.select import SelectStageConfig
    from flows.tmd import tmd_matrix_flow
    from flows.train import train_flow
    from flows.config.evaluate import EvaluateStageConfig
    from flows.config.train import TrainStageConfig

    with open(tmp / "pool.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([["smiles"]] + [[s] for s in smiles])
    store = str(tmp / "POOL.parquet")
    ingest_flow(smiles_csv=str(tmp / "pool.csv"), name="POOL", out=store, cfg=IngestStageConfig(workers=1))
    tmd_matrix_flow(store, str(tmp / "tmd" / "matrix.npy"), str(tmp / "tmd" / "meta.json"), str(tmp / "cache"))
    sel_path = str(tmp / "sel.json")
    select_flow(store, sel_path, matrix=str(tmp / "tmd" / "matrix.npy"), cache_dir=str(tmp / "cache"),
                cfg=SelectStageConfig(fraction=0.15))
    label_requests_flow(store, sel_path, str(tmp / "labels"), labelled=str(tmp / "ledger.csv"))
    req = pq.read_table(tmp / "labels" / "label_requests.parquet").to_pylist()
    of = dict(zip(smiles, hidden))
    answered = [r for i, r in enumerate(req) if r["purpose"] == "audit" or i % skip_every != skip_every - 1]
    with open(tmp / "lab.csv", "w", newline="") as fh:  # keyed by SMILES, the value column named as the lab likes
        csv.writer(fh).writerows([["smiles", "measured"]] + [[r["source_id"], of[r["source_id"]]] for r in answered])
    labels_import_flow(store, str(tmp / "labels" / "label_requests.parquet"), str(tmp / "lab.csv"),
                       str(tmp / "labels"), str(tmp / "ledger.csv"))
    labels = str(tmp / "labels" / "labels.csv")
    info = train_flow(store, sel_path, labels, str(tmp / "model.pt"), str(tmp / "train.json"),
                      cfg=TrainStageConfig(model=model, log_mlflow=False))
    metrics = evaluate_flow(store, sel_path, str(tmp / "model.pt"), str(tmp / "train.json"), str(tmp / "m.json"),
                            str(tmp / "p.png"), matrix=str(tmp / "tmd" / "matrix.npy"),
                            tmd_meta=str(tmp / "tmd" / "meta.json"), cfg=EvaluateStageConfig(log_mlflow=False))
    pred = predict_flow(store, sel_path, str(tmp / "model.pt"), str(tmp / "train.json"), str(tmp / "pred"),
                        cfg=PredictStageConfig(log_mlflow=False))
    table = pq.read_table(tmp / "pred" / "predictions.parquet").to_pylist()
    return {"store": store, "sel": json.loads(open(sel_path).read()), "req": req, "answered": answered,
            "info": info, "metrics": metrics, "pred": pred, "table": table, "of": of}


def test_regression_pool_without_labels(tmp_path, monkeypatch):
    from flows.labels import label_requests_flow, labels_commit_flow
    from flows.select import select_flow
    from flows.config.select import SelectStageConfig
    from tmdlib.store import read_task

    smiles, hidden = _regression_rows()
    w = _walk(tmp_path, smiles, hidden, "auto")  # nothing set: the measured default for molecule regression
    assert not read_task(w["store"]).decided  # ingest guessed nothing
    purposes = [r["purpose"] for r in w["req"]]
    n_audit = purposes.count("audit")
    assert n_audit == 50 and w["sel"]["mode"] == "production" and len(w["sel"]["audit_ids"]) == 50
    assert set(w["sel"]["audit_ids"]).isdisjoint(w["sel"]["medoids"])  # never trained on
    info = w["info"]
    assert info["task"]["type"] == "regression" and info["model_name"] == "svm"
    assert info["partial"]["answered_medoids"] < info["partial"]["requested_medoids"]  # partial answers: trained
    m = w["metrics"]
    est = m["pool_estimate"]
    assert m["mode"] == "production" and est["metric"] == "rmse" and est["n_audit"] == 50
    assert est["ci_low"] < est["value"] < est["ci_high"]
    # the interval contains the model's RMSE on the molecules it was not trained on (measured with the hidden values)
    rows = [r for r in w["table"] if not r["labelled"]]
    truth = float(np.sqrt(np.mean([(r["prediction"] - w["of"][r["smiles"]]) ** 2 for r in rows])))
    assert est["ci_low"] <= truth <= est["ci_high"]
    assert m["test"]["coreset_model"] is None and "not measurable" in m["not_measurable"]["observed_gap"]
    assert m["reference"] is None and m["bound"]["gap_observed"] is None
    # the constant predictor (the τ-weighted mean of the coreset's labels) on the same audit sample (issue 61)
    const = m["constant_predictor"]
    assert const["metric"] == "rmse" and const["n_audit"] == 50 and const["worse"] is (est["value"] > const["value"])
    assert m["bound"]["worse_than_constant"] is const["worse"] and "predicting the mean" in const["sentence"]
    # predictions: every pool molecule, with an interval whose coverage on the unlabelled ones is near 90 %
    assert len(w["table"]) == N and all(r["lower"] <= r["prediction"] <= r["upper"] for r in w["table"])
    covered = np.mean([r["lower"] <= w["of"][r["smiles"]] <= r["upper"] for r in rows])
    assert 0.8 <= covered <= 0.99
    assert sum(r["labelled"] for r in w["table"]) == len(w["answered"])
    # the applicability domain (issue 61): each row's similarity to the nearest trained molecule, in_domain by the
    # threshold stated in predictions.json; intervals normalised by the difficulty (wider out of domain)
    dom = w["pred"]["domain"]
    assert dom["computed"] and 0 < dom["threshold"] < 1 and "quantile" in dom["rule"] and w["pred"]["normalised"]
    assert all(0 <= r["nn_similarity"] <= 1 and r["in_domain"] == (r["nn_similarity"] >= dom["threshold"])
               for r in w["table"])
    assert dom["rows_in_domain"] + dom["rows_out_of_domain"] == N and dom["rows_out_of_domain"] > 0
    # the intervals' rule and bins (issue 67): 50 audit molecules are fewer than 2 x 50, so one similarity bin, and
    # predictions.json says so instead of pretending to a per-bin coverage
    iv = w["pred"]["intervals"]
    (bins,) = iv["bins"].values()
    assert iv["rule"] == "similarity-bins" and iv["mondrian"] and iv["min_bin"] == 50 and "Mondrian" in iv["method"]
    assert [b["n_calibration"] for b in bins] == [50] and bins[0]["q"] > 0 and iv["difficulty_power"][0] >= 0
    assert "fewer than 2 x 50: one similarity bin" in iv["bin_notes"][0]
    assert dom["similarity_bins"]["n_calibration"] == [50] and dom["similarity_bins"]["lower_edges"] == []
    width = {r["in_domain"]: [] for r in w["table"]}
    for r in w["table"]:
        width[r["in_domain"]].append(r["upper"] - r["lower"])
    assert np.mean(width[False]) > np.mean(width[True])
    # workers share the pool's chunks (issue 55): the same table from 2 processes as from one
    import tasks.predict as tp
    from flows.predict import predict_flow

    monkeypatch.setattr(tp, "CHUNK", 100)  # 4 chunks of the 360 molecules
    args = (w["store"], str(tmp_path / "sel.json"), str(tmp_path / "model.pt"), str(tmp_path / "train.json"))
    one = predict_flow(*args, str(tmp_path / "pred1"), cfg=PredictStageConfig(log_mlflow=False, workers=1))
    two = predict_flow(*args, str(tmp_path / "pred2"), cfg=PredictStageConfig(log_mlflow=False, workers=2))
    assert (one["workers"], two["workers"]) == (1, 2)
    assert pq.read_table(tmp_path / "pred2" / "predictions.parquet").equals(
        pq.read_table(tmp_path / "pred1" / "predictions.parquet"))
    assert pq.read_table(tmp_path / "pred1" / "predictions.parquet").to_pylist() == w["table"]
    # the audit report leads with the estimate and says what cannot be measured
    from flows.audit import audit_flow
    from flows.config.audit import AuditPaths, AuditStageConfig
    from flows.select import nodes_flow
    from helpers import ROOT

    t = tmp_path
    nodes_flow(w["store"], str(t / "none.parquet"))
    audit_flow(AuditPaths("POOL", w["store"], str(t / "tmd" / "meta.json"), str(t / "sel.json"),
                          str(t / "none.parquet"), str(t / "labels" / "label_requests.parquet"),
                          str(t / "labels" / "manifest.json"), str(t / "labels" / "labels.json"),
                          str(t / "train.json"), str(t / "m.json"), str(t / "m.json"), str(t / "p.png"),
                          str(t / "audit"), params=str(ROOT / "params.yaml"), lock=str(t / "none.lock"),
                          predictions=str(t / "pred" / "predictions.parquet")),
               AuditStageConfig(log_mlflow=False))
    report = (t / "audit" / "report.md").read_text()
    assert report.index("Pool estimate") < report.index("Predictions: the audit sample") < report.index("Verdict")
    assert "not measurable" in report
    # what a chemist looks at: the audit sample against the lab (parity, with the intervals), the pool's
    # predictions, the in-domain share as predictions.json states it
    assert f"| in the applicability domain | {dom['rows_in_domain']} of {N} " in report
    assert "(parity.png)" in report and "(predictions.png)" in report
    assert (t / "audit" / "parity.png").read_bytes().startswith(b"\x89PNG")
    page = (t / "audit" / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 4  # counts, bound, parity, predictions
    assert "Constant predictor: " + const["sentence"] in report
    assert "requested graphs without an answer yet" in report
        # round 2: the ledger holds round 1; a larger budget asks only for new molecules, never the audit again
    labels_commit_flow(w["store"], str(tmp_path / "labels" / "labels.csv"), str(tmp_path / "ledger.csv"))
    select_flow(w["store"], str(tmp_path / "sel.json"), matrix=str(tmp_path / "tmd" / "matrix.npy"),
                labelled=str(tmp_path / "ledger.csv"), cache_dir=str(tmp_path / "cache"),
                cfg=SelectStageConfig(fraction=0.3))
    label_requests_flow(w["store"], str(tmp_path / "sel.json"), str(tmp_path / "labels2"),
                        labelled=str(tmp_path / "ledger.csv"))
    again = pq.read_table(tmp_path / "labels2" / "label_requests.parquet").to_pylist()
    done = {r["source_id"] for r in w["answered"]}
    assert again and all(r["purpose"] == "coreset" and r["source_id"] not in done for r in again)


def test_classification_pool_without_labels(tmp_path):
    smiles, hidden = _classification_rows()
    w = _walk(tmp_path, smiles, hidden, "auto")
    assert w["info"]["task"]["type"] == "binary"  # decided by the lab's 0/1 answers
    assert w["info"]["model_name"] == "rf"  # the measured default for molecule classification
    est = w["metrics"]["pool_estimate"]
    assert est["metric"] == "accuracy" and est["ci_low"] <= est["value"] <= est["ci_high"]
    rows = [r for r in w["table"] if not r["labelled"]]
    assert all(abs(r["p_0"] + r["p_1"] - 1) < 1e-9 and r["prediction"] in (0.0, 1.0) for r in w["table"])
    hold = np.mean([str(w["of"][r["smiles"]]) in r["prediction_set"].split() for r in rows])
    assert hold >= 0.8  # the sets hold the true class at about the nominal 90 %
    truth = np.mean([r["prediction"] == w["of"][r["smiles"]] for r in rows])
    assert est["ci_low"] - 0.05 <= truth <= est["ci_high"] + 0.05


def test_predict_for_new_smiles_gives_a_reason_per_bad_row(tmp_path):
    from flows.predict import predict_flow

    smiles, hidden = _regression_rows()
    w = _walk(tmp_path, smiles, hidden, "rf")
    new = tmp_path / "new.csv"
    new.write_bytes(b"smiles\nCCO\nnot-a-smiles\n\nc1ccccc1O\n")
    meta = predict_flow(w["store"], str(tmp_path / "sel.json"), str(tmp_path / "model.pt"), str(tmp_path / "train.json"),
                        str(tmp_path / "pred"), smiles_csv=str(new), cfg=PredictStageConfig(log_mlflow=False))
    rows = pq.read_table(tmp_path / "pred" / "new.predictions.parquet").to_pylist()
    assert [r["reason"] is None for r in rows] == [True, False, False, True] and meta["rows_without_prediction"] == 2
    assert rows[0]["prediction"] is not None and rows[1]["prediction"] is None and "parse" in rows[1]["reason"]
    assert rows[0]["lower"] < rows[0]["prediction"] < rows[0]["upper"]


def test_a_graph_model_predicts_for_new_smiles_too(tmp_path):
    """A GIN trained on the pool's graphs predicts for new molecules (their graphs, the store's features), and
    states its certificate in production."""
    from flows.predict import predict_flow

    smiles, hidden = _regression_rows()
    w = _walk(tmp_path, smiles[:120], hidden[:120], "gin")
    assert w["metrics"]["bound"]["c_epsilon"] is not None
    (tmp_path / "new.csv").write_text(f"smiles\n{smiles[0]}\nnope\n")
    predict_flow(w["store"], str(tmp_path / "sel.json"), str(tmp_path / "model.pt"), str(tmp_path / "train.json"),
                 str(tmp_path / "pred"), smiles_csv=str(tmp_path / "new.csv"), cfg=PredictStageConfig(log_mlflow=False))
    rows = pq.read_table(tmp_path / "pred" / "new.predictions.parquet").to_pylist()
    pool_row = next(r for r in w["table"] if r["smiles"] == smiles[0])
    assert rows[0]["prediction"] == pytest.approx(pool_row["prediction"], rel=1e-6)  # same molecule, same number
    assert rows[1]["prediction"] is None and rows[1]["reason"]


def test_the_registered_model_answers_for_smiles_like_the_predictions_file(tmp_path, monkeypatch):
    """The MLflow model of a molecule pool is a pyfunc from code: a DataFrame of SMILES in, the predictions file's
    numbers out, a bad SMILES a null prediction with its reason; its weights are plain tensors."""
    import mlflow.pyfunc
    import pandas as pd

    from flows.train import train_flow
    from flows.config.train import TrainStageConfig

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    smiles, hidden = _regression_rows()
    w = _walk(tmp_path, smiles[:150], hidden[:150], "svm")
    info = train_flow(w["store"], str(tmp_path / "sel.json"), str(tmp_path / "labels" / "labels.csv"),
                      str(tmp_path / "model.pt"), str(tmp_path / "train.json"), cfg=TrainStageConfig(model="svm"))
    logged = info["mlflow"]["model"]
    assert logged["kind"] == "smiles-pyfunc" and logged["registered_model"] == "tmdsub-POOL"
    served = mlflow.pyfunc.load_model(f"models:/tmdsub-POOL/{logged['version']}")
    # the property its predictions are in (labels.name: auto = the lab's value column), as the predictions file says
    assert served.metadata.metadata == {"property": info["labels_meta"]["name"]} == {"property": "measured"}
    out = served.predict(pd.DataFrame({"smiles": [smiles[3], "not a smiles", smiles[7]]}))
    file = {r["smiles"]: r["prediction"] for r in w["table"]}
    assert out["prediction"][0] == pytest.approx(file[smiles[3]], rel=1e-9)
    assert out["prediction"][2] == pytest.approx(file[smiles[7]], rel=1e-9)
    assert np.isnan(out["prediction"][1]) and "parse" in out["reason"][1] and pd.isna(out["reason"][0])
    # the predictions file's columns (issue 61): interval, similarity to the nearest trained molecule, in_domain
    row = {r["smiles"]: r for r in w["table"]}
    for i, s in ((0, smiles[3]), (2, smiles[7])):
        for k in ("lower", "upper", "nn_similarity"):
            assert out[k][i] == pytest.approx(row[s][k], rel=1e-9)
        assert bool(out["in_domain"][i]) == row[s]["in_domain"]
    assert np.isnan(out["lower"][1]) and pd.isna(out["in_domain"][1])
    from flows.predict import predict_flow

    with open(tmp_path / "new.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([["smiles"], [smiles[3]], ["not a smiles"], [smiles[7]]])
    predict_flow(w["store"], str(tmp_path / "sel.json"), str(tmp_path / "model.pt"), str(tmp_path / "train.json"),
                 str(tmp_path / "pred"), smiles_csv=str(tmp_path / "new.csv"),
                 cfg=PredictStageConfig(log_mlflow=False))
    file_cols = pq.read_schema(tmp_path / "pred" / "new.predictions.parquet").names
    assert list(out.columns) == [c for c in file_cols if c != "line"]
    # each evaluate stage's MLflow run has its own name (issue 61): evaluate@POOL, evaluate_nodes@POOL
    from flows.evaluate import evaluate_flow

    for nodes, stage in ((None, "evaluate@POOL"), (str(tmp_path / "nodes.parquet"), "evaluate_nodes@POOL")):
        m = evaluate_flow(w["store"], str(tmp_path / "sel.json"), str(tmp_path / "model.pt"),
                          str(tmp_path / "train.json"), str(tmp_path / "m.json"), str(tmp_path / "p.png"),
                          nodes=nodes, tmd_meta=str(tmp_path / "tmd" / "meta.json"))
        assert m["stage"] == stage
        assert mlflow.MlflowClient().get_run(m["mlflow"]["run_id"]).info.run_name == stage


def test_node_stages_are_off_on_a_production_molecule_pool(tmp_path, monkeypatch):
    """nodes.method: auto (issue 61 item 4, issue 63): on a molecule pool without labels the nodes stage writes a
    nodes.parquet without rows that says why, train_nodes trains nothing, evaluate_nodes measures nothing and starts
    no MLflow run, and the audit report and `tmdsub summary` say it once, with no number."""
    from flows.audit import audit_flow
    from flows.config.audit import AuditPaths, AuditStageConfig
    from flows.evaluate import evaluate_flow
    from flows.select import nodes_flow
    from flows.summary import metrics_lines
    from flows.train import train_flow
    from helpers import ROOT
    from tasks.io import nodes_off

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    smiles, hidden = _regression_rows()
    w = _walk(tmp_path, smiles[:120], hidden[:120], "rf")
    t = tmp_path
    line = "node subsampling: off (production molecule pool; nodes.method: auto)"
    res = nodes_flow(w["store"], str(t / "nodes.parquet"))  # the default: auto
    assert res["method"] == "off" and res["reason"] == "production molecule pool; nodes.method: auto"
    table = pq.read_table(t / "nodes.parquet")
    assert table.num_rows == 0 and {"graph_id", "nodes", "k", "epsilon"} <= set(table.column_names)
    assert nodes_off(str(t / "nodes.parquet"))["line"] == line
    info = train_flow(w["store"], str(t / "sel.json"), str(t / "labels" / "labels.csv"), str(t / "model_nodes.pt"),
                      str(t / "train_nodes.json"), nodes=str(t / "nodes.parquet"))
    saved = json.loads((t / "train_nodes.json").read_text())
    assert info["skipped"] and saved["skipped"] and saved["line"] == line and saved["stage"] == "train_nodes@POOL"
    assert (t / "model_nodes.pt").is_file() and "mlflow" not in saved
    m = evaluate_flow(w["store"], str(t / "sel.json"), str(t / "model_nodes.pt"), str(t / "train_nodes.json"),
                      str(t / "metrics_nodes.json"), str(t / "bound_vs_gap_nodes.png"), nodes=str(t / "nodes.parquet"),
                      tmd_meta=str(t / "tmd" / "meta.json"))
    saved = json.loads((t / "metrics_nodes.json").read_text())
    assert m["skipped"] and saved["line"] == line and saved["stage"] == "evaluate_nodes@POOL"
    assert "bound" not in saved and "test" not in saved and "mlflow" not in m
    assert (t / "bound_vs_gap_nodes.png").read_bytes().startswith(b"\x89PNG")
    assert not (t / "mlflow.db").exists()  # neither stage opened the tracking store
    audit_flow(AuditPaths("POOL", w["store"], str(t / "tmd" / "meta.json"), str(t / "sel.json"),
                          str(t / "nodes.parquet"), str(t / "labels" / "label_requests.parquet"),
                          str(t / "labels" / "manifest.json"), str(t / "labels" / "labels.json"),
                          str(t / "train.json"), str(t / "m.json"), str(t / "metrics_nodes.json"), str(t / "p.png"),
                          str(t / "audit"), params=str(ROOT / "params.yaml"), lock=str(t / "none.lock")),
               AuditStageConfig(log_mlflow=False))
    report = (t / "audit" / "report.md").read_text()
    assert report.count(line) == 1 and "mean ε_i" not in report and "nodes (all graphs)" not in report
    assert "Pool estimate" in report  # the main model's report is whole
    verdict, headline = metrics_lines("data/metrics/POOL/metrics_nodes.json", saved)
    assert verdict == [f"  data/metrics/POOL/metrics_nodes.json: {line}"] and headline == []


def test_a_model_added_in_one_file_walks_the_stages(tmp_path):
    """lgbm (tmdlib/chem/lgbm.py, registered by its entry point) trains, evaluates and predicts like the others."""
    pytest.importorskip("lightgbm")
    smiles, hidden = _regression_rows()
    w = _walk(tmp_path, smiles[:120], hidden[:120], "lgbm")
    assert w["info"]["model_state"]["name"] == "lgbm"
    assert len(w["table"]) == 120 and all(np.isfinite(r["prediction"]) for r in w["table"])
    assert w["metrics"]["bound"]["c_epsilon"] is None  # measured, nothing certified
