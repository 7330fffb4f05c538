"""Pools as vendors ship them (issue 70): CSV / TSV / semicolon files with the delimiter sniffed, .smi and .cxsmiles
(SMILES then name, header or not), SD files (title or an ID property as the compound id, other properties kept as
text), Parquet tables of SMILES, each optionally gzipped; headers matched as the lab sheets' are; and each broken
the ways files break: a bad SD record, a .smi line without a name, mixed delimiters."""
from __future__ import annotations

import gzip

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tmdlib.datasets import read_smiles_csv, validate_graph_table
from tmdlib.datasets.molfiles import (POOL_SUFFIXES, molecule_file, sd_records, sniff_delimiter,
                                      source_kind, split_smiles_line)
from tmdlib import InputError

from tmdlib.datasets.sources import csv_columns, id_column_of

SMILES = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "CCN(CC)CC", "OC(=O)c1ccccc1"]


def _read(path, **kw):
    """The store table of a pool file, its label, split and compound-id columns found as the pipeline finds them."""
    labels, split, _ = csv_columns(str(path), None, None)
    table = read_smiles_csv(path, label_column=list(labels) or None, split_column=split,
                            id_column=id_column_of(str(path), None, ("smiles", *labels, split)), **kw)
    validate_graph_table(table, path)
    return table


def _ids(table):
    return table.column("compound_id").to_pylist() if "compound_id" in table.column_names else None


def _sdf(path, titles=True, id_prop="Compound ID", extra=True):
    from rdkit import Chem

    with Chem.SDWriter(str(path)) as w:
        for i, s in enumerate(SMILES):
            m = Chem.MolFromSmiles(s)
            m.SetProp("_Name", f"T{i}" if titles else "")
            if id_prop:
                m.SetProp(id_prop, f"CMP-{i}")
            if extra:
                m.SetProp("Supplier", "acme")
                if i == 2:
                    m.SetProp("Purity", "95 %")
            w.write(m)
    return path


def _canonical(smiles):
    from rdkit import Chem

    return [Chem.MolToSmiles(Chem.MolFromSmiles(s)) for s in smiles]


@pytest.mark.parametrize("name,text,ids", [
    ("pool.csv", "smiles,ID\n" + "".join(f"{s},C{i}\n" for i, s in enumerate(SMILES)), [f"C{i}" for i in range(5)]),
    ("pool.tsv", "Molregno\tCanonical SMILES\tSeries\n" + "".join(f"{100 + i}\t{s}\tA\n" for i, s in enumerate(SMILES)),
     [str(100 + i) for i in range(5)]),
    ("pool.csv", "Molregno\tCanonical SMILES\tSeries\n" + "".join(f"{100 + i}\t{s}\tA\n" for i, s in enumerate(SMILES)),
     [str(100 + i) for i in range(5)]),  # the file renamed .csv: tabs sniffed
    ("chembl.csv", '"ChEMBL ID";"Name";"Molecular Weight";"Smiles"\n'
     + "".join(f'"CHEMBL{i}";"a, b {i}";"46.07";"{s}"\n' for i, s in enumerate(SMILES)),
     [f"CHEMBL{i}" for i in range(5)]),  # ChEMBL's compound export: semicolons, quoted, Smiles
    ("pool.txt", "canonical_smiles;compound id\n" + "".join(f"{s};X-{i}\n" for i, s in enumerate(SMILES)),
     [f"X-{i}" for i in range(5)]),
])
def test_delimited_pools_are_sniffed_and_their_headers_matched_like_lab_sheets(tmp_path, name, text, ids):
    for path in (tmp_path / name, tmp_path / f"{name}.gz"):
        if path.suffix == ".gz":
            path.write_bytes(gzip.compress(text.encode()))
        else:
            path.write_text(text)
        table = _read(path)
        assert table.column("smiles").to_pylist() == SMILES
        assert _ids(table) == ids


def test_smi_files_with_and_without_header_and_cxsmiles(tmp_path):
    plain = tmp_path / "pool.smi"
    plain.write_text("".join(f"{s} vendor name {i}\n" for i, s in enumerate(SMILES)))
    t = _read(plain)
    assert t.column("smiles").to_pylist() == SMILES and _ids(t) == [f"vendor name {i}" for i in range(5)]
    headed = tmp_path / "headed.smi"
    headed.write_text("SMILES Name\n" + "".join(f"{s}\tZ{i}\n" for i, s in enumerate(SMILES)))
    assert molecule_file(headed).format == "smi"
    assert _ids(_read(headed)) == [f"Z{i}" for i in range(5)]
    enamine = tmp_path / "real.cxsmiles.gz"  # Enamine's: a tab-separated table with a header
    enamine.write_bytes(gzip.compress(("smiles\tidnumber\tType\n" + "".join(
        f"{s} |$;;$|\tZ{i}\tM\n" if i == 0 else f"{s}\tZ{i}\tM\n" for i, s in enumerate(SMILES))).encode()))
    mf = molecule_file(enamine)
    assert mf.format == "delimited" and mf.header == ["smiles", "idnumber", "Type"]
    t = _read(enamine)
    assert t.num_rows == 5 and _ids(t) == [f"Z{i}" for i in range(5)]
    cx = tmp_path / "pool.cxsmiles"
    cx.write_text("CC(O)=O |$;;;$| acetic acid\nCCO ethanol\n")
    t = _read(cx)
    assert _ids(t) == ["acetic acid", "ethanol"] and t.column("smiles").to_pylist()[0] == "CC(O)=O |$;;;$|"
    assert split_smiles_line("CCO") == ("CCO", "")


