"""Which of the paper's graph-subsampling tables do our results match?  (The COX2 / PROTEINS caption question.)

    .venv/bin/python benchmarks/experiment_swap_check.py [reports/results/full]

For each of our datasets (graph subsampling, GIN) and each of the paper's TU tables, per method: the mean of
(our mean − the paper's mean) over the ten fractions and at how many fractions the two 95 % CIs overlap.
"""
import sys

from tmdlib.experiment import read_results
from tmdlib.reporting.paper import _tmd_gap, read_paper
from tmdlib.reporting.tables import aggregate


def main(argv):
    results = argv[1] if len(argv) > 1 else "reports/results/full"
    paper = read_paper("reports/paper_results.csv")
    print("| ours | paper table | method | mean diff | CIs overlap |")
    print("|---|---|---|---:|---:|")
    for ours in ["MUTAG", "COX2", "PROTEINS"]:
        rows = [r for r in read_results(f"{results}/{ours}.csv") if r["kind"] == "graph" and r["arch"] == "gin"]
        agg = aggregate(rows, by=("method", "fraction"))
        for table in ["MUTAG", "COX2", "PROTEINS"]:
            p = paper.get((table, "graph", "gin"), {})
            for m in ["tmd", "random", "feature", "wl"]:
                g = _tmd_gap({f: v for (mm, f), v in agg.items() if mm == m}, p.get(m, {}))
                print(f"| {ours} | {table} | {m} | {g['mean_diff']:+.3f} | {g['overlap']}/{g['n']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
