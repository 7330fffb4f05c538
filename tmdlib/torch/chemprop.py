r"""chemprop's D-MPNN (the ``chemprop`` 2.x package: its featuriser, MPNN and lightning trainer) as an estimator.

:class:`ChempropRegressor` ``fit(smiles, y, sample_weight=None)`` / ``predict(smiles)`` trains the model of
chemprop's command line defaults: directed bond message passing (``BondMessagePassing``, hidden size 300, depth 3)
over RDKit graphs featurised by ``SimpleMoleculeMolGraphFeaturizer``, the ``NormAggregation`` readout
:math:`h = \frac{1}{100}\sum_v h_v`, a one-hidden-layer regression FFN, the mean squared error on standardised
targets, Adam with chemprop's Noam schedule (2 warm-up epochs, learning rate :math:`10^{-4} \to 10^{-3} \to
10^{-4}`), batches of 64, ``epochs`` epochs (50 as chemprop's CLI).

Targets are standardised as chemprop does (``MoleculeDataset.normalize_targets``: unweighted mean and standard
deviation of the training targets) and unscaled by the model's ``UnscaleTransform`` at prediction.  Per-datapoint
weights (a coreset's :math:`\tau`) go into chemprop's ``MoleculeDatapoint.weight``, which multiplies each row's
loss: the trained objective is :math:`\sum_i w_i (f(x_i) - z_i)^2 / n`; they are rescaled to mean 1 first so that
the loss keeps the scale chemprop's learning rates were tuned for (the minimiser does not change).

Weights are saved as a plain state dict: :meth:`ChempropRegressor.save` writes ``{"config": {...}, "state_dict":
{...}}`` of tensors, numbers and strings with ``torch.save``, and :meth:`ChempropRegressor.load` reads it back with
``torch.load(weights_only=True)`` and rebuilds the same network (no pickle of Python objects).

Imported explicitly (``import tmdlib.torch.chemprop``); the ``chemprop`` package is pinned in requirements.txt.
"""
from __future__ import annotations

import os

import numpy as np

from .._errors import InputError
from ..models._base import Model
from ..models._registry import ModelSpec

__all__ = ["ChempropRegressor", "ChempropModel", "CHEMPROP"]


def _smiles(smiles) -> list[str]:
    if isinstance(smiles, (str, bytes)):
        raise InputError(None, "expected a sequence of SMILES strings, got a single string")
    smiles = list(smiles)
    if not smiles:
        raise InputError(None, "no SMILES given")
    from rdkit import Chem, rdBase

    with rdBase.BlockLogs():
        for i, s in enumerate(smiles):
            if not isinstance(s, str) or not s.strip() or Chem.MolFromSmiles(s) is None:
                raise InputError(None, f"invalid SMILES {s!r} at position {i} (0-based): rdkit cannot parse it",
                                 line=i + 1)
    return smiles


