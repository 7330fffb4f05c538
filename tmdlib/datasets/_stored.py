r"""Pools larger than memory: the graphs of a graph-store file, read a chunk of rows at a time.

A :class:`StoredGraphs` stands for the graphs at some rows of a graph-store Parquet file (all of them, or a
training pool) without holding them: what it keeps is a few numbers per graph (ids, sizes).  The scalable
TMD engine (:func:`tmdlib.select.scalable.scalable_coreset`) accepts one wherever it accepts a
:class:`~tmdlib._graph.GraphDataset`, and then holds one chunk of rows, or one part of the pool, at a time:

* :meth:`StoredGraphs.chunks` -- the pool in order, ``chunk_rows`` graphs at a time (per-graph summaries:
  content hashes, the structure embedding that partitions the pool);
* :meth:`StoredGraphs.part_reader` -- after the pool is split into parts of similar graphs, one more pass
  writes each chunk's graphs grouped by part into a scratch Arrow IPC file (one record batch per chunk and
  part), after which :meth:`PartReader.load` reads only the batches of one part.

Every chunk is checked as :func:`tmdlib.datasets.read_graph_parquet` checks a whole table
(:func:`~tmdlib.datasets._schema.validate_graph_table`, rows numbered in the file), graph ids across the
whole file.  Memory: :math:`O(n)` small integers plus one chunk, whatever the size of the store.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from .._errors import InputError
from .._graph import GraphDataset

__all__ = ["StoredGraphs", "PartReader", "CHUNK_ROWS"]

#: Graphs decoded at a time (MOSES: ~16 MB of arrays per chunk).
CHUNK_ROWS = 32768

_GRAPH_COLUMNS = ("graph_id", "num_nodes", "edge_src", "edge_dst")


#: Stores whose every row passed :func:`~tmdlib.datasets._schema.validate_graph_table` in this process, by
#: :func:`_file_identity`: a later pass over the same, unchanged file does not check its rows again.
_CHECKED: set[tuple] = set()


def _file_identity(path: Path) -> tuple:
    """``(real path, inode, size, mtime ns)``: a rewritten store is another file."""
    st = os.stat(path)
    return os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns


def _open(path: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not path.is_file():
        raise InputError(path, "file not found" if not path.exists() else "not a file")
    try:
        # no pre-buffering: with it, a pass over the store keeps every row group it has read (the compressed
        # file, 0.6 GB at 10⁷ molecules) until the file is closed
        return pq.ParquetFile(path, pre_buffer=False)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(path, f"not a readable Parquet file: {exc}") from None


def _dense_width(pf) -> int:
    for batch in pf.iter_batches(batch_size=1024, columns=["x"]):
        rows = batch.column(0).flatten()
        if len(rows):
            return int(rows.value_lengths()[0].as_py())
    return 1


def release_arrow_memory() -> None:
    """Hand Arrow's freed buffers back to the system now, not at its allocator's leisure (after a pass)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


