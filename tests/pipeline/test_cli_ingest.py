"""The `tmdsub ingest` command end to end (real Prefect flow in ephemeral mode)."""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from helpers import DATA, run_cli


def test_ingest_builtin_writes_store(tmp_path):
    out = tmp_path / "MUTAG.parquet"
    res = run_cli("ingest", "MUTAG", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "188 graphs" in res.stdout and "17.93 nodes" in res.stdout and "19.79 edges" in res.stdout
    table = pq.read_table(out)
    assert table.num_rows == 188
    assert {"graph_id", "num_nodes", "x_id", "edge_src", "edge_dst", "y"} <= set(table.column_names)
    assert not list(tmp_path.glob(".*.tmp"))

    # `tmdsub tmd --pairs` on the store just written reproduces the original TMD code's values.
    import json

    ref = json.loads((DATA / "mutag_tmd_reference.json").read_text())
    rows = [p for p in ref["pairs"] if p["L"] == 4 and p["weights"] == [1 / 3, 1, 3]][:20]
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("i,j\n" + "".join(f"{p['i']},{p['j']}\n" for p in rows))
    res = run_cli("tmd", "MUTAG", "--graphs", str(out), "--pairs", str(pairs), "--out", str(tmp_path / "tmd.csv"))
    assert res.returncode == 0, res.stderr
    got = (tmp_path / "tmd.csv").read_text().splitlines()
    assert got[0] == '"i","j","tmd"' and len(got) == len(rows) + 1
    for line, p in zip(got[1:], rows):
        i, j, v = line.split(",")
        assert (int(i), int(j)) == (p["i"], p["j"]) and float(v) == pytest.approx(p["tmd"], rel=1e-6)


def test_ingest_user_tu_folder_bad_input_is_one_clear_error(tmp_path):
    bad = tmp_path / "BAD"
    bad.mkdir()
    (bad / "BAD_A.txt").write_text("1, 2\n2, 1\n2, x\n")
    (bad / "BAD_graph_indicator.txt").write_text("1\n1\n")
    (bad / "BAD_graph_labels.txt").write_text("1\n")
    out = tmp_path / "out.parquet"
    res = run_cli("ingest", "--tu-dir", str(bad), "--name", "BAD", "--out", str(out))
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    err = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and "BAD_A.txt:3" in err[0], res.stderr
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))


def test_ingest_rejects_escaping_name_before_any_work(tmp_path):
    res = run_cli("ingest", "--tu-dir", str(tmp_path), "--name", "../escape")
    assert res.returncode == 2
    assert "error:" in res.stderr and "../escape" in res.stderr
    res = run_cli("ingest", "NOPE")
    assert res.returncode == 2 and "MUTAG" in res.stderr  # lists the known names



def _label_rule(path) -> str:
    return pq.read_schema(path).metadata[b"tmdlib.label_rule"].decode()


def test_moses_as_typed_is_an_unlabelled_pool_and_the_standin_is_asked_for(tmp_path):
    """`tmdsub ingest MOSES` stores the pool as a real one is, without labels (production mode); the flagged logP
    stand-in only with `--standin logp` (benchmark mode); a stand-in for a labelled source is refused."""
    import numpy as np

    plain, standin = tmp_path / "plain.parquet", tmp_path / "standin.parquet"
    res = run_cli("ingest", "MOSES", "--limit", "40", "--out", str(plain))
    assert res.returncode == 0, res.stderr
    assert _label_rule(plain).startswith("no labels (y null)")
    y = np.asarray(pq.read_table(plain, columns=["y"]).column("y").to_pylist(), dtype=float)
    assert y.size == 40 and np.isnan(y).all()
    res = run_cli("ingest", "MOSES", "--limit", "40", "--standin", "logp", "--out", str(standin))
    assert res.returncode == 0, res.stderr
    assert "task: binary" in res.stdout and _label_rule(standin).startswith("STAND-IN LABEL, NOT A MEASUREMENT")
    y = np.asarray(pq.read_table(standin, columns=["y"]).column("y").to_pylist(), dtype=float)
    assert set(np.unique(y)) == {0.0, 1.0}
    same = ["graph_id", "num_nodes", "x_id", "edge_src", "edge_dst"]
    assert pq.read_table(plain, columns=same).equals(pq.read_table(standin, columns=same))  # the same graphs
    res = run_cli("ingest", "MUTAG", "--standin", "logp", "--out", str(tmp_path / "m.parquet"))
    assert res.returncode != 0 and "stand-in" in res.stderr and not (tmp_path / "m.parquet").exists()


