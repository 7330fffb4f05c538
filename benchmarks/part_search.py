"""The scalable engine's search on a sample of a pool's parts, against a baseline checkout.

Usage::

    python benchmarks/part_search.py --store <store.parquet> [--fraction 0.01] [--part-size 1000] [--parts 16]
                                     [--threads 1] [--baseline DIR] [--repeat 2]

The pool is split as ``tmdsub select --engine scalable`` splits it (:func:`tmdlib.select.scalable.plan_parts`,
the part size given, k = ``fraction`` of the pool, the pair budget chosen from the pool); ``--parts`` parts spread
evenly over the plan are solved one after the other with :func:`~tmdlib.select.scalable.solve_part`, on
``--threads`` numba threads (1: as each of ``select``'s worker processes runs its parts).  Each checkout (this
one, and ``--baseline DIR``, e.g. a ``git worktree`` of an older commit) runs in its own subprocess, ``--repeat``
times, alternating (a checkout's first run may compile kernels numba has not cached yet, inside the timed
solves: the best run of each checkout is compared).
Printed per run: CPU and wall seconds of the solves alone, exact pairs, the summed objective of the parts
(:math:`\\sum_i d_1(i)`, exact) and the search's counters; then the CPU ratio of the best runs.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _child(args) -> None:
    """Run in a checkout's subprocess: solve the sample of parts, print one JSON line."""
    import numpy as np

    from tasks.graphs import load_graph_store
    from tmdlib.distance import warmup
    from tmdlib.select import scalable as S

    ds = load_graph_store.fn(args.store)
    k = max(1, round(args.fraction * len(ds)))
    _, plan = S.plan_parts(ds, k, part_size=args.part_size, max_pairs="auto")
    warmup()
    out = {"pairs": 0, "objective": 0.0, "cpu_s": 0.0, "wall_s": 0.0, "rounds": 0, "swaps": 0}
    for p in np.linspace(0, len(plan) - 1, args.parts).round().astype(int):
        spec = plan[int(p)]
        c0, w0 = time.process_time(), time.perf_counter()
        r = S.solve_part(spec)
        out["cpu_s"] += time.process_time() - c0
        out["wall_s"] += time.perf_counter() - w0
        out["pairs"] += int(r.pairs_computed)
        out["objective"] += float(r.distance.sum())
        out["rounds"] += int(r.rounds)
        out["swaps"] += int(r.swaps)
        for key, v in (r.stats.to_json() if r.stats else {}).items():
            out[key] = out.get(key, 0) + int(v)
    out.update(parts=int(args.parts), parts_planned=len(plan), n=len(ds), k=k)
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, help="a graph store (tmdsub ingest's Parquet file)")
    ap.add_argument("--fraction", type=float, default=0.01)
    ap.add_argument("--part-size", type=int, default=1000)
    ap.add_argument("--parts", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--baseline", help="another checkout to run beside this one")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        sys.path.insert(0, os.getcwd())
        _child(args)
        return
    checkouts = {"this": ROOT}
    if args.baseline:
        checkouts["baseline"] = Path(args.baseline).resolve()
    best: dict[str, dict] = {}
    for rep in range(args.repeat):
        for name, where in checkouts.items():
            env = dict(os.environ, NUMBA_NUM_THREADS=str(args.threads), PYTHONPATH=str(where))
            cmd = [sys.executable, str(ROOT / "benchmarks" / "part_search.py"), "--child", "--store", args.store,
                   "--fraction", str(args.fraction), "--part-size", str(args.part_size), "--parts", str(args.parts)]
            res = json.loads(subprocess.run(cmd, cwd=where, env=env, check=True, capture_output=True,
                                            text=True).stdout.strip().splitlines()[-1])
            print(f"{name} run {rep + 1}: {json.dumps(res)}", flush=True)
            if name not in best or res["cpu_s"] < best[name]["cpu_s"]:
                best[name] = res
    if "baseline" in best:
        a, b = best["this"], best["baseline"]
        print(f"\nbest runs: this {a['cpu_s']:.2f} CPU s, {a['pairs']} pairs, objective {a['objective']:.6g}; "
              f"baseline {b['cpu_s']:.2f} CPU s, {b['pairs']} pairs, objective {b['objective']:.6g}; "
              f"CPU {b['cpu_s'] / a['cpu_s']:.2f}x, pairs {b['pairs'] / max(a['pairs'], 1):.2f}x")


if __name__ == "__main__":
    main()
