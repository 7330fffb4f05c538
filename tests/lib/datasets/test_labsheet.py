"""Lab sheets as they come (tmdlib.datasets.labsheet): headers in any case and by their synonyms, the value among
other columns, relations, units and the value transforms, a ChEMBL activity export, the magnitude warning, and the
task of integer concentrations.  Molecules and values: tests/data/labsheets/ (MoleculeACE's CHEMBL2835_Ki)."""
from __future__ import annotations

import csv
import math

import numpy as np
import pyarrow as pa
import pytest

from helpers import DATA
from tmdlib import InputError

SHEETS = DATA / "labsheets"


def _table(name: str, delimiter: str = ","):
    with open(SHEETS / name, newline="") as fh:
        rows = list(csv.reader(fh, delimiter=delimiter))
    return pa.table({h: pa.array([r[j] for r in rows[1:]], pa.string()) for j, h in enumerate(rows[0])})


def _norm(table, **kw):
    from tmdlib.datasets.labsheet import normalize_answers

    return normalize_answers(table, ("y",), path="lab.csv", **kw)


def _values(t):
    from tmdlib.datasets.labels import parse_value

    return [parse_value(c) for c in t.column("value").to_pylist()]


def test_headers_in_any_case_and_a_free_text_column():
    t, info = _norm(_table("extra_columns.csv"))
    assert t.column_names == ["smiles", "value"] and info["columns"] == {"key": "SMILES", "value": "pKi"}
    assert info["ignored"] == ["Comment"] and "as written in pKi" in info["rule"] and not info["warnings"]
    assert t.column("value").to_pylist()[0] == repr(9.15)
    # synonyms of the key, any case, and an id column (matched against the requests' source_id)
    for header, kind in (("canonical_smiles", "smiles"), ("Compound SMILES", "smiles"), ("Smiles", "smiles"),
                         ("Compound ID", "source_id"), ("NAME", "source_id"), ("Graph_ID", "graph_id")):
        t, info = _norm(pa.table({header: ["x"], "pIC50": ["5.1"], "Notes": ["n/a"]}))
        assert t.column_names[0] == kind, header
    with pytest.raises(InputError, match="no key column"):
        _norm(pa.table({"Batch": ["x"], "pIC50": ["5.1"]}))


def test_several_number_columns_ask_for_labels_columns():
    table = pa.table({"SMILES": ["C"], "pIC50": ["5.1"], "Plate": ["3"]})
    with pytest.raises(InputError, match=r"2 columns could be the value \(pIC50, Plate\).*labels.columns.value"):
        _norm(table)
    t, info = _norm(table, columns={"value": "pic50"})
    assert info["columns"]["value"] == "pIC50" and info["ignored"] == ["Plate"]
    with pytest.raises(InputError, match="labels.columns.value names 'pKd', which the answer file does not have"):
        _norm(table, columns={"value": "pKd"})


def test_nanomolar_with_and_without_a_transform():
    table = _table("ki_nM.tsv", "\t")
    raw, info = _norm(table)
    assert info["columns"] == {"key": "Compound SMILES", "value": "Ki", "relation": "Operator", "units": "Units"}
    (warning,) = info["warnings"]
    assert "orders of magnitude" in warning and "labels.transform: p" in warning
    assert _values(raw)[3] == (12.0, ">", "")  # the relation column qualifies the value
    p, info = _norm(table, transform="p")
    assert not info["warnings"] and "-log10 molar of Ki in Units" in info["rule"]
    v = _values(p)
    assert v[0][0] == pytest.approx(9 - math.log10(0.7)) and v[3] == (pytest.approx(9 - math.log10(12)), "<", "")
    lg, _ = _norm(table, transform="log10")
    assert _values(lg)[2][0] == pytest.approx(math.log10(610))
    # without a units column: labels.units, or a refusal
    bare = table.drop_columns(["Units"])
    assert _values(_norm(bare, transform="p", units="uM")[0])[0][0] == pytest.approx(6 - math.log10(0.7))
    with pytest.raises(InputError, match="labels.transform: p needs the values' units"):
        _norm(bare, transform="p")


def test_a_chembl_export_needs_nothing_set():
    t, info = _norm(_table("chembl_activities.csv", ";"))
    assert info["chembl"] and info["columns"]["key"] == "Smiles" and "pChEMBL Value where present (8 rows)" in \
        info["rule"] and "Standard Relation" in info["rule"]
    assert "Comment" in info["ignored"] and "Molecule ChEMBL ID" in info["ignored"]
    v = _values(t)
    assert v[0] == (9.15, "", "")
    assert v[8][0] == pytest.approx(9 - math.log10(45.5))  # 0.0455 uM
    assert v[9] == (pytest.approx(5.0), "<", "")  # > 10000 nM: p < 5 (a bound flips)
    assert math.isnan(v[10][0]) and math.isnan(v[11][0])  # % and no value: missing
    assert info["not_converted"] == {"%": 1} and any("%: 1" in w for w in info["warnings"])


def test_the_property_is_named_after_the_value_column_and_the_transform():
    """Issue 70 item 4: labels.name: auto names the property by the lab's value column, p<column> after p."""
    from tmdlib.datasets.labsheet import property_name

    table = _table("ki_nM.tsv", "\t")
    assert [_norm(table, transform=t)[1]["name"] for t in ("none", "p", "log10")] == ["Ki", "pKi", "log10 Ki"]
    assert _norm(_table("chembl_activities.csv", ";"))[1]["name"] == "pKi"  # its one Standard Type
    assert _norm(_table("extra_columns.csv", ","))[1]["name"] == "pKi"
    assert property_name("IC50 (nM)") == "IC50 (nM)" and property_name("IC50 nM", "p") == "pIC50"
    assert property_name("y", "p") == "pActivity" and property_name("Standard Value", "p") == "pChEMBL"


def test_integer_concentrations_are_never_classes():
    from tmdlib.datasets._task import decide_task, task_reason

    t, info = _norm(_table("dilution_ic50.csv", ";"))
    assert "orders of magnitude" in info["warnings"][0]
    y = np.array([v for v, _, _ in _values(t)])
    spec = decide_task(y, ("y",), "auto")
    assert spec.type == "regression" and "concentrations, not classes" in task_reason(y, spec)
    assert decide_task(np.array([1.0, 3, 10, 10]), ("y",)).type == "regression"  # a dilution series
    classes = decide_task(np.array([1.0, 2, 3, 2]), ("y",))
    assert classes.type == "multiclass" and "3 distinct integers" in task_reason([1.0, 2, 3, 2], classes)


def test_the_requests_sent_back_with_a_value_column():
    """The lab fills in the requests file: graph_id is the key; tau, rank, purpose and numeric compound ids are
    never the value."""
    t, info = _norm(pa.table({"graph_id": ["3"], "source_id": ["CCO"], "tau": ["4"], "rank": ["1"],
                              "purpose": ["coreset"], "compound_id": ["100234"], "pKd": ["6.5"]}))
    assert t.column_names == ["graph_id", "value"] and info["columns"]["value"] == "pKd"
    assert set(info["ignored"]) == {"source_id", "tau", "rank", "purpose", "compound_id"}
