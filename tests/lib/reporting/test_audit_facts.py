"""The audit report's facts as pure functions (tmdlib.reporting.audit, .hits, .predictions): dicts and tables in,
facts out; tasks.audit reads the files."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tmdlib.datasets import TaskSpec
from tmdlib import InputError
from tmdlib.reporting import audit
from tmdlib.reporting.hits import hunted, ranks_hits, table_hits
from tmdlib.reporting.predictions import audit_positions


def test_label_facts_read_counts_or_lists():
    facts = audit.label_facts({"requested": [1, 2, 3], "reused": 1, "train_graphs": 10},
                              {"source": "import", "replicates": {"flagged": [4]}, "conflicts": [{}]}, 99, 50)
    assert (facts["requested"], facts["reused"], facts["pool"], facts["not_needed"]) == (3, 1, 10, 6)
    assert (facts["flagged_replicates"], facts["conflicts"], facts["source"]) == (1, 1, "import")


def test_store_checks_name_the_artifact_made_for_another_store():
    named = [("selection", {"h": "abc" * 8}, "sel.json"), ("train info", {}, "train.json")]
    assert audit.store_checks(named, "abc" * 8, "g.parquet", "h") == [
        ("selection names this graph store (content sha256)", True, ("abc" * 8)[:16] + "...")]
    with pytest.raises(InputError, match="sel.json: the selection was made for another graph store"):
        audit.store_checks(named, "def", "g.parquet", "h")


def test_consistency_checks_and_node_facts():
    docs = {"manifest": {"dataset_sha256": "s", "selection_sha256": "t", "requested": 4}, "tmd_meta": {"graphs": 5},
            "train_info": {"alive_units": [3, 0]}}
    checks = audit.consistency_checks(docs, {"store_sha256": "s", "graphs": 5}, "t", 4)
    assert [ok for _, ok, _ in checks] == [True, True, True, True, False] and "retrain" in checks[-1][2]
    every, chosen = audit.node_facts([1, 2], [2, 3], [1, 2, 3], [4, 5, 6], [2])
    assert (every["kept"], every["total"], chosen["kept"], chosen["total"]) == (5, 9, 3, 5)
    with pytest.raises(InputError, match="nodes.parquet: graph ids not in the graph store: \\[7\\]"):
        audit.node_facts([7], [1], [1], [2], [], "nodes.parquet")


def test_hits_rank_the_hunted_target_of_a_table():
    spec = TaskSpec("regression", ("a", "b"))
    assert hunted(spec, "b") == ("b", 1, ("prediction_b", "lower_b", "upper_b"))
    assert ranks_hits("maximize", spec) and not ranks_hits("model", spec)
    assert not ranks_hits("maximize", TaskSpec("binary", ("y",)))
    table = pa.table({"graph_id": [1, 2, 3], "prediction_b": [0.5, 2.0, 1.0]})
    h = table_hits("maximize", spec, table, {1: np.array([0.0, 9.0])}, "b", n=2)
    assert h["measured"] == [[1, None, 9.0]] and [r[0] for r in h["predicted"]] == [2, 3] and h["target"] == "b"


def test_audit_positions_find_the_labelled_audit_rows():
    rows, y = audit_positions([30, 10, 20], [20, 10, 99], {10: 1.5, 20: np.array([2.5])})
    assert rows.tolist() == [2, 1] and y == [2.5, 1.5]
    with pytest.raises(InputError, match="labels.csv: labelled audit graphs not in the predictions: \\[40\\]"):
        audit_positions([30], [40], {40: 1.0}, "labels.csv")


def test_report_facts_assemble_what_was_read():
    """The report's facts from the documents, the selection, the store's facts and what else was read; the audit
    stage's own lock entries left out, the inputs' md5 keys without their prefix."""
    from tmdlib.reporting.audit_facts import report_facts

    docs = {"tmd_meta": {"matrix_sha256": "m", "depth": 3, "weights": "pascal"}, "manifest": {"requested": 2},
            "labels_meta": {"source": "import"}, "train_info": {},
            "metrics": {"certified": True, "bound": {"epsilon": 0.5}, "task": "binary"}, "metrics_nodes": {}}
    sel = {"medoids": [1, 2], "tau": np.array([3, 2]), "train_ids": [1, 2, 3, 4, 5], "test_ids": [6],
           "method": "tmd", "fraction": 0.4, "seed": 0}
    store = {"graph_store": "g.parquet", "store_sha256": "s", "content_sha256": "c", "graphs": 6, "nodes": 60}
    read = {"generated_utc": "now", "provenance": {"git_sha": "x"}, "nodes": ({"kept": 1}, {"kept": 2}),
            "requests": 2, "molecules": {"omitted": "none"}, "store_checks": [("store", True, "")],
            "selection_sha256": "h", "node_line": None, "params": {"a.b": 1},
            "inputs": {"dvc.md5.g.parquet": "1"}, "lock": {"audit@D": {}, "select@D": {"outs": {}}}}
    facts = report_facts("D", docs, sel, store, read)
    assert facts["data"]["matrix_sha256"] == "m" and facts["data"]["content_sha256"] == "c"
    assert facts["bound"] == {"certified": True, "epsilon": 0.5} and facts["mode"] == "benchmark"
    assert facts["task"] == "binary" and facts["pool_estimate"] is None
    assert facts["inputs"] == {"g.parquet": "1"} and facts["lock"] == {"select@D": {"outs": {}}}
    assert facts["checks"][0] == ("store", True, "") and facts["graphs"]["dataset"] == 6
