"""Selection flows: ``tmdsub select`` (graphs) and ``tmdsub nodes`` (nodes per graph)."""
from __future__ import annotations

from prefect import flow

from tasks.graphs import load_graph_store, load_matrix
from tasks.select import select_graphs, subsample_nodes_task, write_json, write_parquet
from tmdlib.split import train_test_split


@flow(name="select")
def select_flow(graphs: str, out: str, method: str = "tmd", fraction: float | None = 0.1, count: int | None = None,
                seed: int = 0, test_fraction: float = 0.2, matrix: str | None = None, restarts: int = 5,
                backend: str = "fasterpam") -> dict:
    """Seeded 80/20 split, then a label-agnostic selection among the training graphs."""
    ds = load_graph_store(graphs)
    train, test = train_test_split(len(ds), test_fraction, seed)
    mat = load_matrix(matrix, len(ds)) if matrix else None
    sel = select_graphs(ds, train, method, fraction, count, seed, mat, restarts, backend)
    sel.update({"fraction": fraction, "count": count, "test_fraction": test_fraction,
                "train_ids": ds.graph_ids[train].tolist(), "test_ids": ds.graph_ids[test].tolist()})
    write_json(out, sel)
    return sel


@flow(name="nodes")
def nodes_flow(graphs: str, out: str, method: str = "tmd", fraction: float = 0.5, depth: int = 4, weights="pascal",
               seed: int = 0, bfs_mode: str = "fill") -> dict:
    """Node subsampling of every graph; writes graph_id, kept nodes and ε_i = TN(G) − TN(G[S])."""
    ds = load_graph_store(graphs)
    table, mean_eps = subsample_nodes_task(ds, method, fraction, depth, weights, seed, bfs_mode)
    write_parquet(out, table)
    return {"graphs": table.num_rows, "mean_epsilon": mean_eps, "method": method, "fraction": fraction}
