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

from .._errors import InputError

__all__ = ["label_request_table", "key_index", "validate_label_import", "LABEL_REQUEST_SCHEMA", "LABEL_SCHEMA",
           "label_columns", "labels_schema", "KEY_COLUMNS", "QUALIFIERS", "CENSORED", "MISSING_NOTES",
           "REPLICATE_RULES", "CENSORED_RULES", "MEASUREMENT_SCHEMA", "parse_value", "read_answers", "apply_censored",
           "aggregate_measurements", "labels_of_table",
           "ANSWER_KEYS", "answer_key", "wanted_keys", "source_index"]

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
        The dataset's task (:mod:`tmdlib.datasets._task`): every value is checked against it (a binary task
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
        why = _id_problem(raw_ids[r], gid, known)
        if why:
            offenders.append((ln, why))
        else:
            seen.setdefault(gid, []).append(ln)
        ids.append(gid)
        labs.append([_label_cell(col[r], c if len(lab_cols) > 1 else None, ln, gaps_ok, allowed, task, offenders)
                     for c, col in zip(lab_cols, raw_labs)])
    if task is not None and not offenders:
        offenders += _task_offenders(np.asarray(labs, dtype=np.float64).reshape(nrows, len(lab_cols)), task, path,
                                     lines)
    for gid, lns in seen.items():
        if len(lns) > 1:
            offenders.append((lns[0], f"duplicate graph_id {gid} on {_fmt_lines(lns)}"))
    absent = [int(g) for g in requested if int(g) not in seen]
    if absent:
        shown = ", ".join(str(g) for g in absent[:50]) + (" ..." if len(absent) > 50 else "")
        offenders.append((None, f"no label for {len(absent)} requested graph_id(s): {shown}"))
    if offenders:
        _raise(path, offenders, len(offenders), "in the label file")
    return _label_table(np.asarray(ids, dtype=np.int64),
                        np.asarray(labs, dtype=np.float64).reshape(nrows, len(lab_cols)), task)


def _id_problem(raw, gid: int | None, known: set) -> str | None:
    """Why a label file's ``graph_id`` cell names no graph of the dataset, or None."""
    if gid is None:
        return f"graph_id {raw!r} is not an integer"
    if not -2 ** 63 <= gid < 2 ** 63:
        return f"graph_id {gid} is out of range (64-bit graph ids)"
    return None if gid in known else f"unknown graph_id {gid}"


def _label_cell(raw, column: str | None, ln: int, gaps_ok: bool, allowed, task, offenders: list) -> float | None:
    """One label cell as a number (NaN: not measured where the task allows it); a problem goes to ``offenders``."""
    empty = raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "nan", "na", "none"))
    lab = None if empty else _parse_label(raw)
    what = "label" if column is None else f"label {column}"
    if empty and gaps_ok:
        return math.nan
    if lab is None:
        offenders.append((ln, f"{what} {raw!r} is not a finite number"
                              + (" (this task needs every label)" if empty and task is not None else "")))
    elif allowed is not None and lab not in allowed:
        offenders.append((ln, f"{what} {raw!r} is not one of {sorted(allowed)}"))
    return lab


def _task_offenders(labs: np.ndarray, task, path, lines) -> list:
    """``(line, problem)`` of every label the task does not take (:func:`~tmdlib.datasets._task.validate_labels`)."""
    from ._task import validate_labels

    try:
        validate_labels(labs, task, path=path, lines=lines, encoded=False)
    except InputError as err:
        found = [(int(err.line), err.problem)] if err.line is not None else []  # one problem, with its line
        for part in err.problem.splitlines()[1:]:
            text = part.strip()
            if text.startswith("line "):
                n, _, msg = text[5:].partition(": ")
                found.append((int(n), msg))
        return found
    return []


def _label_table(gid: np.ndarray, lab: np.ndarray, task) -> pa.Table:
    """The checked labels as :func:`labels_schema`'s table, sorted by graph id."""
    order = np.argsort(gid, kind="stable")
    if task is None or task.num_targets == 1:
        return pa.table({"graph_id": pa.array(gid[order], pa.int64()),
                         "label": pa.array(lab[order, 0], pa.float64())}, schema=LABEL_SCHEMA)
    cols = {"graph_id": pa.array(gid[order], pa.int64())}
    for j, c in enumerate(label_columns(task)):
        v = lab[order, j]
        cols[c] = pa.array(v, pa.float64(), mask=np.isnan(v))
    return pa.table(cols, schema=labels_schema(task))


