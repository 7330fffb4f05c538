"""The audit report's selected molecules (tmdlib.reporting.audit): largest clusters first, RDKit depictions embedded
in the static page, a table in the Markdown, at most MOLECULES_SHOWN shown, omitted with one line without SMILES;
and the facts gathered from a run's files (tasks.audit.molecule_facts).  The audit flow on a molecule dataset:
pipeline/test_task_types_flows.py."""
from __future__ import annotations

import base64
import html
import json
import re
from xml.etree import ElementTree

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import RAW
from tmdlib.chem import depict_svg
from tmdlib.reporting import audit

SMILES = ["C[C@@H](O)c1ccccc1", "F/C=C\\F", "c1cc[nH]c1", "CC(=O)[O-].[Na+]", "CCO"]
EVIL = "<script>alert(1)</script>|`x`"


def _facts(rows, total=None):
    shown = [{**r, "svg": depict_svg(r["smiles"])} for r in rows]
    return {"dataset": "ACE", "molecules": {"total": len(rows) if total is None else total, "shown": shown}}


def test_rows_are_ordered_like_the_label_requests():
    from tmdlib.datasets.labels import label_request_table

    gids, tau = [40, 10, 30, 20, 50], [2.0, 5.0, 2.0, 9.0, 1.0]
    rows = audit.molecule_rows(gids, tau, SMILES, requested=[10, 50])
    assert [r["graph_id"] for r in rows] == [20, 10, 30, 40, 50]  # τ descending, ties by graph id
    assert [r["rank"] for r in rows] == [1, 2, 3, 4, 5] and [r["tau"] for r in rows] == [9, 5, 2, 2, 1]
    assert [r["requested"] for r in rows] == [False, True, False, False, True]
    assert rows[0]["smiles"] == SMILES[3] and isinstance(rows[0]["tau"], int)
    table = label_request_table(np.array(gids), np.arange(5), np.array(tau, dtype=np.int64), SMILES)
    assert table.column("graph_id").to_pylist() == [r["graph_id"] for r in rows]
    assert audit.molecule_rows([1], [2.5], ["C"])[0]["tau"] == 2.5
    with pytest.raises(ValueError, match="differ in length"):
        audit.molecule_rows([1, 2], [1.0], ["C"])


def test_markdown_lists_rank_id_tau_and_smiles_as_code():
    rows = audit.molecule_rows(list(range(5)), [5.0, 4.0, 3.0, 2.0, 1.0], SMILES, requested=[0, 1])
    md = audit.render_markdown(_facts(rows))
    part = md.split("## Selected molecules\n")[1].split("\n## ")[0]
    assert "| rank | graph id | τ | label status | SMILES |" in part
    assert "| 1 | 0 | 5 | requested | `C[C@@H](O)c1ccccc1` |" in part  # a code span: [C@@H](O) is no link
    assert "| 2 | 1 | 4 | requested | `F/C=C\\F` |" in part  # the backslash kept as it is
    assert "| 3 | 2 | 3 | reused (ledger) |" in part
    assert "more" not in part and "data:image" not in md  # depictions only in the HTML page
    lines = [line for line in part.splitlines() if line.startswith("| ")]
    assert len(lines) == 6 and all(len(re.split(r"(?<!\\)\|", line)) == 7 for line in lines)


