"""Lab sheets as they come: which column is the key, the value, its relation and its units, and the value rule.

A lab writes its answers its own way: ``SMILES`` or ``Compound SMILES`` for the molecule, ``pIC50`` for the value,
a ``Comment`` beside it, concentrations in nM, a ChEMBL activity export with its forty columns.
:func:`normalize_answers` turns such a table into the plain answer table :func:`tmdlib.datasets.labels.read_answers`
reads (one key column named ``graph_id``, ``source_id`` or ``smiles``, one value column per target, each cell the
value as text with its qualifier) and says what it did: the columns it used, the ones it ignored, the value rule
and the warnings.  Pure functions on pyarrow tables of text cells; reading the file is the caller's business.

Rules (docs/pipeline.md#labels):

* headers are matched ignoring case, spaces, ``_``, ``-`` and ``.``; the key is the first of ``graph_id``,
  ``source_id``, a SMILES column (:data:`SMILES_NAMES`), an id column (:data:`ID_NAMES`, matched against the
  requests' ``source_id``); ``labels.columns`` (``key``, ``value``, ``relation``, ``units``) names any other;
* the value: ``labels.columns.value``, else the first of ``label``, ``y``, the target's name, ``value``,
  ``activity``, ``result``, else the one column left whose cells are numbers; every other column is ignored and
  named;
* a relation column (``=``, ``<``, ``>``, ... quotes stripped) qualifies the value;
* ``transform``: ``none``, ``log10`` or ``p`` (−log10 of the molar concentration, from a units column or
  ``units``; a bound flips: ``> 100 nM`` is ``p < 7``);
* a ChEMBL activity export (``Standard Value``, ``Standard Units``, ``pChEMBL Value``) needs nothing set: the value
  is the pChEMBL value where present, else −log10 molar of the standard value in its units, the relation from
  ``Standard Relation``.
"""
from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np
import pyarrow as pa

from .._errors import InputError

__all__ = ["normalize_answers", "header_key", "MOLAR", "TRANSFORMS", "SMILES_NAMES", "ID_NAMES", "VALUE_NAMES",
           "RELATION_NAMES", "UNITS_NAMES", "COLUMN_ROLES", "molar_factor", "magnitude_warning", "property_name",
           "frame_table"]

#: ``labels.transform``.
TRANSFORMS = ("none", "log10", "p")
#: ``labels.columns`` keys.
COLUMN_ROLES = ("key", "value", "relation", "units")
#: Headers naming the molecule's structure (compared by :func:`header_key`).
SMILES_NAMES = ("smiles", "canonical smiles", "canonical_smiles", "compound smiles", "molecule smiles",
                "structure smiles", "isomeric smiles")
#: Headers naming the molecule by an id (matched against the requests' ``source_id``).
ID_NAMES = ("id", "name", "source id", "compound id", "compound", "compound name", "molecule id", "molecule name",
            "sample id", "registry number", "registry id")
#: Headers naming the value (after ``label`` / ``y`` / the target's name).
VALUE_NAMES = ("value", "activity", "result", "measurement")
#: Headers naming the value's relation (qualifier).
RELATION_NAMES = ("relation", "standard relation", "qualifier", "operator", "modifier", "sign", "prefix")
#: Headers naming the value's units.
UNITS_NAMES = ("units", "unit", "standard units")
#: Concentration units and their factor to mol/L (keys compared lower-case, spaces removed).
MOLAR = {"m": 1.0, "mol/l": 1.0, "mm": 1e-3, "mmol/l": 1e-3, "um": 1e-6, "µm": 1e-6, "μm": 1e-6, "umol/l": 1e-6,
         "µmol/l": 1e-6, "μmol/l": 1e-6, "nm": 1e-9, "nmol/l": 1e-9, "pm": 1e-12, "pmol/l": 1e-12}
_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "": "", "~": "~"}
#: Columns of a ChEMBL activity export (as :func:`header_key` writes them).
CHEMBL = {"value": "standard value", "units": "standard units", "pchembl": "pchembl value",
          "relation": "standard relation", "type": "standard type", "key": "smiles"}


def header_key(name: str) -> str:
    """A header as compared: lower case, quotes and a BOM stripped, runs of spaces, ``_``, ``-``, ``.`` as one space."""
    t = str(name).replace("\ufeff", "").strip().strip("'\"").lower()
    return re.sub(r"[\s_\-.]+", " ", t).strip()


