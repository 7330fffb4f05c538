"""SMILES ingest in constant memory: atom codes equal to OGB's, the streamed Parquet store equal to the table read
whole (every task type, several row groups), and a failed conversion leaving the old store as it was and no
scratch file."""
from __future__ import annotations

import gzip
import itertools
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from helpers import RAW

from tmdlib.datasets import read_graph_parquet, read_smiles_csv, table_task, write_smiles_parquet
from tmdlib.datasets._smiles import mol_graph, smiles_to_graph
from tmdlib import InputError

# Corners of the OGB vocabularies: chirality tags, charges, radicals, explicit Hs, SP3D/SP3D2 and unusual
# hybridisation ("misc"), metals, aromatic heteroatoms, a lone atom, isotopes, disconnected fragments.
ODD = ["Cl[C@H](/C=C/C)Br", "C[S@@](=O)c1ccccc1", "[CH2]C", "[CH3]", "F[P-](F)(F)(F)(F)F", "F[S](F)(F)(F)(F)F",
       "[Pt+2]", "[Fe]", "[NH4+]", "[O-][N+](=O)c1ccccc1", "c1cc[nH]c1", "[2H]OC", "[Na+].[Cl-]", "C#N",
       "[Xe]", "[U]", "C=[N+]=[N-]", "C[C@@]12CC[C@H](C1)C2", "B1(c2ccccc2)OCCO1", "[Si](C)(C)(C)C", "[SiH4]",
       "C1=CC=C2C=CC=CC2=C1", "[C-]#[O+]", "OC[C@@H]1O[C@@H](O)[C@H](O)[C@@H](O)[C@@H]1O"]


def _moses_sample(n: int) -> list[str]:
    path = RAW / "MOSES" / "train.csv.gz"
    if not path.is_file():
        pytest.skip("data/raw/MOSES not present")
    with gzip.open(path, "rt") as fh:
        next(fh)
        return [line.split(",")[0] for line in itertools.islice(fh, n)]


def test_atom_codes_and_bonds_agree_with_ogb_smiles2graph():
    from ogb.utils import smiles2graph
    from rdkit import Chem

    for smi in ODD + _moses_sample(400):
        codes, bonds = mol_graph(Chem.MolFromSmiles(smi))
        ref = smiles2graph(smi)
        np.testing.assert_array_equal(codes, ref["node_feat"], err_msg=smi)
        np.testing.assert_array_equal(bonds, ref["edge_index"][:, ::2].T, err_msg=smi)
        graph = smiles_to_graph(smi)
        np.testing.assert_array_equal(graph["node_feat"], ref["node_feat"])
        np.testing.assert_array_equal(graph["edge_index"], ref["edge_index"])
        assert graph["num_nodes"] == ref["num_nodes"]
    assert smiles_to_graph("not a smiles") is None and smiles_to_graph("") is None


def _labelled_csv(tmp_path: Path) -> Path:
    smiles = ODD + ["CCO", "CCN", "c1ccccc1", "CC(=O)O", "CCCl", "C1CC1", "CCOC"] * 3
    rows = ["SMILES,a,b,cls,set,cliff"]
    for i, smi in enumerate(smiles):
        a = "" if i % 9 == 4 else f"{0.5 * i - 3:g}"
        rows.append(f'"{smi}",{a},{i % 5 * 1.5:g},{(7, 3, 11)[i % 3]},{("train", "Test", "validation")[i % 3]},'
                    f"{i % 2}")
    path = tmp_path / "pool.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


