"""Candidate node sets of one graph (Appendix A.3): k-BFS balls, a random walk, a k-core set.

The rules are stated in :mod:`tmdlib.select.nodes`.  Per-graph helpers shared with the
dataset-level API (:mod:`tmdlib.select.nodes._api`): budgets, per-graph seeds, argument checks.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._coreset import budget_to_k
from ...distance._weights import resolve_weights
from ..._graph import Graph
from ._kernel import _bfs_set, _core_numbers, rw_one

METHODS = ("tmd", "random", "rw", "kcore")
BFS_MODES = ("fill", "paper")
_METHOD_CODE = {"tmd": 0, "random": 1, "rw": 2, "kcore": 3}
#: Meaning of :attr:`NodeSubsample.winner`.
WINNER_NAMES = {-1: "empty", 0: "all", 1: "bfs", 2: "rw", 3: "kcore", 4: "random"}
_DEFAULT_RESTART = 0.15


# ---------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------
def _tree_norm_coefs(depth: int, weights) -> np.ndarray:
    r"""Shape ``(L,)``: :math:`c_0 = 1`, :math:`c_\ell = c_{\ell-1}\, w(L-\ell)` (``weights[L-1-ell]``)."""
    w = resolve_weights(depth, weights)
    c = np.ones(int(depth))
    for ell in range(1, int(depth)):
        c[ell] = c[ell - 1] * w[depth - 1 - ell]
    return c


def node_budgets(num_nodes, fraction: float | None = None, count: int | None = None) -> np.ndarray:
    r"""Per-graph node budgets, :func:`tmdlib.coreset.budget_to_k` applied to each :math:`|V_g|`.

    :math:`k_g = \min(|V_g|, \max(1, \lceil \mathrm{fraction}\cdot|V_g| \rceil))` (0 for empty
    graphs), or :math:`\min(|V_g|, \mathrm{count})`.

    Parameters
    ----------
    num_nodes : array_like of int, shape (G,)
    fraction : float in (0, 1], optional
    count : int >= 1, optional

    Returns
    -------
    ndarray of int64, shape (G,)
    """
    n = np.asarray(num_nodes, dtype=np.int64)
    budget_to_k(1, fraction=fraction, count=count)  # argument validation only
    if fraction is not None:
        k = np.ceil(np.round(float(fraction) * n, 9)).astype(np.int64)
    else:
        k = np.full(n.shape, int(count), dtype=np.int64)
    return np.where(n > 0, np.minimum(n, np.maximum(k, 1)), 0)


def graph_seeds(seed: int, graph_ids) -> np.ndarray:
    """Per-graph 32-bit RNG seeds: SplitMix64 of ``seed`` and each graph id.

    Returns
    -------
    ndarray of int64, shape (G,), values in ``[0, 2**32)``
    """
    ids = np.asarray(graph_ids, dtype=np.int64).astype(np.uint64)
    with np.errstate(over="ignore"):
        z = ids + np.uint64(int(seed) % (1 << 64)) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x632BE59BD9B4E019)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z & np.uint64(0xFFFFFFFF)).astype(np.int64)


def _check_mode(method: str | None, bfs_mode: str, rw_restart: float) -> None:
    if method is not None and method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if bfs_mode not in BFS_MODES:
        raise ValueError(f"bfs_mode must be one of {BFS_MODES}, got {bfs_mode!r}")
    if not 0.0 <= rw_restart < 1.0:
        raise ValueError(f"rw_restart must be in [0, 1), got {rw_restart}")


# ---------------------------------------------------------------------------------------
# single-graph API
# ---------------------------------------------------------------------------------------
def _graph_arrays(g: Graph):
    return g.indptr, g.indices, np.array([0, g.num_nodes], dtype=np.int64)


def _check_k(g: Graph, k: int) -> int:
    if int(k) != k or k < 0:
        raise ValueError(f"k must be an integer >= 0, got {k!r}")
    return int(k)


def bfs_subset(g: Graph, root: int, k: int, bfs_mode: str = "fill") -> np.ndarray:
    r"""The k-BFS subset :math:`S_{\mathrm{BFS}(v;k)}` of ``root``.

    ``"paper"``: :math:`\{u : d(v, u) \le \ell_k\}` with :math:`\ell_k` the deepest level
    whose ball has :math:`\le k` nodes (may hold fewer than :math:`k`; a component smaller
    than :math:`k` is returned whole).  ``"fill"``: that ball plus the smallest ids of the
    next level up to :math:`k` nodes; when the component runs out, BFS continues from the
    smallest unvisited node id (so exactly :math:`\min(k, n)` nodes).

    Parameters
    ----------
    g : Graph
    root : int
    k : int
        Budget (``k >= 1``; ``k = 0`` returns an empty set).
    bfs_mode : {"fill", "paper"}

    Returns
    -------
    ndarray of int64
        Sorted node ids.
    """
    _check_mode(None, bfs_mode, 0.0)
    k = min(_check_k(g, k), g.num_nodes)
    if not 0 <= root < g.num_nodes:
        raise IndexError(f"root {root} out of range [0, {g.num_nodes})")
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    n = g.num_nodes
    stamp, pos, queue = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    s = _bfs_set(int(root), k, 0, n, g.indptr, g.indices, bfs_mode == "fill", stamp, 1, pos, queue)
    return np.sort(queue[:s])


def random_walk_subset(g: Graph, k: int, seed: int = 0, graph_id: int = 0,
                       rw_restart: float = _DEFAULT_RESTART) -> np.ndarray:
    r"""The random-walk candidate :math:`S_{\mathrm{RW}}` (rule in the module docstring).

    Parameters
    ----------
    g : Graph
    k : int
        Budget; ``min(k, n)`` nodes are returned.
    seed, graph_id : int
        The walk's RNG is seeded with ``graph_seeds(seed, [graph_id])`` (as in
        :func:`subsample_nodes`).
    rw_restart : float in [0, 1)
        Probability of jumping back to the current root at each step.

    Returns
    -------
    ndarray of int64, shape (min(k, n),), sorted
    """
    _check_mode(None, "fill", rw_restart)
    k = min(_check_k(g, k), g.num_nodes)
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    s = int(graph_seeds(seed, [graph_id])[0])
    return np.sort(rw_one(s, k, g.num_nodes, g.indptr, g.indices, float(rw_restart)))


def core_numbers(g: Graph) -> np.ndarray:
    """Core number of every node (largest ``c`` such that the node is in the ``c``-core).

    Returns
    -------
    ndarray of int64, shape (n,)
    """
    n = g.num_nodes
    core, vert, posv = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    binv = np.zeros(n + 1, np.int64)
    if n:
        _core_numbers(0, n, g.indptr, g.indices, core, vert, posv, binv)
    return core


def kcore_subset(g: Graph, k: int) -> np.ndarray:
    """The k-core candidate: first ``k`` nodes by (core number desc, degree desc, id asc).

    Returns
    -------
    ndarray of int64, shape (min(k, n),), sorted
    """
    k = min(_check_k(g, k), g.num_nodes)
    core = core_numbers(g)
    order = np.lexsort((np.arange(g.num_nodes), -g.degree, -core))
    return np.sort(order[:k]).astype(np.int64)


@dataclass(frozen=True, eq=False)
class NodeCandidates:
    """Candidate family :math:`\\mathcal S` of one graph (Appendix A.3).

    Attributes
    ----------
    bfs : list of ndarray
        ``bfs[v]`` is the sorted k-BFS subset rooted at node ``v``.
    rw : ndarray
        Sorted random-walk subset.
    kcore : ndarray
        Sorted k-core subset.
    k : int
    """

    bfs: list
    rw: np.ndarray
    kcore: np.ndarray
    k: int

    def all(self) -> list:
        """All candidates in tie-break order: BFS roots 0..n-1, random walk, k-core."""
        return [*self.bfs, self.rw, self.kcore]


def node_candidates(g: Graph, k: int, seed: int = 0, bfs_mode: str = "fill", graph_id: int = 0,
                    rw_restart: float = _DEFAULT_RESTART) -> NodeCandidates:
    """All candidate subsets of ``g`` for budget ``k`` (for inspection and tests).

    Parameters are those of :func:`select_nodes`; the random walk matches the one the
    selection uses for the same ``seed`` and ``graph_id``.
    """
    _check_mode(None, bfs_mode, rw_restart)
    return NodeCandidates(
        bfs=[bfs_subset(g, v, k, bfs_mode) for v in range(g.num_nodes)],
        rw=random_walk_subset(g, k, seed, graph_id, rw_restart),
        kcore=kcore_subset(g, k),
        k=int(k),
    )

