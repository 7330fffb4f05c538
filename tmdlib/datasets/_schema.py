"""The graph-store Arrow schema (one row per graph) and its validator.

Columns every graph table has:

============  ==========================  ==============================================
column        Arrow type                  meaning
============  ==========================  ==============================================
graph_id      int64                       0-based position of the graph in its source
num_nodes     int64 (int32 accepted)      :math:`|V_g|`
x_id          list<int32>                 node features, dictionary-encoded: one row of the
                                          feature table per node (schema version 2)
edge_src      list<int32>                 local (0-based) source node of each edge
edge_dst      list<int32>                 local (0-based) target node of each edge
y             float64, nullable           graph label (null = missing)
============  ==========================  ==============================================

**Features.**  The feature table -- the distinct feature rows, shape ``(F, d)``, float32 -- lives
in the schema metadata under :data:`META_FEATURE_TABLE` (a base64 ``.npy``), so a node costs 4 bytes
however wide its features are (MOSES: ~50 distinct OGB atom rows of width 174 for 34 M nodes).
When features are nearly all distinct (continuous attributes), the table would be as large as the
nodes; such stores keep the dense column ``x`` (list<list<float32>>, one inner list per node) of
schema version 1 instead.  Readers accept both; :func:`feature_table_of` reads the table back.

Edges are stored in both directions, without self-loops or duplicates, and
sorted by ``(edge_src, edge_dst)`` within each graph.  Every node has the same
feature dimension ``d``.

Source-specific columns (see :func:`tu_fields`, :func:`ogb_fields`):

* TU: ``y_raw`` int64 (the label as written in ``NAME_graph_labels.txt``),
  ``node_labels`` list<int32> (the original node label ids).
* OGB / SMILES: ``smiles`` string, ``atom_features`` list<list<int16>> (the
  9 raw categorical atom features of OGB).

Dataset-level facts live in the schema metadata under ``tmdlib.*`` keys
(:data:`META_SOURCE`, :data:`META_NAME`, :data:`META_FEATURES`, ...); read them
back with :func:`graph_table_metadata`.
"""
from __future__ import annotations

import os
from typing import Mapping

import numpy as np
import pyarrow as pa

from .._errors import InputError

__all__ = [
    "SCHEMA_VERSION",
    "META_SOURCE",
    "META_NAME",
    "META_FEATURES",
    "META_LABEL_RULE",
    "META_SCHEMA_VERSION",
    "META_FEATURE_TABLE",
    "feature_table_of",
    "encode_feature_table",
    "dictionary_pays_off",
    "edge_list_arrays",
    "node_feature_rows",
    "feature_column",
    "base_fields",
    "tu_fields",
    "ogb_fields",
    "graph_table_metadata",
    "canonical_edges",
    "nested_list_array",
    "build_graph_table",
    "validate_graph_table",
]

SCHEMA_VERSION = "2"
META_FEATURE_TABLE = "tmdlib.feature_table"
META_SOURCE = "tmdlib.source"
META_NAME = "tmdlib.name"
META_FEATURES = "tmdlib.features"
META_LABEL_RULE = "tmdlib.label_rule"
META_SCHEMA_VERSION = "tmdlib.schema_version"

_X_TYPE = pa.list_(pa.list_(pa.float32()))
_XID_TYPE = pa.list_(pa.int32())
_EDGE_TYPE = pa.list_(pa.int32())
#: Largest feature table kept in the schema metadata (bytes of float32); larger tables stay dense.
MAX_TABLE_BYTES = 32 * 1024 ** 2
_INT32_MAX = np.iinfo(np.int32).max


def base_fields(compact: bool = True) -> list[pa.Field]:
    """Fields every graph table has, in column order.

    Parameters
    ----------
    compact : bool, default True
        Dictionary-encoded features (``x_id``) or the dense ``x`` column.

    Returns
    -------
    list of pyarrow.Field
        ``graph_id``, ``num_nodes``, ``x_id`` (or ``x``), ``edge_src``, ``edge_dst``, ``y``.
    """
    return [
        pa.field("graph_id", pa.int64(), nullable=False),
        pa.field("num_nodes", pa.int64(), nullable=False),
        pa.field("x_id", _XID_TYPE, nullable=False) if compact else pa.field("x", _X_TYPE, nullable=False),
        pa.field("edge_src", _EDGE_TYPE, nullable=False),
        pa.field("edge_dst", _EDGE_TYPE, nullable=False),
        pa.field("y", pa.float64(), nullable=True),
    ]