def property_name(header: str, transform: str = "none", activity: str | None = None) -> str:
    r"""What a sheet's value column measures, as predictions and reports name it (``labels.name: auto``).

    Parameters
    ----------
    header : str
        The value column's header as the lab wrote it (``IC50 (nM)``, ``pKi``, ``value``).
    transform : {"none", "log10", "p"}
        The rule applied to the values.
    activity : str, optional
        A ChEMBL export's one activity type (``Standard Type``: ``IC50``); its values are then p-values.

    Returns
    -------
    str
        ``none``: the header as written (units kept); ``p``: ``p`` and the header without its units (``IC50 (nM)``
        -> ``pIC50``; a generic header -- ``value``, ``activity``, ``label``, ``y`` -- gives ``pActivity``);
        ``log10``: ``log10 <header without units>`` (units: in brackets, or a last word such as ``nM``); a ChEMBL export: ``p<activity>`` (``pChEMBL`` when it mixes
        activity types).

    Examples
    --------
    >>> property_name("IC50 (nM)", "p"), property_name("IC50 nM", "p"), property_name("Ki [uM]", "log10")
    ('pIC50', 'pIC50', 'log10 Ki')
    >>> property_name(" pIC50 "), property_name("value", "p"), property_name("Standard Value", "p", "Ki")
    ('pIC50', 'pActivity', 'pKi')
    """
    if activity is not None or transform == "p" and header_key(header) in ("standard value", "pchembl value"):
        return f"p{activity}" if activity else "pChEMBL"
    written = str(header).replace("\ufeff", "").strip().strip("'\"").strip() or "value"
    if transform == "none":
        return written
    base = re.sub(r"\s*[(\[][^)\]]*[)\]]\s*", " ", written).strip() or written
    words = base.split()
    if len(words) > 1 and molar_factor(words[-1]) is not None:  # "IC50 nM": the units as a last word
        base = " ".join(words[:-1])
    if transform == "log10":
        return f"log10 {base}"
    generic = header_key(base) in (*VALUE_NAMES, "label", "y")
    return "pActivity" if generic else f"p{base}"


def molar_factor(unit) -> float | None:
    """Factor from ``unit`` to mol/L (``nM`` → 1e-9), or None for a unit that is no concentration."""
    if unit is None:
        return None
    return MOLAR.get(str(unit).strip().strip("'\"").replace(" ", "").lower().replace("mol.l-1", "mol/l"))


def magnitude_warning(values) -> str | None:
    """The warning for raw values spanning 3 orders of magnitude or more (concentrations, not their log)."""
    v = np.asarray([x for x in values if np.isfinite(x) and x > 0], dtype=np.float64)
    if v.size < 2 or v.max() / v.min() < 1e3:
        return None
    return (f"the values span {math.log10(v.max() / v.min()):.1f} orders of magnitude ({v.min():g} .. {v.max():g}) "
            "and no transform is set: concentrations? set labels.transform: p (with a units column or labels.units) "
            "or log10 -- a model fits their logarithm, not the concentrations")


def _find(keys: dict, names: Sequence[str]) -> str | None:
    for n in names:
        if header_key(n) in keys:
            return keys[header_key(n)]
    return None


def _strip_relation(text) -> str:
    t = "" if text is None else str(text).strip().strip("'\"").strip()
    return {"=": "", "==": "", "≤": "<=", "≥": ">=", "=<": "<=", "=>": ">="}.get(t, t)


def _numeric(cells) -> bool:
    """A column of values: at least one number and every non-empty cell a value or a missing-value note."""
    from .labels import parse_value

    seen = False
    for c in cells:
        if c is None or str(c).strip() == "":
            continue
        try:
            v, _, _ = parse_value(c)
        except ValueError:
            return False
        seen = seen or math.isfinite(v)
    return seen


def _named(columns: dict | None, role: str, keys: dict, path) -> str | list | None:
    want = (columns or {}).get(role)
    if want in (None, ""):
        return None
    many = [want] if isinstance(want, str) else list(want)
    found = []
    for w in many:
        k = keys.get(header_key(w))
        if k is None:
            raise InputError(path, f"labels.columns.{role} names {w!r}, which the answer file does not have; found "
                                   f"{', '.join(keys.values())}", line=1)
        found.append(k)
    return found[0] if isinstance(want, str) else found