# --------------------------------------------------------------------------------------------------------------
# What comes back from a real lab: keys, qualifiers, notes, replicates, rounds (docs/pipeline.md#labels)
# --------------------------------------------------------------------------------------------------------------

#: Key columns a lab's answer may carry, in the order they are looked for: the request's ``graph_id``, its
#: ``source_id``, or the molecule itself (``smiles``, matched on RDKit's canonical form).
KEY_COLUMNS = ("graph_id", "source_id", "smiles")
#: Value qualifiers, as written before a number (``≤`` / ``≥`` read as ``<=`` / ``>=``).
QUALIFIERS = ("<=", ">=", "<", ">", "~")
#: Qualifiers of a censored measurement (a bound, not a value); ``~`` (approximately) is a value.
CENSORED = ("<", ">", "<=", ">=")
#: Text notes read as "no value" (case-insensitive): the molecule stays requested; the report names them.
MISSING_NOTES = frozenset({"", "na", "n/a", "nan", "none", "null", "nd", "n.d.", "n.d", "not determined",
                           "inactive", "-", "--", "?", "missing", "nt", "n.t.", "not tested", "failed"})
#: ``labels.replicates``: several values of one molecule (and target).
REPLICATE_RULES = ("mean", "median", "refuse")
#: ``labels.censored``: a value with ``<``, ``>``, ``<=`` or ``>=``.
CENSORED_RULES = ("drop", "as-value", "refuse")

#: One row per measurement (a graph, a target, a value as the lab wrote it).
MEASUREMENT_SCHEMA = pa.schema([
    pa.field("graph_id", pa.int64(), nullable=False),
    pa.field("target", pa.string(), nullable=False),
    pa.field("value", pa.float64(), nullable=False),   # NaN: a note (no value)
    pa.field("qualifier", pa.string(), nullable=False),  # "" | < | > | <= | >= | ~
    pa.field("note", pa.string(), nullable=False),       # the text of a missing value ("n.d."), else ""
    pa.field("line", pa.int64(), nullable=False),        # line (CSV) or record (SDF) in its file
])

_NUMBER = None


def parse_value(text) -> tuple[float, str, str]:
    """A lab's cell as ``(value, qualifier, note)``.

    ``"5.2"`` → ``(5.2, "", "")``; ``">-5.24"`` → ``(-5.24, ">", "")``; ``"≤ 3"`` → ``(3.0, "<=", "")``;
    ``"n.d."`` (any of :data:`MISSING_NOTES`) → ``(nan, "", "n.d.")``.

    Raises
    ------
    ValueError
        Anything else (text that is no number, a qualifier without a number, an infinite value), with the reason.
    """
    import re

    global _NUMBER
    if _NUMBER is None:
        _NUMBER = re.compile(r"^(<=|>=|≤|≥|=<|=>|<|>|~|=)?\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)$")
    raw = "" if text is None else str(text)
    t = raw.strip()
    if isinstance(text, (int, float, np.integer, np.floating)) and not isinstance(text, bool):
        v = float(text)
        if math.isnan(v):
            return math.nan, "", "nan"
        if not math.isfinite(v):
            raise ValueError(f"{raw!r} is not a finite number")
        return v, "", ""
    if t.lower() in MISSING_NOTES:
        return math.nan, "", t if t else "empty"
    m = _NUMBER.match(t.replace(" ", ""))
    if m is None:
        raise ValueError(f"{raw!r} is not a number, a qualified number ({', '.join(QUALIFIERS)} before it) or a "
                         f"missing-value note (n.d., inactive, NA, ...)")
    q = {"≤": "<=", "≥": ">=", "=<": "<=", "=>": ">=", "=": "", None: ""}.get(m.group(1), m.group(1))
    v = float(m.group(2))
    if not math.isfinite(v):
        raise ValueError(f"{raw!r} is not a finite number")
    return v, q, ""


