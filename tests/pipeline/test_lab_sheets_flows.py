"""Lab sheets as they come, through the real flows (issue 61): a ChEMBL activity export imported with nothing set
but labels.source, a sheet with an upper-case key and a comment column, concentrations in nM with and without
labels.transform.  The pool: the first 48 molecules of MoleculeACE's CHEMBL2835_Ki, stored without labels."""
from __future__ import annotations

import csv
import json
import math

import pyarrow.parquet as pq
import pytest
import yaml

from helpers import DATA, RAW
from tasks.io import read_labels_meta

SHEETS = DATA / "labsheets"
ROWS = list(csv.DictReader(open(RAW / "MoleculeACE" / "CHEMBL2835_Ki.csv", newline="")))[:48]


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    from flows.ingest import ingest_flow
    from flows.config.ingest import IngestStageConfig
    from flows.labels import label_requests_flow
    from flows.select import select_flow
    from flows.config.select import SelectStageConfig

    tmp = tmp_path_factory.mktemp("sheets")
    with open(tmp / "pool.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["smiles"])
        w.writerows([r["smiles"]] for r in ROWS)
    store = str(tmp / "POOL.parquet")
    ingest_flow(smiles_csv=str(tmp / "pool.csv"), name="POOL", out=store, cfg=IngestStageConfig(workers=1))
    select_flow(store, str(tmp / "sel.json"), cfg=SelectStageConfig(method="random", fraction=0.3))
    label_requests_flow(store, str(tmp / "sel.json"), str(tmp / "labels"))
    return {"tmp": tmp, "store": store, "requests": str(tmp / "labels" / "label_requests.parquet")}


def _import(p, out: str, labels: dict):
    from flows.labels import import_summary, labels_import_flow

    params = p["tmp"] / f"{out}.yaml"
    params.write_text(yaml.safe_dump({"labels": labels}))
    res = labels_import_flow(p["store"], p["requests"], None, str(p["tmp"] / out), str(p["tmp"] / f"{out}.ledger"),
                             params=str(params))
    return res, read_labels_meta(str(p["tmp"] / out / "labels.csv")), "\n".join(
        import_summary("POOL", res, p["tmp"] / out))


def _labels(p, out: str) -> dict:
    t = pq.read_table(p["store"], columns=["graph_id", "smiles"]).to_pylist()
    of = {r["graph_id"]: r["smiles"] for r in t}
    with open(p["tmp"] / out / "labels.csv") as fh:
        return {of[int(r["graph_id"])]: float(r["y"]) for r in csv.DictReader(fh)}


def test_a_chembl_export_with_nothing_set_but_the_source(pool):
    res, meta, text = _import(pool, "chembl", {"source": str(SHEETS / "chembl_activities.csv")})
    assert meta["task"]["type"] == "regression" and "not all integers" in meta["task_reason"]
    sheet = meta["sheet"]
    assert sheet["chembl"] and sheet["form"] == "CSV (semicolons)" and sheet["columns"]["key"] == "Smiles"
    assert "read as a CSV (semicolons)" in text and "value rule: ChEMBL activity export" in text
    assert "ignored columns: Molecule ChEMBL ID" in text and "task: regression: " in text
    got = _labels(pool, "chembl")
    assert got[ROWS[0]["smiles"]] == pytest.approx(9.15)  # the pChEMBL value
    assert got[ROWS[8]["smiles"]] == pytest.approx(9 - math.log10(float(ROWS[8]["exp_mean [nM]"])))  # from uM
    assert ROWS[9]["smiles"] not in got and meta["censored"]["dropped"] == 1  # > 10000 nM: p < 5, a bound
    assert len(got) == 9 and res["labelled"] == 9  # 8 pChEMBL values, 1 in uM; the % and the empty row missing


def test_a_comment_column_and_nanomolar_values(pool):
    _, meta, text = _import(pool, "extra", {"source": str(SHEETS / "extra_columns.csv")})
    assert meta["sheet"]["columns"] == {"key": "SMILES", "value": "pKi"} and "ignored columns: Comment" in text
    assert len(_labels(pool, "extra")) == 12
    # nM without a transform: imported as written, with the warning; with labels.transform: p, as pKi
    _, meta, text = _import(pool, "nM", {"source": str(SHEETS / "ki_nM.tsv")})
    assert "warning: the values span" in text and _labels(pool, "nM")[ROWS[2]["smiles"]] == 610
    _, meta, text = _import(pool, "p", {"source": str(SHEETS / "ki_nM.tsv"), "transform": "p"})
    assert "warning" not in text and _labels(pool, "p")[ROWS[2]["smiles"]] == pytest.approx(9 - math.log10(610))
    # a dilution series of integer nM: regression, saying why
    _, meta, text = _import(pool, "dil", {"source": str(SHEETS / "dilution_ic50.csv")})
    assert meta["task"]["type"] == "regression" and "concentrations, not classes" in text
    assert json.loads((pool["tmp"] / "dil" / "labels.json").read_text())["task"]["type"] == "regression"


def test_the_property_is_named_by_the_sheet_or_labels_name(pool):
    """Issue 70 item 4: labels.json (and the ledger's seal, train.json's labels_meta) name the property."""
    from tasks.ledger import commit_labels, seal_path
    from tasks.io import VERSION_FIELD, tool_version

    for out, labels, name in (("nm_raw", {}, "Ki"), ("nm_p", {"transform": "p"}, "pKi"),
                              ("nm_own", {"transform": "p", "name": "pKi (CHEMBL2835)"}, "pKi (CHEMBL2835)")):
        _, meta, _ = _import(pool, out, {"source": str(SHEETS / "ki_nM.tsv"), **labels})
        doc = json.loads((pool["tmp"] / out / "labels.json").read_text())
        assert meta["name"] == doc["name"] == name and doc[VERSION_FIELD] == tool_version()
    _, meta, _ = _import(pool, "named_chembl", {"source": str(SHEETS / "chembl_activities.csv")})
    assert meta["name"] == "pKi"
    ids = pq.read_table(pool["store"], columns=["graph_id"]).column("graph_id").to_numpy()
    ledger = pool["tmp"] / "named.ledger.csv"
    commit_labels(str(ledger), str(pool["tmp"] / "nm_own" / "labels.csv"), ids)
    seal = json.loads(seal_path(ledger).read_text())
    assert seal["name"] == "pKi (CHEMBL2835)" and seal[VERSION_FIELD] == tool_version()
    with pytest.raises(Exception, match="labels.name is auto or the property's name"):
        _import(pool, "bad", {"source": str(SHEETS / "ki_nM.tsv"), "name": "a,b"})


def test_compound_ids_go_to_the_requests_and_key_the_answers(tmp_path):
    """A pool with the user's own ids (a `Compound ID` column, found by its name) stores them; the requests carry
    them; the lab answers by them, with a `Comment` column; the predictions' reader finds them."""
    from flows.ingest import ingest_flow
    from flows.config.ingest import IngestStageConfig
    from flows.labels import label_requests_flow
    from flows.select import select_flow
    from flows.config.select import SelectStageConfig
    from tasks.predict import compound_ids

    with open(tmp_path / "pool.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["Compound ID", "smiles"])
        w.writerows([f"REG-{1000 + i}", r["smiles"]] for i, r in enumerate(ROWS[:30]))
    store = str(tmp_path / "POOL.parquet")
    ingest_flow(smiles_csv=str(tmp_path / "pool.csv"), name="POOL", out=store, cfg=IngestStageConfig(workers=1))
    assert compound_ids(store)[:2] == ["REG-1000", "REG-1001"]
    select_flow(store, str(tmp_path / "sel.json"), cfg=SelectStageConfig(method="random", fraction=0.3))
    label_requests_flow(store, str(tmp_path / "sel.json"), str(tmp_path / "labels"))
    req = pq.read_table(tmp_path / "labels" / "label_requests.parquet").to_pylist()
    assert all(r["compound_id"] == f"REG-{1000 + r['graph_id']}" for r in req)
    from rdkit import Chem  # the SD file too: each record titled by its compound id, which is also a property

    mols = list(Chem.SDMolSupplier(str(tmp_path / "labels" / "label_requests.sdf")))
    assert [(m.GetProp("_Name"), m.GetProp("compound_id")) for m in mols] == [(r["compound_id"],) * 2 for r in req]
    answer = tmp_path / "answers.csv"
    with open(answer, "w", newline="") as fh:
        w = csv.writer(fh, delimiter=";")
        w.writerow(["compound id", "pKi", "Comment"])
        w.writerows([r["compound_id"], f"{9 - math.log10(float(ROWS[r['graph_id']]['exp_mean [nM]'])):.2f}", "ok"]
                    for r in req)
    p = {"tmp": tmp_path, "store": store, "requests": str(tmp_path / "labels" / "label_requests.parquet")}
    res, meta, text = _import(p, "ids", {"source": str(answer)})
    assert meta["key"] == "source_id" and meta["sheet"]["columns"]["key"] == "compound id"
    assert res["labelled"] == len(req) and not meta["missing"]


def test_two_imports_of_the_same_chembl_export_give_the_same_ledger(pool, tmp_path):
    """The same ChEMBL export imported and committed in two separate ledgers gives byte-identical ledgers, and
    importing it again on top of its own commit adds nothing (no new measurement, the ledger unchanged)."""
    import shutil

    from flows.labels import labels_commit_flow, labels_import_flow

    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump({"labels": {"source": str(SHEETS / "chembl_activities.csv")}}))
    ledgers = []
    for run in ("a", "b"):
        out, ledger = tmp_path / run, tmp_path / f"{run}.csv"
        labels_import_flow(pool["store"], pool["requests"], None, str(out), str(ledger), params=str(params))
        labels_commit_flow(pool["store"], str(out / "labels.csv"), str(ledger))
        ledgers.append(ledger)
    assert ledgers[0].read_bytes() == ledgers[1].read_bytes()
    before = ledgers[0].read_bytes()
    shutil.rmtree(tmp_path / "a")
    labels_import_flow(pool["store"], pool["requests"], None, str(tmp_path / "a"), str(ledgers[0]), params=str(params))
    labels_commit_flow(pool["store"], str(tmp_path / "a" / "labels.csv"), str(ledgers[0]))
    imported = json.loads((tmp_path / "a" / "import.json").read_text())
    assert imported["new_measurements"] == 0 and imported["already_in_ledger"] > 0
    assert ledgers[0].read_bytes() == before
