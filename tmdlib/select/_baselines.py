r"""Label-agnostic graph-subsampling baselines of Jain et al. (Section 5, Appendix B.3).

* **Random** -- :func:`random_selection`: ``k`` graphs uniformly without replacement.
* **Feature** -- :func:`feature_distance_matrix`: :math:`D_{\mathrm{feature}}(G_1, G_2) =
  \lVert \bar f_1 - \bar f_2 \rVert_2` between mean node features, then k-medoids.
* **WL** -- :func:`wl_distance_matrix`: the Weisfeiler–Lehman subtree kernel
  (Shervashidze et al., 2011), cosine-normalised and turned into a distance, then k-medoids.

The distance matrices feed :func:`tmdlib.select._coreset.kmedoids_coreset`.  Node-level
baselines (random nodes, random-walk subset, k-core subset) are the ``method`` options
of :func:`tmdlib.select.nodes.select_nodes`.  Nothing here reads labels.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.spatial.distance import pdist, squareform

from .._graph import GraphDataset

__all__ = [
    "random_selection",
    "mean_features",
    "feature_distance_matrix",
    "initial_node_labels",
    "wl_labels",
    "wl_feature_matrix",
    "wl_kernel_matrix",
    "wl_distance_matrix",
]


def random_selection(n: int, k: int, seed: int = 0) -> np.ndarray:
    """``k`` distinct indices of ``range(n)``, uniformly at random.

    Parameters
    ----------
    n, k : int
        :math:`1 \\le k \\le n`.
    seed : int
        ``numpy.random.default_rng(seed)``.

    Returns
    -------
    ndarray of int64, shape (k,), sorted
    """
    if int(k) != k or not 1 <= k <= n:
        raise ValueError(f"k must be an integer in [1, {n}], got {k!r}")
    rng = np.random.default_rng(int(seed))
    return np.sort(rng.choice(int(n), size=int(k), replace=False)).astype(np.int64)


def _feature_counts(dataset: GraphDataset) -> sp.csr_matrix:
    """Sparse (G, F) matrix: how many nodes of graph ``g`` have feature-table row ``r``."""
    n = dataset.num_nodes
    return sp.csr_matrix((np.ones(n), (dataset.graph_of_node, dataset.feature_index)),
                         shape=(len(dataset), dataset.features.shape[0]))


def mean_features(dataset: GraphDataset) -> np.ndarray:
    r"""Per-graph mean node feature :math:`\bar f_g = \frac{1}{|V_g|}\sum_{v\in V_g} f^v`.

    Returns
    -------
    ndarray of float64, shape (G, d)
        Zero rows for empty graphs.
    """
    sums = _feature_counts(dataset) @ dataset.features
    cnt = dataset.nodes_per_graph.astype(np.float64)
    return sums / np.maximum(cnt, 1.0)[:, None]


def feature_distance_matrix(dataset: GraphDataset) -> np.ndarray:
    r"""Appendix B.3 feature distance :math:`D_{ij} = \lVert \bar f_i - \bar f_j \rVert_2`.

    Returns
    -------
    ndarray of float64, shape (G, G)
        Exactly symmetric, zero diagonal.  Empty graphs have mean 0.
    """
    m = mean_features(dataset)
    if len(dataset) < 2:
        return np.zeros((len(dataset), len(dataset)))
    return squareform(pdist(m, metric="euclidean"))


def initial_node_labels(dataset: GraphDataset) -> np.ndarray:
    """WL iteration-0 labels: the index of each node's exact feature row among the distinct rows.

    For one-hot features this is the same partition as the argmax label.

    Returns
    -------
    ndarray of int64, shape (N,)
    """
    if not dataset.is_dense:  # distinct rows of the table, then one lookup per node
        from ..distance._ids import dataset_feature_ids

        return dataset_feature_ids(dataset)[0]
    x = dataset.x
    if x.shape[0] == 0 or x.shape[1] == 0:
        return np.zeros(x.shape[0], dtype=np.int64)
    # lexicographic row sort (column 0 primary): same ids as np.unique(x, axis=0), ~30x faster
    order = np.lexsort(x.T[::-1])
    xs = x[order]
    new_row = np.empty(x.shape[0], dtype=bool)
    new_row[0] = True
    np.any(xs[1:] != xs[:-1], axis=1, out=new_row[1:])
    labels = np.empty(x.shape[0], dtype=np.int64)
    labels[order] = np.cumsum(new_row) - 1
    return labels


def _wl_step(labels: np.ndarray, indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    r"""One WL relabelling: :math:`l'(v) = \mathrm{id}\big(l(v), \{\!\{l(u): u\in N(v)\}\!\}\big)`.

    Exact (no hashing): nodes are grouped by degree ``d``; each group is a
    ``(n_d, d + 1)`` matrix ``[l(v), sorted neighbour labels]`` made unique with
    ``numpy.unique(axis=0)``.  New ids are ``0..U-1``.
    """
    n = labels.size
    deg = np.diff(indptr)
    src = np.repeat(np.arange(n), deg)
    nbr = labels[indices]
    order = np.lexsort((nbr, src))  # per node, neighbour labels ascending
    nbr = nbr[order]
    new = np.empty(n, dtype=np.int64)
    offset = 0
    for d in np.unique(deg):
        nodes = np.flatnonzero(deg == d)
        sig = np.empty((nodes.size, d + 1), dtype=np.int64)
        sig[:, 0] = labels[nodes]
        if d:
            sig[:, 1:] = nbr[indptr[nodes][:, None] + np.arange(d)]
        _, inv = np.unique(sig, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        new[nodes] = offset + inv
        offset += int(inv.max()) + 1
    return new


def wl_labels(dataset: GraphDataset, iterations: int = 3) -> list[np.ndarray]:
    """WL labels of every node for iterations ``0..h`` (shared label space across graphs).

    Returns
    -------
    list of ``iterations + 1`` ndarrays of int64, shape (N,)
    """
    if int(iterations) != iterations or iterations < 0:
        raise ValueError(f"iterations must be an integer >= 0, got {iterations!r}")
    labs = [initial_node_labels(dataset)]
    for _ in range(int(iterations)):
        labs.append(_wl_step(labs[-1], dataset.indptr, dataset.indices))
    return labs


def wl_feature_matrix(dataset: GraphDataset, iterations: int = 3) -> sp.csr_matrix:
    r"""WL subtree feature map :math:`\phi(G) = (\phi_0(G), \dots, \phi_h(G))`.

    :math:`\phi_i(G)_\sigma` counts the nodes of :math:`G` whose iteration-:math:`i` label is
    :math:`\sigma`; label spaces of different iterations are disjoint.

    Returns
    -------
    scipy.sparse.csr_matrix of float64, shape (G, total number of labels)
    """
    gon = dataset.graph_of_node
    rows, cols, off = [], [], 0
    for lab in wl_labels(dataset, iterations):
        rows.append(gon)
        cols.append(lab + off)
        off += int(lab.max()) + 1 if lab.size else 0
    r, c = np.concatenate(rows), np.concatenate(cols)
    m = sp.csr_matrix((np.ones(r.size), (r, c)), shape=(len(dataset), max(off, 1)))
    m.sum_duplicates()
    return m


def wl_kernel_matrix(dataset: GraphDataset, iterations: int = 3, normalize: bool = True) -> np.ndarray:
    r"""WL subtree kernel :math:`k(G, G') = \sum_{i=0}^{h} \langle \phi_i(G), \phi_i(G') \rangle`.

    With ``normalize=True``: :math:`\tilde k_{ij} = k_{ij} / \sqrt{k_{ii} k_{jj}}`, and 0
    where a graph is empty (:math:`k_{ii} = 0`) -- GraKeL's ``normalize=True``.
    ``iterations`` :math:`= h` equals GraKeL's ``WeisfeilerLehman(n_iter=h)``.

    Returns
    -------
    ndarray of float64, shape (G, G)
    """
    phi = wl_feature_matrix(dataset, iterations)
    k = np.asarray((phi @ phi.T).todense(), dtype=np.float64)
    if normalize:
        dg = np.sqrt(np.diagonal(k))
        inv = np.divide(1.0, dg, out=np.zeros_like(dg), where=dg > 0)
        k = k * inv[:, None] * inv[None, :]
    return k


def wl_distance_matrix(dataset: GraphDataset, iterations: int = 3, backend: str = "numpy") -> np.ndarray:
    r"""Distance induced by the normalised WL subtree kernel.

    .. math:: D_{ij} = \sqrt{\max(0,\ \tilde k_{ii} + \tilde k_{jj} - 2 \tilde k_{ij})}
              = \lVert \hat\phi(G_i) - \hat\phi(G_j) \rVert_2,
              \qquad \hat\phi = \phi / \lVert\phi\rVert_2 \ (0 \text{ for empty graphs}),

    so :math:`D_{ij} \in [0, \sqrt 2]` and an empty graph is at distance 1 from every
    non-empty graph.  Iteration-0 labels are the distinct exact feature rows
    (:func:`initial_node_labels`); :math:`h` = ``iterations`` relabellings.

    Parameters
    ----------
    dataset : GraphDataset
    iterations : int
        :math:`h \ge 0`.
    backend : {"numpy", "grakel"}
        ``"grakel"`` computes the kernel with GraKeL (optional dependency, the library the
        paper used; slow pure-Python relabelling, no empty graphs) -- for cross-checks.

    Returns
    -------
    ndarray of float64, shape (G, G)
        Exactly symmetric, zero diagonal.
    """
    if backend == "numpy":
        k = wl_kernel_matrix(dataset, iterations, normalize=True)
    elif backend == "grakel":
        k = _grakel_kernel(dataset, iterations)
    else:
        raise ValueError(f"backend must be 'numpy' or 'grakel', got {backend!r}")
    dg = np.diagonal(k)
    d = np.sqrt(np.maximum(dg[:, None] + dg[None, :] - 2.0 * k, 0.0))
    d = 0.5 * (d + d.T)
    np.fill_diagonal(d, 0.0)
    return d


def _grakel_kernel(dataset: GraphDataset, iterations: int) -> np.ndarray:
    """Normalised WL subtree kernel via ``grakel.kernels.WeisfeilerLehman``."""
    from grakel import Graph as GkGraph
    from grakel.kernels import VertexHistogram, WeisfeilerLehman

    if np.any(dataset.nodes_per_graph == 0):
        raise ValueError("the grakel backend cannot handle empty graphs")
    lab0 = initial_node_labels(dataset)
    graphs = []
    for g in range(len(dataset)):
        a, b = dataset.node_ptr[g], dataset.node_ptr[g + 1]
        adj = {v - a: (dataset.indices[dataset.indptr[v]:dataset.indptr[v + 1]] - a).tolist() for v in range(a, b)}
        graphs.append(GkGraph(adj, node_labels={v - a: int(lab0[v]) for v in range(a, b)}))
    wl = WeisfeilerLehman(n_iter=int(iterations), base_graph_kernel=VertexHistogram, normalize=True)
    return np.asarray(wl.fit_transform(graphs), dtype=np.float64)
