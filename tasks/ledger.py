"""The label ledger (``data/labelled/<DS>.csv``): read, checked against its seal, aggregated into labels, and grown by
``tmdsub labels commit``; the tables and rules are :mod:`tmdlib.datasets.ledger`'s, the files are read and written
here (atomically)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
from prefect import task

from tmdlib import InputError
from tmdlib.datasets import ledger as lg

from . import io

#: This import's measurements, beside labels.csv: what ``tmdsub labels commit`` adds to the ledger.
MEASUREMENTS = "measurements.csv"


def seal_path(path) -> Path:
    """The ledger's seal beside it (``data/labelled/<DS>.csv`` -> ``data/labelled/<DS>.seal.json``): the sha256 of
    the ledger's text, the one before the last commit, and the task."""
    p = Path(path)
    return p.with_name(p.stem + ".seal.json")


def read_ledger_history(path: str | None, known: np.ndarray | None = None) -> tuple[pa.Table, dict]:
    """Every measurement of the label ledger and what its seal records, checked before it is trusted
    (:func:`tmdlib.datasets.ledger.parse_ledger`; a first-format ledger:
    :func:`~tmdlib.datasets.ledger.legacy_history`).  A missing file is an empty ledger.  Returns
    ``(history, meta)``."""
    if not path or not Path(path).exists():
        return lg.empty_history(), lg.unsealed_meta()
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(path, f"cannot read the label ledger: {err}") from None
    fmt, seal = lg.ledger_format(text), seal_path(p)
    if fmt == 1:
        raw = io.read_text_csv(path, ("graph_id",), what="label ledger")
        return lg.legacy_history(raw, path, known), lg.unsealed_meta(1)
    record = None
    if fmt == lg.LEDGER_FORMAT and seal.is_file():
        try:
            record = json.loads(seal.read_text(encoding="utf-8"))
            assert isinstance(record, dict)
        except (OSError, ValueError, AssertionError):
            raise InputError(seal, "the label ledger's seal is not readable: restore it, or delete it to trust "
                                   "the ledger as it is (sealed again by the next `tmdsub labels commit`)") from None
    return lg.parse_ledger(text, path, known, record, seal.name)


def write_ledger(path: str, history: pa.Table, task, name: str | None = None) -> str:
    """The ledger ``path`` rewritten atomically as a plain CSV: every measurement of ``history``; its seal
    (:func:`seal_path`, :func:`tmdlib.datasets.ledger.seal_record`) is written first, so a kill between the two
    leaves the previous ledger, still trusted (a reader of a half-written file is impossible)."""
    body, p = lg.ledger_text(history), Path(path)
    previous = p.read_text(encoding="utf-8") if p.is_file() else None
    io.write_json(seal_path(p), io.stamped(lg.seal_record(body, previous, p.name, task, name)))
    io.write_text(path, body)
    return path


def read_ledger(path: str | None, known: np.ndarray, task=None, *, replicates: str = "mean",
                censored: str = "drop") -> pa.Table:
    """The labels the ledger holds (every label paid for so far), one row per graph
    (:func:`tmdlib.datasets.ledger.ledger_labels`).  A missing file is an empty ledger."""
    hist, meta = read_ledger_history(path, known)
    return lg.ledger_labels(hist, meta, task, replicates=replicates, censored=censored, path=path)


@task(name="commit-labels", persist_result=False)
def commit_labels(ledger_path: str, labels_csv: str, known: np.ndarray, task=None) -> dict:
    """Append to the ledger the measurements of a labels run (``measurements.csv`` beside ``labels.csv``) it does
    not hold yet (:func:`tmdlib.datasets.ledger.commit_rows`), each with its round, file and line; the ledger is
    rewritten atomically, sealed by its digest and the task.  Nothing in the ledger is ever overwritten or dropped."""
    hist, meta = read_ledger_history(ledger_path, known)
    labels_json = Path(labels_csv).with_suffix(".json")
    lmeta = io.read_json(str(labels_json), "labels metadata") if labels_json.is_file() else {}
    spec = lg.commit_task(task, lmeta, meta, labels_csv)
    measured = Path(labels_csv).with_name(MEASUREMENTS)
    if measured.is_file():
        new = read_measurements(measured, known)
    else:  # a run from before measurements.csv: one measurement per label
        new = lg.labels_as_measurements(io.read_labels(labels_csv, task=spec)[0], lmeta, spec)
    add, rnd, rewrite = lg.commit_rows(hist, meta, new, spec)
    if rewrite:
        write_ledger(ledger_path, pa.concat_tables([hist, add.select(hist.column_names)]), spec,
                     lmeta.get("name") or meta.get("name"))
    return lg.commit_summary(ledger_path, hist, add, rnd)


def read_measurements(path: Path, known=None) -> pa.Table:
    """``measurements.csv`` (the ledger's columns, no digest) as a history table."""
    t = io.read_text_csv(path, lg.LEDGER_COLUMNS, what="measurements file")
    return lg.measurements_table(t, path)
