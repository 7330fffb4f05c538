"""New graphs arrive, through the flows: appended ingest, incremental TMD (counted pairs), coreset update reusing labels
(the library side: lib/datasets/test_incremental.py)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest

from helpers import RAW, dense_x
from tu_writer import write_tu_folder
from tmdlib.datasets import to_dataset  # noqa: E402

N_BASE, N_NEW, BLOCK = 150, 12, 64


@pytest.fixture(scope="module")
def mutag_table():
    from tmdlib.datasets import read_tu

    return read_tu(RAW / "MUTAG", "MUTAG")


@pytest.fixture(scope="module")
def grown(tmp_path_factory, mutag_table):
    """One run on 150 MUTAG graphs (select, requests, stand-in labels, commit to the ledger), then a
    batch of 12 more graphs appended and every stage run again.  Returns the facts of both runs."""
    from flows.config.tmd import TmdStageConfig
    from flows.ingest import ingest_flow
    from flows.config.ingest import IngestStageConfig
    from flows.labels import label_requests_flow, labels_commit_flow, labels_import_flow
    from flows.select import select_flow
    from flows.config.select import SelectStageConfig
    from flows.tmd import make_task_runner, tmd_matrix_flow

    ws = tmp_path_factory.mktemp("grow")
    base = write_tu_folder(mutag_table.slice(0, N_BASE), ws / "raw" / "M", "M")
    incoming = write_tu_folder(mutag_table.slice(N_BASE, N_NEW), ws / "incoming" / "b1", "M")
    append_dir, store, cache, ledger = ws / "append" / "M", ws / "M.parquet", ws / "cache", ws / "labelled" / "M.csv"
    append_dir.mkdir(parents=True)
    tmd = tmd_matrix_flow.with_options(task_runner=make_task_runner("threads", 1))

    def run(tag: str) -> dict:
        out = ws / tag
        ingest_flow(tu_dir=str(base), name="M", out=str(store), append_dir=str(append_dir))
        t = tmd(str(store), str(out / "matrix.npy"), str(out / "meta.json"), str(cache),
                cfg=TmdStageConfig(block_size=BLOCK))
        sel = select_flow(str(store), str(out / "selection.json"), matrix=str(out / "matrix.npy"),
                          labelled=str(ledger), cfg=SelectStageConfig(fraction=0.1))
        sel = {**json.loads((out / "selection.json").read_text()), **sel}  # the split's lists are in the file
        man = label_requests_flow(str(store), str(out / "selection.json"), str(out), str(ledger))
        labels_import_flow(str(store), str(out / "label_requests.parquet"), "benchmark-standin", str(out), str(ledger))
        requested = pq.read_table(out / "label_requests.parquet").column("graph_id").to_pylist()
        ledger_before = ledger.read_text() if ledger.exists() else ""
        labels_commit_flow(str(store), str(out / "labels.csv"), str(ledger))
        return {"tmd": t, "sel": sel, "manifest": man, "requested": requested, "ledger_before": ledger_before,
                "matrix": np.load(out / "matrix.npy")}

    first = run("run1")
    shutil.move(str(incoming), append_dir / "20261122T130000Z-b1")
    second = run("run2")
    return {"first": first, "second": second, "store": store, "ws": ws, "ledger": ledger}


def test_append_keeps_old_graphs_and_ids(grown, mutag_table):
    from tmdlib.datasets import read_graph_parquet

    table = read_graph_parquet(grown["store"])
    assert table.num_rows == N_BASE + N_NEW
    assert table.column("graph_id").to_pylist() == list(range(N_BASE + N_NEW))
    # appended graphs are the original MUTAG graphs 150..161: same structure, labels and features
    want = mutag_table.slice(N_BASE, N_NEW)
    got = table.slice(N_BASE, N_NEW)
    for col in ("num_nodes", "edge_src", "edge_dst", "y", "node_labels"):
        assert got.column(col).to_pylist() == want.column(col).to_pylist(), col
    width = len(dense_x(table)[0][0])
    for row, labels in zip(dense_x(got), got.column("node_labels").to_pylist()):
        lo = min(min(r) for r in mutag_table.slice(0, N_BASE).column("node_labels").to_pylist())
        assert [r.index(1.0) for r in row] == [v - lo for v in labels] and all(len(r) == width for r in row)
    assert json.loads(table.schema.metadata[b"tmdlib.batches"]) == [["20261122T130000Z-b1", N_NEW]]


def test_incremental_tmd_computes_only_new_rows_and_columns(grown):
    from tmdlib import GraphDataset
    from tmdlib.datasets import read_graph_parquet
    from tmdlib.distance import tmd_matrix

    first, second = grown["first"], grown["second"]
    assert first["tmd"]["pairs_computed"] == N_BASE * (N_BASE - 1) // 2
    assert second["tmd"]["pairs_computed"] == N_NEW * N_BASE + N_NEW * (N_NEW - 1) // 2
    assert second["tmd"]["blocks_computed"] < second["tmd"]["blocks"]
    np.testing.assert_array_equal(second["matrix"][:N_BASE, :N_BASE], first["matrix"])
    ds = to_dataset(read_graph_parquet(grown["store"]))
    np.testing.assert_allclose(second["matrix"], tmd_matrix(ds, depth=4), rtol=1e-12, atol=0)


def test_coreset_update_reuses_labels_and_requests_only_new(grown):
    first, second = grown["first"], grown["second"]
    old_medoids = set(first["sel"]["medoids"])
    assert first["manifest"]["reused"] == 0 and set(first["requested"]) == old_medoids
    # the split of the old graphs did not move
    assert set(first["sel"]["train_ids"]) <= set(second["sel"]["train_ids"])
    assert set(first["sel"]["test_ids"]) <= set(second["sel"]["test_ids"])
    # every already-labelled medoid stays; only the others are requested
    assert old_medoids <= set(second["sel"]["medoids"])
    assert second["sel"]["reused_labels"] == len(old_medoids) == second["manifest"]["reused"]
    assert set(second["requested"]) == set(second["sel"]["medoids"]) - old_medoids
    assert len(second["requested"]) == second["sel"]["k"] - first["sel"]["k"]
    # the ledger grew by exactly the new labels, and the labels of run 2 cover every medoid
    from tasks.ledger import read_ledger_history

    history, meta = read_ledger_history(str(grown["ledger"]))  # one row per measurement, its round and file
    assert meta["digest_checked"] and history.num_rows == second["sel"]["k"]
    assert set(history.column("graph_id").to_pylist()) == set(second["sel"]["medoids"])
    assert second["sel"]["epsilon"] > 0


def test_a_rerun_with_every_medoid_labelled_requests_and_imports_nothing(grown):
    """Nothing new since run 2: the selection reuses every label, zero graphs are requested, the import (no error)
    writes the ledger's labels of the medoids, and committing them leaves the ledger as it was."""
    from flows.labels import label_requests_flow, labels_commit_flow, labels_import_flow
    from flows.select import select_flow
    from flows.config.select import SelectStageConfig

    ws, store, ledger = grown["ws"], grown["store"], grown["ledger"]
    out = ws / "run3"
    before = ledger.read_text()
    sel = select_flow(str(store), str(out / "selection.json"), matrix=str(ws / "run2" / "matrix.npy"),
                      labelled=str(ledger), cfg=SelectStageConfig(fraction=0.1))
    man = label_requests_flow(str(store), str(out / "selection.json"), str(out), str(ledger))
    assert sel["reused_labels"] == sel["k"] and man["reused"] == sel["k"]
    res = labels_import_flow(str(store), str(out / "label_requests.parquet"), "benchmark-standin", str(out),
                             str(ledger))
    assert res["new"] == 0 and res["labelled"] == res["from_ledger"] == sel["k"]
    rows = (out / "labels.csv").read_text().splitlines()
    assert rows[0] == "graph_id,y" and {int(r.split(",")[0]) for r in rows[1:]} == set(sel["medoids"])
    labels_commit_flow(str(store), str(out / "labels.csv"), str(ledger))
    assert ledger.read_text() == before


