"""Convergence check for the experiment's epoch count (the paper does not state one).

    bash benchmarks/experiment_epochs.sh            # trains the extra cells (resumable), then runs this
    .venv/bin/python benchmarks/experiment_epochs.py [reports/convergence/results/full] [reports/results/full]

Graph subsampling, GIN of B.2, TMD and Random coresets at every fraction (1-10 %), the first two trials, trained for
25 / 50 / 100 / 200 epochs.  The 50-epoch rows are the committed results' own first two trials (same seeds, so the
same splits and coresets: only the training length differs); the others come from the convergence run.
Printed per (dataset, epochs): the mean test accuracy over fractions and trials per method, and the median
training loss of the last epoch (`final_loss`; the median, because tau-weighted losses of a few models are
large outliers).
"""
import statistics as st
import sys
from collections import defaultdict
from pathlib import Path

from tmdlib.experiment import read_results

METHODS = ("tmd", "random")
TRIALS = {0, 1}  # the first two trials (numbered from 0)


def main(argv):
    extra = Path(argv[1] if len(argv) > 1 else "reports/convergence/results/full")
    main_dir = Path(argv[2] if len(argv) > 2 else "reports/results/full")
    print("| dataset | epochs | models | TMD test acc | Random test acc | median final loss (TMD / Random) |")
    print("|---|---:|---:|---:|---:|---:|")
    for csv_path in sorted(extra.glob("*.csv")):
        name = csv_path.stem
        rows = read_results(str(csv_path)) + [
            r for r in read_results(str(main_dir / csv_path.name)) if int(r["epochs"]) == 50]
        cells = defaultdict(lambda: defaultdict(list))
        for r in rows:
            if (r["kind"] == "graph" and r["arch"] == "gin" and r["method"] in METHODS
                    and int(r["trial"]) in TRIALS):
                cells[int(r["epochs"])][r["method"]].append(r)
        for epochs in sorted(cells):
            by = cells[epochs]
            acc = {m: st.mean(float(r["value"]) for r in by[m]) for m in METHODS}
            loss = {m: st.median(float(r["final_loss"]) for r in by[m]) for m in METHODS}
            print(f"| {name} | {epochs} | {sum(len(v) for v in by.values())} | {acc['tmd']:.3f} | "
                  f"{acc['random']:.3f} | {loss['tmd']:.3f} / {loss['random']:.3f} |")


if __name__ == "__main__":
    main(sys.argv)
