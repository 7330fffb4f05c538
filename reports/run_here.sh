#!/usr/bin/env bash
# The runs made for the committed reports, in the order they ran (2026-11-22 to 2026-11-25, 2-core
# CPU VM; dates, times and load in README.md, "Runs made").  Every call resumes: rows already in reports/results/full/<DATASET>.csv are
# skipped, so raising --trials only trains the new trials, and a killed call loses only its unfinished cells.
# `python -m flows.experiment` is `tmdsub experiment`.  Reports are written by the last line.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
EXP="$PY -m flows.experiment --profile full --no-report --workers 2"
# graph subsampling, paper GIN (B.2), 50 epochs: 5 trials on the three datasets, then 10
$EXP --datasets MUTAG,COX2,PROTEINS --kinds graph --archs gin --epochs 50 --trials 5
$EXP --datasets MUTAG,COX2,PROTEINS --kinds graph --archs gin --epochs 50 --trials 10
# node subsampling, paper GIN, 20 epochs, 3 trials
$EXP --datasets MUTAG --kinds node --archs gin --epochs 20 --trials 3
# alternative architecture (2x width, mean pooling), graph subsampling, 5 trials
$EXP --datasets MUTAG --kinds graph --archs gin-wide-mean --epochs 50 --trials 5
$EXP --datasets COX2 --kinds node --archs gin --epochs 20 --trials 3
# MUTAG graph subsampling with GIN to the paper's 20 trials
$EXP --datasets MUTAG --kinds graph --archs gin --epochs 50 --trials 20
$EXP --datasets COX2 --kinds graph --archs gin-wide-mean --epochs 50 --trials 5
$EXP --datasets COX2 --kinds graph --archs gin --epochs 50 --trials 20
# condensation baselines (DosCond, KiDD; with and without labels), GIN 50 epochs, 5 trials (2026-11-24/25, same VM)
$EXP --datasets MUTAG,COX2 --kinds graph --archs gin --epochs 50 --methods doscond,kidd,doscond-nolabel,kidd-nolabel --trials 5
$EXP --datasets PROTEINS --kinds graph --archs gin --epochs 50 --methods doscond,kidd,doscond-nolabel,kidd-nolabel --trials 5
# NCI1 (2026-11-25, idle VM): the four label-free methods, then the condensation baselines, 5 trials
$EXP --datasets NCI1 --kinds graph --archs gin --epochs 50 --trials 5
$EXP --datasets NCI1 --kinds graph --archs gin --epochs 50 --methods doscond,kidd,doscond-nolabel,kidd-nolabel --trials 5
# OGB (ROC-AUC, the paper's random 80/20 splits), 5 trials
$EXP --datasets ogbg-molbace --kinds graph --archs gin --epochs 50 --trials 5
$EXP --datasets ogbg-molbbbp --kinds graph --archs gin --epochs 50 --trials 5
# NCI1 to 10 trials (2026-11-25, 09:00-09:29 UTC, beside the orthogonal certified sweep)
$EXP --datasets NCI1 --kinds graph --archs gin --epochs 50 --trials 10
# OGB to 10 trials (2026-11-25, 10:26-10:53 UTC, idle VM)
$EXP --datasets ogbg-molbace --kinds graph --archs gin --epochs 50 --trials 10
$EXP --datasets ogbg-molbbbp --kinds graph --archs gin --epochs 50 --trials 10
# node subsampling on PROTEINS, 10 trials (2026-11-25, 12:23-13:06 UTC, nearly idle VM)
$EXP --datasets PROTEINS --kinds node --archs gin --epochs 20 --trials 10
# alternative architecture on PROTEINS, 5 trials (2026-11-25, 13:10-13:28 UTC; the PROTEINS TMD matrix
# was recomputed first, 273 s wall: this checkout's cache did not hold it)
$EXP --datasets PROTEINS --kinds graph --archs gin-wide-mean --epochs 50 --trials 5
# node subsampling on MUTAG and COX2 to 10 trials (2026-11-25, from 20:36 UTC, idle VM)
$EXP --datasets MUTAG --kinds node --archs gin --epochs 20 --trials 10
$EXP --datasets COX2 --kinds node --archs gin --epochs 20 --trials 10
# graph subsampling to the paper's 20 trials on OGB and PROTEINS (2026-11-25, idle VM)
$EXP --datasets ogbg-molbace --kinds graph --archs gin --epochs 50 --trials 20
$EXP --datasets ogbg-molbbbp --kinds graph --archs gin --epochs 50 --trials 20
$EXP --datasets PROTEINS --kinds graph --archs gin --epochs 50 --trials 20
# the alternative architecture on OGB and NCI1, 5 trials (2026-11-25, idle VM)
$EXP --datasets ogbg-molbace --kinds graph --archs gin-wide-mean --epochs 50 --trials 5
$EXP --datasets ogbg-molbbbp --kinds graph --archs gin-wide-mean --epochs 50 --trials 5
$EXP --datasets NCI1 --kinds graph --archs gin-wide-mean --epochs 50 --trials 5
# node subsampling on DD, 10 trials (2026-11-25 23:23 to 11-26 00:45 UTC, idle VM; trial 1 first, alone, to time it)
$EXP --datasets DD --kinds node --archs gin --epochs 20 --trials 10
# tables, plots, summary (trains nothing: every row is done)
$PY -m flows.experiment --profile full --report-only
