"""Cost of checking a GraphDataset built from arrays (tmdlib._graph.validate_graph_arrays).

Usage (from the repository root)::

    python benchmarks/graph_validation.py                    # 10^5 and 10^6 graphs
    python benchmarks/graph_validation.py --graphs 100000 --nodes 30 --repeat 3

Synthetic datasets: ``G`` cycles of ``n`` nodes with one chord each (both directions of every edge,
sorted per graph like the graph store), features dictionary-encoded from a table of 50 distinct rows of
width 8.  Prints a Markdown table of process CPU seconds (best of ``--repeat``) to build the dataset with
``validate=True`` and with ``validate=False``, for edges in store order and shuffled within each graph
(the check skips its sort when the edge keys are already sorted).  CPU seconds, not wall time: the
figures stay meaningful on a loaded machine.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tmdlib import GraphDataset  # noqa: E402


def synthetic(num_graphs: int, n: int, shuffle: bool, seed: int = 0) -> dict:
    """Arrays of ``num_graphs`` cycles with a chord ``0 - n//2``, local ids, sorted by (src, dst) per graph."""
    rng = np.random.default_rng(seed)
    v = np.arange(n)
    und = np.concatenate([np.stack([v, (v + 1) % n]), [[0], [n // 2]]], axis=1)
    src1, dst1 = np.r_[und[0], und[1]], np.r_[und[1], und[0]]
    order = np.lexsort((dst1, src1))
    src1, dst1 = src1[order], dst1[order]
    m = src1.size
    src = np.tile(src1, num_graphs)
    dst = np.tile(dst1, num_graphs)
    if shuffle:
        perm = (np.arange(num_graphs)[:, None] * m + rng.permuted(np.tile(np.arange(m), (num_graphs, 1)), axis=1))
        src, dst = src[perm.ravel()], dst[perm.ravel()]
    return dict(features=rng.normal(size=(50, 8)), feature_index=rng.integers(0, 50, num_graphs * n),
                node_ptr=np.arange(num_graphs + 1) * n, edge_ptr=np.arange(num_graphs + 1) * m, src=src, dst=dst,
                graph_ids=np.arange(num_graphs))


def cpu_seconds(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--nodes", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    print("| graphs | nodes | directed edges | edge order | build, validate=False (CPU s) | "
          "build, validate=True (CPU s) | check alone (CPU s) |")
    print("|---:|---:|---:|---|---:|---:|---:|")
    for g in args.graphs:
        for shuffle in (False, True):
            arrays = synthetic(g, args.nodes, shuffle)
            off = cpu_seconds(lambda: GraphDataset(**arrays, validate=False), args.repeat)
            on = cpu_seconds(lambda: GraphDataset(**arrays), args.repeat)
            print(f"| {g:,} | {g * args.nodes:,} | {arrays['src'].size:,} | {'shuffled' if shuffle else 'store'} | "
                  f"{off:.2f} | {on:.2f} | {on - off:.2f} |", flush=True)


if __name__ == "__main__":
    main()
