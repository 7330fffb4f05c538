"""The label_requests flow writes label_requests.sdf beside the CSV (tmdlib.chem._sdf): one record per requested
molecule in the CSV's order, the same bytes on a rerun, and a file without records (said in the manifest) for a
dataset without SMILES.  The SD text itself: lib/chem/test_sdf.py."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow.csv as pacsv

from helpers import RAW


def _selection(path: Path, medoids, tau, n) -> str:
    path.write_text(json.dumps({"method": "tmd", "k": len(medoids), "seed": 0, "fraction": None, "epsilon": 1.0,
                                "medoids": medoids, "tau": tau, "n_train": n, "train_ids": list(range(n)),
                                "test_ids": []}))
    return str(path)


def _records(path: Path):
    from rdkit import Chem

    return list(Chem.ForwardSDMolSupplier(io.BytesIO(path.read_bytes()), removeHs=False))


def test_label_requests_sdf_of_a_molecule_dataset(tmp_path):
    from flows.labels import label_requests_flow
    from tmdlib.datasets import read_smiles_csv, write_graph_parquet

    lines = (RAW / "MoleculeACE" / "CHEMBL2835_Ki.csv").read_text().splitlines()[1:21]
    smiles = [line.split(",")[0] for line in lines]
    (tmp_path / "m.csv").write_text("smiles\n" + "\n".join(smiles) + "\n")
    store = tmp_path / "m.parquet"
    write_graph_parquet(read_smiles_csv(tmp_path / "m.csv"), store)
    sel = _selection(tmp_path / "selection.json", [3, 11, 5, 17], [4, 9, 4, 3], 20)
    ledger = tmp_path / "ledger.csv"
    ledger.write_text("graph_id,label\n17,1\n")  # already labelled: not requested again
    out = tmp_path / "labels"
    man = label_requests_flow(str(store), sel, str(out), str(ledger))
    assert man["sdf"] == "label_requests.sdf" and man["requested"] == 3
    assert json.loads((out / "manifest.json").read_text())["sdf"] == "label_requests.sdf"
    csv = pacsv.read_csv(out / "label_requests.csv").to_pylist()
    mols = _records(out / "label_requests.sdf")
    assert [r["graph_id"] for r in csv] == [m.GetIntProp("graph_id") for m in mols] == [11, 3, 5]
    for row, mol in zip(csv, mols):
        assert mol.GetIntProp("tau") == row["tau"] and mol.GetIntProp("rank") == row["rank"]
        assert mol.GetProp("smiles") == smiles[row["graph_id"]] == mol.GetProp("source_id") == row["source_id"]
        assert mol.GetNumAtoms() > 0 and not mol.GetConformer().Is3D()
    first = (out / "label_requests.sdf").read_bytes()
    label_requests_flow(str(store), sel, str(out), str(ledger))
    assert (out / "label_requests.sdf").read_bytes() == first  # DVC sees the same hash on a rerun
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporaries left


def test_a_dataset_without_smiles_gets_an_empty_sdf(tmp_path):
    from flows.labels import label_requests_flow
    from tmdlib.datasets import read_tu, write_graph_parquet

    store = tmp_path / "mutag.parquet"
    write_graph_parquet(read_tu(RAW / "MUTAG", "MUTAG").slice(0, 10), store)
    man = label_requests_flow(str(store), _selection(tmp_path / "s.json", [2, 6], [6, 4], 10), str(tmp_path / "o"))
    assert man["sdf"] == "no molecules in this dataset"
    assert (tmp_path / "o" / "label_requests.sdf").read_bytes() == b""
    assert _records(tmp_path / "o" / "label_requests.sdf") == []