def test_html_embeds_one_depiction_per_molecule_and_stays_static():
    rows = audit.molecule_rows(list(range(5)), [5.0, 4.0, 3.0, 2.0, 1.0], SMILES)
    rows[4]["smiles"] = EVIL  # a hostile string in the store: escaped everywhere, no depiction
    facts = _facts(rows, total=60)
    page = audit.render_html(facts)
    assert page == audit.render_html(_facts(rows, total=60))  # the same bytes on every run
    uris = re.findall(r'<img src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(uris) == 4
    assert base64.b64decode(uris[0]).decode() == depict_svg(SMILES[0])
    for uri in uris:  # each one a well-formed SVG document a browser can show from a data: URI
        root = ElementTree.fromstring(base64.b64decode(uri))
        assert root.tag == "{http://www.w3.org/2000/svg}svg" and root.get("width") == "200px"
        assert not [e for e in root.iter() if e.tag.rsplit("}", 1)[-1] in ("script", "foreignObject", "image")]
    assert "no depiction: RDKit cannot parse this SMILES" in page
    for r in rows:
        assert f"#{r['rank']}: graph {r['graph_id']}, τ = {r['tau']}" in page
    assert f'alt="{html.escape(SMILES[0])}"' in page
    assert "<script" not in page and html.escape(EVIL) in page
    assert "http://" not in page and "https://" not in page  # the SVGs' namespaces stay inside the data: URIs
    assert "... and 55 more" in page and "label_requests.sdf" in page
    md = audit.render_markdown(facts)
    assert "... and 55 more" in md and "<script>alert(1)</script>\\|" in md  # backticks: escaped, not code


def test_a_dataset_without_smiles_gets_one_line():
    for facts in ({"dataset": "MUTAG", "molecules": {"omitted": "the graph store has no SMILES"}},
                  {"dataset": "MUTAG"}):
        md = audit.render_markdown(facts)
        part = md.split("## Selected molecules\n")[1].split("\n## ")[0]
        assert part.strip().startswith("Omitted: ") and part.strip().count("\n") == 0
        page = audit.render_html(facts)
        assert "Omitted: " in page and "data:image/svg" not in page


# ------------------------------------------------------------------------------------------------ gathered facts
def _molecule_store(tmp_path, n=60):
    from tmdlib.datasets import read_smiles_csv, write_graph_parquet

    rows = [line for line in (RAW / "MoleculeACE" / "CHEMBL2835_Ki.csv").read_text().splitlines()[1:n + 1]]
    src = tmp_path / "ace.csv"
    src.write_text("smiles,y\n" + "".join(f"{r.split(',')[0]},{r.split(',')[2]}\n" for r in rows))
    path = tmp_path / "ace.parquet"
    write_graph_parquet(read_smiles_csv(src, label_column="y"), path)
    return str(path), [r.split(",")[0] for r in rows]


def test_molecule_facts_of_a_run(tmp_path):
    from tasks.audit import NO_SMILES, molecule_facts
    from tmdlib.datasets import read_tu, write_graph_parquet

    store, smiles = _molecule_store(tmp_path)
    medoids = np.arange(0, 60, 1)  # 60 selected: more than shown
    tau = np.ones(60)
    tau[[7, 3]] = [9, 4]
    requests = tmp_path / "label_requests.parquet"
    pq.write_table(pa.table({"graph_id": pa.array([7, 12], pa.int64())}), requests)
    sel = {"medoids": medoids, "tau": tau}
    facts = molecule_facts(store, sel, str(requests), "selection.json")
    assert facts["total"] == 60 and len(facts["shown"]) == audit.MOLECULES_SHOWN
    first = facts["shown"][:3]
    assert [(r["graph_id"], r["tau"], r["requested"]) for r in first] == [(7, 9, True), (3, 4, False), (0, 1, False)]
    assert first[0]["smiles"] == smiles[7] and first[0]["svg"] == depict_svg(smiles[7])
    assert json.dumps(facts)  # plain data
    assert molecule_facts(store, sel, str(requests), "selection.json") == facts
    assert len(molecule_facts(store, sel, str(requests), "selection.json", limit=5)["shown"]) == 5

    from tmdlib import InputError

    with pytest.raises(InputError, match="selection.json: selected graph ids not in the graph store"):
        molecule_facts(store, {"medoids": np.array([999]), "tau": np.ones(1)}, str(requests), "selection.json")
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match="bad.parquet: not a readable label request table"):
        molecule_facts(store, sel, str(tmp_path / "bad.parquet"), "selection.json")
    tu = tmp_path / "mutag.parquet"
    write_graph_parquet(read_tu(RAW / "MUTAG", "MUTAG").slice(0, 5), tu)
    assert molecule_facts(str(tu), {"medoids": np.array([0]), "tau": np.ones(1)}, str(requests), "s") == {
        "omitted": NO_SMILES}
