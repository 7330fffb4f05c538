"""A TMD coreset of a PyG dataset in one call, then a τ-weighted GIN on it.

    .venv/bin/python examples/pyg_coreset.py [--fraction 0.1] [--epochs 50]

MUTAG is loaded through PyG's own ``TUDataset``, built from the raw files shipped in ``data/raw/MUTAG`` (copied to
``<tmp>/MUTAG/raw/``, so nothing is downloaded).  The held-out test split is made first: the coreset is chosen among
the training graphs only, without reading a label; only the chosen graphs' labels are then used for training.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import torch
from torch_geometric.datasets import TUDataset
from torch_geometric.loader import DataLoader

from tmdlib.torch.certified import stability_constant
from tmdlib.torch.gin import GIN, evaluate, predict_logits
from tmdlib.torch.pyg import select_coreset

RAW = Path(__file__).resolve().parents[1] / "data" / "raw" / "MUTAG"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fraction", type=float, default=0.1, help="share of the training graphs to label")
    ap.add_argument("--epochs", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)

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
        subset = coreset.subset()  # PyG dataset of the selected graphs, each with `weight` = tau
        torch.manual_seed(args.seed)
        model = GIN(dataset.num_features, hidden=64, layers=3)  # 3 layers pair with TMD depth 4
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        loader = DataLoader(subset, batch_size=16, shuffle=True)
        for epoch in range(args.epochs):
            total = 0.0
            for batch in loader:
                opt.zero_grad()
                logits = model(batch.x, batch.edge_index, batch.batch, batch.num_graphs).view(-1)
                per_graph = torch.nn.functional.binary_cross_entropy_with_logits(
                    logits, batch.y.float(), reduction="none")
                loss = (per_graph * batch.weight).sum() / coreset.weights.sum()  # ≈ mean loss over all n graphs
                loss.backward()
                opt.step()
                total += float(loss.detach())
            if epoch % 10 == 0 or epoch == args.epochs - 1:
                print(f"epoch {epoch:3d}  tau-weighted training loss {total:.4f}")

        acc = evaluate(predict_logits(model, list(test)), test.y.numpy(), "accuracy")
        c = stability_constant(model)["c"]
        print(f"test accuracy {acc:.3f} on {len(test)} held-out graphs, trained on {coreset.k} labels")
        print(f"Lemma 3.2: |coreset loss - full training loss| <= c * eps = {c:.4g} * {coreset.epsilon_mean:.4g} "
              f"= {c * coreset.epsilon_mean:.4g}  (eps = sum of TMDs to the medoids / n)")


if __name__ == "__main__":
    main()
