"""Selection flows: ``tmdsub select`` (graphs) and ``tmdsub nodes`` (nodes per graph)."""
from __future__ import annotations

from prefect import flow

import numpy as np

from tasks.graphs import load_graph_store, load_matrix, store_segments
from tasks.labels import read_ledger
from tasks.select import select_graphs, subsample_nodes_task, write_json, write_parquet
from tmdlib.split import batched_train_test_split


@flow(name="select")
def select_flow(graphs: str, out: str, method: str = "tmd", fraction: float | None = 0.1, count: int | None = None,
                seed: int = 0, test_fraction: float = 0.2, matrix: str | None = None, restarts: int = 5,
                backend: str = "fasterpam", labelled: str | None = None) -> dict:
    """Seeded 80/20 split, then a label-agnostic selection among the training graphs.

    The split is per ingested batch (old graphs never change sides when new ones arrive); graphs
    already in the label ledger ``labelled`` are reused first (only their ids are read).
    """
    ds = load_graph_store(graphs)
    train, test = batched_train_test_split(store_segments(graphs, len(ds)), test_fraction, seed)
    mat = load_matrix(matrix, len(ds)) if matrix else None
    have = read_ledger(labelled, ds.graph_ids).column("graph_id").to_numpy()
    sel = select_graphs(ds, train, method, fraction, count, seed, mat, restarts, backend,
                        np.isin(ds.graph_ids[train], have))
    sel.update({"fraction": fraction, "count": count, "test_fraction": test_fraction,
                "train_ids": ds.graph_ids[train].tolist(), "test_ids": ds.graph_ids[test].tolist()})
    # How many labels were reused is reported (and in the label manifest), not stored: committing
    # labels to the ledger must not change selection.json when the medoids stay the same.
    reuse = {key: sel.pop(key) for key in ("labelled_in_pool", "reused_labels")}
    write_json(out, sel)
    return {**sel, **reuse}


@flow(name="nodes")
def nodes_flow(graphs: str, out: str, method: str = "tmd", fraction: float = 0.5, depth: int = 4, weights="pascal",
               seed: int = 0, bfs_mode: str = "fill") -> dict:
    """Node subsampling of every graph; writes graph_id, kept nodes and ε_i = TN(G) − TN(G[S])."""
    ds = load_graph_store(graphs)
    table, mean_eps = subsample_nodes_task(ds, method, fraction, depth, weights, seed, bfs_mode)
    write_parquet(out, table)
    return {"graphs": table.num_rows, "mean_epsilon": mean_eps, "method": method, "fraction": fraction}
