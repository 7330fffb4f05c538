"""Reading a lab's answer file as it comes (tasks.labels.read_answer_file, in process): the delimiter sniffed, an
.xlsx through openpyxl (first sheet or labels.sheet), the labels.* sheet rules from params.yaml, duplicate
structures of the pool.  Pool and values: the first molecules of MoleculeACE's CHEMBL2835_Ki (tests/data/labsheets/)."""
from __future__ import annotations

import csv
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import DATA, RAW
from tmdlib import InputError

SHEETS = DATA / "labsheets"
SMILES = [r["smiles"] for r in csv.DictReader(open(RAW / "MoleculeACE" / "CHEMBL2835_Ki.csv", newline=""))][:12]


@pytest.fixture()
def store(tmp_path):
    """What read_answer_file reads of a store: graph ids and SMILES (molecule 0 stored twice, as graph 12)."""
    path = tmp_path / "POOL.parquet"
    pq.write_table(pa.table({"graph_id": pa.array(range(13), pa.int64()), "smiles": SMILES + [SMILES[0]]}), path)
    return str(path)


def _read(source, store, sheet=None):
    from tasks.labels import read_answer_file

    return read_answer_file.fn(str(source), store, "unused.parquet", np.arange(13), ("y",), sheet)


def test_the_delimiter_is_sniffed(tmp_path, store):
    from tmdlib.datasets.molfiles import sniff_delimiter

    assert [sniff_delimiter(SHEETS / f) for f in ("extra_columns.csv", "ki_nM.tsv", "chembl_activities.csv")] == \
        [",", "\t", ";"]
    m, info = _read(SHEETS / "ki_nM.tsv", store, {"transform": "p"})
    assert info["sheet"]["form"] == "CSV (tabs)" and info["key"] == "smiles"
    # molecule 0 is stored twice: its answer is both copies'
    assert m.column("graph_id").to_pylist()[:2] == [0, 12] and info["copies"]["graphs"] == 2
    assert m.column("value").to_pylist()[0] == pytest.approx(9 - math.log10(0.7))
    m, info = _read(SHEETS / "chembl_activities.csv", store)
    assert info["sheet"]["chembl"] and info["sheet"]["form"] == "CSV (semicolons)" and m.num_rows == 13
    comma = tmp_path / "one_column_more.csv"  # a comma inside a quoted header cell is no delimiter
    comma.write_text('smiles,"pKi, mean"\n' + "\n".join(f"{s},5.{i}" for i, s in enumerate(SMILES[1:4])) + "\n")
    assert _read(comma, store)[0].column("value").to_pylist() == [5.0, 5.1, 5.2]


def test_an_xlsx_sheet_first_or_named(tmp_path, store):
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = "notes"
    ws.append(["Plate 7 -- sent 2026-11-20"])
    data = wb.create_sheet("results")
    data.append(["Compound SMILES", "pIC50", "Comment"])
    for i, s in enumerate(SMILES[1:6]):
        data.append([s, 5.5 + i / 10, "re-test" if i == 2 else None])
    data.append([None, None, None])  # a blank row
    data.append([SMILES[7], "n.d.", None])
    path = tmp_path / "round1.xlsx"
    wb.save(path)
    with pytest.raises(InputError, match="no key column"):  # the first sheet holds the lab's notes
        _read(path, store)
    m, info = _read(path, store, {"sheet": "results"})
    assert info["sheet"]["form"] == "spreadsheet (sheet 'results')" and info["sheet"]["ignored"] == ["Comment"]
    assert m.column("graph_id").to_pylist() == [1, 2, 3, 4, 5, 7] and info["blank"] == 1
    assert m.column("value").to_pylist()[:5] == pytest.approx([5.5, 5.6, 5.7, 5.8, 5.9])
    assert m.column("line").to_pylist()[-1] == 8 and m.column("note").to_pylist()[-1] == "n.d."
    wb.move_sheet("results", offset=-1)
    wb.save(path)
    assert _read(path, store)[0].num_rows == 6  # the first sheet by default
    with pytest.raises(InputError, match="cannot read the spreadsheet"):
        _read(path, store, {"sheet": "round 2"})


