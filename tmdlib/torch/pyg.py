"""torch-geometric adapter, kept apart from the numpy core (like POT keeps ``ot.gnn``).

Importing :mod:`tmdlib` never imports torch; import this module explicitly.

Two layers:

* conversions between tmdlib's :class:`~tmdlib._graph.Graph` / :class:`~tmdlib._graph.GraphDataset` and PyG ``Data``
  (:func:`to_pyg`, :func:`dataset_to_pyg`, :func:`to_graph_dataset`, :func:`to_graph_table`);
* the one-call API for PyG users: :func:`select_coreset` (a TMD coreset of a graph-classification dataset, with
  τ weights and the certificate ε of Lemma 3.2) and :func:`subsample_nodes` (TreeNorm node subsampling, Cor. 4.1).
  Neither reads labels.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import torch
from torch_geometric.data import Data, InMemoryDataset

from .._errors import InputError
from .._graph import Graph, GraphDataset

__all__ = ["to_pyg", "dataset_to_pyg", "to_graph_dataset", "to_graph_table", "select_coreset",
           "subsample_nodes", "PyGCoreset", "PyGNodeSubsample", "WeightedGraphs"]


def to_pyg(g: Graph, y=None, dtype: torch.dtype = torch.float32, **extra) -> Data:
    """Convert a :class:`~tmdlib._graph.Graph` to a PyG ``Data``.

    Parameters
    ----------
    g : Graph
        ``x`` of shape (n, d), ``edge_index`` of shape (2, m).
    y : float or array_like of shape (T,), optional
        Graph label stored as ``data.y`` of shape (1,), or ``T`` targets (NaN = missing) as shape (1, T).
    dtype : torch.dtype
        Feature dtype (float32 by default).
    **extra
        Further attributes set on the ``Data`` object (e.g. ``weight`` for τ).
    """
    data = Data(x=torch.as_tensor(g.x, dtype=dtype), edge_index=torch.as_tensor(g.edge_index, dtype=torch.long))
    data.num_nodes = g.num_nodes
    if y is not None:
        arr = np.asarray(y, dtype=np.float64)
        if arr.ndim == 0:
            if not np.isnan(arr):
                data.y = torch.tensor([float(arr)], dtype=dtype)
        else:
            data.y = torch.as_tensor(arr.reshape(1, -1), dtype=dtype)
    for key, value in extra.items():
        setattr(data, key, value if torch.is_tensor(value) else torch.tensor([value]))
    return data


def dataset_to_pyg(ds: GraphDataset, y: Sequence[float] | None = None,
                   weights: Sequence[float] | None = None, *, positions: Sequence[int] | np.ndarray | None = None,
                   node_subsets: Sequence[np.ndarray] | None = None, dtype: torch.dtype = torch.float32) -> list[Data]:
    """Convert graphs of a :class:`~tmdlib._graph.GraphDataset` to PyG ``Data``.

    Parameters
    ----------
    ds : GraphDataset
        ``G`` graphs.
    y : array_like, shape (P,) or (P, T), optional
        Labels to attach, aligned with ``positions`` (``ds.y`` is *not* read unless passed
        explicitly, so label use stays visible at the call site); ``T`` targets per graph become
        ``data.y`` of shape (1, T).
    weights : sequence of float, shape (P,), optional
        Per-graph loss weights (e.g. cluster sizes τ), stored as ``data.weight``.
    positions : array_like of int, shape (P,), optional
        Which graphs, in this order (default: all, ``P = G``).
    node_subsets : sequence of ndarray of int, length P, optional
        Replaces graph ``positions[k]`` by its induced subgraph on the local node ids
        ``node_subsets[k]`` (node subsampling).
    dtype : torch.dtype
        Feature dtype (float32 by default).

    Returns
    -------
    list of Data, length P
    """
    pos = np.arange(len(ds)) if positions is None else np.asarray(positions, dtype=np.int64)
    out = []
    for k, p in enumerate(pos):
        g = ds[int(p)]
        if node_subsets is not None:
            sub = np.asarray(node_subsets[k], dtype=np.int64)
            if sub.size and (sub.min() < 0 or sub.max() >= g.num_nodes):
                raise InputError(None, f"graph {int(ds.graph_ids[p])}: kept node id out of range [0, {g.num_nodes})")
            g = g.subgraph(sub)
        extra = {} if weights is None else {"weight": float(weights[k])}
        label = None if y is None else (y[k] if np.ndim(y[k]) else float(y[k]))
        out.append(to_pyg(g, label, dtype=dtype, **extra))
    return out


# ---------------------------------------------------------------------------------------
# PyG graphs -> tmdlib
# ---------------------------------------------------------------------------------------
def _graphs_of(dataset) -> list[Data]:
    """The graphs of a PyG dataset / ``Data`` sequence as a list (``dataset[i]``, so its transform applies)."""
    if isinstance(dataset, Data):
        raise TypeError("pass a dataset or a list of Data (graph classification), not one Data object")
    try:
        graphs = [dataset[i] for i in range(len(dataset))]
    except TypeError:
        raise TypeError(f"expected a PyG dataset or a sequence of Data, got {type(dataset).__name__}") from None
    for i, g in enumerate(graphs):
        if not isinstance(g, Data):
            raise TypeError(f"graph {i} is a {type(g).__name__}, not a torch_geometric.data.Data")
    return graphs


def _arrays(g: Data, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """``(x (n, d) float64, src, dst, constant)`` of one PyG graph; edges made simple and undirected."""
    from ..datasets._schema import canonical_edges

    n = int(g.num_nodes) if g.num_nodes is not None else 0
    constant = g.x is None
    if constant:
        x = np.ones((n, 1))
    else:
        x = g.x.detach().cpu().numpy().astype(np.float64)
        if x.ndim == 1:
            x = x[:, None]
        if x.ndim != 2 or x.shape[0] != n:
            raise ValueError(f"graph {i}: x has shape {tuple(x.shape)}, expected (num_nodes={n}, d)")
        if not np.all(np.isfinite(x)):
            raise ValueError(f"graph {i}: x holds NaN or inf")
    ei = g.edge_index
    if ei is None or ei.numel() == 0:
        src = dst = np.zeros(0, dtype=np.int64)
    else:
        ei = ei.detach().cpu().numpy().astype(np.int64)
        if ei.ndim != 2 or ei.shape[0] != 2:
            raise ValueError(f"graph {i}: edge_index has shape {tuple(ei.shape)}, expected (2, m)")
        if ei.min() < 0 or ei.max() >= n:
            raise ValueError(f"graph {i}: edge_index refers to a node outside [0, {n})")
        src, dst = canonical_edges(ei[0], ei[1], n)
    return x, src, dst, constant


def _to_dataset(graphs: list[Data]) -> tuple[GraphDataset, bool]:
    """:func:`to_graph_dataset` of an already listed sequence; also whether a constant feature was used."""
    if not graphs:
        raise ValueError("no graphs")
    parts = [_arrays(g, i) for i, g in enumerate(graphs)]
    constant = [p[3] for p in parts]
    if any(constant) and not all(constant):
        raise ValueError(f"graph {constant.index(not constant[0])} {'has' if constant[0] else 'lacks'} node "
                         "features x and others do not: give every graph x, or none")
    widths = {p[0].shape[1] for p in parts}
    if len(widths) > 1:
        raise ValueError(f"node feature widths differ between graphs: {sorted(widths)}")
    npg = np.array([p[0].shape[0] for p in parts], dtype=np.int64)
    epg = np.array([p[1].size for p in parts], dtype=np.int64)
    ds = GraphDataset(x=np.concatenate([p[0] for p in parts]), node_ptr=np.concatenate([[0], np.cumsum(npg)]),
                      edge_ptr=np.concatenate([[0], np.cumsum(epg)]), src=np.concatenate([p[1] for p in parts]),
                      dst=np.concatenate([p[2] for p in parts]), graph_ids=np.arange(len(graphs)))
    return ds, all(constant)


def to_graph_dataset(dataset: Iterable[Data] | Sequence[Data]) -> GraphDataset:
    r"""A PyG graph-classification dataset (or list of ``Data``) as a :class:`~tmdlib._graph.GraphDataset`.

    Only ``x`` and ``edge_index`` are read (never ``y``).  Graph ``i`` gets ``graph_id = i``.

    * ``edge_index`` is made simple and undirected: both directions of every edge, self-loops and duplicates
      dropped (:func:`tmdlib.datasets.canonical_edges`, what ``tmdsub ingest`` stores); the TMD is defined
      on such graphs.
    * ``x`` (shape (n, d), any numeric dtype) becomes float64; the TMD compares features by Euclidean
      distance, so integer category codes are compared as numbers (one-hot them first if they are categories).
    * Graphs without ``x`` get the constant feature 1 on every node, shape (n, 1) (the TMD then compares
      structure only); either every graph has ``x`` or none does.

    Parameters
    ----------
    dataset : PyG ``Dataset`` or sequence of ``Data``, length G

    Returns
    -------
    GraphDataset
        ``G`` graphs, ``y = None``.

    Raises
    ------
    ValueError
        Empty input, feature widths that differ, ``x`` with NaN / inf or a wrong shape, edges out of range.
    """
    return _to_dataset(_graphs_of(dataset))[0]


def to_graph_table(dataset, name: str = "pyg"):
    """The graphs of a PyG dataset as a graph-store Arrow table (write it with
    :func:`tmdlib.datasets.write_graph_parquet`; ``tmdsub ingest --parquet`` and every stage then read it).

    Graphs as in :func:`to_graph_dataset` (features stored as float32); no labels (``y`` all null: import
    them through the label flow).  ``graph_id`` = position in ``dataset``.
    """
    from ..datasets._schema import build_graph_table

    ds = to_graph_dataset(dataset)
    offset = np.repeat(ds.node_ptr[:-1], np.diff(ds.edge_ptr))
    return build_graph_table(ds.x, ds.node_ptr, ds.src + offset, ds.dst + offset, None,
                             metadata={"tmdlib.name": name, "tmdlib.source": "pyg"})


# ---------------------------------------------------------------------------------------
# One-call API
# ---------------------------------------------------------------------------------------
class WeightedGraphs(InMemoryDataset):
    """The selected graphs as an in-memory PyG dataset, each a ``Data`` copy with ``weight`` (τ, shape (1,)).

    ``torch_geometric.loader.DataLoader(subset, batch_size=...)`` batches it; ``batch.weight`` (shape (B,))
    weights the per-graph losses.  ``positions[i]`` is graph ``i``'s position in the dataset the coreset was
    selected from.
    """

    def __init__(self, graphs: list[Data], positions: torch.Tensor):
        super().__init__(root=None)
        self.data, self.slices = self.collate(graphs)
        self.positions = positions


@dataclass(frozen=True, eq=False)
class PyGCoreset:
    r"""A TMD coreset of a PyG dataset: which graphs, their weights, and the certificate.

    Attributes
    ----------
    indices : LongTensor, shape (k,)
        Positions of the medoids :math:`\mathcal I` in the dataset passed, ascending.
    weights : Tensor (float64), shape (k,)
        :math:`\tau_j`: how many graphs medoid ``j`` stands for (it counts itself; ``weights.sum() == n``), or the
        method's own weights (ones for Random and MaxMin, :mod:`tmdlib.select._methods`).
    epsilon : float
        :math:`\varepsilon_\Sigma = \sum_{i=1}^{n} \mathrm{TMD}(G_i, G_{a(i)})`: the exact distances of every
        graph to its medoid, summed (the certificate's ε, :class:`tmdlib.select.CoresetCertificate`).
    epsilon_mean : float
        :math:`\varepsilon = \varepsilon_\Sigma / n`, the ε of Lemma 3.2: for a model with TMD-stability
        constant :math:`c`, :math:`|\frac1n\sum_{i\in\mathcal I}\tau_i\mathcal L_i - \frac1n\sum_i\mathcal L_i|
        \le c\,\varepsilon`.
    assignment : LongTensor, shape (n,)
        Position of the medoid each graph is assigned to.
    distance : Tensor (float64), shape (n,)
        :math:`\mathrm{TMD}(G_i, G_{a(i)})`.
    n, k : int
    depth : int
    weights_scheme : str
        The TMD level weights used (``"pascal"``, a number or a list).
    constant_feature : bool
        True when the graphs had no ``x`` and the constant feature 1 was used.
    certificate : tmdlib.select.CoresetCertificate
        The library's certificate (numpy arrays; :func:`tmdlib.select.verify_certificate` rechecks it).
    method : str
        The selection method that picked (``"tmd"``: the paper's coreset).
    """

    indices: torch.Tensor
    weights: torch.Tensor
    epsilon: float
    assignment: torch.Tensor
    distance: torch.Tensor
    depth: int
    weights_scheme: object
    constant_feature: bool
    certificate: object
    _graphs: list = field(repr=False, default_factory=list)
    method: str = "tmd"

    @property
    def n(self) -> int:
        """Number of graphs the coreset covers."""
        return int(self.assignment.numel())

    @property
    def k(self) -> int:
        """Number of selected graphs."""
        return int(self.indices.numel())

    @property
    def epsilon_mean(self) -> float:
        r""":math:`\varepsilon_\Sigma / n` (Lemma 3.2's ε)."""
        return float(self.epsilon / self.n) if self.n else 0.0

    def subset(self) -> WeightedGraphs:
        """The selected graphs (copies, all their attributes kept) with ``weight`` = τ, shape (1,), float32.

        A τ-weighted loss over a batch: ``(loss_per_graph * batch.weight).sum() / coreset.weights.sum()``
        estimates the mean loss over all ``n`` graphs (Lemma 3.2).  Graphs that had no ``x`` still have none.
        """
        out = []
        for pos, tau in zip(self.indices.tolist(), self.weights.tolist()):
            g = self._graphs[pos].clone()
            g.weight = torch.tensor([tau], dtype=torch.float32)
            out.append(g)
        return WeightedGraphs(out, self.indices.clone())

    def __repr__(self) -> str:
        return (f"PyGCoreset(k={self.k} of n={self.n}, epsilon={self.epsilon:.6g}, "
                f"epsilon_mean={self.epsilon_mean:.6g}, depth={self.depth})")


def select_coreset(dataset, fraction: float | None = None, count: int | None = None, depth: int = 4,
                   weights="pascal", engine: str = "auto", seed: int = 0, method: str = "tmd",
                   smiles=None, **options) -> PyGCoreset:
    r"""The graphs of a PyG dataset worth labelling, with τ weights and the certificate ε, in one call.

    ``method="tmd"`` (default) solves :math:`\min_{|\mathcal I| = k} \sum_i \min_{j\in\mathcal I}
    \mathrm{TMD}^L_w(G_i, G_j)` over the ``n`` graphs passed (k-medoids) and returns the cluster sizes
    :math:`\tau_j = |a^{-1}(j)|` of the nearest-medoid assignment :math:`a`.  Any other registered method
    (:func:`tmdlib.method_names`: ``random``, ``feature``, ``wl``, and for molecules the chemists' pickers
    ``maxmin``, ``leader``, ``butina``, ``fp-kmedoids``, ``scaffold``) picks instead, with its own weights
    (:mod:`tmdlib.select._methods`).  Whatever picked, the certificate is exact:
    :math:`\varepsilon_\Sigma = \sum_i \mathrm{TMD}(G_i, G_{a(i)})` over the nearest-pick assignment
    (:func:`tmdlib.select_graphs`).

    Parameters
    ----------
    dataset : PyG ``Dataset`` (e.g. ``TUDataset``) or sequence of ``Data``, length n
        ``x`` (n_i, d) and ``edge_index`` (2, m_i) are read, **labels never** (classification, regression or
        multi-task alike).  Converted by :func:`to_graph_dataset` (edges made undirected; no ``x`` → constant
        feature 1).  The budget counts every graph passed (hold a test split out before calling).
    fraction : float in (0, 1], optional
        :math:`k = \min(n, \max(1, \lceil \mathrm{fraction}\cdot n\rceil))`.
    count : int, optional
        :math:`k` directly.  Give exactly one of ``fraction`` / ``count``.
    depth : int, default 4
        Computation-tree depth ``L`` (a GIN with ``L - 1`` layers pairs with it).
    weights : "pascal", float or sequence of float
        TMD level weights (``"pascal"`` pairs with a GIN of neighbour weight 1).
    engine : {"auto", "exact", "scalable"}
        The TMD engine (``exact``: k-medoids on the full TMD matrix; ``scalable``: never builds it).
    seed : int
        Seed of the method (same seed → same coreset).
    method : str, default "tmd"
        A registered selection method.
    smiles : sequence of str, length n, optional
        The molecules, for the chemists' pickers; default: every graph's ``smiles`` attribute (OGB /
        MoleculeNet datasets have it).
    **options
        Method options of :func:`tmdlib.select_graphs` (``restarts``, ...).

    Returns
    -------
    PyGCoreset
        ``indices``, ``weights`` (τ), ``epsilon`` (sum), ``epsilon_mean`` (ε of Lemma 3.2), ``subset()``.
    """
    from ..select._api import select_graphs

    graphs = _graphs_of(dataset)
    ds, constant = _to_dataset(graphs)
    if smiles is None and all(isinstance(getattr(g, "smiles", None), str) for g in graphs):
        smiles = [g.smiles for g in graphs]
    sel = select_graphs(ds, method, fraction=fraction, k=count, engine=engine, seed=seed, depth=depth,
                        weights=weights, smiles=smiles, **options)
    cert = sel.certificate
    return PyGCoreset(indices=torch.as_tensor(sel.positions, dtype=torch.long),
                      weights=torch.as_tensor(sel.tau, dtype=torch.float64), epsilon=float(cert.epsilon),
                      assignment=torch.as_tensor(cert.assignment, dtype=torch.long),
                      distance=torch.as_tensor(cert.distance, dtype=torch.float64), depth=int(depth),
                      weights_scheme=weights, constant_feature=constant, certificate=cert, _graphs=graphs,
                      method=method)


@dataclass(frozen=True, eq=False)
class PyGNodeSubsample:
    r"""Node subsampling of every graph of a PyG dataset (TreeNorm, Corollary 4.1).

    Attributes
    ----------
    nodes : list of LongTensor, length G
        Kept node ids :math:`S_g` of graph ``g`` (local, ascending).
    epsilon : Tensor (float64), shape (G,)
        :math:`\varepsilon_g = \mathrm{TN}(G_g) - \mathrm{TN}(G_g[S_g]) = \mathrm{TMD}(G_g, G_g[S_g])`.
    constant_feature : bool
        True when the graphs had no ``x`` and the constant feature 1 was used.
    result : tmdlib.select.NodeSubsample
        The library's result (masks, tree norms, budgets, the winning candidate per graph).
    """

    nodes: list
    epsilon: torch.Tensor
    constant_feature: bool
    result: object
    _graphs: list = field(repr=False, default_factory=list)

    @property
    def epsilon_mean(self) -> float:
        r""":math:`\frac1G\sum_g \varepsilon_g`, the ε of Corollary 4.1."""
        return float(self.epsilon.mean()) if self.epsilon.numel() else 0.0

    def subset(self) -> list[Data]:
        """The induced subgraphs :math:`G_g[S_g]` (``Data.subgraph``: node and edge attributes kept, nodes
        renumbered in ascending order), one per graph, in the original order."""
        return [g.subgraph(s) for g, s in zip(self._graphs, self.nodes)]


def subsample_nodes(dataset, fraction: float | None = None, count: int | None = None, method: str = "tmd",
                    depth: int = 4, weights="pascal", seed: int = 0) -> PyGNodeSubsample:
    r"""Keep ``fraction`` of the nodes of every graph of a PyG dataset (:func:`tmdlib.subsample_nodes`).

    For each graph, :math:`k_g = \min(|V_g|, \max(1, \lceil \mathrm{fraction}\cdot|V_g|\rceil))` nodes
    (or ``count``) are kept, chosen by ``method`` (``"tmd"``: the candidate set of largest tree norm, so
    :math:`\varepsilon_g = \mathrm{TMD}(G_g, G_g[S_g])` is smallest among candidates); labels are not read.
    Graphs as in :func:`to_graph_dataset`.

    Returns
    -------
    PyGNodeSubsample
        ``nodes`` (kept ids per graph), ``epsilon`` (per graph), ``epsilon_mean``, ``subset()``.
    """
    from ..select.nodes import subsample_nodes as _subsample

    graphs = _graphs_of(dataset)
    ds, constant = _to_dataset(graphs)
    res = _subsample(ds, fraction, method, count=count, depth=depth, weights=weights, seed=seed)
    nodes = [torch.as_tensor(np.flatnonzero(res.mask[ds.node_ptr[g]:ds.node_ptr[g + 1]]), dtype=torch.long)
             for g in range(len(ds))]
    return PyGNodeSubsample(nodes=nodes, epsilon=torch.as_tensor(res.epsilon, dtype=torch.float64),
                            constant_feature=constant, result=res, _graphs=graphs)