class ChempropRegressor:
    r"""chemprop's D-MPNN for one regression target, trained with its own lightning trainer.

    Parameters
    ----------
    epochs : int, default 50
    hidden : int, default 300
        Message passing hidden size (``d_h``) and FFN hidden size.
    depth : int, default 3
        Message passing steps.
    dropout : float, default 0.0
    batch_size : int, default 64
    seed : int, default 0
        Seeds torch / lightning and the batch order.
    accelerator : str, default "auto"
        Lightning's accelerator: the GPU when one is present, else the CPU.

    Attributes
    ----------
    model_ : chemprop.models.MPNN
    y_mean_, y_scale_ : float
        The target standardisation (also inside the model's ``UnscaleTransform``).
    n_dropped_nan_ : int
    device_ : str
        Where it was trained (``"cpu"``, ``"cuda"``).
    """

    def __init__(self, epochs: int = 50, hidden: int = 300, depth: int = 3, dropout: float = 0.0,
                 batch_size: int = 64, seed: int = 0, accelerator: str = "auto"):
        self.epochs = epochs
        self.hidden = hidden
        self.depth = depth
        self.dropout = dropout
        self.batch_size = batch_size
        self.seed = seed
        self.accelerator = accelerator

    def _config(self) -> dict:
        return {"epochs": int(self.epochs), "hidden": int(self.hidden), "depth": int(self.depth),
                "dropout": float(self.dropout), "batch_size": int(self.batch_size), "seed": int(self.seed)}

    def _build(self, mean: float, scale: float):
        from chemprop import featurizers, models, nn

        featurizer = featurizers.SimpleMoleculeMolGraphFeaturizer()
        mp = nn.BondMessagePassing(d_v=featurizer.atom_fdim, d_e=featurizer.bond_fdim, d_h=int(self.hidden),
                                   depth=int(self.depth), dropout=float(self.dropout))
        transform = nn.UnscaleTransform(np.array([mean]), np.array([scale]))
        ffn = nn.RegressionFFN(input_dim=mp.output_dim, hidden_dim=int(self.hidden), dropout=float(self.dropout),
                               output_transform=transform)
        return featurizer, models.MPNN(mp, nn.NormAggregation(), ffn, batch_norm=False)

    def _trainer(self, epochs: int):
        from lightning import pytorch as pl

        return pl.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                          enable_model_summary=False, accelerator=self.accelerator, devices=1, max_epochs=epochs,
                          deterministic=True)

    def fit(self, smiles, y, sample_weight=None):
        """Train on SMILES and real targets, rows weighted by ``sample_weight``; NaN targets are dropped.

        Raises
        ------
        InputError
            Unparsable SMILES, mismatched shapes, infinite targets, negative / non-finite weights, nothing to fit.
        """
        import torch
        from chemprop import data
        from lightning import pytorch as pl

        smiles = _smiles(smiles)
        n = len(smiles)
        y = np.asarray(y, dtype=np.float64) if np.asarray(y).dtype.kind in "biuf" else None
        if y is None or y.shape != (n,):
            raise InputError(None, f"y must be {n} numbers (one per SMILES)")
        if np.isinf(y).any():
            raise InputError(None, f"target at position {int(np.flatnonzero(np.isinf(y))[0])} is infinite")
        w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        if w.shape != (n,) or not np.isfinite(w).all() or (w < 0).any():
            raise InputError(None, f"sample_weight must be {n} finite numbers >= 0")
        keep = ~np.isnan(y) & (w > 0)
        if not keep.any():
            raise InputError(None, "no row to fit: every target is missing (NaN) or weighted 0")
        self.n_dropped_nan_ = int(np.isnan(y).sum())
        idx = np.flatnonzero(keep)
        w = w[idx] / w[idx].mean()
        if int(self.epochs) < 1:
            raise InputError(None, f"epochs must be >= 1, got {self.epochs}")
        pl.seed_everything(int(self.seed), workers=True, verbose=False)
        points = [data.MoleculeDatapoint.from_smi(smiles[i], np.array([y[i]]), weight=float(wi))
                  for i, wi in zip(idx, w)]
        featurizer = self._build(0.0, 1.0)[0]
        dset = data.MoleculeDataset(points, featurizer)
        dset.cache = True  # featurised once, not in every epoch (the same graphs: only faster)
        scaler = dset.normalize_targets()
        self.y_mean_, self.y_scale_ = float(scaler.mean_[0]), float(scaler.scale_[0])
        _, self.model_ = self._build(self.y_mean_, self.y_scale_)
        loader = data.build_dataloader(dset, batch_size=int(self.batch_size), num_workers=0, seed=int(self.seed),
                                       shuffle=True)
        # deterministic training on a CUDA device needs cuBLAS's fixed workspace (else torch refuses the matmul);
        # read when the first cuBLAS handle is made, so set before training starts; the CPU ignores it
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        with torch.random.fork_rng():
            torch.manual_seed(int(self.seed))
            trainer = self._trainer(int(self.epochs))
            trainer.fit(self.model_, loader)
        self.device_ = str(trainer.strategy.root_device.type)
        return self

    def predict(self, smiles) -> np.ndarray:
        """Predicted targets (unscaled), shape (m,), float64."""
        import torch
        from chemprop import data

        if not hasattr(self, "model_"):
            raise InputError(None, "the model is not fitted")
        smiles = _smiles(smiles)
        featurizer = self._build(0.0, 1.0)[0]
        dset = data.MoleculeDataset([data.MoleculeDatapoint.from_smi(s) for s in smiles], featurizer)
        # drop_last=False: chemprop drops a last batch of one molecule by default (batch norm), losing its prediction
        loader = data.build_dataloader(dset, batch_size=max(int(self.batch_size), 256), num_workers=0,
                                       shuffle=False, drop_last=False)
        self.model_.eval()
        out = []
        with torch.inference_mode():
            for batch in loader:
                bmg, V_d, X_d, *_ = batch
                out.append(self.model_(bmg, V_d, X_d)[:, 0].double().cpu().numpy())
        return np.concatenate(out)

    def save(self, path: str | os.PathLike) -> None:
        """Write ``{"config", "y_mean", "y_scale", "state_dict"}`` (tensors, numbers, strings) with torch.save."""
        import torch

        if not hasattr(self, "model_"):
            raise InputError(None, "the model is not fitted")
        torch.save({"config": self._config(), "y_mean": self.y_mean_, "y_scale": self.y_scale_,
                    "n_dropped_nan": self.n_dropped_nan_,
                    "state_dict": {k: v.detach().cpu() for k, v in self.model_.state_dict().items()}}, path)

    @classmethod
    def load(cls, path: str | os.PathLike, accelerator: str = "auto") -> "ChempropRegressor":
        """The model :meth:`save` wrote, read with ``torch.load(weights_only=True)`` (no pickle of objects)."""
        import torch

        try:
            blob = torch.load(path, map_location="cpu", weights_only=True)
            m = cls(accelerator=accelerator, **{k: blob["config"][k] for k in
                                                ("epochs", "hidden", "depth", "dropout", "batch_size", "seed")})
            m.y_mean_, m.y_scale_ = float(blob["y_mean"]), float(blob["y_scale"])
            m.n_dropped_nan_ = int(blob["n_dropped_nan"])
            _, m.model_ = m._build(m.y_mean_, m.y_scale_)
            m.model_.load_state_dict(blob["state_dict"])
        except (KeyError, TypeError, RuntimeError) as e:
            raise InputError(str(path), f"not a chemprop state dict written by ChempropRegressor.save: {e}") from None
        m.model_.eval()
        return m


