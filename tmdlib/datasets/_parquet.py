"""Read and write graph tables as Parquet files (schema metadata is preserved)."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .._errors import InputError
from .limits import check_fits
from ._schema import _check_columns, _check_ids, graph_table_metadata, validate_graph_table

__all__ = ["read_graph_parquet", "write_graph_parquet", "copy_graph_parquet", "COPY_BATCH_ROWS"]

#: Graphs per row group when a graph-store Parquet file is copied into the store (:func:`copy_graph_parquet`).
COPY_BATCH_ROWS = 32_768


def read_graph_parquet(path: str | os.PathLike) -> pa.Table:
    """Read a graph-store Parquet file and validate it.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.parquet`` file.

    Returns
    -------
    pyarrow.Table
        The table, checked by :func:`tmdlib.datasets._schema.validate_graph_table`.

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
        raise _unreadable(path, exc) from None
    try:  # names and tmdlib.* metadata are decoded lazily: bad UTF-8 would surface far from the file
        table.schema.names, graph_table_metadata(table)
    except UnicodeDecodeError as exc:
        raise _unreadable(path, exc) from None
    validate_graph_table(table, path)
    return table


def _unreadable(path: Path, exc: Exception) -> InputError:
    """The InputError of a Parquet file that pyarrow cannot read (``exc`` itself when it is one already), or whose
    column names / ``tmdlib.*`` metadata are not UTF-8."""
    if isinstance(exc, InputError):
        return exc
    if isinstance(exc, UnicodeDecodeError):
        return InputError(path, f"a column name or tmdlib.* metadata entry is not UTF-8 ({exc.reason} at byte "
                                f"{exc.start} of {exc.object[:40]!r})")
    return InputError(path, f"not a readable Parquet file: {exc}")


# Parquet physical types (parquet.thrift ``Type``) -> decoded bytes per value; others count 1.
_WIDTH = {0: 1, 1: 4, 2: 8, 3: 12, 4: 4, 5: 8}


def _footer_sizes(path: Path) -> tuple[int, int]:
    """``(num_rows, decoded)`` from a Parquet footer, read without pyarrow (:func:`_footer_groups` summed)."""
    rows, groups = _footer_groups(path)
    return rows, sum(decoded for _, decoded in groups)


