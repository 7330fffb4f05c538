"""The phases of a scalable select before its parts, timed one by one, against a baseline checkout.

Usage::

    python benchmarks/select_phases.py --store <store.parquet> [--part-size 1000] [--baseline DIR]

The calls ``tmdsub select --engine scalable`` makes before its first part, in its order, on the whole store as the
pool's source and the seeded 80 / 20 split: the content hashes of every graph (the store's first pass, rows
checked), the structure embedding of the training pool (second pass), the partition, and the grouping of the
graphs by part into a scratch file (third pass).  Each checkout (this one, and ``--baseline DIR``, e.g. a
``git worktree`` of an older commit) runs in its own subprocess, one after the other; printed: wall and CPU seconds
of every phase, the peak RSS, and the wall ratio baseline / this checkout per phase.  The machine must be
otherwise idle.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("content hashes", "structure embedding", "partition", "grouping by part")


def _child(args) -> None:
    """Run in a checkout's subprocess: time the phases, print one JSON line."""
    from tmdlib.datasets import StoredGraphs
    from tmdlib.store import store_segments, store_split
    from tmdlib.select import scalable as S
    from tmdlib.select.scalable.cache import part_hashes

    out = {}

    def timed(name, fn):
        w, c = time.perf_counter(), time.process_time()
        value = fn()
        out[name] = {"wall_s": round(time.perf_counter() - w, 2), "cpu_s": round(time.process_time() - c, 2)}
        return value

    store = StoredGraphs(args.store)
    train, _ = store_split(args.store, store_segments(args.store, len(store)), 0.2, 0)
    timed("content hashes", lambda: part_hashes(store))
    pool = store.subset(train)
    emb = timed("structure embedding", lambda: S.pool_embedding(pool))
    parts = timed("partition", lambda: S.partition(emb, args.part_size))
    with tempfile.TemporaryDirectory() as scratch:
        timed("grouping by part", lambda: pool.part_reader(parts, scratch).close())
    out["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)
    out["parts"] = len(parts)
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, help="a graph store (tmdsub ingest's Parquet file)")
    ap.add_argument("--part-size", type=int, default=1000)
    ap.add_argument("--baseline", help="another checkout to run after this one")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args)
        return
    runs = {}
    for name, tree in (("this", ROOT), ("baseline", Path(args.baseline).resolve() if args.baseline else None)):
        if tree is None:
            continue
        env = {**os.environ, "PYTHONPATH": str(tree)}
        cmd = [sys.executable, str(ROOT / "benchmarks" / "select_phases.py"), "--child", "--store", args.store,
               "--part-size", str(args.part_size)]
        done = subprocess.run(cmd, cwd=tempfile.gettempdir(), env=env, capture_output=True, text=True, check=True)
        runs[name] = json.loads(done.stdout.strip().splitlines()[-1])
        print(name, json.dumps(runs[name]), flush=True)
    if "baseline" in runs:
        for phase in PHASES:
            a, b = runs["baseline"][phase]["wall_s"], runs["this"][phase]["wall_s"]
            print(f"{phase}: baseline {a:.1f} s, this {b:.1f} s, {a / b:.2f}x")
        a = sum(runs["baseline"][p]["wall_s"] for p in PHASES)
        b = sum(runs["this"][p]["wall_s"] for p in PHASES)
        print(f"all four: baseline {a:.1f} s, this {b:.1f} s, {a / b:.2f}x")


if __name__ == "__main__":
    main()
