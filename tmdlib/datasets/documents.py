"""Small text documents a user or a stage writes, read into checked values: one :class:`~tmdlib._errors.InputError`
naming the file, the line where there is one, and the problem.

* :func:`read_text_csv` -- a small CSV with every cell as text, row ``r`` being file line ``r + 2`` (the header is
  line 1), its delimiter given (:func:`tmdlib.datasets.molfiles.sniff_delimiter` finds it);
* :func:`read_json` -- a JSON object; :func:`read_id_pairs` -- a CSV of graph-id pairs ``i,j``;
* :func:`check_selection` -- a selection document (``selection.json``): graph ids, the medoids' weights τ, the
  certificate's ε, assignment and distances, checked against each other;
* :func:`positions`, :func:`node_subsets_for`, :func:`parse_int` -- ids looked up, one integer parsed.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from .._errors import InputError

__all__ = ["read_text_csv", "read_json", "read_id_pairs", "check_selection", "positions", "node_subsets_for",
           "node_subsets", "nodes_off_record",
           "parse_int"]


def read_text_csv(path: str | os.PathLike, required: tuple[str, ...] = (), what: str = "file",
                  delimiter: str = ","):
    """Read a small user CSV with every cell as text, for validation that reports file lines.

    Blank lines are kept as rows (so row ``r`` is always file line ``r + 2``, the header being line
    1); a missing file, an unreadable CSV, a repeated column name or a missing required column is
    one :class:`~tmdlib._errors.InputError` naming the file.  ``delimiter``: ``,`` (default), ``;`` or a tab
    (:func:`tmdlib.datasets.molfiles.sniff_delimiter`).

    Returns
    -------
    pyarrow.Table
        One string column per header name, in file order.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv

    p = Path(path)
    if not p.is_file():
        raise InputError(path, f"{what} not found")
    try:
        names = pacsv.read_csv(p, read_options=pacsv.ReadOptions(skip_rows_after_names=0),
                               parse_options=pacsv.ParseOptions(ignore_empty_lines=False, delimiter=delimiter),
                               convert_options=pacsv.ConvertOptions(include_columns=[])).column_names
    except pa.ArrowInvalid as err:
        if "Duplicate column" in str(err) or "duplicate" in str(err).lower():
            raise InputError(path, f"repeated column name in the header: {err}", line=1) from None
        raise InputError(path, f"not a readable CSV: {err}") from None
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(path, f"repeated column name(s) {dupes} in the header", line=1)
    missing = [c for c in required if c not in names]
    if missing:
        raise InputError(path, f"missing column(s) {missing}; found {names}", line=1)
    try:
        return pacsv.read_csv(p, parse_options=pacsv.ParseOptions(ignore_empty_lines=False, delimiter=delimiter),
                              convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in names},
                                                                   strings_can_be_null=False))
    except pa.ArrowInvalid as err:
        raise InputError(path, f"not a readable CSV: {err}", line=_ragged_line(p, len(names), delimiter)) from None


def _ragged_line(path: Path, width: int, delimiter: str = ",") -> int | None:
    """The first line of a CSV whose field count is not ``width`` (what Arrow's error does not say), or None."""
    import csv

    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as fh:
            for line, row in enumerate(csv.reader(fh, delimiter=delimiter), start=1):
                if row and len(row) != width:
                    return line
    except (OSError, csv.Error):
        return None
    return None