class ChempropModel(Model):
    """:class:`ChempropRegressor` as a registered model (:mod:`tmdlib.models`, name ``chemprop``): one regression
    target, trained on the members' SMILES with their weights; its weights saved as plain arrays."""

    name, inputs, tasks = "chemprop", "molecules", ("regression",)

    def __init__(self, **options):
        self.options = options
        self.reg = None
        self.head = None

    def fit(self, X, y, sample_weight=None, task=None):
        from ..datasets._task import TaskSpec
        from ..models._head import task_head

        task = task or TaskSpec("regression")
        if task.type not in self.tasks or task.num_targets != 1:
            raise InputError(None, f"model 'chemprop' takes one regression target, not {task.describe()}")
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        self.head = task_head(task, y=y, weights=sample_weight)
        self.reg = ChempropRegressor(**self.options).fit(X.smiles_at(), y, sample_weight)
        return self

    def outputs(self, X) -> np.ndarray:
        return self.reg.predict(X.smiles_at())[:, None]

    @property
    def device(self) -> str:
        """Where the network was trained (``"cpu"``, ``"cuda"``; ``"cpu"`` for a restored one)."""
        return getattr(self.reg, "device_", "cpu")

    def describe(self) -> dict:
        return {"options": self.reg._config() if self.reg is not None else self.options}

    def state(self) -> tuple[dict, dict]:
        arrays = {k: v.detach().cpu().numpy() for k, v in self.reg.model_.state_dict().items()}
        return ({"name": self.name, "config": self.reg._config(), "y_mean": self.reg.y_mean_,
                 "y_scale": self.reg.y_scale_, "head": self.head.to_dict()}, arrays)

    @classmethod
    def from_state(cls, config: dict, arrays: dict):
        import torch

        from ..models._head import TaskHead

        m = cls(**config["config"])
        reg = ChempropRegressor(**config["config"])
        reg.y_mean_, reg.y_scale_, reg.n_dropped_nan_ = float(config["y_mean"]), float(config["y_scale"]), 0
        _, reg.model_ = reg._build(reg.y_mean_, reg.y_scale_)
        reg.model_.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in arrays.items()})
        reg.model_.eval()
        m.reg, m.head = reg, TaskHead.from_dict(config["head"])
        return m


#: The registered model (:data:`tmdlib.models._registry.ENTRY_POINTS`).
CHEMPROP = ModelSpec("chemprop", make=lambda options: ChempropModel(**options), restore=ChempropModel.from_state,
                     inputs="molecules", tasks=("regression",), seeded=True, title="chemprop D-MPNN",
                     defaults={"epochs": 50}, quick={"epochs": 1, "hidden": 32, "accelerator": "cpu"},
                     summary="chemprop's D-MPNN (the chemprop package: its featuriser, trainer, target scaling)")
