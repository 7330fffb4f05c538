"""StoredGraphs: a pool read from its graph store a chunk at a time, and grouped by part in a scratch file.

Everything it hands out equals what reading the whole store gives (``to_dataset(read_graph_parquet(path))``
then ``take``): chunks, the whole pool, each part in its own order; bad rows are named by their row in the file,
whichever chunk they are in; the scratch file is gone after ``close``.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import RAW
from tmdlib.datasets import read_graph_parquet, read_tu, to_dataset
from tmdlib.datasets import graph_hashes
from tmdlib.datasets import StoredGraphs
from tmdlib import InputError

FIELDS = ("node_ptr", "edge_ptr", "src", "dst", "graph_ids", "feature_index", "features", "indptr", "indices")


def _same(a, b, y: bool = True) -> None:
    for f in FIELDS + (("y",) if y else ()):
        x, z = getattr(a, f), getattr(b, f)
        assert (x is None and z is None) or np.array_equal(x, z, equal_nan=True), f


@pytest.fixture(scope="module", params=["NCI1", "MUTAG"])
def store(request, tmp_path_factory):
    """A TU store written in several row groups (NCI1: x_id feature table; MUTAG written dense, schema v1)."""
    name = request.param
    table = read_tu(RAW / name, name)
    if name == "MUTAG":  # the dense layout: one list<list<float32>> row per node
        ds = to_dataset(table)
        x = ds.features[ds.feature_index].astype(np.float32)
        rows = pa.ListArray.from_arrays(pa.array(np.arange(0, x.size + 1, x.shape[1], dtype=np.int32)),
                                        pa.array(x.ravel()))
        nodes = pa.ListArray.from_arrays(pa.array(ds.node_ptr.astype(np.int32)), rows)
        table = table.drop_columns(["x_id"]).append_column("x", nodes)
        table = table.replace_schema_metadata({k: v for k, v in (table.schema.metadata or {}).items()
                                               if b"feature" not in k})
    path = tmp_path_factory.mktemp("stored") / f"{name}.parquet"
    pq.write_table(table, path, row_group_size=max(50, table.num_rows // 6))
    return path


def test_chunks_load_and_parts_equal_the_whole_store(store, tmp_path):
    whole = to_dataset(read_graph_parquet(store))
    full = StoredGraphs(store, chunk_rows=max(20, len(whole) // 9))
    assert len(full) == len(whole) and np.array_equal(full.graph_ids, whole.graph_ids)
    assert np.array_equal(full.nodes_per_graph, whole.nodes_per_graph) and full.num_features == whole.num_features
    rows = np.sort(np.random.default_rng(0).choice(len(whole), len(whole) * 2 // 3, replace=False))
    pool = full.subset(rows)
    ref = whole.take(rows)
    _same(pool.load(), ref)
    got, starts = [], []
    for start, chunk in pool.chunks():
        starts.append(start)
        got.extend(graph_hashes(chunk))
    assert starts == sorted(starts) and starts[0] == 0 and len(starts) > 2
    assert got == graph_hashes(ref)
    parts = np.array_split(np.random.default_rng(1).permutation(len(pool)), 5)
    with pool.part_reader(parts, scratch_dir=tmp_path, chunk_rows=max(30, len(pool) // 4)) as reader:
        assert reader.file.exists()
        for i, p in enumerate(parts):  # each part in the order of its positions (not the store's)
            _same(reader.load(i), ref.take(p), y=False)
    assert not reader.dir.exists() and not any(tmp_path.iterdir())


def test_map_chunks_gathers_each_chunks_rows_in_pool_order(store):
    whole = to_dataset(read_graph_parquet(store))
    rows = np.arange(1, len(whole), 3)
    pool = StoredGraphs(store, chunk_rows=max(20, len(whole) // 7)).subset(rows)
    got = pool.map_chunks(graph_hashes, np.empty(0, "S64"))
    assert got.dtype == "S64" and got.shape == (len(rows),)
    assert [h.decode() for h in got] == graph_hashes(whole.take(rows))
    sizes = pool.map_chunks(lambda c: np.c_[c.nodes_per_graph, 2 * c.nodes_per_graph], np.empty((0, 2), np.int32))
    assert sizes.dtype == np.int32 and np.array_equal(sizes[:, 1], 2 * whole.nodes_per_graph[rows])
    empty = np.zeros((0, 3), np.float32)
    assert pool.subset(np.array([], np.int64)).map_chunks(lambda c: 1 / 0, empty) is empty  # fn never called


def test_pool_subset_and_rows_are_checked(store):
    full = StoredGraphs(store)
    with pytest.raises(ValueError, match="strictly increasing"):
        StoredGraphs(store, rows=[3, 2])
    with pytest.raises(ValueError, match="strictly increasing"):
        StoredGraphs(store, rows=[0, len(full)])
    with pytest.raises(ValueError, match="disjoint"):
        full.part_reader([np.array([0, 1]), np.array([1, 2])])


def _nci1_table():
    return read_tu(RAW / "NCI1", "NCI1")


def test_bad_row_in_a_later_chunk_is_named_by_its_row_in_the_file(tmp_path):
    table = _nci1_table()
    src = table.column("edge_src").to_pylist()
    src[2500][0] = 10_000  # node id out of range in graph row 2501
    table = table.set_column(table.column_names.index("edge_src"), "edge_src",
                             pa.array(src, table.schema.field("edge_src").type))
    path = tmp_path / "bad.parquet"
    pq.write_table(table, path, row_group_size=1000)
    pool = StoredGraphs(path, chunk_rows=600)  # ids and sizes are fine: the graphs are checked when read
    with pytest.raises(InputError) as err:
        for _ in pool.chunks():
            pass
    assert err.value.line == 2501 and str(path) in str(err.value)
    with pytest.raises(InputError) as whole:
        read_graph_parquet(path)
    assert whole.value.line == 2501 and whole.value.problem == err.value.problem


def test_repeated_graph_id_missing_file_and_not_parquet(tmp_path):
    table = _nci1_table()
    ids = table.column("graph_id").to_numpy().copy()
    ids[3000] = ids[10]
    path = tmp_path / "dup.parquet"
    pq.write_table(table.set_column(0, "graph_id", pa.array(ids)), path, row_group_size=1000)
    with pytest.raises(InputError, match=f"graph_id {ids[10]} repeated") as err:
        StoredGraphs(path)
    assert err.value.line == 3001
    with pytest.raises(InputError, match="file not found"):
        StoredGraphs(tmp_path / "absent.parquet")
    (tmp_path / "text.parquet").write_text("graph_id\n1\n")
    with pytest.raises(InputError, match="not a readable Parquet file"):
        StoredGraphs(tmp_path / "text.parquet")


def test_a_store_checked_whole_is_not_checked_again_until_it_changes(tmp_path, monkeypatch):
    """A select reads its pool three times; the rows are checked on the first pass that reads them all, and again
    only when the file changes."""
    from tmdlib.datasets import _schema as schema

    real, calls = schema.validate_graph_table, []
    monkeypatch.setattr(schema, "validate_graph_table", lambda t, p=None: (calls.append(t.num_rows), real(t, p))[1])
    table = _nci1_table()
    path = tmp_path / "NCI1.parquet"
    pq.write_table(table, path, row_group_size=1000)
    pool = StoredGraphs(path, chunk_rows=1500)

    def hashes(p):
        return p.map_chunks(graph_hashes, np.empty(0, "S64"))

    head = pool.subset(np.arange(2000))
    hashes(head)
    assert sum(calls) == 3000  # two batches read and checked, the rest never read: not checked whole
    calls.clear()
    first = hashes(pool)
    assert sum(calls) == table.num_rows
    calls.clear()
    again, part = hashes(pool), hashes(pool.subset(np.arange(1, len(pool), 2)))
    assert calls == [] and np.array_equal(again, first) and np.array_equal(part, first[1::2])

    src = table.column("edge_src").to_pylist()
    src[2500][0] = 10_000  # the same file rewritten with a bad row: checked again, and refused
    pq.write_table(table.set_column(table.column_names.index("edge_src"), "edge_src",
                                    pa.array(src, table.schema.field("edge_src").type)), path, row_group_size=1000)
    with pytest.raises(InputError) as err:
        hashes(StoredGraphs(path, chunk_rows=1500))
    assert err.value.line == 2501 and sum(calls) > 0


def test_a_checked_table_gives_the_same_dataset_and_still_bounds_the_features(store):
    """``to_dataset(checked=True)`` skips the dataset's repeat of the schema's checks, not the one the schema
    lacks: feature values beyond float32's range in a stored feature table."""
    import base64
    import io

    from tmdlib.datasets import validate_graph_table
    from tmdlib.datasets._schema import META_FEATURE_TABLE, feature_table_of
    from tmdlib import GraphValidationError

    table = read_graph_parquet(store)
    _same(to_dataset(table, checked=True), to_dataset(table))
    if "x_id" not in table.column_names:
        return
    rows = feature_table_of(table)
    rows[-1, 0] = 1e39
    buf = io.BytesIO()
    np.save(buf, rows)
    meta = {**table.schema.metadata, META_FEATURE_TABLE.encode(): base64.b64encode(buf.getvalue())}
    bad = table.replace_schema_metadata(meta)
    validate_graph_table(bad)  # finite: the schema lets it through
    for checked in (True, False):
        with pytest.raises(GraphValidationError, match="1e\\+39"):
            to_dataset(bad, checked=checked)