#: Columns of an answer that identify the molecule (or describe the request), never its value.
KEY_COLUMNS = ("graph_id", "source_id", "smiles", "purpose", "tau", "rank", "round", "file", "sha256", "line",
               "qualifier", "note", "target")


def _value_columns(names: list[str], targets: Sequence[str], value_column: str | None) -> list[str] | str:
    """The value column(s) of an answer table for the targets, or the reason there are none."""
    if value_column:
        return [value_column] if value_column in names else f"no value column {value_column!r}"
    if len(targets) > 1:
        missing = [t for t in targets if t not in names]
        return list(targets) if not missing else f"missing value column(s) {', '.join(missing)} (one per target)"
    for c in ("label", "y", targets[0], "value"):
        if c in names:
            return [c]
    others = [c for c in names if c not in KEY_COLUMNS]
    if len(others) == 1:  # one column besides the keys: the lab named its value as it pleased (pKi, solubility)
        return others
    return (f"no value column (label, y, {targets[0]} or value, or a single column besides the keys); found "
            f"{', '.join(others) or 'none'}")


def key_index(pool_keys, graph_ids, wanted: Iterable[str]) -> dict[str, list[int]]:
    r"""The graph ids of each wanted key among a pool's keys, in time linear in the pool and no Python loop over it.

    ``index[k] = [g_i : pool_keys_i = k]`` for every ``k`` of ``wanted`` that the pool has: the pool's key column
    is filtered with Arrow's hashed ``is_in`` against the wanted set (vectorised, O(n + m)), and only the matching
    rows -- at most a few per answer -- are grouped in Python.  This is what lets a lab's answers keyed by SMILES
    or by compound id be matched on a pool of millions in about the time graph-id keys take.

    Parameters
    ----------
    pool_keys : pyarrow.Array, pyarrow.ChunkedArray or sequence of str, length n
        The pool's key of each molecule (e.g. the store's canonical SMILES or compound ids; null: no key).
    graph_ids : array_like of int, length n
        The graph id of each row.
    wanted : iterable of str, m keys
        The keys asked for (the lab's, already in the pool keys' form: canonical SMILES, stripped ids).

    Returns
    -------
    dict
        ``key -> [graph ids]`` (pool order) for the wanted keys found; a key the pool lacks is absent.
    """
    import pyarrow.compute as pc

    want = pa.array(sorted({str(w) for w in wanted if w is not None}), pa.string())
    keys = pool_keys if isinstance(pool_keys, (pa.Array, pa.ChunkedArray)) else pa.array(list(pool_keys), pa.string())
    if not len(want) or not len(keys):
        return {}
    hit = pc.fill_null(pc.is_in(keys, value_set=want), False)
    rows = np.flatnonzero(np.asarray(hit))
    index: dict[str, list[int]] = {}
    ids = np.asarray(graph_ids)
    for k, g in zip(pc.take(keys, pa.array(rows)).to_pylist(), ids[rows].tolist()):
        index.setdefault(k, []).append(int(g))
    return index


