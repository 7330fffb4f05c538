"""Build a molecule graph table from a CSV of SMILES strings.

Each SMILES goes through ``ogb.utils.smiles2graph`` (rdkit), so atoms get the
same 9 categorical features as the OGB files and the same 174-wide one-hot
encoding (:func:`tmdlib.datasets.ogb.one_hot_atom_features`).  ogb and rdkit
are imported only when this reader is called.

The CSV is streamed (plain or ``.gz``) in chunks of rows, so a pool of millions
of molecules (MOSES: 1.58 M) never sits in memory as text, and chunks may be
converted by several processes; atoms are kept as raw codes and dictionary-
encoded at the end (:func:`tmdlib.datasets.ogb.distinct_atom_rows`).

Labels come from one or several columns (several: ``y`` is ``list<double>``, one value per target); their task
type is decided once all rows are read (:func:`tmdlib.datasets.task.task_and_labels`: inferred, or forced and
checked, every offending line in one error).  A split column (train / test / valid) and further numeric columns
(MoleculeACE's ``cliff_mol``) can be kept.  Without named columns the pipeline looks for ``y`` or ``label`` and
``split`` (:func:`default_csv_columns`).
"""
from __future__ import annotations

import csv
import gzip
import math
import os
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing import get_context
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from ..errors import InputError
from .schema import META_LABEL_RULE
from .ogb import molecule_table
from .task import TaskSpec, task_and_labels, with_task

__all__ = ["read_smiles_csv", "smiles_to_graph", "STANDIN_RULES", "standin_label", "csv_header",
           "default_csv_columns", "DEFAULT_LABEL_COLUMNS", "DEFAULT_SPLIT_COLUMN", "SPLIT_VALUES"]


@contextmanager
def _quiet_rdkit():
    """Silence rdkit's parse-error logging (errors are reported as InputError)."""
    from rdkit import RDLogger

    RDLogger.DisableLog("rdApp.*")
    try:
        yield
    finally:
        RDLogger.EnableLog("rdApp.*")


def smiles_to_graph(smiles: str) -> dict | None:
    """OGB graph dict of one SMILES, or None if rdkit cannot parse it or it has no atoms.

    Returns
    -------
    dict or None
        ``smiles2graph`` output: ``node_feat`` (n, 9) int64, ``edge_index``
        (2, 2b) int64 (both directions), ``num_nodes``.
    """
    from ogb.utils import smiles2graph
    from rdkit import Chem

    if not smiles or Chem.MolFromSmiles(smiles) is None:
        return None
    graph = smiles2graph(smiles)
    return graph if graph["num_nodes"] > 0 else None


def column_index(header: list[str], name: str, path: Path) -> int:
    """Position of column ``name`` in ``header``: the exact name, else the one name equal to it ignoring case.

    ``SMILES`` (MOSES, ChEMBL exports) is found for the default ``smiles``.

    Raises
    ------
    InputError
        No column matches (the message lists the available ones), or several match ignoring case and none
        exactly (the message names them: pass one exactly).
    """
    if name in header:
        return header.index(name)
    matches = [k for k, h in enumerate(header) if h.casefold() == name.casefold()]
    if len(matches) == 1:
        return matches[0]
    if matches:
        choices = ", ".join(repr(header[k]) for k in matches)
        raise InputError(path, f"column {name!r} is ambiguous (ignoring case it matches {choices}): "
                               "name one exactly", line=1)
    raise InputError(path, f"no column {name!r}; available columns: {', '.join(header) or 'none'}", line=1)


#: Benchmark label stand-ins for unlabelled pools: ``name -> (description, function of an rdkit Mol)``.
#: They exist so that the pipeline can train and evaluate on an unlabelled pool (MOSES) in benchmarks;
#: a store built with one records it in its label rule, and the labels are never real measurements.
STANDIN_RULES = {
    "logp": "STAND-IN LABEL, NOT A MEASUREMENT: y = 1 if RDKit's Crippen logP >= 2.75 else 0 "
            "(Wildman & Crippen 1999; a benchmark device for unlabelled pools)",
}
_LOGP_THRESHOLD = 2.75  # about the median of MOSES: balanced classes