def test_sheet_rules_from_params(tmp_path):
    import yaml

    from tasks.labels import label_params

    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump({"labels": {"source": "lab.xlsx", "columns": {"key": "Compound", "value": "IC50"},
                                            "transform": "p", "units": "uM", "sheet": 1}}))
    sheet = label_params(str(p), "POOL")["sheet"]
    assert sheet == {"columns": {"key": "Compound", "value": "IC50"}, "transform": "p", "units": "uM", "sheet": 1}
    for bad, match in (({"transform": "ln"}, "labels.transform"), ({"units": "mg/L"}, "labels.units"),
                       ({"columns": {"smiles": "S"}}, "labels.columns")):
        p.write_text(yaml.safe_dump({"labels": bad}))
        with pytest.raises(InputError, match=match):
            label_params(str(p), "POOL")


def test_smiles_and_compound_id_keys_use_the_stores_key_index(tmp_path, monkeypatch):
    """A store written at ingest carries each molecule's canonical SMILES: a SMILES-keyed answer parses only the
    lab's molecules (never the pool's: here its ``smiles`` column is unparseable on purpose), and a compound-id
    key is found among the pool's ids without a loop over the pool; both read what canonicalising the pool reads."""
    import tmdlib.datasets._smiles as chem
    from tmdlib.datasets._smiles import CANONICAL_COLUMN, ID_COLUMN

    pool = pa.table({"graph_id": pa.array(range(13), pa.int64()),
                     "smiles": [SMILES[9] if i == 9 else "not a SMILES" for i in range(13)],
                     # graph 9 appended from a source without the index: its key is canonicalised when needed
                     CANONICAL_COLUMN: [None if i == 9 else chem.canonical_smiles(s)
                                        for i, s in enumerate(SMILES + [SMILES[0]])],
                     ID_COLUMN: [f"CPD-{i}" for i in range(13)]})
    indexed = tmp_path / "INDEXED.parquet"
    pq.write_table(pool, indexed)
    plain = tmp_path / "PLAIN.parquet"
    pq.write_table(pa.table({"graph_id": pool.column("graph_id"), "smiles": SMILES + [SMILES[0]]}), plain)
    lab = tmp_path / "lab.csv"
    lab.write_text("smiles,pKi\n" + "".join(f"{SMILES[i]},{5 + i / 10}\n" for i in (4, 0, 9)))
    parsed = []
    real = chem.canonical_smiles
    monkeypatch.setattr(chem, "canonical_smiles", lambda s: parsed.append(s) or real(s))
    m, info = _read(lab, str(indexed))
    assert len(parsed) == 4  # the lab's three molecules, each once, and graph 9 of the pool
    assert m.column("graph_id").to_pylist() == [4, 0, 12, 9] and info["copies"]["graphs"] == 2
    assert m.equals(_read(lab, str(plain))[0])
    from tasks.labels import read_answer_file

    requests = tmp_path / "requests.parquet"
    pq.write_table(pa.table({"graph_id": pa.array([2], pa.int64()), "source_id": ["2 "]}), requests)
    ids = tmp_path / "ids.csv"
    ids.write_text("Compound ID,pKi\nCPD-9 ,6.1\nCPD-2,5.5\n2,5.4\n")
    m, info = read_answer_file.fn(str(ids), str(indexed), str(requests), np.arange(13), ("y",))
    assert info["key"] == "source_id" and m.column("graph_id").to_pylist() == [9, 2, 2]
    ids.write_text("Compound ID,pKi\nCPD-99,6.1\n")
    with pytest.raises(InputError, match="CPD-99.*matches no molecule"):
        read_answer_file.fn(str(ids), str(indexed), str(requests), np.arange(13), ("y",))


def test_filled_keys():
    """A key index's gaps (molecules appended without a key) are filled with RDKit's canonical SMILES, or the SMILES
    as stored when RDKit cannot read them."""
    from tmdlib.datasets._smiles import filled_keys

    assert filled_keys(["CCO", None, None], ["OCC", "OCC", "not-a-smiles"]) == ["CCO", "CCO", "not-a-smiles"]
