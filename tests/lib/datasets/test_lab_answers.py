"""What comes back from a real lab (tmdlib.datasets.labels / smiles / task, tmdlib.chem.answers): keys, qualifiers,
notes, replicates, censored values, the task fixed by the first labels, prediction inputs row by row.  Molecules and
values: the first rows of MoleculeACE's CHEMBL2835_Ki (measured -log Ki)."""
from __future__ import annotations

import csv
import math

import numpy as np
import pyarrow as pa
import pytest

from helpers import RAW
from tmdlib import InputError

ROWS = list(csv.DictReader(open(RAW / "MoleculeACE" / "CHEMBL2835_Ki.csv", newline="")))[:20]
SMILES = [r["smiles"] for r in ROWS]
Y = [float(r["y"]) for r in ROWS]
IDS = np.arange(len(ROWS))


def _answers(rows, header=("smiles", "label")):
    cols = list(zip(*rows)) if rows else [[] for _ in header]
    return pa.table({h: pa.array([str(c) for c in col], pa.string()) for h, col in zip(header, cols)})


def _read(table, **kw):
    from tmdlib.datasets.labels import read_answers
    from tmdlib.datasets._smiles import canonical_smiles

    return read_answers(table, IDS, ("y",), pool_smiles=(IDS.tolist(), SMILES), canonical=canonical_smiles,
                        path="lab.csv", **kw)


def test_parse_value_qualifiers_and_notes():
    from tmdlib.datasets.labels import parse_value

    assert parse_value("5.2") == (5.2, "", "") and parse_value(">-5.24") == (-5.24, ">", "")
    assert parse_value("<= 3") == (3.0, "<=", "") and parse_value("≥1e-3") == (0.001, ">=", "")
    assert parse_value("~4") == (4.0, "~", "") and parse_value("=2") == (2.0, "", "")
    for note in ("n.d.", "inactive", "NA", ""):
        v, q, n = parse_value(note)
        assert math.isnan(v) and q == "" and n == (note or "empty")
    for bad in ("abc", ">", "inf", "1.2.3", "5 mM"):
        with pytest.raises(ValueError, match="is not a number"):
            parse_value(bad)


def test_smiles_keys_match_on_the_canonical_form():
    """The lab rewrote the molecules (RDKit's random SMILES): every answer lands on its own molecule."""
    from rdkit import Chem

    rewritten = [Chem.MolToSmiles(Chem.MolFromSmiles(s), doRandom=True, canonical=False) for s in SMILES[:8]]
    assert rewritten != SMILES[:8]
    m, info = _read(_answers([(s, y) for s, y in zip(rewritten, Y[:8])]))
    assert info["key"] == "smiles" and m.column("graph_id").to_pylist() == list(range(8))
    assert m.column("value").to_pylist() == Y[:8]


def test_a_key_that_matches_nothing_or_two_molecules_is_named_with_its_line():
    from tmdlib.datasets.labels import read_answers
    from tmdlib.datasets._smiles import canonical_smiles

    with pytest.raises(InputError) as err:
        _read(_answers([(SMILES[0], 1.0), ("CCCCCCCCCCCCCCCCCCCCCCCCCl", 2.0), ("not-a-smiles", 3.0)]))
    msg = str(err.value)
    assert "line 3: SMILES 'CCCCCCCCCCCCCCCCCCCCCCCCCl' matches no molecule of the pool" in msg
    assert "line 4: SMILES 'not-a-smiles' (RDKit cannot parse it) matches no molecule" in msg
    twice = SMILES[:3] + [SMILES[1]]  # a pool holding one molecule twice: the answer is both copies'
    m, info = read_answers(_answers([(SMILES[1], 1.0), (SMILES[0], 2.0)]), np.arange(4), ("y",),
                           pool_smiles=(list(range(4)), twice), canonical=canonical_smiles, path="lab.csv")
    assert m.column("graph_id").to_pylist() == [1, 3, 0] and m.column("line").to_pylist() == [2, 2, 3]
    assert info["copies"]["answers"] == 1 and info["copies"]["graphs"] == 2 and "every copy" in info["copies"]["rule"]
    with pytest.raises(InputError, match=r"lab.csv:2: source_id 'X1' matches 2 molecules of the requests"):
        _read(_answers([("X1", 2.0)], ("source_id", "label")), request_sources={"X1": [1, 3]})
    with pytest.raises(InputError, match=r"lab.csv:3: graph_id 99 is no graph of the pool"):
        _read(_answers([(1, 2.0), (99, 1.0)], ("graph_id", "label")))
    with pytest.raises(InputError, match=r"lab.csv:2: source_id 'X9' matches no molecule of the requests"):
        _read(_answers([("X9", 2.0)], ("source_id", "label")), request_sources={"X1": [1]})
    with pytest.raises(InputError, match="no key column"):
        _read(_answers([("a", 1.0)], ("name", "label")))