def standin_label(smiles: str, rule: str = "logp") -> float:
    """The flagged benchmark stand-in label of one molecule (see :data:`STANDIN_RULES`).

    Parameters
    ----------
    smiles : str
        A SMILES rdkit can parse.
    rule : {"logp"}
        ``"logp"``: :math:`y = [\\mathrm{logP}_{\\mathrm{Crippen}} \\ge 2.75]`.

    Returns
    -------
    float
        0.0 or 1.0 (NaN when rdkit cannot parse the SMILES).
    """
    from rdkit import Chem
    from rdkit.Chem import Crippen

    if rule not in STANDIN_RULES:
        raise InputError(None, f"unknown stand-in label rule {rule!r}; known: {', '.join(STANDIN_RULES)}")
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        return math.nan
    return float(Crippen.MolLogP(mol) >= _LOGP_THRESHOLD)


def _open_text(path: Path):
    """A text stream over ``path`` (gunzipped when the name ends in ``.gz``)."""
    try:
        if path.name.endswith(".gz"):
            return gzip.open(path, "rt", encoding="utf-8-sig", errors="replace", newline="")
        return open(path, encoding="utf-8-sig", errors="replace", newline="")
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    except IsADirectoryError:
        raise InputError(path, "is a folder, expected a file") from None
    except OSError as exc:
        raise InputError(path, f"cannot read file: {exc}") from None


def csv_header(path: str | os.PathLike) -> list[str]:
    """The column names of a CSV's header line (stripped; ``.gz`` allowed).

    Raises
    ------
    InputError
        Unreadable file, or no header line.
    """
    path = Path(path)
    with _open_text(path) as fh:
        try:
            header = next(csv.reader(fh), None)
        except (OSError, EOFError, zlib.error, csv.Error) as exc:
            raise InputError(path, f"cannot read file: {exc}") from None
    if header is None:
        raise InputError(path, "empty CSV file (no header line)", line=1)
    return [h.strip() for h in header]


#: Column names a CSV's labels are found under when none is named (in this order), and its split column.
DEFAULT_LABEL_COLUMNS = ("y", "label")
DEFAULT_SPLIT_COLUMN = "split"


def default_csv_columns(path: str | os.PathLike, header: list[str] | None = None, *, labels: bool = True
                        ) -> tuple[tuple[str, ...], str | None]:
    """The label and split columns a CSV gets when none is named: ``y`` or ``label``, and ``split``.

    Matched as :func:`column_index` does (the exact name, else the one name equal ignoring case).

    Parameters
    ----------
    path : path
        The CSV (its header is read unless ``header`` is given).
    header : list of str, optional
        Its column names.
    labels : bool, default True
        Look for the label column (False: only the split column; ``()`` is returned for the labels).

    Returns
    -------
    labels : tuple of str
        ``(name,)`` of the label column found (its name as written in the header), or ``()`` (unlabelled).
    split : str or None
        The split column's name as written, or None.

    Raises
    ------
    InputError
        Both a ``y`` and a ``label`` column (name the one meant), or an unreadable header.
    """
    path = Path(path)
    header = csv_header(path) if header is None else header

    def find(name):
        try:
            return header[column_index(header, name, path)]
        except InputError:
            return None

    found = [c for c in (find(n) for n in DEFAULT_LABEL_COLUMNS) if c is not None] if labels else []
    if len(found) > 1:
        raise InputError(path, f"both {found[0]!r} and {found[1]!r} columns could be the label: name the label "
                               "column(s) (--label-column)", line=1)
    return tuple(found), find(DEFAULT_SPLIT_COLUMN)


#: Accepted values of a split column (lower-cased) and what they are stored as.
SPLIT_VALUES = {"train": "train", "test": "test", "valid": "valid", "validation": "valid"}
#: Columns of a molecule store that a kept source column may not replace.
_RESERVED = ("graph_id", "num_nodes", "x", "x_id", "edge_src", "edge_dst", "y", "smiles", "atom_features", "split")


