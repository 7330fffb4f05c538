r"""GIN models, τ-weighted training and the Lipschitz constant used by the loss guarantees (torch / PyG).

Kept apart from the numpy core: importing :mod:`tmdlib` never imports torch.  No files, no tracking:
the pipeline's tasks save models and log runs.

The stability inequality behind Lemma 3.2 / Corollaries 3.3 and 4.1 (Chuang & Jegelka 2022, Thm 8),

.. math:: \lVert h(G_a) - h(G_b) \rVert_2 \le c \cdot \mathrm{TMD}^{L}_w(G_a, G_b),
          \qquad c = \kappa(\eta, w)\, \lVert W_{out} \rVert_2 \prod_{\ell=1}^{L-1} \Phi_\ell ,

holds for the model below **exactly** (not only in expectation) under these conditions, all checked by
:func:`lipschitz_bound` (its ``valid`` flag):

1. **Sum aggregation with self weight 1 and neighbour weight** :math:`\eta`:
   :math:`z_v^{(\ell)} = \phi^{(\ell)}(z_v^{(\ell-1)} + \eta \sum_{u \in N(v)} z_u^{(\ell-1)})`.
   Unrolling :math:`L-1` layers, the root feature difference of a depth-:math:`d` node of the
   computation tree is reached along :math:`\binom{L-1}{d}` paths (choose which layers take the
   neighbour branch), each scaled by :math:`\eta^d`.  TMD weighs the same nodes by
   :math:`W_d = \prod_{t=1}^{d} w(L-t)` (the product of the ``d`` top level weights).  Hence
   :math:`\kappa(\eta, w) = \max_d \binom{L-1}{d}\eta^d / W_d`.  Pascal weights
   (:math:`w_l = l/(L-l)`, ``tmdlib.distance._weights.pascal_weights``) give :math:`W_d = \binom{L-1}{d}`
   exactly, so :math:`\kappa = \max(1, \eta^{L-1})`: **Pascal weights ⇔ η = 1** (PyG ``GINConv`` with
   ``eps = 0``); any η ≤ 1 keeps κ = 1, η > 1 needs weights scaled by η per level.
2. **φ(0) = 0**, i.e. no bias inside the message-passing MLPs.  TMD pads child multisets and graphs with
   blank trees (zero feature, no children); the bound needs the embedding of a blank tree to be 0.
   With biases a graph and the same graph plus an isolated zero-feature node have TMD 0 but different
   sum-pooled outputs.  The readout bias is harmless (it cancels in :math:`h(G_a) - h(G_b)`).
3. **Add pooling.**  Unnormalised TMD does not bound mean pooling across graphs of different sizes.
4. The TMD depth is ``layers + 1`` and its ground metric the L2 norm, so each layer's Lipschitz
   constant is bounded by spectral norms: :math:`\Phi_\ell = \lVert W_2^{(\ell)}\rVert_2
   \lVert W_1^{(\ell)}\rVert_2` (ReLU and MaxMin are 1-Lipschitz); a fixed readout scale :math:`s`
   (``GIN(scale=s)``) multiplies :math:`c`.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader
from torch_geometric.nn import global_add_pool, global_mean_pool

__all__ = ["GIN", "GINLayer", "TrainConfig", "TrainResult", "train_gin", "predict_logits", "predict_outputs",
           "per_graph_loss", "weighted_loss", "evaluate",
           "lipschitz_bound", "tmd_factor", "pick_device", "bce_losses", "weighted_bce", "model_config",
           "build_model", "alive_units", "MaxMin", "ACTIVATIONS"]


def pick_device(requested: str = "auto") -> torch.device:
    """``"auto"`` → CUDA when present, else CPU; otherwise the named device (``"cpu"``, ``"cuda:0"``)."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(requested)


