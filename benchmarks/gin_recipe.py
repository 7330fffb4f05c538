"""The GIN's training recipe settled by measurement (issue 51): the pipeline's old setting (``paper-b2``: Adam lr
0.01, batch 16) against the molecules benchmark's (``default``: lr 0.001, batch 64), same architecture, on a handful
of MoleculeACE sets (test RMSE / R², the authors' split) and two TU sets (test accuracy, seeded 80/20 split), each
trained on a uniform random 30 % of its training graphs (a coreset-sized budget; unit weights) through the one
recipe (:class:`tmdlib.torch.model.GINModel`), 3 seeds, 100 epochs, one thread.

    python benchmarks/gin_recipe.py [--seeds 3] [--fraction 0.3] > reports/results/gin_recipe.txt

Prints one row per (dataset, recipe, seed) and a mean per (dataset, recipe).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ACE = ("ACE-CHEMBL2835_Ki", "ACE-CHEMBL2047_EC50", "ACE-CHEMBL204_Ki", "ACE-CHEMBL1871_Ki")
TU = ("MUTAG", "PROTEINS")


def main() -> None:
    import torch

    from tasks.molecules import load_set
    from tmdlib.datasets import load_builtin, to_dataset
    from tmdlib.datasets import TaskSpec
    from tmdlib.metrics import score
    from tmdlib.models import Inputs, get_model
    from tmdlib.select import train_test_split

    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--fraction", type=float, default=0.3)
    ap.add_argument("--raw-root", default="data/raw")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    sets = []
    for name in ACE:
        s = load_set(name, args.raw_root)
        sets.append((name, s["ds"], s["y"], s["train"], s["test"], TaskSpec("regression"), "rmse"))
    for name in TU:
        ds = to_dataset(load_builtin(name, args.raw_root))
        train, test = train_test_split(len(ds), 0.2, seed=0)
        sets.append((name, ds, np.asarray(ds.y, dtype=float).reshape(len(ds)), train, test, TaskSpec("binary"),
                     "accuracy"))
    print("dataset,recipe,seed,k,metric,value,r2,seconds", flush=True)
    for name, ds, y, train, test, task, metric in sets:
        for seed in range(args.seeds):
            rng = np.random.default_rng(seed)
            pick = np.sort(rng.choice(train, size=int(np.ceil(args.fraction * len(train))), replace=False))
            for recipe in ("paper-b2", "default"):
                t0 = time.process_time()
                m = get_model("gin").build({"recipe": recipe, "dataset": name, "epochs": 100, "seed": seed}).fit(
                    Inputs(ds, positions=pick), y[pick], np.ones(len(pick)), task)
                s = score(m.outputs(Inputs(ds, positions=test)), y[test], task.type)
                rows.append((name, recipe, seed, s[metric], s.get("r2", float("nan"))))
                print(f"{name},{recipe},{seed},{len(pick)},{metric},{s[metric]:.4f},{s.get('r2', float('nan')):.4f},"
                      f"{time.process_time() - t0:.1f}", flush=True)
    print("\nmean over seeds: dataset, recipe, metric, value, r2")
    for name, *_rest in sets:
        for recipe in ("paper-b2", "default"):
            v = [r for r in rows if r[0] == name and r[1] == recipe]
            print(f"{name:22s} {recipe:9s} {np.mean([r[3] for r in v]):.4f}  r2 {np.nanmean([r[4] for r in v]):.3f}")


if __name__ == "__main__":
    main()
