"""Selection tasks: graph coresets and baselines, node subsampling."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from prefect import task

from tmdlib import GraphDataset

from . import io


@task(name="select-graphs", persist_result=False)
def select_task(pool: GraphDataset, method: str, **kwargs):
    """:func:`tmdlib.select_graphs` on the training pool (its keyword arguments passed through)."""
    from tmdlib.select import select_graphs

    return select_graphs(pool, method, **kwargs)


def resolve_plan(pool, method: str, production: bool, **plan_options):
    """``(method, plan)``: ``auto`` resolved (:func:`tmdlib.select.rounds.default_method`) once the engine is known —
    a pool the scalable engine takes keeps the paper's coreset — and the plan of the method that runs
    (:func:`tmdlib.select.plan.plan_selection` with ``plan_options``)."""
    from tmdlib.select.plan import plan_selection
    from tmdlib.select.rounds import default_method

    plan = plan_selection(pool, "tmd" if method == "auto" else method, **plan_options)
    chosen = default_method(method, production, plan.engine == "scalable")
    return chosen, (plan if chosen == plan.method else plan_selection(pool, chosen, **plan_options))


@task(name="round-options", persist_result=False)
def round_options(graphs: str, train: np.ndarray, train_ids: np.ndarray, ledger, next_strategy: str = "auto",
                  difficulty: str = "auto", seed: int = 0, exact: bool = True, classes: bool = False) -> dict:
    """Options of a label-reading method (``tmd-rounds``) for the training pool ``train`` (positions in the store):
    its later-round ``strategy`` and a ``difficulty`` per member (``difficulty``: ``forest``, the spread of a random
    forest's trees, :func:`tmdlib.select.rounds.forest_difficulty`, or ``knn``, the spread of the nearest labels,
    :func:`tmdlib.select.rounds.knn_difficulty`; on ECFP4 counts, from the ledger's labels of the pool members already
    labelled: the audit sample is not in the pool).

    A pool without SMILES, a multi-target ledger, fewer than 2 labelled members or a pool on the scalable engine
    (``exact`` False) gives no difficulty (the method then grows the coreset, saying so in the selection's info).
    The ``first`` round's picker (and so the space every round picks in) is the measured default for the labels'
    kind (:func:`tmdlib.select.rounds.default_first`): ``classes`` (a task known to be classes before any answer),
    or 0/1 answers."""
    from tmdlib.select.rounds import (DEFAULT_DIFFICULTY, DEFAULT_NEXT, default_first, forest_difficulty,
                                      knn_difficulty)

    from .graphs import store_smiles

    strategy = DEFAULT_NEXT if next_strategy in (None, "", "auto") else str(next_strategy)
    label = "label" if "label" in ledger.column_names else None
    ids = ledger.column("graph_id").to_numpy()
    where = np.isin(train_ids, ids)
    plain = {"strategy": strategy, "first": default_first(classes)}
    if label is None or where.sum() < 2 or not exact:  # (the scalable engine: no matrix, the coreset grows)
        return plain
    smiles = store_smiles(graphs, train)
    if smiles is None:
        return plain
    from tmdlib.chem.fingerprints import ecfp4_counts

    y_of = dict(zip(ids.tolist(), ledger.column(label).to_numpy(zero_copy_only=False).tolist()))
    X = ecfp4_counts(smiles)
    lab = np.flatnonzero(where)
    y = np.array([y_of[int(g)] for g in train_ids[lab]], dtype=np.float64)
    how = DEFAULT_DIFFICULTY if difficulty in (None, "", "auto") else str(difficulty)
    classes = classes or bool(np.isin(y, (0.0, 1.0)).all())  # 0/1 answers: a binary task (the forest's spread)
    u = (forest_difficulty(X[lab], y, X, classes=classes, seed=seed) if how == "forest" else
         knn_difficulty(X[lab], y, X))
    return {"strategy": strategy, "first": default_first(classes), "difficulty": u, "difficulty_from": how}


@task(name="subsample-nodes", persist_result=False)
def subsample_nodes_task(ds: GraphDataset, method: str, fraction: float, depth: int, weights, seed: int,
                         bfs_mode: str = "fill"):
    """Per-graph node subsets (tmdlib.select.nodes.subsample_nodes) as an Arrow table."""
    from tmdlib.select.nodes import subsample_nodes

    res = subsample_nodes(ds, fraction=fraction, method=method, depth=depth, weights=weights, seed=seed,
                          bfs_mode=bfs_mode)
    local = np.arange(ds.num_nodes) - np.repeat(ds.node_ptr[:-1], ds.nodes_per_graph)
    kept_counts = np.bincount(ds.graph_of_node[res.mask], minlength=len(ds))
    offsets = np.concatenate([[0], np.cumsum(kept_counts)]).astype(np.int32)
    nodes = pa.ListArray.from_arrays(pa.array(offsets), pa.array(local[res.mask].astype(np.int32)))
    table = pa.table({"graph_id": pa.array(ds.graph_ids, pa.int64()), "nodes": nodes,
                      "k": pa.array(res.k, pa.int64()), "epsilon": pa.array(res.epsilon),
                      "tree_norm": pa.array(res.tree_norm), "kept_tree_norm": pa.array(res.kept_tree_norm)})
    return table, float(res.mean_epsilon)


def nodes_off_table(requested: str, reason: str):
    """``nodes.parquet`` of node subsampling that is off: the usual columns, no rows, and in the schema's metadata
    (:data:`tasks.io.NODES_META_KEY`) ``{"method": "off", "requested", "reason", "line"}``, which the later stages read
    (:func:`tasks.io.nodes_off`) to skip instead of training and measuring."""
    import json

    from tmdlib.select.nodes.policy import off_line

    schema = pa.schema([("graph_id", pa.int64()), ("nodes", pa.list_(pa.int32())), ("k", pa.int64()),
                        ("epsilon", pa.float64()), ("tree_norm", pa.float64()), ("kept_tree_norm", pa.float64())])
    doc = {"method": "off", "requested": requested, "reason": reason, "line": off_line(reason)}
    return schema.empty_table().replace_schema_metadata({io.NODES_META_KEY: json.dumps(doc).encode()})


@task(name="write-json", persist_result=False)
def write_json(path: str, obj: dict) -> str:
    """Atomic JSON write of ``selection.json``, with the tmdsub version that made it (:func:`tasks.io.stamped`)."""
    io.write_json(path, io.stamped(obj))
    return path


@task(name="write-parquet", persist_result=False)
def write_parquet(path: str, table) -> str:
    """Atomic Parquet write."""
    io.write_parquet(path, table)
    return path
