r"""What the two condensation baselines share: the result type, budget sizing, initialisation, the
discrete-structure relaxation and a dense-adjacency forward pass of the GIN of paper B.2.

A synthetic graph is a pair :math:`(X, \Omega)` with node features :math:`X \in \mathbb R^{N \times d}`
and edge logits :math:`\Omega \in \mathbb R^{N \times N}`; its edge probabilities are
:math:`P = \sigma\big((\Omega + \Omega^\top)/2\big)` off the diagonal (no self-loops), and the graph the
GIN is finally trained on is the **discrete** one, :math:`A_{uv} = [P_{uv} > 1/2] = [\Omega_{uv} +
\Omega_{vu} > 0]` (both methods threshold at 1/2 after condensation).  During condensation a relaxed
sample is used (binary concrete / Gumbel-sigmoid, one logistic noise per unordered pair, temperature
annealed geometrically from ``t_start`` to ``t_end`` over ``anneal_steps`` steps):

.. math:: \tilde A_{uv} = \sigma\Big(\frac{(\Omega_{uv} + \Omega_{vu})/2 + \log U_{uv} - \log(1 - U_{uv})}{t}\Big),
          \qquad U_{uv} = U_{vu} \sim \mathcal U(0, 1).

Every synthetic graph has exactly ``N`` nodes.  Rows that were padding at initialisation (the source graph
had fewer than ``N`` nodes) start with zero features and no edges; the GIN of B.2 (no bias inside the
message-passing MLPs, add pooling) maps such a node to exactly zero, so it changes nothing unless the
condensation gives it features or edges.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch_geometric.data import Data

from ..._graph import GraphDataset
from ..gin import GIN

__all__ = ["Condensed", "class_budget", "synthetic_nodes", "pick_sources", "dense_from_graphs",
           "relaxed_structure", "discrete_structure", "temperature", "dense_gin_forward", "to_data",
           "without_labels", "gin_fields", "check_budget"]

GIN_FIELDS = ("hidden", "layers", "pool", "eta", "bias")


@dataclass
class Condensed:
    """A synthetic training set.

    Attributes
    ----------
    graphs : list of Data, length k
        ``x`` (N, d) float32, ``edge_index`` (2, m) int64 (both directions, no self-loops),
        ``weight`` (1,) = 1 and, when labels were given, ``y`` (1,) = the class the graph was made for.
        Without labels there is no ``y``: the caller attaches the label of ``source[i]`` (one label per
        synthetic graph, the same label budget k as every selection method).
    source : ndarray of int64, shape (k,)
        Position (in the training set passed in) of the real graph synthetic graph ``i`` was initialised from.
    seconds : float
        CPU seconds (``time.process_time``) of the condensation, initialisation included.
    method : str
    uses_labels : bool
    num_nodes : int
        ``N``, the node count of every synthetic graph.
    losses : list of float
        Condensation objective per step.
    """

    graphs: list
    source: np.ndarray
    seconds: float
    method: str
    uses_labels: bool
    num_nodes: int
    losses: list = field(default_factory=list)


def gin_fields(gin: dict | None) -> dict:
    """The GIN constructor fields (hidden, layers, pool, eta, bias) of a ``TrainConfig``-like dict."""
    base = {"hidden": 128, "layers": 3, "pool": "add", "eta": 1.0, "bias": False}
    base.update({k: v for k, v in (gin or {}).items() if k in GIN_FIELDS})
    return base


def without_labels(ds: GraphDataset) -> GraphDataset:
    """``ds`` with ``y`` removed (the label-free variants never see labels, not even by accident)."""
    return ds.replace(y=None)


def resolve_options(method: str, defaults: dict, options: dict) -> dict:
    """``defaults`` overridden by ``options``; an unknown option name is a ``ValueError`` naming ``method``."""
    unknown = set(options) - set(defaults)
    if unknown:
        raise ValueError(f"unknown {method} options {sorted(unknown)}")
    return {**defaults, **options}


def check_budget(ds: GraphDataset, k: int, labels) -> np.ndarray | None:
    """Validate ``k`` and ``labels``; return the labels as int64 (0/1) or None."""
    n = len(ds)
    if not 1 <= int(k) <= n:
        raise ValueError(f"budget k must be in [1, {n}] (the number of training graphs), got {k}")
    if labels is None:
        return None
    y = np.asarray(labels, dtype=np.float64)
    if y.shape != (n,):
        raise ValueError(f"labels must have shape ({n},), got {y.shape}")
    if not np.all(np.isin(y, (0.0, 1.0))):
        raise ValueError("labels must be binary (0/1) and present for every training graph")
    return y.astype(np.int64)


def class_budget(y: np.ndarray, k: int, scheme: str) -> dict[int, int]:
    r"""Synthetic graphs per class for a budget of ``k`` graphs in total.

    ``"proportional"`` (DosCond): classes in increasing size; every class but the largest gets
    :math:`\max(1, \lfloor n_c k / n \rfloor)`, the largest the rest (so the total is exactly ``k``).
    ``"balanced"`` (KiDD, graphs per class): :math:`\lfloor k / C \rfloor` each, the remainder one by one
    to the largest classes.  When ``k`` is smaller than the number of classes, the ``k`` largest classes
    get one graph each (ties: smaller class id first).
    """
    classes, counts = np.unique(y, return_counts=True)
    order = sorted(range(len(classes)), key=lambda i: (counts[i], -classes[i]))  # increasing size
    out = {int(c): 0 for c in classes}
    if k < len(classes):
        for i in order[::-1][:k]:
            out[int(classes[i])] = 1
        return out
    if scheme == "proportional":
        n = int(counts.sum())
        used = 0
        for i in order[:-1]:
            out[int(classes[i])] = max(1, int(counts[i] * k // n))
            used += out[int(classes[i])]
        out[int(classes[order[-1]])] = k - used
    elif scheme == "balanced":
        base, rest = divmod(k, len(classes))
        for i in order:
            out[int(classes[i])] = base
        for i in order[::-1][:rest]:
            out[int(classes[i])] += 1
    else:
        raise ValueError(f"unknown scheme {scheme!r}")
    # a class cannot receive more graphs than it has (sources are distinct real graphs)
    for i in range(len(classes)):
        if out[int(classes[i])] > counts[i]:
            raise ValueError(f"class {int(classes[i])} has {counts[i]} graphs, fewer than its share "
                             f"{out[int(classes[i])]} of the budget {k}")
    return out


def synthetic_nodes(ds: GraphDataset, multiplier: float) -> int:
    """``N = max(1, round(multiplier * mean node count of the training graphs))``."""
    return max(1, int(round(float(multiplier) * float(ds.nodes_per_graph.mean()))))


def pick_sources(n: int, k: int, y: np.ndarray | None, scheme: str,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
    """Real graphs the synthetic ones start from, and their classes.

    With labels: ``class_budget(y, k, scheme)`` graphs drawn uniformly without replacement inside each
    class (class-dependent initialisation; KiDD's ``Random`` option, DosCond's ``real`` one).  Without
    labels: ``k`` graphs drawn uniformly without replacement from all ``n`` (the paper's label-free
    variant: random initialisation instead of per class).  Returns ``(source, classes or None)``.
    """
    if y is None:
        return np.sort(rng.choice(n, size=k, replace=False)).astype(np.int64), None
    src, cls = [], []
    for c, kc in sorted(class_budget(y, k, scheme).items()):
        if kc:
            pos = np.flatnonzero(y == c)
            src.append(np.sort(rng.choice(pos, size=kc, replace=False)))
            cls.append(np.full(kc, c, dtype=np.int64))
    return np.concatenate(src).astype(np.int64), np.concatenate(cls)


def dense_from_graphs(ds: GraphDataset, positions: np.ndarray, n_nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Dense features ``(P, N, d)`` and 0/1 adjacency ``(P, N, N)`` (float32) of graphs ``positions``.

    Graphs with more than ``N`` nodes are truncated to their first ``N`` nodes (in stored order, the
    induced subgraph); smaller ones are zero-padded.
    """
    P, N, d = len(positions), int(n_nodes), ds.num_features
    X = torch.zeros((P, N, d), dtype=torch.float32)
    A = torch.zeros((P, N, N), dtype=torch.float32)
    for i, p in enumerate(positions):
        g = ds[int(p)]
        m = min(N, g.num_nodes)
        X[i, :m] = torch.as_tensor(g.x[:m], dtype=torch.float32)
        ei = g.edge_index
        keep = (ei[0] < m) & (ei[1] < m)
        A[i, torch.as_tensor(ei[0][keep]), torch.as_tensor(ei[1][keep])] = 1.0
    return X, A


