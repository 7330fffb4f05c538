"""The pool setting's rounds through a real ``dvc repro`` (issue 60): a SMILES pool without labels, round one at 5 %
with the defaults (``select.method: auto`` = tmd-rounds: its measured first round), a lab that answers all
but one request, ``tmdsub labels commit``, round two at 10 % steered by the labels that came back, with a Random control
arm (``select.control``); the selection keeps what was answered, never asks for the audit sample, certifies the whole
labelled set (recomputed here from the matrix), and is reproducible from the ledger; once round two is answered, the
evaluate stage compares the two arms on the audit sample, and the node-subsampling stages are off (a production molecule
pool), saying so once in the summary and the audit report.  The lab plays from MoleculeACE's measured CHEMBL2835_Ki values."""
from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
import yaml

from helpers import DVC, RAW, TMDSUB, git_workspace, pipeline_env
from helpers import run_ok as _sh

N = 160
pytestmark = pytest.mark.skipif(not (RAW / "MoleculeACE").is_dir(), reason="data/raw not present")


def test_two_rounds_with_the_defaults_learn_from_the_answers(tmp_path):
    env = pipeline_env("")
    env.pop("PREFECT_API_URL")  # ephemeral Prefect in each stage, as a fresh clone has it
    ws = git_workspace(tmp_path, env)
    rows = list(csv.DictReader(open(RAW / "MoleculeACE" / "CHEMBL2835_Ki.csv", newline="")))[:N]
    hidden = {r["smiles"]: float(r["y"]) for r in rows}
    (ws / "data" / "raw" / "POOL.csv").write_text("smiles\n" + "".join(f"{r['smiles']}\n" for r in rows))
    params = yaml.safe_load((ws / "params.yaml").read_text())
    params["base"]["datasets"] = {"POOL": "POOL.csv"}
    params["select"]["fraction"] = 0.05
    params["labels"]["source"] = "lab/round.csv"
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    _sh([DVC, "repro", "label_requests@POOL"], ws, env)
    sel1 = json.loads((ws / "data/selection/POOL/selection.json").read_text())
    n_train = sel1["n_train"]
    from tmdlib.select.rounds import DEFAULT_FIRST, FIRST_PICKERS

    assert sel1["method"] == "tmd-rounds" and sel1["rounds"]["first"] == DEFAULT_FIRST
    assert sel1["rounds"]["space"] == FIRST_PICKERS[DEFAULT_FIRST][1]  # a SMILES pool: the default's own space
    assert sel1["k"] == math.ceil(0.05 * n_train) and sel1["mode"] == "production"
    audit = set(sel1["audit_ids"])
    reqs = list(csv.DictReader(open(ws / "data/labels/POOL/label_requests.csv", newline="")))
    asked = [r for r in reqs if r["purpose"] != "audit"]
    assert {int(r["graph_id"]) for r in asked} == set(sel1["medoids"])

    # the lab answers every request but one coreset molecule, by SMILES
    missing = asked[0]
    (ws / "lab").mkdir()
    with open(ws / "lab" / "round.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["smiles", "label"])
        w.writerows((r["source_id"], hidden[r["source_id"]]) for r in reqs if r is not missing)
    _sh([DVC, "repro", "labels@POOL"], ws, env)
    _sh([TMDSUB, "labels", "commit", "POOL"], ws, env)

    params["select"]["fraction"] = 0.1
    params["select"]["control"] = 0.3
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _sh([DVC, "repro", "label_requests@POOL"], ws, env)
    sel2 = json.loads((ws / "data/selection/POOL/selection.json").read_text())
    answered = set(sel1["medoids"]) - {int(missing["graph_id"])}
    from tmdlib.select.rounds import DEFAULT_DIFFICULTY, DEFAULT_NEXT

    assert sel2["method"] == "tmd-rounds" and sel2["rounds"]["strategy"] == DEFAULT_NEXT
    assert sel2["rounds"]["difficulty_from"] == DEFAULT_DIFFICULTY
    assert sel2["k"] == math.ceil(0.1 * n_train) and answered <= set(sel2["medoids"])
    assert set(sel2["audit_ids"]) == audit and not audit & set(sel2["medoids"])
    assert sel2["rounds"]["round_new"] == sel2["k"] - len(answered)
    control, strategy = set(sel2["rounds"]["control_ids"]), set(sel2["rounds"]["strategy_new_ids"])
    assert len(control) == math.ceil(0.3 * sel2["rounds"]["round_new"]) and not control & strategy
    assert control | strategy == set(sel2["medoids"]) - answered

    # the certificate is the exact epsilon of the whole labelled set, read again off the TMD matrix
    D = np.load(ws / "data/tmd/POOL/matrix.npy")
    from tmdlib.datasets import read_graph_parquet

    ids = np.asarray(read_graph_parquet(ws / "data/graphs/POOL.parquet").column("graph_id").to_numpy())
    pos = {int(g): i for i, g in enumerate(ids)}
    train = np.array([pos[g] for g in sel2["train_ids"]])
    picks = np.array([pos[g] for g in sel2["medoids"]])
    assert sel2["epsilon_mean"] == pytest.approx(D[np.ix_(train, picks)].min(axis=1).mean(), rel=1e-9)

    # reproducible from the ledger: the same command again asks for the same molecules
    before = (ws / "data/selection/POOL/selection.json").read_bytes()
    _sh([DVC, "repro", "--force", "select@POOL"], ws, env)
    assert (ws / "data/selection/POOL/selection.json").read_bytes() == before

    # round two answered: the model, its estimate, and the Random control's verdict on the audit sample
    reqs2 = list(csv.DictReader(open(ws / "data/labels/POOL/label_requests.csv", newline="")))
    with open(ws / "lab" / "round.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["smiles", "label"])
        w.writerows((r["source_id"], hidden[r["source_id"]]) for r in reqs2)
    _sh([DVC, "repro", "audit@POOL"], ws, env)  # evaluate, and the node stages: off here (nodes.method: auto)
    metrics = json.loads((ws / "data/metrics/POOL/metrics.json").read_text())
    c = metrics["control"]
    assert c["n_control"] == len(control) and c["n_strategy"] == len(strategy) and c["verdict"] in (
        "strategy better", "Random better", "undecided")
    # cross-fitted over every uniform label: the audit sample and the control arm (issue 67)
    assert c["low"] <= c["difference"] <= c["high"] and c["n"] == metrics["audit_labelled"] + len(control)
    assert c["folds"] == 5 and c["n_arm"] >= len(control) and "labels_needed" in c
    summary = _sh([TMDSUB, "summary"], ws, env).stdout
    assert "Random control (5-fold cross-fitting over" in summary
    # a production molecule pool: node subsampling off by default (issues 61, 63), said once, nothing trained
    off = "node subsampling: off (production molecule pool; nodes.method: auto)"
    assert summary.count(off) == 1 and "evaluate_nodes@POOL" not in summary and "train_nodes@POOL" not in summary
    assert (ws / "data/audit/POOL/report.md").read_text().count(off) == 1
    assert json.loads((ws / "data/models/POOL/train_nodes.json").read_text())["skipped"]
    manifest = json.loads((ws / "data/labels/POOL/manifest.json").read_text())
    assert manifest["requested_audit"] == 0  # round two: the audit sample was answered in round one
    assert (f"requests {manifest['requested_coreset']} coreset + 0 audit = {manifest['requested_coreset']}"
            in summary)