def read_answers(table: pa.Table, known_ids, targets: Sequence[str] = ("y",), *, request_sources=None,
                 pool_smiles=None, canonical=None, smiles_index=None, path: str | os.PathLike | None = None,
                 line_numbers=None, value_column: str | None = None, limit: int = 50) -> tuple[pa.Table, dict]:
    r"""A lab's answer table as measurements, every key and value checked; every problem in one error.

    Keys (the first of :data:`KEY_COLUMNS` the table has): ``graph_id`` (an id of the pool), ``source_id`` (the
    request's, ``request_sources``), or ``smiles`` -- matched on the canonical form (``canonical``, e.g. RDKit's,
    applied to the pool's SMILES ``pool_smiles`` and to the lab's), however the lab wrote the molecule.  A key that
    matches no molecule (or a ``source_id`` that matches two) is an error naming its line: a typo never drops or
    mislabels a molecule silently.  A SMILES matching several molecules of the pool (one structure stored twice) is
    the answer of every copy (``info["copies"]``).
    Values (:func:`parse_value`): a number, a qualified number (``<``, ``>``, ``<=``, ``>=``, ``~``: kept in the
    ``qualifier`` column) or a missing-value note (NaN, kept in ``note``).  A row whose cells are all blank is
    skipped (an empty line); several rows of one molecule are replicates (all kept).

    Parameters
    ----------
    table : pyarrow.Table
        As read (cells as text).
    known_ids : array_like of int
        Every graph id of the pool.
    targets : sequence of str
        The task's targets: one value column (``label``, ``y``, the target's name or ``value``), or one column
        per target for several.
    request_sources : mapping of str to list of int, optional
        ``source_id -> graph ids`` of the requests.
    pool_smiles : tuple (graph_ids, smiles), optional
        The pool's molecules.
    canonical : callable, optional
        ``canonical(smiles) -> str or None`` (None: not a molecule); needed for a ``smiles`` key.
    smiles_index : mapping of str to list of int, optional
        ``canonical SMILES -> graph ids`` of the pool, at least for the lab's molecules (:func:`key_index` on the
        store's canonical column, written at ingest): used instead of canonicalising ``pool_smiles``.
    path : path, optional
        Named in errors.
    line_numbers : array_like of int, optional
        File line of each row (default row + 2: a header on line 1).
    value_column : str, optional
        The value column's name when it is none of the defaults.
    limit : int
        At most this many problems are listed.

    Returns
    -------
    measurements : pyarrow.Table
        :data:`MEASUREMENT_SCHEMA`, in file order.
    info : dict
        ``key`` (the key column used), ``rows`` (answer rows read), ``blank`` (rows skipped), ``copies`` (when a
        SMILES answered several copies of one structure: ``answers``, ``graphs``, ``rule``).

    Raises
    ------
    InputError
        No key or value column (line 1), or every offending line with its problem.
    """
    names = table.column_names
    key = next((k for k in KEY_COLUMNS if k in names), None)
    if key is None:
        raise InputError(path, f"no key column: an answer is keyed by graph_id, source_id or smiles; found {names}",
                         line=1)
    cols = _value_columns(names, targets, value_column)
    if isinstance(cols, str):
        raise InputError(path, f"{cols}; found {names}", line=1)
    if key == "smiles" and ((pool_smiles is None and smiles_index is None) or canonical is None):
        raise InputError(path, "answers keyed by SMILES need a pool of molecules (this pool has no smiles column)",
                         line=1)
    n = table.num_rows
    lines = np.arange(2, n + 2) if line_numbers is None else np.asarray(line_numbers, dtype=np.int64)
    known = {int(k) for k in known_ids}
    by_smiles: dict[str, list[int]] = {} if smiles_index is None else smiles_index
    if key == "smiles" and smiles_index is None:  # no key index: every molecule of the pool canonicalised
        for g, s in zip(*pool_smiles):
            by_smiles.setdefault(canonical(s) if s else None, []).append(int(g))
    keys = table.column(key).to_pylist()
    vals = [table.column(c).to_pylist() for c in cols]
    others = [table.column(c).to_pylist() for c in names]
    problems: list[tuple[int, str]] = []
    rows = {"graph_id": [], "target": [], "value": [], "qualifier": [], "note": [], "line": []}
    blank = 0
    copies: list[int] = []
    for r in range(n):
        ln = int(lines[r])
        if all(v is None or str(v).strip() == "" for col in others for v in (col[r],)):
            blank += 1
            continue
        gid, why, hits = _resolve_key(key, keys[r], known, request_sources, by_smiles, canonical)
        if len(hits) > 1 and why is None:  # one structure stored several times: the answer is every copy's
            copies.append(len(hits))
        parsed = []
        for c, col in zip(cols, vals):
            try:
                parsed.append((c, *parse_value(col[r])))
            except ValueError as err:
                problems.append((ln, f"value{'' if len(cols) == 1 else ' ' + c} {err}"))
        if why is not None:
            problems.append((ln, why))
            continue
        for g in (hits if key == "smiles" and len(hits) > 1 else [gid]):
            for c, (_, v, q, note) in zip(cols, parsed):
                target = targets[0] if len(cols) == 1 else c
                rows["graph_id"].append(g)
                rows["target"].append(target)
                rows["value"].append(v)
                rows["qualifier"].append(q)
                rows["note"].append(note)
                rows["line"].append(ln)
    if problems:
        _raise(path, problems, limit, "in the answer file")
    info = {"key": key, "rows": n - blank, "blank": blank}
    if copies:
        info["copies"] = {"answers": len(copies), "graphs": int(sum(copies)),
                          "rule": "a SMILES-keyed answer applies to every copy of its structure in the pool"}
    return pa.table(rows, schema=MEASUREMENT_SCHEMA), info


