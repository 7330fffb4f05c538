"""Label requests as an SD file and 2D depictions (tmdlib.chem._sdf, tmdlib.chem._depict): RDKit reads back every
record with its properties in order, the bytes never change between runs, bad SMILES keep their request.  The
write path (tasks.labels.write_requests) and the label_requests flow: pipeline/test_sdf_flows.py."""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from tmdlib.chem import depict_svg, mol_2d, requests_sdf
from tmdlib.chem import SDF_PROPERTIES
from tmdlib.chem._sdf import HEADER_LINE

# a stereocentre, an E double bond (backslash), a charge, an aromatic N-H, a salt, and a big ring
POOL = ["C[C@@H](O)c1ccccc1", "F/C=C\\F", "C[N+](C)(C)C", "c1cc[nH]c1", "CC(=O)[O-].[Na+]", "C1CCCCCCCCCCC1"]


def _records(text: str):
    """The records RDKit reads from an SD file's text (a forward reader: an empty file has none)."""
    import io

    from rdkit import Chem

    return list(Chem.ForwardSDMolSupplier(io.BytesIO(text.encode("utf-8")), removeHs=False))


def _sdf(smiles=POOL):
    k = len(smiles)
    gids = [100 + 7 * i for i in range(k)]
    tau = sorted(range(1, k + 1), reverse=True)
    return requests_sdf(smiles, gids, tau, list(range(1, k + 1))), gids, tau


def test_every_record_reads_back_in_order_with_its_properties():
    from rdkit import Chem

    text, gids, tau = _sdf()
    mols = _records(text)
    assert len(mols) == len(POOL) == text.count("$$$$\n")
    for r, (mol, smi, g, t) in enumerate(zip(mols, POOL, gids, tau), start=1):
        assert mol is not None
        props = mol.GetPropsAsDict()
        assert list(props) == list(SDF_PROPERTIES)
        assert props == {"graph_id": g, "source_id": smi, "tau": t, "rank": r, "smiles": smi}
        assert mol.GetProp("_Name") == str(g)
        # the same molecule (stereo included), with 2D coordinates
        assert Chem.MolToSmiles(mol) == Chem.MolToSmiles(Chem.MolFromSmiles(smi))
        conf = mol.GetConformer()
        assert not conf.Is3D()
        xyz = np.array(conf.GetPositions())
        assert np.all(xyz[:, 2] == 0) and np.ptp(xyz[:, :2], axis=0).max() > 0 or mol.GetNumAtoms() == 1