def test_bad_batch_is_one_clear_error_and_no_store(tmp_path, mutag_table):
    from flows.ingest import ingest_flow
    from flows.config.ingest import IngestStageConfig
    from tmdlib import InputError

    base = write_tu_folder(mutag_table.slice(0, 20), tmp_path / "raw" / "M", "M")
    batch = write_tu_folder(mutag_table.slice(20, 3), tmp_path / "append" / "M" / "b1", "M")
    text = (batch / "M_node_labels.txt").read_text().splitlines()
    (batch / "M_node_labels.txt").write_text("\n".join(["99"] + text[1:]) + "\n")
    out = tmp_path / "M.parquet"
    with pytest.raises(InputError) as err:
        ingest_flow(tu_dir=str(base), name="M", out=str(out), append_dir=str(tmp_path / "append" / "M"))
    assert "b1" in str(err.value) and "node label 99" in str(err.value)
    assert not out.exists()
    (tmp_path / "append" / "M" / "b1").rename(tmp_path / "b1")
    (tmp_path / "append" / "M" / "odd.bin").write_text("x")  # (.txt is a molecule file type now: a header-less one)
    with pytest.raises(InputError, match="odd.bin.*a batch is a TU folder, a molecule file .* or a graph-store"):
        ingest_flow(tu_dir=str(base), name="M", out=str(out), append_dir=str(tmp_path / "append" / "M"))
    assert not out.exists()
    (tmp_path / "append" / "M" / "odd.bin").rename(tmp_path / "odd.txt")
    (tmp_path / "append" / "M" / "odd.txt").write_text("x")  # a text file that is not a pool: one clear error too
    with pytest.raises(InputError, match="odd.txt.*no SMILES column"):
        ingest_flow(tu_dir=str(base), name="M", out=str(out), append_dir=str(tmp_path / "append" / "M"))
    assert not out.exists()


def test_smiles_batch_appends_to_a_molecule_dataset(tmp_path):
    """A SMILES CSV appended to a SMILES dataset: same featurisation as reading all molecules at once."""
    import gzip

    from flows.ingest import ingest_flow
    from flows.config.ingest import IngestStageConfig
    from tmdlib.datasets import read_graph_parquet, read_smiles_csv

    rows = gzip.open(RAW / "ogbg_molbace/mapping/mol.csv.gz", "rt").read().splitlines()[1:26]
    lines = ["smiles,y"] + [f"{r.split(',')[1]},{r.split(',')[0]}" for r in rows]
    (tmp_path / "base.csv").write_text("\n".join(lines[:21]) + "\n")
    (tmp_path / "append").mkdir()
    (tmp_path / "append" / "b1.csv").write_text("\n".join(lines[:1] + lines[21:]) + "\n")
    (tmp_path / "all.csv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "mols.parquet"
    summary = ingest_flow(smiles_csv=str(tmp_path / "base.csv"), name="mols", out=str(out),
                          append_dir=str(tmp_path / "append"), cfg=IngestStageConfig(label_column="y"))
    assert summary["graphs"] == 25 and summary["batches"] == ["b1.csv"]
    got = read_graph_parquet(out)
    want = read_smiles_csv(tmp_path / "all.csv", label_column="y")
    for col in ("graph_id", "num_nodes", "edge_src", "edge_dst", "smiles", "y"):
        assert got.column(col).to_pylist() == want.column(col).to_pylist(), col
    assert dense_x(got) == dense_x(want)