def _rows(path: Path, cols: tuple[int, tuple[int, ...], int | None, tuple[int, ...]], width: int
          ) -> Iterator[tuple[int, str, tuple, str | None, tuple]]:
    """Yield ``(line, smiles, label_texts, split_text, kept_texts)`` for every data row of the CSV, streaming."""
    i_s, i_l, i_split, i_keep = cols
    with _open_text(path) as fh:
        reader = csv.reader(fh)
        try:
            if next(reader, None) is None:
                raise InputError(path, "empty CSV file (no header line)", line=1)
            for row in reader:
                line = reader.line_num
                if not row or all(not c.strip() for c in row):
                    continue
                if len(row) != width:
                    raise InputError(path, f"{len(row)} fields, header has {width}", line=line)
                yield (line, row[i_s].strip(), tuple(row[i] for i in i_l),
                       None if i_split is None else row[i_split], tuple(row[i] for i in i_keep))
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(path, f"cannot read file: {exc}") from None


def _number(text: str | None) -> float | str:
    """A CSV cell as a float (empty / ``nan`` = NaN), or the reason it is not one."""
    text = (text or "").strip()
    if text == "" or text.lower() == "nan":
        return math.nan
    try:
        value = float(text)
    except ValueError:
        return f"{text!r} is not a number"
    return f"{text!r} is infinite" if math.isinf(value) else value


def _convert_chunk(rows: list[tuple], labels: tuple[str, ...], standin: str | None, keep: tuple[str, ...] = ()):
    """Graphs of one chunk of rows: ``("ok", codes, src, dst, sizes, labels (n, T), lines, splits, kept (n, K))``
    with chunk-local atom ids, or ``("error", line, message)`` (plain data, so that it crosses process
    boundaries).  ``labels`` and ``keep`` name the label and kept columns (for messages)."""
    codes, src, dst, sizes, values, lines, splits, kept = [], [], [], [], [], [], [], []
    offset = 0
    with _quiet_rdkit():
        for line, smi, labs, split, keeps in rows:
            graph = smiles_to_graph(smi)
            if graph is None:
                return "error", line, f"invalid SMILES {smi!r} (rdkit cannot parse it, or it has no atoms)"
            if labels:
                row = []
                for name, text in zip(labels, labs):
                    value = _number(text)
                    if isinstance(value, str):
                        return "error", line, f"label {value}" + (f" (column {name!r})" if len(labels) > 1 else "")
                    row.append(value)
                values.append(row)
            else:
                values.append([standin_label(smi, standin) if standin else math.nan])
            if split is not None:
                value = SPLIT_VALUES.get(split.strip().lower())
                if value is None:
                    return "error", line, (f"split {split!r} is not one of train, test, valid (or validation)")
                splits.append(value)
            row = []
            for name, text in zip(keep, keeps):
                value = _number(text)
                if isinstance(value, str):
                    return "error", line, f"column {name!r}: {value}"
                row.append(value)
            kept.append(row)
            lines.append(line)
            codes.append(graph["node_feat"].astype(np.int16))
            src.append(graph["edge_index"][0].astype(np.int32) + offset)
            dst.append(graph["edge_index"][1].astype(np.int32) + offset)
            sizes.append(graph["num_nodes"])
            offset += graph["num_nodes"]
    n = len(sizes)
    return ("ok", np.concatenate(codes), np.concatenate(src), np.concatenate(dst),
            np.asarray(sizes, dtype=np.int64), np.asarray(values, dtype=np.float64).reshape(n, -1),
            np.asarray(lines, dtype=np.int64), splits, np.asarray(kept, dtype=np.float64).reshape(n, len(keep)))


