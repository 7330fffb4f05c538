"""Read and write graph tables as Parquet files (schema metadata is preserved)."""
from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import InputError
from .limits import check_fits
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
        meta = pq.ParquetFile(path).metadata  # the footer only: refuse a decompression bomb before reading
        check_fits(_decoded_bytes(meta), path, f"the table ({meta.num_rows} rows, decoded)")
        table = pq.read_table(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(path, f"not a readable Parquet file: {exc}") from None
    validate_graph_table(table, path)
    return table


def _decoded_bytes(meta) -> int:
    """Lower bound of the decoded size a Parquet footer declares: per column chunk, its values times
    their width, or its uncompressed pages if larger (run-length encoding hides the first)."""
    width = {"BOOLEAN": 1, "INT32": 4, "FLOAT": 4, "INT64": 8, "DOUBLE": 8, "INT96": 12}
    total = 0
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        for j in range(rg.num_columns):
            c = rg.column(j)
            total += max(int(c.total_uncompressed_size), int(c.num_values) * width.get(c.physical_type, 1))
    return total


def write_graph_parquet(table: pa.Table, path: str | os.PathLike) -> None:
    """Validate ``table`` and write it to ``path`` as Parquet (zstd)."""
    validate_graph_table(table, path)
    pq.write_table(table, path, compression="zstd")
