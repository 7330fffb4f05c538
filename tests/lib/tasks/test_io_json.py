"""tasks.io.write_json: streamed to the file, the same bytes as json.dumps, nothing left on failure."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tasks import io


def test_streamed_json_has_the_bytes_of_dumps(tmp_path):
    rng = np.random.default_rng(0)
    doc = {"distance": (rng.random(5000) * 1e3).tolist(), "assignment": rng.integers(0, 10**9, 5000).tolist(),
           "nested": {"b": [1.5, float("inf"), None, "é"], "a": np.int64(3), "c": np.arange(3)},
           "epsilon": np.float64(2.5), "path": Path("x/y"), "empty": [], "z": {}}
    out = io.write_json(tmp_path / "sel.json", doc)
    expect = json.dumps(doc, indent=2, sort_keys=True, default=io._json_default) + "\n"
    assert out.read_bytes() == expect.encode("utf-8")
    assert json.loads(out.read_text())["nested"]["c"] == [0, 1, 2]


def test_a_failed_json_write_leaves_no_file(tmp_path):
    dest = tmp_path / "sel.json"
    io.write_json(dest, {"ok": 1})
    with pytest.raises(TypeError, match="not JSON serialisable"):
        io.write_json(dest, {"a": list(range(100_000)), "b": object()})  # fails after the first piece was written
    assert json.loads(dest.read_text()) == {"ok": 1}  # the old file, whole
    assert [p.name for p in tmp_path.iterdir()] == ["sel.json"]  # no temporary left
