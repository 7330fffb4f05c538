"""Result rows of the experiment grid: their key, their CSV text, and reading a results file."""
from __future__ import annotations

import csv
import math
from pathlib import Path

from .._errors import InputError
from ._grid import COLUMNS, KEY, row_key  # noqa: F401  (row_key is part of this module's API)


def rows_to_csv(rows: list[dict]) -> str:
    """CSV text (header :data:`~tmdlib.experiment._grid.COLUMNS`); floats in full precision (``repr``)."""
    lines = [",".join(COLUMNS)]
    for r in rows:
        lines.append(",".join(_fmt(r.get(c)) for c in COLUMNS))
    return "\n".join(lines) + "\n"


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    return str(v)


def read_results(path: str) -> list[dict]:
    """Rows of a results CSV (empty list if the file does not exist); a bad row is an InputError naming its line.

    Optional columns absent from an older file (``select_seconds``) read as NaN.
    """
    return read_csv_rows(path, "an experiment results file", KEY + ("value",),
                         floats=("fraction", "value", "epsilon", "final_loss", "train_seconds", "select_seconds"),
                         ints=("trial", "epochs", "k", "n_train", "n_test"))


def read_csv_rows(path: str, what: str, required: tuple, *, floats: tuple = (), ints: tuple = (), bools: tuple = (),
                  columns: tuple | None = None) -> list[dict]:
    """The one reader of result CSVs (the experiment grid's, :func:`read_results`, and the molecules benchmark's,
    :func:`tmdlib.experiment.molecules.read_rows`): rows as dicts, numbers typed.

    Parameters
    ----------
    path : str
        The CSV; a missing file has no rows (``[]``).
    what : str
        What the file is, for the error of a file without the ``required`` columns.
    required : tuple of str
        Columns the header must have.
    floats, ints, bools : tuple of str
        Columns read as float (empty: NaN), int (empty: None) and bool (``true`` / ``1``, any case).
    columns : tuple of str, optional
        Keep only these columns (absent ones: None); default every column of the file.

    Returns
    -------
    list of dict

    Raises
    ------
    InputError
        Missing required columns (line 1) or a value that does not parse (its line).
    """
    p = Path(path)
    if not p.is_file():
        return []
    out = []
    with open(p, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(str(p), f"not {what}: missing columns {missing}", line=1)
        for line, r in enumerate(reader, start=2):
            try:
                row = dict(r) if columns is None else {c: r.get(c) for c in columns}
                for c in floats:
                    row[c] = float(row[c]) if row.get(c) not in (None, "") else float("nan")
                for c in ints:
                    row[c] = int(row[c]) if row.get(c) not in (None, "") else None
                for c in bools:
                    row[c] = str(row[c]).strip().lower() in ("true", "1")
            except (TypeError, ValueError) as err:
                raise InputError(str(p), f"bad row: {err}", line=line) from None
            out.append(row)
    return out


def gather_rows(finished, store, name: str, total: int, t0: float, log=None) -> int:
    """Each finished cell's rows appended to ``store`` as the cells complete (the experiment and the molecules
    benchmark), a progress line with an ETA after each; a failed cell does not stop the others.

    Parameters
    ----------
    finished : iterable
        The cells in the order they finish, each with ``result()`` giving its rows (a list of dicts) or raising.
    store
        Where rows go (``store.append(rows)``).
    name : str
        The dataset, in the progress lines.
    total : int
        Rows (models) the cells will give, for the ETA.
    t0 : float
        ``time.perf_counter()`` when the dataset's work began.
    log : callable, optional
        Called with each progress line (:func:`tmdlib.experiment.matrices.progress_line`).

    Returns
    -------
    int
        Rows appended.

    Raises
    ------
    RuntimeError
        After every cell finished, when some failed (how many, and the first error).
    """
    import time

    from .matrices import progress_line

    done, failures = 0, []
    for fut in finished:
        try:
            rows = fut.result()
        except Exception as err:  # noqa: BLE001 - keep the other cells' rows; report at the end
            failures.append(str(err))
            continue
        store.append(rows)
        done += len(rows)
        if log is not None:
            log(progress_line(name, done, total, time.perf_counter() - t0))
    if failures:
        raise RuntimeError(f"{name}: {len(failures)} cells failed, first: {failures[0]}")
    return done
