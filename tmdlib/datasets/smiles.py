"""Build a molecule graph table from a CSV of SMILES strings.

Each SMILES goes through ``ogb.utils.smiles2graph`` (rdkit), so atoms get the
same 9 categorical features as the OGB files and the same 174-wide one-hot
encoding (:func:`tmdlib.datasets.ogb.one_hot_atom_features`).  ogb and rdkit
are imported only when this reader is called.
"""
from __future__ import annotations

import csv
import io
import math
import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import InputError
from .ogb import molecule_table
from .tu import read_bytes

__all__ = ["read_smiles_csv", "smiles_to_graph"]


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


def _parse_label(text: str | None, path: Path, line: int) -> float:
    """A label cell as float; empty or ``nan`` means missing (NaN)."""
    text = (text or "").strip()
    if text == "" or text.lower() == "nan":
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise InputError(path, f"label {text!r} is not a number", line=line) from None
    if math.isinf(value):
        raise InputError(path, f"label {text!r} is infinite", line=line)
    return value


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


def _rows(path: Path, smiles_column: str, label_column: str | None):
    """Yield ``(line, smiles, label_text)`` for every data row of the CSV."""
    text = read_bytes(path).decode("utf-8-sig", errors="replace")
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if header is None:
        raise InputError(path, "empty CSV file (no header line)", line=1)
    header = [h.strip() for h in header]
    i_s = column_index(header, smiles_column, path)
    i_l = column_index(header, label_column, path) if label_column is not None else None
    for row in reader:
        line = reader.line_num
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise InputError(path, f"{len(row)} fields, header has {len(header)}", line=line)
        yield line, row[i_s].strip(), None if i_l is None else row[i_l]


def read_smiles_csv(path: str | os.PathLike, smiles_column: str = "smiles",
                    label_column: str | None = None) -> pa.Table:
    """Read a CSV (header line; ``.gz`` allowed) of SMILES into a graph table.

    Parameters
    ----------
    path : str or os.PathLike
        The CSV file.
    smiles_column : str, default "smiles"
        Column holding the SMILES, matched ignoring case when no column has exactly this name
        (:func:`column_index`).
    label_column : str, optional
        Column holding a numeric graph label (matched the same way) (empty / ``nan`` = missing);
        without it ``y`` is all null.

    Returns
    -------
    pyarrow.Table
        Graph-store table in row order (``graph_id`` 0..G-1), with ``smiles``,
        ``atom_features`` (raw 9 OGB codes) and ``x`` (their 174-wide one-hot).

    Raises
    ------
    InputError
        Missing column (the message lists the available ones), a SMILES rdkit
        cannot parse (or with no atoms), a non-numeric label, a row with the
        wrong number of fields -- each with the 1-based CSV line.
    """
    path = Path(path)
    codes, src, dst, sizes, labels, smiles = [], [], [], [], [], []
    offset = 0
    with _quiet_rdkit():
        for line, smi, lab in _rows(path, smiles_column, label_column):
            graph = smiles_to_graph(smi)
            if graph is None:
                raise InputError(path, f"invalid SMILES {smi!r} (rdkit cannot parse it, or it has no atoms)", line=line)
            labels.append(math.nan if label_column is None else _parse_label(lab, path, line))
            codes.append(graph["node_feat"])
            src.append(graph["edge_index"][0] + offset)
            dst.append(graph["edge_index"][1] + offset)
            sizes.append(graph["num_nodes"])
            smiles.append(smi)
            offset += graph["num_nodes"]
    if not smiles:
        raise InputError(path, "no molecules (the CSV has no data rows)")
    node_ptr = np.concatenate([[0], np.cumsum(sizes)])
    y = np.asarray(labels, dtype=np.float64) if label_column is not None else None
    return molecule_table(np.concatenate(codes), node_ptr, np.concatenate(src), np.concatenate(dst),
                          y, smiles, path.stem.split(".")[0], "smiles")
