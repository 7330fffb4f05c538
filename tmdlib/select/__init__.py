r"""Selection: which graphs, and which nodes of each graph, to keep (Jain et al., Sections 3-4).

* :func:`select_graphs` -- **the** entry point for graphs: any registered method (:mod:`~tmdlib.select._methods`:
  ``tmd``, ``random``, ``feature``, ``wl`` and the chemists' pickers) returns a :class:`Selection` carrying the
  exact TMD certificate of Lemma 3.2; :mod:`~tmdlib.select._registry` declares each method once.
* :func:`plan_selection` -- the policy, decided once: budget, TMD engine (:func:`resolve_engine`), the scalable
  search's part size and pair budget, with lines that say what was chosen (:mod:`~tmdlib.select._plan`).
* :mod:`~tmdlib.select._coreset` -- k-medoids coresets on a distance matrix: medoids
  :math:`\mathcal I`, cluster sizes :math:`\tau`, objective :math:`\varepsilon`
  (:func:`kmedoids_coreset`), and label reuse (:func:`reuse_labelled`).
* :mod:`~tmdlib.select._baselines` -- the paper's baselines: Random, Feature (mean node feature)
  and WL-kernel distances.
* :mod:`~tmdlib.select.nodes` -- node subsampling: the candidate with the largest tree norm.
* :mod:`~tmdlib.select._split` -- the seeded 80/20 train/test split.

A new selection method goes here: a function of a :class:`~tmdlib.select._registry.Problem` returning a
:class:`~tmdlib.select._registry.Picked` (positions and weights), never reading labels, registered once with
:func:`~tmdlib.select._registry.register` (see :mod:`tmdlib.select._methods`).
"""
from ._api import Selection, select_graphs
from ._certificate import CoresetCertificate, matrix_node_pairs, resolve_engine, tmd_coreset, verify_certificate
from ._baselines import feature_distance_matrix, random_selection, wl_distance_matrix
from ._coreset import (CoresetResult, assign_to_medoids, budget_to_k, kmedoids_coreset, medoids_objective,
                      reuse_labelled, validate_distance_matrix)
from .nodes import NodeSubsample, select_nodes, subsample_nodes
from ._plan import SelectionPlan, plan_selection
from ._registry import MethodSpec, get_method, method_names, register
from . import _methods as methods  # noqa: E402,F401  (registers the built-in methods, once)
from ._split import batched_train_test_split, train_test_split

__all__ = [
    "CoresetCertificate",
    "CoresetResult",
    "MethodSpec",
    "NodeSubsample",
    "Selection",
    "SelectionPlan",
    "assign_to_medoids",
    "batched_train_test_split",
    "budget_to_k",
    "feature_distance_matrix",
    "get_method",
    "kmedoids_coreset",
    "matrix_node_pairs",
    "medoids_objective",
    "method_names",
    "plan_selection",
    "random_selection",
    "register",
    "resolve_engine",
    "reuse_labelled",
    "select_graphs",
    "select_nodes",
    "subsample_nodes",
    "tmd_coreset",
    "train_test_split",
    "validate_distance_matrix",
    "verify_certificate",
    "wl_distance_matrix",
]
