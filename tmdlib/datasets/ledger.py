"""The label ledger as tables: every measurement paid for, its round, file and line.

Pure functions on text and Arrow tables (no files): the ledger's text checked against its seal and parsed into a
history table, the history aggregated into one label per graph, the ledger's text and seal rendered, and a commit's
new measurements chosen.  Reading and writing the files is :mod:`tasks.ledger`'s.

A history table is :data:`tmdlib.datasets.labels.MEASUREMENT_SCHEMA` (``graph_id``, ``target``, ``value``,
``qualifier``, ``note``, ``line``) plus ``round`` (int64), ``file`` and ``sha256`` (strings): one row per measurement.
"""
from __future__ import annotations

import csv
import hashlib
import io as _io
import json
import math
from pathlib import PurePath

import numpy as np
import pyarrow as pa

from .._errors import InputError
from .labels import LABEL_SCHEMA, MEASUREMENT_SCHEMA, _raise, label_columns, labels_schema

#: Columns of the label ledger (``data/labelled/<DS>.csv``): one row per measurement, never overwritten.
LEDGER_COLUMNS = ("graph_id", "target", "value", "qualifier", "round", "file", "sha256", "line")
#: Format 2 only (still read): the ledger's first line, this prefix, then JSON ``{"format": 2, "sha256": <digest of
#: the rest>, "task": ...}``.  Format 3 keeps the CSV a plain table and this record in its seal beside it.
LEDGER_MAGIC = "# tmdsub label ledger "
#: The format the ledger is written in.
LEDGER_FORMAT = 3
#: Rules of ``labels:`` in params.yaml and their defaults.
RULE_DEFAULTS = {"replicates": "mean", "censored": "drop", "max_spread": 1.0}
#: The qualifiers a ledger row may carry.
_QUALIFIERS = ("", "<", ">", "<=", ">=", "~")


