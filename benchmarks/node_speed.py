"""Node-subsampling speed on TU datasets (tmdlib.select.nodes.subsample_nodes).

Usage (from the repository root)::

    python benchmarks/node_speed.py                       # DD and MUTAG, fractions 0.1 and 0.5
    python benchmarks/node_speed.py --datasets DD --fractions 0.1 0.3 0.5 --repeat 3

Prints a Markdown table: wall time (best of ``--repeat``, after a JIT warm-up on a tiny graph) of
``subsample_nodes`` for every method, the number of kept nodes and the mean
:math:`\\varepsilon = \\mathrm{TN}(G) - \\mathrm{TN}(G[S])`, plus the per-graph work bound
:math:`\\sum_g L\\,|V_g|\\,|E_g|` of the paper.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tmdlib import Graph, GraphDataset  # noqa: E402
from tmdlib.datasets import to_dataset  # noqa: E402
from tmdlib.datasets import read_tu  # noqa: E402
from tmdlib.select.nodes import select_nodes, subsample_nodes  # noqa: E402

CONFIGS = [("tmd", "fill"), ("tmd", "paper"), ("random", "fill"), ("rw", "fill"), ("kcore", "fill")]


def warm_up() -> float:
    """Compile (or load from numba's cache) the kernels once; returns seconds."""
    t = time.perf_counter()
    g = Graph(np.ones((3, 1)), np.array([[0, 1, 1, 2], [1, 0, 2, 1]]))
    for method in ("tmd", "random", "rw", "kcore"):
        select_nodes(g, k=2, method=method)
    return time.perf_counter() - t


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["DD", "MUTAG"])
    ap.add_argument("--fractions", nargs="+", type=float, default=[0.1, 0.5])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--raw", default=str(ROOT / "data" / "raw"))
    args = ap.parse_args(argv)

    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}")
    print(f"JIT warm-up: {warm_up():.2f} s\n")
    print("| dataset | graphs | nodes | edges | fraction | method | bfs_mode | kept nodes | mean ε | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.datasets:
        t = time.perf_counter()
        ds = to_dataset(read_tu(Path(args.raw) / name, name))
        load = time.perf_counter() - t
        work = float(args.depth * (ds.nodes_per_graph.astype(float) * ds.edges_per_graph).sum())
        print(f"<!-- {name}: loaded in {load:.2f} s; sum_g L|V_g||E_g| = {work:.3g} -->")
        for fraction in args.fractions:
            for method, mode in CONFIGS:
                best = np.inf
                for _ in range(args.repeat):
                    t = time.perf_counter()
                    res = subsample_nodes(ds, fraction, method, depth=args.depth, bfs_mode=mode)
                    best = min(best, time.perf_counter() - t)
                print(f"| {name} | {len(ds)} | {ds.num_nodes} | {int(ds.edges_per_graph.sum())} | {fraction} | "
                      f"{method} | {mode if method == 'tmd' else '-'} | {int(res.mask.sum())} | "
                      f"{res.mean_epsilon:.4g} | {best:.3f} |", flush=True)


if __name__ == "__main__":
    main()
