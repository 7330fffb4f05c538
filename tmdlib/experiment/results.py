"""Result rows of the experiment grid: their key, their CSV text, and reading a results file."""
from __future__ import annotations

import csv
import math
from pathlib import Path

from ..errors import InputError
from .grid import COLUMNS, KEY, row_key  # noqa: F401  (row_key is part of this module's API)


def rows_to_csv(rows: list[dict]) -> str:
    """CSV text (header :data:`~tmdlib.experiment.grid.COLUMNS`); floats in full precision (``repr``)."""
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
    p = Path(path)
    if not p.is_file():
        return []
    out = []
    with open(p, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in KEY + ("value",) if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(str(p), f"not an experiment results file: missing columns {missing}", line=1)
        for line, r in enumerate(reader, start=2):
            try:
                row = dict(r)
                for c in ("fraction", "value", "epsilon", "final_loss", "train_seconds", "select_seconds"):
                    row[c] = float(row[c]) if row.get(c) not in (None, "") else float("nan")
                for c in ("trial", "epochs", "k", "n_train", "n_test"):
                    row[c] = int(row[c]) if row.get(c) not in (None, "") else None
            except (TypeError, ValueError) as err:
                raise InputError(str(p), f"bad row: {err}", line=line) from None
            out.append(row)
    return out
