"""Conformal coverage in and out of the applicability domain on real pools whose labels are known (issue 61).

For each MoleculeACE set: the whole set is the pool, its measured labels the hidden truth; the Tanimoto SVM is trained
on a uniform draw (a stand-in for the coreset), the intervals calibrated on a uniform audit sample of the rest
(:func:`tmdlib.chem.domain.calibrate_with_domain`: the normalised split-conformal regression of the predict stage),
and every other molecule of the pool is predicted.  Reported: the share out of domain, the coverage and the mean
interval width in and out of domain, for the normalised intervals and for the plain ones (no difficulty)::

    .venv/bin/python benchmarks/domain_coverage.py --sets CHEMBL204_Ki CHEMBL214_Ki CHEMBL234_Ki --seeds 3
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def one(name: str, seed: int, n_train: int, n_audit: int, confidence: float) -> dict:
    from tmdlib.chem.domain import calibrate_with_domain
    from tmdlib.datasets import TaskSpec
    from tmdlib.models import Inputs, get_model
    from tmdlib.models.predict import calibrate

    rows = list(csv.DictReader(open(ROOT / "data" / "raw" / "MoleculeACE" / f"{name}.csv", newline="")))
    smiles, y = [r["smiles"] for r in rows], np.array([float(r["y"]) for r in rows])
    order = np.random.default_rng(seed).permutation(len(smiles))
    train, audit, rest = order[:n_train], order[n_train:n_train + n_audit], order[n_train + n_audit:]
    task = TaskSpec("regression")
    pick = lambda idx: [smiles[i] for i in idx]  # noqa: E731
    model = get_model("svm").build().fit(Inputs(smiles=pick(train)), y[train], task=task)
    cal_out = model.outputs(Inputs(smiles=pick(audit)))
    cal, domain = calibrate_with_domain(pick(train), cal_out, pick(audit), y[audit], task, confidence)
    plain = calibrate(cal_out, y[audit], task, confidence)
    out = model.outputs(Inputs(smiles=pick(rest)))
    dom = domain.columns(pick(rest))
    inside = np.asarray(dom["in_domain"], dtype=bool)
    row = {"set": name, "seed": seed, "pool": len(smiles), "train": n_train, "audit": n_audit,
           "threshold": domain.threshold, "out_share": float(1 - inside.mean()), "n_out": int((~inside).sum())}
    for kind, p in (("normalised", cal.predict(out, sigmas=dom["sigma"])), ("plain", plain.predict(out))):
        lo, hi = p["lower"][:, 0], p["upper"][:, 0]
        hit, width = (lo <= y[rest]) & (y[rest] <= hi), hi - lo
        for where, mask in (("in", inside), ("out", ~inside), ("all", np.ones_like(inside))):
            row[f"{kind}_cover_{where}"] = float(hit[mask].mean()) if mask.any() else float("nan")
            row[f"{kind}_width_{where}"] = float(width[mask].mean()) if mask.any() else float("nan")
    return row


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=["CHEMBL204_Ki", "CHEMBL214_Ki", "CHEMBL234_Ki"])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--train", type=int, default=300)
    ap.add_argument("--audit", type=int, default=150)
    ap.add_argument("--confidence", type=float, default=0.9)
    a = ap.parse_args(argv)
    rows = []
    print("| set | seed | out of domain | coverage in / out (normalised) | width in / out (normalised) | "
          "coverage in / out (plain) | width (plain) |")
    print("|---|---|---|---|---|---|---|")
    t0 = time.perf_counter()
    for name in a.sets:
        for seed in range(a.seeds):
            r = one(name, seed, a.train, a.audit, a.confidence)
            rows.append(r)
            print(f"| {name} | {seed} | {100 * r['out_share']:.1f} % ({r['n_out']}) | "
                  f"{r['normalised_cover_in']:.3f} / {r['normalised_cover_out']:.3f} | "
                  f"{r['normalised_width_in']:.2f} / {r['normalised_width_out']:.2f} | "
                  f"{r['plain_cover_in']:.3f} / {r['plain_cover_out']:.3f} | {r['plain_width_all']:.2f} |",
                  flush=True)
    for kind in ("normalised", "plain"):
        print(f"mean {kind}: coverage all {np.mean([r[f'{kind}_cover_all'] for r in rows]):.3f}, "
              f"in {np.mean([r[f'{kind}_cover_in'] for r in rows]):.3f}, "
              f"out {np.nanmean([r[f'{kind}_cover_out'] for r in rows]):.3f}; width in "
              f"{np.mean([r[f'{kind}_width_in'] for r in rows]):.2f}, out "
              f"{np.nanmean([r[f'{kind}_width_out'] for r in rows]):.2f}")
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
