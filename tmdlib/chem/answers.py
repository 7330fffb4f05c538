r"""A lab's answers as an SD file: the requests' SD file sent back with the measured value as a property.

The records keep their SD properties (``graph_id``, ``source_id``, ... as :mod:`tmdlib.chem._sdf` wrote them, and the
lab's value, e.g. ``label``); a record without ``graph_id`` / ``source_id`` is keyed by its structure, the
canonical SMILES of its mol block.  :func:`read_sdf_answers` gives the same text table a CSV answer gives, with the
file line each record starts on, for :func:`tmdlib.datasets.labels.read_answers`.

Examples
--------
>>> from tmdlib.chem.answers import sdf_answer_table
>>> text = "7\n     RDKit          2D\n\n  0  0  0  0  0  0  0  0  0  0999 V2000\nM  END\n> <graph_id>\n7\n\n> <label>\n>5.1\n\n$$$$\n"
>>> table, lines = sdf_answer_table(text)
>>> table.column("graph_id").to_pylist(), table.column("label").to_pylist(), lines.tolist()
(['7'], ['>5.1'], [1])
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .._errors import InputError

__all__ = ["sdf_answer_table", "read_sdf_answers"]


def sdf_answer_table(text: str, path: str | os.PathLike | None = None):
    """``(table, lines)``: one row per SD record, its properties as text columns (plus ``smiles`` from the mol block
    when it has atoms and no ``smiles`` property), and the line each record starts on.

    Raises
    ------
    InputError
        A record whose mol block RDKit cannot read while it has no ``graph_id`` / ``source_id`` to key it by, or a
        file without records.
    """
    import pyarrow as pa
    from rdkit import Chem, RDLogger

    from ..datasets.molfiles import sd_records

    records = list(sd_records(text.splitlines()))
    if not records:
        raise InputError(path, "no SD records in the file")
    rows, lines = [], []
    RDLogger.DisableLog("rdApp.*")
    try:
        for rec in records:
            props = dict(rec.props)
            if "smiles" not in props and rec.block:
                mol = Chem.MolFromMolBlock(rec.block)
                if mol is not None and mol.GetNumAtoms() > 0:
                    props["smiles"] = Chem.MolToSmiles(mol)
            rows.append(props)
            lines.append(rec.line)
    finally:
        RDLogger.EnableLog("rdApp.*")
    names = list(dict.fromkeys(k for r in rows for k in r))
    table = pa.table({k: pa.array([r.get(k, "") for r in rows], pa.string()) for k in names})
    return table, np.asarray(lines, dtype=np.int64)


def read_sdf_answers(path: str | os.PathLike):
    """:func:`sdf_answer_table` of a file (UTF-8; InputError naming it when missing or unreadable)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(path, "answer file not found") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(path, f"cannot read the SD file: {err}") from None
    return sdf_answer_table(text, path)
