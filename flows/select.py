"""Selection flows: ``tmdsub select`` (graphs) and ``tmdsub nodes`` (nodes per graph)."""
from __future__ import annotations

from prefect import flow

import numpy as np

from tasks.coreset import PairStore, PartCache, Progress, part_hashes, run_parts
from tasks.graphs import (STORE_HASH_KEY, check_matrix_meta, load_graph_store, load_matrix, matrix_path,
                          store_content_hash, store_segments)
from tasks.labels import read_ledger
from tasks.select import select_graphs, subsample_nodes_task, write_json, write_parquet
from tmdlib.select.split import batched_train_test_split


def scalable_runner(cache_dir: str | None, depth: int, weights, seed: int, part_size: int,
                    max_pairs: float | None, threads: int | None = None):
    """``tmd_coreset_fn(ds_train, k, candidates, fixed)`` of the scalable engine, resumable through ``cache_dir``.

    One part (pools up to ``part_size`` graphs): solved here, exact pairs persisted as they come
    (:class:`tasks.coreset.PairStore`).  Several parts: one Prefect task each on the flow's task
    runner (processes, or a Dask cluster with ``--dask-address``), finished parts cached
    (:class:`tasks.coreset.PartCache`).  Progress with an ETA on stderr.
    """
    from tmdlib.distance.engine import PairEngine
    from tmdlib.distance.weights import resolve_weights
    from tmdlib.select.certificate import _certificate
    from tmdlib.select.scalable import combine_parts, plan_parts, solve_part

    weights = resolve_weights(depth, weights)

    def run(ds_train, k, candidates, fixed):
        parts, specs = plan_parts(ds_train, k, depth, weights, seed=seed, candidates=candidates, fixed=fixed,
                                  part_size=part_size, max_pairs=max_pairs, num_threads=threads)
        if len(parts) == 1:
            spec = dict(specs[0])
            progress = Progress("coreset (one part)")
            exact = PairEngine(spec["ds"], depth, weights, num_threads=threads)
            store = None
            if cache_dir:
                store = PairStore(cache_dir, part_hashes(spec["ds"]), depth, spec["weights"])
                exact = store.wrap(exact)
                if store.loaded:
                    progress.show(f"({store.loaded} exact pairs from an earlier run)")
            try:
                res = solve_part(**spec, exact=exact, progress=lambda line: progress.show(line))
            finally:
                if store is not None:
                    store.flush()
            results = [res]
        else:
            params = {"depth": depth, "weights": weights.tolist(), "seed": seed, "part_size": part_size}
            cache = PartCache(cache_dir or "", part_hashes(ds_train), params) if cache_dir else None
            if cache is None:
                from tasks.coreset import solve_part_task
                from prefect.futures import wait

                futs = [solve_part_task.submit(s) for s in specs]
                wait(futs)
                results = [f.result() for f in futs]
            else:
                results = run_parts(specs, parts, cache)
        r = combine_parts(len(ds_train), parts, results, part_size, max_pairs)
        return _certificate(r["medoids"], r["assignment"], r["distance"], r["pairs_computed"], "scalable", r["info"])

    return run


@flow(name="select")
def select_flow(graphs: str, out: str, method: str = "tmd", fraction: float | None = 0.1, count: int | None = None,
                seed: int = 0, test_fraction: float = 0.2, matrix: str | None = None, restarts: int = 5,
                backend: str = "fasterpam", labelled: str | None = None, engine: str = "auto", depth: int = 4,
                weights="pascal", cache_dir: str | None = None, part_size: int = 4000,
                max_pairs: float | None = None, threads: int | None = None) -> dict:
    """Seeded 80/20 split, then a label-agnostic selection among the training graphs, with its certificate.

    The split is per ingested batch (old graphs never change sides when new ones arrive); graphs
    already in the label ledger ``labelled`` are reused first (only their ids are read).  ``engine``:
    ``exact`` (k-medoids on the TMD matrix; computed here if no ``matrix`` is given), ``scalable`` (no
    matrix), ``auto`` (exact while the matrix is cheap: :func:`tmdlib.select.certificate.resolve_engine`).
    """
    from tmdlib.select.certificate import resolve_engine

    ds = load_graph_store(graphs)
    train, test = batched_train_test_split(store_segments(graphs, len(ds)), test_fraction, seed)
    matrix = matrix_path(matrix)
    store_hash = store_content_hash(ds)
    if matrix:  # a matrix made for another store, depth or weights is refused (its meta.json says which)
        check_matrix_meta(matrix, graphs, store_hash, depth, weights)
    mat = load_matrix(matrix, len(ds)) if matrix else None
    have = read_ledger(labelled, ds.graph_ids).column("graph_id").to_numpy()
    resolved = "exact" if (mat is not None and engine == "auto") else resolve_engine(engine, ds.nodes_per_graph[train])
    if mat is not None and engine == "scalable":
        from tmdlib import InputError

        raise InputError(matrix, "the scalable engine never reads a TMD matrix; drop --matrix or use --engine exact")
    train_matrix = None
    if method == "tmd" and resolved == "exact" and mat is None:  # no tmd stage ran: the matrix is cheap, make it
        from tmdlib.distance.engine import tmd_matrix as _tmd_matrix

        train_matrix = _tmd_matrix(ds.take(train), depth, weights, num_threads=threads)
    lab = np.isin(ds.graph_ids[train], have)
    if method == "tmd":  # refuse up front what the chosen engine could not hold in memory
        from tmdlib.datasets.limits import check_fits
        from tmdlib.select.certificate import engine_memory_bytes
        from tmdlib.select.coreset import budget_to_k as _k

        need = engine_memory_bytes(resolved, ds.nodes_per_graph[train], _k(len(train), fraction=fraction, count=count),
                                   ds.num_features, ds.features.shape[0], depth, part_size)
        check_fits(need, graphs, f"the {resolved} TMD engine on {len(train)} training graphs")
    cert = None
    if method == "tmd" and resolved == "scalable":  # parts fan out on this flow's task runner
        from tmdlib.select.coreset import budget_to_k, reuse_labelled

        k = budget_to_k(len(train), fraction=fraction, count=count)
        candidates, fixed = reuse_labelled(lab, len(train), k)
        cert = scalable_runner(cache_dir, depth, weights, seed, part_size, max_pairs, threads)(
            ds.take(train), k, candidates, fixed)
    sel = select_graphs(ds, train, method, fraction, count, seed, mat, restarts, backend, lab,
                        resolved if method == "tmd" else "exact", depth, weights, cert, train_matrix)
    sel.update({STORE_HASH_KEY: store_hash, "fraction": fraction, "count": count, "test_fraction": test_fraction,
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
