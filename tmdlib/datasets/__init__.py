"""Dataset readers and validators producing graph-store Arrow tables.

One row per graph (see :mod:`tmdlib.datasets.schema`); turn a table into
numpy arrays with :meth:`tmdlib.graph.GraphDataset.from_arrow`.

Readers: :func:`read_tu` (TU text layout), :func:`read_ogb` (OGB raw layout),
:func:`read_smiles_csv` (CSV of SMILES, needs ogb + rdkit),
:func:`read_graph_parquet`.  Checks: :func:`validate_graph_table`,
:func:`verify_sha256sums`, :func:`check_dataset_name`.
"""
from .checksums import sha256_file, verify_sha256sums
from .ogb import ATOM_FEATURE_DIMS, one_hot_atom_features, read_ogb
from .parquet import read_graph_parquet, write_graph_parquet
from .registry import (DATASETS, DatasetInfo, check_dataset_name, dataset_names, get_dataset_info,
                       load_builtin, metric_for)
from .schema import (base_fields, build_graph_table, canonical_edges, graph_table_metadata, ogb_fields,
                     tu_fields, validate_graph_table)
from .smiles import read_smiles_csv
from .tu import read_tu

__all__ = [
    "ATOM_FEATURE_DIMS",
    "DATASETS",
    "DatasetInfo",
    "base_fields",
    "build_graph_table",
    "canonical_edges",
    "check_dataset_name",
    "dataset_names",
    "get_dataset_info",
    "graph_table_metadata",
    "load_builtin",
    "metric_for",
    "ogb_fields",
    "one_hot_atom_features",
    "read_graph_parquet",
    "read_ogb",
    "read_smiles_csv",
    "read_tu",
    "sha256_file",
    "tu_fields",
    "validate_graph_table",
    "verify_sha256sums",
    "write_graph_parquet",
]
