r"""tmdlib: Tree Mover's Distance, tree norms and provable graph / node subsampling.

The library behind ``tmdsub`` (Jain et al., *Subsampling Graphs with GNN Performance Guarantees*),
grouped by problem like POT's ``ot/``:

=============================  =====================================================================
:mod:`tmdlib.distance`         exact TMD (:func:`tmd`, :func:`tmd_block`, :func:`tmd_matrix`,
                               :func:`tmd_pairs`) and tree norms (:func:`tree_norm`, Algorithm 1)
:mod:`tmdlib.select`           graph selection in one call (:func:`select_graphs`: TMD coresets,
                               baselines, chemists' pickers, each with its certificate), node
                               subsampling (:func:`select_nodes`, :func:`subsample_nodes`), the split
:mod:`tmdlib.guarantees`       Lemma 3.2 / Corollaries 3.3 and 4.1: :math:`c\,\varepsilon`, :math:`2c\,\varepsilon`,
                               and :func:`bound_verdict` (informative or vacuous)
:mod:`tmdlib.datasets`         readers (TU, OGB, SMILES, Parquet) into the graph-store table, labels I/O
:mod:`tmdlib.reporting`        tables, plots and audit pages (pure functions)
:mod:`tmdlib.experiment`       the paper's experiment grid (its cell runner imports torch)
:mod:`tmdlib.torch`            GIN, certified training, PyG adapter -- imported explicitly
=============================  =====================================================================

Pure numpy / scipy / POT / numba: ``import tmdlib`` imports no torch, Prefect, MLflow or DVC, and no
file layout lives here.

Examples
--------
>>> import numpy as np, tmdlib
>>> path = tmdlib.Graph(np.ones((3, 1)), np.array([[0, 1, 1, 2], [1, 0, 2, 1]]))
>>> edge = tmdlib.Graph(np.ones((2, 1)), np.array([[0, 1], [1, 0]]))
>>> round(tmdlib.tmd(path, edge, depth=2), 6) == round(tmdlib.tree_norm(path, 2) - tmdlib.tree_norm(edge, 2), 6)
True
"""
from .distance import (DEFAULT_MEMORY_LIMIT, parse_weights, pascal_weights, resolve_weights, tmd, tmd_block,
                       tmd_matrix, tmd_memory_plan, tmd_pairs, tree_norm, tree_norm_node_terms)
from ._errors import InputError
from ._graph import FEATURE_LIMIT, Graph, GraphDataset, GraphValidationError
from .guarantees import bound_verdict, erm_bound, lemma_bound
from .select import (CoresetResult, NodeSubsample, Selection, assign_to_medoids, budget_to_k, kmedoids_coreset,
                     medoids_objective, method_names, select_graphs, select_nodes, subsample_nodes, train_test_split)

__all__ = [
    "CoresetResult",
    "DEFAULT_MEMORY_LIMIT",
    "FEATURE_LIMIT",
    "Graph",
    "GraphDataset",
    "GraphValidationError",
    "InputError",
    "NodeSubsample",
    "Selection",
    "assign_to_medoids",
    "bound_verdict",
    "budget_to_k",
    "erm_bound",
    "kmedoids_coreset",
    "lemma_bound",
    "medoids_objective",
    "method_names",
    "parse_weights",
    "pascal_weights",
    "resolve_weights",
    "select_graphs",
    "select_nodes",
    "subsample_nodes",
    "tmd",
    "tmd_block",
    "tmd_matrix",
    "tmd_memory_plan",
    "tmd_pairs",
    "train_test_split",
    "tree_norm",
    "tree_norm_node_terms",
]
__version__ = "0.1.0"