def _key_column(names: list[str], keys: dict, columns, path) -> tuple[str, str]:
    """``(column, kind)`` of the key: kind graph_id | source_id | smiles."""
    named = _named(columns, "key", keys, path)
    if named is not None:
        k = header_key(named)
        kind = ("graph_id" if k in ("graph id",) else "smiles" if k in {header_key(s) for s in SMILES_NAMES}
                else "source_id")
        return named, kind
    for kind, candidates in (("graph_id", ("graph_id",)), ("source_id", ("source_id",)), ("smiles", SMILES_NAMES),
                             ("source_id", ID_NAMES)):
        col = _find(keys, candidates)
        if col is not None:
            return col, kind
    raise InputError(path, f"no key column: an answer is keyed by graph_id, source_id, a SMILES column ("
                           f"{', '.join(SMILES_NAMES[:3])}, ...) or an id column (ID, name, compound id, ...), in "
                           f"any case, or by labels.columns.key; found {names}", line=1)


def _value_columns(table: pa.Table, keys: dict, targets: Sequence[str], columns, taken: set, path) -> list[str]:
    named = _named(columns, "value", keys, path)
    if named is not None:
        return [named] if isinstance(named, str) else named
    names = table.column_names
    if len(targets) > 1:
        found = [keys.get(header_key(t)) for t in targets]
        missing = [t for t, f in zip(targets, found) if f is None]
        if missing:
            raise InputError(path, f"missing value column(s) {', '.join(missing)} (one per target); found {names}",
                             line=1)
        return found
    col = _find(keys, ("label", "y", targets[0], *VALUE_NAMES))
    if col is not None and col not in taken:
        return [col]
    from .labels import KEY_COLUMNS

    never = {header_key(k) for k in (*KEY_COLUMNS, "compound_id", *SMILES_NAMES, *ID_NAMES, *RELATION_NAMES,
                                     *UNITS_NAMES)}  # ids may be numbers (registry numbers): never the value
    rest = [c for c in names if c not in taken and header_key(c) not in never]
    numeric = [c for c in rest if _numeric(table.column(c).to_pylist())]
    if len(numeric) == 1:
        return numeric
    if not numeric:
        raise InputError(path, f"no value column (label, y, {targets[0]}, value, or one column of numbers besides "
                               f"the key; labels.columns.value names it); found {', '.join(rest) or 'none'} besides "
                               "the key", line=1)
    raise InputError(path, f"{len(numeric)} columns could be the value ({', '.join(numeric)}): name it with "
                           "labels.columns.value in params.yaml", line=1)


def normalize_answers(table: pa.Table, targets: Sequence[str] = ("y",), *, columns: dict | None = None,
                      transform: str = "none", units: str | None = None, path=None, line_numbers=None,
                      limit: int = 50) -> tuple[pa.Table, dict]:
    r"""A lab's sheet as the plain answer table :func:`tmdlib.datasets.labels.read_answers` reads.

    Parameters
    ----------
    table : pyarrow.Table
        As read, every cell text (any headers).
    targets : sequence of str
        The task's targets.
    columns : dict, optional
        ``labels.columns``: ``key``, ``value`` (a name, or one per target), ``relation``, ``units``.
    transform : {"none", "log10", "p"}
        ``p``: −log10 of the molar concentration (units from the units column, else ``units``).
    units : str, optional
        ``labels.units``: the units of every value when the sheet has no units column.
    path, line_numbers
        Named in errors (line of each row; default row + 2).
    limit : int
        At most this many problems are listed.

    Returns
    -------
    answers : pyarrow.Table
        The key column (named ``graph_id``, ``source_id`` or ``smiles``) and the value column(s) (``value``, or
        one per target named after it), text: ``<qualifier><number>``, a missing-value note, or the cell as written
        when it is no value (read_answers names its line).
    info : dict
        ``columns`` (role -> header used), ``ignored`` (headers not used), ``rule`` (the value rule, one line),
        ``transform``, ``warnings`` (list of str), ``chembl`` (bool), ``not_converted`` (``{units: count}``:
        values whose units are no concentration, read as missing), ``name`` (what the value measures,
        :func:`property_name`; None for several value columns).

    Raises
    ------
    InputError
        No key or value column, a column named in ``columns`` that the sheet lacks, an unknown transform, ``p``
        without units, or every line whose value cannot be transformed.
    """
    if transform not in TRANSFORMS:
        raise InputError(path, f"labels.transform must be one of {', '.join(TRANSFORMS)}; got {transform!r}")
    bad = sorted(set(columns or {}) - set(COLUMN_ROLES))
    if bad:
        raise InputError(path, f"labels.columns: unknown role(s) {', '.join(bad)}; known: {', '.join(COLUMN_ROLES)}")
    n = table.num_rows
    lines = np.arange(2, n + 2) if line_numbers is None else np.asarray(line_numbers, dtype=np.int64)
    sheet = _SheetColumns(table, targets, columns, transform, units, path)
    conv = _Conversion(sheet, transform, units)
    for c in sheet.values:
        conv.column(table.column(c).to_pylist(), lines)
    if conv.problems:
        from .labels import _raise

        _raise(path, conv.problems, limit, "in the answer file")
    used, ignored = sheet.used()
    rule, warnings, name = _rule(sheet, conv, transform, units)
    out_names = ["value"] if len(sheet.values) == 1 else list(targets)
    answers = pa.table({sheet.kind: pa.array(["" if x is None else str(x) for x in sheet.cells(sheet.key)],
                                             pa.string()),
                        **{nm: pa.array(v, pa.string()) for nm, v in zip(out_names, conv.out)}})
    return answers, {"columns": used, "ignored": ignored, "rule": rule, "transform": "p" if sheet.chembl else
                     transform, "warnings": warnings, "chembl": sheet.chembl, "not_converted": conv.not_converted,
                     "name": name}


