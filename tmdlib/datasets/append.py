"""Appending batches of new graphs to a dataset's graph table.

A dataset grows by batches: its base source, then each batch in order.  The
appended rows must live in the *base's* feature space, so that an old graph
keeps its features (and its TMD values) when new graphs arrive:

* TU base, TU batch: node features are re-encoded with the base's one-hot
  map (``label - min(base labels)``, base width), node attributes kept as
  they are; raw graph labels are mapped with the base's ``y_raw -> y`` map.
  A node label outside the base's range or an unseen raw class is an error:
  the one-hot width or the class set of old graphs would otherwise change.
* Any other pair (molecules from SMILES/OGB, graph-store Parquet): the
  feature dimension must be the same.
* Labels keep the base's task (:mod:`tmdlib.datasets._task`): a batch's labels
  must fit it (multi-class: the base's classes, stored as the base's class
  indices); rows that do not are named in one error.  A batch without labels
  is a pool of unlabelled graphs.

Appended graphs get ``graph_id`` values after the base's, so ids of old
graphs never change.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa

from .._errors import InputError
from ._schema import (META_FEATURE_TABLE, META_SCHEMA_VERSION, SCHEMA_VERSION, feature_column, graph_table_metadata,
                     node_feature_rows)
from ._task import label_array, source_labels, table_labels, table_task, validate_labels

__all__ = ["append_graph_table", "META_BATCHES"]

META_BATCHES = "tmdlib.batches"


def _feature_dim(table: pa.Table) -> int | None:
    """Node-feature dimension ``d`` (None for a table without nodes)."""
    rows, index = node_feature_rows(table)
    return int(rows.shape[1]) if index.size else None


def _label_range(table: pa.Table) -> tuple[int, int] | None:
    """``(min, max)`` of the TU node labels of ``table``, None without node labels."""
    if "node_labels" not in table.column_names:
        return None
    labels = table.column("node_labels").combine_chunks().flatten()
    if len(labels) == 0:
        return None
    arr = np.asarray(labels, dtype=np.int64)
    return int(arr.min()), int(arr.max())


def _reencode_tu_features(base: pa.Table, batch: pa.Table, path) -> tuple[np.ndarray, np.ndarray]:
    """Batch node features in the base's one-hot map: ``(rows, index)`` with rows of width ``d_base``.

    Both encodings are ``[one-hot of node labels | attributes]``; the base has ``a = d_base - width``
    attribute columns, which are the batch's last ``a`` columns and are kept as they are.
    """
    base_rng = _label_range(base)
    if base_rng is None or _label_range(batch) is None:
        return _check_same_dim(base, batch, path)
    lo, hi = base_rng
    labels = np.asarray(batch.column("node_labels").combine_chunks().flatten(), dtype=np.int64)
    bad = np.flatnonzero((labels < lo) | (labels > hi))
    if bad.size:
        raise InputError(path, f"node label {labels[bad[0]]} is outside the dataset's node-label range {lo}..{hi}: "
                               f"a new label would change the one-hot features of every existing graph")
    width = hi - lo + 1
    n_attr = (_feature_dim(base) or width) - width
    d_batch = _feature_dim(batch) or 0
    if d_batch <= n_attr:
        raise InputError(path, f"node features have {d_batch} columns; the dataset has {n_attr} node attribute "
                               f"columns after its one-hot labels")
    rows_b, idx_b = node_feature_rows(batch, path)
    attrs = rows_b[idx_b][:, d_batch - n_attr:]
    onehot = np.zeros((labels.size, width), dtype=np.float32)
    onehot[np.arange(labels.size), labels - lo] = 1.0
    x = np.hstack([onehot, attrs])
    return x, np.arange(x.shape[0], dtype=np.int64)


def _check_same_dim(base: pa.Table, batch: pa.Table, path) -> tuple[np.ndarray, np.ndarray]:
    """The batch's features ``(rows, index)``, after checking their dimension equals the base's."""
    d0, d1 = _feature_dim(base), _feature_dim(batch)
    if d0 is not None and d1 is not None and d0 != d1:
        raise InputError(path, f"node features have dimension {d1}, the dataset has {d0}: "
                               f"a batch must come from the same kind of source as the dataset")
    return node_feature_rows(batch, path)


def _map_tu_labels(base: pa.Table, batch: pa.Table, path) -> pa.Array:
    """Batch ``y`` from its raw TU labels with the base's ``y_raw -> y`` map."""
    raw0 = base.column("y_raw").to_numpy()
    y0 = base.column("y").to_numpy(zero_copy_only=False)
    mapping = {int(r): float(v) for r, v in zip(raw0, y0)}
    raw = batch.column("y_raw").to_numpy()
    unseen = [int(r) for r in raw if int(r) not in mapping]
    if unseen:
        row = int(np.flatnonzero(raw == unseen[0])[0])
        raise InputError(path, f"graph label {unseen[0]} is not a class of the dataset "
                               f"({sorted(mapping)})", line=row + 1)
    return pa.array([mapping[int(r)] for r in raw], type=pa.float64())


