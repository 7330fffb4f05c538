r"""Node subsampling with TMD guarantees (Jain et al., Section 4 and Appendix A.3).

For every graph :math:`G = (V, E, f)` and node budget :math:`k`, a node set
:math:`S \subseteq V`, :math:`|S| \le k`, is chosen from a small candidate family
:math:`\mathcal S` so as to minimise :math:`\mathrm{TMD}(G, G[S])`.  By Theorem 4.2 (via
Lemma 4.5 with T = S, :math:`\mathrm{TN}(G) = \mathrm{TMD}(G, G[S]) + \mathrm{TN}(G[S])`) this is the
candidate with the **largest tree norm** of its induced subgraph, and the attained
distance is

.. math:: \varepsilon = \mathrm{TMD}(G, G[S]) = \mathrm{TN}(G) - \mathrm{TN}(G[S]),

the per-graph term of Corollary 4.1.  Tree norms are Algorithm 1:
:math:`\mathrm{TN}(G) = \sum_{\ell=0}^{L-1} c_\ell \, \mathbf 1^\top A^\ell x` with
:math:`x_v = \lVert f^v \rVert_2`, :math:`c_0 = 1`, :math:`c_\ell = \prod_{t=1}^{\ell} w(L-t)`
(the same convention as :func:`tmdlib.treenorm.tree_norm_node_terms`).

Candidate family (Appendix A.3) for a graph with :math:`n = |V| > k`:

* **k-BFS subsets**, one per root :math:`v \in V` (:func:`bfs_subset`).  ``bfs_mode="paper"``
  is the paper's definition: all nodes within distance :math:`\ell_k` of :math:`v`, where
  :math:`\ell_k` is the deepest level whose BFS ball has at most :math:`k` nodes -- this can
  hold far fewer than :math:`k` nodes (a star rooted at its centre: 1 node for every
  :math:`k < n`; rooted at a leaf: 2 nodes).  ``bfs_mode="fill"`` (default) takes the same ball and
  then adds nodes of the next level in increasing node id until :math:`k` nodes; when the
  root's component is exhausted it continues with a BFS from the smallest unvisited node id.
  Every fill set contains the paper set of the same root and the tree norm is monotone
  under adding nodes (all terms of Algorithm 1 are non-negative), so with a fixed budget
  ``"fill"`` is never worse -- that is why it is the default.
* **random-walk subset** (the role of Razin et al., 2023 in the paper; our exact rule,
  :func:`random_walk_subset`): a seeded random walk that at each step returns to its current
  root with probability ``rw_restart`` (default 0.15) and otherwise moves to a uniformly random
  neighbour, collecting distinct nodes until :math:`k`.  The root starts uniformly at
  random; when the root's connected component is fully visited the walk jumps to a uniformly
  random unvisited node (new root, other component); after :math:`n` consecutive steps
  without a new node it jumps to a uniformly random unvisited node adjacent to the visited
  set (new root, same component).
* **k-core subset** (the role of Salha et al., 2022; :func:`kcore_subset`): nodes in
  decreasing core number, ties by decreasing degree then increasing id, first :math:`k`.
  Core numbers by the Batagelj–Zaversnik peeling algorithm (:func:`core_numbers`).

The selected candidate is the first maximiser of :math:`\mathrm{TN}(G[S])` in the order
BFS roots :math:`0..n-1`, random walk, k-core (a later candidate must be strictly better).
Graphs with :math:`n \le k` keep all nodes (:math:`\varepsilon = 0`); empty graphs keep none.

All candidate tree norms of a graph are evaluated in one compiled (numba) pass: each
candidate costs :math:`O(\mathrm{vol}(S) + L\,|E(S)|)`, so a graph costs at most
:math:`O(L\,|V|\,|E|)` as in the paper.  Randomness (random walk, ``method="random"``) is
seeded per graph from ``(seed, graph_id)``, so a graph's selection does not depend on the
other graphs of the dataset or on their order; labels are never read.
"""
from ._api import (CombinedSubsample, NodeSubsample, combined_subsample, induced_subdataset, select_nodes,
                  subsample_nodes)
from ._candidates import (BFS_MODES, METHODS, WINNER_NAMES, NodeCandidates, bfs_subset, core_numbers, graph_seeds,
                         kcore_subset, node_budgets, node_candidates, random_walk_subset)
from ._policy import DEFAULT_NODE_METHOD, NODE_AUTO, NODE_OFF, node_method, off_line

#: The node-subsampling methods (``tmdsub nodes --method``, the experiment's node grid): declared once, in
#: :data:`tmdlib.select.nodes._candidates.METHODS`.
NODE_METHODS = METHODS

__all__ = [
    "METHODS",
    "NODE_METHODS",
    "BFS_MODES",
    "WINNER_NAMES",
    "NodeCandidates",
    "NodeSubsample",
    "CombinedSubsample",
    "node_budgets",
    "graph_seeds",
    "bfs_subset",
    "random_walk_subset",
    "core_numbers",
    "kcore_subset",
    "node_candidates",
    "select_nodes",
    "subsample_nodes",
    "induced_subdataset",
    "combined_subsample",
    "NODE_OFF",
    "NODE_AUTO",
    "DEFAULT_NODE_METHOD",
    "node_method",
    "off_line",
]

#: ``method`` values: TMD-optimal candidate, uniform random nodes, random-walk subset alone,
