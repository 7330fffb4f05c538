"""Cost of exact TMD pairs like the ones a coreset search asks for, against a baseline checkout.

Usage::

    python benchmarks/pair_cost.py [--datasets DD,PROTEINS,NCI1,ogbg-molbace] [--pairs 300] [--baseline DIR]

For each dataset, ``--pairs`` graphs are drawn (seed 0) and each is paired with the graph closest to it in
node count (a graph's nearest medoids are graphs of its own size, so these are the pairs a select spends its
time on).  The pairs go through :class:`tmdlib.distance._engine.PairEngine` in one call, as the search sends
them, on all numba threads (a call shorter than 2 s is repeated and its mean reported).  Each checkout (this
one, and ``--baseline DIR``, e.g. a ``git worktree`` of an older commit) runs in its own subprocess on the same
pairs; the script prints CPU seconds, wall seconds, the ratio and the largest relative difference of the values.

Then, in this checkout only, the child-problem solvers alone: :func:`assign_subsets` against
:func:`assign_rect` on random ``nr x nc`` problems, microseconds per call on one thread.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _pairs(ds, n_pairs: int, seed: int = 0):
    sizes = np.diff(ds.node_ptr)
    order = np.argsort(sizes, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    rng = np.random.default_rng(seed)
    i = rng.choice(len(ds), size=min(n_pairs, len(ds)), replace=False)
    r = rank[i]
    j = order[np.where(r + 1 < order.size, r + 1, r - 1)]  # the next graph in size order
    return i, j


def child(checkout: str, datasets: list[str], n_pairs: int, out: str) -> None:
    """Time the pairs with the tmdlib of ``checkout`` (data from this checkout)."""
    sys.path.insert(0, checkout)
    from tmdlib.datasets import load_builtin, to_dataset
    from tmdlib.distance import warmup
    from tmdlib.distance._engine import PairEngine

    warmup()
    res = {}
    for name in datasets:
        ds = to_dataset(load_builtin(name, ROOT / "data" / "raw"))
        i, j = _pairs(ds, n_pairs)
        eng = PairEngine(ds, 4)
        eng(i[:2], j[:2])  # compile / load every path once
        c0, w0, calls = time.process_time(), time.perf_counter(), 0
        while calls == 0 or time.perf_counter() - w0 < 2.0:  # small molecules: repeat the call for >= 2 s
            d = eng(i, j)
            calls += 1
        res[name] = {"cpu_s": (time.process_time() - c0) / calls, "wall_s": (time.perf_counter() - w0) / calls,
                     "pairs": int(i.size), "nodes_per_pair": float(np.mean(np.diff(ds.node_ptr)[i])),
                     "values": d.tolist()}
    Path(out).write_text(json.dumps(res))


def solver_micro(reps: int = 200_000) -> list[tuple[int, int, float, float]]:
    """Microseconds per call of the two solvers on random ``nr x nc`` problems (one thread)."""
    sys.path.insert(0, str(ROOT))
    from numba import njit

    from tmdlib.distance.assign import SUBSET_MAX, assign_rect, assign_subsets, ot_work

    @njit
    def run(costs, reps, nr, nc, subsets):
        u, v, spc, path, row4col, col4row, remaining, sr, sc, f = ot_work(16)
        s = 0.0
        for r in range(reps):
            c = costs[r % costs.shape[0]]
            if subsets:
                s += assign_subsets(c, nr, nc, f)
            else:
                s += assign_rect(c, nr, nc, u, v, spc, path, row4col, col4row, remaining, sr, sc)
        return s

    rng = np.random.default_rng(0)
    costs = rng.random((1024, 16, 16)) - 0.5  # negative costs too, as the engine's (cost - blank distance)
    rows = []
    for nc in range(5, SUBSET_MAX + 1):
        for nr in range(1, nc + 1):
            times = []
            for subsets in (True, False):
                run(costs, 10, nr, nc, subsets)
                t = time.perf_counter()
                run(costs, reps, nr, nc, subsets)
                times.append((time.perf_counter() - t) / reps * 1e6)
            rows.append((nr, nc, times[0], times[1]))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="DD,PROTEINS,NCI1,ogbg-molbace")
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--baseline", help="another checkout (e.g. a git worktree of an older commit)")
    ap.add_argument("--child", nargs=2, metavar=("CHECKOUT", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    datasets = args.datasets.split(",")
    if args.child:
        child(args.child[0], datasets, args.pairs, args.child[1])
        return
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, checkout in [("this", str(ROOT))] + ([("baseline", args.baseline)] if args.baseline else []):
            out = os.path.join(tmp, f"{label}.json")
            subprocess.run([sys.executable, __file__, "--datasets", args.datasets, "--pairs", str(args.pairs),
                            "--child", checkout, out], check=True)
            runs[label] = json.loads(Path(out).read_text())
    print("| dataset | pairs | nodes per graph | this CPU s | this wall s | baseline CPU s | baseline wall s | "
          "CPU ratio | wall ratio | max rel. diff |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in datasets:
        a = runs["this"][name]
        line = f"| {name} | {a['pairs']} | {a['nodes_per_pair']:.0f} | {a['cpu_s']:.2f} | {a['wall_s']:.2f} |"
        if "baseline" in runs:
            b = runs["baseline"][name]
            va, vb = np.array(a["values"]), np.array(b["values"])
            rel = float(np.max(np.abs(va - vb) / np.maximum(np.abs(vb), 1e-300)))
            line += (f" {b['cpu_s']:.2f} | {b['wall_s']:.2f} | {b['cpu_s'] / a['cpu_s']:.2f}x |"
                     f" {b['wall_s'] / a['wall_s']:.2f}x | {rel:.1e} |")
        else:
            line += " | | | | |"
        print(line, flush=True)
    print("\n| rows x columns | assign_subsets us | assign_rect us | ratio |\n|---|---|---|---|")
    for nr, nc, sub, rect in solver_micro():
        print(f"| {nr} x {nc} | {sub:.3f} | {rect:.3f} | {rect / sub:.2f}x |")


if __name__ == "__main__":
    main()
