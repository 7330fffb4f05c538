"""Files committed as one set (tasks.io.file_set, the predictions' .parquet / .csv / .json): staged, one rename as the
commit point, rolled forward after a kill, and a reader that refuses a mixed set.  A real `tmdsub predict` killed at
each step: pipeline/test_predict_kill.py."""
from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from tasks import io
from tmdlib import InputError


def _write(folder, version: str) -> None:
    with io.file_set(folder, "p", last="p.json") as stage:
        (stage / "p.csv").write_text(f"csv {version}\n")
        (stage / "p.bin").write_text(f"bin {version}\n")
        (stage / "p.json").write_text(json.dumps({"v": version}))


def _contents(folder) -> dict:
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


def test_a_set_is_moved_in_whole_with_its_index_last(tmp_path):
    _write(tmp_path, "1")
    assert _contents(tmp_path) == {"p.bin": "bin 1\n", "p.csv": "csv 1\n", "p.json": '{"v": "1"}'}
    _write(tmp_path, "2")
    assert _contents(tmp_path) == {"p.bin": "bin 2\n", "p.csv": "csv 2\n", "p.json": '{"v": "2"}'}


def test_an_error_before_the_commit_leaves_the_previous_set(tmp_path):
    _write(tmp_path, "1")
    with pytest.raises(RuntimeError):
        with io.file_set(tmp_path, "p", last="p.json") as stage:
            (stage / "p.csv").write_text("csv 2\n")
            raise RuntimeError("disk full")
    with pytest.raises(ValueError, match="p.json was not written"):
        with io.file_set(tmp_path, "p", last="p.json") as stage:
            (stage / "p.csv").write_text("csv 2\n")
    assert _contents(tmp_path)["p.csv"] == "csv 1\n" and len(_contents(tmp_path)) == 3


def test_a_commit_cut_short_is_rolled_forward_and_a_dead_staging_folder_removed(tmp_path):
    _write(tmp_path, "1")
    commit = tmp_path / ".p.commit"  # what a run killed after its commit point and one move leaves
    commit.mkdir()
    (commit / ".order").write_text("p.bin\np.csv\np.json\n")
    (tmp_path / "p.bin").write_text("bin 2\n")
    (commit / "p.csv").write_text("csv 2\n")
    (commit / "p.json").write_text('{"v": "2"}')
    dead = tmp_path / f".p.{2 ** 22 + 12345}.abc.tmp"  # a killed run's staging folder (a pid no process has)
    dead.mkdir()
    (dead / "p.csv").write_text("csv 3\n")
    assert io.settle_file_set(tmp_path, "p") and not io.settle_file_set(tmp_path, "p")
    assert _contents(tmp_path) == {"p.bin": "bin 2\n", "p.csv": "csv 2\n", "p.json": '{"v": "2"}'}
    # a live process's staging folder (this one's) is left alone
    mine = tmp_path / f".p.{os.getpid()}.xyz.tmp"
    mine.mkdir()
    io.settle_file_set(tmp_path, "p")
    assert mine.is_dir()


def test_the_predictions_reader_refuses_a_mixed_set(tmp_path):
    from tasks.predict import read_prediction_set, write_predictions

    table = pa.table({"graph_id": [1, 2], "prediction": [0.5, 1.5]})
    write_predictions.fn(str(tmp_path), table, {"confidence": 0.9})
    meta = read_prediction_set(str(tmp_path))
    assert set(meta["files"]) == {"predictions.parquet", "predictions.csv"} and meta["confidence"] == 0.9
    assert sorted(p.name for p in tmp_path.iterdir()) == ["predictions.csv", "predictions.json", "predictions.parquet"]
    (tmp_path / "predictions.csv").write_text("graph_id,prediction\n1,0.5\n")  # an older file beside the new .json
    with pytest.raises(InputError, match="predictions.csv: not the file predictions.json was written with"):
        read_prediction_set(str(tmp_path))
