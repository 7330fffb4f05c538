"""How different are the TMD and Feature coresets?  (Evidence for the NCI1 "TMD row = Feature row" question.)

    .venv/bin/python benchmarks/experiment_overlap.py MUTAG COX2 PROTEINS [--subset NCI1:600]

For trial 0's 80/20 split (seed 0) and each fraction 1..10 %, the k-medoids selections of the experiment
(``tmdlib.experiment.protocol.select_graphs``) under TMD and under the Feature distance: their Jaccard overlap, and the
TMD medoid objective ε of each.  Uses the distance matrices cached by ``tmdsub experiment`` under
``reports/cache/`` (computed if missing).  ``NAME:N`` computes the matrices on the first N graphs of a
shuffled NAME (for datasets whose full TMD matrix is too slow here, e.g. NCI1).
"""
from __future__ import annotations

import sys
import time

import numpy as np


def overlap_table(name: str, D_tmd: np.ndarray, D_feat: np.ndarray, seed: int = 0) -> list[tuple]:
    from tmdlib.experiment._grid import TEST_FRACTION
    from tmdlib.experiment.protocol import select_graphs
    from tmdlib.select import medoids_objective
    from tmdlib.select import train_test_split

    train, _ = train_test_split(len(D_tmd), TEST_FRACTION, seed)
    Dt, Df = D_tmd[np.ix_(train, train)], D_feat[np.ix_(train, train)]
    out = []
    for i in range(1, 11):
        f = round(0.01 * i, 2)
        a, _ = select_graphs(Dt, len(train), "tmd", f, seed)
        b, _ = select_graphs(Df, len(train), "feature", f, seed)
        jac = len(set(a) & set(b)) / len(set(a) | set(b))
        out.append((name, f, len(a), jac, medoids_objective(Dt, a), medoids_objective(Dt, b)))
    return out


def main(argv: list[str]) -> int:
    from tasks.experiment import load_dataset, prepare_dataset
    from tmdlib.select import _baselines as baselines
    from tmdlib.distance import tmd_matrix

    print("| dataset | fraction | k | Jaccard(TMD, Feature) | ε TMD coreset | ε Feature coreset |")
    print("|---|---:|---:|---:|---:|---:|")
    for arg in argv[1:]:
        if ":" in arg:
            name, n = arg.split(":")
            ds = load_dataset(name, "data/raw")
            idx = np.sort(np.random.default_rng(0).permutation(len(ds))[: int(n)])
            ds = ds.take(idx)
            t0 = time.perf_counter()
            D_tmd = tmd_matrix(ds, 4, "pascal")
            print(f"<!-- {name}: TMD matrix of {len(ds)} graphs in {time.perf_counter() - t0:.1f} s -->")
            D_feat = baselines.feature_distance_matrix(ds)
            label = f"{name} ({n} graphs)"
        else:
            info = prepare_dataset.fn(arg, "data/raw", "reports/cache")
            D_tmd, D_feat = (np.load(info["paths"][m]) for m in ("tmd", "feature"))
            label = arg
        for row in overlap_table(label, D_tmd, D_feat):
            print("| {} | {:g}% | {} | {:.2f} | {:.4g} | {:.4g} |".format(row[0], 100 * row[1], *row[2:]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