def _chunks(rows: Iterator, size: int) -> Iterator[list]:
    chunk = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _names(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """A column argument as a tuple of names (one string is one name)."""
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def read_smiles_csv(path: str | os.PathLike, smiles_column: str = "smiles",
                    label_column: str | Sequence[str] | None = None, *, split_column: str | None = None,
                    keep_columns: str | Sequence[str] = (), task: str | TaskSpec | None = None,
                    standin: str | None = None, workers: int = 1, chunk_size: int = 20_000, limit: int | None = None,
                    progress: Callable[[int, float], None] | None = None, name: str | None = None) -> pa.Table:
    """Read a CSV (header line; ``.gz`` allowed) of SMILES into a graph table, streaming.

    Parameters
    ----------
    path : str or os.PathLike
        The CSV file.
    smiles_column : str, default "smiles"
        Column holding the SMILES, matched ignoring case when no column has exactly this name
        (:func:`column_index`).
    label_column : str or sequence of str, optional
        Column(s) holding numeric graph labels (matched the same way; empty / ``nan`` = missing): one
        column gives a float64 ``y``, several a ``list<double>`` ``y`` of length ``T``.  Without it ``y`` is
        all null (or the stand-in).  The task type is decided from the values (:mod:`tmdlib.datasets.task`).
    split_column : str, optional
        Column holding each molecule's split (``train``, ``test``, ``valid`` or ``validation``, any case),
        stored lower-cased as the string column ``split`` (``validation`` as ``valid``).
    keep_columns : str or sequence of str
        Further numeric columns kept as they are (float64, null where empty), under their names as written in
        the header (e.g. MoleculeACE's ``cliff_mol``).
    task : {"auto", "binary", "multiclass", "multitask", "regression"} or TaskSpec, optional
        Force the task type (the labels must fit it); a :class:`~tmdlib.datasets.task.TaskSpec` is an
        existing dataset's task (an appended batch: its classes and all).  Default: inferred.
    standin : {"logp"}, optional
        Unlabelled pools only (no ``label_column``): fill ``y`` with a flagged benchmark stand-in label
        (:data:`STANDIN_RULES`, binary); the table's label rule says so.
    workers : int, default 1
        Processes converting chunks (rdkit is single-threaded); chunks keep their order.
    chunk_size : int, default 20000
        Rows per chunk.
    limit : int, optional
        Read only the first ``limit`` molecules (a smaller pool from a large file).
    progress : callable, optional
        Called as ``progress(rows_done, seconds)`` after every chunk.
    name : str, optional
        The dataset's name in the table's metadata (default: the file name's stem).

    Returns
    -------
    pyarrow.Table
        Graph-store table in row order (``graph_id`` 0..G-1), with ``smiles``,
        ``atom_features`` (raw 9 OGB codes), dictionary-encoded one-hot node features
        (width 174), ``split`` and the kept columns when asked for, and the task spec in the
        schema metadata (:data:`~tmdlib.datasets.task.META_TASK`; multi-class labels stored as class indices).

    Raises
    ------
    InputError
        Missing column (the message lists the available ones), a SMILES rdkit
        cannot parse (or with no atoms), a non-numeric label or kept value, a split value
        other than train / test / valid(ation), a row with the wrong number of fields -- each with the
        1-based CSV line; labels that do not fit the task (every offending line in one error).
    """
    path = Path(path)
    labels, keep = _names(label_column), _names(keep_columns)
    if standin is not None and labels:
        raise InputError(path, "a stand-in label is only for unlabelled pools: give standin or label_column")
    if standin is not None and standin not in STANDIN_RULES:
        raise InputError(path, f"unknown stand-in label rule {standin!r}; known: {', '.join(STANDIN_RULES)}")
    if workers < 1 or chunk_size < 1 or (limit is not None and limit < 1):
        raise InputError(path, "workers, chunk_size and limit must be >= 1")
    header = csv_header(path)
    i_s = column_index(header, smiles_column, path)
    i_l = tuple(column_index(header, c, path) for c in labels)
    i_split = column_index(header, split_column, path) if split_column is not None else None
    i_keep = tuple(column_index(header, c, path) for c in keep)
    labels, keep = tuple(header[i] for i in i_l), tuple(header[i] for i in i_keep)
    for what, idx in (("label", i_l), ("kept", i_keep)):
        if len(set(idx)) != len(idx):
            raise InputError(path, f"a {what} column is named twice: {', '.join(header[i] for i in idx)}", line=1)
    clash = [c for c in keep if c in _RESERVED]
    if clash:
        raise InputError(path, f"kept column {clash[0]!r} would replace the graph store's own column of that name",
                         line=1)
    parts, smiles = [], []
    start, done = time.perf_counter(), 0

    def rows():
        for row in _rows(path, (i_s, i_l, i_split, i_keep), len(header)):
            if limit is not None and len(smiles) >= limit:
                return
            smiles.append(row[1])
            yield row

    def collect(result) -> None:
        nonlocal done
        if result[0] == "error":
            raise InputError(path, result[2], line=result[1])
        parts.append(result[1:])
        done += len(result[4])
        if progress is not None:
            progress(done, time.perf_counter() - start)

    chunks = _chunks(rows(), chunk_size)
    if workers == 1:
        for chunk in chunks:
            collect(_convert_chunk(chunk, labels, standin, keep))
    else:
        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            pending = []
            for chunk in chunks:  # at most 2 chunks per worker in flight: memory stays bounded
                pending.append(pool.submit(_convert_chunk, chunk, labels, standin, keep))
                while len(pending) > 2 * workers or (pending and pending[0].done()):
                    collect(pending.pop(0).result())
            for fut in pending:
                collect(fut.result())
    if not smiles:
        raise InputError(path, "no molecules (the CSV has no data rows)")
    sizes = np.concatenate([p[3] for p in parts])
    node_ptr = np.concatenate([[0], np.cumsum(sizes)])
    bases = np.concatenate([[0], np.cumsum([p[0].shape[0] for p in parts])])
    src = np.concatenate([p[1].astype(np.int64) + b for p, b in zip(parts, bases)])
    dst = np.concatenate([p[2].astype(np.int64) + b for p, b in zip(parts, bases)])
    codes = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[4] for p in parts])
    lines = np.concatenate([p[5] for p in parts])
    splits = [v for p in parts for v in p[6]] if i_split is not None else None
    kept = np.concatenate([p[7] for p in parts]) if keep else None
    del parts
    spec, y = _task_of(y, labels, task, standin, path, lines)
    table = molecule_table(codes, node_ptr, src, dst, y if (labels or standin) else None, smiles,
                           name or path.stem.split(".")[0], "smiles")
    if splits is not None:
        table = table.append_column(pa.field("split", pa.string(), nullable=True), pa.array(splits, pa.string()))
    for k, name in enumerate(keep):
        table = table.append_column(pa.field(name, pa.float64(), nullable=True),
                                    pa.array(kept[:, k], type=pa.float64(), mask=np.isnan(kept[:, k])))
    meta = dict(table.schema.metadata or {})
    meta[META_LABEL_RULE.encode()] = _label_rule(spec, labels, standin, header[i_split] if splits else None,
                                                 keep).encode()
    return with_task(table.replace_schema_metadata(meta), spec)