def test_values_with_qualifiers_and_notes_are_kept_as_columns():
    m, info = _read(_answers([(SMILES[0], ">-5.24"), (SMILES[1], "n.d."), (SMILES[2], "~1.5"), ("", "")]))
    assert m.column("qualifier").to_pylist() == [">", "", "~"] and m.column("note").to_pylist() == ["", "n.d.", ""]
    assert info["blank"] == 1  # an empty row is skipped
    with pytest.raises(InputError, match=r"lab.csv:2: value '5 mM' is not a number"):
        _read(_answers([(SMILES[0], "5 mM")]))


def test_censored_rules():
    from tmdlib.datasets.labels import apply_censored

    m, _ = _read(_answers([(SMILES[0], ">-5.24"), (SMILES[1], "1.0"), (SMILES[2], "<=2"), (SMILES[3], "~3")]))
    kept, info = apply_censored(m, "drop")
    assert kept.column("graph_id").to_pylist() == [1, 3] and info["dropped"] == 2 and info["graph_ids"] == [0, 2]
    kept, info = apply_censored(m, "as-value")
    assert kept.num_rows == 4 and info["censored"] == 2 and info["dropped"] == 0
    with pytest.raises(InputError) as err:
        apply_censored(m, "refuse", path="lab.csv")
    assert "censored value >-5.24" in str(err.value) and "censored value <=2" in str(err.value)


def test_replicates_mean_median_refuse_and_the_spread_flag():
    from tmdlib.datasets.labels import aggregate_measurements
    from tmdlib.datasets import TaskSpec

    reg = TaskSpec("regression")
    m, _ = _read(_answers([(SMILES[0], "1.0"), (SMILES[0], "1.2"), (SMILES[0], "4.0"), (SMILES[1], "2.0")]))
    ids, Y, info = aggregate_measurements(m, reg, "mean", 1.0)
    assert ids.tolist() == [0, 1] and Y[:, 0].tolist() == pytest.approx([2.0666666666666664, 2.0])
    assert info["replicated"] == 1 and info["flagged"][0]["spread"] == pytest.approx(3.0)
    _, Y, _ = aggregate_measurements(m, reg, "median", 1.0)
    assert Y[0, 0] == pytest.approx(1.2)
    _, _, info = aggregate_measurements(m, reg, "mean", 5.0)
    assert info["flagged"] == []
    with pytest.raises(InputError, match=r"graph 0 measured 3 times \(line 2, line 3, line 4; labels.replicates: refuse"):
        aggregate_measurements(m, reg, "refuse", path="lab.csv")
    # classification: the majority value; a tie is refused
    b, _ = _read(_answers([(SMILES[0], "1"), (SMILES[0], "1"), (SMILES[0], "0"), (SMILES[1], "0"), (SMILES[1], "1")]))
    with pytest.raises(InputError, match=r"graph 1: replicates disagree with no majority"):
        aggregate_measurements(b, TaskSpec("binary"), "mean")
    ids, Y, info = aggregate_measurements(b.slice(0, 3), TaskSpec("binary"), "mean")
    assert Y[0, 0] == 1.0 and info["flagged"][0]["values"] == [1.0, 1.0, 0.0]


def test_the_first_labels_fix_the_task_of_an_unlabelled_pool():
    from tmdlib.datasets import TaskSpec, infer_task
    from tmdlib.datasets._task import decide_task

    pool = infer_task([math.nan] * 5)
    assert not pool.decided and "unlabelled pool" in pool.describe()
    assert decide_task(Y[:6], current=pool).type == "regression"
    assert decide_task([0, 1, 1, 0], current=pool).type == "binary"
    mc = decide_task([1, 2, 3, 2], current=pool)
    assert mc.type == "multiclass" and mc.classes == (1.0, 2.0, 3.0) and mc.source == "import"
    assert decide_task([0, 1], override="regression", current=pool) == TaskSpec("regression")
    with pytest.raises(InputError, match="no label value"):
        decide_task([math.nan], current=pool)
    # decided: later labels are checked against it, another type is refused
    with pytest.raises(InputError, match="is not a binary label"):
        decide_task([0.5], current=TaskSpec("binary"), path="lab.csv")
    with pytest.raises(InputError, match="contradicts the dataset's task"):
        decide_task([1.0], override="regression", current=TaskSpec("binary"))


