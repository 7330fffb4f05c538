"""One batch of exact pairs sent to the engine whole, and cut in slices of bounded cost (status lines between them).

Usage::

    python benchmarks/pair_slices.py DD --limit 300 --pairs 60 --medoids 6 --costs whole,5e6,whole,5e6

A batch like the scalable search's first one (each of ``--pairs`` graphs against one of ``--medoids`` medoids, as
in its nearest-medoid phase) goes through :class:`tmdlib.select.scalable.PairCache` once per entry of ``--costs``:
``whole`` (no size given: one call to the engine) or a slice cost (:meth:`~tmdlib.select.scalable.PairCache.slices`,
what :func:`~tmdlib.select.scalable.solve_part` does with ``slice_cost=5e6``).  Prints the slices, wall and CPU
seconds of each entry (repeat entries to see the noise), and whether the values agree.
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
    ap.add_argument("--limit", type=int, default=300, help="the first N graphs (0: all)")
    ap.add_argument("--pairs", type=int, default=60)
    ap.add_argument("--medoids", type=int, default=6)
    ap.add_argument("--costs", default="whole,5e6,whole,5e6")
    args = ap.parse_args()

    from tmdlib.datasets import load_builtin, to_dataset
    from tmdlib.distance._engine import PairEngine
    from tmdlib.select.scalable import PairCache

    ds = to_dataset(load_builtin(args.dataset, ROOT / "data" / "raw"))
    if args.limit:
        ds = ds.take(np.arange(min(args.limit, len(ds))))
    eng = PairEngine(ds)
    rng = np.random.default_rng(0)
    med = rng.choice(len(ds), args.medoids, replace=False)
    pts = np.setdiff1d(np.arange(len(ds)), med)[:args.pairs]
    i, j = pts, med[rng.integers(0, args.medoids, pts.size)]
    eng(i[:8], np.full(8, med[0]))  # compile the block and the per-pair paths outside the timings
    eng(i[:1], j[:1])
    size = np.diff(ds.node_ptr).astype(float)
    ref = None
    for entry in args.costs.split(","):
        whole = entry == "whole"
        cache = PairCache(eng, len(ds), size=None if whole else size, slice_cost=2e6 if whole else float(entry))
        if not whole:
            lo, hi = np.minimum(i, j), np.maximum(i, j)
            print(f"{entry}: slices of {[len(s) for s in cache.slices(lo, hi)]} pairs")
        t0, c0 = time.monotonic(), cpu()
        v = cache.get(i, j)
        print(f"{entry}: {time.monotonic() - t0:.1f} s wall, {cpu() - c0:.1f} CPU s", flush=True)
        ref = v if ref is None else ref
        print(f"   max relative difference to the first entry: {np.max(np.abs(v - ref) / np.maximum(ref, 1e-300)):.1e}")


if __name__ == "__main__":
    main()