def temperature(step: int, t_start: float = 1.0, t_end: float = 0.01, anneal_steps: int = 200) -> float:
    """Geometric annealing :math:`\\max(t_0 (t_1/t_0)^{s/S}, t_1)`."""
    return max(t_start * (t_end / t_start) ** (step / max(1, anneal_steps)), t_end)


def _offdiag(n: int, device=None) -> torch.Tensor:
    return 1.0 - torch.eye(n, device=device)


def relaxed_structure(logits: torch.Tensor, t: float, gen: torch.Generator) -> torch.Tensor:
    """Binary-concrete sample of the symmetric adjacency (shape of ``logits``: (b, N, N)), zero diagonal."""
    b, n, _ = logits.shape
    sym = (logits + logits.transpose(1, 2)) / 2
    iu = torch.triu_indices(n, n, offset=1)
    u = torch.rand((b, iu.shape[1]), generator=gen).clamp_(1e-6, 1 - 1e-6)
    noise = torch.zeros((b, n, n))
    noise[:, iu[0], iu[1]] = torch.log(u) - torch.log1p(-u)
    noise = noise + noise.transpose(1, 2)
    return torch.sigmoid((sym + noise) / t) * _offdiag(n)


def discrete_structure(logits: torch.Tensor) -> torch.Tensor:
    """:math:`A_{uv} = [\\sigma((\\Omega_{uv}+\\Omega_{vu})/2) > 1/2]`, zero diagonal; float 0/1 (b, N, N)."""
    sym = (logits + logits.transpose(1, 2)) / 2
    return (sym > 0).to(torch.float32) * _offdiag(logits.shape[1])


