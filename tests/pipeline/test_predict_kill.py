"""kill -9 during `tmdsub predict` leaves the previous predictions intact (issue 61): predictions.parquet / .csv /
.json are one set (tasks.io.file_set).  A real `tmdsub predict` is SIGKILLed at each step of its commit (slowed by
TMDSUB_COMMIT_PAUSE so the kill lands there); what is on disk, once the reader settles it, is all the previous set or
all the new one, never a mix.  The set's unit rules: lib/tasks/test_file_set.py."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import kill_when, make_inputs, run_cli

FILES = ("predictions.parquet", "predictions.csv", "predictions.json")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A MUTAG workspace in the CLI's default layout with a small trained GIN."""
    from flows.train import train_flow
    from flows.config.train import TrainStageConfig

    ws = tmp_path_factory.mktemp("predict-kill")
    inp = make_inputs(ws / "in", n_train=40, n_test=20)
    (ws / "data" / "selection" / "MUTAG").mkdir(parents=True)
    shutil.copy(inp["selection"], ws / "data" / "selection" / "MUTAG" / "selection.json")
    models = ws / "data" / "models" / "MUTAG"
    train_flow(inp["graphs"], inp["selection"], inp["labels"], str(models / "model.pt"), str(models / "train.json"),
               cfg=TrainStageConfig(epochs=3, log_mlflow=False))
    return ws, inp["graphs"]


def _args(graphs: str, out: Path, confidence: float) -> list[str]:
    return ["predict", "MUTAG", "--graphs", graphs, "--out-dir", str(out), "--confidence", str(confidence),
            "--no-mlflow", "--workers", "1"]


def _set(out: Path) -> dict:
    """The files as the reader finds them (a commit a kill left is finished first)."""
    from tasks.predict import read_prediction_set

    meta = read_prediction_set(str(out))
    return {"confidence": meta["confidence"], **{n: (out / n).read_bytes() for n in FILES[:2]}}


def _staged(out: Path) -> bool:  # every new file written, not committed yet
    return any((p / ".order").exists() for p in out.glob(".predictions.*.tmp"))


def _moved(k: int):  # committed, k of the three files moved into place
    def ready(out: Path) -> bool:
        commit = out / ".predictions.commit"
        left = [n for n in FILES if (commit / n).exists()]
        return (commit / ".order").exists() and len(left) == 3 - k
    return ready


MOMENTS = {"starting": lambda out: True, "staged": _staged, "committed": _moved(0), "one moved": _moved(1),
           "two moved": _moved(2)}


def test_a_killed_predict_leaves_the_previous_set_or_the_new_one(workspace, tmp_path):
    ws, graphs = workspace
    old, new = tmp_path / "old", tmp_path / "new"
    for out, confidence in ((old, 0.8), (new, 0.9)):  # the previous set and what an uninterrupted run writes
        res = run_cli(*_args(graphs, out, confidence), cwd=ws)
        assert res.returncode == 0, res.stderr
    before, after = _set(old), _set(new)
    assert before["predictions.parquet"] != after["predictions.parquet"]
    exe = Path(sys.executable).with_name("tmdsub")
    env = {**os.environ, "TMDSUB_COMMIT_PAUSE": "1", "TMDSUB_LOCK_WAIT": "600"}
    seen = {}
    for moment, ready in MOMENTS.items():
        out = tmp_path / moment.replace(" ", "-")
        shutil.copytree(old, out)
        proc = subprocess.Popen([str(exe), *_args(graphs, out, 0.9)], cwd=ws, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        assert kill_when(proc, lambda: ready(out)), f"{moment}: the run ended before the kill"
        got = _set(out)
        assert got in (before, after), moment
        seen[moment] = "new" if got == after else "previous"
        assert sorted(p.name for p in out.iterdir()) == sorted(FILES), moment  # nothing left behind
        assert json.loads((out / "predictions.json").read_text())["files"]["predictions.csv"]
    assert seen == {"starting": "previous", "staged": "previous", "committed": "new", "one moved": "new",
                    "two moved": "new"}
