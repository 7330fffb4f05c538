"""GIN models, training and the Lipschitz bound used by the loss guarantee (torch / PyG).

Kept apart from the numpy core: importing :mod:`tmdlib` never imports torch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
from torch import nn
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GINConv, global_add_pool, global_mean_pool

__all__ = ["GIN", "TrainConfig", "TrainResult", "train_gin", "predict_logits", "evaluate", "lipschitz_bound",
           "pick_device"]


def pick_device(requested: str = "auto") -> torch.device:
    """``"auto"`` → CUDA when present, else CPU; otherwise the named device."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(requested)


class GIN(nn.Module):
    r"""Graph Isomorphism Network in the paper's form (Jain et al. §2, B.2).

    For :math:`\ell = 1..\text{layers}`:
    :math:`z_v^{(\ell)} = \phi^{(\ell)}\big(z_v^{(\ell-1)} + \eta \sum_{u \in N(v)} z_u^{(\ell-1)}\big)`
    with :math:`\phi^{(\ell)} = \mathrm{ReLU} \circ W_2 \circ \mathrm{ReLU} \circ W_1` (PyG ``GINConv``, ε = 0,
    η = 1), then readout :math:`h(G) = W_{out} \sum_v z_v^{(L-1)}` (``pool="add"``; ``"mean"`` for the
    paper's alternative architecture).  No batch norm, no dropout.

    Parameters
    ----------
    in_dim : int
        Node feature dimension ``d``.
    hidden : int
        Hidden width (128 for TU, 256 for OGB in the paper).
    layers : int
        Number of GIN layers (3 pairs with TMD depth L = 4).
    out_dim : int
        1 for binary classification with BCE-with-logits.
    pool : {"add", "mean"}
    """

    def __init__(self, in_dim: int, hidden: int = 128, layers: int = 3, out_dim: int = 1, pool: str = "add"):
        super().__init__()
        self.convs = nn.ModuleList()
        for k in range(layers):
            mlp = nn.Sequential(nn.Linear(in_dim if k == 0 else hidden, hidden), nn.ReLU(),
                                nn.Linear(hidden, hidden), nn.ReLU())
            self.convs.append(GINConv(mlp, eps=0.0, train_eps=False))
        self.out = nn.Linear(hidden, out_dim)
        if pool not in ("add", "mean"):
            raise ValueError(f"pool must be 'add' or 'mean', got {pool!r}")
        self.pool = global_add_pool if pool == "add" else global_mean_pool

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
        """Graph-level outputs, shape ``(num_graphs, out_dim)``."""
        for conv in self.convs:
            x = conv(x, edge_index)
        return self.out(self.pool(x, batch))


def lipschitz_bound(model: GIN, loss_lipschitz: float = 1.0) -> dict:
    r"""Upper bound :math:`c = M \prod_\ell \Phi_\ell` of the network's Lipschitz constant.

    Each GIN layer :math:`\phi^{(\ell)} = \mathrm{ReLU}\circ W_2\circ\mathrm{ReLU}\circ W_1` is bounded by
    :math:`\Phi_\ell = \lVert W_1\rVert_2 \lVert W_2\rVert_2` (ReLU is 1-Lipschitz, biases cancel in
    differences); the readout by :math:`\lVert W_{out}\rVert_2`; BCE-with-logits is
    :math:`M = 1`-Lipschitz in the logit.  Spectral norms are exact (largest singular value).

    Returns
    -------
    dict
        ``per_layer`` (list of Φ_ℓ, readout last), ``M`` and ``c``.
    """
    per_layer = []
    with torch.no_grad():
        for conv in model.convs:
            phi = 1.0
            for mod in conv.nn:
                if isinstance(mod, nn.Linear):
                    phi *= float(torch.linalg.matrix_norm(mod.weight.double(), ord=2))
            per_layer.append(phi)
        per_layer.append(float(torch.linalg.matrix_norm(model.out.weight.double(), ord=2)))
    c = loss_lipschitz * float(np.prod(per_layer))
    return {"per_layer": per_layer, "M": loss_lipschitz, "c": c}


@dataclass
class TrainConfig:
    """Hyper-parameters of paper B.2 (defaults for TU datasets)."""

    hidden: int = 128
    layers: int = 3
    pool: str = "add"
    lr: float = 0.01
    batch_size: int = 16
    epochs: int = 100
    seed: int = 0
    device: str = "auto"


@dataclass
class TrainResult:
    """A trained model and its per-epoch weighted training loss."""

    model: GIN
    losses: list = field(default_factory=list)
    device: str = "cpu"


def _weighted_bce(logits: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    per = nn.functional.binary_cross_entropy_with_logits(logits.view(-1), y.view(-1), reduction="none")
    return (per * w.view(-1)).sum()


def train_gin(data: Sequence[Data], cfg: TrainConfig) -> TrainResult:
    r"""Train a :class:`GIN` with the τ-weighted BCE loss :math:`\sum_{i} \tau_i \mathcal L(h(G_i); y_i)`.

    Parameters
    ----------
    data : sequence of ``Data``
        Training graphs with ``y`` (shape (1,)) and optional ``weight`` (τ; 1 when absent).
    cfg : TrainConfig

    Notes
    -----
    Each step minimises the batch's weighted loss divided by the batch's total weight, so the
    effective objective is the τ-weighted empirical risk of Corollary 3.3.
    """
    torch.manual_seed(cfg.seed)
    device = pick_device(cfg.device)
    in_dim = data[0].x.shape[1]
    model = GIN(in_dim, cfg.hidden, cfg.layers, 1, cfg.pool).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(cfg.seed)
    loader = DataLoader(list(data), batch_size=cfg.batch_size, shuffle=True, generator=gen)
    losses = []
    for _ in range(cfg.epochs):
        model.train()
        total, wsum = 0.0, 0.0
        for batch in loader:
            batch = batch.to(device)
            w = batch.weight.float() if hasattr(batch, "weight") and batch.weight is not None else torch.ones(batch.num_graphs, device=device)
            opt.zero_grad()
            loss = _weighted_bce(model(batch.x, batch.edge_index, batch.batch), batch.y.float(), w)
            (loss / w.sum()).backward()
            opt.step()
            total += float(loss)
            wsum += float(w.sum())
        losses.append(total / max(wsum, 1e-12))
    return TrainResult(model=model.cpu(), losses=losses, device=str(device))


@torch.no_grad()
def predict_logits(model: GIN, data: Sequence[Data], batch_size: int = 256) -> np.ndarray:
    """Logits :math:`h(G_i)` for each graph, shape ``(len(data),)``."""
    model.eval()
    out = []
    for batch in DataLoader(list(data), batch_size=batch_size, shuffle=False):
        out.append(model(batch.x, batch.edge_index, batch.batch).view(-1).double().numpy())
    return np.concatenate(out) if out else np.zeros(0)


def evaluate(logits: np.ndarray, y: np.ndarray, metric: str = "accuracy") -> float:
    """Accuracy (threshold 0 on the logit) or ROC-AUC of binary labels ``y`` in {0, 1}."""
    y = np.asarray(y, dtype=np.float64)
    if metric == "accuracy":
        return float(np.mean((logits > 0).astype(np.float64) == y)) if y.size else float("nan")
    if metric == "rocauc":
        from sklearn.metrics import roc_auc_score

        return float(roc_auc_score(y, logits)) if len(np.unique(y)) == 2 else float("nan")
    raise ValueError(f"unknown metric {metric!r}")


def bce_losses(logits: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-graph BCE-with-logits losses, shape ``(n,)`` (numerically stable)."""
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    return np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))
