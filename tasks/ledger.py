"""The label ledger (``data/labelled/<DS>.csv``): every measurement paid for, its round, file and line; read,
checked against its seal, aggregated into labels, and grown by ``tmdsub labels commit``."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
from prefect import task

from tmdlib import InputError

from . import io


#: Columns of the label ledger (``data/labelled/<DS>.csv``): one row per measurement, never overwritten.
LEDGER_COLUMNS = ("graph_id", "target", "value", "qualifier", "round", "file", "sha256", "line")
#: Format 2 only (still read): the ledger's first line, this prefix, then JSON ``{"format": 2, "sha256": <digest of
#: the rest>, "task": ...}``.  Format 3 keeps the CSV a plain table and this record in its seal (:func:`seal_path`).
LEDGER_MAGIC = "# tmdsub label ledger "
#: The format :func:`write_ledger` writes.
LEDGER_FORMAT = 3


def seal_path(path) -> Path:
    """The ledger's seal beside it (``data/labelled/<DS>.csv`` -> ``data/labelled/<DS>.seal.json``): the sha256 of
    the ledger's text, the one before the last commit, and the task."""
    p = Path(path)
    return p.with_name(p.stem + ".seal.json")
#: Rules of ``labels:`` in params.yaml and their defaults.
RULE_DEFAULTS = {"replicates": "mean", "censored": "drop", "max_spread": 1.0}


