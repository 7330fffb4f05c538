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


def test_arrays_are_written_as_their_lists_a_chunk_at_a_time(tmp_path):
    """numpy arrays go through the encoder a chunk of Python numbers at a time (no list of n objects): the same
    bytes as the document with every array given as its ``tolist()``, whatever the dtype, shape or length."""
    rng = np.random.default_rng(1)
    floats = rng.random(io._ArrayItems.CHUNK + 7) * 1e4
    floats[[0, 5, -1]] = [float("nan"), float("-inf"), -0.0]
    arrays = {"ids": rng.integers(-10**12, 10**12, 2 * io._ArrayItems.CHUNK + 3), "dist": floats,
              "f32": rng.random(10).astype(np.float32), "mask": rng.random(9) < 0.5, "empty": np.empty(0),
              "matrix": rng.integers(0, 5, (3, 4)), "scalar": np.array(2.5),
              "nested": {"in_list": [np.arange(4), {"x": np.arange(2.0)}]}}

    def as_lists(o):
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, dict):
            return {k: as_lists(v) for k, v in o.items()}
        if isinstance(o, list):
            return [as_lists(v) for v in o]
        return o

    out = io.write_json(tmp_path / "a.json", arrays)
    assert out.read_bytes() == (json.dumps(as_lists(arrays), indent=2, sort_keys=True) + "\n").encode()
    assert json.loads(out.read_text())["ids"] == arrays["ids"].tolist()
    items = io._ArrayItems(np.arange(5))
    assert len(items) == 5 and list(items) == [0, 1, 2, 3, 4] and list.__len__(items) == 0  # nothing held
