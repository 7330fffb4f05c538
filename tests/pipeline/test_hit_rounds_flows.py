"""Hit hunting through a real ``dvc repro`` (issue 68): a SMILES pool without labels, ``select.goal: maximize``,
round one at 5 % (label-free: k-medoids on the fingerprint distance), a lab that answers, ``tmdsub labels commit``, round two at
10 % picked for the best predicted values; the audit sample is never picked, the answered picks are kept, the round
records its goal and acquisition, and the new picks are better than the pool on average; once answered, the audit
report and `tmdsub summary` list the best measured so far and the predicted best not yet measured.  The lab plays from
MoleculeACE's measured CHEMBL2835_Ki values."""
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


def test_two_rounds_maximize_pick_the_best_and_never_the_audit_sample(tmp_path):
    env = pipeline_env("")
    env.pop("PREFECT_API_URL")
    ws = git_workspace(tmp_path, env)
    rows = list(csv.DictReader(open(RAW / "MoleculeACE" / "CHEMBL2835_Ki.csv", newline="")))[:N]
    hidden = {r["smiles"]: float(r["y"]) for r in rows}
    (ws / "data" / "raw" / "POOL.csv").write_text("smiles\n" + "".join(f"{r['smiles']}\n" for r in rows))
    params = yaml.safe_load((ws / "params.yaml").read_text())
    params["base"]["datasets"] = {"POOL": "POOL.csv"}
    params["select"]["fraction"] = 0.05
    params["select"]["goal"] = "maximize"
    params["labels"]["source"] = "lab/round.csv"
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    _sh([DVC, "repro", "label_requests@POOL"], ws, env)
    sel1 = json.loads((ws / "data/selection/POOL/selection.json").read_text())
    from tmdlib.select.hits import HIT_FIRST

    # round one: label-free, k-medoids on the fingerprint distance (the hit benchmark's best first round)
    assert sel1["method"] == "tmd-rounds" and "goal" not in sel1["rounds"] and sel1["rounds"]["first"] == HIT_FIRST
    audit = set(sel1["audit_ids"])
    reqs = list(csv.DictReader(open(ws / "data/labels/POOL/label_requests.csv", newline="")))
    smiles_of = {int(r["graph_id"]): r["source_id"] for r in reqs}
    (ws / "lab").mkdir()
    with open(ws / "lab" / "round.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["smiles", "label"])
        w.writerows((r["source_id"], hidden[r["source_id"]]) for r in reqs)
    _sh([DVC, "repro", "labels@POOL"], ws, env)
    _sh([TMDSUB, "labels", "commit", "POOL"], ws, env)

    params["select"]["fraction"] = 0.1
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _sh([DVC, "repro", "label_requests@POOL"], ws, env)
    sel2 = json.loads((ws / "data/selection/POOL/selection.json").read_text())
    from tmdlib.select.hits import DEFAULT_ACQUISITION

    r2 = sel2["rounds"]
    assert r2["goal"] == "maximize" and r2["strategy"] == "hits" and r2["acquisition"] == DEFAULT_ACQUISITION
    assert sel2["k"] == math.ceil(0.1 * sel2["n_train"]) and set(sel1["medoids"]) <= set(sel2["medoids"])
    assert set(sel2["audit_ids"]) == audit and not audit & set(sel2["medoids"])
    new = set(sel2["medoids"]) - set(sel1["medoids"])
    reqs2 = list(csv.DictReader(open(ws / "data/labels/POOL/label_requests.csv", newline="")))
    smiles_of.update({int(r["graph_id"]): r["source_id"] for r in reqs2})
    assert {int(r["graph_id"]) for r in reqs2 if r["purpose"] != "audit"} == new
    y_new = np.array([hidden[smiles_of[g]] for g in new])
    assert y_new.mean() > np.mean(list(hidden.values()))  # the picks chase the best

    # round two answered: the audit report and the summary show the best measured and the predicted best
    with open(ws / "lab" / "round.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["smiles", "label"])
        w.writerows((r["source_id"], hidden[r["source_id"]]) for r in reqs2)
    _sh([DVC, "repro", "audit@POOL"], ws, env)
    report = (ws / "data/audit/POOL/report.md").read_text()
    assert "Hits (select.goal: maximize)" in report and "measured #1" in report and "predicted #1" in report
    summary = _sh([TMDSUB, "summary"], ws, env).stdout
    assert "[POOL] Hits (select.goal: maximize): the highest measured so far" in summary
    best = max(hidden[smiles_of[g]] for g in set(sel2["medoids"]) | audit if g in smiles_of)
    assert f": {best:.4g}" in summary.split("the highest measured so far")[1].splitlines()[1]
