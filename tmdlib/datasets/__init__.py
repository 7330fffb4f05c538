"""Dataset readers and validators producing graph-store Arrow tables.

One row per graph (see :mod:`tmdlib.datasets._schema`); turn a table into
numpy arrays with :func:`to_dataset`.  What the labels are: :mod:`tmdlib.datasets._task`
(:class:`TaskSpec`); store identity: :mod:`tmdlib.datasets._identity`.

Readers: :func:`read_tu` (TU text layout), :func:`read_ogb` (OGB raw layout),
:func:`read_smiles_csv` (CSV of SMILES, needs ogb + rdkit),
:func:`read_graph_parquet`, :class:`StoredGraphs` (a pool read from its store a chunk at a time).  Checks: :func:`validate_graph_table`,
:func:`verify_sha256sums`, :func:`check_dataset_name`.  Every reader decides the task
type of its labels (:mod:`tmdlib.datasets._task`: :class:`TaskSpec`, stored in the schema metadata).
"""
from ._arrow import to_dataset
from ._checksums import sha256_file, verify_sha256sums
from ._identity import content_hash, graph_hashes, store_content_hash
from ._ogb import ATOM_FEATURE_DIMS, one_hot_atom_features, read_ogb
from ._parquet import copy_graph_parquet, read_graph_parquet, write_graph_parquet
from ._registry import (ACE_SETS, DATASETS, DatasetInfo, check_dataset_name, dataset_names, get_dataset_info,
                       load_builtin, metric_for)
from ._schema import (base_fields, build_graph_table, canonical_edges, graph_table_metadata, ogb_fields,
                     tu_fields, validate_graph_table)
from ._stored import PartReader, StoredGraphs
from ._smiles import csv_header, default_csv_columns, read_smiles_csv, write_smiles_parquet
from ._task import (META_TASK, TASK_TYPES, TaskSpec, infer_task, store_task, table_labels, table_task,
                   task_and_labels, task_of_metadata, validate_labels)
from ._tu import read_tu

__all__ = [
    "ACE_SETS",
    "ATOM_FEATURE_DIMS",
    "TASK_TYPES",
    "TaskSpec",
    "DATASETS",
    "DatasetInfo",
    "META_TASK",
    "base_fields",
    "build_graph_table",
    "canonical_edges",
    "check_dataset_name",
    "csv_header",
    "default_csv_columns",
    "content_hash",
    "dataset_names",
    "get_dataset_info",
    "graph_hashes",
    "graph_table_metadata",
    "infer_task",
    "load_builtin",
    "metric_for",
    "ogb_fields",
    "PartReader",
    "StoredGraphs",
    "one_hot_atom_features",
    "read_graph_parquet",
    "copy_graph_parquet",
    "read_ogb",
    "read_smiles_csv",
    "write_smiles_parquet",
    "read_tu",
    "sha256_file",
    "store_task",
    "table_labels",
    "table_task",
    "task_and_labels",
    "task_of_metadata",
    "store_content_hash",
    "to_dataset",
    "tu_fields",
    "validate_graph_table",
    "validate_labels",
    "verify_sha256sums",
    "write_graph_parquet",
]
