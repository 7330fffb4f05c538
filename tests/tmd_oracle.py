r"""Slow reference TMD written straight from Definitions 2.3-2.6 (for small graphs only).

* Computation trees are built explicitly as nested tuples
  ``(feature_tuple, (child_tree, ...))`` (Definition 2.3, unrolled: the parent
  reappears among a child's neighbours).
* A blank tree is ``(zeros(d), ())``.
* :math:`\mathrm{TD}` recurses over the children multisets (Definition 2.5),
  padding the smaller multiset with blank trees (:math:`\rho`, Appendix A.1) and
  solving the unnormalised OT with POT's exact ``ot.emd2`` on unit masses.
* :math:`\mathrm{TMD}` is the padded OT between the multisets of depth-L trees.

The only shortcut is an ``lru_cache`` on :func:`tree_distance`, keyed by the
(hashable) trees themselves; it does not change any value.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import ot

from tmdlib import Graph
from tmdlib.distance import resolve_weights

__all__ = ["computation_tree", "tree_distance", "padded_ot", "tmd_oracle"]


def computation_tree(g: Graph, v: int, depth: int) -> tuple:
    """:math:`T^{depth}_v(G)` as ``(feature_tuple, children)`` with ``depth - 1`` levels below the root."""
    feat = tuple(float(t) for t in g.x[v])
    if depth == 1:
        return (feat, ())
    return (feat, tuple(computation_tree(g, int(u), depth - 1) for u in g.neighbors(v)))


def _blank(d: int) -> tuple:
    return (tuple(0.0 for _ in range(d)), ())


@lru_cache(maxsize=None)
def tree_distance(ta: tuple, tb: tuple, level: int, weights: tuple) -> float:
    r""":math:`\mathrm{TD}_w(T_a, T_b)` of two trees of depth ``level``.

    ``weights[level - 2]`` multiplies the OT between the children (depth ``level - 1``).
    """
    fa, fb = np.asarray(ta[0]), np.asarray(tb[0])
    d = float(np.linalg.norm(fa - fb))
    if level == 1:
        return d
    return d + weights[level - 2] * padded_ot(ta[1], tb[1], level - 1, weights)


def padded_ot(xs: tuple, ys: tuple, level: int, weights: tuple) -> float:
    r""":math:`\mathrm{OT}_{\mathrm{TD}}(\rho(X, Y))`: pad with blank trees, unit masses, exact EMD."""
    n = max(len(xs), len(ys))
    if n == 0:
        return 0.0
    dim = len((xs or ys)[0][0])
    xs = tuple(xs) + (_blank(dim),) * (n - len(xs))
    ys = tuple(ys) + (_blank(dim),) * (n - len(ys))
    cost = np.array([[tree_distance(a, b, level, weights) for b in ys] for a in xs], dtype=np.float64)
    return float(ot.emd2(np.ones(n), np.ones(n), cost))


def tmd_oracle(g1: Graph, g2: Graph, depth: int = 4, weights="pascal") -> float:
    r""":math:`\mathrm{TMD}^L_w(G_1, G_2)` from the definitions (exponential in ``depth``)."""
    w = tuple(float(t) for t in resolve_weights(depth, weights))
    t1 = tuple(computation_tree(g1, v, depth) for v in range(g1.num_nodes))
    t2 = tuple(computation_tree(g2, v, depth) for v in range(g2.num_nodes))
    return padded_ot(t1, t2, depth, w)
