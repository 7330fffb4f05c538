"""Which model for molecule classification? svm vs rf vs gin on the two shipped OGB classification sets (issue 53).

Each model is the registered one (:func:`tmdlib.models.get_model`), trained on the whole OGB scaffold train split
(the valid split is not used: no model here early-stops or tunes on it) and scored by ROC-AUC on the scaffold test
split, one trial (seed 0) unless ``--trials`` names more seeds.  svm / rf read the SMILES (ECFP4 counts, computed once per set); the GIN reads the
ingested graph store (``tmdlib.datasets.load_builtin`` = what ``tmdsub ingest ogbg-molbace`` writes).

    OMP_NUM_THREADS=1 taskset -c 0 .venv/bin/python benchmarks/ogb_classification_defaults.py \
        [--sets ogbg-molbace,ogbg-molbbbp] [--models svm,rf,gin] [--epochs 100] [--out reports/results/ogb_defaults.csv]

Rows are appended to ``--out`` (one per set and model; a rerun skips the rows already there).
"""
from __future__ import annotations

import argparse
import csv
import gzip
import time
from pathlib import Path

import numpy as np

RAW = Path("data/raw")
DIRS = {"ogbg-molbace": "ogbg_molbace", "ogbg-molbbbp": "ogbg_molbbbp"}
FIELDS = ["dataset", "model", "trial", "n_train", "n_test", "test_positive", "rocauc", "accuracy", "seconds",
          "options"]


def _split(name: str, part: str) -> np.ndarray:
    with gzip.open(RAW / DIRS[name] / "split" / "scaffold" / f"{part}.csv.gz", "rt") as fh:
        return np.array([int(line.split(",")[0]) for line in fh if line.strip()], dtype=np.int64)


def options(model: str, epochs: int, seed: int = 0) -> dict:
    if model == "gin":
        return {"recipe": "default", "epochs": int(epochs), "seed": int(seed), "device": "cpu"}
    if model == "rf":
        return {"seed": int(seed)}
    return {}  # svm: deterministic (Platt folds seeded 0 by default; ROC-AUC does not depend on them)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="ogbg-molbace,ogbg-molbbbp")
    ap.add_argument("--models", default="svm,rf,gin")
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--out", default="reports/results/ogb_defaults.csv")
    ap.add_argument("--trials", default="0", help="comma list of seeds (trial = seed); svm runs trial 0 only")
    a = ap.parse_args()

    import torch

    from tmdlib.chem import ecfp4_counts
    from tmdlib.datasets import load_builtin, to_dataset
    from tmdlib.datasets import table_task
    from tmdlib.metrics import score
    from tmdlib.models import Inputs, get_model

    torch.set_num_threads(1)
    out = Path(a.out)
    done = set()
    if out.is_file():
        with open(out, newline="") as fh:
            done = {(r["dataset"], r["model"], int(r["trial"])) for r in csv.DictReader(fh)}
    for name in a.sets.split(","):
        table = load_builtin(name, str(RAW))
        task = table_task(table)
        ds = to_dataset(table)
        smiles = table.column("smiles").to_pylist()
        y = np.asarray(ds.y, dtype=np.float64).reshape(len(ds))
        train, test = _split(name, "train"), _split(name, "test")
        counts = None
        for model, trial in [(m, int(t)) for t in a.trials.split(",") for m in a.models.split(",")]:
            if (name, model, trial) in done or (model == "svm" and trial != 0):
                continue
            if model != "gin" and counts is None:
                counts = ecfp4_counts(smiles)
            opts = options(model, a.epochs, trial)
            t0 = time.process_time()
            fitted = get_model(model).build(opts).fit(Inputs(ds, smiles, train, features=counts), y[train],
                                                      np.ones(len(train)), task)
            z = fitted.outputs(Inputs(ds, smiles, test, features=counts))
            sec = round(time.process_time() - t0, 1)
            s = score(z, y[test], task.type)
            row = {"dataset": name, "model": model, "trial": trial, "n_train": len(train), "n_test": len(test),
                   "test_positive": int(np.nansum(y[test])), "rocauc": round(s["rocauc"], 4),
                   "accuracy": round(s["accuracy"], 4), "seconds": sec,
                   "options": ";".join(f"{k}={v}" for k, v in opts.items())}
            new = not out.is_file()
            out.parent.mkdir(parents=True, exist_ok=True)
            with open(out, "a", newline="") as fh:
                w = csv.DictWriter(fh, FIELDS)
                if new:
                    w.writeheader()
                w.writerow(row)
            print(f"{name} {model} trial {trial}: ROC-AUC {row['rocauc']:.4f}, accuracy {row['accuracy']:.4f}, {sec} CPU s",
                  flush=True)


if __name__ == "__main__":
    main()