class MaxMin(nn.Module):
    r"""GroupSort with groups of 2 (Anil et al. 2019): the features split in halves :math:`(a, b)` and
    :math:`(a, b) \mapsto (\max(a, b), \min(a, b))` elementwise.

    It permutes the coordinates of each pair, so it is **norm-preserving** (:math:`\lVert\sigma(x)\rVert_2 =
    \lVert x\rVert_2`), 1-Lipschitz in the L2 norm (sorting is a contraction) and :math:`\sigma(0) = 0`: it
    keeps every condition of the TMD stability bound while, unlike ReLU, it never throws away half of the
    signal.  With orthonormal weights a GIN layer then uses its whole Lipschitz budget (no gradient-norm
    attenuation).  Input shape ``(..., 2m)``, output the same.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] % 2:
            raise ValueError(f"MaxMin needs an even feature width, got {x.shape[-1]}")
        a, b = x.chunk(2, dim=-1)
        return torch.cat([torch.maximum(a, b), torch.minimum(a, b)], dim=-1)


#: Activations of the message-passing MLPs (both 1-Lipschitz in L2 with sigma(0) = 0).
ACTIVATIONS = {"relu": nn.ReLU, "maxmin": MaxMin}


def _activation(name: str) -> nn.Module:
    if name not in ACTIVATIONS:
        raise ValueError(f"act must be one of {sorted(ACTIVATIONS)}, got {name!r}")
    return ACTIVATIONS[name]()


class GINLayer(nn.Module):
    r""":math:`z_v \leftarrow \phi(z_v + \eta \sum_{u \in N(v)} z_u)` with :math:`\phi = \sigma\circ W_2 \circ
    \sigma \circ W_1` (:math:`\sigma` = ReLU, or :class:`MaxMin` for ``act="maxmin"``).

    ``edge_index`` holds both directions of each undirected edge; row 0 is the source.
    """

    def __init__(self, in_dim: int, out_dim: int, eta: float = 1.0, bias: bool = False, act: str = "relu"):
        super().__init__()
        self.eta = float(eta)
        self.mlp = nn.Sequential(nn.Linear(in_dim, out_dim, bias=bias), _activation(act),
                                 nn.Linear(out_dim, out_dim, bias=bias), _activation(act))

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        agg = torch.zeros_like(x).index_add_(0, edge_index[1], x[edge_index[0]])
        return self.mlp(x + self.eta * agg)


class GIN(nn.Module):
    r"""Graph Isomorphism Network in the paper's form (Jain et al. §2, B.2).

    For :math:`\ell = 1..\text{layers}`:
    :math:`z_v^{(\ell)} = \phi^{(\ell)}\big(z_v^{(\ell-1)} + \eta \sum_{u \in N(v)} z_u^{(\ell-1)}\big)`,
    :math:`\phi^{(\ell)} = \mathrm{ReLU} \circ W_2 \circ \mathrm{ReLU} \circ W_1`, then the readout
    :math:`h(G) = W_{out} \sum_v z_v^{(\text{layers})} + b_{out}` (a logit for BCE).  No batch norm, no dropout.

    Parameters
    ----------
    in_dim : int
        Node feature dimension ``d``.
    hidden : int
        Hidden width (128 for TU, 256 for OGB in the paper).
    layers : int
        Number of GIN layers (3, paired with TMD depth L = 4).
    out_dim : int
        1 for binary classification with BCE-with-logits.
    pool : {"add", "mean"}
        ``"add"`` (paper; required by the guarantee) or ``"mean"``.
    eta : float
        Neighbour weight η (1 = PyG ``GINConv`` with ``eps = 0``; pairs with Pascal TMD weights).
    bias : bool
        Biases inside the message-passing MLPs.  ``False`` (default) keeps φ(0) = 0, which the
        TMD bound needs; ``True`` is PyG's usual GIN, for which the bound is not guaranteed.
    act : {"relu", "maxmin"}
        Activation σ inside φ: ReLU (paper) or :class:`MaxMin` (norm-preserving; needs an even ``hidden``),
        the certified mode's ``"orthogonal"`` architecture (:mod:`tmdlib.torch.certified`).
    scale : float
        Fixed positive multiplier :math:`s` of the pooled embedding, :math:`h(G) = W_{out}(s \sum_v z_v) + b`
        (1 = the paper's GIN).  Not trained: certified mode puts its whole Lipschitz budget here, so
        :math:`c = s \prod \lVert W \rVert_2` with every weight matrix orthonormal.
    """

    def __init__(self, in_dim: int, hidden: int = 128, layers: int = 3, out_dim: int = 1, pool: str = "add",
                 eta: float = 1.0, bias: bool = False, act: str = "relu", scale: float = 1.0):
        super().__init__()
        if pool not in ("add", "mean"):
            raise ValueError(f"pool must be 'add' or 'mean', got {pool!r}")
        if layers < 1 or hidden < 1 or in_dim < 1:
            raise ValueError("in_dim, hidden and layers must be >= 1")
        if not (eta > 0 and math.isfinite(eta)):
            raise ValueError(f"eta must be a positive number, got {eta!r}")
        if not (scale > 0 and math.isfinite(scale)):
            raise ValueError(f"scale must be a positive number, got {scale!r}")
        if act == "maxmin" and hidden % 2:
            raise ValueError(f"act='maxmin' needs an even hidden width, got {hidden}")
        self.config = {"in_dim": int(in_dim), "hidden": int(hidden), "layers": int(layers),
                       "out_dim": int(out_dim), "pool": pool, "eta": float(eta), "bias": bool(bias),
                       "act": str(act), "scale": float(scale)}
        self.convs = nn.ModuleList(GINLayer(in_dim if k == 0 else hidden, hidden, eta, bias, act)
                                   for k in range(layers))
        self.out = nn.Linear(hidden, out_dim)
        self.pool = pool
        self.scale = float(scale)

    def head(self, pooled: torch.Tensor) -> torch.Tensor:
        r"""The readout :math:`W_{out}(s \cdot \text{pooled}) + b`, shape ``(num_graphs, out_dim)``."""
        return self.out(pooled if self.scale == 1.0 else pooled * self.scale)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor,
                num_graphs: int | None = None) -> torch.Tensor:
        """Graph-level outputs, shape ``(num_graphs, out_dim)`` (graphs without nodes get the bias only)."""
        for conv in self.convs:
            x = conv(x, edge_index)
        pool = global_add_pool if self.pool == "add" else global_mean_pool
        return self.head(pool(x, batch, num_graphs))


def model_config(model: GIN) -> dict:
    """The constructor arguments of ``model`` (JSON-serialisable)."""
    return dict(model.config)


def build_model(config: dict) -> GIN:
    """A fresh :class:`GIN` from :func:`model_config` output."""
    return GIN(**config)


def tmd_factor(eta: float, layers: int, weights="pascal") -> float:
    r""":math:`\kappa(\eta, w) = \max_{d=0..L-1} \binom{L-1}{d}\eta^d / W_d`, :math:`L` = ``layers + 1``.

    :math:`W_d = \prod_{t=1}^{d}` ``weights[L-1-t]`` is the TMD weight of depth-``d`` tree nodes
    (``weights[0]`` innermost level, as in :func:`tmdlib.distance._weights.resolve_weights`).  Equals 1 for
    Pascal weights and η ≤ 1; ``inf`` if some :math:`W_d = 0`.
    """
    from ..distance._weights import resolve_weights

    depth = int(layers) + 1
    w = resolve_weights(depth, weights)
    kappa, wd = 1.0, 1.0
    for d in range(1, depth):
        wd *= w[depth - 1 - d]
        need = math.comb(depth - 1, d) * float(eta) ** d
        kappa = max(kappa, math.inf if wd == 0 else need / wd)
    return kappa


def lipschitz_bound(model: GIN, M: float = 1.0, weights="pascal") -> dict:
    r"""Upper bound :math:`c = M \kappa(\eta, w) \lVert W_{out}\rVert_2 \prod_\ell \Phi_\ell` of the stability constant.

    Each GIN layer :math:`\phi^{(\ell)} = \mathrm{ReLU}\circ W_2\circ\mathrm{ReLU}\circ W_1` is
    :math:`\Phi_\ell = \lVert W_1\rVert_2 \lVert W_2\rVert_2`-Lipschitz (ReLU and MaxMin are 1-Lipschitz, biases
    cancel inside one layer); the readout is :math:`\lVert W_{out}\rVert_2`-Lipschitz; BCE-with-logits is
    :math:`M = 1`-Lipschitz in the logit (:math:`|\sigma(z) - y| < 1`).  Spectral norms are exact
    (largest singular value, float64).  :math:`\kappa` is :func:`tmd_factor` (1 for η = 1 and Pascal
    weights).

    Parameters
    ----------
    model : GIN
    M : float
        Lipschitz constant of the loss in the model output (1 for BCE-with-logits; 1 also gives the
        bound on the logits themselves).
    weights : "pascal", float or sequence
        TMD level weights the bound is stated for (depth ``layers + 1``).

    Returns
    -------
    dict
        ``per_layer`` (Φ_ℓ of each GIN layer, then the readout norm last), ``readout``, ``kappa``,
        ``M``, ``c``, ``valid`` (the conditions of the module docstring hold) and ``conditions``
        (which of them fail, empty when valid).
    """
    per_layer = []
    with torch.no_grad():
        for conv in model.convs:
            phi = 1.0
            for mod in conv.mlp:
                if isinstance(mod, nn.Linear):
                    phi *= float(torch.linalg.matrix_norm(mod.weight.detach().double().cpu(), ord=2))
            per_layer.append(phi)
        readout = float(torch.linalg.matrix_norm(model.out.weight.detach().double().cpu(), ord=2))
    readout *= float(model.config.get("scale", 1.0))  # h = W_out (s * pooled) + b
    per_layer.append(readout)
    cfg = model.config
    kappa = tmd_factor(cfg["eta"], cfg["layers"], weights)
    failing = []
    if cfg["pool"] != "add":
        failing.append("mean pooling: unnormalised TMD does not bound it across graph sizes")
    if cfg["bias"] and any(float(m.bias.detach().abs().max()) > 0 for conv in model.convs
                           for m in conv.mlp if isinstance(m, nn.Linear) and m.bias is not None):
        failing.append("non-zero biases in the message-passing MLPs: phi(0) != 0 breaks blank-tree padding")
    c = float(M) * kappa * float(np.prod(per_layer))
    return {"per_layer": per_layer, "readout": readout, "kappa": kappa, "M": float(M), "c": c,
            "valid": not failing, "conditions": failing}


@dataclass
class TrainConfig:
    """Hyper-parameters of paper B.2 (defaults for TU datasets), and the task's output width and loss.

    ``loss`` (:mod:`tmdlib.guarantees.losses`): ``"bce"`` (binary, ``out_dim`` 1; masked multi-task, ``out_dim``
    T), ``"ce"`` (multi-class, ``out_dim`` C), ``"huber"`` / ``"l1"`` / ``"mse"`` (regression on standardised
    targets, ``out_dim`` T; ``huber_delta`` is Huber's δ).
    """

    hidden: int = 128
    layers: int = 3
    pool: str = "add"
    eta: float = 1.0
    bias: bool = False
    act: str = "relu"
    scale: float = 1.0
    lr: float = 0.01
    batch_size: int = 16
    epochs: int = 100
    seed: int = 0
    device: str = "auto"
    out_dim: int = 1
    loss: str = "bce"
    huber_delta: float = 1.0

    def to_dict(self) -> dict:
        """Plain dict (for JSON)."""
        return asdict(self)


@dataclass
class TrainResult:
    """A trained model (on CPU), its per-epoch τ-weighted mean training loss and the device used."""

    model: GIN
    losses: list = field(default_factory=list)
    device: str = "cpu"


def weighted_bce(logits: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    r""":math:`\sum_i w_i\, \mathcal L(z_i; y_i)` with the BCE-with-logits loss :math:`\mathcal L`."""
    per = nn.functional.binary_cross_entropy_with_logits(logits.reshape(-1), y.reshape(-1).to(logits.dtype),
                                                         reduction="none")
    return (per * w.reshape(-1).to(per.dtype)).sum()


def per_graph_loss(out: torch.Tensor, y: torch.Tensor, loss: str = "bce", delta: float = 1.0) -> torch.Tensor:
    r"""Per-graph losses, shape ``(B,)``, of outputs ``(B, D)`` against labels (NaN = missing), the table of
    :mod:`tmdlib.guarantees.losses`: each graph averages over its observed targets; a graph with none scores 0.

    ``y``: ``(B,)`` (one target; class indices for ``"ce"``) or ``(B, T)``.
    """
    if loss == "ce":
        t = y.reshape(-1)
        obs = ~torch.isnan(t)
        per = nn.functional.cross_entropy(out, torch.where(obs, t, 0).long(), reduction="none")
        return per * obs.to(per.dtype)
    y = y.reshape(out.shape[0], -1).to(out.dtype)
    if y.shape[1] != out.shape[1]:
        raise ValueError(f"the model has {out.shape[1]} outputs, the labels {y.shape[1]} columns")
    obs = ~torch.isnan(y)
    yv = torch.where(obs, y, torch.zeros_like(y))
    if loss == "bce":
        per = nn.functional.binary_cross_entropy_with_logits(out, yv, reduction="none")
    elif loss == "l1":
        per = (out - yv).abs()
    elif loss == "mse":
        per = (out - yv) ** 2
    elif loss == "huber":
        per = nn.functional.huber_loss(out, yv, reduction="none", delta=float(delta))
    else:
        raise ValueError(f"unknown loss {loss!r}")
    w = obs.to(per.dtype)
    return (per * w).sum(dim=1) / w.sum(dim=1).clamp(min=1.0)


def weighted_loss(out: torch.Tensor, y: torch.Tensor, w: torch.Tensor, loss: str = "bce",
                  delta: float = 1.0) -> torch.Tensor:
    r""":math:`\sum_i w_i\,\mathcal L(z_i; y_i)` for any task loss; one-output BCE is exactly :func:`weighted_bce`."""
    if loss == "bce" and out.shape[-1] == 1 and y.dim() == 1:
        return weighted_bce(out, y, w)
    per = per_graph_loss(out, y, loss, delta)
    return (per * w.reshape(-1).to(per.dtype)).sum()


class CollatedGraphs:
    r"""Graphs concatenated once (on ``device``), batched by index with tensor ops: the batches PyG's ``DataLoader``
    would collate, bit for bit, without collating ``Data`` objects at every step.

    Graph ``g``'s nodes are rows ``node_ptr[g]:node_ptr[g + 1]`` of ``x`` and its edges columns
    ``edge_ptr[g]:edge_ptr[g + 1]`` of ``edge_index`` (local node ids).  :meth:`batch` of positions ``idx`` returns
    ``x`` rows in that order, ``edge_index`` shifted by each graph's node offset in the batch, the ``batch`` vector,
    ``y`` and ``weight`` (ones when the graphs have none) -- what ``Batch.from_data_list`` makes of the same graphs.
    """

    def __init__(self, data: Sequence[Data], device="cpu"):
        data = list(data)
        dev = torch.device(device)
        n = torch.tensor([int(g.num_nodes) for g in data], dtype=torch.long)
        m = torch.tensor([int(g.edge_index.shape[1]) for g in data], dtype=torch.long)
        self.count = len(data)
        # index arithmetic stays on the CPU (no device synchronisation per batch); the payload lives on ``device``
        self.nodes, self.edges = n, m
        self.node_ptr = torch.cat([torch.zeros(1, dtype=torch.long), n.cumsum(0)])
        self.edge_ptr = torch.cat([torch.zeros(1, dtype=torch.long), m.cumsum(0)])
        self.x = torch.cat([g.x for g in data]).to(dev)
        self.edge_index = torch.cat([g.edge_index for g in data], dim=1).to(dev)
        ys = [getattr(g, "y", None) for g in data]
        self.y = torch.cat(ys).to(dev) if all(v is not None for v in ys) else None
        self.weight = torch.cat([g.weight if getattr(g, "weight", None) is not None else torch.ones(1)
                                 for g in data]).to(dev) if any(getattr(g, "weight", None) is not None
                                                                for g in data) else None
        self.device = dev

    @staticmethod
    def _ranges(starts: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        total = int(counts.sum())
        if total == 0:
            return torch.zeros(0, dtype=torch.long)
        first = torch.repeat_interleave(starts - (counts.cumsum(0) - counts), counts)
        return first + torch.arange(total)

    def batch(self, idx) -> tuple:
        """``(x, edge_index, batch, num_graphs, y, weight)`` of the graphs at positions ``idx`` (in that order)."""
        idx = torch.as_tensor(idx, dtype=torch.long).cpu()
        nc, ec = self.nodes[idx], self.edges[idx]
        node_ids = self._ranges(self.node_ptr[idx], nc)
        edge_ids = self._ranges(self.edge_ptr[idx], ec)
        shift = torch.repeat_interleave(nc.cumsum(0) - nc, ec)
        b = torch.repeat_interleave(torch.arange(idx.numel()), nc)
        dev = self.device
        node_ids, edge_ids, shift, b, gi = (t.to(dev, non_blocking=True) for t in (node_ids, edge_ids, shift, b, idx))
        ei = self.edge_index[:, edge_ids] + shift
        y = None if self.y is None else self.y[gi]
        w = torch.ones(idx.numel(), device=dev) if self.weight is None else self.weight[gi]
        return self.x[node_ids], ei, b, int(idx.numel()), y, w


def _epoch_order(gen: torch.Generator, n: int) -> torch.Tensor:
    """The order in which ``DataLoader(data, shuffle=True, generator=gen)`` visits ``n`` graphs in one epoch, drawing
    from ``gen`` exactly as it does (so training repeats the runs made with it, bit for bit): the iterator's base seed
    (one int64), the sampler's permutation, and the permutation the exhausted sampler draws for its empty remainder."""
    torch.empty((), dtype=torch.int64).random_(generator=gen)
    order = torch.randperm(n, generator=gen)
    torch.randperm(n, generator=gen)
    return order


def _weights_of(batch, device) -> torch.Tensor:
    w = getattr(batch, "weight", None)
    return torch.ones(batch.num_graphs, device=device) if w is None else w.float()


def train_gin(data: Sequence[Data], cfg: TrainConfig, in_dim: int | None = None,
              post_step: Callable[[GIN], None] | None = None,
              on_epoch: Callable[[int, GIN], None] | None = None,
              on_loss: Callable[[int, float], None] | None = None) -> TrainResult:
    r"""Train a :class:`GIN` on the τ-weighted risk :math:`\sum_i \tau_i \mathcal L(h(G_i); y_i) / \sum_i \tau_i`
    (``cfg.loss``: BCE by default; :func:`per_graph_loss`).

    Parameters
    ----------
    data : sequence of ``Data``
        Training graphs with ``y`` (shape (1,): a binary label or a class index; or (1, T): T targets, NaN =
        missing) and optional ``weight`` (τ, shape (1,); 1 when absent).
    cfg : TrainConfig
    in_dim : int, optional
        Feature dimension (default: ``data[0].x.shape[1]``).
    post_step : callable, optional
        ``post_step(model)``, called once after initialisation and after every optimiser step (under
        ``torch.no_grad``), e.g. the projection of :mod:`tmdlib.torch.certified` onto a Lipschitz budget.
    on_epoch : callable, optional
        ``on_epoch(epoch, model)``, called after each epoch (0-based) with the model in eval mode on the
        training device, under ``torch.no_grad``; e.g. validation-based model selection (the condensation
        baselines' labelled variants, :mod:`tmdlib.torch.condense`).  It must not change the model.
    on_loss : callable, optional
        ``on_loss(epoch, loss)`` after every epoch (``loss`` = ``losses[epoch]``), e.g. to log the loss while
        training runs (the pipeline's MLflow run).

    Notes
    -----
    A step on a mini-batch ``B`` minimises :math:`\sum_{i\in B} \tau_i \mathcal L_i / (b\,\bar\tau)` with
    ``b = min(batch_size, n)`` and :math:`\bar\tau` the mean weight over the training set: a constant
    divisor, so each step's gradient is an unbiased estimate of the τ-weighted risk's (a weight 2 acts
    like a duplicated graph, a weight 0 like a removed one; with one full batch the step is the exact
    risk, identical to the duplicated / removed data set).  ``losses[e]`` is the τ-weighted mean loss
    over epoch ``e``'s batches.  Seeds fix the initialisation and the batch order; on CPU, runs with the
    same number of torch threads repeat bit for bit (summation order depends on the thread count).
    """
    data = list(data)
    if not data:
        raise ValueError("no training graphs")
    torch.manual_seed(cfg.seed)
    device = pick_device(cfg.device)
    d = int(in_dim if in_dim is not None else data[0].x.shape[1])
    model = GIN(d, cfg.hidden, cfg.layers, cfg.out_dim, cfg.pool, cfg.eta, cfg.bias, cfg.act, cfg.scale).to(device)
    if post_step is not None:
        with torch.no_grad():
            post_step(model)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(cfg.seed)
    graphs = CollatedGraphs(data, device)  # the batches PyG's shuffling DataLoader would make, without collating
    wsum_all = sum(float(getattr(g, "weight", torch.ones(1)).sum()) for g in data)
    if not wsum_all > 0:
        raise ValueError("the training weights sum to 0")
    scale = min(cfg.batch_size, len(data)) * wsum_all / len(data)
    losses = []
    for epoch in range(cfg.epochs):
        model.train()
        total = torch.zeros((), dtype=torch.float64, device=device)  # summed on the device: no sync per step
        order = _epoch_order(gen, len(data))
        for start in range(0, len(data), cfg.batch_size):
            x, ei, b, num_graphs, y, w = graphs.batch(order[start:start + cfg.batch_size])
            opt.zero_grad()
            loss = weighted_loss(model(x, ei, b, num_graphs), y, w, cfg.loss, cfg.huber_delta)
            (loss / scale).backward()
            opt.step()
            if post_step is not None:
                with torch.no_grad():
                    post_step(model)
            total += loss.detach().double()  # float64, in step order: what a Python float sum would give
        losses.append(float(total) / wsum_all)
        if on_epoch is not None:
            model.eval()
            with torch.no_grad():
                on_epoch(len(losses) - 1, model)
        if on_loss is not None:
            on_loss(len(losses) - 1, losses[-1])
    return TrainResult(model=model.cpu().eval(), losses=losses, device=str(device))


@torch.no_grad()
def alive_units(model: GIN, data: Sequence[Data], max_graphs: int = 2048, batch_size: int = 256) -> list[int]:
    r"""Hidden units of each GIN layer that are non-zero on at least one node of the first ``max_graphs`` graphs.

    A bias-free ReLU network (``bias=False``, which the TMD bound needs: :math:`\phi(0) = 0`) can *collapse*
    when a large learning rate drives every unit of a layer negative on all inputs: from there on every
    hidden state is 0, the output is the readout bias, the gradient of all weights below is 0 and training
    cannot recover (the loss stays at the entropy of the labels, e.g. :math:`\ln 2` for balanced classes).
    A 0 in the result means exactly that; lower the learning rate.

    Parameters
    ----------
    model : GIN
    data : sequence of ``Data``
        Graphs to probe (typically the training graphs).
    max_graphs : int
        Probe at most this many graphs (the first ones).

    Returns
    -------
    list of int, length ``model.config["layers"]``
        Count of units with a non-zero value on some probed node, per layer (each at most ``hidden``).
    """
    model.eval()
    param = next(model.parameters())
    alive = [torch.zeros(conv.mlp[2].out_features, dtype=torch.bool) for conv in model.convs]
    for batch in DataLoader(list(itertools.islice(data, max_graphs)), batch_size=batch_size, shuffle=False):
        batch = batch.to(param.device)
        x = batch.x.to(param.dtype)
        for k, conv in enumerate(model.convs):
            x = conv(x, batch.edge_index)
            alive[k] |= (x != 0).any(dim=0).cpu()
    return [int(a.sum()) for a in alive]


@torch.no_grad()
def predict_outputs(model: GIN, data: Sequence[Data], batch_size: int = 256, device: str = "cpu") -> np.ndarray:
    """Outputs :math:`h(G_i)` for each graph in order, shape ``(len(data), out_dim)`` (float64)."""
    z = predict_logits(model, data, batch_size, device)
    return z.reshape(len(z) // max(int(model.config["out_dim"]), 1) if len(z) else 0, int(model.config["out_dim"]))


@torch.no_grad()
def predict_logits(model: GIN, data: Sequence[Data], batch_size: int = 256, device: str = "cpu") -> np.ndarray:
    """Logits :math:`h(G_i)` for each graph in order, shape ``(len(data),)`` (float64); with several outputs the
    rows are concatenated (``(len(data) * out_dim,)``: use :func:`predict_outputs`).

    Runs on ``device`` (``"auto"`` allowed) in the model's dtype; the model is left on the CPU.
    """
    model.eval()
    dev = pick_device(device)
    model = model.to(dev)
    dtype = next(model.parameters()).dtype
    data = list(data)
    out = []
    if data:
        graphs = CollatedGraphs(data, dev)
        for start in range(0, len(data), batch_size):
            x, ei, b, num_graphs, _, _ = graphs.batch(torch.arange(start, min(start + batch_size, len(data))))
            z = model(x.to(dtype), ei, b, num_graphs)
            out.append(z.reshape(-1).double().cpu().numpy())
    model.cpu()
    return np.concatenate(out) if out else np.zeros(0)


def evaluate(logits: np.ndarray, y: np.ndarray, metric: str = "accuracy") -> float:
    """Accuracy (threshold 0 on the logit) or ROC-AUC (``"rocauc"``) of binary labels ``y`` in {0, 1}.

    NaN when there are no labels (or, for ROC-AUC, only one class).
    """
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if metric == "accuracy":
        return float(np.mean((z > 0).astype(np.float64) == y)) if y.size else float("nan")
    if metric == "rocauc":
        from sklearn.metrics import roc_auc_score

        return float(roc_auc_score(y, z)) if len(np.unique(y)) == 2 else float("nan")
    raise ValueError(f"unknown metric {metric!r}")


def bce_losses(logits: np.ndarray, y: np.ndarray) -> np.ndarray:
    r"""Per-graph BCE-with-logits losses :math:`\max(z,0) - zy + \log(1 + e^{-|z|})`, shape ``(n,)``."""
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    return np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))
