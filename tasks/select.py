"""Selection tasks: graph coresets and baselines, node subsampling."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from prefect import task

from tmdlib import GraphDataset, InputError
from tmdlib.coreset import budget_to_k, kmedoids_coreset, medoids_objective, reuse_labelled

from . import io


@task(name="select-graphs", persist_result=False)
def select_graphs(ds: GraphDataset, train: np.ndarray, method: str, fraction: float | None, count: int | None,
                  seed: int, tmd_matrix: np.ndarray | None, restarts: int = 5, backend: str = "fasterpam",
                  labelled: np.ndarray | None = None) -> dict:
    """Pick graphs among ``train`` (positions) by ``method``; never reads labels.

    ``labelled`` (bool mask over ``train``) marks graphs that already have a label: they are reused
    first (tmdlib.coreset.reuse_labelled) so that only the other medoids need labelling.

    Returns a JSON-ready dict: medoid graph ids, τ, the method's own medoid objective and, when a
    TMD matrix is given, ε = f_TMD(I; X_train) of the selection (what Lemma 3.2 uses).
    """
    from tmdlib import baselines

    n = len(train)
    k = budget_to_k(n, fraction=fraction, count=count)
    lab = np.zeros(n, dtype=bool) if labelled is None else np.asarray(labelled, dtype=bool)
    candidates, fixed = reuse_labelled(lab, n, k)
    if method == "random":
        pool = np.flatnonzero(candidates if candidates is not None else ~lab)
        kept = np.flatnonzero(fixed) if fixed is not None else np.zeros(0, dtype=np.int64)
        extra = pool[baselines.random_selection(pool.size, k - kept.size, seed)] if k > kept.size else kept[:0]
        pos = np.sort(np.concatenate([kept, extra]))
        tau = np.full(k, n // k) + (np.arange(k) < n % k)  # uniform weights summing to n
        own_eps = None
    else:
        if method == "tmd":
            if tmd_matrix is None:
                raise InputError(None, "method 'tmd' needs the TMD matrix")
            D = tmd_matrix[np.ix_(train, train)]
        elif method == "feature":
            D = baselines.feature_distance_matrix(ds.take(train))
        elif method == "wl":
            D = baselines.wl_distance_matrix(ds.take(train))
        else:
            raise InputError(None, f"unknown method {method!r}: tmd, random, feature or wl")
        res = kmedoids_coreset(D, k, seed=seed, method=backend, restarts=restarts, candidates=candidates,
                               fixed=fixed)
        pos, tau, own_eps = res.medoids, res.tau.astype(float), float(res.epsilon)
    eps_tmd = None
    if tmd_matrix is not None:
        eps_tmd = float(medoids_objective(tmd_matrix[np.ix_(train, train)], pos))
    gids = ds.graph_ids
    return {"method": method, "k": int(k), "n_train": int(n), "seed": int(seed),
            "medoids": gids[train[pos]].tolist(), "tau": np.asarray(tau, dtype=float).tolist(),
            "epsilon": eps_tmd, "epsilon_method": own_eps,
            "labelled_in_pool": int(lab.sum()), "reused_labels": int(lab[pos].sum())}


@task(name="subsample-nodes", persist_result=False)
def subsample_nodes_task(ds: GraphDataset, method: str, fraction: float, depth: int, weights, seed: int,
                         bfs_mode: str = "fill"):
    """Per-graph node subsets (tmdlib.nodes.subsample_nodes) as an Arrow table."""
    from tmdlib.nodes import subsample_nodes

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


@task(name="write-json", persist_result=False)
def write_json(path: str, obj: dict) -> str:
    """Atomic JSON write."""
    io.write_json(path, obj)
    return path


@task(name="write-parquet", persist_result=False)
def write_parquet(path: str, table) -> str:
    """Atomic Parquet write."""
    io.write_parquet(path, table)
    return path