class _SheetColumns:
    """The roles of a lab sheet's columns: key (and its kind), value(s), relation, units; ChEMBL's export found by
    its headers.  Raises the sheet-level errors (no key, no value, ``p`` without units)."""

    def __init__(self, table: pa.Table, targets, columns, transform: str, units, path):
        self.table, self.names = table, table.column_names
        keys: dict = {}
        for c in self.names:
            keys.setdefault(header_key(c), c)
        self.header = keys
        self.chembl = (not (columns or {}).get("value")
                       and all(CHEMBL[r] in keys for r in ("value", "units", "pchembl")))
        self.key, self.kind = _key_column(self.names, keys, columns, path)
        if self.chembl:
            self.values = [keys[CHEMBL["value"]]]
            self.relation, self.units = keys.get(CHEMBL["relation"]), keys[CHEMBL["units"]]
            self.pchembl = keys[CHEMBL["pchembl"]]
        else:
            self.relation = _named(columns, "relation", keys, path) or _find(keys, RELATION_NAMES)
            self.units = _named(columns, "units", keys, path) or _find(keys, UNITS_NAMES)
            taken = {self.key} | {c for c in (self.relation, self.units) if c}
            self.values = _value_columns(table, keys, targets, columns, taken, path)
            self.pchembl = None
        if transform == "p" and not self.chembl and self.units is None and not units:
            raise InputError(path, "labels.transform: p needs the values' units: a units column (units, unit, "
                                   "standard units, or labels.columns.units) or labels.units (nM, uM, mM, M)")
        if units and molar_factor(units) is None and transform == "p":
            raise InputError(path, f"labels.units {units!r} is no concentration unit (M, mM, uM, µM, nM, pM)")

    def cells(self, c) -> list:
        """A column's cells (all None for a role the sheet lacks)."""
        return self.table.column(c).to_pylist() if c else [None] * self.table.num_rows

    def used(self) -> tuple[dict, list]:
        """``(role -> header used, headers ignored)``."""
        used = {"key": self.key, "value": self.values[0] if len(self.values) == 1 else self.values}
        for role, c in (("relation", self.relation), ("units", self.units), ("pchembl", self.pchembl)):
            if c:
                used[role] = c
        taken = {self.key, self.relation, self.units, *self.values, self.pchembl}
        return used, [c for c in self.names if c not in taken]