class StoredGraphs:
    r"""The graphs at ``rows`` of a graph-store Parquet file, read on demand.

    Parameters
    ----------
    path : str or os.PathLike
        The graph store (:mod:`tmdlib.datasets._schema`).
    rows : array_like of int, shape (n,), optional
        Strictly increasing row positions of the pool in the file (default: every row).
    chunk_rows : int
        Graphs decoded at a time.

    Attributes
    ----------
    path : Path
    rows : ndarray of int64, shape (n,)
    graph_ids : ndarray of int64, shape (n,)
    nodes_per_graph : ndarray of int64, shape (n,)
    features : ndarray of float64, shape (F, d)
        The store's feature table (the dense layout has none: ``(0, d)``).
    num_features : int
        ``d``.

    Raises
    ------
    InputError
        The file is missing or not Parquet, lacks the graph columns, or repeats a graph id (naming the row).
    """

    def __init__(self, path: str | os.PathLike, rows=None, *, chunk_rows: int = CHUNK_ROWS):
        import pyarrow.compute as pc

        from ._schema import _check_columns, feature_table_of

        self.path = Path(path)
        pf = _open(self.path)
        schema = pf.schema_arrow
        try:
            empty = schema.empty_table()
            _check_columns(empty, self.path)
            self._feat = "x_id" if "x_id" in schema.names else "x"
            table = pf.read(columns=["graph_id", "num_nodes"])
        except UnicodeDecodeError as exc:
            raise InputError(self.path, f"a column name or metadata entry is not UTF-8 ({exc.reason})") from None
        if table.column("graph_id").null_count or table.column("num_nodes").null_count:
            col = "graph_id" if table.column("graph_id").null_count else "num_nodes"
            first = int(pc.index(pc.is_null(table.column(col)), True).as_py()) + 1
            raise InputError(self.path, f"column {col!r} is null", first)
        ids = table.column("graph_id").to_numpy().astype(np.int64)
        order = np.argsort(ids, kind="stable")
        dup = np.flatnonzero(ids[order][1:] == ids[order][:-1])
        if dup.size:
            row = int(order[dup[0] + 1])
            raise InputError(self.path, f"graph_id {int(ids[row])} repeated (first at row {int(order[dup[0]]) + 1})",
                             row + 1)
        self.num_rows = len(ids)
        self.rows = np.arange(self.num_rows, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
        if self.rows.ndim != 1 or (self.rows.size and (self.rows[0] < 0 or self.rows[-1] >= self.num_rows
                                                       or np.any(np.diff(self.rows) <= 0))):
            raise ValueError(f"rows must be strictly increasing positions in [0, {self.num_rows})")
        self.graph_ids = ids[self.rows]
        self.nodes_per_graph = table.column("num_nodes").to_numpy().astype(np.int64)[self.rows]
        self.features = feature_table_of(empty, self.path) if self._feat == "x_id" else None
        if self.features is None:  # the dense layout (schema version 1): d from the first node's row
            self.num_features = _dense_width(pf)
            self.features = np.zeros((0, self.num_features))
        else:
            self.num_features = int(self.features.shape[1])
        self.chunk_rows = int(chunk_rows)
        self._schema = schema
        del table
        release_arrow_memory()  # the two columns read whole

    def __len__(self) -> int:
        return int(self.rows.size)

    def __repr__(self) -> str:
        return f"StoredGraphs({str(self.path)!r}, graphs={len(self)} of {self.num_rows})"

    def subset(self, positions) -> "StoredGraphs":
        """The pool's graphs at ``positions`` (strictly increasing positions into this pool)."""
        out = object.__new__(StoredGraphs)
        out.__dict__.update(self.__dict__)
        pos = np.asarray(positions, dtype=np.int64)
        out.rows = self.rows[pos]
        out.graph_ids = self.graph_ids[pos]
        out.nodes_per_graph = self.nodes_per_graph[pos]
        if out.rows.size > 1 and np.any(np.diff(out.rows) <= 0):
            raise ValueError("positions must be strictly increasing")
        return out

    @property
    def num_nodes(self) -> int:
        return int(self.nodes_per_graph.sum())

    def _tables(self, chunk_rows: int | None = None) -> Iterator[tuple[int, object]]:
        """``(first pool position, Arrow table of the pool's rows in the chunk)``, checked, in pool order.

        A store whose every row was checked by an earlier pass of this process, and whose file has not changed
        since (:func:`_file_identity`), is not checked again: a select reads its pool three times (hashes,
        embedding, grouping by part), ~6 s of checks each at 1.6 M molecules.
        """
        import pyarrow as pa

        from ._schema import validate_graph_table

        pf = _open(self.path)
        identity = _file_identity(self.path)
        check = identity not in _CHECKED  # checked whole in this process, and not rewritten since: not again
        cols = [*_GRAPH_COLUMNS, self._feat, "y"]  # what validate_graph_table needs
        schema = pa.schema([self._schema.field(c) for c in cols], metadata=self._schema.metadata)
        start, done, checked = 0, 0, 0
        for batch in pf.iter_batches(batch_size=int(chunk_rows or self.chunk_rows), columns=cols,
                                     use_pandas_metadata=False):
            stop = start + batch.num_rows
            lo, hi = np.searchsorted(self.rows, [start, stop])
            if hi > lo:
                table = pa.Table.from_batches([batch], schema=schema)
                if check:
                    try:
                        validate_graph_table(table, self.path)
                    except InputError as err:
                        raise InputError(self.path, err.problem,
                                         None if err.line is None else err.line + start) from None
                    checked += batch.num_rows
                    if checked == pf.metadata.num_rows and _file_identity(self.path) == identity:
                        _CHECKED.add(identity)
                if hi - lo < batch.num_rows:
                    table = table.take(pa.array(self.rows[lo:hi] - start))
                yield int(lo), table
                done = hi
            start = stop
            if done >= len(self):
                break

    def chunks(self, chunk_rows: int | None = None) -> Iterator[tuple[int, GraphDataset]]:
        """The pool in order, a chunk at a time.

        Yields
        ------
        start : int
            Pool position of the chunk's first graph.
        chunk : GraphDataset
            Its graphs (the store's feature table, labels included).
        """
        from ._arrow import to_dataset

        for start, table in self._tables(chunk_rows):
            yield start, to_dataset(table, checked=True)  # _tables checked it

    def map_chunks(self, fn: Callable[[GraphDataset], object], empty: np.ndarray,
                   chunk_rows: int | None = None, progress: Callable[[int], None] | None = None) -> np.ndarray:
        """``fn`` of each chunk (:meth:`chunks`), its rows gathered into one array: one chunk in memory at a time.

        Parameters
        ----------
        fn : callable
            ``fn(chunk)``: one row per graph of the chunk (array_like of shape ``(m, ...)``).
        empty : ndarray, shape (0, ...)
            The result's dtype and row shape (returned as it is for an empty pool).
        progress : callable, optional
            ``progress(done)`` after each chunk, with the graphs done so far (a pass over 10^7 graphs takes
            minutes).

        Returns
        -------
        ndarray, shape (n, ...)
            Row ``i`` is ``fn``'s row for graph ``i`` of the pool.

        Notes
        -----
        Arrow's allocator keeps freed chunk buffers for reuse; they are handed back once the pass is over
        (~100 MB at 1.6 M molecules, which the next pass's numpy arrays could not reuse).
        """
        out = empty
        for start, chunk in self.chunks(chunk_rows):
            if out is empty:
                out = np.empty((len(self), *empty.shape[1:]), dtype=empty.dtype)
            out[start:start + len(chunk)] = fn(chunk)
            if progress is not None:
                progress(start + len(chunk))
            del chunk
        release_arrow_memory()
        return out

    def load(self) -> GraphDataset:
        """The whole pool in memory (what ``to_dataset(read_graph_parquet(path)).take(rows)`` gives)."""
        import pyarrow as pa

        from ._arrow import to_dataset

        tables = [table for _, table in self._tables()]
        return to_dataset(pa.concat_tables(tables) if tables else self._schema.empty_table(), checked=True)

    def part_reader(self, parts: Sequence[np.ndarray], scratch_dir: str | os.PathLike | None = None,
                    chunk_rows: int | None = None, progress: Callable[[int], None] | None = None) -> "PartReader":
        """Group the pool by ``parts`` in a scratch file (one pass) for :meth:`PartReader.load`.

        Parameters
        ----------
        parts : sequence of ndarray of int64
            Disjoint pool positions of each part.
        scratch_dir : path, optional
            Where the scratch file goes (default: the system's temporary folder); removed by
            :meth:`PartReader.close`.
        chunk_rows : int, optional
            Graphs read at a time (default: the pool's ``chunk_rows``).
        progress : callable, optional
            ``progress(done)`` after each chunk, with the graphs grouped so far.
        """
        return PartReader(self, parts, scratch_dir, chunk_rows or self.chunk_rows, progress)


class PartReader:
    """The graphs of each part of a :class:`StoredGraphs` pool, from a scratch file grouped by part.

    Made by :meth:`StoredGraphs.part_reader`; :meth:`load` reads one part's batches only.  Use it as a context
    manager, or call :meth:`close` (removes the scratch file).
    """

    def __init__(self, pool: StoredGraphs, parts: Sequence[np.ndarray], scratch_dir, chunk_rows: int,
                 progress: Callable[[int], None] | None = None):
        import pyarrow as pa

        self.parts = [np.asarray(p, dtype=np.int64) for p in parts]
        n = len(pool)
        part_of = np.full(n, -1, dtype=np.int32)
        for i, p in enumerate(self.parts):
            if p.size and (p.min() < 0 or p.max() >= n or np.any(part_of[p] >= 0)):
                raise ValueError("parts must be disjoint positions of the pool")
            part_of[p] = i
        Path(scratch_dir or tempfile.gettempdir()).mkdir(parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix="tmdsub-parts-", dir=scratch_dir))
        self.file = self.dir / "parts.arrow"
        self.batches: list[list[int]] = [[] for _ in self.parts]
        self.schema = None
        try:
            count, writer, table = 0, None, None
            cols = ["graph_id", pool._feat, "edge_src", "edge_dst"]  # what a part's solve reads
            for start, table in pool._tables(chunk_rows):
                table = table.select(cols)
                if writer is None:
                    self.schema = table.schema
                    writer = pa.ipc.new_file(str(self.file), self.schema)
                owner = part_of[start:start + table.num_rows]
                order = np.argsort(owner, kind="stable")
                table = table.take(pa.array(order)).combine_chunks()
                bounds = np.searchsorted(owner[order], np.arange(len(self.parts) + 1))
                for i in np.flatnonzero(np.diff(bounds)):
                    piece = table.slice(int(bounds[i]), int(bounds[i + 1] - bounds[i])).combine_chunks()
                    for rb in piece.to_batches():
                        writer.write_batch(rb)
                        self.batches[i].append(count)
                        count += 1
                if progress is not None:
                    progress(start + table.num_rows)
            if writer is not None:
                writer.close()
            del table
            release_arrow_memory()
        except BaseException:
            self.close()
            raise

    def __len__(self) -> int:
        return len(self.parts)

    def load(self, i: int) -> GraphDataset:
        """The graphs of part ``i``, in the order of ``parts[i]``."""
        import pyarrow as pa

        from ._arrow import to_dataset

        pos = self.parts[i]
        if not pos.size:
            raise ValueError(f"part {i} is empty")
        with pa.OSFile(str(self.file), "rb") as fh:
            reader = pa.ipc.open_file(fh)
            table = pa.Table.from_batches([reader.get_batch(b) for b in self.batches[i]], schema=self.schema)
            ds = to_dataset(table.combine_chunks(), checked=True)  # written from checked tables
        ordered = np.sort(pos)  # the scratch holds a part's graphs in pool order
        return ds.take(np.searchsorted(ordered, pos))

    def close(self) -> None:
        """Remove the scratch file."""
        if getattr(self, "dir", None) is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "PartReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        self.close()