def rows_matrix(y, n: int, task=None) -> np.ndarray:
    """``y`` as a float matrix.

    Parameters
    ----------
    y : array_like
        ``n`` labels, ``(n,)`` or ``(n, T)``.
    n : int
        Number of rows.
    task : TaskSpec, optional
        Gives the width ``T = task.num_targets`` (an empty ``y`` has no width of its own).

    Returns
    -------
    numpy.ndarray
        ``(n, T)`` float64.
    """
    Y = np.asarray(y, dtype=np.float64)
    T = task.num_targets if task is not None else (Y.size // n if n else (Y.shape[1] if Y.ndim == 2 else 1))
    return Y.reshape(n, T)


def empty_history() -> pa.Table:
    """A history table with no row."""
    return with_origin(MEASUREMENT_SCHEMA.empty_table(), 0, "", "")


def with_origin(m: pa.Table, round_: int | list, file: str | list, sha: str | list) -> pa.Table:
    """Measurements with the ledger's ``round``, ``file`` and ``sha256`` columns (one value for all, or a list)."""
    n = m.num_rows
    col = lambda v, t: pa.array(v if isinstance(v, list) else [v] * n, t)  # noqa: E731
    return m.append_column("round", col(round_, pa.int64())).append_column("file", col(file, pa.string())) \
        .append_column("sha256", col(sha, pa.string()))


def ledger_digest(body: str) -> str:
    """sha256 (hex) of the ledger's text (format 2: after its first line)."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def ledger_format(text: str) -> int:
    """The format of a ledger's text: 2 (a ``#`` digest line first), 3 (a plain table of :data:`LEDGER_COLUMNS`), or
    1 (``graph_id,label[,...],source``, no digest)."""
    if text.startswith(LEDGER_MAGIC):
        return 2
    if text.split("\n", 1)[0].strip().split(",")[:len(LEDGER_COLUMNS)] != list(LEDGER_COLUMNS):
        return 1
    return LEDGER_FORMAT


def _checked_format2(text: str, path) -> tuple[str, dict]:
    first, _, body = text.partition("\n")
    try:
        meta = json.loads(first[len(LEDGER_MAGIC):])
        assert isinstance(meta, dict)
    except (ValueError, AssertionError):
        raise InputError(path, "the label ledger's first line (its digest) is not readable", line=1) from None
    found = ledger_digest(body)
    if meta.get("sha256") != found:
        raise InputError(path, f"the label ledger was edited by hand or damaged: its content's sha256 "
                               f"{found[:12]} is not the {str(meta.get('sha256'))[:12]} recorded by its last "
                               "commit.  Restore it (git checkout / dvc checkout), or, to trust the edit, delete "
                               "its first line: it is then read unchecked and sealed again by the next "
                               "`tmdsub labels commit`", line=1)
    return body, meta


def _checked_format3(text: str, path, seal: dict | None, seal_name: str) -> dict:
    if seal is None:
        return {"format": LEDGER_FORMAT, "task": None, "sha256": None}
    found = ledger_digest(text)
    if found not in (seal.get("sha256"), seal.get("previous")) or found is None:
        raise InputError(path, f"the label ledger was edited by hand or damaged: its content's sha256 "
                               f"{found[:12]} is not the {str(seal.get('sha256'))[:12]} its seal {seal_name} "
                               "records.  Restore it (git checkout / dvc checkout), or, to trust the edit, "
                               f"delete {seal_name}: the ledger is then read unchecked and sealed again by "
                               "the next `tmdsub labels commit`", line=1)
    return {**seal, "interrupted": found != seal.get("sha256")}


def parse_ledger(text: str, path=None, known=None, seal: dict | None = None,
                 seal_name: str = "") -> tuple[pa.Table, dict]:
    """The measurements of a ledger's text (format 2 or 3), checked against its digest before they are trusted.

    A digest that matches neither the sealed one nor the one before the last commit (a commit killed between the
    seal and the ledger leaves the previous ledger, still trusted) is a hand-edited or damaged ledger: refused,
    saying how to restore it or accept the edit.

    Parameters
    ----------
    text : str
        The ledger's text (:func:`ledger_format` 2 or 3).
    path : str, optional
        Named in errors.
    known : array_like of int, optional
        The pool's graph ids: a row naming another graph is refused.
    seal : dict, optional
        Format 3: the seal's record (``sha256``, ``previous``, ``task``, ...), None when there is none (read unchecked).
    seal_name : str
        The seal's file name, for errors.

    Returns
    -------
    history : pyarrow.Table
        A history table (module docstring).
    meta : dict
        ``format``, ``sha256`` (recorded), ``task`` (a dict, or None), ``digest_checked`` (bool), ...

    Raises
    ------
    InputError
        A digest that does not match, a header or a row that does not parse (every offending line named).
    """
    if ledger_format(text) == 2:
        body, meta = _checked_format2(text, path)
        first_row = 3
    else:
        body, first_row = text, 2
        meta = _checked_format3(text, path, seal, seal_name)
    table = csv_table(body, path, LEDGER_COLUMNS, first_row - 1)
    rows = {k: [] for k in (*MEASUREMENT_SCHEMA.names, "round", "file", "sha256")}
    problems = []
    known_set = None if known is None else {int(g) for g in known}
    cols = {c: table.column(c).to_pylist() for c in LEDGER_COLUMNS}
    for r in range(table.num_rows):
        ln = r + first_row
        try:
            g, v, rd, li = int(cols["graph_id"][r]), float(cols["value"][r]), int(cols["round"][r]), \
                int(cols["line"][r])
        except (TypeError, ValueError):
            problems.append((ln, "graph_id, value, round and line must be numbers"))
            continue
        q = cols["qualifier"][r] or ""
        if not np.isfinite(v) or q not in _QUALIFIERS:
            problems.append((ln, f"value {cols['qualifier'][r]}{cols['value'][r]} is not a finite number with a "
                                 "known qualifier"))
        elif known_set is not None and g not in known_set:
            problems.append((ln, f"graph_id {g} is no graph of the pool"))
        for k, x in (("graph_id", g), ("target", cols["target"][r]), ("value", v), ("qualifier", q), ("note", ""),
                     ("line", li), ("round", rd), ("file", cols["file"][r] or ""),
                     ("sha256", cols["sha256"][r] or "")):
            rows[k].append(x)
    if problems:
        _raise(path, problems, 20, "in the label ledger")
    hist = pa.table({k: rows[k] for k in MEASUREMENT_SCHEMA.names}, schema=MEASUREMENT_SCHEMA)
    hist = with_origin(hist, rows["round"], rows["file"], rows["sha256"])
    return hist, {**meta, "digest_checked": bool(meta.get("sha256"))}


def csv_table(body: str, path, required, header_line: int = 2) -> pa.Table:
    """A ledger's CSV text (after the digest line of format 2) as a text table; a missing column names its header,
    a row of another width its line."""
    rows = list(csv.reader(body.splitlines()))
    if not rows or any(c not in rows[0] for c in required):
        raise InputError(path, f"the label ledger's header must be {','.join(required)}", line=header_line)
    head = rows[0]
    data = rows[1:]
    bad = [i for i, r in enumerate(data) if len(r) != len(head)]
    if bad:
        raise InputError(path, f"{len(data[bad[0]])} fields where the header has {len(head)}",
                         line=bad[0] + header_line + 1)
    return pa.table({c: pa.array([r[j] for r in data], pa.string()) for j, c in enumerate(head)})


def _int_or_none(v) -> int | None:
    try:
        f = float(str(v).strip())
    except (TypeError, ValueError):
        return None
    return int(f) if math.isfinite(f) and f.is_integer() else None


def legacy_history(raw: pa.Table, path=None, known=None) -> pa.Table:
    """A ledger of the first format (``graph_id,label[,targets...][,source]``, one label per graph, a text table) as
    round 0 of a history table; column ``label`` is target ``y``, ``source`` the file."""
    targets = [c for c in raw.column_names if c not in ("graph_id", "source")]
    if not targets:
        raise InputError(path, f"the label ledger has no label column; found {raw.column_names}", line=1)
    rows = {k: [] for k in MEASUREMENT_SCHEMA.names}
    files = []
    src = raw.column("source").to_pylist() if "source" in raw.column_names else [""] * raw.num_rows
    known_set = None if known is None else {int(g) for g in known}
    problems = []
    for r, gid in enumerate(raw.column("graph_id").to_pylist()):
        g = _int_or_none(gid)
        if g is None or (known_set is not None and g not in known_set):
            problems.append((r + 2, f"graph_id {gid!r} is no graph of the pool"))
            continue
        for t in targets:
            cell = raw.column(t)[r].as_py()
            try:
                v = float(cell) if cell not in (None, "") else math.nan
            except ValueError:
                problems.append((r + 2, f"label {cell!r} is not a number"))
                continue
            if math.isnan(v):
                continue
            for k, x in (("graph_id", g), ("target", "y" if t == "label" else t), ("value", v),
                         ("qualifier", ""), ("note", ""), ("line", r + 2)):
                rows[k].append(x)
            files.append(src[r] or "ledger")
    if problems:
        _raise(path, problems, 20, "in the label ledger")
    return with_origin(pa.table(rows, schema=MEASUREMENT_SCHEMA), 0, files, "")


def ledger_text(history: pa.Table) -> str:
    """The CSV text of a history table: :data:`LEDGER_COLUMNS`, values as ``repr(float)`` (exact round trip)."""
    buf = _io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(LEDGER_COLUMNS)
    for row in zip(*(history.column(c).to_pylist() for c in LEDGER_COLUMNS)):
        w.writerow([row[0], row[1], repr(float(row[2])), *row[3:]])
    return buf.getvalue()


def seal_record(body: str, previous_text: str | None, ledger_name: str, task, name: str | None = None) -> dict:
    """The seal of a ledger's text ``body``: its digest, the previous ledger's (``previous_text``; none for a
    format-2 or missing one), the task and the property's ``name``."""
    previous = None
    if previous_text is not None:
        previous = ledger_digest(previous_text) if not previous_text.startswith(LEDGER_MAGIC) else None
    seal = {"format": LEDGER_FORMAT, "ledger": ledger_name, "sha256": ledger_digest(body), "previous": previous,
            "task": None if task is None else task.to_dict()}
    if name:  # the property the labels measure (labels.json's name)
        seal["name"] = name
    return seal


def ledger_task(task, meta: dict):
    """The task labels are read under: a decided ``task`` (the store's), else the ledger's recorded one (``meta``:
    :func:`parse_ledger`'s), else a first-format ledger's binary, else ``task``."""
    from ._task import BINARY, TaskSpec

    if task is not None and task.decided:
        return task
    if meta.get("task"):
        return TaskSpec.from_dict(meta["task"])
    if task is None and meta.get("format") == 1:  # a ledger written before task types: every label was binary
        return BINARY
    return task


def label_table(ids, Y, task) -> pa.Table:
    """Aggregated labels ``(ids (n,), Y (n, T))`` as a :func:`tmdlib.datasets.labels.labels_schema` table (one target:
    ``graph_id,label``; several: one nullable column per target)."""
    if task.num_targets == 1:
        return pa.table({"graph_id": pa.array(ids, pa.int64()), "label": pa.array(Y[:, 0], pa.float64())},
                        schema=LABEL_SCHEMA)
    cols = {"graph_id": pa.array(ids, pa.int64())}
    for j, c in enumerate(label_columns(task)):
        cols[c] = pa.array(Y[:, j], pa.float64(), mask=np.isnan(Y[:, j]))
    return pa.table(cols, schema=labels_schema(task))


def where_namer(hist: pa.Table, current_file: str | None = None, new_round: int | None = None):
    """``r -> str`` naming row ``r`` of a history in errors: its line for this import's file (``current_file`` in
    round ``new_round``), else the ledger round and file."""
    lines, rounds, files = (hist.column(c).to_pylist() for c in ("line", "round", "file"))

    def name(r: int) -> str:
        if current_file is not None and files[r] == current_file and rounds[r] == new_round:
            return f"line {lines[r]}"
        return f"{PurePath(files[r]).name or 'ledger'} line {lines[r]} (round {rounds[r]})"
    return name


def aggregate(hist: pa.Table, task, replicates: str, censored: str, path, where=None) -> tuple:
    """One label per graph from a history: censored values by ``censored``, then replicates by ``replicates``
    (:func:`~tmdlib.datasets.labels.apply_censored`, :func:`~tmdlib.datasets.labels.aggregate_measurements`, the
    default spread).  Returns ``(ids (n,), Y (n, T), info)``, ``info["censored"]`` the censoring record."""
    from .labels import aggregate_measurements, apply_censored

    kept, cens = apply_censored(hist, censored, path=path, where=where)
    ids, Y, info = aggregate_measurements(kept, task, replicates, RULE_DEFAULTS["max_spread"], path=path,
                                          where=None if where is None else where_namer(kept))
    return ids, Y, {**info, "censored": cens}


def ledger_labels(hist: pa.Table, meta: dict, task=None, *, replicates: str = "mean", censored: str = "drop",
                  path=None) -> pa.Table:
    """The labels a ledger holds, one row per graph (:func:`label_table`), under the dataset's task -- ``task`` when
    decided, else the ledger's (:func:`ledger_task`); an empty table when there are none."""
    task = ledger_task(task, meta)
    if hist.num_rows == 0 or task is None:
        return labels_schema(task if task is not None and task.decided else None).empty_table()
    ids, Y, _ = aggregate(hist, task, replicates, censored, path)
    return label_table(ids, Y, task)


def cell(v: float) -> str:
    """A label cell of labels.csv: empty for NaN, else ``repr(float)``."""
    return "" if np.isnan(v) else repr(float(v))


def same_measurement_key(hist: pa.Table) -> set:
    """``{(graph_id, target, value, qualifier)}`` of a history: a measurement already held."""
    cols = [hist.column(c).to_pylist() for c in ("graph_id", "target", "value", "qualifier")]
    return set(zip(*cols))


def next_round(hist: pa.Table) -> int:
    """The round a new import or commit takes: one after the history's last (1 for an empty history)."""
    return (max(hist.column("round").to_pylist()) if hist.num_rows else 0) + 1


def commit_task(task, labels_meta: dict, meta: dict, where=None):
    """The task a commit seals: ``task`` when decided, else the labels run's (``labels_meta["task"]``), else the
    ledger's (:func:`ledger_task`); refused when the ledger records another one."""
    from ._task import TaskSpec

    spec = task if task is not None and task.decided else (
        TaskSpec.from_dict(labels_meta["task"]) if labels_meta.get("task") else ledger_task(task, meta))
    if meta.get("task") and spec is not None and TaskSpec.from_dict(meta["task"]) != spec:
        raise InputError(where, f"labels for a {spec.describe()} task; the ledger's task is "
                                f"{TaskSpec.from_dict(meta['task']).describe()}")
    return spec


def commit_rows(hist: pa.Table, meta: dict, new: pa.Table, spec) -> tuple[pa.Table, int, bool]:
    """What a commit adds to the ledger: the rows of ``new`` it does not hold yet, in the next round.

    A row is held when the ledger has the same file (``sha256``), line, graph and target, or the same graph, target,
    value and qualifier.  Returns ``(rows to add, their round, whether the ledger must be rewritten)``: rows to add,
    or a ledger not yet sealed in :data:`LEDGER_FORMAT` / without its task.
    """
    have = {(s, li, g, t) for s, li, g, t in zip(*(hist.column(c).to_pylist() for c in
                                                  ("sha256", "line", "graph_id", "target"))) if s}
    same = same_measurement_key(hist)
    keep = []
    for r, key in enumerate(zip(*(new.column(c).to_pylist() for c in ("sha256", "line", "graph_id", "target")))):
        val = (key[2], key[3], new.column("value")[r].as_py(), new.column("qualifier")[r].as_py())
        keep.append(not (key[0] and key[:] in have) and val not in same)
    add = new.filter(pa.array(keep, pa.bool_())) if new.num_rows else new
    rnd = next_round(hist)
    add = add.set_column(add.column_names.index("round"), "round", pa.array([rnd] * add.num_rows, pa.int64()))
    rewrite = bool(add.num_rows or meta.get("format") != LEDGER_FORMAT or not meta.get("sha256") or (
        spec is not None and not meta.get("task")))
    return add, rnd, rewrite


def measurements_table(t: pa.Table, path=None) -> pa.Table:
    """A ``measurements.csv`` read as text (the ledger's columns, no digest) as a history table."""
    cols = {c: t.column(c).to_pylist() for c in LEDGER_COLUMNS}
    try:
        base = pa.table({"graph_id": [int(x) for x in cols["graph_id"]], "target": cols["target"],
                         "value": [float(x) for x in cols["value"]], "qualifier": cols["qualifier"],
                         "note": [""] * t.num_rows, "line": [int(x) for x in cols["line"]]}, schema=MEASUREMENT_SCHEMA)
    except (TypeError, ValueError) as err:
        raise InputError(path, f"not a measurements file: {err}") from None
    return with_origin(base, [int(x) for x in cols["round"]], cols["file"], cols["sha256"])


def labels_as_measurements(labels: dict, labels_meta: dict, task) -> pa.Table:
    """Labels ``{graph_id: value or (T,) values}`` of a run without measurements.csv (older runs) as one measurement
    per finite label, round 0, from the run's file (``labels_meta``: ``file`` or ``source``, ``sha256``)."""
    rows = {k: [] for k in MEASUREMENT_SCHEMA.names}
    targets = task.targets if task is not None else ("y",)
    for g, y in sorted(labels.items()):
        for t, v in zip(targets, np.atleast_1d(y)):
            if np.isfinite(v):
                for k, x in (("graph_id", g), ("target", t), ("value", float(v)), ("qualifier", ""), ("note", ""),
                             ("line", 0)):
                    rows[k].append(x)
    src = labels_meta.get("file") or labels_meta.get("source", "unknown")
    return with_origin(pa.table(rows, schema=MEASUREMENT_SCHEMA), 0, src, labels_meta.get("sha256", ""))


def unsealed_meta(fmt: int = LEDGER_FORMAT) -> dict:
    """What a ledger without a checked seal records: its format, no task, the digest not checked."""
    return {"format": fmt, "task": None, "digest_checked": False, "sha256": None}


def commit_summary(ledger: str, hist: pa.Table, add: pa.Table, rnd: int) -> dict:
    """What ``tmdsub labels commit`` reports: the ledger, the measurements ``add``-ed to ``hist`` (their round, none
    when nothing was added), the measurements and the graphs the ledger holds now."""
    graphs = len(set(hist.column("graph_id").to_pylist()) | set(add.column("graph_id").to_pylist()))
    return {"ledger": str(ledger), "added": int(add.num_rows), "round": rnd if add.num_rows else None,
            "measurements": int(hist.num_rows + add.num_rows), "total": graphs}
