"""Incremental TMD: cost of appending new graphs to a dataset whose matrix is already computed.

Usage::

    python benchmarks/incremental_tmd.py [--dataset NCI1] [--new-fraction 0.05] [--workers 2] [--json OUT]

Runs, in one process and through the pipeline's own code (ingest flow with an append folder, the
sharded ``tmd-matrix`` flow with its block cache):

1. the matrix of the first ``(1 - new_fraction)`` of the dataset (cold cache);
2. the last ``new_fraction`` appended as a batch, the store re-ingested, the matrix recomputed
   with the same cache -- only blocks touching new graphs are computed;
3. the grown dataset's matrix from scratch (a fresh cache), the baseline;

then prints the pairs and wall/CPU seconds of 2 and 3 and their ratios, and checks that the two
matrices agree (rtol 1e-12: a pair may sit in a diagonal block in one plan and an off-diagonal one
in the other, which can change the last bits of its floating-point sum).
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import flows  # noqa: E402,F401  (quiet defaults before prefect is imported)


def _cpu() -> float:
    """CPU seconds of this process and its finished children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(fn, *args, **kwargs):
    t0, c0 = time.perf_counter(), _cpu()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0, _cpu() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="NCI1")
    ap.add_argument("--new-fraction", type=float, default=0.05)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--block-size", type=int, default=256)
    ap.add_argument("--json")
    args = ap.parse_args()

    from flows.ingest import ingest_flow
    from flows.config.tmd import TmdStageConfig
    from flows.tmd import make_task_runner, tmd_matrix_flow
    from tmdlib.datasets import read_tu, write_graph_parquet

    full = read_tu(ROOT / "data" / "raw" / args.dataset, args.dataset)
    n = full.num_rows
    n_new = max(1, int(round(args.new_fraction * n)))
    n_base = n - n_new
    tmd = tmd_matrix_flow.with_options(task_runner=make_task_runner("local", args.workers))
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        (t / "append").mkdir()
        write_graph_parquet(full.slice(0, n_base), t / "base.parquet")
        store = t / "store.parquet"

        def run(tag: str, cache: str) -> dict:
            res = tmd(str(store), str(t / tag / "matrix.npy"), str(t / tag / "meta.json"), str(t / cache),
                      cfg=TmdStageConfig(block_size=args.block_size))
            return res

        ingest_flow(parquet=str(t / "base.parquet"), name=args.dataset, out=str(store), append_dir=str(t / "append"))
        base, base_wall, base_cpu = _timed(run, "base", "cache")
        write_graph_parquet(full.slice(n_base, n_new), t / "append" / "batch-001.parquet")
        ingest_flow(parquet=str(t / "base.parquet"), name=args.dataset, out=str(store), append_dir=str(t / "append"))
        inc, inc_wall, inc_cpu = _timed(run, "incremental", "cache")
        scratch, scr_wall, scr_cpu = _timed(run, "scratch", "fresh-cache")
        a, b = np.load(t / "incremental" / "matrix.npy"), np.load(t / "scratch" / "matrix.npy")
        max_rel = float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))
        equal = bool(np.allclose(a, b, rtol=1e-12, atol=0))

    total_pairs = n * (n - 1) // 2
    out = {
        "dataset": args.dataset, "graphs": n, "base_graphs": n_base, "new_graphs": n_new,
        "block_size": args.block_size, "workers": args.workers,
        "base": {"pairs": base["pairs_computed"], "wall_s": base_wall, "cpu_s": base_cpu},
        "incremental": {"pairs": inc["pairs_computed"], "blocks": inc["blocks_computed"], "of_blocks": inc["blocks"],
                        "wall_s": inc_wall, "cpu_s": inc_cpu},
        "scratch": {"pairs": scratch["pairs_computed"], "wall_s": scr_wall, "cpu_s": scr_cpu},
        "pairs_ratio": inc["pairs_computed"] / total_pairs,
        "wall_ratio": inc_wall / scr_wall, "cpu_ratio": inc_cpu / scr_cpu,
        "matrices_equal": equal, "max_relative_difference": max_rel,
    }
    print(f"{args.dataset}: {n_base} graphs + {n_new} appended ({args.new_fraction:.0%})")
    print(f"  base matrix      : {base['pairs_computed']:>10,} pairs  {base_wall:8.1f} s wall  {base_cpu:8.1f} s CPU")
    print(f"  incremental      : {inc['pairs_computed']:>10,} pairs  {inc_wall:8.1f} s wall  {inc_cpu:8.1f} s CPU  "
          f"({inc['blocks_computed']} of {inc['blocks']} blocks)")
    print(f"  from scratch     : {scratch['pairs_computed']:>10,} pairs  {scr_wall:8.1f} s wall  {scr_cpu:8.1f} s CPU")
    print(f"  ratios (incremental / scratch): pairs {out['pairs_ratio']:.3f}, wall {out['wall_ratio']:.3f}, "
          f"CPU {out['cpu_ratio']:.3f}; matrices equal to rtol 1e-12: {equal} (max relative difference {max_rel:.1e})")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    if not equal:
        raise SystemExit("incremental and from-scratch matrices differ")


if __name__ == "__main__":
    main()
