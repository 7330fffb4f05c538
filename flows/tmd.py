"""TMD flows.

* ``tmd_pairs_flow`` -- ``tmdsub tmd DATASET --pairs PAIRS.csv --out OUT.csv``.
* ``tmd_matrix_flow`` -- the pipeline's ``tmd`` stage: the full matrix split into blocks, each a
  Prefect task writing its own file named by a content hash of its graphs and parameters, then a
  merge.  A killed run resumes without recomputing finished blocks.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
from prefect import flow, get_run_logger

from flows.config.tmd import TmdStageConfig
from tasks import io
from tasks.coreset import status_line
from tasks.cpus import resolve_workers
from tmdlib.datasets import store_content_hash
from tmdlib.datasets._identity import STORE_HASH_KEY
from tasks.graphs import open_store, streamed_content_hash
from tasks.tmd import compute_block, record_chunks, tmd_pairs, write_pairs_csv
from tmdlib.datasets.documents import read_id_pairs
from tmdlib.datasets import graph_hashes
from tmdlib.distance.blocks import (block_graphs, block_key, block_pairs, block_shape, blocks_of_chunks,
                                    check_matrix_fits, chunk_index, merge_blocks, plan_chunks, read_block)
from tmdlib.distance import engine_fingerprint
from tmdlib.distance import resolve_weights


@flow(name="tmd-pairs")
def tmd_pairs_flow(graphs: str, pairs: str, out: str, depth: int = 4, weights="pascal") -> int:
    """Compute the TMD of every ``i,j`` row of ``pairs`` and write ``i,j,tmd`` to ``out``."""
    ds = open_store(graphs).dataset
    i, j = read_id_pairs(pairs, ds.graph_ids)
    values = tmd_pairs(ds, i, j, depth, weights)
    write_pairs_csv(out, ds.graph_ids[i], ds.graph_ids[j], values)
    return int(len(i))


def make_task_runner(runner: str, workers: int | str = "auto", dask_address: str | None = None):
    """Task runner by name: ``local`` (processes), ``threads``, ``dask`` (local cluster or ``dask_address``).

    ``workers``: auto (the cores this process may use, :func:`tasks.cpus.resolve_workers`) or a number.
    """
    workers = resolve_workers(workers)
    if runner == "local":
        from prefect.task_runners import ProcessPoolTaskRunner

        from flows._env import exit_with_parent

        # each worker ends with the stage, also when the stage is killed (see flows._env.exit_with_parent)
        return ProcessPoolTaskRunner(max_workers=workers, initializer=exit_with_parent)
    if runner == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=workers)
    if runner == "dask":
        from prefect_dask import DaskTaskRunner

        if dask_address:
            return DaskTaskRunner(address=dask_address)
        return DaskTaskRunner(cluster_kwargs={"n_workers": workers, "threads_per_worker": 1,
                                              "processes": True, "host": "127.0.0.1",
                                              "dashboard_address": None})
    raise ValueError(f"unknown runner {runner!r}: local, threads or dask")


class _Progress:
    """Progress with ETA on the terminal (stderr) and as a Prefect progress artifact."""

    def __init__(self, total: int, done: int):
        from prefect.artifacts import create_progress_artifact

        self.total, self.done, self.t0 = total, done, time.monotonic()
        self.start_done = done
        self.artifact = None
        try:
            self.artifact = create_progress_artifact(progress=100.0 * done / max(total, 1), key="tmd-progress",
                                                     description="TMD blocks finished")
        except Exception:  # noqa: BLE001 - progress must never break the computation
            self.artifact = None

    def step(self) -> None:
        from prefect.artifacts import update_progress_artifact

        self.done += 1
        new = self.done - self.start_done
        elapsed = time.monotonic() - self.t0
        eta = elapsed / new * (self.total - self.done) if new else float("nan")
        pct = 100.0 * self.done / max(self.total, 1)
        if self.artifact is not None:
            try:
                update_progress_artifact(self.artifact, progress=pct)
            except Exception:  # noqa: BLE001
                pass
        print(f"\rtmd: {self.done}/{self.total} blocks ({pct:5.1f}%), elapsed {elapsed:6.1f}s, ETA {eta:6.1f}s",
              end="", file=sys.stderr, flush=True)


@flow(name="tmd-matrix")
def tmd_matrix_flow(graphs: str, matrix_out: str, meta_out: str, cache_dir: str,
                    cfg: TmdStageConfig | None = None) -> dict:
    """Full symmetric TMD matrix of the graph store, sharded into cached blocks.

    Incremental: blocks are named by the content of the graphs they cover and the chunking reuses
    the chunks of earlier runs, so after new graphs are appended only their rows and columns are
    computed (``pairs_computed`` in the result says how many pairs this run computed).

    ``engine`` is the selection's (``exact | scalable | auto``, :func:`tmdlib.select._certificate.resolve_engine`):
    when it resolves to ``scalable`` the matrix is not computed at all and ``meta.json`` says so
    (``"matrix": false``); the select stage then runs the scalable engine.  ``cfg``
    (:class:`flows.config.tmd.TmdStageConfig`; None: the defaults) holds the options; the flow runs on the task
    runner it is given (its ``runner`` / ``workers`` are the command's).
    """
    from tmdlib.select import resolve_engine

    cfg = cfg or TmdStageConfig()
    depth, weights, block_size, engine = cfg.depth, cfg.weights, cfg.block_size, cfg.engine
    threads_per_block = cfg.threads_per_block
    logger = get_run_logger()
    w = resolve_weights(depth, weights)
    if resolve_engine(engine, _store_sizes(graphs)) == "scalable":
        return _no_matrix(graphs, matrix_out, meta_out, depth, w, engine)
    check_matrix_fits(_store_rows(graphs), block_size, graphs)  # refuse up front, before any work
    ds = open_store(graphs).dataset
    n = len(ds)
    check_matrix_fits(n, block_size, graphs)
    io.remove_stale_temps(cache_dir)  # temporaries of a killed run (never mistaken for blocks)
    io.remove_stale_temps(Path(matrix_out).parent)
    hashes = graph_hashes(ds)
    chunks = plan_chunks(hashes, block_size, chunk_index(cache_dir))
    record_chunks(cache_dir, hashes, chunks)
    blocks = blocks_of_chunks(chunks)
    paths = [str(Path(cache_dir) / f"{block_key(hashes, b, depth, w)}.npy") for b in blocks]
    todo = [k for k, p in enumerate(paths) if read_block(p, block_shape(blocks[k])) is None]
    pairs = sum(block_pairs(blocks[k]) for k in todo)
    logger.info("%d graphs, %d blocks, %d to compute (%d of %d pairs)", n, len(blocks), len(todo), pairs,
                n * (n - 1) // 2)
    progress = _Progress(len(blocks), len(blocks) - len(todo))
    from prefect.futures import as_completed

    # each task gets its block's graphs and returns the values; this process writes the cache files
    futures = {compute_block.submit(*block_graphs(ds, blocks[k]), depth, w.tolist(), threads_per_block): k
               for k in todo}
    for fut in as_completed(list(futures)):
        io.write_npy(paths[futures[fut]], fut.result())
        progress.step()
    if todo:
        print(file=sys.stderr)
    mat = merge_blocks(n, blocks, paths)
    io.write_npy(matrix_out, mat)
    # meta.json is a DVC output: only facts of the result, so a resumed run writes the same bytes as
    # an uninterrupted one; how many blocks this run computed is returned (and logged), not stored.
    # the store's content hash: select / evaluate refuse this matrix for another store (tasks.graphs)
    meta = {"graphs": n, "graph_ids": ds.graph_ids.tolist(), STORE_HASH_KEY: store_content_hash(ds, hashes),
            "depth": depth, "weights": w.tolist(), "engine": "tmdlib.distance exact", "engine_fingerprint": engine_fingerprint(), "blocks": len(blocks),
            "block_size": block_size, "matrix_sha256": io.sha256_file(matrix_out)}
    io.write_json(meta_out, io.stamped(meta))
    logger.info("%d of %d blocks computed by this run, %d reused", len(todo), len(blocks), len(blocks) - len(todo))
    return {**meta, "blocks_computed": len(todo), "pairs_computed": pairs}


def _store_sizes(graphs: str) -> np.ndarray:
    """Nodes per graph from the ``num_nodes`` column alone (what the engine choice needs)."""
    import pyarrow.parquet as pq

    from tmdlib import InputError

    try:
        return pq.read_table(graphs, columns=["num_nodes"]).column("num_nodes").to_numpy()
    except Exception as err:  # noqa: BLE001 - one clear error for any unreadable store
        raise InputError(graphs, f"not a readable graph store: {err}") from None


def _no_matrix(graphs: str, matrix_out: str, meta_out: str, depth: int, w, engine: str) -> dict:
    """The tmd stage under the scalable engine: no matrix (an old one is removed), only meta.json."""
    from tmdlib.select import matrix_node_pairs

    sizes = _store_sizes(graphs)
    store_hash = streamed_content_hash(graphs, status_line)  # a chunk at a time: a pool this size is not loaded
    Path(matrix_out).unlink(missing_ok=True)
    meta = {"graphs": int(sizes.size), STORE_HASH_KEY: store_hash, "depth": depth, "weights": np.asarray(w).tolist(), "matrix": False,
            "engine": "scalable", "engine_setting": engine, "engine_fingerprint": engine_fingerprint(),
            "node_pairs": matrix_node_pairs(sizes),
            "reason": "the full matrix is too expensive here; the select stage computes only the exact pairs it "
                      "needs (lower-bound pruning) and certifies every graph with its exact TMD to its medoid"}
    io.write_json(meta_out, io.stamped(meta))
    return {**meta, "blocks": 0, "blocks_computed": 0, "pairs_computed": 0}


def _store_rows(graphs: str) -> int:
    """Graph count from the Parquet footer (no data read); 0 if unreadable (the loader then reports it)."""
    try:
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(graphs).metadata.num_rows)
    except Exception:  # noqa: BLE001 - opening the store raises the proper InputError next
        return 0
