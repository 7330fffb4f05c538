r"""Selection: which graphs, and which nodes of each graph, to keep (Jain et al., Sections 3-4).

* :mod:`~tmdlib.select.coreset` -- k-medoids coresets on a distance matrix: medoids
  :math:`\mathcal I`, cluster sizes :math:`\tau`, objective :math:`\varepsilon`
  (:func:`kmedoids_coreset`), and label reuse (:func:`reuse_labelled`).
* :mod:`~tmdlib.select.baselines` -- the paper's baselines: Random, Feature (mean node feature)
  and WL-kernel distances.
* :mod:`~tmdlib.select.nodes` -- node subsampling: the candidate with the largest tree norm.
* :mod:`~tmdlib.select.split` -- the seeded 80/20 train/test split.

A new selection method goes here: a function of a :class:`~tmdlib.graph.GraphDataset` (or of a
distance matrix) returning positions and weights, never reading labels.
"""
from .certificate import CoresetCertificate, tmd_coreset, verify_certificate
from .baselines import feature_distance_matrix, random_selection, wl_distance_matrix
from .coreset import (CoresetResult, assign_to_medoids, budget_to_k, kmedoids_coreset, medoids_objective,
                      reuse_labelled, validate_distance_matrix)
from .nodes import NodeSubsample, select_nodes, subsample_nodes
from .split import batched_train_test_split, train_test_split

__all__ = [
    "CoresetCertificate",
    "CoresetResult",
    "NodeSubsample",
    "assign_to_medoids",
    "batched_train_test_split",
    "budget_to_k",
    "feature_distance_matrix",
    "kmedoids_coreset",
    "medoids_objective",
    "random_selection",
    "reuse_labelled",
    "select_nodes",
    "subsample_nodes",
    "tmd_coreset",
    "train_test_split",
    "validate_distance_matrix",
    "verify_certificate",
    "wl_distance_matrix",
]
