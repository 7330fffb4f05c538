"""Reader for the TUDataset raw text layout.

A TU folder holds, for a dataset ``NAME`` (each file may also be ``.txt.gz``):

* ``NAME_A.txt`` -- one directed edge ``i, j`` per line, 1-based global node ids;
* ``NAME_graph_indicator.txt`` -- line ``v`` holds the 1-based graph of node ``v``;
* ``NAME_graph_labels.txt`` -- one integer label per graph;
* optional ``NAME_node_labels.txt`` -- one integer label per node;
* optional ``NAME_node_attributes.txt`` -- one comma-separated float row per node.

Parsing uses pyarrow's multithreaded CSV reader (no Python loop over lines);
only when the fast path fails is the file scanned again line by line, to name
the exact offending line in the :class:`~tmdlib._errors.InputError`.

The module also hosts :func:`read_numeric_text`, the shared parser of
headerless numeric text/CSV files (also used by :mod:`tmdlib.datasets._ogb`).
"""
from __future__ import annotations

import gzip
import json
import math
import os
import re
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from .._errors import InputError
from .._graph import FEATURE_LIMIT
from .limits import check_fits
from ._schema import (META_FEATURES, META_LABEL_RULE, META_NAME, META_SOURCE, build_graph_table,
                     canonical_edges, tu_fields)
from ._task import META_TASK, TaskSpec

__all__ = ["read_tu", "read_numeric_text", "read_bytes", "line_of_row", "arrow_input", "MAX_ONE_HOT_WIDTH"]

#: Largest one-hot width accepted for node labels (guards against a file of
#: huge label ids turning into a gigantic dense matrix).
MAX_ONE_HOT_WIDTH = 4096

_INT_RE = re.compile(rb"-?[0-9]+")
_FLOAT_RE = re.compile(
    rb"[-+]?(?:[0-9]+\.?[0-9]*(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?|nan|inf|infinity)",
    re.IGNORECASE,
)
_INT64 = np.iinfo(np.int64)


# --------------------------------------------------------------------------- generic text parsing


def read_bytes(path: str | os.PathLike) -> bytes:
    """Whole content of ``path``, gunzipped when the name ends in ``.gz``.

    Raises
    ------
    InputError
        If the file is missing, unreadable, or not valid gzip.
    """
    path = Path(path)
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                return fh.read()
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    except IsADirectoryError:
        raise InputError(path, "is a folder, expected a file") from None
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(path, f"cannot read file: {exc}") from None


def arrow_input(data: bytes) -> pa.BufferReader:
    """``data`` copied into Arrow-owned memory, as an input for pyarrow's CSV reader.

    pyarrow reads its input on its own I/O threads and drops its last reference to it there, possibly
    after ``read_csv`` has returned or raised.  A Python object as input (``io.BytesIO``, or a
    ``pa.py_buffer`` over ``bytes``) makes those native threads take the GIL and create a Python thread
    state at such arbitrary later times.  With ``tracemalloc`` tracing, that races with
    ``tracemalloc.stop()`` in the thread that called us and crashes the process (CPython before 3.12.9,
    gh-128679: the late thread writes through the freed traceback buffer).  An Arrow-owned copy keeps
    Python out of pyarrow's threads.
    """
    sink = pa.BufferOutputStream()
    sink.write(data)
    return pa.BufferReader(sink.getvalue())


def _nonempty_lines(data: bytes) -> list[int]:
    """1-based line numbers of the non-empty lines (the rows pyarrow sees)."""
    return [i for i, line in enumerate(data.splitlines(), 1) if line]


def line_of_row(data: bytes, row: int) -> int:
    """1-based line number of 0-based data row ``row`` (empty lines are skipped).

    ``row`` equal to the number of rows gives the line just after the last row.
    Only used on error paths (it splits the whole file).
    """
    lines = _nonempty_lines(data)
    if row < len(lines):
        return lines[row]
    return (lines[-1] if lines else 0) + 1


