"""Node subsampling of one graph and of a dataset; combined node + graph subsampling.

See :mod:`tmdlib.select.nodes` for the definitions.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

import numpy as np

from .._coreset import CoresetResult, budget_to_k, kmedoids_coreset
from ...distance._limits import check_value_range
from ...distance._weights import resolve_weights
from ..._graph import Graph, GraphDataset
from ._candidates import (_DEFAULT_RESTART, _METHOD_CODE, _check_mode, _graph_arrays, _tree_norm_coefs,
                         graph_seeds, node_budgets)
from ._kernel import subsample_kernel

def _run_kernel(indptr, indices, node_ptr, xnorm, ks, seeds, method, depth, weights, bfs_mode, rw_restart):
    r"""The compiled pass; ``xnorm`` (shape (N,)) holds the feature norm :math:`\lVert f^v \rVert_2` of each node."""
    _check_mode(method, bfs_mode, rw_restart)
    coefs = _tree_norm_coefs(depth, weights)
    check_value_range(depth, resolve_weights(depth, weights),  # the norms as one feature: the same bound
                      SimpleNamespace(x=np.asarray(xnorm, np.float64)[:, None], indptr=indptr, node_ptr=node_ptr))
    n_graphs = node_ptr.size - 1
    keep = np.zeros(int(node_ptr[-1]), dtype=np.bool_)
    tn_full, tn_kept = np.zeros(n_graphs), np.zeros(n_graphs)
    winner, root = np.zeros(n_graphs, np.int8), np.zeros(n_graphs, np.int64)
    subsample_kernel(np.ascontiguousarray(indptr, np.int64), np.ascontiguousarray(indices, np.int64),
                      np.ascontiguousarray(node_ptr, np.int64), np.ascontiguousarray(xnorm),
                      np.ascontiguousarray(ks, np.int64), np.ascontiguousarray(seeds, np.int64), coefs,
                      _METHOD_CODE[method], bfs_mode == "fill", float(rw_restart),
                      keep, tn_full, tn_kept, winner, root)
    return keep, tn_full, tn_kept, winner, root


def select_nodes(g: Graph, fraction: float | None = None, k: int | None = None, method: str = "tmd",
                 depth: int = 4, weights="pascal", seed: int = 0, bfs_mode: str = "fill",
                 rw_restart: float = _DEFAULT_RESTART, graph_id: int = 0) -> tuple[np.ndarray, float]:
    r"""Choose the node set of one graph.

    Parameters
    ----------
    g : Graph
    fraction : float in (0, 1], optional
        Budget :math:`k = \lceil \mathrm{fraction}\cdot|V| \rceil` (at least 1 if :math:`|V|\ge1`).
    k : int, optional
        Absolute budget instead of ``fraction`` (exactly one of the two).
    method : {"tmd", "random", "rw", "kcore"}
        ``"tmd"``: the candidate of largest :math:`\mathrm{TN}(G[S])` among all k-BFS, the
        random-walk and the k-core subsets; ``"random"``: ``k`` uniform nodes; ``"rw"`` /
        ``"kcore"``: that candidate alone (baselines).
    depth, weights
        TMD depth :math:`L` and level weights (see :func:`tmdlib.distance._weights.resolve_weights`).
    seed, graph_id : int
        RNG seed is ``graph_seeds(seed, [graph_id])``, the one :func:`subsample_nodes` uses
        for the graph with that id.
    bfs_mode : {"fill", "paper"}
    rw_restart : float

    Returns
    -------
    nodes : ndarray of int64, sorted
        The kept nodes :math:`S`.
    epsilon : float
        :math:`\mathrm{TN}(G) - \mathrm{TN}(G[S]) = \mathrm{TMD}^L_w(G, G[S])`.
    """
    if (fraction is None) == (k is None):
        raise ValueError("give exactly one of fraction= or k=")
    kk = node_budgets([g.num_nodes], fraction=fraction, count=k)
    indptr, indices, node_ptr = _graph_arrays(g)
    xnorm = np.linalg.norm(g.x, axis=1) if g.num_nodes else np.zeros(0)
    keep, tn_full, tn_kept, _, _ = _run_kernel(indptr, indices, node_ptr, xnorm, kk, graph_seeds(seed, [graph_id]),
                                               method, depth, weights, bfs_mode, rw_restart)
    return np.flatnonzero(keep).astype(np.int64), max(float(tn_full[0] - tn_kept[0]), 0.0)


# ---------------------------------------------------------------------------------------
# dataset-level API
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class NodeSubsample:
    r"""Outcome of :func:`subsample_nodes` on a dataset of ``G`` graphs and ``N`` nodes.

    Attributes
    ----------
    mask : ndarray of bool, shape (N,)
        Kept global nodes.
    epsilon : ndarray of float64, shape (G,)
        :math:`\varepsilon_g = \mathrm{TN}(G_g) - \mathrm{TN}(G_g[S_g])` (clipped at 0).
    tree_norm, kept_tree_norm : ndarray of float64, shape (G,)
        :math:`\mathrm{TN}(G_g)` and :math:`\mathrm{TN}(G_g[S_g])`.
    k : ndarray of int64, shape (G,)
        Budgets.
    winner : ndarray of int8, shape (G,)
        Which candidate was kept, see :data:`WINNER_NAMES`.
    root : ndarray of int64, shape (G,)
        Local root id of the winning BFS candidate, else -1.
    method, bfs_mode : str
    seed, depth : int
    """

    mask: np.ndarray
    epsilon: np.ndarray
    tree_norm: np.ndarray
    kept_tree_norm: np.ndarray
    k: np.ndarray
    winner: np.ndarray
    root: np.ndarray
    method: str
    bfs_mode: str
    seed: int
    depth: int

    @property
    def mean_epsilon(self) -> float:
        r""":math:`\frac1n \sum_g \varepsilon_g`, the term of Corollary 4.1."""
        return float(self.epsilon.mean()) if self.epsilon.size else 0.0


def subsample_nodes(dataset: GraphDataset, fraction: float | None = None, method: str = "tmd", *,
                    count: int | None = None, depth: int = 4, weights="pascal", seed: int = 0,
                    bfs_mode: str = "fill", rw_restart: float = _DEFAULT_RESTART) -> NodeSubsample:
    """Node subsampling of every graph of ``dataset`` (one compiled pass over all graphs).

    Graph ``g`` gets the result of ``select_nodes(dataset[g], ..., graph_id=dataset.graph_ids[g])``.

    Parameters
    ----------
    dataset : GraphDataset
    fraction : float in (0, 1], optional
        Per-graph budget fraction (or ``count``: the same absolute budget for every graph).
    method, depth, weights, seed, bfs_mode, rw_restart
        As in :func:`select_nodes`.

    Returns
    -------
    NodeSubsample
    """
    ks = node_budgets(dataset.nodes_per_graph, fraction=fraction, count=count)
    keep, tn_full, tn_kept, winner, root = _run_kernel(
        dataset.indptr, dataset.indices, dataset.node_ptr, node_norms(dataset), ks, graph_seeds(seed, dataset.graph_ids),
        method, depth, weights, bfs_mode, rw_restart)
    return NodeSubsample(mask=keep, epsilon=np.maximum(tn_full - tn_kept, 0.0), tree_norm=tn_full,
                         kept_tree_norm=tn_kept, k=ks, winner=winner, root=root, method=method,
                         bfs_mode=bfs_mode, seed=int(seed), depth=int(depth))


def induced_subdataset(dataset: GraphDataset, mask) -> GraphDataset:
    """The dataset of induced subgraphs :math:`G_g[S_g]`, ``S_g`` = kept nodes of graph ``g``.

    Nodes keep their relative order (new local ids ``0..|S_g|-1`` in increasing old id, as
    :meth:`Graph.subgraph`); edges keep their order; ``graph_ids`` and ``y`` are unchanged.

    Parameters
    ----------
    dataset : GraphDataset
    mask : array_like of bool, shape (N,)

    Returns
    -------
    GraphDataset
    """
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != (dataset.num_nodes,):
        raise ValueError(f"mask must have shape ({dataset.num_nodes},), got {mask.shape}")
    n_graphs = len(dataset)
    gon = dataset.graph_of_node
    kept = np.bincount(gon[mask], minlength=n_graphs)
    node_ptr = np.concatenate([[0], np.cumsum(kept)]).astype(np.int64)
    new_local = np.cumsum(mask) - 1 - node_ptr[gon]
    g_of_edge = np.repeat(np.arange(n_graphs), np.diff(dataset.edge_ptr))
    off = dataset.node_ptr[:-1][g_of_edge]
    gs, gd = dataset.src + off, dataset.dst + off
    em = mask[gs] & mask[gd]
    edge_ptr = np.concatenate([[0], np.cumsum(np.bincount(g_of_edge[em], minlength=n_graphs))]).astype(np.int64)
    common = dict(node_ptr=node_ptr, edge_ptr=edge_ptr, src=new_local[gs[em]], dst=new_local[gd[em]],
                  graph_ids=dataset.graph_ids.copy(), y=None if dataset.y is None else dataset.y.copy())
    if dataset.is_dense:  # induced subgraphs of a validated dataset: not checked again
        return GraphDataset(x=dataset.features[mask], validate=False, **common)
    return GraphDataset(features=dataset.features, feature_index=dataset.feature_index[mask], validate=False,
                        **common)


def node_norms(dataset: GraphDataset) -> np.ndarray:
    r"""Shape ``(N,)``: :math:`\lVert f^v \rVert_2` of every node, from the feature table."""
    if dataset.num_nodes == 0:
        return np.zeros(0)
    return np.linalg.norm(dataset.features, axis=1)[dataset.feature_index]


# ---------------------------------------------------------------------------------------
# combined node + graph subsampling
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class CombinedSubsample:
    r"""Outcome of :func:`combined_subsample`.

    Attributes
    ----------
    dataset : GraphDataset
        The final training set: induced subgraphs of the selected graphs, in the order of
        ``coreset.medoids``; train with per-graph weights ``coreset.tau``.
    coreset : CoresetResult
        Graph selection (indices into the input dataset).
    nodes : NodeSubsample
        Node selection, on the whole dataset (``"nodes-first"``) or on the selected graphs
        only (``"graphs-first"``).
    order : str
    epsilon_graphs, epsilon_nodes : float
        The two terms of ``epsilon_total`` (see :func:`combined_subsample`).
    """

    dataset: GraphDataset
    coreset: CoresetResult
    nodes: NodeSubsample
    order: str
    epsilon_graphs: float
    epsilon_nodes: float

    @property
    def epsilon_total(self) -> float:
        """``epsilon_graphs + epsilon_nodes``."""
        return self.epsilon_graphs + self.epsilon_nodes


def combined_subsample(dataset: GraphDataset, distance: Callable[[GraphDataset], np.ndarray], k: int,
                       node_fraction: float, order: str = "nodes-first", node_method: str = "tmd",
                       depth: int = 4, weights="pascal", seed: int = 0, bfs_mode: str = "fill",
                       **coreset_kwargs) -> CombinedSubsample:
    r"""Node subsampling composed with graph (coreset) subsampling.

    With :math:`G'_i = G_i[S_i]`, :math:`\varepsilon_i = \mathrm{TMD}(G_i, G'_i)` and
    :math:`a(i)` the medoid of graph :math:`i`, the triangle inequality of TMD gives, for any
    GNN with Lipschitz product :math:`c`, :math:`|\mathcal L(h(G_i)) - \mathcal L(h(G'_{a(i)}))|
    \le c\,[\ldots]`, so Lemma 3.2 holds for the :math:`\tau`-weighted set
    :math:`\{G'_j\}_{j\in\mathcal I}` with :math:`\varepsilon_{\mathrm{total}}`:

    * ``"nodes-first"``: subsample nodes of every graph, then k-medoids on
      ``distance(X')``:  :math:`\varepsilon_{\mathrm{total}} = f_D(\mathcal I; X')
      + \frac1n\sum_i \varepsilon_i`.
    * ``"graphs-first"``: k-medoids on ``distance(X)``, then subsample nodes of the ``k``
      medoids only (cheaper): :math:`\varepsilon_{\mathrm{total}} = f_D(\mathcal I; X)
      + \frac1n\sum_{j\in\mathcal I} \tau_j \varepsilon_j`.

    The bound is that of the paper only when ``distance`` is TMD with the same ``depth``
    and ``weights``; for other distances the numbers are diagnostics.

    Parameters
    ----------
    dataset : GraphDataset
    distance : callable
        ``distance(ds) -> ndarray (len(ds), len(ds))``, e.g. a TMD block or
        :func:`tmdlib.select._baselines.feature_distance_matrix`.
    k : int
        Number of graphs.
    node_fraction : float
        Per-graph node budget fraction.
    order : {"nodes-first", "graphs-first"}
    node_method, depth, weights, seed, bfs_mode
        Passed to :func:`subsample_nodes`.
    **coreset_kwargs
        Passed to :func:`tmdlib.select._coreset.kmedoids_coreset` (``method``, ``restarts``, ...).

    Returns
    -------
    CombinedSubsample
    """
    node_kw = dict(method=node_method, depth=depth, weights=weights, seed=seed, bfs_mode=bfs_mode)
    if order == "nodes-first":
        ns = subsample_nodes(dataset, node_fraction, **node_kw)
        sub = induced_subdataset(dataset, ns.mask)
        cs = kmedoids_coreset(distance(sub), k, seed=seed, **coreset_kwargs)
        return CombinedSubsample(dataset=sub.take(cs.medoids), coreset=cs, nodes=ns, order=order,
                                 epsilon_graphs=cs.epsilon, epsilon_nodes=ns.mean_epsilon)
    if order == "graphs-first":
        cs = kmedoids_coreset(distance(dataset), k, seed=seed, **coreset_kwargs)
        chosen = dataset.take(cs.medoids)
        ns = subsample_nodes(chosen, node_fraction, **node_kw)
        eps_nodes = float((cs.tau * ns.epsilon).sum() / len(dataset))
        return CombinedSubsample(dataset=induced_subdataset(chosen, ns.mask), coreset=cs, nodes=ns, order=order,
                                 epsilon_graphs=cs.epsilon, epsilon_nodes=eps_nodes)
    raise ValueError(f"order must be 'nodes-first' or 'graphs-first', got {order!r}")