def tu_fields() -> list[pa.Field]:
    """Extra fields of tables read from the TU layout (``y_raw``, ``node_labels``)."""
    return [
        pa.field("y_raw", pa.int64(), nullable=False),
        pa.field("node_labels", pa.list_(pa.int32()), nullable=True),
    ]


def ogb_fields() -> list[pa.Field]:
    """Extra fields of molecule tables (``smiles``, ``atom_features``)."""
    return [
        pa.field("smiles", pa.string(), nullable=True),
        pa.field("atom_features", pa.list_(pa.list_(pa.int16())), nullable=False),
    ]


def graph_table_metadata(table: pa.Table) -> dict[str, str]:
    """The ``tmdlib.*`` schema metadata of a graph table as a ``str -> str`` dict."""
    meta = table.schema.metadata or {}
    return {k.decode(): v.decode() for k, v in meta.items() if k.startswith(b"tmdlib.")}


def encode_feature_table(rows: np.ndarray) -> str:
    """The feature table as metadata text: base64 of its float32 ``.npy`` bytes (no pickle)."""
    import base64
    import io

    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(rows, dtype=np.float32), allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def feature_table_of(table: pa.Table, path: str | os.PathLike | None = None) -> np.ndarray:
    """The feature table ``(F, d)`` (float64) of a dictionary-encoded graph table.

    Raises
    ------
    InputError
        The table has ``x_id`` but no readable :data:`META_FEATURE_TABLE` metadata.
    """
    import base64
    import binascii
    import io

    meta = table.schema.metadata or {}
    raw = meta.get(META_FEATURE_TABLE.encode())
    if raw is None:
        raise InputError(path, f"column 'x_id' needs the feature table in the schema metadata "
                               f"({META_FEATURE_TABLE}), which is missing")
    try:
        rows = np.load(io.BytesIO(base64.b64decode(raw, validate=True)), allow_pickle=False)
    except (ValueError, OSError, binascii.Error) as err:
        raise InputError(path, f"unreadable feature table in the schema metadata: {err}") from None
    if rows.ndim != 2 or rows.dtype.kind != "f":
        raise InputError(path, f"feature table must be a 2-D float array, got {rows.dtype} {rows.shape}")
    return rows.astype(np.float64)


