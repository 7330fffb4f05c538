"""Selection tasks: graph coresets and baselines, node subsampling."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from prefect import task

from tmdlib import GraphDataset, InputError
from tmdlib.select.coreset import budget_to_k, kmedoids_coreset, reuse_labelled

from . import io


@task(name="select-graphs", persist_result=False)
def select_graphs(ds: GraphDataset, train: np.ndarray, method: str, fraction: float | None, count: int | None,
                  seed: int, tmd_matrix: np.ndarray | None, restarts: int = 5, backend: str = "fasterpam",
                  labelled: np.ndarray | None = None, engine: str = "exact", depth: int = 4, weights="pascal",
                  certificate=None, train_matrix: np.ndarray | None = None) -> dict:
    """Pick graphs among ``train`` (positions) by ``method``; never reads labels.

    ``labelled`` (bool mask over ``train``) marks graphs that already have a label: they are reused
    first (tmdlib.select.coreset.reuse_labelled) so that only the other medoids need labelling.

    Every selection carries its TMD certificate (Lemma 3.2 for any assignment): the exact TMD of each
    training graph to its assigned medoid, read off the matrix (``engine="exact"``) or computed by the
    lower-bound-pruned search.  ``method="tmd"`` with the scalable engine takes the ``certificate`` the
    flow computed (:func:`flows.select.scalable_runner`, parts on the flow's task runner).

    Returns a JSON-ready dict: medoid graph ids, τ (training weights, aligned with the medoids),
    ``assignment`` (medoid graph id of each training graph, aligned with ``train_ids``), ``distance``,
    ``epsilon`` (= Σ distance), ``epsilon_mean`` (= epsilon / n_train, the ε of Lemma 3.2),
    ``pairs_computed`` (exact TMD evaluations made by this selection), ``engine``.
    """
    from tmdlib.select import baselines
    from tmdlib.select.certificate import certificate_from_matrix, certify_medoids

    n = len(train)
    k = budget_to_k(n, fraction=fraction, count=count)
    lab = np.zeros(n, dtype=bool) if labelled is None else np.asarray(labelled, dtype=bool)
    candidates, fixed = reuse_labelled(lab, n, k)
    D_tmd = train_matrix if train_matrix is not None else (
        None if tmd_matrix is None else tmd_matrix[np.ix_(train, train)])
    cert, own_eps = None, None
    if method == "random":
        pool = np.flatnonzero(candidates if candidates is not None else ~lab)
        kept = np.flatnonzero(fixed) if fixed is not None else np.zeros(0, dtype=np.int64)
        extra = pool[baselines.random_selection(pool.size, k - kept.size, seed)] if k > kept.size else kept[:0]
        pos = np.sort(np.concatenate([kept, extra]))
        tau = np.full(k, n // k) + (np.arange(k) < n % k)  # uniform weights summing to n
    elif method == "tmd" and engine == "scalable":
        if D_tmd is not None:
            raise InputError(None, "the scalable engine never reads a TMD matrix; drop --matrix or use --engine exact")
        if certificate is None:
            raise InputError(None, "the scalable engine's coreset was not computed")
        cert = certificate
        pos, tau = cert.medoids, cert.tau.astype(float)
    else:
        if method == "tmd":
            if D_tmd is None:
                raise InputError(None, "method 'tmd' with the exact engine needs the TMD matrix "
                                       "(run `tmdsub tmd-matrix`, or use --engine scalable / auto)")
            D = D_tmd
        elif method == "feature":
            D = baselines.feature_distance_matrix(ds.take(train))
        elif method == "wl":
            D = baselines.wl_distance_matrix(ds.take(train))
        else:
            raise InputError(None, f"unknown method {method!r}: tmd, random, feature or wl")
        res = kmedoids_coreset(D, k, seed=seed, method=backend, restarts=restarts, candidates=candidates,
                               fixed=fixed)
        pos, tau, own_eps = res.medoids, res.tau.astype(float), float(res.epsilon)
    if cert is None:  # exact: the matrix's pairs among the training graphs; else the pruned search's
        cert = (certificate_from_matrix(D_tmd, pos) if D_tmd is not None
                else certify_medoids(ds.take(train), pos, depth, weights))
    gids = ds.graph_ids[train]
    return {"method": method, "engine": cert.engine, "k": int(k), "n_train": int(n), "seed": int(seed),
            "medoids": gids[pos].tolist(), "tau": np.asarray(tau, dtype=float).tolist(),
            "assignment": gids[cert.assignment].tolist(), "distance": cert.distance.tolist(),
            "epsilon": float(cert.epsilon), "epsilon_mean": float(cert.epsilon_mean),
            "pairs_computed": int(cert.pairs_computed), "epsilon_method": own_eps,
            "certificate_tau": cert.tau.tolist(), "engine_info": cert.info,
            "labelled_in_pool": int(lab.sum()), "reused_labels": int(lab[pos].sum())}


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
