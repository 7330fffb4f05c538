"""The labels flow on the MOSES stand-in (the label hand-off itself: lib/datasets/test_labels.py)."""
from __future__ import annotations

import pyarrow as pa

from helpers import RAW


def test_moses_standin_labels_say_they_are_a_standin(tmp_path):
    """MOSES has no labels: the benchmark stand-in joins the flagged logP stand-in, and labels.json says so."""
    import json

    import pyarrow.parquet as pq

    from flows.labels import labels_import_flow
    from tmdlib.datasets import load_builtin, write_graph_parquet

    store = tmp_path / "MOSES.parquet"
    write_graph_parquet(load_builtin("MOSES", RAW, limit=30, standin="logp"), store)
    pq.write_table(pa.table({"graph_id": pa.array([3, 7, 11], pa.int64())}), tmp_path / "req.parquet")
    out = labels_import_flow(str(store), str(tmp_path / "req.parquet"), "benchmark-standin", str(tmp_path / "lab"))
    meta = json.loads((tmp_path / "lab" / "labels.json").read_text())
    assert meta["benchmark_mode"] and out["labelled"] == 3
    assert meta["dataset_labels"].startswith("STAND-IN LABEL, NOT A MEASUREMENT")