def _resolve_key(key: str, raw, known: set, request_sources, by_smiles: dict, canonical) -> tuple:
    """``(graph id, problem or None, every graph the key names)`` of one answer's key cell."""
    text = "" if raw is None else str(raw).strip()
    if not text:
        return None, f"empty {key}", []
    if key == "graph_id":
        gid = _parse_id(text)
        if gid is None:
            return None, f"graph_id {raw!r} is not an integer", []
        return (gid, None, [gid]) if gid in known else (None, f"graph_id {gid} is no graph of the pool", [])
    if key == "source_id":
        hits = list((request_sources or {}).get(text, ()))
        what, where = f"source_id {text!r}", "of the requests"
    else:
        c = canonical(text)
        hits = [] if c is None else by_smiles.get(c, [])
        what = f"SMILES {text!r}" + (" (RDKit cannot parse it)" if c is None else "")
        where = "of the pool"
    if len(hits) == 1 or (hits and key == "smiles"):
        return hits[0], None, hits
    if not hits:
        return None, f"{what} matches no molecule {where}", []
    return None, f"{what} matches {len(hits)} molecules {where} (graph ids {', '.join(map(str, hits[:5]))})", hits


def _raise(path, problems: list, limit: int, where: str) -> None:
    problems = sorted(problems, key=lambda p: (p[0] is None, p[0] or 0))
    if len(problems) == 1:  # one problem: one line, "file:line: problem"
        err = InputError(path, problems[0][1], line=problems[0][0])
        err.offenders = problems
        raise err
    body = "\n".join(f"  {'line ' + str(ln) if ln is not None else 'file'}: {msg}" for ln, msg in problems[:limit])
    more = f"\n  ... and {len(problems) - limit} more" if len(problems) > limit else ""
    err = InputError(path, f"{len(problems)} problem(s) {where}:\n{body}{more}")
    err.offenders = problems
    raise err


def apply_censored(measurements: pa.Table, rule: str = "drop", *, path=None, where=None) -> tuple[pa.Table, dict]:
    """The censored-value rule (``labels.censored``) on measurements with a ``qualifier`` column.

    ``drop`` (default): a value with ``<``, ``>``, ``<=`` or ``>=`` is a bound, not a measurement: left out of the
    labels (counted); ``as-value``: the bound is taken as the value; ``refuse``: one error naming every such line.
    ``~`` (approximately) is a value under every rule.  The measurements themselves are kept (the ledger holds
    them all); the rule decides what the labels are.

    Parameters
    ----------
    measurements : pyarrow.Table
        With ``qualifier`` and ``line`` (and, from the ledger, ``file``) columns.
    rule : {"drop", "as-value", "refuse"}
    path : path, optional
    where : callable, optional
        ``where(row) -> str`` naming a row in errors (default: ``line N``).

    Returns
    -------
    kept : pyarrow.Table
        The measurements the labels are made of.
    info : dict
        ``rule``, ``censored`` (how many), ``dropped`` (how many left out), ``graph_ids`` (of the censored).
    """
    if rule not in CENSORED_RULES:
        raise InputError(path, f"labels.censored must be one of {', '.join(CENSORED_RULES)}; got {rule!r}")
    q = np.asarray(measurements.column("qualifier").to_pylist(), dtype=object)
    cens = np.isin(q, CENSORED)
    info = {"rule": rule, "censored": int(cens.sum()), "dropped": 0,
            "graph_ids": sorted({int(g) for g in np.asarray(measurements.column("graph_id"))[cens]})}
    if not cens.any() or rule == "as-value":
        return measurements, info
    if rule == "refuse":
        lines = measurements.column("line").to_pylist()
        vals = measurements.column("value").to_pylist()
        name = where or (lambda r: None)
        problems = [(lines[r] if where is None else None,
                     (f"{name(r)}: " if where is not None else "") +
                     f"censored value {q[r]}{vals[r]:g} (labels.censored: refuse; drop or as-value accept it)")
                    for r in np.flatnonzero(cens)]
        _raise(path, problems, 50, "in the answer file")
    info["dropped"] = int(cens.sum())
    return measurements.filter(pa.array(~cens)), info


