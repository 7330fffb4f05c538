r"""The GIN behind one tensor in, one tensor out: the form model servers (MLflow pyfunc) call, and that
``torch.export`` can trace (no data-dependent shapes).

:class:`~tmdlib.torch.gin.GIN` takes the three tensors of a PyG batch (``x``, ``edge_index``, ``batch``); a model
server passes one array.  :class:`DenseBatchGIN` runs a trained GIN on a *dense batch*: one float32 tensor of shape
``(B, n, 1 + d + n)``, one graph per leading index, padded to ``n`` nodes,

* ``[..., 0]``: 1 for a real node, 0 for padding;
* ``[..., 1:1 + d]``: the node features :math:`f^v`;
* ``[..., 1 + d:]``: the adjacency row of the node, :math:`A_{uv} = 1` for an edge ``u -> v`` (both directions
  of an undirected edge; zero diagonal).

Layer :math:`\ell` computes :math:`Z \leftarrow \phi^{(\ell)}(Z + \eta A^\top Z)` on each graph's ``(n, h)`` block
(the GIN's own MLPs), the readout sums (or averages) the real nodes and applies the GIN's output layer: the
same function as the GIN on the PyG batch, up to float32 summation order (a matrix product instead of a scatter).
The result is the GIN's output, shape ``(B, out_dim)``: logits for classification; for regression the predictions
de-standardised into the targets' own units (``target_scale``: :math:`z\sigma + \mu`).
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn
from torch_geometric.data import Data

from .gin import GIN

__all__ = ["DenseBatchGIN", "dense_batch", "export_example", "ARTIFACT_NAME"]

#: The name a logged :class:`DenseBatchGIN` carries in its MLflow run (``tasks.registry.log_gin_model``).
ARTIFACT_NAME = "gin"


def dense_batch(data: Sequence[Data], in_dim: int | None = None) -> torch.Tensor:
    r"""Pack PyG graphs into the dense batch ``(B, n, 1 + d + n)`` (float32) of :class:`DenseBatchGIN`.

    Parameters
    ----------
    data : sequence of ``Data``, length B
        Graphs with ``x`` (n_i, d) and ``edge_index`` (2, m_i).
    in_dim : int, optional
        ``d`` (default: ``data[0].x.shape[1]``).

    Returns
    -------
    Tensor, shape (B, max_i n_i, 1 + d + max_i n_i)
    """
    data = list(data)
    d = int(in_dim if in_dim is not None else data[0].x.shape[1])
    n = max([int(g.num_nodes) for g in data] + [1])
    out = torch.zeros(len(data), n, 1 + d + n, dtype=torch.float32)
    for b, g in enumerate(data):
        k = int(g.num_nodes)
        out[b, :k, 0] = 1.0
        out[b, :k, 1:1 + d] = g.x.to(torch.float32)
        if g.edge_index.numel():
            out[b, g.edge_index[0], 1 + d + g.edge_index[1]] = 1.0
    return out


def export_example(data: Sequence[Data], in_dim: int):
    """A dense batch (:func:`dense_batch`, as a NumPy array) of a few of the graphs ``data``, the largest first,
    shaped so that ``torch.export`` keeps every dimension dynamic: no size 1, and the batch size differs from the
    node count (3, else 2, else 4 graphs; 2 when none of those fits)."""
    picked = sorted(data, key=lambda g: -int(g.num_nodes))
    for b in (3, 2, 4):
        ex = dense_batch(picked[:b], in_dim)
        if len(set(ex.shape)) == 3 and min(ex.shape) > 1:
            return ex.numpy()
    return dense_batch(picked[:2], in_dim).numpy()


class DenseBatchGIN(nn.Module):
    """A trained :class:`GIN` called on a dense batch (see the module doc); ``.gin`` is the GIN itself.

    Parameters
    ----------
    gin : GIN
    target_scale : (array_like, array_like), optional
        ``(mean, std)`` of each target (regression trained on standardised targets): outputs become
        ``z * std + mean``.
    """

    def __init__(self, gin: GIN, target_scale=None):
        super().__init__()
        self.gin = gin
        self.in_dim = int(gin.config["in_dim"])
        out = int(gin.config.get("out_dim", 1))
        mean, std = (torch.zeros(out), torch.ones(out)) if target_scale is None else (
            torch.as_tensor(target_scale[0], dtype=torch.float32).reshape(out),
            torch.as_tensor(target_scale[1], dtype=torch.float32).reshape(out))
        self.rescale = target_scale is not None
        self.register_buffer("target_mean", mean)
        self.register_buffer("target_std", std)

    def forward(self, graphs: torch.Tensor) -> torch.Tensor:
        """Outputs, shape ``(B, out_dim)``, of the ``B`` graphs of a dense batch ``(B, n, 1 + d + n)``."""
        d = self.in_dim
        graphs = graphs.to(next(self.gin.parameters()).dtype)
        mask = graphs[:, :, :1]                                        # (B, n, 1)
        z = graphs[:, :, 1:1 + d] * mask                               # (B, n, d)
        adj = graphs[:, :, 1 + d:] * mask * mask.transpose(1, 2)       # (B, n, n), padding cut off
        for conv in self.gin.convs:
            z = conv.mlp(z + conv.eta * torch.matmul(adj.transpose(1, 2), z))
        z = z * mask                                                   # phi(0) != 0 with biases: drop padding
        pooled = z.sum(dim=1)
        if self.gin.pool == "mean":
            pooled = pooled / mask.sum(dim=1).clamp(min=1.0)
        out = self.gin.head(pooled)
        if self.rescale:
            out = out * self.target_std.to(out.dtype) + self.target_mean.to(out.dtype)
        return out