def dense_gin_forward(model: GIN, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
    r"""The :class:`~tmdlib.torch.gin.GIN` on dense graphs: ``x`` (b, N, d), ``adj`` (b, N, N) → (b, out).

    Layer :math:`\ell`: :math:`Z \leftarrow \phi^{(\ell)}(Z + \eta \tilde A Z)`, then add (or mean over
    the ``N`` nodes) pooling and the readout -- the same parameters and the same arithmetic as the sparse
    forward, so on a 0/1 ``adj`` it equals ``model(x, edge_index, batch)`` of the same graphs; on a relaxed
    ``adj`` an edge of weight :math:`a` passes :math:`a` times its message.
    """
    z = x
    for conv in model.convs:
        z = conv.mlp(z + conv.eta * torch.bmm(adj, z))
    pooled = z.sum(dim=1) if model.pool == "add" else z.mean(dim=1)
    return model.out(pooled)


def to_data(X: torch.Tensor, A: torch.Tensor, classes: np.ndarray | None) -> list[Data]:
    """PyG graphs from dense features (k, N, d) and a 0/1 symmetric adjacency (k, N, N)."""
    out = []
    for i in range(X.shape[0]):
        ei = A[i].nonzero().T.contiguous().to(torch.long)
        d = Data(x=X[i].detach().clone().to(torch.float32), edge_index=ei)
        d.num_nodes = int(X.shape[1])
        d.weight = torch.tensor([1.0])
        if classes is not None:
            d.y = torch.tensor([float(classes[i])])
        out.append(d)
    return out