def read_json(path: str, what: str) -> dict:
    """A JSON object from ``path`` (InputError naming the file otherwise)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(path, f"{what} not found")
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(path, f"not valid JSON: {err}") from None
    if not isinstance(obj, dict):
        raise InputError(path, f"{what} must be a JSON object")
    return obj


def _int_list(sel: dict, key: str, path: str) -> np.ndarray:
    vals = sel.get(key)
    if not isinstance(vals, list):
        raise InputError(path, f"key {key!r} must be a list of graph ids")
    out = []
    for v in vals:
        if isinstance(v, bool) or not (isinstance(v, int) or (isinstance(v, float) and float(v).is_integer())):
            raise InputError(path, f"key {key!r}: {v!r} is not an integer graph id")
        if not -2**63 <= int(v) < 2**63:
            raise InputError(path, f"key {key!r}: {v!r} is out of the int64 range of graph ids")
        out.append(int(v))
    return np.asarray(out, dtype=np.int64)


def check_selection(sel: dict, path: str) -> dict:
    """A selection document checked: id arrays as int64, ``tau`` as float64, ``epsilon`` (the certificate's sum of
    exact TMDs to the medoids) and ``epsilon_mean`` (= epsilon / n_train, the ε of Lemma 3.2) float or None,
    and the certificate's ``assignment`` / ``distance`` (aligned with ``train_ids``) when present.

    Parameters
    ----------
    sel : dict
        The document as read (:func:`read_json`).
    path : str
        Its file, named in the errors.

    Returns
    -------
    dict
        ``sel`` with ``train_ids``, ``test_ids``, ``medoids`` (int64), ``tau`` (float64, aligned with ``medoids``),
        ``epsilon``, ``epsilon_mean`` and, when present, ``assignment`` (int64) and ``distance`` (float64).

    Raises
    ------
    InputError
        A key missing or of the wrong kind, medoids empty, repeated or outside ``train_ids``, train and test
        overlapping, a weight or distance negative or not finite, an assignment to a graph that is no medoid.
    """
    out = dict(sel)
    for key in ("train_ids", "test_ids", "medoids"):
        out[key] = _int_list(sel, key, path)
    tau = sel.get("tau")
    if not isinstance(tau, list) or len(tau) != len(out["medoids"]):
        raise InputError(path, f"'tau' must be a list aligned with 'medoids' ({len(out['medoids'])} entries)")
    try:
        out["tau"] = np.asarray(tau, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(path, "'tau' must hold numbers") from None
    if not np.all(np.isfinite(out["tau"])) or np.any(out["tau"] < 0):
        raise InputError(path, "'tau' must hold finite numbers >= 0")
    if out["medoids"].size == 0:
        raise InputError(path, "no selected graphs ('medoids' is empty)")
    if np.unique(out["medoids"]).size != out["medoids"].size:
        raise InputError(path, "'medoids' has duplicate graph ids")
    missing = np.setdiff1d(out["medoids"], out["train_ids"])
    if missing.size:
        raise InputError(path, f"selected graphs not in 'train_ids': {missing[:10].tolist()}")
    if np.intersect1d(out["train_ids"], out["test_ids"]).size:
        raise InputError(path, "'train_ids' and 'test_ids' overlap")
    for key in ("epsilon", "epsilon_mean"):
        eps = sel.get(key)
        if eps is not None and not (isinstance(eps, (int, float)) and not isinstance(eps, bool) and math.isfinite(eps)):
            raise InputError(path, f"{key!r} must be a number or null, got {eps!r}")
        out[key] = None if eps is None else float(eps)
    if "epsilon_mean" not in sel:  # selections written before the certificate: 'epsilon' held the mean
        out["epsilon_mean"] = out["epsilon"]
    if "assignment" in sel or "distance" in sel:
        out["assignment"] = _int_list(sel, "assignment", path)
        dist = sel.get("distance")
        if not isinstance(dist, list) or len(dist) != len(out["train_ids"]) or out["assignment"].size != len(dist):
            raise InputError(path, "'assignment' and 'distance' must be lists aligned with 'train_ids'")
        try:
            out["distance"] = np.asarray(dist, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError(path, "'distance' must hold numbers") from None
        if not np.all(np.isfinite(out["distance"])) or np.any(out["distance"] < 0):
            raise InputError(path, "'distance' must hold finite numbers >= 0")
        stray = np.setdiff1d(out["assignment"], out["medoids"])
        if stray.size:
            raise InputError(path, f"'assignment' names graphs that are not medoids: {stray[:10].tolist()}")
    return out


def positions(ids: np.ndarray, graph_ids: np.ndarray, path: str, what: str) -> np.ndarray:
    """Positions in the graph store of ``ids`` (InputError listing unknown ids)."""
    lookup = {int(g): k for k, g in enumerate(graph_ids)}
    unknown = [int(g) for g in ids if int(g) not in lookup]
    if unknown:
        raise InputError(path, f"{what}: graph ids not in the graph store: {unknown[:10]}")
    return np.asarray([lookup[int(g)] for g in ids], dtype=np.int64)


def node_subsets_for(nodes: dict, ids: np.ndarray, path: str) -> tuple[list, np.ndarray]:
    """Aligned node subsets and ε_i of graph ``ids`` (InputError if a graph has no row)."""
    missing = [int(g) for g in ids if int(g) not in nodes]
    if missing:
        raise InputError(path, f"no node subset for selected graph ids {missing[:10]}")
    return [nodes[int(g)][0] for g in ids], np.asarray([nodes[int(g)][1] for g in ids], dtype=np.float64)



def parse_int(v) -> int | None:
    """``v`` as an int when it is a whole number (``"3"``, ``3.0``, `` 7 ``), else None."""
    try:
        f = float(str(v).strip())
    except (TypeError, ValueError):
        return None
    return int(f) if math.isfinite(f) and f.is_integer() else None


def read_id_pairs(path: str, known_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Read a CSV with integer columns ``i,j`` of graph ids; return row positions into ``known_ids``.

    Raises :class:`InputError` naming the file, the (1-based, header = 1) line and the problem.
    """
    table = read_text_csv(path, ("i", "j"), what="pairs file")
    lookup = {int(g): k for k, g in enumerate(known_ids)}
    out = []
    for col in ("i", "j"):
        values = table.column(col).to_pylist()
        pos = np.empty(len(values), dtype=np.int64)
        for row, v in enumerate(values):
            try:
                gid = int(v)
            except (TypeError, ValueError):
                raise InputError(path, f"column {col!r}: {v!r} is not an integer graph id", line=row + 2) from None
            if gid not in lookup:
                raise InputError(path, f"column {col!r}: graph id {gid} is not in the dataset", line=row + 2)
            pos[row] = lookup[gid]
        out.append(pos)
    return out[0], out[1]


