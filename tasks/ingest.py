"""Ingestion tasks: raw source -> validated Arrow table -> Parquet graph store."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.compute as pc
from prefect import task

from tmdlib import datasets as tds

from . import io


@task(name="verify-checksums", persist_result=False)
def verify_checksums(raw_root: str, folder: str) -> list[str]:
    """Check the sha256 of every shipped raw file of ``folder`` against ``raw_root/SHA256SUMS``."""
    return tds.verify_sha256sums(raw_root, only=folder)


@task(name="read-source", persist_result=False)
def read_source(kind: str, path: str, name: str, node_attributes: bool = False,
                smiles_column: str = "smiles", label_column: str | None = None):
    """Read one source (``tu`` folder, ``ogb`` folder, ``smiles`` CSV or graph-store ``parquet``)."""
    if kind == "tu":
        return tds.read_tu(path, name=name, node_attributes=node_attributes)
    if kind == "ogb":
        return tds.read_ogb(path, name=name)
    if kind == "smiles":
        return tds.read_smiles_csv(path, smiles_column=smiles_column, label_column=label_column)
    if kind == "parquet":
        return tds.read_graph_parquet(path)
    raise ValueError(f"unknown source kind {kind!r}")


@task(name="write-graph-store", persist_result=False)
def write_graph_store(table, out: str) -> dict:
    """Validate ``table`` and write it atomically to ``out``; return summary statistics."""
    tds.validate_graph_table(table, out)
    io.write_parquet(out, table)
    n_nodes = table.column("num_nodes").to_numpy()
    n_edges = pc.list_value_length(table.column("edge_src")).to_numpy() // 2
    return {
        "path": str(Path(out)),
        "graphs": int(table.num_rows),
        "mean_nodes": float(n_nodes.mean()) if table.num_rows else 0.0,
        "mean_edges": float(n_edges.mean()) if table.num_rows else 0.0,
        "sha256": io.sha256_file(out),
    }
