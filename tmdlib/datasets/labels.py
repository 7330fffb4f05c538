"""Label-agnostic hand-off: which graphs to label, and checking the labels that come back.

Selection never reads labels.  After a coreset is chosen, :func:`label_request_table`
lists the medoids for an annotator (largest clusters first); the annotator returns a
``graph_id,label`` CSV which :func:`validate_label_import` checks in one pass, reporting
every offending line at once.  Pure functions on numpy arrays / pyarrow tables; reading
and writing files is the caller's business (``path`` is only used in messages).
"""
from __future__ import annotations

import math
import os
from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa

from ..errors import InputError

__all__ = ["label_request_table", "validate_label_import", "LABEL_REQUEST_SCHEMA", "LABEL_SCHEMA",
           "label_columns", "labels_schema"]

#: Columns of :func:`label_request_table`.
LABEL_REQUEST_SCHEMA = pa.schema([
    pa.field("graph_id", pa.int64(), nullable=False),
    pa.field("source_id", pa.string(), nullable=False),
    pa.field("tau", pa.int64(), nullable=False),
    pa.field("rank", pa.int64(), nullable=False),
])

#: Columns of the table returned by :func:`validate_label_import`.
LABEL_SCHEMA = pa.schema([
    pa.field("graph_id", pa.int64(), nullable=False),
    pa.field("label", pa.float64(), nullable=False),
])


def label_columns(task=None) -> list[str]:
    """The label column(s) of a label file for a task: ``label`` for one target, else the target names."""
    if task is None or task.num_targets == 1:
        return ["label"]
    return list(task.targets)


def labels_schema(task=None) -> pa.Schema:
    """Schema of validated labels: ``graph_id`` and :func:`label_columns` (float64; null = missing)."""
    if task is None or task.num_targets == 1:
        return LABEL_SCHEMA
    return pa.schema([pa.field("graph_id", pa.int64(), nullable=False)] +
                     [pa.field(c, pa.float64(), nullable=True) for c in label_columns(task)])


def label_request_table(graph_ids, medoids, tau, source_ids=None) -> pa.Table:
    """The list of graphs to label, largest clusters first.

    Parameters
    ----------
    graph_ids : array_like of int, shape (n,)
        Ids of all graphs of the dataset the coreset was computed on.
    medoids : array_like of int, shape (k,)
        Positions (``0..n-1``) of the selected graphs (``CoresetResult.medoids``).
    tau : array_like of int, shape (k,)
        Cluster sizes aligned with ``medoids`` (``CoresetResult.tau``), each >= 1.
    source_ids : sequence of str, shape (n,), optional
        Human-facing id of every graph (e.g. the SMILES of an OGB molecule); default: the
        graph id as a string.

    Returns
    -------
    pyarrow.Table
        Schema :data:`LABEL_REQUEST_SCHEMA`, one row per medoid, sorted by ``rank``:
        ``rank = 1`` is the largest ``tau``; ties by increasing ``graph_id``.
    """
    gid = np.asarray(graph_ids, dtype=np.int64).ravel()
    med = np.asarray(medoids, dtype=np.int64).ravel()
    tau = np.asarray(tau).ravel()
    n = gid.size
    if med.size != tau.size:
        raise ValueError(f"medoids ({med.size}) and tau ({tau.size}) differ in length")
    if med.size and (med.min() < 0 or med.max() >= n):
        raise ValueError(f"medoids must be positions in [0, {n})")
    if np.unique(med).size != med.size:
        raise ValueError("medoids must be distinct")
    if tau.size and (not np.all(np.equal(np.mod(tau, 1), 0)) or tau.min() < 1):
        raise ValueError("tau must hold integers >= 1")
    tau = tau.astype(np.int64)
    if source_ids is None:
        src = [str(int(g)) for g in gid[med]]
    else:
        source_ids = list(source_ids)
        if len(source_ids) != n:
            raise ValueError(f"source_ids has {len(source_ids)} entries for {n} graphs")
        src = [str(source_ids[i]) for i in med]
    order = np.lexsort((gid[med], -tau))
    return pa.table({
        "graph_id": pa.array(gid[med][order], pa.int64()),
        "source_id": pa.array([src[i] for i in order], pa.string()),
        "tau": pa.array(tau[order], pa.int64()),
        "rank": pa.array(np.arange(1, med.size + 1), pa.int64()),
    }, schema=LABEL_REQUEST_SCHEMA)