def test_a_smi_line_without_a_name_is_kept_without_a_compound_id(tmp_path):
    path = tmp_path / "pool.smi"
    path.write_text("CCO ethanol\n\nc1ccccc1O\n# a comment\nCCN amine\n")
    t = _read(path)
    assert t.column("smiles").to_pylist() == ["CCO", "c1ccccc1O", "CCN"]
    assert _ids(t) == ["ethanol", None, "amine"]


def test_sd_files_take_an_id_property_else_the_title_and_keep_the_other_properties(tmp_path):
    for path in (_sdf(tmp_path / "pool.sdf"), tmp_path / "pool.sdf.gz"):
        if path.suffix == ".gz":
            path.write_bytes(gzip.compress((tmp_path / "pool.sdf").read_bytes()))
        t = _read(path)
        assert t.column("smiles").to_pylist() == _canonical(SMILES)
        assert _ids(t) == [f"CMP-{i}" for i in range(5)]
        assert t.column("Supplier").to_pylist() == ["acme"] * 5
        assert t.column("Purity").to_pylist() == [None, None, "95 %", None, None]
        assert t.column("title").to_pylist() == [f"T{i}" for i in range(5)]
    titled = _read(_sdf(tmp_path / "titled.sdf", id_prop=None, extra=False))
    assert _ids(titled) == [f"T{i}" for i in range(5)]
    labelled = tmp_path / "labelled.sdf"  # an SD property named like a label column is the label, as in a CSV
    labelled.write_text((tmp_path / "titled.sdf").read_text().replace("$$$$", "> <label>\n1\n\n$$$$"))
    assert _read(labelled).column("y").to_pylist() == [1.0] * 5


def _bad_sdf(tmp_path):
    """Five records: record 2's counts line is garbage, record 4 holds a carbon with five bonds."""
    from rdkit import Chem

    good = [Chem.MolToMolBlock(Chem.MolFromSmiles(s)) for s in SMILES]
    bad_valence = Chem.MolFromSmiles("C(C)(C)(C)(C)C", sanitize=False)
    records = list(good)
    lines = records[1].split("\n")
    lines[3] = "garbage"
    records[1] = "\n".join(lines)
    records[3] = Chem.MolToMolBlock(bad_valence, kekulize=False)
    path = tmp_path / "bad.sdf"
    path.write_text("".join(f"R{i}" + r[r.index("\n"):] + f"> <ID>\nB{i}\n\n$$$$\n" for i, r in enumerate(records)))
    return path


def test_a_bad_sd_record_is_skipped_and_listed_or_refused_naming_file_record_and_problem(tmp_path):
    path = _bad_sdf(tmp_path)
    skipped = []
    t = _read(path, skipped=skipped)
    assert _ids(t) == ["B0", "B2", "B4"]
    assert [s[0] for s in skipped] == [r.line for r in sd_records(path.read_text().splitlines()) if r.number in (2, 4)]
    assert "SD record 2 ('R1'): RDKit cannot read its mol block" in skipped[0][2]
    assert "SD record 4 ('R3'): RDKit rejects its structure" in skipped[1][2] and "valence" in skipped[1][2]
    with pytest.raises(InputError) as err:
        _read(path)
    assert err.value.path == str(path) and err.value.line == skipped[0][0]
    assert "SD record 2 ('R1')" in err.value.problem


def test_mixed_delimiters_and_unknown_files_are_one_clear_error(tmp_path):
    mixed = tmp_path / "mixed.csv"
    mixed.write_text("smiles;id\nCCO;a\nc1ccccc1O,b\n")
    with pytest.raises(InputError) as err:
        _read(mixed)
    assert err.value.line == 3 and "semicolons" in err.value.problem and "mixed delimiters" in err.value.problem
    for name, problem in (("pool.xyz", "unknown molecule file type"), ("pool.parquet.gz", "gzipped Parquet")):
        (tmp_path / name).write_text("x")
        with pytest.raises(InputError, match=problem):
            molecule_file(tmp_path / name)
    empty = tmp_path / "empty.sdf"
    empty.write_text("\n")
    with pytest.raises(InputError, match="no SD records"):
        molecule_file(empty)
    nosmiles = tmp_path / "nosmiles.csv"
    nosmiles.write_text("Molregno,Structure\n1,CCO\n")
    with pytest.raises(InputError, match="no SMILES column .*available columns: Molregno, Structure"):
        _read(nosmiles)


def test_parquet_tables_of_smiles_are_pools_and_graph_stores_stay_stores(tmp_path):
    path = tmp_path / "pool.parquet"
    pq.write_table(pa.table({"Canonical_Smiles": SMILES, "ID": [f"P{i}" for i in range(5)],
                             "mw": [1.0, 2.0, None, 4.0, 5.0]}), path)
    assert source_kind(path) == "smiles"
    t = _read(path)
    assert t.column("smiles").to_pylist() == SMILES and _ids(t) == [f"P{i}" for i in range(5)]
    store = tmp_path / "store.parquet"
    pq.write_table(t, store)
    assert source_kind(store) == "parquet" and source_kind(tmp_path) == "tu"


def test_one_delimiter_rule_and_the_pool_names_looked_for(tmp_path):
    path = tmp_path / "sheet.csv.gz"
    path.write_bytes(gzip.compress(b'"a;b";x\tc\t d\n'))
    assert sniff_delimiter(path) == "\t"
    assert {".csv", ".tsv.gz", ".smi", ".cxsmiles.gz", ".sdf", ".sdf.gz", ".parquet"} <= set(POOL_SUFFIXES)
    assert ".parquet.gz" not in POOL_SUFFIXES
