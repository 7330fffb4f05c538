"""What a run's provenance records, from values (tmdlib.reporting.provenance)."""
from __future__ import annotations

import numpy as np

from tmdlib.reporting.provenance import (flatten, labels_profile, params_hash, recorded_outs, selection_profile,
                                         shown_params, stage_md5s, store_profile)


def test_provenance_values():
    assert flatten({"a": {"b": 1, "c": "x", "d": float("nan")}, "e": True}) == {"a.b": 1.0, "e": 1.0}
    assert len(params_hash({"x": 1})) == 16 and params_hash({"x": 1}) == params_hash({"x": 1})
    stages = {"select@M": {"deps": [{"path": "g", "md5": "1"}], "outs": [{"path": "s", "md5": "2"}]},
              "select@C": {"outs": [{"path": "c", "md5": "3"}]}}
    assert stage_md5s(stages, "M") == {"select@M": {"deps": {"g": "1"}, "outs": {"s": "2"}}}
    assert recorded_outs(stages) == {"s": "2", "c": "3"}
    sha, prof = labels_profile({2: 1.0, 1: 0.0}, {"source": "lab"})
    assert prof == {"labels": 2, "source": "lab", "content_sha256": sha, "positive": 1}
    _, multi = labels_profile({1: np.array([1.0, np.nan])}, {})
    assert "positive" not in multi and multi["source"] == "unknown"
    sel = {"medoids": [1], "tau": [2.0], "train_ids": [1, 2], "test_ids": [3], "method": "tmd", "epsilon": 0.5}
    assert selection_profile(sel)[1]["epsilon_mean"] == 0.5 and selection_profile(sel)[1]["k"] == 1
    assert store_profile("h", 3, np.int64(9), 4) == {"graphs": 3, "nodes": 9, "features": 4, "content_sha256": "h"}
    assert shown_params({"a.uri": "https://u:p@host/x", "b": 1}) == {"a.uri": "https://***@host/x", "b": 1}


def test_run_values():
    from tmdlib.reporting.provenance import run_values

    plist, mlist = run_values({"b": 2, "a": "x" * 7000}, {"m": {"v": 1}}, {"loss": [1.0, float("nan"), 0.5]})
    assert plist == [("a", "x" * 6000), ("b", "2")]
    assert mlist == [("m.v", 1.0, 0), ("loss", 1.0, 0), ("loss", 0.5, 2)]


def test_lock_stages():
    import pytest

    from tmdlib import InputError
    from tmdlib.reporting.provenance import lock_stages

    assert lock_stages({}) == {} and lock_stages({"stages": {"a": {}}}) == {"a": {}}
    with pytest.raises(InputError, match="dvc.lock: not a dvc.lock"):
        lock_stages({"stages": "x"}, "dvc.lock")


def test_an_input_outside_the_lock_gets_the_md5_of_its_bytes(tmp_path):
    import hashlib

    from tasks.tracking import dvc_lock_hashes

    f = tmp_path / "x.bin"
    f.write_bytes(b"abc" * 1000)
    assert dvc_lock_hashes([str(f)], tmp_path / "dvc.lock") == {f"dvc.md5.{f}": hashlib.md5(f.read_bytes()).hexdigest()}