def _footer_groups(path: Path) -> tuple[int, list[tuple[int, int]]]:
    """``(num_rows, [(rows, decoded) per row group])`` from a Parquet footer, read without pyarrow.

    ``decoded`` is a lower bound of the decoded size the footer declares: per column chunk,
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
    out = []
    groups = meta.get(4)
    for rg in groups if isinstance(groups, list) else []:
        decoded = 0
        chunks = rg.get(1) if isinstance(rg, dict) else None
        for chunk in chunks if isinstance(chunks, list) else []:
            cm = chunk.get(3) if isinstance(chunk, dict) else None
            if isinstance(cm, dict):
                count, raw = cm.get(5, 0), cm.get(6, 0)
                if isinstance(count, int) and isinstance(raw, int):
                    decoded += max(raw, count * _WIDTH.get(cm.get(1), 1))
        rows = rg.get(3, 0) if isinstance(rg, dict) else 0  # RowGroup field 3: num_rows
        out.append((rows if isinstance(rows, int) else 0, decoded))
    rows = meta.get(3, 0)
    return (rows if isinstance(rows, int) else 0), out


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


def _located(err: InputError, start: int) -> InputError:
    """``err`` of a slice of a table whose first row is ``start``, with the row counted in the whole file."""
    return InputError(err.path, err.problem, None if err.line is None else err.line + start)


def copy_graph_parquet(path: str | os.PathLike, out: str | os.PathLike, task=None, *,
                       batch_rows: int = COPY_BATCH_ROWS,
                       progress: Callable[[int, float], None] | None = None) -> dict:
    """Validate a graph-store Parquet file and write it to ``out`` with its task, a slice at a time.

    The store :func:`read_graph_parquet` and :func:`~tmdlib.datasets._task.store_task` would give (the same
    checks, errors and task), without the table ever being in memory whole, so a file of 10⁷ graphs needs the
    memory of ``batch_rows`` graphs plus 16 bytes per graph:

    1. the ``graph_id`` and ``y`` columns alone: ids unique over the whole file, the task decided (or the
       file's own checked) from every label (:func:`~tmdlib.datasets._task.store_task`);
    2. slices of ``batch_rows`` graphs (``pyarrow.parquet.ParquetFile.iter_batches``, whatever the file's row
       groups): each is validated (:func:`~tmdlib.datasets._schema.validate_graph_table`; a problem is
       reported at its row in the whole file), given its stored labels and written to ``out`` as one row group
       (zstd).

    Parameters
    ----------
    path : str or os.PathLike
        The source ``.parquet`` file in the graph-store schema.
    out : str or os.PathLike
        The store to write (replaced).  A problem found in pass 1 leaves it as it was; one in pass 2 removes
        it (write to a temporary path and rename, as the pipeline does, to keep the old store).
    task : str or TaskSpec, optional
        As for :func:`~tmdlib.datasets._task.store_task` (None / ``"auto"``: the file's own task, or one
        decided from its labels).
    batch_rows : int
        Graphs per slice and per row group of ``out``.
    progress : callable, optional
        ``progress(graphs_done, seconds)`` after each slice.

    Returns
    -------
    dict
        ``graphs``, ``nodes``, ``edges`` (undirected) and ``task`` (the
        :class:`~tmdlib.datasets._task.TaskSpec`).

    Raises
    ------
    InputError
        A missing or unreadable file, a row group too large to decode in memory, or any problem
        :func:`read_graph_parquet` reports (naming the 1-based row of the whole file).
    """
    from ._task import store_task, table_task

    path, out = Path(path), Path(out)
    if not path.is_file():
        raise InputError(path, "file not found" if not path.exists() else "not a file")
    if int(batch_rows) < 1:
        raise ValueError(f"batch_rows must be >= 1; got {batch_rows!r}")
    try:
        _, groups = _footer_groups(path)  # refuse a decompression bomb before pyarrow decodes a row group
        for i, (rows, decoded) in enumerate(groups):
            check_fits(decoded, path, f"row group {i + 1} ({rows} rows, decoded)")
        source = pq.ParquetFile(path, pre_buffer=False)  # pre-buffering would keep every row group read
        schema = source.schema_arrow
        schema.names, graph_table_metadata(schema.empty_table())  # names and metadata decode (UTF-8)
        _check_columns(schema.empty_table(), path)
        head = source.read(columns=["graph_id", "y"])
    except (pa.ArrowException, OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise _unreadable(path, exc) from None
    gid = head.column("graph_id")
    if gid.null_count:
        row = int(np.flatnonzero(~np.asarray(gid.is_valid()))[0])
        raise InputError(path, "column 'graph_id' is null", line=row + 1)
    _check_ids(gid.to_numpy(), path)
    labelled = store_task(head, task, path)
    spec, labels = table_task(labelled), labelled.column("y").combine_chunks()
    meta = labelled.schema.metadata
    del head, gid, labelled  # 8 bytes per graph and target stay: the stored labels
    fields = [pa.field("y", labels.type, nullable=True) if f.name == "y" else f for f in schema]
    final = pa.schema(fields, metadata=meta)
    y_at = final.get_field_index("y")
    graphs = nodes = edges = 0
    start_time = time.perf_counter()
    try:
        with pq.ParquetWriter(out, final, compression="zstd") as writer:
            for batch in source.iter_batches(batch_size=int(batch_rows)):
                table = pa.Table.from_batches([batch]).replace_schema_metadata(final.metadata)
                table = table.set_column(y_at, final.field("y"), labels.slice(graphs, table.num_rows))
                try:
                    validate_graph_table(table, path)
                except InputError as err:
                    raise _located(err, graphs) from None
                writer.write_table(table.cast(final), row_group_size=table.num_rows)
                nodes += int(pc.sum(table.column("num_nodes")).as_py() or 0)
                edges += int(pc.sum(pc.list_value_length(table.column("edge_src"))).as_py() or 0)
                graphs += table.num_rows
                if progress is not None:
                    progress(graphs, time.perf_counter() - start_time)
    except BaseException:
        out.unlink(missing_ok=True)
        raise
    finally:
        source.close()
    return {"graphs": graphs, "nodes": nodes, "edges": edges // 2, "task": spec}
