"""A graph-store Parquet file copied into the store a slice at a time (:func:`copy_graph_parquet`): the same store,
task and errors as reading it whole (:func:`read_graph_parquet` + :func:`store_task`), problems named at their row of
the whole file, and nothing written when the file is refused."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import RAW

from tmdlib.datasets import copy_graph_parquet, read_graph_parquet, read_smiles_csv, read_tu, table_task
from tmdlib.datasets import store_task
from tmdlib import InputError


@pytest.fixture(scope="module")
def mutag() -> pa.Table:
    return read_tu(RAW / "MUTAG", name="MUTAG")


@pytest.fixture(scope="module")
def molecules(tmp_path_factory) -> pa.Table:
    """A compact (``x_id``) molecule store with two regression targets, one of them partly missing."""
    smiles = ["CCO", "CCN", "c1ccccc1", "CC(=O)O", "CCCl", "C1CC1", "CCOC", "O=C=O", "C#N", "CC(C)O"] * 3
    rows = ["smiles,a,b"] + [f"{s},{'' if i % 7 == 3 else 0.25 * i - 2},{i % 4 * 1.5}" for i, s in enumerate(smiles)]
    path = tmp_path_factory.mktemp("mol") / "pool.csv"
    path.write_text("\n".join(rows) + "\n")
    return read_smiles_csv(path, label_column=["a", "b"])


def _source(tmp_path: Path, table: pa.Table, row_group: int = 7) -> Path:
    path = tmp_path / "source.parquet"
    pq.write_table(table, path, row_group_size=row_group)
    return path


def _same(a: pa.Table, b: pa.Table) -> None:
    assert a.schema.equals(b.schema, check_metadata=True)
    assert a.equals(b)


@pytest.mark.parametrize("task", [None, "auto", "multiclass", "regression"])
def test_copy_equals_the_table_read_whole(tmp_path, mutag, task):
    src = _source(tmp_path, mutag)
    want = store_task(read_graph_parquet(src), task, src)
    out = tmp_path / "store.parquet"
    stats = copy_graph_parquet(src, out, task, batch_rows=5)
    got = pq.read_table(out)
    _same(got, want)
    assert pq.ParquetFile(out).metadata.num_row_groups == -(-mutag.num_rows // 5)
    assert stats["graphs"] == mutag.num_rows and stats["task"] == table_task(want)
    assert stats["nodes"] == int(np.sum(mutag.column("num_nodes").to_numpy()))
    assert stats["edges"] == sum(len(e) for e in mutag.column("edge_src").to_pylist()) // 2


def test_copy_keeps_a_compact_multitarget_store(tmp_path, molecules):
    src = _source(tmp_path, molecules, row_group=4)
    out = tmp_path / "store.parquet"
    stats = copy_graph_parquet(src, out, batch_rows=9)
    _same(pq.read_table(out), store_task(read_graph_parquet(src), None, src))
    assert stats["task"].type == "regression" and stats["task"].targets == ("a", "b")
    read_graph_parquet(out)  # the copy is itself a valid store


def test_store_without_a_task_gets_one_from_its_labels(tmp_path, mutag):
    meta = {k: v for k, v in mutag.schema.metadata.items() if k != b"tmdlib.task"}
    src = _source(tmp_path, mutag.replace_schema_metadata(meta))
    out = tmp_path / "store.parquet"
    stats = copy_graph_parquet(src, out, batch_rows=50)
    assert stats["task"].type == "binary"
    _same(pq.read_table(out), store_task(read_graph_parquet(src), None, src))


def _edges(table: pa.Table, row: int, src: list, dst: list) -> pa.Table:
    s, d = table.column("edge_src").to_pylist(), table.column("edge_dst").to_pylist()
    s[row], d[row] = src, dst
    i, j = table.column_names.index("edge_src"), table.column_names.index("edge_dst")
    table = table.set_column(i, table.schema.field(i), pa.array(s, type=table.schema.field(i).type))
    return table.set_column(j, table.schema.field(j), pa.array(d, type=table.schema.field(j).type))


def _refused(src: Path, out: Path, line, problem: str, **kw) -> None:
    out.write_bytes(b"old store")
    with pytest.raises(InputError) as err:
        copy_graph_parquet(src, out, **kw)
    assert err.value.line == line and problem in err.value.problem, str(err.value)
    assert Path(err.value.path).name == src.name
    # pass 1 problems (ids, labels, columns) leave the old store; a slice's problem removes the half-written one
    assert not out.exists() or out.read_bytes() == b"old store"
    with pytest.raises(InputError) as whole:  # the error reading it whole gives
        store_task(read_graph_parquet(src), kw.get("task"), src)
    assert whole.value.line == line and whole.value.problem == err.value.problem


def test_a_bad_graph_is_named_at_its_row_of_the_whole_file(tmp_path, mutag):
    n = int(mutag.column("num_nodes")[22].as_py())
    bad = _edges(mutag, 22, [0, n], [n, 0])  # row 23: a node id outside the graph
    _refused(_source(tmp_path, bad), tmp_path / "store.parquet", 23, f"outside [0, {n})", batch_rows=5)
    assert not (tmp_path / "store.parquet").exists()


def test_a_repeated_id_across_slices_names_both_rows(tmp_path, mutag):
    gid = mutag.column("graph_id").to_pylist()
    gid[16] = gid[2]
    table = mutag.set_column(0, mutag.schema.field(0), pa.array(gid, pa.int64()))
    _refused(_source(tmp_path, table), tmp_path / "store.parquet", 17, "is not unique (also in row 3)", batch_rows=5)


def test_labels_that_do_not_fit_the_task_are_refused_before_writing(tmp_path, mutag, molecules):
    y = mutag.column("y").to_pylist()
    y[12] = 0.5  # MUTAG's own task is binary
    table = mutag.set_column(mutag.column_names.index("y"), "y", pa.array(y, pa.float64()))
    _refused(_source(tmp_path, table), tmp_path / "store.parquet", 13, "", batch_rows=4)
    _refused(_source(tmp_path, molecules), tmp_path / "store.parquet", None, "a binary task has one label column",
             task="binary")


def test_missing_column_file_and_not_parquet(tmp_path, mutag):
    _refused(_source(tmp_path, mutag.drop_columns(["edge_dst"])), tmp_path / "store.parquet", None,
             "missing column(s) 'edge_dst'")
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"not parquet at all")
    _refused(junk, tmp_path / "store.parquet", None, "not a readable Parquet file")
    with pytest.raises(InputError, match="not found"):
        copy_graph_parquet(tmp_path / "none.parquet", tmp_path / "store.parquet")
