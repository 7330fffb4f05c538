"""Molecules a user gives for prediction, row by row: a CSV of SMILES read with one reason per unusable row, and the
graphs of usable SMILES in the graph store's features (the SMILES readers and RDKit featurisation are
:mod:`tmdlib.datasets._smiles`)."""
from __future__ import annotations

import csv
import gzip
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from .._errors import InputError
from ._smiles import MAX_PREDICTION_ATOMS, _bad_bytes, _quiet_rdkit, column_index, read_smiles_csv, smiles_reason

__all__ = ["SmilesRows", "read_prediction_smiles", "graphs_from_smiles"]


@dataclass(frozen=True)
class SmilesRows:
    """The rows of a prediction input file, each with its SMILES or the reason it has none.

    Attributes
    ----------
    line : ndarray of int64, shape (r,)
        The file line of each data row (the header is line 1).
    smiles : list of str or None
        The SMILES as written (stripped), None for a row without a usable one.
    reason : list of str or None
        None for a usable row, else one line saying why not (empty row, unparseable SMILES, too many atoms,
        bytes that are not UTF-8).
    """

    line: np.ndarray
    smiles: list
    reason: list

    @property
    def ok(self) -> np.ndarray:
        """Mask of the usable rows, shape (r,)."""
        return np.array([r is None for r in self.reason], dtype=bool)

    def __len__(self) -> int:
        return len(self.reason)


def read_prediction_smiles(path: str | os.PathLike, column: str = "smiles", *,
                           max_atoms: int = MAX_PREDICTION_ATOMS) -> SmilesRows:
    """The molecules of a user's CSV to predict for, one reason per row that gives none.

    Every data row is kept, in file order, with either its SMILES or one reason: ``empty row`` (no cells, or an
    empty SMILES), ``RDKit cannot parse SMILES ...``, ``N heavy atoms, more than max_atoms``, ``not UTF-8 text``
    (a byte that is not UTF-8, at its line: the rest of the file is read).  A batch never fails without a reason.

    Parameters
    ----------
    path : path
        A CSV (``.gz`` allowed) with a header line.
    column : str
        The SMILES column (matched exactly, else ignoring case: ``SMILES``).
    max_atoms : int
        Heavy atoms above this get a row-level reason.

    Returns
    -------
    SmilesRows

    Raises
    ------
    InputError
        One error for the file: missing, unreadable, empty, a header that is not UTF-8, or no such column.
    """
    path = Path(path)
    try:
        raw = gzip.open(path, "rb").read() if path.name.endswith(".gz") else path.read_bytes()
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    except IsADirectoryError:
        raise InputError(path, "is a folder, expected a file") from None
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(path, f"cannot read file: {exc}") from None
    text = raw.decode("utf-8", errors="surrogateescape").lstrip("\ufeff")
    reader = csv.reader(text.splitlines(keepends=True))
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise InputError(path, f"not a readable CSV header: {exc}", line=1) from None
    if header is None:
        raise InputError(path, "empty CSV file (no header line)", line=1)
    if any(_bad_bytes(h) for h in header):
        raise InputError(path, "the header line is not UTF-8 text", line=1)
    idx = column_index([h.strip() for h in header], column, path)
    lines, smiles, reasons = [], [], []
    with _quiet_rdkit():
        while True:
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:  # a malformed row: its reason, and the reader goes on
                row = None
                err = f"not a readable CSV row: {exc}"
            ln = reader.line_num
            s, why = None, None
            if row is None:
                why = err
            elif not any(c.strip() for c in row):
                why = "empty row"
            elif any(_bad_bytes(c) for c in row):
                why = "not UTF-8 text (a byte that is no UTF-8 character)"
            elif idx >= len(row) or not row[idx].strip():
                why = f"empty SMILES (column {header[idx].strip()!r})"
            else:
                s = row[idx].strip()
                why = smiles_reason(s, max_atoms)
                s = None if why else s
            lines.append(ln)
            smiles.append(s)
            reasons.append(why)
    return SmilesRows(np.asarray(lines, dtype=np.int64), smiles, reasons)


def graphs_from_smiles(smiles: Sequence[str]):
    """The graphs of valid SMILES (:func:`smiles_reason` is None for each) as a :class:`~tmdlib.GraphDataset` with the
    graph store's molecule features (the OGB atom codes one-hot, 174 columns whatever the molecules), so a graph model
    trained on a pool predicts for new molecules."""
    import tempfile

    from ._arrow import to_dataset

    with tempfile.TemporaryDirectory(prefix="tmdsub-smiles-") as tmp:
        path = Path(tmp) / "new.csv"
        with open(path, "w", newline="", encoding="utf-8") as fh:
            csv.writer(fh).writerows([["smiles"]] + [[s] for s in smiles])
        return to_dataset(read_smiles_csv(path, workers=1))