def _column_like(batch: pa.Table, field: pa.Field, path) -> pa.Array:
    """The batch's column for ``field``, cast to its type; nulls if the batch lacks a nullable column."""
    if field.name in batch.column_names:
        return batch.column(field.name).combine_chunks().cast(field.type)
    if field.nullable:
        return pa.nulls(batch.num_rows, field.type)
    raise InputError(path, f"the batch has no column {field.name!r}, which the dataset has "
                           f"(a batch must come from the same kind of source as the dataset)")


def _fit_labels(base: pa.Table, batch: pa.Table, path) -> pa.Array:
    """The batch's ``y`` as the base's task stores it, or one InputError naming every row that does not fit.

    A batch with the base's task (one read with it, :func:`~tmdlib.datasets._smiles.read_smiles_csv`'s
    ``task``) is only checked; another task's labels (a graph-store batch) are taken back to their
    source values and checked against the base's task (multi-class: the base's classes).  A batch without
    any label is a pool of unlabelled graphs: accepted as such whatever the task.
    """
    spec, own = table_task(base), table_task(batch)
    y = table_labels(batch)
    if y.shape[1] != spec.num_targets and np.isfinite(y).any():
        raise InputError(path, f"{y.shape[1]} label column(s) ({', '.join(own.targets)}); the dataset's "
                               f"{spec.describe()} task has {spec.num_targets}")
    if not np.isfinite(y).any() and not np.isinf(y).any():
        return label_array(np.full((batch.num_rows, spec.num_targets), np.nan))
    if spec.num_targets > 1 and own.targets != spec.targets and own.num_targets == spec.num_targets:
        raise InputError(path, f"label columns {', '.join(own.targets)} are not the dataset's "
                               f"{', '.join(spec.targets)} (in this order)")
    rows = np.arange(1, batch.num_rows + 1)
    if own == spec:
        return label_array(validate_labels(y, spec, path=path, lines=rows, encoded=True))
    validate_labels(y, own, path=path, lines=rows, encoded=True)
    return label_array(validate_labels(source_labels(y, own), spec, path=path, lines=rows, encoded=False))


def append_graph_table(base: pa.Table, batch: pa.Table, batch_name: str,
                       path: str | os.PathLike | None = None) -> pa.Table:
    """Append the graphs of ``batch`` after those of ``base`` in the base's feature space.

    Parameters
    ----------
    base : pyarrow.Table
        The dataset so far (graph-store schema), ``G0`` rows.
    batch : pyarrow.Table
        New graphs (graph-store schema), ``G1`` rows, as read from their source.
    batch_name : str
        Recorded in the ``tmdlib.batches`` metadata (JSON list of ``[name, G1]``).
    path : str or os.PathLike, optional
        The batch's file or folder, named in errors.

    Returns
    -------
    pyarrow.Table
        ``G0 + G1`` rows with the base's schema; the batch's ``graph_id`` are ``G0 .. G0 + G1 - 1``
        (base ids are kept), its features re-encoded as described in the module docstring.

    Raises
    ------
    InputError
        Features or classes that do not fit the base, or a missing required column.
    """
    base_meta = graph_table_metadata(base)
    tu = base_meta.get("tmdlib.source") == "tu" and graph_table_metadata(batch).get("tmdlib.source") == "tu"
    start = int(np.asarray(base.column("graph_id")).max()) + 1 if base.num_rows else 0
    rows0, idx0 = node_feature_rows(base, path)
    rows1, idx1 = _reencode_tu_features(base, batch, path) if tu else _check_same_dim(base, batch, path)
    if rows0.shape[1] != rows1.shape[1] and idx0.size and idx1.size:
        raise InputError(path, f"node features have dimension {rows1.shape[1]}, the dataset has {rows0.shape[1]}")
    rows = np.concatenate([rows0, rows1.reshape(-1, rows0.shape[1])]) if rows1.size else rows0
    index = np.concatenate([idx0, idx1 + rows0.shape[0]])
    sizes = np.concatenate([base.column("num_nodes").to_numpy(), batch.column("num_nodes").to_numpy()]).astype(np.int64)
    feat_field, feat_col, feat_meta = feature_column(rows, index, np.concatenate([[0], np.cumsum(sizes)]))
    columns, fields = [], []
    for field in base.schema:
        if field.name in ("x", "x_id"):
            columns.append(feat_col)
            fields.append(feat_field)
            continue
        old = base.column(field.name).combine_chunks()
        if field.name == "graph_id":
            col = pa.array(np.arange(start, start + batch.num_rows, dtype=np.int64))
        elif field.name == "y" and tu:
            col = _map_tu_labels(base, batch, path)
        elif field.name == "y":
            col = _fit_labels(base, batch, path)
        else:
            col = _column_like(batch, field, path)
        columns.append(pa.concat_arrays([old, col.cast(field.type)]))
        fields.append(field)
    batches = json.loads(base_meta.get(META_BATCHES, "[]")) + [[batch_name, int(batch.num_rows)]]
    meta = {k: v for k, v in (base.schema.metadata or {}).items() if k != META_FEATURE_TABLE.encode()}
    meta.update({META_BATCHES.encode(): json.dumps(batches).encode(),
                 META_SCHEMA_VERSION.encode(): SCHEMA_VERSION.encode(),
                 **{k.encode(): v.encode() for k, v in feat_meta.items()}})
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, metadata=meta))