def _shown(token: bytes) -> str:
    """A token for an error message: decoded, truncated."""
    text = token.decode("utf-8", "replace")
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _scan_bad_line(data: bytes, ncols: int, kind: str, allow_missing: bool) -> tuple[int, str] | None:
    """Find the first line the fast parser rejected (error path only).

    Returns
    -------
    (line, problem) or None
        ``None`` if no line looks wrong (the caller then reports the parser's
        own message without a line).
    """
    pattern = _INT_RE if kind == "int" else _FLOAT_RE
    what = "an integer" if kind == "int" else "a number"
    for lineno, raw in enumerate(data.splitlines(), 1):
        if not raw:
            continue
        fields = raw.split(b",")
        if len(fields) != ncols:
            return lineno, f"expected {ncols} comma-separated value(s), found {len(fields)}: {_shown(raw)}"
        for tok in (f.strip(b" \t") for f in fields):
            if allow_missing and tok == b"":
                continue
            if not pattern.fullmatch(tok):
                return lineno, f"not {what}: {_shown(tok)}"
            # more than 19 significant digits is out of range (and int() refuses > 4300 digits)
            if kind == "int" and (len(tok.lstrip(b"-").lstrip(b"0")) > 19
                                  or not (_INT64.min <= int(tok) <= _INT64.max)):
                return lineno, f"integer out of the 64-bit range: {_shown(tok)}"
    return None


def _count_columns(data: bytes) -> int:
    """Number of comma-separated fields on the first non-empty line."""
    for raw in data.splitlines():
        if raw:
            return raw.count(b",") + 1
    return 1


