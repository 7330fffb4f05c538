"""Scalable certified TMD coresets (``engine="scalable"``) against exact FasterPAM on the full matrix.

Usage::

    python benchmarks/scalable_select.py NCI1 --fractions 0.01,0.05,0.1 --exact
    python benchmarks/scalable_select.py DD --fractions 0.1 --max-pairs 30000
    python benchmarks/scalable_select.py MOSES --store data/graphs/MOSES.parquet --limit 100000 --fractions 0.01

For each fraction of the training pool (the pipeline's 80/20 split, ``--seed``), ``k = ceil(f n_train)``:
the scalable engine's wall time, CPU seconds (this process and its workers), exact pairs computed (and their
share of ``n_train^2``), and its certified epsilon (sum of exact TMDs to the assigned medoids).  With
``--exact``, the full TMD matrix is computed once and FasterPAM (5 restarts) gives the reference epsilon:
the script prints the ratio.  Parts of pools larger than ``--part-size`` are solved by ``--workers``
processes.  Peak RSS covers this process and its children.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cpu_seconds() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def peak_rss_gb() -> tuple[float, float]:
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20)


def _solve(spec):
    from tmdlib.select.scalable import solve_part

    return solve_part(spec)


def load_pool(args):
    from tmdlib.datasets import load_builtin, read_graph_parquet, to_dataset
    from tmdlib.select import train_test_split

    t0 = time.perf_counter()
    from tmdlib.datasets import get_dataset_info

    if args.store:
        table = read_graph_parquet(args.store)
    elif get_dataset_info(args.dataset).kind == "smiles":  # MOSES: read only the first --limit molecules
        table = load_builtin(args.dataset, ROOT / "data" / "raw", limit=args.limit or None, workers=args.workers)
    else:
        table = load_builtin(args.dataset, ROOT / "data" / "raw")
    if args.limit:
        table = table.slice(0, args.limit)
    ds = to_dataset(table)
    train, _ = train_test_split(len(ds), args.test_fraction, args.seed)
    pool = ds.take(train)
    print(f"{args.dataset}: {len(ds)} graphs, train pool {len(pool)} ({time.perf_counter() - t0:.1f} s to load), "
          f"{pool.nodes_per_graph.mean():.1f} nodes/graph, {len(pool.features)} distinct feature rows", flush=True)
    return pool


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--store", help="graph-store Parquet (default: read the built-in raw files)")
    ap.add_argument("--limit", type=int, default=0, help="first N graphs only")
    ap.add_argument("--fractions", default="0.01,0.05,0.1")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--test-fraction", type=float, default=0.2)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--part-size", type=int, default=4000)
    ap.add_argument("--max-pairs", default="auto",
                    help="budget of exact pairs for the search: auto (chosen from the pool, the default), N, 0 = none")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--exact", action="store_true", help="also FasterPAM on the full matrix (the reference)")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()

    from tmdlib.select import tmd_coreset
    from tmdlib.select.scalable import plan_parts, resolve_max_pairs

    pool = load_pool(args)
    n = len(pool)
    rows = []
    D, matrix_cpu, matrix_wall = None, None, None
    if args.exact:
        from tmdlib import tmd_matrix
        from tmdlib.select import kmedoids_coreset

        c0, w0 = cpu_seconds(), time.perf_counter()
        D = tmd_matrix(pool, args.depth, "pascal", num_threads=args.workers)
        matrix_cpu, matrix_wall = cpu_seconds() - c0, time.perf_counter() - w0
        print(f"full matrix: {n * (n - 1) // 2} pairs, {matrix_wall:.1f} s wall, {matrix_cpu:.1f} s CPU", flush=True)

    pool_ex = None
    for f in [float(x) for x in args.fractions.split(",")]:
        k = max(1, math.ceil(f * n))
        parts, _ = plan_parts(pool, k, args.depth, "pascal", seed=args.seed, part_size=args.part_size)
        budget = resolve_max_pairs(args.max_pairs if args.max_pairs == "auto" else float(args.max_pairs),
                                   pool.nodes_per_graph)
        options = {"part_size": args.part_size, "max_pairs": budget or 0}
        if len(parts) > 1:  # a pool per run, shut down before reading the CPU time of its (exited) workers
            pool_ex = ProcessPoolExecutor(args.workers, mp_context=get_context("spawn"))
            done = {"n": 0}

            def map_parts(specs, _ex=pool_ex, _done=done):
                out = []
                for r in _ex.map(_solve, specs):  # the specs carry num_threads=1 (several parts)
                    out.append(r)
                    _done["n"] += 1
                    if _done["n"] % max(1, len(specs) // 20) == 0:
                        print(f"  parts {_done['n']}/{len(specs)}", flush=True)
                return out

            options["map_parts"] = map_parts
        c0, w0 = cpu_seconds(), time.perf_counter()
        cert = tmd_coreset(pool, k, args.depth, "pascal", engine="scalable", seed=args.seed,
                           num_threads=args.workers if len(parts) == 1 else 1, **options)
        if pool_ex is not None:
            pool_ex.shutdown()
            pool_ex = None
        wall, cpu = time.perf_counter() - w0, cpu_seconds() - c0
        row = {"dataset": args.dataset, "n_train": n, "fraction": f, "k": k, "parts": len(parts),
               "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "pairs": int(cert.pairs_computed),
               "pairs_share_n2": cert.pairs_computed / n**2, "epsilon": float(cert.epsilon),
               "max_pairs": budget, "max_pairs_given": args.max_pairs}
        if D is not None:
            w1 = time.perf_counter()
            res = kmedoids_coreset(D, k, seed=args.seed, restarts=5)
            eps_exact = float(D[np.arange(n), res.medoids[np.argmin(D[:, res.medoids], axis=1)]].sum())
            row.update(epsilon_exact=eps_exact, ratio=float(cert.epsilon) / eps_exact,
                       exact_cpu_s=round(matrix_cpu + (time.perf_counter() - w1), 1))
            # the certificate is honest: its distances are the matrix's
            assert np.allclose(cert.distance, D[np.arange(n), cert.assignment], rtol=1e-9, atol=1e-9)
        rows.append(row)
        print(json.dumps(row), flush=True)
    rss_self, rss_children = peak_rss_gb()
    print(f"\npeak RSS: {rss_self:.2f} GB (this process), {rss_children:.2f} GB (largest worker)")
    print("\n| dataset | n_train | fraction | k | parts | wall s | CPU s | exact pairs | pairs / n^2 | epsilon |"
          + (" FasterPAM epsilon | ratio |" if D is not None else ""))
    print("|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if D is not None else ""))
    for r in rows:
        line = (f"| {r['dataset']} | {r['n_train']} | {r['fraction']:g} | {r['k']} | {r['parts']} | {r['wall_s']} | "
                f"{r['cpu_s']} | {r['pairs']:,} | {100 * r['pairs_share_n2']:.2f} % | {r['epsilon']:.6g} |")
        if D is not None:
            line += f" {r['epsilon_exact']:.6g} | {r['ratio']:.3f} |"
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "peak_rss_gb": [rss_self, rss_children],
                                               "matrix_cpu_s": matrix_cpu, "matrix_wall_s": matrix_wall}, indent=1))


if __name__ == "__main__":
    os.environ.setdefault("POT_BACKEND_DISABLE_PYTORCH", "1")
    main()
