"""Tree norms in O(L |E|) (Jain et al., Algorithm 1)."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._graph import Graph
from ._limits import check_finite, check_value_range
from ._weights import resolve_weights

__all__ = ["tree_norm", "tree_norm_node_terms"]


def tree_norm_node_terms(g: Graph, depth: int = 4, weights="pascal") -> np.ndarray:
    r"""Per-node contributions :math:`b` of Algorithm 1, whose sum is the tree norm.

    With :math:`z^{(0)}_v = \lVert f^v \rVert_2` and :math:`z^{(\ell)} = A z^{(\ell-1)}`,

    .. math:: b = z^{(0)} + \sum_{\ell=1}^{L-1} \Big(\prod_{t=1}^{\ell} w(L-t)\Big) z^{(\ell)},

    where :math:`w(L-t)` is ``weights[L-1-t]`` (``weights[0]`` the innermost level,
    ``weights[L-2]`` the root level).  :math:`b_v` is the tree distance of the
    computation tree :math:`T^L_v(G)` to a blank tree.

    Parameters
    ----------
    g : Graph
        Graph with ``n`` nodes.
    depth : int
        Depth :math:`L \ge 1` of the computation trees.
    weights : "pascal", float or sequence of float
        Per-level weights, see :func:`tmdlib.distance._weights.resolve_weights`.

    Returns
    -------
    ndarray of float64, shape (n,)

    Raises
    ------
    InputError
        When a tree norm could overflow float64 (:func:`tmdlib.distance._limits.check_value_range`).
    """
    w = resolve_weights(depth, weights)
    n = g.num_nodes
    if n == 0:
        return np.zeros(0)
    check_value_range(depth, w, g)
    a = sp.csr_matrix((np.ones(g.indices.size), g.indices, g.indptr), shape=(n, n))
    z = np.linalg.norm(g.x, axis=1)
    b = z.copy()
    coef = 1.0
    for ell in range(1, depth):
        z = a @ z
        coef *= w[depth - 1 - ell]
        b += coef * z
    return check_finite(b, "tree norm")


def tree_norm(g: Graph, depth: int = 4, weights="pascal") -> float:
    r"""Tree norm :math:`\mathrm{TN}(G) = \mathrm{TMD}^L_w(G, \emptyset)`.

    Computed by Algorithm 1 of Jain et al. in :math:`O(L|E|)`: the sum of
    :func:`tree_norm_node_terms`.

    Parameters
    ----------
    g : Graph
    depth : int
        Depth :math:`L \ge 1`.
    weights : "pascal", float or sequence of float

    Returns
    -------
    float
    """
    return float(tree_norm_node_terms(g, depth, weights).sum())