def read_numeric_text(
    path: str | os.PathLike,
    ncols: int | None,
    kind: str = "int",
    allow_missing: bool = False,
    data: bytes | None = None,
) -> tuple[np.ndarray, bytes]:
    """Parse a headerless comma-separated numeric file into a matrix.

    Parameters
    ----------
    path : str or os.PathLike
        The file (``.gz`` is decompressed); also the name used in errors.
    ncols : int or None
        Expected number of columns; ``None`` takes it from the first line.
    kind : {"int", "float"}
        ``"int"`` gives int64, ``"float"`` float64 (``nan``/``inf`` parse and
        must be checked by the caller).
    allow_missing : bool, default False
        Empty float fields become NaN instead of an error.
    data : bytes, optional
        Already-read content of ``path``.

    Returns
    -------
    values : ndarray, shape (rows, ncols)
        One row per non-empty line (CRLF, LF and CR line ends; spaces around
        values are ignored).
    data : bytes
        The raw content, for :func:`line_of_row` on later error paths.

    Raises
    ------
    InputError
        Naming ``path`` and the 1-based line of the first malformed line.
    """
    if data is None:
        data = read_bytes(path)
    if ncols is None:
        ncols = _count_columns(data)
    dtype = np.int64 if kind == "int" else np.float64
    if not data.strip(b"\r\n"):
        return np.zeros((0, ncols), dtype=dtype), data
    names = [f"c{i}" for i in range(ncols)]
    arrow_type = pa.int64() if kind == "int" else pa.float64()
    try:
        table = pacsv.read_csv(
            arrow_input(data),
            read_options=pacsv.ReadOptions(column_names=names),
            parse_options=pacsv.ParseOptions(delimiter=",", quote_char=False, double_quote=False,
                                             escape_char=False, newlines_in_values=False),
            convert_options=pacsv.ConvertOptions(
                column_types={n: arrow_type for n in names},
                null_values=[""] if allow_missing else [],
                strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowException, UnicodeDecodeError) as exc:
        found = _scan_bad_line(data, ncols, kind, allow_missing)
        if found is None:
            raise InputError(path, f"cannot parse as comma-separated {kind} values: {exc}") from None
        raise InputError(path, found[1], line=found[0]) from None
    cols = [np.asarray(table.column(n).to_numpy(zero_copy_only=False), dtype=dtype) for n in names]
    return np.column_stack(cols) if cols else np.zeros((table.num_rows, 0), dtype), data


# --------------------------------------------------------------------------- TU-specific checks


def _find_file(folder: Path, name: str, suffix: str, required: bool) -> Path | None:
    """``folder/NAME_suffix.txt`` or ``.txt.gz``; InputError if required and absent."""
    for ext in (".txt", ".txt.gz"):
        p = folder / f"{name}_{suffix}{ext}"
        if p.is_file():
            return p
    if required:
        raise InputError(folder / f"{name}_{suffix}.txt", f"required TU file missing (also looked for .txt.gz) in {folder}")
    return None


def _count_error(path: Path, data: bytes, found: int, expected: int, what: str) -> InputError:
    """InputError for a file with ``found`` rows where ``expected`` were needed."""
    line = line_of_row(data, min(found, expected))
    if found > expected:
        return InputError(path, f"has {found} {what} lines, expected {expected}: extra line", line=line)
    return InputError(path, f"has {found} {what} lines, expected {expected}: missing line(s) from here", line=line)


def _graph_indicator(path: Path) -> np.ndarray:
    """0-based graph of each node, checked to be sorted and contiguous from 1."""
    values, data = read_numeric_text(path, 1, "int")
    gi = values[:, 0]
    if gi.size == 0:
        raise InputError(path, "file is empty: a TU dataset needs at least one node", line=1)
    if gi[0] != 1:
        raise InputError(path, f"graph ids must start at 1, found {gi[0]}", line=line_of_row(data, 0))
    step = np.diff(gi)
    bad = np.flatnonzero((step < 0) | (step > 1))
    if bad.size:
        k = int(bad[0]) + 1
        line = line_of_row(data, k)
        if step[k - 1] < 0:
            raise InputError(path, f"graph indicator not sorted: graph {gi[k]} after graph {gi[k - 1]}", line=line)
        gap = f" {gi[k - 1] + 1}" if gi[k] - gi[k - 1] == 2 else f"s {gi[k - 1] + 1}..{gi[k] - 1}"
        raise InputError(path, f"graph ids not contiguous: graph {gi[k]} follows graph {gi[k - 1]} "
                               f"(graph{gap} would have no nodes)", line=line)
    return gi - 1


def _graph_labels(path: Path, num_graphs: int) -> tuple[np.ndarray, np.ndarray, dict[int, int]]:
    """Raw labels, mapped labels and the mapping raw -> mapped.

    Rule: ``y`` is the rank of the raw label among the sorted distinct raw
    labels (PyG's ``unique(return_inverse=True)``), so binary ``{-1, 1}``,
    ``{1, 2}`` and ``{0, 1}`` all become ``{0, 1}`` (smaller raw label -> 0).
    """
    values, data = read_numeric_text(path, 1, "int")
    raw = values[:, 0]
    if raw.size != num_graphs:
        raise _count_error(path, data, raw.size, num_graphs, "graph label")
    classes, y = np.unique(raw, return_inverse=True)
    return raw, y.astype(np.float64), {int(c): i for i, c in enumerate(classes)}


def _node_labels(path: Path, num_nodes: int) -> np.ndarray:
    """Raw node labels (int64, one per node), checked for count and range."""
    values, data = read_numeric_text(path, 1, "int")
    lab = values[:, 0]
    if lab.size != num_nodes:
        raise _count_error(path, data, lab.size, num_nodes, "node label")
    lo, hi = int(lab.min()), int(lab.max())
    width = hi - lo + 1
    if width > MAX_ONE_HOT_WIDTH or lo < np.iinfo(np.int32).min or hi > np.iinfo(np.int32).max:
        k = int(np.argmax(lab)) if hi - 0 >= abs(lo) else int(np.argmin(lab))
        raise InputError(path, f"node labels span {lo}..{hi}; a one-hot encoding of width {width} "
                               f"exceeds the limit {MAX_ONE_HOT_WIDTH}", line=line_of_row(data, k))
    return lab


def _node_attributes(path: Path, num_nodes: int) -> np.ndarray:
    """Node attribute matrix (float64), checked for count, shape and finiteness."""
    values, data = read_numeric_text(path, None, "float")
    if values.shape[0] != num_nodes:
        raise _count_error(path, data, values.shape[0], num_nodes, "node attribute")
    bad = np.flatnonzero(~np.isfinite(values).all(axis=1))
    if bad.size:
        k = int(bad[0])
        raise InputError(path, f"non-finite node attribute (NaN or inf): {values[k].tolist()}",
                         line=line_of_row(data, k))
    huge = np.flatnonzero((np.abs(values) > FEATURE_LIMIT).any(axis=1))
    if huge.size:
        k = int(huge[0])
        raise InputError(path, f"node attribute beyond the float32 range of the graph store: {values[k].tolist()} "
                               f"(|x| must be <= FEATURE_LIMIT = {FEATURE_LIMIT:.8g})", line=line_of_row(data, k))
    return values


def _edges(path: Path, graph_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """0-based global edge endpoints, checked for range and graph membership."""
    values, data = read_numeric_text(path, 2, "int")
    n = graph_of.size
    out = np.flatnonzero(((values < 1) | (values > n)).any(axis=1))
    if out.size:
        k = int(out[0])
        raise InputError(path, f"node id out of range [1, {n}] in edge ({values[k, 0]}, {values[k, 1]})",
                         line=line_of_row(data, k))
    src, dst = values[:, 0] - 1, values[:, 1] - 1
    cross = np.flatnonzero(graph_of[src] != graph_of[dst])
    if cross.size:
        k = int(cross[0])
        raise InputError(path, f"edge ({values[k, 0]}, {values[k, 1]}) joins graph {graph_of[src[k]] + 1} "
                               f"and graph {graph_of[dst[k]] + 1}", line=line_of_row(data, k))
    return src, dst


def _one_hot(labels: np.ndarray) -> np.ndarray:
    """PyG-style one-hot: shift so the minimum is 0, width ``max - min + 1``."""
    shifted = labels - labels.min()
    width = int(shifted.max()) + 1
    x = np.zeros(labels.size * width, dtype=np.float32)
    x[np.arange(labels.size) * width + shifted] = 1.0
    return x.reshape(labels.size, width)


def _features(labels: np.ndarray | None, attrs: np.ndarray | None, n: int,
              path=None) -> tuple[dict, str]:
    """Node features (``build_graph_table`` keywords) and their description (one-hot or constant, then attributes).

    Without attributes the features are dictionary-encoded: the table is the identity (one row per
    label value) and each node's row is its shifted label, so nothing of size ``N x width`` is built.
    """
    width = (int(labels.max() - labels.min()) + 1 if labels is not None and n else 1)
    if attrs is None:
        if labels is not None and n:
            index = (labels - labels.min()).astype(np.int64)
            desc = (f"columns 0..{width - 1}: one-hot of node labels (label - {labels.min()}), width {width}")
        else:
            index = np.zeros(n, np.int64)
            desc = "column 0: constant 1 (no node labels)"
        return {"features": np.eye(width, dtype=np.float32), "feature_index": index}, desc
    width += attrs.shape[1]
    check_fits(3 * 4 * n * width, path, f"the {n} x {width} node feature matrix")  # float32, ~3 copies
    if labels is not None and n:
        base = _one_hot(labels)
        desc = (f"columns 0..{base.shape[1] - 1}: one-hot of node labels (label - {labels.min()}), "
                f"width {base.shape[1]}")
    else:
        base = np.ones((n, 1), dtype=np.float32)
        desc = "column 0: constant 1 (no node labels)"
    if attrs is None:
        return base, desc
    d0 = base.shape[1]
    desc += f"; columns {d0}..{d0 + attrs.shape[1] - 1}: node attributes"
    return {"x": np.hstack([base, attrs.astype(np.float32)])}, desc


def read_tu(folder: str | os.PathLike, name: str | None = None, node_attributes: bool = False,
            task: str | None = None) -> pa.Table:
    """Read a TU dataset folder into a graph table.

    Parameters
    ----------
    folder : str or os.PathLike
        Folder holding ``NAME_A.txt`` etc. directly (no ``raw/`` sub-folder).
    name : str, optional
        Dataset prefix ``NAME``; defaults to the folder's name.
    node_attributes : bool, default False
        Append the columns of ``NAME_node_attributes.txt`` to the features.
    task : {"auto", "binary", "multiclass"}, optional
        The task type (:mod:`tmdlib.datasets._task`).  TU graph labels are classes: two (or one) distinct
        labels are a binary task, more a multi-class one (default, ``auto``); ``binary`` refuses more than
        two classes, ``multiclass`` asks for the class indices even with two.

    Returns
    -------
    pyarrow.Table
        Graph-store table (:mod:`tmdlib.datasets._schema`) with the TU columns
        ``y_raw`` and ``node_labels``.

    Notes
    -----
    * **Features.**  The one-hot encoding of the node labels exactly as PyG's
      ``TUDataset``: labels shifted so their minimum over the dataset is 0,
      width ``max + 1`` of the shifted labels (so unused ids inside the range
      still get a column; DD's labels 1..89 give width 89).  Without a node
      label file the feature is the constant 1 (width 1).
    * **Attributes.**  With ``node_attributes=True`` the attribute columns come
      *after* the one-hot block (PyG puts them first).  This keeps the label
      block at the same columns with or without attributes, so
      ``x[:, :width]`` is the same in both cases.
    * **Edges.**  Both directions, self-loops removed, duplicates removed,
      sorted by ``(src, dst)`` -- PyG's ``remove_self_loops`` + ``coalesce``;
      the edge set is also symmetrised, which changes nothing for TU files
      (they list both directions).
    * **Labels.**  ``y`` is the rank of the raw graph label among the sorted
      distinct raw labels (PyG's rule): binary ``{-1, 1}`` and ``{1, 2}``
      become ``{0, 1}``; ``y_raw`` keeps the label as written.  The mapping is
      stored in the schema metadata under ``tmdlib.label_rule``.  With more
      than two classes ``y`` is the class index of a multi-class task whose
      classes are the raw labels (the task spec, under ``tmdlib.task``).

    Raises
    ------
    InputError
        One error naming the file, the 1-based line and the problem: missing
        required files, non-integer values, node ids outside ``[1, N]``, a
        graph indicator not sorted or not contiguous from 1, edges joining two
        graphs, label/attribute line counts not matching the node or graph
        count, NaN/inf attributes.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(folder, "TU dataset folder not found")
    name = name or folder.name
    f_a = _find_file(folder, name, "A", True)
    f_gi = _find_file(folder, name, "graph_indicator", True)
    f_gl = _find_file(folder, name, "graph_labels", True)
    f_nl = _find_file(folder, name, "node_labels", False)
    f_na = _find_file(folder, name, "node_attributes", node_attributes)

    graph_of = _graph_indicator(f_gi)
    n, g = graph_of.size, int(graph_of[-1]) + 1
    node_ptr = np.searchsorted(graph_of, np.arange(g + 1), side="left")
    y_raw, y, label_map = _graph_labels(f_gl, g)
    spec = _tu_task(f_gl, y_raw, label_map, task)
    labels = _node_labels(f_nl, n) if f_nl is not None else None
    attrs = _node_attributes(f_na, n) if node_attributes else None
    src, dst = _edges(f_a, graph_of)
    src, dst = canonical_edges(src, dst, n)
    feats, desc = _features(labels, attrs, n, f_nl or folder)

    extra = {
        "y_raw": pa.array(y_raw, type=pa.int64()),
        "node_labels": (pa.ListArray.from_arrays(pa.array(node_ptr.astype(np.int32)), pa.array(labels.astype(np.int32)))
                        if labels is not None else pa.nulls(g, pa.list_(pa.int32()))),
    }
    meta = {
        META_SOURCE: "tu",
        META_NAME: name,
        META_FEATURES: desc,
        META_LABEL_RULE: "y = rank of y_raw among sorted distinct raw labels; map " + json.dumps(label_map),
    }
    meta[META_TASK] = spec.to_json()
    return build_graph_table(feats.pop("x", None), node_ptr, src, dst, y, extra, tu_fields(), meta, **feats)


#: The task types TU graph labels (one class per graph) can take, with the fewest and most classes each holds.
TU_CLASS_COUNTS = {"binary": (0, 2), "multiclass": (2, math.inf)}


def _tu_task(path: Path, y_raw: np.ndarray, label_map: dict[int, int], task: str | None) -> TaskSpec:
    """The task of TU graph labels: binary for at most two classes (their ranks 0/1, the existing mapping),
    multi-class beyond (classes = the raw labels, ``y`` = their rank = the class index)."""
    classes = sorted(label_map)
    kind = task if task not in (None, "", "auto") else ("binary" if len(classes) <= 2 else "multiclass")
    if kind not in TU_CLASS_COUNTS:
        raise InputError(path, f"TU graph labels are classes: the task is binary or multiclass, not {kind!r}")
    fewest, most = TU_CLASS_COUNTS[kind]
    if len(classes) > most:
        third = int(np.flatnonzero(y_raw == classes[2])[0])
        raise InputError(path, f"{len(classes)} classes ({', '.join(map(str, classes[:10]))}) do not fit a {kind} "
                               f"task: graph label {classes[2]} is a third class",
                         line=line_of_row(read_bytes(path), third))
    if len(classes) < fewest:
        raise InputError(path, f"a {kind} task needs at least {fewest} classes; the graph labels hold {len(classes)}")
    spec = TaskSpec(kind, ("y",), classes, "user" if task not in (None, "", "auto") else "inferred")
    return spec  # a binary task keeps no classes (TaskSpec: its labels are the 0/1 values themselves)
