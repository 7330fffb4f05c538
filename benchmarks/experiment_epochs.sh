#!/usr/bin/env bash
# Convergence check for the experiment's epoch count: TMD and Random coresets on MUTAG and COX2 (graph
# subsampling, GIN, every fraction, the first two trials) trained for 25, 100 and 200 epochs into
# reports/convergence/ (resumable; the distance matrices come from reports/cache/), then the table of
# benchmarks/experiment_epochs.py, which adds the committed 50-epoch rows of the same trials.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
for e in 25 100 200; do
  for d in MUTAG COX2; do
    $PY -m flows.experiment --profile full --no-report --workers 1 --out-dir reports/convergence \
      --cache-dir reports/cache --datasets "$d" --kinds graph --archs gin --methods tmd,random --trials 2 --epochs "$e"
  done
done
$PY benchmarks/experiment_epochs.py reports/convergence/results/full reports/results/full