def _rows(y, n: int, task=None) -> np.ndarray:
    """``y`` as a float matrix ``(n, T)``; T from the task when given (an empty ``y`` has no width of its own)."""
    Y = np.asarray(y, dtype=np.float64)
    T = task.num_targets if task is not None else (Y.size // n if n else (Y.shape[1] if Y.ndim == 2 else 1))
    return Y.reshape(n, T)


def _matrix(table: pa.Table) -> np.ndarray:
    """Label columns of a validated label table as a float matrix ``(m, T)`` (null = NaN)."""
    cols = [c for c in table.column_names if c not in ("graph_id", "source")]
    if not cols:
        return np.zeros((table.num_rows, 1))
    return np.column_stack([np.asarray(table.column(c).to_numpy(zero_copy_only=False), dtype=np.float64)
                            for c in cols])


def _empty_history() -> pa.Table:
    from tmdlib.datasets.labels import MEASUREMENT_SCHEMA

    return _with_origin(MEASUREMENT_SCHEMA.empty_table(), 0, "", "")


def _with_origin(m: pa.Table, round_: int | list, file: str | list, sha: str | list) -> pa.Table:
    """Measurements with the ledger's ``round``, ``file`` and ``sha256`` columns."""
    n = m.num_rows
    col = lambda v, t: pa.array(v if isinstance(v, list) else [v] * n, t)  # noqa: E731
    return m.append_column("round", col(round_, pa.int64())).append_column("file", col(file, pa.string())) \
        .append_column("sha256", col(sha, pa.string()))


def ledger_digest(body: str) -> str:
    """sha256 of the ledger's text after its first line (what its first line records)."""
    import hashlib

    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def read_ledger_history(path: str | None, known: np.ndarray | None = None) -> tuple[pa.Table, dict]:
    """Every measurement of the label ledger and what its seal records, checked before it is trusted.

    The ledger (format 3) is a plain CSV of :data:`LEDGER_COLUMNS` (``pandas.read_csv`` reads it); its seal beside
    it (:func:`seal_path`) holds the sha256 of its text and the task the labels fixed.  A digest that matches
    neither the sealed one nor the one before the last commit (a commit killed between the seal and the ledger
    leaves the previous ledger, still trusted) is a hand-edited or damaged ledger: refused, saying how to restore
    it or accept the edit.  Format 2 (the digest and task on a ``#`` first line) is read as before; a ledger of the
    first format (``graph_id,label[,...],source``, no digest) as round 0.  A missing file is an empty ledger.

    Returns
    -------
    history : pyarrow.Table
        :data:`tmdlib.datasets.labels.MEASUREMENT_SCHEMA` plus ``round``, ``file``, ``sha256``.
    meta : dict
        ``format``, ``sha256`` (recorded), ``task`` (a dict, or None), ``digest_checked`` (bool).
    """
    from tmdlib.datasets.labels import MEASUREMENT_SCHEMA

    if not path or not Path(path).exists():
        return _empty_history(), {"format": LEDGER_FORMAT, "task": None, "digest_checked": False, "sha256": None}
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(path, f"cannot read the label ledger: {err}") from None
    seal = seal_path(p)
    if text.startswith(LEDGER_MAGIC):  # format 2: the seal on the first line
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
        first_row = 3
    elif text.split("\n", 1)[0].strip().split(",")[:len(LEDGER_COLUMNS)] != list(LEDGER_COLUMNS):
        return _legacy_history(path, known), {"format": 1, "task": None, "digest_checked": False, "sha256": None}
    else:  # format 3: a plain table, sealed beside it
        body, first_row = text, 2
        meta = {"format": LEDGER_FORMAT, "task": None, "sha256": None}
        if seal.is_file():
            try:
                meta = json.loads(seal.read_text(encoding="utf-8"))
                assert isinstance(meta, dict)
            except (OSError, ValueError, AssertionError):
                raise InputError(seal, "the label ledger's seal is not readable: restore it, or delete it to trust "
                                       "the ledger as it is (sealed again by the next `tmdsub labels commit`)") from None
            found = ledger_digest(body)
            if found not in (meta.get("sha256"), meta.get("previous")) or found is None:
                raise InputError(path, f"the label ledger was edited by hand or damaged: its content's sha256 "
                                       f"{found[:12]} is not the {str(meta.get('sha256'))[:12]} its seal {seal.name} "
                                       "records.  Restore it (git checkout / dvc checkout), or, to trust the edit, "
                                       f"delete {seal.name}: the ledger is then read unchecked and sealed again by "
                                       "the next `tmdsub labels commit`", line=1)
            meta = {**meta, "interrupted": found != meta.get("sha256")}
    table = _csv_text(body, path, LEDGER_COLUMNS, first_row - 1)
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
        if not np.isfinite(v) or q not in ("", "<", ">", "<=", ">=", "~"):
            problems.append((ln, f"value {cols['qualifier'][r]}{cols['value'][r]} is not a finite number with a "
                                 "known qualifier"))
        elif known_set is not None and g not in known_set:
            problems.append((ln, f"graph_id {g} is no graph of the pool"))
        for k, x in (("graph_id", g), ("target", cols["target"][r]), ("value", v), ("qualifier", q), ("note", ""),
                     ("line", li), ("round", rd), ("file", cols["file"][r] or ""),
                     ("sha256", cols["sha256"][r] or "")):
            rows[k].append(x)
    if problems:
        from tmdlib.datasets.labels import _raise

        _raise(path, problems, 20, "in the label ledger")
    hist = pa.table({k: rows[k] for k in MEASUREMENT_SCHEMA.names}, schema=MEASUREMENT_SCHEMA)
    hist = _with_origin(hist, rows["round"], rows["file"], rows["sha256"])
    return hist, {**meta, "digest_checked": bool(meta.get("sha256"))}


def _csv_text(body: str, path, required, header_line: int = 2) -> pa.Table:
    """The ledger's CSV (after the digest line of format 2) as a text table; a missing column names its header."""
    import csv

    rows = list(csv.reader(body.splitlines()))
    if not rows or any(c not in rows[0] for c in required):
        raise InputError(path, f"the label ledger's header must be {','.join(required)}", line=header_line)
    head = rows[0]
    data = [r for r in rows[1:]]
    bad = [i for i, r in enumerate(data) if len(r) != len(head)]
    if bad:
        raise InputError(path, f"{len(data[bad[0]])} fields where the header has {len(head)}",
                         line=bad[0] + header_line + 1)
    return pa.table({c: pa.array([r[j] for r in data], pa.string()) for j, c in enumerate(head)})


def _legacy_history(path: str, known) -> pa.Table:
    """A ledger of the first format (``graph_id,label[,targets...][,source]``: one label per graph) as round 0."""
    from tmdlib.datasets.labels import MEASUREMENT_SCHEMA

    raw = io.read_text_csv(path, ("graph_id",), what="label ledger")
    targets = [c for c in raw.column_names if c not in ("graph_id", "source")]
    if not targets:
        raise InputError(path, f"the label ledger has no label column; found {raw.column_names}", line=1)
    rows = {k: [] for k in MEASUREMENT_SCHEMA.names}
    files = []
    src = raw.column("source").to_pylist() if "source" in raw.column_names else [""] * raw.num_rows
    known_set = None if known is None else {int(g) for g in known}
    problems = []
    for r, gid in enumerate(raw.column("graph_id").to_pylist()):
        g = io._parse_int(gid)
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
        from tmdlib.datasets.labels import _raise

        _raise(path, problems, 20, "in the label ledger")
    return _with_origin(pa.table(rows, schema=MEASUREMENT_SCHEMA), 0, files, "")


def write_ledger(path: str, history: pa.Table, task, name: str | None = None) -> str:
    """The ledger ``path`` rewritten atomically as a plain CSV: every measurement of ``history``; its seal
    (:func:`seal_path`: the new digest, the previous ledger's, the task and the property's ``name``) is written
    first, so a kill between the two leaves the previous ledger, still trusted (a reader of a half-written file is impossible)."""
    import csv
    import io as _io

    buf = _io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(LEDGER_COLUMNS)
    cols = [history.column(c).to_pylist() for c in LEDGER_COLUMNS]
    for row in zip(*cols):
        w.writerow([row[0], row[1], repr(float(row[2])), *row[3:]])
    body = buf.getvalue()
    p = Path(path)
    previous = None
    if p.is_file():
        old = p.read_text(encoding="utf-8")
        previous = ledger_digest(old) if not old.startswith(LEDGER_MAGIC) else None
    seal = {"format": LEDGER_FORMAT, "ledger": p.name, "sha256": ledger_digest(body), "previous": previous,
            "task": None if task is None else task.to_dict()}
    if name:  # the property the labels measure (labels.json's name: tasks.labels.property_of)
        seal["name"] = name
    io.write_json(seal_path(p), io.stamped(seal))
    io.write_text(path, body)
    return path


def read_ledger(path: str | None, known: np.ndarray, task=None, *, replicates: str = "mean",
                censored: str = "drop") -> pa.Table:
    """The labels the ledger holds (every label paid for so far), one row per graph: its measurements aggregated
    by the rules (:func:`tmdlib.datasets.labels.aggregate_measurements`) under the dataset's task -- the store's,
    or, for a pool stored without labels, the one the ledger records.

    The ledger lives at ``data/labelled/<DATASET>.csv`` and only grows (``tmdsub labels commit``); a missing file
    is an empty ledger.  Returns :func:`tmdlib.datasets.labels.labels_schema` rows.
    """
    from tmdlib.datasets.labels import labels_schema

    hist, meta = read_ledger_history(path, known)
    task = ledger_task(task, meta)
    if hist.num_rows == 0 or task is None:
        return labels_schema(task if task is not None and task.decided else None).empty_table()
    ids, Y, _ = _aggregate(hist, task, replicates, censored, path)
    return _label_table(ids, Y, task)


def ledger_task(task, meta: dict):
    """The task labels are read under: a decided ``task`` (the store's), else the ledger's recorded one."""
    from tmdlib.datasets.task import TaskSpec

    if task is not None and task.decided:
        return task
    if meta.get("task"):
        return TaskSpec.from_dict(meta["task"])
    if task is None and meta.get("format") == 1:  # a ledger written before task types: every label was binary
        from tmdlib.datasets.task import BINARY

        return BINARY
    return task


def _label_table(ids, Y, task) -> pa.Table:
    from tmdlib.datasets.labels import LABEL_SCHEMA, label_columns, labels_schema

    if task.num_targets == 1:
        return pa.table({"graph_id": pa.array(ids, pa.int64()), "label": pa.array(Y[:, 0], pa.float64())},
                        schema=LABEL_SCHEMA)
    cols = {"graph_id": pa.array(ids, pa.int64())}
    for j, c in enumerate(label_columns(task)):
        cols[c] = pa.array(Y[:, j], pa.float64(), mask=np.isnan(Y[:, j]))
    return pa.table(cols, schema=labels_schema(task))


def _where(hist: pa.Table, current_file: str | None = None, new_round: int | None = None):
    """Names a measurement in errors: its line for this import's file, else the ledger round and file."""
    lines, rounds, files = (hist.column(c).to_pylist() for c in ("line", "round", "file"))

    def name(r: int) -> str:
        if current_file is not None and files[r] == current_file and rounds[r] == new_round:
            return f"line {lines[r]}"
        return f"{Path(files[r]).name or 'ledger'} line {lines[r]} (round {rounds[r]})"
    return name


def _aggregate(hist: pa.Table, task, replicates: str, censored: str, path, where=None):
    from tmdlib.datasets.labels import aggregate_measurements, apply_censored

    kept, cens = apply_censored(hist, censored, path=path, where=where)
    ids, Y, info = aggregate_measurements(kept, task, replicates, RULE_DEFAULTS["max_spread"], path=path,
                                          where=None if where is None else _where(kept))
    return ids, Y, {**info, "censored": cens}


def _cell(v: float) -> str:
    return "" if np.isnan(v) else repr(float(v))


def _same_measurement_key(hist: pa.Table) -> set:
    cols = [hist.column(c).to_pylist() for c in ("graph_id", "target", "value", "qualifier")]
    return set(zip(*cols))


@task(name="commit-labels", persist_result=False)
def commit_labels(ledger_path: str, labels_csv: str, known: np.ndarray, task=None) -> dict:
    """Append to the ledger the measurements of a labels run (``measurements.csv`` beside ``labels.csv``) it does
    not hold yet, each with its round, file and line; the ledger is rewritten atomically, sealed by its digest and
    the task.  Nothing in the ledger is ever overwritten or dropped."""
    from tmdlib.datasets.task import TaskSpec

    hist, meta = read_ledger_history(ledger_path, known)
    labels_json = Path(labels_csv).with_suffix(".json")
    lmeta = io.read_json(str(labels_json), "labels metadata") if labels_json.is_file() else {}
    spec = task if task is not None and task.decided else (
        TaskSpec.from_dict(lmeta["task"]) if lmeta.get("task") else ledger_task(task, meta))
    if meta.get("task") and spec is not None and TaskSpec.from_dict(meta["task"]) != spec:
        raise InputError(labels_csv, f"labels for a {spec.describe()} task; the ledger's task is "
                                     f"{TaskSpec.from_dict(meta['task']).describe()}")
    new = read_measurements(Path(labels_csv).with_name(MEASUREMENTS), known) \
        if Path(labels_csv).with_name(MEASUREMENTS).is_file() else _labels_as_measurements(labels_csv, lmeta, known,
                                                                                          spec)
    have = {(s, li, g, t) for s, li, g, t in zip(*(hist.column(c).to_pylist() for c in
                                                  ("sha256", "line", "graph_id", "target"))) if s}
    same = _same_measurement_key(hist)
    keep = []
    for r, key in enumerate(zip(*(new.column(c).to_pylist() for c in ("sha256", "line", "graph_id", "target")))):
        val = (key[2], key[3], new.column("value")[r].as_py(), new.column("qualifier")[r].as_py())
        keep.append(not (key[0] and key[:] in have) and val not in same)
    add = new.filter(pa.array(keep, pa.bool_())) if new.num_rows else new
    rnd = (max(hist.column("round").to_pylist()) if hist.num_rows else 0) + 1
    add = add.set_column(add.column_names.index("round"), "round", pa.array([rnd] * add.num_rows, pa.int64()))
    if add.num_rows or meta.get("format") != LEDGER_FORMAT or not meta.get("sha256") or (
            spec is not None and not meta.get("task")):
        write_ledger(ledger_path, pa.concat_tables([hist, add.select(hist.column_names)]), spec,
                     lmeta.get("name") or meta.get("name"))
    graphs = len(set(hist.column("graph_id").to_pylist()) | set(add.column("graph_id").to_pylist()))
    return {"ledger": str(ledger_path), "added": int(add.num_rows), "round": rnd if add.num_rows else None,
            "measurements": int(hist.num_rows + add.num_rows), "total": graphs}


#: This import's measurements, beside labels.csv: what ``tmdsub labels commit`` adds to the ledger.
MEASUREMENTS = "measurements.csv"


def read_measurements(path: Path, known=None) -> pa.Table:
    """``measurements.csv`` (the ledger's columns, no digest) as a history table."""
    from tmdlib.datasets.labels import MEASUREMENT_SCHEMA

    t = io.read_text_csv(path, LEDGER_COLUMNS, what="measurements file")
    cols = {c: t.column(c).to_pylist() for c in LEDGER_COLUMNS}
    try:
        base = pa.table({"graph_id": [int(x) for x in cols["graph_id"]], "target": cols["target"],
                         "value": [float(x) for x in cols["value"]], "qualifier": cols["qualifier"],
                         "note": [""] * t.num_rows, "line": [int(x) for x in cols["line"]]}, schema=MEASUREMENT_SCHEMA)
    except (TypeError, ValueError) as err:
        raise InputError(path, f"not a measurements file: {err}") from None
    return _with_origin(base, [int(x) for x in cols["round"]], cols["file"], cols["sha256"])


def _labels_as_measurements(labels_csv: str, lmeta: dict, known, task) -> pa.Table:
    """labels.csv of a run without measurements.csv (older runs) as one measurement per label."""
    from .io import read_labels

    labels, _ = read_labels(labels_csv, task=task)
    from tmdlib.datasets.labels import MEASUREMENT_SCHEMA

    rows = {k: [] for k in MEASUREMENT_SCHEMA.names}
    targets = task.targets if task is not None else ("y",)
    for g, y in sorted(labels.items()):
        for t, v in zip(targets, np.atleast_1d(y)):
            if np.isfinite(v):
                for k, x in (("graph_id", g), ("target", t), ("value", float(v)), ("qualifier", ""), ("note", ""),
                             ("line", 0)):
                    rows[k].append(x)
    src = lmeta.get("file") or lmeta.get("source", "unknown")
    return _with_origin(pa.table(rows, schema=MEASUREMENT_SCHEMA), 0, src, lmeta.get("sha256", ""))