def test_a_pool_with_a_few_bad_smiles_still_ingests(tmp_path):
    """Issue 61: the unparseable SMILES are skipped and listed beside the store (line, SMILES, reason), the
    structures stored twice counted; --invalid refuse keeps the stop; a clean ingest removes the old report."""
    import csv

    from helpers import RAW

    rows = [r["smiles"] for r in csv.DictReader(open(RAW / "MoleculeACE" / "CHEMBL2835_Ki.csv", newline=""))][:10]
    pool = tmp_path / "POOL.csv"
    pool.write_text("smiles\n" + "\n".join(rows[:4] + ["C1CC", rows[4], "not a smiles", *rows[5:], rows[0]]) + "\n")
    out = tmp_path / "POOL.parquet"
    res = run_cli("ingest", "--smiles-csv", str(pool), "--name", "POOL", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "POOL: 11 graphs" in res.stdout and "2 SMILES RDKit cannot parse were skipped" in res.stdout
    assert "1 structures stored more than once (1 extra graphs" in res.stdout
    report = list(csv.DictReader(open(tmp_path / "POOL.invalid.csv")))
    assert [(r["line"], r["smiles"]) for r in report] == [("6", "C1CC"), ("8", "not a smiles")]
    assert all("rdkit cannot parse" in r["reason"] for r in report)
    res = run_cli("ingest", "--smiles-csv", str(pool), "--name", "POOL", "--out", str(tmp_path / "R.parquet"),
                  "--invalid", "refuse")
    assert res.returncode == 2 and "POOL.csv:6: invalid SMILES 'C1CC'" in res.stderr
    pool.write_text("smiles\n" + "\n".join(rows) + "\n")
    res = run_cli("ingest", "--smiles-csv", str(pool), "--name", "POOL", "--out", str(out))
    assert res.returncode == 0 and "skipped" not in res.stdout and not (tmp_path / "POOL.invalid.csv").exists()


def test_a_vendor_sd_file_named_in_base_datasets_is_ingested_with_its_ids(tmp_path):
    """Issue 70: ``POOL: vendor.sdf.gz`` (``--source``, as dvc.yaml passes base.datasets' entry) reads an SD file as
    it came: the ID property as the compound id, the other properties kept, a bad record skipped and listed with its
    record number; a TSV found by the dataset's name; a name with no file is one error listing the names looked for."""
    import csv
    import gzip

    from rdkit import Chem

    blocks = []
    for i, s in enumerate(["CCO", "c1ccccc1O", "CCN(CC)CC", "OC(=O)c1ccccc1"]):
        block = Chem.MolToMolBlock(Chem.MolFromSmiles(s)).split("\n", 1)[1]
        if i == 2:
            block = block.replace(block.split("\n")[2], "garbage", 1)
        blocks.append(f"rec{i}\n{block}> <Catalog ID>\nV-{i}\n\n> <Supplier>\nacme\n\n$$$$\n")
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "vendor.sdf.gz").write_bytes(gzip.compress("".join(blocks).encode()))
    out = tmp_path / "POOL.parquet"
    res = run_cli("ingest", "POOL", "--source", "vendor.sdf.gz", "--raw-root", str(raw), "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "POOL: 3 graphs" in res.stdout and "1 SMILES RDKit cannot parse were skipped" in res.stdout
    table = pq.read_table(out)
    assert table.column("compound_id").to_pylist() == ["V-0", "V-1", "V-3"]
    assert table.column("Supplier").to_pylist() == ["acme"] * 3
    (report,) = list(csv.DictReader(open(tmp_path / "POOL.invalid.csv")))
    assert "SD record 3 ('rec2'): RDKit cannot read its mol block" in report["reason"]
    (raw / "TSV.tsv").write_text("Molregno\tCanonical SMILES\tSeries\n1\tCCO\tA\n2\tCCN\tB\n")
    res = run_cli("ingest", "TSV", "--raw-root", str(raw), "--out", str(tmp_path / "TSV.parquet"))
    assert res.returncode == 0 and "TSV: 2 graphs" in res.stdout, res.stderr
    assert pq.read_table(tmp_path / "TSV.parquet").column("compound_id").to_pylist() == ["1", "2"]
    res = run_cli("ingest", "NOPE", "--raw-root", str(raw), "--out", str(tmp_path / "N.parquet"))
    assert res.returncode == 2 and "NOPE.<csv|tsv|smi|cxsmiles|sdf|parquet>[.gz]" in res.stderr
