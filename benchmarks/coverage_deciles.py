"""Conformal coverage and width per decile of similarity to the training set, old rule against new (issue 67, item 5).

Each source is a pool whose values are known: a MoleculeACE set (its measured labels) or a uniform sample of MOSES
with an RDKit property **computed** for every molecule (``MOSES:logp`` Crippen logP, ``MOSES:tpsa`` topological polar
surface area; computed, not measured).  The model (``svm``: the Tanimoto SVM, the default below 10,000 labels) is
trained on a uniform draw of ``--frac`` of the pool (or ``--train`` molecules; a stand-in for the coreset), the 90 %
intervals are calibrated on a uniform audit sample of ``--audit`` others, and every other molecule is predicted.
Rules (:data:`tmdlib.chem.domain.INTERVALS`, through :func:`tmdlib.chem.domain.calibrate_with_domain`, as the
predict stage calls it): ``normalised`` (issue 61: one quantile of |residual| / difficulty) and ``similarity-bins``
(the default since issue 67: a quantile per similarity bin, difficulty^p).  Printed per run: coverage in all, in and
out of domain, per decile of the predicted molecules' ``nn_similarity`` (d1 the least similar), the mean widths in
and out of domain, the bins' sizes; then the mean over runs::

    .venv/bin/python benchmarks/coverage_deciles.py --sources MOSES:logp MOSES:tpsa --n 50000 --seeds 0 1 2
    .venv/bin/python benchmarks/coverage_deciles.py --sources CHEMBL234_Ki CHEMBL214_Ki CHEMBL233_Ki CHEMBL244_Ki \\
        CHEMBL264_Ki CHEMBL204_Ki --train 300 --audit 150 --seeds 0 1 2

(mean widths are per source: a mean over sources would mix units).
"""
from __future__ import annotations

import argparse
import csv
import gzip
import os
import sys
import warnings
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RULES = ("normalised", "similarity-bins")


def load(source: str, n: int, seed: int) -> tuple[list, np.ndarray]:
    """``(smiles, values)`` of a source (module doc)."""
    if source.startswith("MOSES:"):
        from rdkit import Chem, RDLogger
        from rdkit.Chem import Crippen, rdMolDescriptors

        RDLogger.DisableLog("rdApp.*")
        prop = {"logp": Crippen.MolLogP, "tpsa": rdMolDescriptors.CalcTPSA}[source.split(":", 1)[1]]
        with gzip.open(ROOT / "data" / "raw" / "MOSES" / "train.csv.gz", "rt") as fh:
            lines = [s for s in fh.read().split("\n")[1:] if s]
        pick = np.sort(np.random.default_rng(1000 + seed).choice(len(lines), n, replace=False))
        smiles = [lines[i] for i in pick]
        return smiles, np.array([prop(Chem.MolFromSmiles(s)) for s in smiles])
    rows = list(csv.DictReader(open(ROOT / "data" / "raw" / "MoleculeACE" / f"{source}.csv", newline="")))
    return [r["smiles"] for r in rows], np.array([float(r["y"]) for r in rows])


