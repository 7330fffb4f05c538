"""Production labels through the real flows (issues 52 and 54): a SMILES pool without labels, a lab that answers
part of the requests by SMILES with qualifiers, notes and replicates, three rounds with a conflict, the ledger's
history, a hand-edited ledger, kill -9 during a commit, two commits queued on the workspace lock, labels.source per
dataset.  The lab plays from the hidden measured -log Ki of MoleculeACE's CHEMBL2835_Ki (first 48 molecules)."""
from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from helpers import RAW, ROOT, run_cli
from tasks.io import read_labels_meta
from tmdlib import InputError

N = 48
ROWS = list(csv.DictReader(open(RAW / "MoleculeACE" / "CHEMBL2835_Ki.csv", newline="")))[:N]
HIDDEN = {i: float(r["y"]) for i, r in enumerate(ROWS)}


@pytest.fixture()
def pool(tmp_path):
    """An unlabelled pool (smiles only), its selection and label requests."""
    from flows.ingest import ingest_flow
    from flows.config.ingest import IngestStageConfig
    from flows.labels import label_requests_flow
    from flows.select import select_flow
    from flows.config.select import SelectStageConfig

    with open(tmp_path / "pool.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["smiles"])
        w.writerows([r["smiles"]] for r in ROWS)
    store = str(tmp_path / "POOL.parquet")
    summary = ingest_flow(smiles_csv=str(tmp_path / "pool.csv"), name="POOL", out=store,
                          cfg=IngestStageConfig(workers=1))
    select_flow(store, str(tmp_path / "sel.json"), cfg=SelectStageConfig(method="random", fraction=0.3))
    label_requests_flow(store, str(tmp_path / "sel.json"), str(tmp_path / "labels"))
    req = pq.read_table(tmp_path / "labels" / "label_requests.parquet").to_pylist()
    return {"tmp": tmp_path, "store": store, "summary": summary, "req": req,
            "requests": str(tmp_path / "labels" / "label_requests.parquet"), "ledger": str(tmp_path / "ledger.csv")}


def _lab(path: Path, rows: list[tuple]) -> str:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["smiles", "label"])
        w.writerows(rows)
    return str(path)


def _import(p, answer, out="labels", **kw):
    from flows.labels import labels_import_flow

    return labels_import_flow(p["store"], p["requests"], answer, str(p["tmp"] / out), p["ledger"], **kw)


