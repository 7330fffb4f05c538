"""Label intake's rules and the ledger's tables as pure functions (tmdlib.datasets.intake, tmdlib.datasets.ledger):
no file is read or written here."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tmdlib.datasets import intake
from tmdlib.datasets import ledger as lg
from tmdlib.datasets.labels import MEASUREMENT_SCHEMA
from tmdlib.datasets import TaskSpec
from tmdlib import InputError

REGRESSION = TaskSpec("regression", ("y",))


def _measurements(gids, values, qualifiers=None) -> pa.Table:
    n = len(gids)
    return pa.table({"graph_id": list(gids), "target": ["y"] * n, "value": list(values),
                     "qualifier": list(qualifiers or [""] * n), "note": [""] * n, "line": list(range(2, n + 2))},
                    schema=MEASUREMENT_SCHEMA)


def test_label_rules_resolve_the_dataset_and_refuse_unknown_rules():
    params = {"base": {"task": "regression"}, "labels": {"source": {"A": "a.csv"}, "replicates": "median"}}
    rules = intake.label_rules(params, "A", "params.yaml")
    assert (rules["source"], rules["replicates"], rules["task"], rules["name"]) == ("a.csv", "median", "regression",
                                                                                      "auto")
    with pytest.raises(InputError, match="labels.source maps A to their answer files, not B"):
        intake.label_rules(params, "B", "params.yaml")
    with pytest.raises(InputError, match="labels.censored must be one of"):
        intake.label_rules({"labels": {"censored": "keep"}}, "A", "params.yaml")
    assert intake.label_rules({}, "A", None)["source"] is None  # no params file: the defaults


def test_label_requests_leave_out_the_labelled_and_rank_the_rest():
    sel = {"medoids": [30, 10, 20], "tau": [1.0, 3.0, 2.0]}
    req = intake.label_requests(np.array([10, 20, 30]), sel, ["C", "CC", "CCC"], labelled={10})
    assert req.column("graph_id").to_pylist() == [20, 30] and req.column("rank").to_pylist() == [1, 2]
    audit = intake.label_requests(np.array([10, 20, 30]), {**sel, "audit_ids": [30]}, None, labelled={10, 20})
    assert audit.column("purpose").to_pylist() == ["coreset", "audit"] and audit.column("tau").to_pylist() == [1, 0]


def test_an_import_joins_the_ledger_once_and_counts_what_is_missing():
    rules = intake.ImportRules(source="lab.csv", sha256="ab" * 32)
    first = intake.resolve_labels(_measurements([1, 2], [5.0, 6.0]), lg.empty_history(), {}, REGRESSION,
                                  np.array([1, 2, 3]), rules)
    ids, Y, spec, report, added = first
    assert ids.tolist() == [1, 2] and Y[:, 0].tolist() == [5.0, 6.0] and spec == REGRESSION
    assert (report["round"], report["new_measurements"], report["missing"], report["missing_ids"]) == (1, 2, 1, [3])
    again = intake.resolve_labels(_measurements([1], [5.0]), added, {}, REGRESSION, np.array([1]),
                                  intake.ImportRules(source="other.csv", sha256="cd" * 32))
    assert again[3]["already_in_ledger"] == 1 and again[3]["new_measurements"] == 0 and again[3]["round"] == 2


def test_the_ledger_text_round_trips_through_its_seal():
    hist = lg.with_origin(_measurements([0, 1], [5.5, 6.25], ["", ">"]), 1, "lab.csv", "ab" * 32)
    body = lg.ledger_text(hist)
    seal = lg.seal_record(body, None, "POOL.csv", REGRESSION)
    back, meta = lg.parse_ledger(body, "POOL.csv", [0, 1], seal, "POOL.seal.json")
    assert meta["digest_checked"] and not meta["interrupted"] and back.column("value").to_pylist() == [5.5, 6.25]
    with pytest.raises(InputError, match="edited by hand.*delete POOL.seal.json"):
        lg.parse_ledger(body.replace("6.25", "9.0"), "POOL.csv", None, seal, "POOL.seal.json")
    with pytest.raises(InputError, match="graph_id 1 is no graph of the pool"):
        lg.parse_ledger(body, "POOL.csv", [0], seal, "POOL.seal.json")
    labels = lg.ledger_labels(back, meta, REGRESSION)  # the censored '>' value is dropped by default
    assert labels.column("graph_id").to_pylist() == [0]


def test_a_commit_adds_only_what_the_ledger_lacks():
    hist = lg.with_origin(_measurements([0], [5.5]), 1, "lab.csv", "ab" * 32)
    new = lg.with_origin(_measurements([0, 1], [5.5, 7.0]), 0, "lab2.csv", "cd" * 32)
    add, rnd, rewrite = lg.commit_rows(hist, {"format": 3, "sha256": "x", "task": REGRESSION.to_dict()}, new,
                                       REGRESSION)
    assert add.column("graph_id").to_pylist() == [1] and rnd == 2 and rewrite
    with pytest.raises(InputError, match="the ledger's task is"):
        lg.commit_task(None, {"task": TaskSpec("binary", ("y",)).to_dict()}, {"task": REGRESSION.to_dict()}, "l.csv")
