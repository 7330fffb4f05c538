"""Read and write graph tables as Parquet files (schema metadata is preserved)."""
from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import InputError
from .schema import validate_graph_table

__all__ = ["read_graph_parquet", "write_graph_parquet"]


def read_graph_parquet(path: str | os.PathLike) -> pa.Table:
    """Read a graph-store Parquet file and validate it.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.parquet`` file.

    Returns
    -------
    pyarrow.Table
        The table, checked by :func:`tmdlib.datasets.schema.validate_graph_table`.

    Raises
    ------
    InputError
        If the file is missing, is not Parquet, or does not follow the
        graph-store schema (the error names the 1-based graph row).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "file not found" if not path.exists() else "not a file")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(path, f"not a readable Parquet file: {exc}") from None
    validate_graph_table(table, path)
    return table


def write_graph_parquet(table: pa.Table, path: str | os.PathLike) -> None:
    """Validate ``table`` and write it to ``path`` as Parquet (zstd)."""
    validate_graph_table(table, path)
    pq.write_table(table, path, compression="zstd")
