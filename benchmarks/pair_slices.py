"""Exact pairs sent to the engine in slices (status lines during a long batch) against whole batches.

Usage::

    python benchmarks/pair_slices.py DD --k 118 --max-pairs 600

Runs the scalable engine's search on one part (:func:`tmdlib.select.scalable.refine_kmedoids`) twice with the
same budget of exact pairs: once with the batches whole (no status line until a batch ends), once cut into slices
of bounded cost (:meth:`tmdlib.select.scalable.PairCache.slices`, as :func:`~tmdlib.select.scalable.solve_part`
does) with a status line every ``--every`` seconds.  Prints wall and CPU seconds of each, their ratio, the number
of status lines and the longest gap between two of them, and whether both found the same medoids.
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--k", type=int, default=118)
    ap.add_argument("--max-pairs", type=int, default=600)
    ap.add_argument("--every", type=float, default=10.0)
    args = ap.parse_args()

    from tmdlib.datasets import load_builtin, to_dataset
    from tmdlib.distance.engine import PairEngine
    from tmdlib.distance.lower import LowerBound
    from tmdlib.select.scalable import PairCache, refine_kmedoids

    ds = to_dataset(load_builtin(args.dataset, ROOT / "data" / "raw"))
    lb = LowerBound.of(ds)
    PairEngine(ds)(np.array([0]), np.array([1]))  # compile outside the timings
    runs = {}
    for name in ("whole", "sliced"):
        stamps = []

        def heard(line: str) -> None:
            stamps.append(time.monotonic())
            print(f"  [{name}] {line}", flush=True)

        size = np.diff(ds.node_ptr) if name == "sliced" else None
        cache = PairCache(PairEngine(ds), len(ds), progress=heard, every=args.every, size=size)
        t0, c0 = time.monotonic(), cpu()
        res = refine_kmedoids(lb, cache, args.k, max_pairs=args.max_pairs, progress=heard)
        wall, cpu_s = time.monotonic() - t0, cpu() - c0
        gaps = np.diff([t0, *stamps, time.monotonic()])
        runs[name] = (wall, cpu_s, len(stamps), float(gaps.max()), res)
        print(f"{name}: {wall:.1f} s wall, {cpu_s:.1f} CPU s, {cache.computed} exact pairs, {len(stamps)} status "
              f"lines, longest silence {gaps.max():.1f} s, objective {res.distance.sum():.6g}", flush=True)
    (w0, c0, *_, r0), (w1, c1, *_, r1) = runs["whole"], runs["sliced"]
    print(f"sliced / whole: wall {w1 / w0:.3f}, CPU {c1 / c0:.3f}; same medoids: {np.array_equal(r0.medoids, r1.medoids)}")


if __name__ == "__main__":
    main()
