"""A series pool and a property pool through two rounds of a real ``dvc repro`` (issue 67), as a new user runs them:
nothing set but the pools and the lab's answers.  SERIES: the first molecules of the committed series pool cut from
MoleculeACE's CHEMBL2835_Ki (one Butina cluster, measured pKi); PROPERTY: the first of the MOSES logP pool (RDKit's
Crippen logP, a computed stand-in lab).  Round one at 5 % picks with the default first picker (stratified on
fingerprint clusters), round two at 10 % with the default later-round strategy, both pools in one workspace; the
audit sample stays uniform and outside every pick, each round certifies its whole labelled set (ε), and the audit
stage estimates the model's error on the pool with an interval."""
from __future__ import annotations

import csv
import json
import math

import pytest
import yaml

from helpers import DVC, ROOT, TMDSUB, git_workspace, pipeline_env
from helpers import run_ok as _sh

N = 100
POOLS = {"SERIES": "series-CHEMBL2835_Ki.csv", "PROPERTY": "moses-logp.csv"}
FOLDER = ROOT / "reports" / "results" / "pool" / "pools"
pytestmark = pytest.mark.skipif(not FOLDER.is_dir(), reason="the committed benchmark pools are not present")


def _answer(ws, hidden: dict, name: str) -> None:
    """The lab answers every request of ``name``, keyed by SMILES as the requests wrote them."""
    reqs = list(csv.DictReader(open(ws / f"data/labels/{name}/label_requests.csv", newline="")))
    with open(ws / "lab" / f"{name}.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["smiles", "value"])
        w.writerows((r["source_id"], hidden[name][r["source_id"]]) for r in reqs)


def test_a_series_and_a_property_pool_through_two_rounds(tmp_path):
    env = pipeline_env("")
    env.pop("PREFECT_API_URL")  # ephemeral Prefect in each stage, as a fresh clone has it
    ws = git_workspace(tmp_path, env)
    hidden = {}
    for name, file in POOLS.items():
        rows = list(csv.DictReader(open(FOLDER / file, newline="")))[:N]
        hidden[name] = {r["smiles"]: float(r["y"]) for r in rows}
        (ws / "data" / "raw" / f"{name}.csv").write_text("smiles\n" + "".join(f"{r['smiles']}\n" for r in rows))
    params = yaml.safe_load((ws / "params.yaml").read_text())
    params["base"]["datasets"] = {name: f"{name}.csv" for name in POOLS}
    params["select"]["fraction"] = 0.05
    params["labels"]["source"] = {name: f"lab/{name}.csv" for name in POOLS}
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (ws / "lab").mkdir()

    from tmdlib.select.rounds import DEFAULT_FIRST, DEFAULT_NEXT

    _sh([DVC, "repro", *(f"label_requests@{n}" for n in POOLS)], ws, env)
    first = {n: json.loads((ws / f"data/selection/{n}/selection.json").read_text()) for n in POOLS}
    for name, sel in first.items():
        assert sel["method"] == "tmd-rounds" and sel["rounds"]["first"] == DEFAULT_FIRST, name
        assert sel["k"] == math.ceil(0.05 * sel["n_train"]) and not set(sel["audit_ids"]) & set(sel["medoids"])
        assert math.isfinite(sel["epsilon_mean"]) and sel["epsilon_mean"] > 0  # the labelled set's certificate
        _answer(ws, hidden, name)
    _sh([DVC, "repro", *(f"labels@{n}" for n in POOLS)], ws, env)
    for name in POOLS:
        _sh([TMDSUB, "labels", "commit", name], ws, env)

    params["select"]["fraction"] = 0.1
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _sh([DVC, "repro", *(f"label_requests@{n}" for n in POOLS)], ws, env)
    for name in POOLS:
        sel = json.loads((ws / f"data/selection/{name}/selection.json").read_text())
        audit = set(first[name]["audit_ids"])
        assert sel["rounds"]["strategy"] == DEFAULT_NEXT, name
        assert sel["k"] == math.ceil(0.1 * sel["n_train"]) and set(first[name]["medoids"]) <= set(sel["medoids"])
        assert set(sel["audit_ids"]) == audit and not audit & set(sel["medoids"])  # uniform, never picked
        assert math.isfinite(sel["epsilon_mean"]) and sel["epsilon_mean"] <= first[name]["epsilon_mean"] + 1e-12
        _answer(ws, hidden, name)

    _sh([DVC, "repro", *(f"audit@{n}" for n in POOLS)], ws, env)
    summary = _sh([TMDSUB, "summary"], ws, env).stdout
    for name in POOLS:
        metrics = json.loads((ws / f"data/metrics/{name}/metrics.json").read_text())
        est = metrics["pool_estimate"]
        assert est["metric"] == "rmse" and est["ci_low"] <= est["value"] <= est["ci_high"], name
        assert est["n_audit"] == metrics["audit_labelled"] > 0
        assert name in summary
