"""Selection tasks: graph coresets and baselines, node subsampling."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from prefect import task

from tmdlib import GraphDataset
from tmdlib.select.round_policy import RoundAsk, label_columns, reads_labels, round_ask, steer_round

from . import io


@task(name="select-graphs", persist_result=False)
def select_task(pool: GraphDataset, method: str, **kwargs):
    """:func:`tmdlib.select_graphs` on the training pool (its keyword arguments passed through)."""
    from tmdlib.select import select_graphs

    return select_graphs(pool, method, **kwargs)


def learn_options(cfg, method: str, graphs: str, train: np.ndarray, train_ids: np.ndarray, ledger, exact: bool,
                  task=None) -> dict:
    """The options a label-reading method gets (none for a label-free one): ``cfg.control``
    (:class:`flows.config.select.SelectStageConfig`) and :func:`round_options`.  ``cfg.goal`` and ``cfg.target`` are checked
    against the pool's ``task`` or, for a pool stored without labels, the ledger's label columns
    (:func:`tmdlib.select.round_policy.round_ask`); a goal needs ``tmd-rounds``; ``model`` is the rounds as before."""
    cols = [c for c in ledger.column_names if c != "graph_id"] if ledger.num_rows else []
    answers = ledger.column(cols[0]).to_numpy(zero_copy_only=False) if len(cols) == 1 else None
    ask = round_ask(method, cfg.goal, cfg.target, cfg.next, task=task, columns=cols, answers=answers, seed=cfg.seed,
                    exact=exact)
    if ask is None:
        return {}
    return {"control": cfg.control, **round_options(graphs, train, train_ids, ledger, ask)}


@task(name="round-options", persist_result=False)
def round_options(graphs: str, train: np.ndarray, train_ids: np.ndarray, ledger, ask: RoundAsk) -> dict:
    """Options of a label-reading method (``tmd-rounds``) for the training pool ``train`` (positions in the store,
    ``train_ids`` their graph ids): the ledger's labels of the pool members already labelled (the audit sample is
    not in the pool) and the pool's SMILES, read when the round steers by them
    (:func:`tmdlib.select.round_policy.reads_labels`), passed to :func:`tmdlib.select.round_policy.steer_round`
    (the strategy, the first round's picker, a difficulty or hit score per member)."""
    from tmdlib.store import store_smiles

    cols = label_columns(ledger.column_names, ask.goal, ask.target)
    ids = ledger.column("graph_id").to_numpy()
    lab = np.flatnonzero(np.isin(train_ids, ids))
    if not reads_labels(ask, cols, len(lab)):  # (the scalable engine: no matrix, the coreset grows)
        return steer_round(ask)
    smiles = store_smiles(graphs, train)
    if smiles is None:
        return steer_round(ask)
    row_of = {int(g): r for r, g in enumerate(ids.tolist())}
    rows = [row_of[int(g)] for g in train_ids[lab]]
    Y = np.column_stack([ledger.column(c).to_numpy(zero_copy_only=False).astype(np.float64)[rows] for c in cols])
    return steer_round(ask, smiles, lab, Y, cols)


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

    from tmdlib.select.nodes import off_line

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
