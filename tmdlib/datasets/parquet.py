"""Read and write graph tables as Parquet files (schema metadata is preserved)."""
from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import InputError
from .limits import check_fits
from .schema import graph_table_metadata, validate_graph_table

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
        # The footer only, parsed here: refuse a decompression bomb before reading.  Not through
        # pyarrow's RowGroupMetaData.column(), which aborts the process (an uncaught C++ exception)
        # on a malformed size-statistics histogram instead of raising.
        num_rows, decoded = _footer_sizes(path)
        check_fits(decoded, path, f"the table ({num_rows} rows, decoded)")
        table = pq.read_table(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(path, f"not a readable Parquet file: {exc}") from None
    try:  # names and tmdlib.* metadata are decoded lazily: bad UTF-8 would surface far from the file
        table.schema.names, graph_table_metadata(table)
    except UnicodeDecodeError as exc:
        raise InputError(path, f"a column name or tmdlib.* metadata entry is not UTF-8 ({exc.reason} at byte "
                               f"{exc.start} of {exc.object[:40]!r})") from None
    validate_graph_table(table, path)
    return table


# Parquet physical types (parquet.thrift ``Type``) -> decoded bytes per value; others count 1.
_WIDTH = {0: 1, 1: 4, 2: 8, 3: 12, 4: 4, 5: 8}


def _footer_sizes(path: Path) -> tuple[int, int]:
    """``(num_rows, decoded)`` from a Parquet footer, read without pyarrow.

    ``decoded`` is a lower bound of the decoded table size the footer declares: per column chunk,
    ``max(total_uncompressed_size, num_values * width)`` (run-length encoding hides the second in the
    first).  The footer is Thrift compact protocol (``FileMetaData``: field 3 ``num_rows``, field 4
    ``row_groups``; ``RowGroup`` field 1 ``columns``; ``ColumnChunk`` field 3 ``meta_data``;
    ``ColumnMetaData`` fields 1 ``type``, 5 ``num_values``, 6 ``total_uncompressed_size``).  Malformed
    bytes raise ``ValueError``.
    """
    size = path.stat().st_size
    with open(path, "rb") as fh:
        if size < 12:
            raise ValueError("too short for Parquet")
        fh.seek(size - 8)
        tail = fh.read(8)
        if tail[4:] == b"PARE":
            raise ValueError("encrypted footers are not supported")
        if tail[4:] != b"PAR1":
            raise ValueError("Parquet magic bytes not found at the end")
        n = int.from_bytes(tail[:4], "little")
        if n > size - 12:
            raise ValueError(f"footer length {n} exceeds the file")
        fh.seek(size - 8 - n)
        meta = _Compact(fh.read(n)).struct()
    decoded = 0
    groups = meta.get(4)
    for rg in groups if isinstance(groups, list) else []:
        chunks = rg.get(1) if isinstance(rg, dict) else None
        for chunk in chunks if isinstance(chunks, list) else []:
            cm = chunk.get(3) if isinstance(chunk, dict) else None
            if isinstance(cm, dict):
                count, raw = cm.get(5, 0), cm.get(6, 0)
                if isinstance(count, int) and isinstance(raw, int):
                    decoded += max(raw, count * _WIDTH.get(cm.get(1), 1))
    rows = meta.get(3, 0)
    return (rows if isinstance(rows, int) else 0), decoded


class _Compact:
    """Minimal Thrift compact-protocol reader: structs as ``{field id: value}``, every type skipped
    or read generically, bounds-checked (truncated or oversized input raises ``ValueError``)."""

    def __init__(self, data: bytes):
        self.data, self.pos, self.depth = data, 0, 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise ValueError("footer truncated")
        self.pos += 1
        return self.data[self.pos - 1]

    def varint(self) -> int:
        out = shift = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if b < 0x80:
                return out
            shift += 7
            if shift > 63:
                raise ValueError("footer varint too long")

    def zigzag(self) -> int:
        v = self.varint()
        return (v >> 1) ^ -(v & 1)

    def value(self, kind: int):
        if kind in (1, 2):  # booleans in a struct field header
            return kind == 1
        if kind == 3:
            return self.byte()
        if kind in (4, 5, 6):
            return self.zigzag()
        if kind == 7:
            self.skip(8)
            return None
        if kind == 8:
            self.skip(self.varint())
            return None
        if kind in (9, 10):
            head = self.byte()
            count = head >> 4 if head >> 4 != 15 else self.varint()
            elem = head & 0x0F
            if count > len(self.data) - self.pos:  # every element takes >= 1 byte
                raise ValueError("footer list longer than the footer")
            if elem in (1, 2):
                self.skip(count)
                return None
            return [self.value(elem) for _ in range(count)]
        if kind == 11:
            count = self.varint()
            if count:
                types = self.byte()
                if 2 * count > len(self.data) - self.pos:
                    raise ValueError("footer map longer than the footer")
                for _ in range(count):
                    self.value(types >> 4 if types >> 4 not in (1, 2) else 3)
                    self.value(types & 0x0F if types & 0x0F not in (1, 2) else 3)
            return None
        if kind == 12:
            return self.struct()
        raise ValueError(f"footer holds an unknown Thrift type {kind}")

    def skip(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("footer truncated")
        self.pos += n

    def struct(self) -> dict:
        self.depth += 1
        if self.depth > 64:
            raise ValueError("footer nested too deeply")
        out, last = {}, 0
        while True:
            head = self.byte()
            if head == 0:
                self.depth -= 1
                return out
            delta, kind = head >> 4, head & 0x0F
            fid = last + delta if delta else self.zigzag()
            out[fid] = self.value(kind)
            last = fid


def write_graph_parquet(table: pa.Table, path: str | os.PathLike) -> None:
    """Validate ``table`` and write it to ``path`` as Parquet (zstd)."""
    validate_graph_table(table, path)
    pq.write_table(table, path, compression="zstd")