def node_subsets(gids: list, nodes: list, eps: list, path: str | os.PathLike | None = None) -> dict:
    """The node subsets of ``nodes.parquet``'s columns, checked.

    Parameters
    ----------
    gids, nodes, eps : list
        The ``graph_id``, ``nodes`` (kept local node ids) and ``epsilon`` columns, row by row.
    path : str, optional
        The file, in messages.

    Returns
    -------
    dict
        ``{graph_id: (kept node ids as int64 array, ε ≥ 0)}`` (a rounding error below 0, down to -1e-9, as 0).

    Raises
    ------
    InputError
        A null ``graph_id`` / ``nodes``, or a missing, non-finite or negative ε (its 1-based row named).
    """
    out = {}
    for row, (g, s, e) in enumerate(zip(gids, nodes, eps)):
        if g is None or s is None or e is None or not math.isfinite(e) or e < -1e-9:
            raise InputError(path, "null graph_id/nodes or a missing/negative epsilon", line=row + 1)
        out[int(g)] = (np.asarray(s, dtype=np.int64), max(float(e), 0.0))
    return out


def nodes_off_record(raw: bytes | str | None) -> dict | None:
    """What ``nodes.parquet``'s schema metadata says of node subsampling (``raw``: the JSON it keeps, or None).

    Returns
    -------
    dict or None
        ``{"method": "off", "requested", "reason", "line"}`` when node subsampling was off (defaults: no requested
        method, reason ``nodes.method: off``, line ``node subsampling: off``); None otherwise.
    """
    doc = json.loads(raw) if raw else {}
    if doc.get("method") != "off":
        return None
    return {"requested": None, "reason": "nodes.method: off", "line": "node subsampling: off", **doc}
