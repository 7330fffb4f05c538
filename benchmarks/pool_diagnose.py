"""Why do medoids lose on some pools? Diagnostics of the pool benchmark's sets (issue 60, item 3).

For each prepared set (``benchmarks/pool_benchmark.py prepare``), on the pool less the audit sample, at a 10 % budget:

* ``singletons``: share of the TMD k-medoids' picks whose cluster holds only themselves (τ = 1);
* ``iso_tmd`` / ``iso_mix`` / ``iso_random``: mean isolation percentile of the picks (0 = the most central member,
  1 = the most isolated; isolation = TMD to the 5th nearest member), for k-medoids, tmd-mix and Random (0.5 expected);
* ``size_rho``: Spearman correlation of TMD with the difference in heavy-atom count over 20,000 random pairs (how much
  of the distance is size);
* ``nn_tanimoto``: median Tanimoto similarity of each molecule to its nearest neighbour on ECFP4 (a congeneric series
  is high);
* ``ratio_tmd`` / ``ratio_mix``: the benchmark's svm RMSE ratio to Random at 10 % (one shot), when its rows exist.

    .venv/bin/python benchmarks/pool_diagnose.py        # reports/results/pool/diagnosis.md
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _percentile_rank(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    r = np.empty(len(values))
    r[order] = np.arange(len(values)) / max(1, len(values) - 1)
    return r


def diagnose(name: str) -> dict:
    from scipy.stats import spearmanr

    import pool_benchmark as B
    from tmdlib.chem.models import minmax_kernel
    from tmdlib.experiment.pool import PoolCase
    from tmdlib.select import rounds
    from tmdlib.select import kmedoids_coreset

    d = B.load(name)
    case = PoolCase(name, d["y"], d["counts"], d["tmd"], d["smiles"], d["graph_ids"], d["task"])
    k = case.k(0.1)
    iso = _percentile_rank(rounds.isolation(case.D, 5))
    res = kmedoids_coreset(case.D, k, seed=0, restarts=5)
    mix = rounds.mixed_medoids(case.D, k, 0.5, 0)
    rng = np.random.default_rng(0)
    rand = [rng.choice(case.P, size=k, replace=False) for _ in range(10)]
    n_heavy = np.array([_heavy(s) for s in (case.smiles[i] for i in case.pool)], dtype=float)
    i, j = rng.integers(0, case.P, 20000), rng.integers(0, case.P, 20000)
    keep = i != j
    rho = float(spearmanr(case.D[i[keep], j[keep]], np.abs(n_heavy[i[keep]] - n_heavy[j[keep]])).statistic)
    K = minmax_kernel(case.counts[case.pool])
    np.fill_diagonal(K, -1.0)
    return {"set": name, "n": case.P, "k": k, "singletons": float((res.tau == 1).mean()),
            "iso_tmd": float(iso[res.medoids].mean()), "iso_mix": float(iso[mix].mean()),
            "iso_random": float(np.mean([iso[r].mean() for r in rand])), "size_rho": rho,
            "nn_tanimoto": float(np.median(K.max(axis=1))),
            "eps_mix_over_tmd": rounds.union_epsilon(case.D, mix) / rounds.union_epsilon(case.D, res.medoids)}


def _heavy(smiles: str) -> int:
    from rdkit import Chem

    m = Chem.MolFromSmiles(smiles)
    return 0 if m is None else m.GetNumHeavyAtoms()


def _ratios() -> dict:
    from tmdlib.experiment.pool import read_rows
    from tmdlib.reporting.pool import collect, set_ratios

    rows = [r for f in sorted((ROOT / "reports" / "results" / "pool").glob("*.csv")) if f.name != "control.csv"
            for r in read_rows(f)]
    ratios = set_ratios(collect(rows))
    return {lab: {d: v[0] for d, v in ratios.get(("svm", lab, "oneshot", 0.1), {}).items()}
            for lab in ("tmd", "tmd-mix")}


def main(argv=None) -> int:
    import argparse

    import pool_benchmark as B

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="*")
    a = ap.parse_args(argv)
    rat = _ratios()
    rows = []
    for name in a.sets or B.all_sets():
        if not (B.CACHE / f"{name}.npz").is_file():
            continue
        r = diagnose(name)
        r["ratio_tmd"] = rat["tmd"].get(name, float("nan"))
        r["ratio_mix"] = rat["tmd-mix"].get(name, float("nan"))
        rows.append(r)
        print(r, flush=True)
    cols = ["set", "n", "k", "singletons", "iso_tmd", "iso_mix", "iso_random", "size_rho", "nn_tanimoto",
            "eps_mix_over_tmd", "ratio_tmd", "ratio_mix"]
    lines = ["# Why medoids lose on some pools: diagnostics (benchmarks/pool_diagnose.py)", "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c]) for c in cols) + " |")
    from scipy.stats import spearmanr

    ok = [r for r in rows if np.isfinite(r["ratio_tmd"])]
    if len(ok) > 3:
        lines += [""] + [f"Spearman ρ across {len(ok)} sets between `ratio_tmd` and `{c}`: "
                         f"{spearmanr([r[c] for r in ok], [r['ratio_tmd'] for r in ok]).statistic:.2f}"
                         for c in ("singletons", "iso_tmd", "size_rho", "nn_tanimoto")]
    out = ROOT / "reports" / "results" / "pool" / "diagnosis.md"
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
