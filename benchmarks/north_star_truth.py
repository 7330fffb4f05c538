"""How the MOSES walk's estimate and intervals held, against the computed property the lab played.

    python benchmarks/north_star_truth.py WORKSPACE [--sample 100000]

The lab of benchmarks/north_star.sh answered with RDKit's Crippen logP, a property computed for every molecule (not
a measurement), so the pool's own values are known: this computes it for a uniform sample of the molecules nobody
labelled (seeded) and prints the RMSE of their predictions beside the pool estimate of metrics.json, and the
coverage of the prediction intervals in and out of the applicability domain.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from rdkit import Chem, RDLogger
from rdkit.Chem import Crippen


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workspace")
    ap.add_argument("--sample", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    RDLogger.DisableLog("rdApp.*")
    ws = Path(a.workspace)
    t = pq.read_table(ws / "data/predictions/MOSES/predictions.parquet",
                      columns=["smiles", "prediction", "lower", "upper", "in_domain", "labelled"])
    rest = np.flatnonzero(~t.column("labelled").to_numpy(zero_copy_only=False))
    pick = np.sort(np.random.default_rng(a.seed).choice(rest, min(a.sample, rest.size), replace=False))
    t = t.take(pick)
    y = np.array([Crippen.MolLogP(Chem.MolFromSmiles(s)) for s in t.column("smiles").to_pylist()])
    pred, lo, hi = (t.column(c).to_numpy() for c in ("prediction", "lower", "upper"))
    inside = t.column("in_domain").to_numpy(zero_copy_only=False).astype(bool)
    covered = (lo <= y) & (y <= hi)
    est = json.loads((ws / "data/metrics/MOSES/metrics.json").read_text())["pool_estimate"]
    print(f"pool estimate (audit sample of {est['n_audit']}): {est['metric']} {est['value']:.3f} "
          f"[{est['ci_low']:.3f}, {est['ci_high']:.3f}] at {est['confidence']:.0%}")
    print(f"measured on {len(y):,} unlabelled molecules (computed Crippen logP): rmse "
          f"{np.sqrt(np.mean((pred - y) ** 2)):.3f}; constant (their mean) {np.std(y):.3f}")
    for name, m in (("all", np.ones_like(inside)), ("in domain", inside), ("out of domain", ~inside)):
        if m.any():
            print(f"  {name:<14} {int(m.sum()):>7,} molecules: rmse {np.sqrt(np.mean((pred[m] - y[m]) ** 2)):.3f}, "
                  f"90 % intervals covered {covered[m].mean():.3f}, mean width {np.mean(hi[m] - lo[m]):.2f}")


if __name__ == "__main__":
    main()