def test_text_is_deterministic_and_has_no_date_stamp():
    text, _, _ = _sdf()
    assert text == _sdf()[0]
    blocks = text.split("$$$$\n")[:-1]
    assert all(b.split("\n")[1] == HEADER_LINE for b in blocks)  # program line: no MMDDYYHHmm
    assert not re.search(r"\d{10}", "\n".join(b.split("\n")[1] for b in blocks))
    assert "\r" not in text and text.endswith("$$$$\n")
    # another process (another RDKit state) writes the same bytes
    code = ("import sys; from tmdlib.chem import requests_sdf; "
            f"sys.stdout.write(requests_sdf({POOL!r}, {[100 + 7 * i for i in range(6)]!r}, [6, 5, 4, 3, 2, 1], "
            "[1, 2, 3, 4, 5, 6]))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert other == text


def test_coordgen_preference_does_not_change_the_coordinates():
    from rdkit.Chem import rdDepictor

    before = _sdf()[0]
    old = rdDepictor.GetPreferCoordGen()
    rdDepictor.SetPreferCoordGen(not old)
    try:
        assert _sdf()[0] == before
    finally:
        rdDepictor.SetPreferCoordGen(old)


def test_no_requests_is_an_empty_file():
    assert requests_sdf([], [], [], []) == ""
    assert _records("") == []


def test_a_smiles_rdkit_rejects_keeps_its_request_with_a_warning():
    text = requests_sdf(["CCO", "C1CC", "", None], [1, 2, 3, 4], [3, 2, 1, 1], [1, 2, 3, 4])
    mols = _records(text)
    assert len(mols) == 4 and mols[0].GetNumAtoms() == 3
    for mol, g in zip(mols[1:], (2, 3, 4)):
        assert mol.GetNumAtoms() == 0 and mol.GetIntProp("graph_id") == g
        assert "cannot parse" in mol.GetProp("warning")
    assert mols[3].GetProp("smiles") == "n/a"  # an empty value would end the property early


def test_values_stay_on_one_line_and_bad_arguments_are_refused():
    text = requests_sdf(["CCO"], [5], [2], [1], source_ids=["two\nlines\r"])
    assert _records(text)[0].GetProp("source_id") == "two lines "
    with pytest.raises(ValueError, match="differ in length"):
        requests_sdf(["CCO", "CCN"], [1], [1, 1], [1, 2])
    with pytest.raises(ValueError, match="tau must hold integers"):
        requests_sdf(["CCO"], [1], [1.5], [1])


def test_large_molecules_are_written_as_v3000():
    big = "C" * 1200
    mol = _records(requests_sdf([big], [0], [1], [1]))[0]
    assert mol.GetNumAtoms() == 1200 and mol.GetIntProp("tau") == 1


def test_depictions_are_deterministic_svg():
    a = depict_svg(POOL[0])
    assert a == depict_svg(POOL[0]) and a.startswith("<svg") and a.rstrip().endswith("</svg>")
    assert "<script" not in a and a.isascii()
    assert depict_svg(POOL[1]) != a
    assert 'width=\'120px\'' in depict_svg(POOL[0], size=(120, 90))
    assert depict_svg("not a smiles") is None and depict_svg("") is None and depict_svg(None) is None
    assert mol_2d("CCO").GetNumConformers() == 1 and mol_2d("C1CC") is None


def test_compound_ids_title_the_records_and_travel_as_a_property():
    """The pool's own compound ids (issue 61): each record's title and a ``compound_id`` property after ``graph_id``;
    a record without an id keeps the graph id as its title; a long or multi-line id stays on one title line."""
    from tmdlib.chem.answers import sdf_answer_table
    from tmdlib.chem._sdf import TITLE_MAX

    ids = ["REG-1000", None, "X" * 100, "two\nlines"]
    text = requests_sdf(POOL[:4], [5, 6, 7, 8], [4, 3, 2, 1], [1, 2, 3, 4], compound_ids=ids)
    mols = _records(text)
    assert [m.GetProp("_Name") for m in mols] == ["REG-1000", "6", "X" * TITLE_MAX, "two lines"]
    assert [m.GetProp("compound_id") for m in mols] == ["REG-1000", "n/a", "X" * 100, "two lines"]
    assert list(mols[0].GetPropNames()) == ["graph_id", "compound_id", *SDF_PROPERTIES[1:]]
    table, _ = sdf_answer_table(text)  # the lab's answer file read back keeps the ids
    assert table.column("compound_id").to_pylist()[0] == "REG-1000"
    assert requests_sdf(POOL[:1], [5], [1], [1]) == requests_sdf(POOL[:1], [5], [1], [1], compound_ids=None)
    assert "compound_id" not in requests_sdf(POOL[:1], [5], [1], [1])
    with pytest.raises(ValueError, match="differ in length"):
        requests_sdf(POOL[:2], [5, 6], [1, 1], [1, 2], compound_ids=["a"])


def test_sdf_of_a_request_table():
    """The SD file of a label-request table is :func:`requests_sdf` of its columns (compound ids when it has them)."""
    import pyarrow as pa

    from tmdlib.chem._sdf import requests_table_sdf

    t = pa.table({"graph_id": [3, 4], "source_id": ["CCO", "CCN"], "tau": [2, 1], "rank": [1, 2]})
    assert requests_table_sdf(["CCO", "CCN"], t) == requests_sdf(["CCO", "CCN"], [3, 4], [2, 1], [1, 2],
                                                                  ["CCO", "CCN"])
