"""CPU seconds of one TMD coreset selection in the experiment, beside the condensation baselines' `select_seconds`.

    .venv/bin/python benchmarks/select_cost.py MUTAG COX2 [--trials 3]

For each dataset: the TMD matrix once (``tmd_matrix(ds, depth=4, weights="pascal")``, wall and CPU seconds of this
process), then, for trials 0..T-1 and fractions 1..10 %, the experiment's selection
(``tmdlib.experiment.protocol.select_graphs``: FasterPAM with its restarts on the training graphs' sub-matrix),
timed with ``time.process_time`` like the experiment's ``select_seconds``.  Prints one Markdown row per dataset.
Run it on an otherwise idle machine.
"""
from __future__ import annotations

import sys
import time

import numpy as np


def main(argv: list[str]) -> int:
    from tasks.experiment import load_dataset
    from tmdlib.distance import tmd_matrix
    from tmdlib.experiment._grid import TEST_FRACTION
    from tmdlib.experiment.protocol import select_graphs
    from tmdlib.select import train_test_split

    trials = 3
    if "--trials" in argv:
        i = argv.index("--trials")
        trials = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    print("| dataset | graphs | TMD matrix wall s | TMD matrix CPU s | selections | TMD select CPU s: mean | min | max |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in argv[1:]:
        ds = load_dataset(name, "data/raw")
        w0, c0 = time.perf_counter(), time.process_time()
        D = tmd_matrix(ds, 4, "pascal")
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        secs = []
        for t in range(trials):
            train, _ = train_test_split(len(D), TEST_FRACTION, t)
            Dt = D[np.ix_(train, train)]
            for i in range(1, 11):
                c = time.process_time()
                select_graphs(Dt, len(train), "tmd", round(0.01 * i, 2), t)
                secs.append(time.process_time() - c)
        print(f"| {name} | {len(ds)} | {wall:.1f} | {cpu:.1f} | {len(secs)} | {np.mean(secs):.4f} | "
              f"{np.min(secs):.4f} | {np.max(secs):.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