def aggregate_measurements(measurements: pa.Table, task, rule: str = "mean", max_spread: float = 1.0, *,
                           path=None, where=None) -> tuple[np.ndarray, np.ndarray, dict]:
    r"""One label per graph and target from its measurements, by a stated rule (``labels.replicates``).

    Notes (NaN values) are no measurement.  For each graph and target with values :math:`v_1..v_r`:

    * regression: ``mean`` (default) or ``median`` of the values; the spread is :math:`\max v - \min v`, flagged
      when above ``max_spread`` (in the label's units);
    * classification (binary, multi-class, multi-task): the majority value under ``mean`` / ``median``; a tie is
      one error naming the lines (no class can be chosen); replicates that disagree are flagged;
    * ``refuse``: any graph measured more than once is an error naming its lines.

    Parameters
    ----------
    measurements : pyarrow.Table
        :data:`MEASUREMENT_SCHEMA` (plus, from the ledger, ``round`` and ``file``): censored values already handled
        (:func:`apply_censored`).
    task : TaskSpec
        A decided task: its targets are the columns of the result.
    rule : {"mean", "median", "refuse"}
    max_spread : float
        Regression: a spread above it is flagged.
    path : path, optional
    where : callable, optional
        ``where(row) -> str`` naming a measurement in errors (default ``line N``).

    Returns
    -------
    graph_ids : ndarray of int64, shape (m,)
        Sorted; every graph with at least one value.
    Y : ndarray of float64, shape (m, T)
        NaN where a target has no value.
    info : dict
        ``rule``, ``replicated`` (graphs with more than one value), ``flagged`` (``graph_id``, ``target``,
        ``values``, ``spread``, ``label``), ``conflicts`` (graphs whose values differ across rounds, each with its
        measurements and the resolved label), ``max_spread``.
    """
    if rule not in REPLICATE_RULES:
        raise InputError(path, f"labels.replicates must be one of {', '.join(REPLICATE_RULES)}; got {rule!r}")
    names = measurements.column_names
    gid = np.asarray(measurements.column("graph_id"), dtype=np.int64)
    tgt = measurements.column("target").to_pylist()
    val = np.asarray(measurements.column("value"), dtype=np.float64)
    lines = measurements.column("line").to_pylist()
    rounds = measurements.column("round").to_pylist() if "round" in names else [0] * len(gid)
    files = measurements.column("file").to_pylist() if "file" in names else [None] * len(gid)
    name = where or (lambda r: f"line {lines[r]}")
    col = {t: j for j, t in enumerate(task.targets)}
    unknown = sorted({t for t in tgt if t not in col})
    if unknown:
        raise InputError(path, f"values for target(s) {', '.join(unknown)}, not the task's {', '.join(task.targets)}")
    groups: dict[tuple[int, int], list[int]] = {}
    for r in np.flatnonzero(np.isfinite(val)):
        groups.setdefault((int(gid[r]), col[tgt[r]]), []).append(int(r))
    ids = np.array(sorted({g for g, _ in groups}), dtype=np.int64)
    pos = {int(g): i for i, g in enumerate(ids)}
    Y = np.full((ids.size, task.num_targets), np.nan)
    problems, flagged, conflicts, replicated = [], [], [], set()
    for (g, j), rs in sorted(groups.items()):
        v = val[rs]
        if len(rs) > 1:
            replicated.add(g)
            if rule == "refuse":
                problems.append((None, f"graph {g} measured {len(rs)} times ({', '.join(name(r) for r in rs)}; "
                                       f"labels.replicates: refuse; mean or median aggregate them)"))
                continue
        if task.is_classification:
            vals, counts = np.unique(v, return_counts=True)
            top = np.flatnonzero(counts == counts.max())
            if top.size > 1:
                problems.append((None, f"graph {g}: replicates disagree with no majority "
                                       f"({', '.join(f'{x:g} at {name(r)}' for x, r in zip(v, rs))})"))
                continue
            label, spread = float(vals[top[0]]), float(vals.size - 1)
            flag = vals.size > 1
        else:
            label = float(np.mean(v) if rule != "median" else np.median(v))
            spread = float(v.max() - v.min())
            flag = spread > max_spread
        Y[pos[g], j] = label
        if flag:
            flagged.append({"graph_id": g, "target": task.targets[j], "values": [float(x) for x in v],
                            "spread": spread, "label": label})
        if len({rounds[r] for r in rs}) > 1 and np.unique(v).size > 1:
            conflicts.append({"graph_id": g, "target": task.targets[j], "label": label, "measurements": [
                {"value": float(val[r]), "round": rounds[r], "file": files[r], "line": lines[r]} for r in rs]})
    if problems:
        _raise(path, problems, 50, "among the measurements")
    return ids, Y, {"rule": rule, "max_spread": float(max_spread), "replicated": len(replicated),
                    "flagged": flagged, "conflicts": conflicts}


