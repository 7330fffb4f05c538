"""A TMD coreset of a PyG dataset in one call, then a τ-weighted GIN on it: classification, then regression.

    .venv/bin/python examples/pyg_coreset.py [--fraction 0.1] [--epochs 50] [--molecules 300]

**Classification.** MUTAG is loaded through PyG's own ``TUDataset``, built from the raw files shipped in
``data/raw/MUTAG`` (copied to ``<tmp>/MUTAG/raw/``, so nothing is downloaded).  The held-out test split is made first:
the coreset is chosen among the training graphs only, without reading a label; only the chosen graphs' labels are
then used for training.

**Regression.** The first ``--molecules`` molecules of MoleculeACE's CHEMBL2835 (Ki) set (``data/raw/MoleculeACE``)
become PyG ``Data`` (the project's SMILES reader: OGB atom features one-hot, 174 wide; ``y`` = the measured value,
``smiles`` kept), split by the set's own ``split`` column.  The same call, ``select_coreset(train, fraction=...)``,
picks the molecules to measure -- still label-free -- and a GIN regressor is trained on their labels with the
τ-weighted Huber loss; then the same with ``method="maxmin"`` (the chemists' MaxMin picker on ECFP4, SMILES from
``data.smiles``; it weighs every pick 1) for comparison.  Test RMSE in the units of ``y``.
"""
from __future__ import annotations

import argparse
import math
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch_geometric.datasets import TUDataset
from torch_geometric.loader import DataLoader

from tmdlib.torch.certified import stability_constant
from tmdlib.torch.gin import GIN, evaluate, predict_logits
from tmdlib.torch.pyg import dataset_to_pyg, select_coreset

DATA = Path(__file__).resolve().parents[1] / "data" / "raw"
RAW = DATA / "MUTAG"
ACE = DATA / "MoleculeACE" / "CHEMBL2835_Ki.csv"


def train_on_coreset(model: GIN, coreset, per_graph_loss, epochs: int, shift: float = 0.0) -> None:
    """Adam on the coreset's graphs with the τ-weighted loss (Lemma 3.2's estimator of the mean loss over all n)."""
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    loader = DataLoader(coreset.subset(), batch_size=16, shuffle=True)  # the selected graphs, `weight` = τ
    for epoch in range(epochs):
        total = 0.0
        for batch in loader:
            opt.zero_grad()
            out = model(batch.x, batch.edge_index, batch.batch, batch.num_graphs).view(-1)
            per_graph = per_graph_loss(out, batch.y.to(out.dtype) - shift)
            loss = (per_graph * batch.weight).sum() / coreset.weights.sum()  # ≈ mean loss over all n graphs
            loss.backward()
            opt.step()
            total += float(loss.detach())
        if epoch % 10 == 0 or epoch == epochs - 1:
            print(f"epoch {epoch:3d}  tau-weighted training loss {total:.4f}")


def classification(args) -> None:
    with tempfile.TemporaryDirectory() as root:
        shutil.copytree(RAW, Path(root) / "MUTAG" / "raw")
        dataset = TUDataset(root, name="MUTAG")  # PyG reads the TU files itself
        perm = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(args.seed))
        n_test = len(dataset) // 5
        train, test = dataset[perm[n_test:]], dataset[perm[:n_test]]

        # --- the one call: which graphs to label, how much each stands for, and the certificate ---------------
        coreset = select_coreset(train, fraction=args.fraction, depth=4, weights="pascal", seed=args.seed)
        print(coreset)
        print(f"label these {coreset.k} of {coreset.n} training graphs (positions in `train`): "
              f"{coreset.indices.tolist()}")
        print(f"weights tau (sum {coreset.weights.sum():.0f}): {coreset.weights.tolist()}")

        # --- train a GIN on the coreset with the tau-weighted loss (Lemma 3.2's estimator) ----------------------
        torch.manual_seed(args.seed)
        model = GIN(dataset.num_features, hidden=64, layers=3)  # 3 layers pair with TMD depth 4
        bce = torch.nn.BCEWithLogitsLoss(reduction="none")  # per-graph losses, weighted by tau
        train_on_coreset(model, coreset, bce, args.epochs)

        acc = evaluate(predict_logits(model, list(test)), test.y.numpy(), "accuracy")
        c = stability_constant(model)["c"]
        print(f"test accuracy {acc:.3f} on {len(test)} held-out graphs, trained on {coreset.k} labels")
        print(f"Lemma 3.2: |coreset loss - full training loss| <= c * eps = {c:.4g} * {coreset.epsilon_mean:.4g} "
              f"= {c * coreset.epsilon_mean:.4g}  (eps = sum of TMDs to the medoids / n)")


def molecules(limit: int) -> tuple[list, list]:
    """``(train, test)`` PyG ``Data`` of the first ``limit`` molecules of CHEMBL2835 (``y`` = measured, ``smiles``)."""
    from tmdlib.datasets import read_smiles_csv, to_dataset

    table = read_smiles_csv(ACE, label_column="y", split_column="split", limit=limit)
    y = np.asarray(table.column("y").to_numpy(zero_copy_only=False), dtype=np.float64)
    data = dataset_to_pyg(to_dataset(table), y=y, dtype=torch.float64)  # x: (atoms, 174) one-hot, y: (1,)
    for d, smiles in zip(data, table.column("smiles").to_pylist()):
        d.smiles = smiles  # what the chemists' pickers read
    split = table.column("split").to_pylist()
    return [d for d, s in zip(data, split) if s == "train"], [d for d, s in zip(data, split) if s != "train"]


def regression(args) -> None:
    train, test = molecules(args.molecules)
    y_test = np.array([float(d.y) for d in test])
    print(f"\nregression: {len(train)} training and {len(test)} test molecules of {ACE.name} (y = measured value)")
    for method in ("tmd", "maxmin"):
        # --- the same one call, label-free: `y` is never read (method="maxmin" reads `data.smiles`) -----------
        coreset = select_coreset(train, fraction=args.fraction, method=method, seed=args.seed)
        print(f"[{method}] {coreset}; weights sum {coreset.weights.sum():.0f}")
        sub = coreset.subset()
        w = coreset.weights.numpy()
        y_sel = np.array([float(d.y) for d in sub])
        mean = float((w * y_sel).sum() / w.sum())  # labels centred on the coreset's weighted mean

        torch.manual_seed(args.seed)
        model = GIN(train[0].num_features, hidden=64, layers=3).double()  # float64: the same RMSE on every run
        huber = torch.nn.HuberLoss(reduction="none", delta=1.0)  # per-graph losses, weighted by tau
        train_on_coreset(model, coreset, huber, args.epochs, shift=mean)

        rmse = math.sqrt(float(np.mean((predict_logits(model, test) + mean - y_test) ** 2)))
        rmse0 = math.sqrt(float(np.mean((mean - y_test) ** 2)))
        print(f"[{method}] test RMSE {rmse:.3f} on {len(test)} held-out molecules, trained on {coreset.k} labels "
              f"(predicting the weighted mean: {rmse0:.3f}); TMD eps of the picks {coreset.epsilon_mean:.4g}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fraction", type=float, default=0.1, help="share of the training graphs to label")
    ap.add_argument("--epochs", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--molecules", type=int, default=300, help="molecules of CHEMBL2835 read (regression part)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    classification(args)
    regression(args)


if __name__ == "__main__":
    main()