def _parse_id(v) -> int | None:
    """Integer graph id from a cell (int, integral float or numeric string), else None."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return int(v) if math.isfinite(v) and float(v).is_integer() else None
    t = str(v).strip()
    try:
        return int(t)
    except ValueError:
        try:
            f = float(t)
        except ValueError:
            return None
        return int(f) if math.isfinite(f) and f.is_integer() else None


def _parse_label(v) -> float | None:
    """Finite float label from a cell, else None."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(str(v).strip()) if isinstance(v, (str, bytes)) else float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _fmt_lines(lines: Sequence[int]) -> str:
    return ("line " if len(lines) == 1 else "lines ") + ", ".join(str(x) for x in lines)


def validate_label_import(table: pa.Table, requested_ids, known_ids, path: str | os.PathLike | None,
                          allowed_labels: Iterable[float] | None = None, id_column: str = "graph_id",
                          label_column: str = "label", line_numbers=None, task=None) -> pa.Table:
    """Validate an imported ``graph_id,label`` table; report every problem at once.

    Checks, each listing all offenders with their file lines (1-based, header = line 1,
    so row ``r`` of the table is line ``r + 2`` unless ``line_numbers`` says otherwise):

    * missing ``graph_id`` / ``label`` column;
    * a ``graph_id`` that is not an integer;
    * unknown ids (not in ``known_ids``);
    * duplicate ids (all their lines);
    * labels that are empty, non-numeric, NaN or infinite;
    * labels outside ``allowed_labels`` (when given);
    * requested ids that have no row (no line; the ids are listed).

    Rows for known ids that were not requested are accepted (e.g. graphs labelled before).

    Parameters
    ----------
    table : pyarrow.Table
        As read from the CSV (any column types; cells are parsed from their text).
    requested_ids : array_like of int
        Ids that must be labelled (the ``graph_id`` column of the request table).
    known_ids : array_like of int
        All ids of the dataset.
    path : str or os.PathLike or None
        The file name used in the error message.
    allowed_labels : iterable of float, optional
        E.g. ``{0, 1}`` for binary tasks.
    id_column, label_column : str
    line_numbers : array_like of int, shape (rows,), optional
        File line of every row, when the reader skipped blank lines or comments.
    task : TaskSpec, optional
        The dataset's task (:mod:`tmdlib.datasets.task`): every value is checked against it (a binary task
        takes 0 or 1 only, a multi-class task one of its classes), a task with several targets reads one column
        per target (:func:`label_columns`; an empty cell = not measured, where the task allows it).  Without a
        task any finite number is accepted (``allowed_labels`` narrows it).

    Returns
    -------
    pyarrow.Table
        Schema :func:`labels_schema` (:data:`LABEL_SCHEMA` for one target), sorted by ``graph_id``; values as in
        the file (multi-class: the class values, not indices).

    Raises
    ------
    InputError
        ``InputError(path, problem)`` with one problem per line of the message; the
        list of ``(line or None, text)`` pairs is also in its ``offenders`` attribute.
    """
    lab_cols = [label_column] if task is None or task.num_targets == 1 else label_columns(task)
    if task is not None and task.num_targets == 1 and label_column not in table.column_names \
            and "y" in table.column_names:
        lab_cols = ["y"]  # labels.csv / ledger files name their one column y
    missing_cols = [c for c in [id_column] + lab_cols if c not in table.column_names]
    if missing_cols:
        err = InputError(path, f"missing column(s) {', '.join(missing_cols)}; found {table.column_names}", line=1)
        err.offenders = [(1, err.problem)]
        raise err
    nrows = table.num_rows
    lines = np.arange(2, nrows + 2) if line_numbers is None else np.asarray(line_numbers, dtype=np.int64)
    if lines.shape != (nrows,):
        raise ValueError(f"line_numbers must have one entry per row ({nrows})")
    known = {int(k) for k in known_ids}
    requested = np.asarray(requested_ids, dtype=np.int64).ravel()
    allowed = None if allowed_labels is None else {float(a) for a in allowed_labels}
    raw_ids = table.column(id_column).to_pylist()
    raw_labs = [table.column(c).to_pylist() for c in lab_cols]
    gaps_ok = task is not None and task.allows_missing

    offenders: list[tuple[int | None, str]] = []
    ids, labs, seen = [], [], {}
    for r in range(nrows):
        ln = int(lines[r])
        gid = _parse_id(raw_ids[r])
        if gid is None:
            offenders.append((ln, f"graph_id {raw_ids[r]!r} is not an integer"))
        elif not -2 ** 63 <= gid < 2 ** 63:
            offenders.append((ln, f"graph_id {gid} is out of range (64-bit graph ids)"))
        elif gid not in known:
            offenders.append((ln, f"unknown graph_id {gid}"))
        else:
            seen.setdefault(gid, []).append(ln)
        row = []
        for c, col in zip(lab_cols, raw_labs):
            raw = col[r]
            empty = raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "nan", "na", "none"))
            lab = None if empty else _parse_label(raw)
            what = "label" if len(lab_cols) == 1 else f"label {c}"
            if empty and gaps_ok:
                lab = math.nan
            elif lab is None:
                offenders.append((ln, f"{what} {raw!r} is not a finite number"
                                      + (" (this task needs every label)" if empty and task is not None else "")))
            elif allowed is not None and lab not in allowed:
                offenders.append((ln, f"{what} {raw!r} is not one of {sorted(allowed)}"))
            row.append(lab)
        ids.append(gid)
        labs.append(row)
    if task is not None and not offenders:
        from .task import validate_labels

        try:
            validate_labels(np.asarray(labs, dtype=np.float64).reshape(nrows, len(lab_cols)), task, path=path,
                            lines=lines, encoded=False)
        except InputError as err:
            if err.line is not None:  # one problem, reported with its line
                offenders.append((int(err.line), err.problem))
            for part in err.problem.splitlines()[1:]:
                text = part.strip()
                if text.startswith("line "):
                    n, _, msg = text[5:].partition(": ")
                    offenders.append((int(n), msg))
    for gid, lns in seen.items():
        if len(lns) > 1:
            offenders.append((lns[0], f"duplicate graph_id {gid} on {_fmt_lines(lns)}"))
    absent = [int(g) for g in requested if int(g) not in seen]
    if absent:
        shown = ", ".join(str(g) for g in absent[:50]) + (" ..." if len(absent) > 50 else "")
        offenders.append((None, f"no label for {len(absent)} requested graph_id(s): {shown}"))
    if offenders:
        offenders.sort(key=lambda o: (o[0] is None, o[0] or 0))
        if len(offenders) == 1:  # one problem: one line, "file:line: problem"
            err = InputError(path, offenders[0][1], line=offenders[0][0])
            err.offenders = offenders
            raise err
        body = "\n".join(f"  {'line ' + str(ln) if ln is not None else 'file'}: {msg}" for ln, msg in offenders)
        err = InputError(path, f"{len(offenders)} problem(s) in the label file:\n{body}")
        err.offenders = offenders
        raise err
    gid = np.asarray(ids, dtype=np.int64)
    lab = np.asarray(labs, dtype=np.float64).reshape(nrows, len(lab_cols))
    order = np.argsort(gid, kind="stable")
    if task is None or task.num_targets == 1:
        return pa.table({"graph_id": pa.array(gid[order], pa.int64()),
                         "label": pa.array(lab[order, 0], pa.float64())}, schema=LABEL_SCHEMA)
    cols = {"graph_id": pa.array(gid[order], pa.int64())}
    for j, c in enumerate(label_columns(task)):
        v = lab[order, j]
        cols[c] = pa.array(v, pa.float64(), mask=np.isnan(v))
    return pa.table(cols, schema=labels_schema(task))