def test_sdf_answers_carry_the_value_as_a_property(tmp_path):
    from tmdlib.chem.answers import read_sdf_answers
    from tmdlib.chem import requests_sdf

    text = requests_sdf(SMILES[:3], [0, 1, 2], [3, 2, 1], [1, 2, 3])
    records = text.split("$$$$\n")[:3]
    answered = "".join(r + f"> <label>\n{v}\n\n$$$$\n" for r, v in zip(records, ["7.1", ">6", "n.d."]))
    (tmp_path / "a.sdf").write_text(answered)
    table, lines = read_sdf_answers(tmp_path / "a.sdf")
    m, info = _read(table, line_numbers=lines)
    assert info["key"] == "graph_id" and m.column("graph_id").to_pylist() == [0, 1, 2]
    assert m.column("qualifier").to_pylist() == ["", ">", ""] and m.column("note").to_pylist()[2] == "n.d."
    # a lab's own SD file, without the request's ids: keyed by the structure
    bare = "".join(r.split("> <graph_id>")[0] + f"> <label>\n{v}\n\n$$$$\n" for r, v in zip(records, Y[:3]))
    (tmp_path / "b.sdf").write_text(bare)
    table, lines = read_sdf_answers(tmp_path / "b.sdf")
    m, info = _read(table, line_numbers=lines)
    assert info["key"] == "smiles" and m.column("graph_id").to_pylist() == [0, 1, 2]
    assert m.column("line").to_pylist() == lines.tolist() and lines[0] == 1


def test_prediction_smiles_one_reason_per_bad_row(tmp_path):
    from tmdlib.datasets.smiles_input import read_prediction_smiles

    big = "C" * 5000
    p = tmp_path / "new.csv"
    p.write_bytes(b"name,SMILES\n" + b"a," + SMILES[0].encode() + b"\n\nb,not-a-smiles\nc,C\xff\xfeC\nd,\n"
                  + b"e," + big.encode() + b"\nf,CCO\n")
    rows = read_prediction_smiles(p)  # the column found ignoring case
    assert rows.line.tolist() == [2, 3, 4, 5, 6, 7, 8]
    assert rows.smiles == [SMILES[0], None, None, None, None, None, "CCO"]
    assert rows.ok.tolist() == [True, False, False, False, False, False, True]
    assert rows.reason[1] == "empty row" and "RDKit cannot parse SMILES 'not-a-smiles'" in rows.reason[2]
    assert "not UTF-8" in rows.reason[3] and "empty SMILES" in rows.reason[4]
    assert rows.reason[5] == "5,000 heavy atoms, more than the 1,000 a prediction takes"
    with pytest.raises(InputError, match=r"new.csv:1: no column 'smi'"):
        read_prediction_smiles(p, column="smi")
    with pytest.raises(InputError, match="file not found"):
        read_prediction_smiles(tmp_path / "nope.csv")


def test_key_index_finds_only_the_wanted_keys_with_every_copy():
    from tmdlib.datasets.labels import key_index

    pool = pa.array(["CCO", None, "c1ccccc1", "CCO", "CN"], pa.string())
    index = key_index(pool, np.array([10, 11, 12, 13, 14]), ["CCO", "CN", "CCC", None])
    assert index == {"CCO": [10, 13], "CN": [14]}  # CCC: not in the pool, absent; a null key matches nothing
    assert key_index(pool, np.arange(5), []) == {} and key_index(["A"], [7], {"A"}) == {"A": [7]}


def test_an_index_of_the_pool_reads_the_same_answers_as_canonicalising_it():
    from tmdlib.datasets.labels import key_index, read_answers
    from tmdlib.datasets._smiles import canonical_smiles

    lab = _answers([(SMILES[i], Y[i]) for i in (3, 0, 7)])
    keys = pa.array([canonical_smiles(s) for s in SMILES], pa.string())
    wanted = {canonical_smiles(s) for s in lab.column("smiles").to_pylist()}
    index = key_index(keys, IDS, wanted)
    assert sorted(index) == sorted(wanted) and len(index) == 3  # only the lab's three molecules are grouped
    fast, _ = read_answers(lab, IDS, ("y",), smiles_index=index, canonical=canonical_smiles, path="lab.csv")
    assert fast.equals(_read(lab)[0]) and fast.column("graph_id").to_pylist() == [3, 0, 7]