def test_unlabelled_pool_three_rounds_with_a_conflict(pool):
    """The task is fixed by the first import (regression from the lab's values); a partial answer trains on what
    came back and says what is missing; round 2 completes it; round 3 measures one molecule again differently."""
    from flows.labels import import_summary, labels_commit_flow
    from tmdlib.store import read_task
    from tasks.labels import task_of
    from tasks.ledger import read_ledger_history

    p, req = pool, pool["req"]
    assert "unlabelled pool" in p["summary"]["task"] and not read_task(p["store"]).decided
    with pytest.raises(InputError, match=r"POOL is a pool without labels.*Send data/labels/POOL/label_requests.csv"
                                         r".*set labels.source"):
        _import(p, "benchmark-standin")
    assert not (p["tmp"] / "labels" / "labels.csv").exists()
    half = req[: len(req) // 2]
    smiles = lambda r: r["source_id"]  # noqa: E731 - the SMILES the requests went out with
    rows = [(smiles(r), HIDDEN[r["graph_id"]]) for r in half]
    rows[1] = (smiles(half[1]), f">{HIDDEN[half[1]['graph_id']]}")  # censored: dropped by default
    rows[2] = (smiles(half[2]), "n.d.")  # a note: a missing value
    rows.append((smiles(half[0]), HIDDEN[half[0]["graph_id"]] + 0.5))  # a replicate
    res = _import(p, _lab(p["tmp"] / "lab1.csv", rows))
    meta = read_labels_meta(str(p["tmp"] / "labels" / "labels.csv"))  # labels.json and the import's import.json
    assert meta["task"]["type"] == "regression" and meta["task_decided"] == "now"
    assert meta["missing"] == len(req) - len(half) + 2 and meta["answered"] == len(half) - 2
    assert meta["censored"]["dropped"] == 1 and meta["notes"]["n.d."]["count"] == 1
    assert meta["replicates"]["graphs"] == 1 and meta["rules"] == {"replicates": "mean", "censored": "drop",
                                                                    "max_spread": 1.0}
    lines = import_summary("POOL", res, p["tmp"] / "labels")
    assert f"{meta['missing']} of {len(req)} requested graphs have no answer yet" in "\n".join(lines)
    labels = np.loadtxt(p["tmp"] / "labels" / "labels.csv", delimiter=",", skiprows=1, ndmin=2)
    g0 = half[0]["graph_id"]
    assert labels[labels[:, 0] == g0, 1] == pytest.approx(HIDDEN[g0] + 0.25)  # the mean of the replicates
    assert task_of(read_task(p["store"]), meta).type == "regression"  # what train / evaluate read
    labels_commit_flow(p["store"], str(p["tmp"] / "labels" / "labels.csv"), p["ledger"])
    # round 2: the rest, plus the cumulative first file's values (already there: not imported again)
    rest = [(smiles(r), HIDDEN[r["graph_id"]]) for r in req[len(req) // 2:]] + [(smiles(half[2]), 1.25)]
    _import(p, _lab(p["tmp"] / "lab2.csv", rest + rows[3:5]))
    meta2 = read_labels_meta(str(p["tmp"] / "labels" / "labels.csv"))
    assert meta2["task_decided"] == "earlier import (the ledger)" and meta2["already_in_ledger"] == 2
    labels_only = json.loads((p["tmp"] / "labels" / "labels.json").read_text())  # the import's bookkeeping apart
    assert "already_in_ledger" not in labels_only and meta2["round"] == 2
    labels_commit_flow(p["store"], str(p["tmp"] / "labels" / "labels.csv"), p["ledger"])
    # round 3: one molecule measured again with another value: a conflict, resolved by the replicate rule
    g = req[-1]["graph_id"]
    _import(p, _lab(p["tmp"] / "lab3.csv", [(smiles(req[-1]), HIDDEN[g] - 1.0)]))
    meta3 = read_labels_meta(str(p["tmp"] / "labels" / "labels.csv"))
    (conflict,) = meta3["conflicts"]
    assert conflict["graph_id"] == g and [m["round"] for m in conflict["measurements"]] == [2, 3]
    assert conflict["label"] == pytest.approx(HIDDEN[g] - 0.5)
    labels_commit_flow(p["store"], str(p["tmp"] / "labels" / "labels.csv"), p["ledger"])
    hist, lmeta = read_ledger_history(p["ledger"])
    assert lmeta["digest_checked"] and lmeta["task"]["type"] == "regression"
    assert sorted(set(hist.column("round").to_pylist())) == [1, 2, 3]
    mine = [v for gid, v in zip(hist.column("graph_id").to_pylist(), hist.column("value").to_pylist()) if gid == g]
    assert mine == pytest.approx([HIDDEN[g], HIDDEN[g] - 1.0])  # both kept, nothing overwritten
    files = set(hist.column("file").to_pylist())
    assert {str(p["tmp"] / f"lab{i}.csv") for i in (1, 2, 3)} == files
    assert hist.num_rows == len(rows) - 1 + len(rest) + 1  # every measurement once (the note is no measurement)
    # median would resolve the conflict the same way for two values; refuse names it
    with pytest.raises(InputError, match=rf"graph {g} measured 2 times"):
        _import(p, _lab(p["tmp"] / "lab4.csv", [(smiles(req[0]), 1.0)]), out="labels4", replicates="refuse")


def test_a_hand_edited_ledger_is_refused_before_it_is_trusted(pool):
    from flows.labels import labels_commit_flow

    p, req = pool, pool["req"]
    _import(p, _lab(p["tmp"] / "lab.csv", [(r["source_id"], HIDDEN[r["graph_id"]]) for r in req]))
    labels_commit_flow(p["store"], str(p["tmp"] / "labels" / "labels.csv"), p["ledger"])
    text = Path(p["ledger"]).read_text()
    lines = text.splitlines()
    cells = lines[2].split(",")
    cells[2] = "9.99"  # someone "fixes" a value by hand
    Path(p["ledger"]).write_text("\n".join(lines[:2] + [",".join(cells)] + lines[3:]) + "\n")
    with pytest.raises(InputError, match=r"ledger.csv:1: the label ledger was edited by hand or damaged"):
        _import(p, str(p["tmp"] / "lab.csv"), out="again")
    assert not (p["tmp"] / "again").exists()


def test_kill_9_during_a_commit_leaves_the_previous_ledger(pool):
    """The commit's process is killed while the new ledger is being put in place: the old one is intact."""
    from flows.labels import labels_commit_flow
    from tasks.ledger import read_ledger_history

    p, req = pool, pool["req"]
    _import(p, _lab(p["tmp"] / "lab1.csv", [(r["source_id"], HIDDEN[r["graph_id"]]) for r in req[:3]]))
    labels_commit_flow(p["store"], str(p["tmp"] / "labels" / "labels.csv"), p["ledger"])
    before = Path(p["ledger"]).read_bytes()
    _import(p, _lab(p["tmp"] / "lab2.csv", [(r["source_id"], HIDDEN[r["graph_id"]]) for r in req[3:]]))
    marker = p["tmp"] / "in-replace"
    code = (f"import os, time, pathlib\n_real = os.replace\n"
            f"def slow(a, b):\n    if str(b).endswith('ledger.csv'):\n"
            f"        pathlib.Path({str(marker)!r}).touch(); time.sleep(60)\n    return _real(a, b)\n"
            f"os.replace = slow\nfrom flows.labels import labels_commit_flow\n"
            f"labels_commit_flow({p['store']!r}, {str(p['tmp'] / 'labels' / 'labels.csv')!r}, {p['ledger']!r})\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), "the commit never reached the ledger's replace"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert Path(p["ledger"]).read_bytes() == before
    hist, meta = read_ledger_history(p["ledger"])
    assert meta["digest_checked"] and hist.num_rows == 3
    res = labels_commit_flow(p["store"], str(p["tmp"] / "labels" / "labels.csv"), p["ledger"])  # done again: lands
    assert res["added"] == len(req) - 3


def test_two_commits_queue_on_the_workspace_lock(pool):
    """Two `tmdsub labels commit` at once in one workspace: the second waits for the first; both land."""
    p, req = pool, pool["req"]
    _import(p, _lab(p["tmp"] / "a.csv", [(r["source_id"], HIDDEN[r["graph_id"]]) for r in req[:4]]), out="la")
    _import(p, _lab(p["tmp"] / "b.csv", [(r["source_id"], HIDDEN[r["graph_id"]]) for r in req[4:]]), out="lb")
    exe = Path(sys.executable).with_name("tmdsub")
    env = {**os.environ, "TMDSUB_WORKSPACE": str(p["tmp"]), "TMDSUB_LOCK_WAIT": "300"}
    procs = [subprocess.Popen([str(exe), "labels", "commit", "POOL", "--graphs", p["store"], "--labels",
                               str(p["tmp"] / d / "labels.csv"), "--ledger", p["ledger"]], cwd=p["tmp"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for d in ("la", "lb")]
    outs = [pr.communicate(timeout=300) for pr in procs]
    assert [pr.returncode for pr in procs] == [0, 0], outs
    from tasks.ledger import read_ledger_history

    hist, meta = read_ledger_history(p["ledger"])
    assert meta["digest_checked"] and sorted(hist.column("graph_id").to_pylist()) == sorted(r["graph_id"] for r in req)
    assert sorted(set(hist.column("round").to_pylist())) == [1, 2]


def test_labels_source_per_dataset_and_the_task_forced(pool, tmp_path):
    """labels.source maps each dataset to its file; base.task forces the task of an unlabelled pool."""
    import yaml

    p, req = pool, pool["req"]
    answer = _lab(p["tmp"] / "pool.lab.csv", [(r["source_id"], int(HIDDEN[r["graph_id"]] > -1)) for r in req])
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"base": {"task": "regression"},
                                      "labels": {"source": {"POOL": answer, "OTHER": "x.csv"}}}))
    res = _import(p, None, params=str(params))
    assert res["file"] == answer and res["task"] == "regression"  # forced: 0/1 values read as numbers
    res = _import(p, None, params=str(params), task="auto", out="auto")
    assert res["task"] == "binary"
    params.write_text(yaml.safe_dump({"labels": {"source": {"OTHER": "x.csv"}}}))
    with pytest.raises(InputError, match="labels.source maps OTHER to their answer files, not POOL"):
        _import(p, None, params=str(params))
    params.write_text(yaml.safe_dump({"labels": {"source": answer, "censored": "keep"}}))
    with pytest.raises(InputError, match="labels.censored must be one of drop, as-value, refuse"):
        _import(p, None, params=str(params))
    (tmp_path / "p2.yaml").write_text(yaml.safe_dump({"base": {"task": "auto"}, "labels": {"max_spread": 0.5}}))
    r = run_cli("labels", "import", "POOL", "--graphs", p["store"], "--requests", p["requests"], "--out-dir",
                str(tmp_path / "cli"), "--labelled", p["ledger"], "--params", str(tmp_path / "p2.yaml"), answer,
                cwd=tmp_path)
    assert r.returncode == 0 and "binary" in r.stdout and "fixed by this import" in r.stdout, r.stderr
