"""Graph-store Arrow tables to :class:`~tmdlib._graph.GraphDataset` (the one place that knows both).

:func:`to_dataset` builds the arrays of a dataset straight from the Arrow columns' offsets and values, without
densifying dictionary-encoded features (:mod:`tmdlib.datasets._schema`).  ``tmdlib._graph`` knows nothing of Arrow
or of the store's layout.
"""
from __future__ import annotations

import numpy as np

from .._graph import GraphDataset, check_features
from ._schema import feature_table_of

__all__ = ["to_dataset", "labels_of"]


def labels_of(table) -> np.ndarray | None:
    """The ``y`` column of a graph-store table as a :class:`GraphDataset`'s ``y``: float64 ``(G,)``, or ``(G, T)``
    for lists of T targets (null = NaN); None without the column.  Reading only this column of a store gives the
    labels of a pool too large to load."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "y" not in table.column_names:
        return None
    col = table.column("y")
    if pa.types.is_list(col.type) or pa.types.is_fixed_size_list(col.type):  # T targets per graph
        col = col.combine_chunks()
        width = {len(v) for v in col.to_pylist() if v is not None}
        t = width.pop() if len(width) == 1 else 0
        flat = pc.fill_null(col.flatten().cast(pa.float64()), float("nan")).to_numpy(zero_copy_only=False)
        y = flat.reshape(len(col), t) if t and flat.size == len(col) * t else None
        if y is None:
            raise ValueError("column 'y' holds lists of different lengths (T targets per graph)")
        return y
    return pc.fill_null(col.cast(pa.float64()), float("nan")).to_numpy()


def to_dataset(table, checked: bool = False) -> GraphDataset:
    """A :class:`GraphDataset` from an Arrow table in the graph-store schema, without densifying features.

    Columns used: ``graph_id`` (int64), ``edge_src`` / ``edge_dst`` (list<int32>, local ids), ``y``
    (nullable float, or list<double> of T targets), and the node features: either ``x_id`` (list<int32>, a row
    of the feature table stored in the schema metadata, see :mod:`tmdlib.datasets._schema`) or the dense ``x``
    (list<list<float32>>, the layout of schema version 1).  Offsets of the list columns become
    ``node_ptr``/``edge_ptr`` directly.

    Parameters
    ----------
    table : pyarrow.Table
    checked : bool
        The table has passed :func:`~tmdlib.datasets._schema.validate_graph_table` (edges in range, simple,
        symmetric; features finite): the dataset's own check of the same rules is skipped, and only the feature
        values' magnitude, which the schema does not bound, is checked
        (:func:`~tmdlib._graph.check_features`).  Reading a store costs one check instead of two.

    Returns
    -------
    GraphDataset
        ``y`` of shape (G,) or (G, T), NaN where missing.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    src_col, dst_col = table.column("edge_src").combine_chunks(), table.column("edge_dst").combine_chunks()
    edge_ptr = np.asarray(src_col.offsets, dtype=np.int64)
    edge_ptr = edge_ptr - edge_ptr[0]
    y = labels_of(table)
    common = dict(edge_ptr=edge_ptr, src=np.asarray(src_col.flatten(), dtype=np.int64),
                  dst=np.asarray(dst_col.flatten(), dtype=np.int64),
                  graph_ids=table.column("graph_id").to_numpy(), y=y)
    if "x_id" in table.column_names:
        ids = table.column("x_id").combine_chunks()
        node_ptr = np.asarray(ids.offsets, dtype=np.int64)
        node_ptr = node_ptr - node_ptr[0]
        features = feature_table_of(table)
        if checked:
            check_features(features)  # the table's rows: the only rule the schema leaves open
        return GraphDataset(node_ptr=node_ptr, features=features,
                            feature_index=np.asarray(ids.flatten(), dtype=np.int64), validate=not checked, **common)
    x_outer = table.column("x").combine_chunks()
    node_ptr = np.asarray(x_outer.offsets, dtype=np.int64)
    node_ptr = node_ptr - node_ptr[0]
    rows = x_outer.flatten()
    inner_off = np.asarray(rows.offsets, dtype=np.int64)
    vals = np.asarray(rows.flatten(), dtype=np.float64)
    n_nodes = len(rows)
    d = int(inner_off[1] - inner_off[0]) if n_nodes else 0
    x = vals.reshape(n_nodes, d) if n_nodes else np.zeros((0, max(d, 1)))
    if checked:
        check_features(x, node_ptr)
    return GraphDataset(x=x, node_ptr=node_ptr, validate=not checked, **common)
