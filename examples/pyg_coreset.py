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
τ-weighted Huber loss on standardised targets (the one training recipe of the pipeline, ``tmdlib.torch.fit.train_on``); then the same with ``method="maxmin"`` (the chemists' MaxMin picker on ECFP4, SMILES from
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

from tmdlib.datasets._task import TaskSpec
from tmdlib.torch.certified import stability_constant
from tmdlib.torch.gin import evaluate, predict_logits
from tmdlib.torch.pyg import dataset_to_pyg, select_coreset

DATA = Path(__file__).resolve().parents[1] / "data" / "raw"
RAW = DATA / "MUTAG"
ACE = DATA / "MoleculeACE" / "CHEMBL2835_Ki.csv"


def train_on_coreset(coreset, task, epochs: int, seed: int):
    """The τ-weighted training of Lemma 3.2's estimator through the one recipe every tmdsub model trains with
    (:func:`tmdlib.torch.fit.train_on`, the ``default`` recipe: Adam lr 0.001, batches of 64; the loss and target
    standardisation from the task's head).  Returns ``(model, head)``; ``head.to_task_units`` turns the model's
    outputs into logits / values in the targets' units."""
    from tmdlib.models import task_head, training_labels
    from tmdlib.torch.fit import train_on
    from tmdlib.torch.model import recipe_config

    sub = coreset.subset()  # the selected graphs, each with `weight` = τ
    y = np.array([float(d.y) for d in sub])
    head = task_head(task, y=y, weights=coreset.weights.numpy())
    for d, label in zip(sub, training_labels(head, y).reshape(len(sub), -1)):
        d.y = torch.tensor(label[:1] if task.single_label else label, dtype=torch.float64)
    res = train_on(list(sub), recipe_config("default", hidden=64, epochs=epochs, seed=seed),
                   head, in_dim=sub[0].num_features)
    losses = res.losses
    for epoch in range(0, len(losses), 10):
        print(f"epoch {epoch:3d}  tau-weighted training loss {losses[epoch]:.4f}")
    if losses:
        print(f"epoch {len(losses) - 1:3d}  tau-weighted training loss {losses[-1]:.4f}")
    return res.model, head


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
        model, head = train_on_coreset(coreset, TaskSpec("binary"), args.epochs, args.seed)
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
    data = dataset_to_pyg(to_dataset(table), y=y)  # x: (atoms, 174) one-hot, y: (1,)
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
        w = coreset.weights.numpy()
        y_sel = np.array([float(d.y) for d in coreset.subset()])
        mean = float((w * y_sel).sum() / w.sum())  # the coreset's weighted mean: the constant predictor
        model, head = train_on_coreset(coreset, TaskSpec("regression"), args.epochs, args.seed)
        pred = head.to_task_units(predict_logits(model, test).reshape(-1, 1))[:, 0]
        rmse = math.sqrt(float(np.mean((pred - y_test) ** 2)))
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