def dictionary_pays_off(num_rows: int, num_nodes: int, dim: int) -> bool:
    """Whether a table of ``num_rows`` distinct rows is worth storing instead of dense features.

    Yes when it holds at most half as many rows as there are nodes and fits :data:`MAX_TABLE_BYTES`.
    """
    return num_rows <= max(num_nodes // 2, 1) and 4 * num_rows * dim <= MAX_TABLE_BYTES


def node_feature_rows(table: pa.Table, path: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Node features of a graph table in encoded form, whatever its layout.

    Returns
    -------
    rows : ndarray of float32, shape (F, d)
        The feature table (``x_id`` layout), or every node's row (dense ``x`` layout).
    index : ndarray of int64, shape (N,)
        Row of each node.
    """
    if "x_id" in table.column_names:
        ids = table.column("x_id").combine_chunks().flatten()
        return feature_table_of(table, path).astype(np.float32), np.asarray(ids, dtype=np.int64)
    x = table.column("x").combine_chunks().flatten()
    n = len(x)
    vals = np.asarray(x.flatten(), dtype=np.float32)
    d = vals.size // n if n else 0
    return vals.reshape(n, d), np.arange(n, dtype=np.int64)


def feature_column(rows: np.ndarray, index: np.ndarray, node_ptr: np.ndarray) -> tuple[pa.Field, pa.Array, dict]:
    """The node-feature column (and metadata) of a graph table, dictionary-encoded when it pays off.

    Returns
    -------
    field : pyarrow.Field
        ``x_id`` or ``x``.
    column : pyarrow.Array
    metadata : dict
        ``{META_FEATURE_TABLE: ...}`` for the ``x_id`` layout, else empty.
    """
    rows, index = _feature_rows(None, rows, index)
    n_nodes = int(node_ptr[-1]) if len(node_ptr) else 0
    if dictionary_pays_off(rows.shape[0], n_nodes, rows.shape[1]):
        col = pa.ListArray.from_arrays(_offsets32(node_ptr, "nodes"), pa.array(index.astype(np.int32)))
        return base_fields(True)[2], col, {META_FEATURE_TABLE: encode_feature_table(rows)}
    return base_fields(False)[2], nested_list_array(rows[index], node_ptr, pa.float32()), {}


# --------------------------------------------------------------------------- building


def canonical_edges(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetrise, drop self-loops and duplicates, sort by ``(src, dst)``.

    Parameters
    ----------
    src, dst : ndarray of int, shape (m,)
        Directed edges in global 0-based node ids, ``0 <= id < num_nodes``.
    num_nodes : int
        Total number of nodes.

    Returns
    -------
    src, dst : ndarray of int64, shape (m',)
        Every undirected edge in both directions, each once, sorted
        lexicographically (the result of PyG's ``to_undirected`` followed by
        ``remove_self_loops`` and ``coalesce``).
    """
    s = np.concatenate([src, dst]).astype(np.int64, copy=False)
    d = np.concatenate([dst, src]).astype(np.int64, copy=False)
    keep = s != d
    n = np.int64(max(num_nodes, 1))
    key = np.sort(s[keep] * n + d[keep])  # sort + diff: much faster than np.unique's hash path
    if key.size:
        key = key[np.concatenate([[True], key[1:] != key[:-1]])]
    return key // n, key % n


def edge_list_arrays(src: np.ndarray, dst: np.ndarray, node_ptr: np.ndarray) -> tuple[pa.ListArray, pa.ListArray]:
    """The ``edge_src`` and ``edge_dst`` columns: each graph's edges in graph-local node ids.

    Parameters
    ----------
    src, dst : ndarray of int, shape (M,)
        Canonical edges in global node ids (:func:`canonical_edges`: sorted by ``src``), none joining two
        graphs.
    node_ptr : ndarray of int, shape (G + 1,)
        Graph ``g`` owns global nodes ``node_ptr[g]:node_ptr[g + 1]``.

    Returns
    -------
    edge_src, edge_dst : pyarrow.ListArray of int32, length G
    """
    node_ptr = np.asarray(node_ptr, dtype=np.int64)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    edge_ptr = np.searchsorted(src, node_ptr, side="left")
    base = np.repeat(node_ptr[:-1], np.diff(edge_ptr))
    offsets = _offsets32(edge_ptr, "edges")
    return (pa.ListArray.from_arrays(offsets, pa.array((src - base).astype(np.int32))),
            pa.ListArray.from_arrays(offsets, pa.array((dst - base).astype(np.int32))))


def _offsets32(ptr: np.ndarray, what: str) -> pa.Array:
    """``ptr`` as an Arrow int32 offsets array (list<...> offsets are 32-bit)."""
    ptr = np.asarray(ptr, dtype=np.int64)
    if ptr.size and ptr[-1] > _INT32_MAX:
        raise ValueError(f"too many {what} for 32-bit list offsets: {ptr[-1]}")
    return pa.array(ptr.astype(np.int32))


def nested_list_array(values: np.ndarray, ptr: np.ndarray, value_type: pa.DataType) -> pa.ListArray:
    """``list<list<value_type>>`` from a row matrix and per-graph row pointers.

    Parameters
    ----------
    values : ndarray, shape (N, d)
        One row per node, all graphs stacked.
    ptr : ndarray of int, shape (G + 1,)
        Graph ``g`` owns rows ``ptr[g]:ptr[g + 1]``.
    value_type : pyarrow.DataType
        Type of the innermost values.

    Returns
    -------
    pyarrow.ListArray
        Length ``G``; element ``g`` is the list of rows of graph ``g``.
    """
    n, d = values.shape
    flat = pa.array(np.ascontiguousarray(values).reshape(-1), type=value_type)
    inner = pa.ListArray.from_arrays(_offsets32(np.arange(n + 1, dtype=np.int64) * d, "values"), flat)
    return pa.ListArray.from_arrays(_offsets32(ptr, "nodes"), inner)


def _feature_rows(x, features, feature_index) -> tuple[np.ndarray, np.ndarray]:
    """Distinct float32 feature rows and the row of each node, from dense or encoded features."""
    if (x is None) == (features is None):
        raise ValueError("give either x or features with feature_index")
    if x is not None:
        x = np.asarray(x, dtype=np.float32)
        if x.shape[0] == 0:
            return x.reshape(0, x.shape[1] if x.ndim == 2 else 1), np.zeros(0, np.int64)
        rows, inv = np.unique(x, axis=0, return_inverse=True)
        return rows, inv.reshape(-1).astype(np.int64)
    table = np.asarray(features, dtype=np.float32)
    index = np.asarray(feature_index, dtype=np.int64)
    if table.shape[0] == 0:
        return table, index
    rows, inv = np.unique(table, axis=0, return_inverse=True)  # float32 rounding may merge rows
    return rows, inv.reshape(-1).astype(np.int64)[index]


def build_graph_table(
    x: np.ndarray | None,
    node_ptr: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    y: np.ndarray | None,
    extra: Mapping[str, pa.Array] | None = None,
    extra_fields: list[pa.Field] | None = None,
    metadata: Mapping[str, str] | None = None,
    features: np.ndarray | None = None,
    feature_index: np.ndarray | None = None,
) -> pa.Table:
    """Assemble a graph table from concatenated arrays.

    Features are given densely (``x``) or dictionary-encoded (``features`` + ``feature_index``).
    Either way the table is stored dictionary-encoded (``x_id`` + the distinct rows in the metadata)
    when :func:`dictionary_pays_off`, else densely (``x``).

    Parameters
    ----------
    x : ndarray, shape (N, d), or None
        Node features of all graphs, graph after graph (stored as float32).
    node_ptr : ndarray of int, shape (G + 1,)
        Graph ``g`` owns global nodes ``node_ptr[g]:node_ptr[g + 1]``.
    src, dst : ndarray of int, shape (M,)
        Canonical directed edges in *global* node ids (output of
        :func:`canonical_edges`); no edge may join two graphs.
    y : ndarray of float, shape (G,) or (G, T), or None
        Graph labels; NaN becomes null.  ``None`` gives an all-null column.  ``T`` targets per graph are
        stored as ``list<double>`` of length ``T`` (:mod:`tmdlib.datasets._task`).
    extra : mapping of str to pyarrow.Array, optional
        Source-specific columns, each of length ``G``.
    extra_fields : list of pyarrow.Field, optional
        Their fields (types), in column order.
    metadata : mapping of str to str, optional
        Dataset-level metadata (``tmdlib.*`` keys).
    features : ndarray, shape (F, d), optional
        Feature table (instead of ``x``).
    feature_index : ndarray of int, shape (N,), optional
        Row of ``features`` of each node.

    Returns
    -------
    pyarrow.Table
        One row per graph, ``graph_id = 0..G-1``.
    """
    node_ptr = np.asarray(node_ptr, dtype=np.int64)
    g = node_ptr.size - 1
    edge_src, edge_dst = edge_list_arrays(src, dst, node_ptr)
    if y is None:
        y_arr = pa.nulls(g, pa.float64())
    else:
        y = np.asarray(y, dtype=np.float64)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim == 2:
            values = pa.array(y.reshape(-1), type=pa.float64(), mask=np.isnan(y.reshape(-1)))
            y_arr = pa.ListArray.from_arrays(pa.array(np.arange(g + 1, dtype=np.int32) * y.shape[1]), values)
        else:
            y_arr = pa.array(y, type=pa.float64(), mask=np.isnan(y))
    rows, index = _feature_rows(x, features, feature_index)
    feat_field, feat_col, feat_meta = feature_column(rows, index, node_ptr)
    columns = [
        pa.array(np.arange(g, dtype=np.int64)),
        pa.array(np.diff(node_ptr)),
        feat_col,
        edge_src,
        edge_dst,
        y_arr,
    ]
    fields = base_fields(feat_field.name == "x_id") + list(extra_fields or [])
    if y_arr.type != pa.float64():
        fields[5] = pa.field("y", y_arr.type, nullable=True)
    columns += [extra[f.name] for f in extra_fields or []]
    meta = {META_SCHEMA_VERSION: SCHEMA_VERSION, **(metadata or {}), **feat_meta}
    schema = pa.schema(fields, metadata={k.encode(): str(v).encode() for k, v in meta.items()})
    return pa.Table.from_arrays(columns, schema=schema)


# --------------------------------------------------------------------------- validation


def _fail(path, row: int | None, problem: str) -> None:
    """Raise :class:`InputError` for 0-based graph row ``row`` (reported 1-based)."""
    raise InputError(path, problem, line=None if row is None else int(row) + 1)


def _check_columns(table: pa.Table, path) -> None:
    """Required columns present with the right types."""
    names = table.column_names
    if "x_id" in names and "x" in names:
        _fail(path, None, "both 'x' (dense features) and 'x_id' (feature table rows) are present; keep one")
    feat = ("x_id", ("list<int32>", lambda t: t == _XID_TYPE)) if "x_id" in names else \
        ("x", ("list<list<float32>>", lambda t: t == _X_TYPE))
    expected = {
        "graph_id": ("int64", lambda t: pa.types.is_int64(t)),
        "num_nodes": ("int32 or int64", lambda t: pa.types.is_int64(t) or pa.types.is_int32(t)),
        feat[0]: feat[1],
        "edge_src": ("list<int32>", lambda t: t == _EDGE_TYPE),
        "edge_dst": ("list<int32>", lambda t: t == _EDGE_TYPE),
        "y": ("float64 (or list<double>: T targets)", lambda t: pa.types.is_float64(t) or (
            (pa.types.is_list(t) or pa.types.is_fixed_size_list(t)) and pa.types.is_float64(t.value_type))),
    }
    missing = [c for c in expected if c not in names]
    if missing:
        _fail(path, None, f"missing column(s) {', '.join(map(repr, missing))}; found columns: {', '.join(names) or 'none'}")
    if len(set(names)) != len(names):
        dup = sorted({c for c in names if names.count(c) > 1})
        _fail(path, None, f"duplicate column name(s): {', '.join(dup)}")
    for col, (want, ok) in expected.items():
        typ = table.schema.field(col).type
        if not ok(typ):
            _fail(path, None, f"column {col!r} has type {_type_str(typ)}, expected {want}")


def _type_str(t: pa.DataType) -> str:
    """Compact type name: ``list<list<double>>`` rather than ``list<item: ...>``."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"{'large_' if pa.types.is_large_list(t) else ''}list<{_type_str(t.value_type)}>"
    return str(t)


def _first_null_row(arr: pa.Array) -> int | None:
    """Index of the first null of ``arr``, or None."""
    if arr.null_count == 0:
        return None
    return int(np.flatnonzero(~np.asarray(arr.is_valid()))[0])


def _list_parts(arr: pa.ListArray) -> tuple[np.ndarray, pa.Array]:
    """Zero-based int64 offsets and the (sliced) child values of a list array."""
    off = np.asarray(arr.offsets, dtype=np.int64)
    return off - off[0], arr.flatten()


def _row_of(ptr: np.ndarray, k: int) -> int:
    """The row owning element ``k`` given row pointers ``ptr``."""
    return int(np.searchsorted(ptr, k, side="right") - 1)


def _check_nulls(cols: dict[str, pa.Array], path) -> None:
    """No nulls in required columns, nor inside the list columns."""
    feat = "x_id" if "x_id" in cols else "x"
    for name in ("graph_id", "num_nodes", feat, "edge_src", "edge_dst"):
        r = _first_null_row(cols[name])
        if r is not None:
            _fail(path, r, f"column {name!r} is null")
    for name in (feat, "edge_src", "edge_dst"):
        ptr, child = _list_parts(cols[name])
        k = _first_null_row(child)
        if k is not None:
            _fail(path, _row_of(ptr, k), f"column {name!r} contains a null element")


def _check_ids(gid: np.ndarray, path) -> None:
    """``graph_id`` unique; report the first row that repeats an earlier id."""
    order = np.argsort(gid, kind="stable")
    dup = gid[order][1:] == gid[order][:-1]
    if dup.any():
        r = int(order[1:][dup].min())
        first = int(np.flatnonzero(gid == gid[r])[0])
        _fail(path, r, f"graph_id {gid[r]} is not unique (also in row {first + 1})")


def _check_nodes(cols, num_nodes: np.ndarray, gid: np.ndarray, path) -> tuple[np.ndarray, int]:
    """num_nodes agrees with len(x); features rectangular and finite.

    Returns
    -------
    node_ptr : ndarray of int64, shape (G + 1,)
    d : int
        The feature dimension.
    """
    node_ptr, rows = _list_parts(cols["x"])
    bad = np.flatnonzero(np.diff(node_ptr) != num_nodes)
    if bad.size:
        r = int(bad[0])
        _fail(path, r, f"graph_id {gid[r]}: num_nodes is {num_nodes[r]} but x has {node_ptr[r + 1] - node_ptr[r]} rows")
    inner_ptr, values = _list_parts(rows)
    k = _first_null_row(values)
    if k is not None:
        r = _row_of(node_ptr, _row_of(inner_ptr, k))
        _fail(path, r, f"graph_id {gid[r]}: x contains a null feature value")
    lengths = np.diff(inner_ptr)
    d = int(lengths[0]) if lengths.size else 0
    ragged = np.flatnonzero(lengths != d)
    if ragged.size:
        v = int(ragged[0])
        r = _row_of(node_ptr, v)
        _fail(path, r, f"graph_id {gid[r]}: node {v - node_ptr[r]} has {lengths[v]} features, "
                       f"expected {d} (ragged feature dimensions)")
    vals = np.asarray(values)
    nonfinite = np.flatnonzero(~np.isfinite(vals))
    if nonfinite.size:
        v = int(nonfinite[0]) // max(d, 1)
        r = _row_of(node_ptr, v)
        _fail(path, r, f"graph_id {gid[r]}: node {v - node_ptr[r]} has a non-finite feature ({vals[nonfinite[0]]})")
    return node_ptr, d


def _check_feature_ids(cols, num_nodes: np.ndarray, gid: np.ndarray, rows: np.ndarray, path) -> np.ndarray:
    """num_nodes agrees with len(x_id); every id names a row of the (finite) feature table.

    Returns
    -------
    node_ptr : ndarray of int64, shape (G + 1,)
    """
    node_ptr, ids = _list_parts(cols["x_id"])
    bad = np.flatnonzero(np.diff(node_ptr) != num_nodes)
    if bad.size:
        r = int(bad[0])
        _fail(path, r, f"graph_id {gid[r]}: num_nodes is {num_nodes[r]} but x_id has {node_ptr[r + 1] - node_ptr[r]} "
                       "entries")
    bad_rows = np.flatnonzero(~np.isfinite(rows).all(axis=1))
    if bad_rows.size:
        _fail(path, None, f"feature table row {int(bad_rows[0])} has a non-finite value")
    ids = np.asarray(ids, dtype=np.int64)
    out = np.flatnonzero((ids < 0) | (ids >= rows.shape[0]))
    if out.size:
        v = int(out[0])
        r = _row_of(node_ptr, v)
        _fail(path, r, f"graph_id {gid[r]}: node {v - node_ptr[r]} has feature row {ids[v]}, outside the "
                       f"feature table [0, {rows.shape[0]})")
    return node_ptr


def _check_edges(cols, node_ptr: np.ndarray, gid: np.ndarray, path) -> None:
    """Edge lists: equal lengths, ids in range, simple, symmetric, sorted."""
    sptr, s = _list_parts(cols["edge_src"])
    dptr, t = _list_parts(cols["edge_dst"])
    bad = np.flatnonzero(np.diff(sptr) != np.diff(dptr))
    if bad.size:
        r = int(bad[0])
        _fail(path, r, f"graph_id {gid[r]}: edge_src has {sptr[r + 1] - sptr[r]} entries "
                       f"but edge_dst has {dptr[r + 1] - dptr[r]}")
    s = np.asarray(s, dtype=np.int64)
    t = np.asarray(t, dtype=np.int64)
    row = np.repeat(np.arange(gid.size), np.diff(sptr))
    n = np.diff(node_ptr)[row]
    out = np.flatnonzero((s < 0) | (s >= n) | (t < 0) | (t >= n))
    if out.size:
        k = int(out[0])
        _fail(path, row[k], f"graph_id {gid[row[k]]}: edge ({s[k]}, {t[k]}) has a node id outside "
                            f"[0, {n[k]}) (num_nodes = {n[k]})")
    loops = np.flatnonzero(s == t)
    if loops.size:
        k = int(loops[0])
        _fail(path, row[k], f"graph_id {gid[row[k]]}: self-loop ({s[k]}, {t[k]})")
    _check_edge_set(s, t, row, node_ptr, gid, path)


def _check_edge_set(s, t, row, node_ptr, gid, path) -> None:
    """No duplicates, every edge has its reverse, sorted by (src, dst) per graph."""
    total = np.int64(max(int(node_ptr[-1]), 1))
    gs, gt = s + node_ptr[row], t + node_ptr[row]
    key = gs * total + gt
    order = np.argsort(key, kind="stable")
    skey = key[order]
    dup = np.flatnonzero(skey[1:] == skey[:-1])
    if dup.size:
        k = int(order[1:][dup].min())
        _fail(path, row[k], f"graph_id {gid[row[k]]}: duplicate edge ({s[k]}, {t[k]})")
    rev = gt * total + gs
    pos = np.minimum(np.searchsorted(skey, rev), max(skey.size - 1, 0))
    missing = np.flatnonzero(skey[pos] != rev) if skey.size else np.zeros(0, np.int64)
    if missing.size:
        k = int(missing[0])
        _fail(path, row[k], f"graph_id {gid[row[k]]}: asymmetric edges: ({s[k]}, {t[k]}) is present "
                            f"but ({t[k]}, {s[k]}) is not")
    unsorted = np.flatnonzero((np.diff(key) < 0) & (row[1:] == row[:-1]))
    if unsorted.size:
        k = int(unsorted[0]) + 1
        _fail(path, row[k], f"graph_id {gid[row[k]]}: edges not sorted by (edge_src, edge_dst) "
                            f"at edge {k - np.searchsorted(row, row[k])}")


def validate_graph_table(table: pa.Table, path: str | os.PathLike | None = None) -> None:
    """Check that ``table`` follows the graph-store schema.

    Vectorised over all graphs (a fraction of a second for NCI1 or DD).

    Parameters
    ----------
    table : pyarrow.Table
        The graph table.
    path : str or os.PathLike, optional
        File the table came from; named in the error.

    Raises
    ------
    InputError
        At the first problem found, with ``line`` the 1-based graph row when
        the problem belongs to one row: missing or wrongly typed columns,
        nulls in required columns, repeated ``graph_id``, ``num_nodes`` not
        equal to ``len(x)`` (or ``len(x_id)``), ragged feature dimensions, NaN/inf features,
        feature ids outside the feature table, a missing or unreadable feature table,
        ``edge_src``/``edge_dst`` length mismatch, node ids out of range,
        self-loops, duplicate edges, asymmetric edges, unsorted edges.
    """
    if not isinstance(table, pa.Table):
        raise InputError(path, f"expected a pyarrow.Table, got {type(table).__name__}")
    _check_columns(table, path)
    if table.num_rows == 0:
        return
    feat = "x_id" if "x_id" in table.column_names else "x"
    cols = {c: table.column(c).combine_chunks() for c in ("graph_id", "num_nodes", feat, "edge_src", "edge_dst")}
    _check_nulls(cols, path)
    gid = np.asarray(cols["graph_id"], dtype=np.int64)
    _check_ids(gid, path)
    num_nodes = np.asarray(cols["num_nodes"], dtype=np.int64)
    if feat == "x_id":
        node_ptr = _check_feature_ids(cols, num_nodes, gid, feature_table_of(table, path), path)
    else:
        node_ptr, _ = _check_nodes(cols, num_nodes, gid, path)
    _check_edges(cols, node_ptr, gid, path)