def _task_of(y: np.ndarray, labels: tuple[str, ...], task, standin: str | None, path: Path,
             lines: np.ndarray) -> tuple[TaskSpec, np.ndarray]:
    """The task spec of a CSV's labels and the labels as stored (see :func:`task_and_labels`)."""
    if standin is not None:  # the stand-in rule gives 0/1: a binary task, whatever the values
        forced = task if isinstance(task, TaskSpec) else TaskSpec("binary", ("y",))
        if not isinstance(task, TaskSpec) and task not in (None, "", "auto", "binary"):
            raise InputError(path, f"the {standin!r} stand-in label is binary; --task {task} does not fit it")
        return task_and_labels(y, ("y",), forced, path=path, lines=lines)
    if not labels and isinstance(task, TaskSpec):  # an unlabelled batch of a dataset: its task, no labels
        return task, np.full((y.shape[0], task.num_targets), np.nan)
    return task_and_labels(y, labels or ("y",), task, path=path, lines=lines)


def _label_rule(spec: TaskSpec, labels: tuple[str, ...], standin: str | None, split: str | None,
                keep: tuple[str, ...]) -> str:
    """The label rule recorded in the table's metadata."""
    if standin is not None:
        rule = STANDIN_RULES[standin]
    elif not labels:
        rule = "no labels (y null)"
    elif spec.type == "multiclass":
        rule = (f"y = index of column {labels[0]!r} among the classes "
                + ", ".join(f"{c:g}" for c in spec.classes) + "; missing -> null")
    else:
        rule = f"y = column{'s' if len(labels) > 1 else ''} {', '.join(map(repr, labels))} as given (float); " \
               "missing -> null"
    rule += f"; task {spec.type}"
    if split is not None:
        rule += f"; split = column {split!r} lower-cased (train, test, valid)"
    if keep:
        rule += f"; kept as given: {', '.join(keep)}"
    return rule
