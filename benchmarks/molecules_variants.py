"""Why does the paper's TMD coreset fall short on some MoleculeACE sets, and which variant does better?

A random forest on ECFP4 counts (the molecules benchmark's, :data:`tmdlib.experiment.molecules.RF_CONFIG`) trained on
the molecules each variant picks from the train split, scored by test RMSE, over a few sets, budgets and seeds.  The
variants change one thing at a time:

* ``tmd``: the paper's coreset (k-medoids on TMD, depth 4, Pascal weights, τ-weighted) -- the reference;
* ``tmd-unweighted``: the same molecules, every one weight 1 (τ-weighting is the suspect for the forest);
* ``tmd-relative``: k-medoids on TMD / (TN(G_i) + TN(G_j)), the distance relative to the two molecules' sizes
  (TMD grows with size: big molecules are far from everything and become medoids of their own);
* ``tmd-depth3`` / ``tmd-depth2``: shallower computation trees (ECFP4 is radius 2: depth 3 covers the same
  neighbourhoods);
* ``tmd-bonds``: TMD on atom features extended with the counts of the atom's bond types (single / double / triple /
  aromatic), which the OGB atom features the store keeps do not hold.

Here only the test RMSE is compared; a variant adopted as a method would be certified in plain TMD (depth 4) like every
other picker (Lemma 3.2 holds for any assignment).

    python benchmarks/molecules_variants.py --sets ACE-CHEMBL234_Ki,ACE-CHEMBL262_Ki,... --trials 3
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = ("tmd", "tmd-unweighted", "tmd-relative", "tmd-depth3", "tmd-depth2", "tmd-bonds", "random", "fp-kmedoids")


def bond_features(ds, smiles):
    """Atom features + counts of single / double / triple / aromatic bonds at each atom (node order of the store)."""
    from rdkit import Chem

    rows = []
    for g, smi in enumerate(smiles):
        mol = Chem.MolFromSmiles(smi)
        a, b = ds.node_ptr[g], ds.node_ptr[g + 1]
        counts = np.zeros((b - a, 4))
        for bond in mol.GetBonds():
            t = {Chem.BondType.SINGLE: 0, Chem.BondType.DOUBLE: 1, Chem.BondType.TRIPLE: 2,
                 Chem.BondType.AROMATIC: 3}.get(bond.GetBondType())
            if t is None:
                continue
            for atom in (bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()):
                if atom < b - a:
                    counts[atom, t] += 1
        rows.append(counts)
    return np.concatenate([ds.x, np.concatenate(rows)], axis=1)


def main() -> None:
    from tasks.molecules import load_set
    from tmdlib import tmd_matrix, tree_norm
    from tmdlib.chem import ecfp4_counts
    from tmdlib.chem import fit_forest, predict
    from tmdlib.experiment.molecules import RF_CONFIG
    from tmdlib import GraphDataset
    from tmdlib.metrics import score
    from tmdlib.select import select_graphs

    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", required=True)
    ap.add_argument("--fractions", default="0.1,0.2,0.3")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "reports" / "molecules" / "variants.json"))
    a = ap.parse_args()
    results = json.loads(Path(a.out).read_text()) if Path(a.out).is_file() else {}
    for name in a.sets.split(","):
        t0 = time.process_time()
        s = load_set(name, str(ROOT / "data" / "raw"))
        ds, y, train, test = s["ds"], s["y"], s["train"], s["test"]
        pool = ds.take(train)
        smiles = [s["smiles"][int(p)] for p in train]
        counts = ecfp4_counts(s["smiles"])
        cache = ROOT / "reports" / "cache" / "molecules" / name
        D4 = np.load(cache / "tmd.npy") if (cache / "tmd.npy").is_file() else tmd_matrix(pool, 4, "pascal")
        tn = np.array([tree_norm(pool[i], 4) for i in range(len(pool))])
        mats = {"tmd": D4, "tmd-relative": D4 / np.maximum(tn[:, None] + tn[None, :], 1e-12),
                "tmd-depth3": tmd_matrix(pool, 3, "pascal"), "tmd-depth2": tmd_matrix(pool, 2, "pascal")}
        xb = bond_features(pool, smiles)
        pool_b = GraphDataset(x=xb, node_ptr=pool.node_ptr, edge_ptr=pool.edge_ptr, src=pool.src, dst=pool.dst,
                              graph_ids=pool.graph_ids)
        mats["tmd-bonds"] = tmd_matrix(pool_b, 4, "pascal")
        prep = time.process_time() - t0
        res = results.setdefault(name, {"prep_cpu_s": round(prep, 1)})
        for f in [float(x) for x in a.fractions.split(",")]:
            for v in VARIANTS:
                vals = []
                for trial in range(a.trials):
                    if v in ("random", "fp-kmedoids"):
                        sel = select_graphs(pool, v, fraction=f, seed=trial, matrix=D4, smiles=smiles)
                    else:
                        D = mats["tmd" if v == "tmd-unweighted" else v]
                        sel = select_graphs(D, "tmd", fraction=f, seed=trial)
                    w = np.ones(sel.k) if v in ("tmd-unweighted", "random") else sel.tau
                    pos = train[sel.positions]
                    rf = fit_forest(counts[pos], y[pos], sample_weight=w, seed=trial, **RF_CONFIG)
                    vals.append(score(predict(rf, counts[test]), y[test], "regression")["rmse"])
                res[f"{v}@{f}"] = float(np.mean(vals))
            print(name, f, {v: round(res[f"{v}@{f}"], 3) for v in VARIANTS}, flush=True)
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