CASES = {
    "regression, split and kept": dict(label_column="a", split_column="set", keep_columns=["cliff"]),
    "multi-target": dict(label_column=["a", "b"]),
    "multi-class": dict(label_column="cls", task="multiclass"),
    "binary forced": dict(label_column="cliff", task="binary"),
    "unlabelled": dict(),
    "stand-in": dict(standin="logp"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_streamed_store_equals_the_table_read_whole(tmp_path, case):
    path = _labelled_csv(tmp_path)
    kwargs = dict(CASES[case], smiles_column="SMILES", chunk_size=7, name="pool")
    whole = read_smiles_csv(path, **kwargs)
    out = tmp_path / "store" / "pool.parquet"
    out.parent.mkdir()
    stats = write_smiles_parquet(path, out, **kwargs)
    streamed = read_graph_parquet(out)  # validated as every reader of the store does
    assert streamed.equals(whole) and streamed.schema.metadata == whole.schema.metadata
    assert pq.ParquetFile(out).num_row_groups == -(-whole.num_rows // 7)
    assert stats["graphs"] == whole.num_rows and stats["task"] == table_task(whole)
    assert stats["nodes"] == sum(whole.column("num_nodes").to_pylist())
    assert stats["edges"] == sum(len(e) for e in whole.column("edge_src").to_pylist()) // 2
    assert sorted(p.name for p in out.parent.iterdir()) == ["pool.parquet"]  # no scratch left


def test_streamed_store_with_two_worker_processes(tmp_path):
    path = _labelled_csv(tmp_path)
    out = tmp_path / "pool.parquet"
    write_smiles_parquet(path, out, smiles_column="SMILES", label_column="a", chunk_size=5, workers=2)
    whole = read_smiles_csv(path, smiles_column="SMILES", label_column="a")
    streamed = read_graph_parquet(out)
    assert streamed.equals(whole) and streamed.schema.metadata == whole.schema.metadata
    # the answers' key index: each molecule's canonical SMILES, from the molecule parsed once at ingest
    from tmdlib.datasets._smiles import CANONICAL_COLUMN, canonical_smiles

    assert streamed.column(CANONICAL_COLUMN).to_pylist() == [canonical_smiles(s) for s in
                                                              streamed.column("smiles").to_pylist()]


def test_task_source_is_recorded(tmp_path):
    path = _labelled_csv(tmp_path)
    out = tmp_path / "pool.parquet"
    write_smiles_parquet(path, out, smiles_column="SMILES", label_column="a", task_source="builtin")
    assert table_task(read_graph_parquet(out)).source == "builtin"


@pytest.mark.parametrize("problem, kwargs, message, line", [
    ("bad smiles", dict(label_column="a"), "invalid SMILES 'C1CC'", 20),
    ("bad task", dict(label_column="a", task="binary"), "binary", None),
])
def test_a_failed_conversion_leaves_the_old_store_and_no_scratch(tmp_path, problem, kwargs, message, line):
    path = _labelled_csv(tmp_path)
    if problem == "bad smiles":
        text = path.read_text().splitlines()
        text[line - 1] = "C1CC" + text[line - 1][text[line - 1].index(","):]
        path.write_text("\n".join(text) + "\n")
    folder = tmp_path / "store"
    folder.mkdir()
    out = folder / "pool.parquet"
    out.write_bytes(b"an older store")
    with pytest.raises(InputError) as err:
        write_smiles_parquet(path, out, smiles_column="SMILES", chunk_size=4, **kwargs)
    assert message in str(err.value) and str(path) in str(err.value)
    if line is not None:
        assert err.value.line == line
    assert [p.name for p in folder.iterdir()] == ["pool.parquet"] and out.read_bytes() == b"an older store"


def test_unparseable_smiles_are_skipped_and_listed_when_asked(tmp_path):
    """`skipped` / `skip_invalid`: a pool with a few SMILES rdkit cannot parse still gives a store of the others
    (ids 0..G-1 in file order), each skipped one listed with its line; without it the first one stops the read."""
    good = ODD[:6]
    path = tmp_path / "pool.csv"
    path.write_text("smiles\n" + "\n".join([good[0], "C1CC", *good[1:4], "C(", "[Xx]", *good[4:]]) + "\n")
    skipped = []
    table = read_smiles_csv(path, skipped=skipped, chunk_size=3)
    assert table.column("smiles").to_pylist() == good and table.column("graph_id").to_pylist() == list(range(6))
    assert [(line, smi) for line, smi, _ in skipped] == [(3, "C1CC"), (7, "C("), (8, "[Xx]")]
    stats = write_smiles_parquet(path, tmp_path / "pool.parquet", skip_invalid=True, chunk_size=3)
    assert stats["graphs"] == 6 and [i[0] for i in stats["invalid"]] == [3, 7, 8]
    assert pq.read_table(tmp_path / "pool.parquet").column("smiles").to_pylist() == good
    with pytest.raises(InputError, match="pool.csv:3: invalid SMILES 'C1CC'"):
        read_smiles_csv(path)
