"""TMD flows: ``tmdsub tmd DATASET --pairs PAIRS.csv --out OUT.csv``."""
from __future__ import annotations

from prefect import flow

from tasks.graphs import load_graph_store, read_id_pairs
from tasks.tmd import tmd_pairs, write_pairs_csv


@flow(name="tmd-pairs")
def tmd_pairs_flow(graphs: str, pairs: str, out: str, depth: int = 4, weights="pascal") -> int:
    """Compute the TMD of every ``i,j`` row of ``pairs`` and write ``i,j,tmd`` to ``out``."""
    ds = load_graph_store(graphs)
    i, j = read_id_pairs(pairs, ds.graph_ids)
    values = tmd_pairs(ds, i, j, depth, weights)
    write_pairs_csv(out, ds.graph_ids[i], ds.graph_ids[j], values)
    return int(len(i))
