r"""The distance engine: exact Tree Mover's Distance and tree norms (Jain et al., Section 2; Algorithm 1).

* :func:`tmd`, :func:`tmd_block`, :func:`tmd_matrix`, :func:`tmd_pairs` -- exact
  :math:`\mathrm{TMD}^L_w` between two graphs, two sets of graphs, all pairs of a dataset, or
  listed pairs (:mod:`tmdlib.distance._engine`).
* :func:`tree_norm` -- :math:`\mathrm{TN}^L_w(G) = \mathrm{TMD}^L_w(G, \mathbf 0)` in
  :math:`O(L\,|E|)` (:mod:`tmdlib.distance._treenorm`).
* :func:`pascal_weights`, :func:`resolve_weights`, :func:`parse_weights` -- the level weights
  :math:`w` (:mod:`tmdlib.distance._weights`).

Internals: :mod:`~tmdlib.distance._ids` (canonical computation-tree ids, WL-style),
:mod:`~tmdlib.distance._kernels` (numba tables and per-pair recursion),
:mod:`~tmdlib.distance.assign` (exact assignment solvers).

* :func:`engine_fingerprint` -- a hash of the engine's source files and the numpy / numba versions,
  part of the key of every cache of TMD values (:mod:`tmdlib.distance._fingerprint`).
"""
from ._fingerprint import engine_fingerprint, install_numba_cache_key

install_numba_cache_key()  # before any compiled kernel of tmdlib is defined (see tmdlib.distance._fingerprint)

from ._engine import DEFAULT_MEMORY_LIMIT, tmd, tmd_block, tmd_matrix, tmd_memory_plan, tmd_pairs, warmup  # noqa: E402
from ._treenorm import tree_norm, tree_norm_node_terms  # noqa: E402
from ._weights import WeightsLike, parse_weights, pascal_weights, resolve_weights  # noqa: E402

__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "WeightsLike",
    "engine_fingerprint",
    "parse_weights",
    "pascal_weights",
    "resolve_weights",
    "tmd",
    "tmd_block",
    "tmd_matrix",
    "tmd_memory_plan",
    "tmd_pairs",
    "tree_norm",
    "tree_norm_node_terms",
    "warmup",
]