def labels_of_table(table: pa.Table, task, path: str | os.PathLike | None = None) -> dict:
    """``{graph_id: label}`` of a ``labels.csv`` read as text, every value checked against the dataset's ``task``.

    Parameters
    ----------
    table : pyarrow.Table
        ``graph_id`` and ``y`` (one target) or one column per target (:func:`label_columns`), every cell as text.
    task : TaskSpec
        The dataset's task (:mod:`tmdlib.datasets._task`); its values are checked by :func:`validate_label_import`.
    path : str, optional
        The file, in messages.

    Returns
    -------
    dict
        ``{graph_id: y}``: ``y`` a float for one target, else a float array of shape ``(T,)`` (NaN = not measured),
        in the values users write (multi-class: the class values).

    Raises
    ------
    InputError
        A ``graph_id`` that is not an integer (its line named), or what :func:`validate_label_import` refuses.
    """
    from .documents import parse_int

    ids = [parse_int(g) for g in table.column("graph_id").to_pylist()]
    if any(g is None for g in ids):
        row = [g is None for g in ids].index(True)
        raise InputError(path, f"graph_id {table.column('graph_id')[row].as_py()!r} is not an integer", line=row + 2)
    checked = validate_label_import(table, [], [g for g in ids if -2 ** 63 <= g < 2 ** 63], path, task=task,
                                    label_column="y")
    Y = np.column_stack([np.asarray(checked.column(c).to_numpy(zero_copy_only=False), dtype=np.float64)
                         for c in checked.column_names[1:]])
    gids = checked.column("graph_id").to_pylist()
    return {int(g): (float(row[0]) if task.num_targets == 1 else row) for g, row in zip(gids, Y)}


#: The columns a lab's answers may be keyed by, in the order one is chosen.
ANSWER_KEYS = ("graph_id", "source_id", "smiles")


def answer_key(names) -> str | None:
    """The column a lab's answers are keyed by: the first of :data:`ANSWER_KEYS` among ``names`` (None: none)."""
    return next((k for k in ANSWER_KEYS if k in names), None)


def wanted_keys(table: pa.Table, column: str, canonical=None) -> set:
    """The distinct keys of a lab's answers in ``column``, stripped (``canonical``: each made canonical, e.g. a
    SMILES by :func:`tmdlib.datasets._smiles.canonical_smiles`; a key it cannot read left out)."""
    if canonical is None:
        return {str(k).strip() for k in table.column(column).to_pylist() if k is not None}
    return {canonical(str(s).strip()) for s in table.column(column).to_pylist() if s} - {None}


def source_index(requests: pa.Table, wanted: set, pool: pa.Table | None = None,
                 id_column: str = "compound_id") -> dict[str, list[int]]:
    """The graph ids each wanted source id names: among the requests' ``source_id`` (stripped), then among the
    pool's compound ids (``pool``'s ``id_column``, when the pool has them), each graph id once per key
    (:func:`key_index`)."""
    import pyarrow.compute as pc

    index = key_index(pc.utf8_trim_whitespace(requests.column("source_id").cast(pa.string())),
                      requests.column("graph_id"), wanted)
    if pool is not None:  # the pool's ids filtered to the lab's (vectorised): no loop over the pool
        for k, gids in key_index(pool.column(id_column), pool.column("graph_id"), wanted).items():
            hits = index.setdefault(k, [])
            hits.extend(g for g in gids if g not in hits)
    return index
