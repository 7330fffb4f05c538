#!/usr/bin/env bash
# MOSES as a pool without labels through the README's production walk, with the defaults, phase by phase.
#
#   bash benchmarks/north_star.sh [N_MOLECULES] [WORKSPACE]
#
# N_MOLECULES: the first N molecules of MOSES (0 = all 1,584,663, the default); WORKSPACE default /tmp/north-star.
# A fresh clone of this repository's HEAD; params.yaml as shipped except base.datasets = {MOSES: MOSES} and
# select.fraction = 0.01 (ingest.standin stays none: MOSES is stored without labels, a real pool).
# The walk: ingest, tmd, select, label_requests (the README's `dvc repro label_requests@POOL`), then the lab, then
# labels, nodes, train, train_nodes, evaluate, evaluate_nodes, predict, audit (the README's `dvc repro`), each stage
# run on its own (`dvc repro -s`) so its time is its own; a last `dvc status` shows nothing was left to run.
# The lab is played by a COMPUTED property: RDKit's Crippen logP of each requested molecule, in a column named
# crippen_logp_computed. It is not a measurement, and nothing here calls it one.
# Each phase's wall time, CPU time (the process tree's) and peak RSS (the process tree's, summed) go to
# WORKSPACE/phases.jsonl and are printed as a table at the end; then benchmarks/north_star_truth.py compares the pool
# estimate and the intervals with the computed property of 100,000 molecules nobody labelled.
set -euo pipefail
N=${1:-0}
WS=${2:-/tmp/north-star}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY="$ROOT/.venv/bin/python"
rm -rf "$WS"
git clone -q "$ROOT" "$WS"
ln -s "$ROOT/.venv" "$WS/.venv"
cd "$WS"
export PREFECT_LOGGING_LEVEL=WARNING DO_NOT_TRACK=1 DVC_NO_ANALYTICS=1 MLFLOW_DISABLE_TELEMETRY=true \
    POT_BACKEND_DISABLE_PYTORCH=1 PREFECT_HOME="$WS/.prefect" NUMBA_CACHE_DIR="$ROOT/.venv/numba-cache"
"$PY" - "$N" <<'PYEOF'
import sys
import yaml

p = yaml.safe_load(open("params.yaml"))
p["base"]["datasets"] = {"MOSES": "MOSES"}
p["ingest"]["limit"] = int(sys.argv[1])
p["select"]["fraction"] = 0.01
yaml.safe_dump(p, open("params.yaml", "w"), sort_keys=False)
PYEOF
git commit -qam "north star: MOSES as a pool, select.fraction 0.01"
LOG="$WS/phases.jsonl"
: > "$LOG"
phase() { "$PY" "$ROOT/benchmarks/phase_time.py" --name "$1" --log "$LOG" -- "${@:2}"; }
for s in ingest tmd select label_requests; do
    phase "$s" .venv/bin/dvc repro -s "$s@MOSES"
done
# The lab: a computed property of every requested molecule (coreset and audit sample; source_id is its SMILES),
# keyed by graph_id.
mkdir -p lab
phase lab "$PY" - <<'PYEOF'
import csv

from rdkit import Chem, RDLogger
from rdkit.Chem import Crippen

RDLogger.DisableLog("rdApp.*")
rows = list(csv.DictReader(open("data/labels/MOSES/label_requests.csv")))
with open("lab/round1.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["graph_id", "crippen_logp_computed"])
    for r in rows:
        w.writerow([r["graph_id"], f"{Crippen.MolLogP(Chem.MolFromSmiles(r['source_id'])):.4f}"])
print(f"lab: {len(rows)} requested molecules answered with RDKit's Crippen logP (computed, not measured)")
PYEOF
"$PY" - <<'PYEOF'
import yaml

p = yaml.safe_load(open("params.yaml"))
p["labels"]["source"] = "lab/round1.csv"
yaml.safe_dump(p, open("params.yaml", "w"), sort_keys=False)
PYEOF
for s in labels nodes train train_nodes evaluate evaluate_nodes predict audit; do
    phase "$s" .venv/bin/dvc repro -s "$s@MOSES"
done
.venv/bin/dvc status
"$PY" - "$LOG" <<'PYEOF'
import json
import sys

import pyarrow.parquet as pq

rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'phase':<16}{'wall s':>9}{'cpu s':>9}{'peak RSS GB':>13}")
for r in rows:
    print(f"{r['phase']:<16}{r['wall_s']:>9.1f}{r['cpu_s']:>9.1f}{r['peak_rss_gb']:>13.2f}")
print(f"{'total':<16}{sum(r['wall_s'] for r in rows):>9.1f}{sum(r['cpu_s'] for r in rows):>9.1f}"
      f"{max(r['peak_rss_gb'] for r in rows):>13.2f}")
n = pq.ParquetFile("data/predictions/MOSES/predictions.parquet").metadata.num_rows
sel = json.load(open("data/selection/MOSES/selection.json"))
print(f"predictions: {n} rows; selection: k {len(sel['medoids'])}, epsilon/n "
      f"{sel.get('epsilon_mean')}, exact pairs {sel.get('pairs_computed')}")
PYEOF
"$PY" "$ROOT/benchmarks/north_star_truth.py" "$WS"