def one(source: str, seed: int, a) -> dict:
    from tmdlib.chem.domain import calibrate_with_domain, outputs_with_domain
    from tmdlib.datasets import TaskSpec
    from tmdlib.models import Inputs, get_model

    smiles, y = load(source, a.n, seed)
    k = a.train or max(1, round(a.frac * len(smiles)))
    order = np.random.default_rng(seed).permutation(len(smiles))
    train, audit, rest = order[:k], order[k:k + a.audit], order[k + a.audit:]
    pick = lambda idx: [smiles[i] for i in idx]  # noqa: E731
    task = TaskSpec("regression")
    model = get_model(a.model).build().fit(Inputs(smiles=pick(train)), y[train], task=task)
    cal_out = model.outputs(Inputs(smiles=pick(audit)))
    row = {"source": source, "seed": seed, "pool": len(smiles), "train": k, "audit": a.audit, "rules": {}}
    for rule in RULES:
        cal, domain = calibrate_with_domain(pick(train), cal_out, pick(audit), y[audit], task, 0.9, intervals=rule)
        lo, hi, sim, inside = [], [], [], []
        for s in range(0, len(rest), 16384):
            out, dom = outputs_with_domain(model, domain, pick(rest[s:s + 16384]))
            p = cal.predict(out, sigmas=dom["sigma"], bins=dom["bin"])
            lo.append(p["lower"][:, 0]), hi.append(p["upper"][:, 0])
            sim.append(dom["nn_similarity"]), inside.append(dom["in_domain"])
        lo, hi, sim, inside = map(np.concatenate, (lo, hi, sim, inside))
        hit, width = (lo <= y[rest]) & (y[rest] <= hi), hi - lo
        decile = np.searchsorted(np.quantile(sim, np.linspace(0, 1, 11)[1:-1]), sim, side="right")
        desc = cal.describe(domain.edges)
        row["n_out"] = int((~inside).sum())
        row["rules"][rule] = {
            "all": hit.mean(), "in": hit[inside].mean(), "out": hit[~inside].mean() if (~inside).any() else np.nan,
            "deciles": [hit[decile == j].mean() for j in range(10)],
            "w_in": width[inside].mean(), "w_out": width[~inside].mean() if (~inside).any() else np.nan,
            "w_deciles": [width[decile == j].mean() for j in range(10)],
            "bins": [r["n_calibration"] for r in desc.get("bins", {}).get("y", [])],
            "power": (desc.get("difficulty_power") or [1.0])[0], "notes": desc.get("bin_notes", [])}
    return row


def line(name: str, r: dict) -> str:
    cells = [r["all"], r["in"], r["out"], *r["deciles"]]
    return (f"| {name} | " + " | ".join(f"{c:.3f}" for c in cells) + f" | {r['w_in']:.2f} / {r['w_out']:.2f} |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", nargs="+", default=["MOSES:logp", "MOSES:tpsa"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--n", type=int, default=50_000, help="MOSES molecules sampled as the pool")
    ap.add_argument("--frac", type=float, default=0.01, help="share of the pool trained on")
    ap.add_argument("--train", type=int, default=0, help="molecules trained on (overrides --frac)")
    ap.add_argument("--audit", type=int, default=200)
    ap.add_argument("--model", default="svm")
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore", message="the no. of calibration")
    head = ("| rule | all | in | out | " + " | ".join(f"d{j + 1}" for j in range(10)) + " | width in / out |\n"
            "|---|" + "---|" * 14)
    rows = []
    for source in a.sources:
        for seed in a.seeds:
            r = one(source, seed, a)
            rows.append(r)
            new = r["rules"]["similarity-bins"]
            print(f"\n{source} seed {seed}: pool {r['pool']:,}, trained {r['train']:,}, audit {r['audit']}, "
                  f"out of domain {r['n_out']:,}; bins' calibration members {new['bins']}, p = {new['power']:.2f}"
                  + (f"; {'; '.join(new['notes'])}" if new["notes"] else ""))
            print(head)
            for rule in RULES:
                print(line(rule, r["rules"][rule]), flush=True)
    groups = {src: [r for r in rows if r["source"] == src] for src in a.sources}
    if len(a.sources) > 1:
        groups["all sources"] = rows
    for src, group in groups.items():
        print(f"\nmean over {len(group)} runs of {src} (seeds {a.seeds}):")
        print(head)
        for rule in RULES:
            R = [r["rules"][rule] for r in group]
            mean = {k: np.nanmean([x[k] for x in R], axis=0) for k in ("all", "in", "out", "deciles", "w_in", "w_out")}
            low = np.mean([np.asarray(x["deciles"]) < 0.88 for x in R])
            print(line(rule, mean) + f" runs' lowest decile {np.mean([min(x['deciles']) for x in R]):.3f}; "
                  f"(run, decile) pairs below 0.88: {100 * low:.0f} %")
        if src != "all sources":
            print("mean width per decile (d1..d10):")
            for rule in RULES:
                w = np.mean([r["rules"][rule]["w_deciles"] for r in group], axis=0)
                print(f"| {rule} | " + " | ".join(f"{x:.2f}" for x in w) + " |")

if __name__ == "__main__":
    main()
