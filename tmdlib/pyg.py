"""torch-geometric adapter, kept apart from the numpy core (like POT keeps ``ot.gnn``).

Importing :mod:`tmdlib` never imports torch; import this module explicitly.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch_geometric.data import Data

from .graph import Graph, GraphDataset

__all__ = ["to_pyg", "dataset_to_pyg", "from_pyg"]


def to_pyg(g: Graph, y: float | None = None, dtype: torch.dtype = torch.float32, **extra) -> Data:
    """Convert a :class:`~tmdlib.graph.Graph` to a PyG ``Data``.

    Parameters
    ----------
    g : Graph
        ``x`` of shape (n, d), ``edge_index`` of shape (2, m).
    y : float, optional
        Graph label stored as ``data.y`` of shape (1,).
    dtype : torch.dtype
        Feature dtype (float32 by default).
    **extra
        Further attributes set on the ``Data`` object (e.g. ``weight`` for τ).
    """
    data = Data(x=torch.as_tensor(g.x, dtype=dtype), edge_index=torch.as_tensor(g.edge_index, dtype=torch.long))
    data.num_nodes = g.num_nodes
    if y is not None and not np.isnan(y):
        data.y = torch.tensor([float(y)], dtype=dtype)
    for key, value in extra.items():
        setattr(data, key, value if torch.is_tensor(value) else torch.tensor([value]))
    return data


def dataset_to_pyg(ds: GraphDataset, y: Sequence[float] | None = None,
                   weights: Sequence[float] | None = None) -> list[Data]:
    """Convert every graph of a :class:`~tmdlib.graph.GraphDataset` to PyG ``Data``.

    Parameters
    ----------
    ds : GraphDataset
        ``G`` graphs.
    y : sequence of float, shape (G,), optional
        Labels to attach (``ds.y`` is *not* read unless passed explicitly, so
        label use stays visible at the call site).
    weights : sequence of float, shape (G,), optional
        Per-graph loss weights (e.g. cluster sizes τ), stored as ``data.weight``.
    """
    out = []
    for g in range(len(ds)):
        extra = {} if weights is None else {"weight": float(weights[g])}
        out.append(to_pyg(ds[g], None if y is None else float(y[g]), **extra))
    return out


def from_pyg(data: Data) -> Graph:
    """Convert a PyG ``Data`` (undirected, both directions stored) to a :class:`Graph`."""
    x = data.x.detach().cpu().numpy() if data.x is not None else np.ones((int(data.num_nodes), 1))
    return Graph(x.astype(np.float64), data.edge_index.detach().cpu().numpy())
