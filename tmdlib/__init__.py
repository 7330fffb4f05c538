"""tmdlib: Tree Mover's Distance, tree norms and provable graph/node subsampling.

Pure numpy/scipy/POT library (numba for the hot loops).  No Prefect, DVC,
MLflow or file-layout knowledge lives here; torch/PyG code is kept apart in
:mod:`tmdlib.pyg`.
"""
from .errors import InputError
from .graph import Graph, GraphDataset, GraphValidationError
from .treenorm import tree_norm, tree_norm_node_terms
from .weights import parse_weights, pascal_weights, resolve_weights

__all__ = [
    "Graph",
    "GraphDataset",
    "GraphValidationError",
    "InputError",
    "tree_norm",
    "tree_norm_node_terms",
    "resolve_weights",
    "pascal_weights",
    "parse_weights",
]
__version__ = "0.1.0"