class _Conversion:
    """Each value cell as ``<qualifier><number>`` by the sheet's rule, the problems by line, and the counts the
    rule's line reports (pChEMBL used, converted, not converted)."""

    def __init__(self, sheet: _SheetColumns, transform: str, units):
        self.sheet, self.how, self.units = sheet, "p" if sheet.chembl else transform, units
        self.rel, self.unit, self.pchembl = sheet.cells(sheet.relation), sheet.cells(sheet.units), \
            sheet.cells(sheet.pchembl)
        self.problems: list[tuple[int, str]] = []
        self.not_converted: dict[str, int] = {}
        self.raw: list[float] = []
        self.out: list[list[str]] = []
        self.n_pchembl = self.n_converted = 0

    def column(self, cells: list, lines) -> None:
        self.out.append([self.cell(r, cell, int(lines[r])) for r, cell in enumerate(cells)])

    def cell(self, r: int, cell, ln: int) -> str:
        from .labels import parse_value

        try:
            v, q, note = parse_value(cell)
        except ValueError:
            return "" if cell is None else str(cell)  # read_answers names the line
        if self.sheet.relation is not None and math.isfinite(v):
            rq = _strip_relation(self.rel[r])
            if rq not in ("", "<", ">", "<=", ">=", "~"):
                self.problems.append((ln, f"relation {self.rel[r]!r} is none of =, <, >, <=, >=, ~"))
                return ""
            q = rq or q
        if self.sheet.chembl:
            try:
                pv = parse_value(self.pchembl[r])[0]
            except ValueError:
                pv = math.nan
            if math.isfinite(pv):
                self.n_pchembl += 1
                return f"{_FLIP[q]}{pv!r}"
        if not math.isfinite(v):
            return note if note != "empty" else ""
        self.raw.append(v)
        return self.transformed(r, cell, v, q, ln)

    def transformed(self, r: int, cell, v: float, q: str, ln: int) -> str:
        if self.how == "none":
            return f"{q}{v!r}"
        if v <= 0:
            self.problems.append((ln, f"value {cell!r}: the logarithm of a value <= 0 (labels.transform: {self.how})"))
            return ""
        if self.how == "log10":
            return f"{q}{math.log10(v)!r}"
        u = self.unit[r] if self.sheet.units is not None and str(self.unit[r] or "").strip() else self.units
        f = molar_factor(u)
        if f is None:
            if self.sheet.chembl:  # a ChEMBL row in %, ug.mL-1, ...: no pChEMBL, no molar value: missing, counted
                self.not_converted[str(u or "")] = self.not_converted.get(str(u or ""), 0) + 1
                return "NA"
            self.problems.append((ln, f"units {u!r} are no concentration (M, mM, uM, µM, nM, pM): cannot take "
                                      "-log10 of the molar value"))
            return ""
        self.n_converted += 1
        return f"{_FLIP[q]}{-math.log10(v * f)!r}"


def _rule(sheet: _SheetColumns, conv: _Conversion, transform: str, units) -> tuple[str, list, str | None]:
    """The value rule in one line, the sheet's warnings, and what the value measures."""
    vals, warnings = sheet.values, []
    name = None if len(vals) != 1 else property_name(vals[0], "p" if sheet.chembl else transform)
    if sheet.chembl:
        rule = (f"ChEMBL activity export: value = {sheet.pchembl} where present ({conv.n_pchembl} rows), else "
                f"-log10 molar of {vals[0]} in {sheet.units} ({conv.n_converted} rows)"
                + (f", relation from {sheet.relation} (a bound flips)" if sheet.relation else ""))
        types = sheet.header.get(CHEMBL["type"])
        if types:
            kinds = sorted({str(t).strip().strip("'\"") for t in sheet.cells(types) if t not in (None, "")})
            name = property_name(vals[0], "p", kinds[0] if len(kinds) == 1 else None)
            if len(kinds) > 1:
                warnings.append(f"the export mixes activity types ({', '.join(kinds)}): one model will fit them as "
                                "one value")
        if conv.not_converted:
            warnings.append("values in units that are no concentration, read as missing: " +
                            ", ".join(f"{k or '(none)'}: {v}" for k, v in sorted(conv.not_converted.items())))
        return rule, warnings, name
    what = "the value" if len(vals) == 1 else "the values"
    rule = {"none": f"{what} as written in {', '.join(vals)}",
            "log10": f"log10 of {', '.join(vals)}",
            "p": f"-log10 molar of {', '.join(vals)} in "
                 + (f"{sheet.units}" if sheet.units else f"{units} (labels.units)") + " (a bound flips)"}[transform]
    if sheet.relation:
        rule += f", relation from {sheet.relation}"
    if transform == "none":
        w = magnitude_warning(conv.raw)
        if w:
            warnings.append(w)
    return rule, warnings, name


def frame_table(frame) -> tuple[pa.Table, np.ndarray]:
    """A spreadsheet read as text (a pandas DataFrame of strings) as the text table the sheet's rules read.

    Parameters
    ----------
    frame : pandas.DataFrame
        The sheet, every cell a string (empty for a blank cell).

    Returns
    -------
    tuple
        ``(table, lines)``: every column as strings (a column without a header and without a value — a formatted
        but empty column — left out), and each row's spreadsheet row number (the header is row 1), shape ``(n,)``.
    """
    frame = frame[[c for c in frame.columns if not str(c).startswith("Unnamed: ") or frame[c].str.strip().any()]]
    cols = {str(c): pa.array(["" if v is None else str(v) for v in frame[c].tolist()], pa.string())
            for c in frame.columns}
    return pa.table(cols), np.arange(2, len(frame) + 2)
