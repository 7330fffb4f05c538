r"""Molecule files as vendors, registration systems and labs ship them: one reader for pools and lab sheets.

The format follows the file's name (``.gz`` after any of them is gunzipped while read):

=====================================  ==================================================================================
name                                   read as
=====================================  ==================================================================================
``.csv``, ``.tsv``, ``.tab``, ``.txt``  delimited text with a header line; the delimiter (comma, semicolon or tab) is
                                       sniffed from the header line (:func:`sniff_delimiter`, the rule the lab sheets
                                       are read by); a row with another number of fields is one error naming its line
                                       (a file whose rows mix delimiters)
``.smi``, ``.smiles``, ``.cxsmiles``   one molecule a line: the SMILES (with its ``|...|`` CXSMILES extension), then
                                       whitespace, then the name (the rest of the line) -- columns ``smiles`` and
                                       ``name``; a first line whose first field is a SMILES header (``SMILES``,
                                       ``smiles``, ...) is a header and is skipped, unless it holds tabs: then the file
                                       is tab-separated text with that header (Enamine's ``.cxsmiles``). A line
                                       without a name is kept without a compound id
``.sdf``, ``.sd``                      SD records: the structure from the mol block (its canonical SMILES, column
                                       ``smiles``), the title line (column ``title``) and every SD property (a column
                                       each, in order of first appearance; empty where a record lacks it)
``.parquet``                           a table with a SMILES column (a graph-store Parquet is read by
                                       :mod:`tmdlib.datasets._parquet` instead: :func:`is_graph_store`)
=====================================  ==================================================================================

:func:`molecule_file` gives a file's format and header (its columns), :func:`molecule_rows` its data rows as text
cells, each with the line (text files), the line its record starts on (SD files) or its row (Parquet).  A record
whose structure cannot be read (an SD record RDKit rejects) is a row with a *problem*: the SMILES readers treat it as
they treat an unparsable SMILES (``ingest.invalid``: skipped and listed, or refused naming the record).

Examples
--------
>>> sniff_delimiter_of_line('"ChEMBL ID";"Name";"Smiles"')
';'
>>> split_smiles_line("CC(=O)O |$;;;$| acetic acid")
('CC(=O)O |$;;;$|', 'acetic acid')
"""
from __future__ import annotations

import csv
import gzip
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .._errors import InputError

__all__ = ["MoleculeFile", "molecule_file", "molecule_rows", "molecule_format", "sniff_delimiter",
           "sniff_delimiter_of_line", "split_smiles_line", "sd_records", "SDRecord", "mol_block_smiles",
           "open_text", "is_graph_store", "source_kind", "POOL_SUFFIXES", "FORMATS", "SMI_COLUMNS", "SD_TITLE"]

#: File suffix (lower case, before any ``.gz``) -> format.
FORMATS = {".csv": "delimited", ".tsv": "delimited", ".tab": "delimited", ".txt": "delimited",
           ".smi": "smi", ".smiles": "smi", ".cxsmiles": "smi", ".cxsmi": "smi",
           ".sdf": "sdf", ".sd": "sdf", ".parquet": "parquet"}
#: The names a user's pool may have in ``data/raw/`` (``<NAME><suffix>``), in the order they are looked for.
POOL_SUFFIXES = tuple(s + gz for s in FORMATS for gz in ("", ".gz") if not (s == ".parquet" and gz))
#: The columns of a ``.smi`` file without a tab-separated header.
SMI_COLUMNS = ("smiles", "name")
#: The column of an SD record's title line.
SD_TITLE = "title"
_DELIMITERS = (",", ";", "\t")
_NAMES = {",": "commas", ";": "semicolons", "\t": "tabs"}


def molecule_format(path: str | os.PathLike) -> str:
    """``delimited``, ``smi``, ``sdf`` or ``parquet``, from the file's name (``.gz`` ignored).

    Raises
    ------
    InputError
        A name none of :data:`FORMATS` ends it.
    """
    name = Path(path).name.lower().removesuffix(".gz")
    fmt = FORMATS.get(Path(name).suffix)
    if fmt is None:
        raise InputError(path, "unknown molecule file type: name it .csv, .tsv, .smi, .cxsmiles, .sdf or .parquet "
                               "(each may end in .gz; .csv/.tsv/.txt: comma, semicolon or tab, sniffed)")
    if fmt == "parquet" and Path(path).name.lower().endswith(".gz"):
        raise InputError(path, "a gzipped Parquet file: Parquet compresses itself, give the .parquet file")
    return fmt


def open_text(path: str | os.PathLike):
    """A text stream over ``path`` (UTF-8, a BOM dropped, bytes that are no UTF-8 replaced; gunzipped when the name
    ends in ``.gz``); InputError naming the file when it is missing, a folder or unreadable."""
    path = Path(path)
    try:
        if path.name.lower().endswith(".gz"):
            return gzip.open(path, "rt", encoding="utf-8-sig", errors="replace", newline="")
        return open(path, encoding="utf-8-sig", errors="replace", newline="")
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    except IsADirectoryError:
        raise InputError(path, "is a folder, expected a file") from None
    except OSError as exc:
        raise InputError(path, f"cannot read file: {exc}") from None


def _first_line(path: Path) -> str:
    with open_text(path) as fh:
        try:
            for line in fh:
                if line.strip():
                    return line.rstrip("\r\n")
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(path, f"cannot read file: {exc}") from None
    return ""


def sniff_delimiter_of_line(line: str) -> str:
    """The field delimiter of a header line: the most frequent of ``,``, ``;`` and a tab outside double quotes
    (``,`` when none is there: one column; a tie goes to the comma)."""
    outside, quoted = [], False
    for ch in line:
        if ch == '"':
            quoted = not quoted
        elif not quoted:
            outside.append(ch)
    text = "".join(outside)
    counts = {d: text.count(d) for d in _DELIMITERS}
    best = max(counts, key=lambda d: (counts[d], d == ","))
    return best if counts[best] else ","


def sniff_delimiter(path: str | os.PathLike) -> str:
    """:func:`sniff_delimiter_of_line` of a file's first non-blank line (``,`` for an empty or unreadable file)."""
    try:
        return sniff_delimiter_of_line(_first_line(Path(path)))
    except InputError:
        return ","


def split_smiles_line(line: str) -> tuple[str, str]:
    """``(smiles, name)`` of one line of a SMILES file: the first field, with its CXSMILES extension when the next
    field starts with ``|`` (up to the closing ``|``), then the rest of the line stripped (``""``: no name)."""
    text = line.strip()
    parts = text.split(None, 1)
    if not parts:
        return "", ""
    smiles, rest = parts[0], (parts[1] if len(parts) > 1 else "")
    if rest.startswith("|"):
        end = rest.find("|", 1)
        if end > 0:
            smiles, rest = f"{smiles} {rest[:end + 1]}", rest[end + 1:]
    return smiles, rest.strip()


def _smiles_header(field: str) -> bool:
    from .labsheet import SMILES_NAMES, header_key

    return header_key(field) in {header_key(n) for n in SMILES_NAMES}


def is_graph_store(path: str | os.PathLike) -> bool:
    """True when a Parquet file has the graph store's columns (``num_nodes``, ``edge_src``, ``edge_dst``), False for a plain table of
    molecules; InputError when it is no Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    except (OSError, pa.ArrowInvalid) as exc:
        raise InputError(path, f"not a readable Parquet file: {exc}") from None
    return {"num_nodes", "edge_src", "edge_dst"} <= set(names)


@dataclass(frozen=True)
class MoleculeFile:
    """A molecule file's format and columns.

    Attributes
    ----------
    path : Path
    format : {"delimited", "smi", "sdf", "parquet"}
        How its rows are read (a ``.smi`` file with a tab-separated header is ``delimited``).
    header : list of str
        Its column names: the header line's, :data:`SMI_COLUMNS`, or ``smiles``, ``title`` and the SD properties.
    delimiter : str or None
        The delimited text's field delimiter.
    skip_first : bool
        A ``.smi`` file whose first line is a header (skipped).
    """

    path: Path
    format: str
    header: list
    delimiter: str | None = None
    skip_first: bool = False

    def describe(self) -> str:
        """The form in words (``tab-separated text``, ``SD file``, ...)."""
        if self.format == "delimited":
            return {",": "comma-separated text", ";": "semicolon-separated text",
                    "\t": "tab-separated text"}[self.delimiter]
        return {"smi": "SMILES file", "sdf": "SD file", "parquet": "Parquet table"}[self.format]


def molecule_file(path: str | os.PathLike) -> MoleculeFile:
    """The format and columns of a molecule file (its header line, or for an SD file every property name: a scan
    of the text, no structure parsed).

    Raises
    ------
    InputError
        An unknown file type, a missing or unreadable file, a text file without a header line, an SD file
        without records.
    """
    path = Path(path)
    fmt = molecule_format(path)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        is_graph_store(path)  # readable
        return MoleculeFile(path, fmt, list(pq.read_schema(path).names))
    if fmt == "sdf":
        return MoleculeFile(path, fmt, _sd_header(path))
    first = _first_line(path)
    if fmt == "smi":
        if "\t" in first and _smiles_header(first.split("\t")[0]):
            fmt = "delimited"  # a tab-separated table with a header (Enamine's .cxsmiles)
        else:
            return MoleculeFile(path, fmt, list(SMI_COLUMNS), None,
                                bool(first) and _smiles_header(split_smiles_line(first)[0]))
    if not first:
        raise InputError(path, f"empty {'CSV' if fmt == 'delimited' else 'SMILES'} file (no header line)", line=1)
    delim = "\t" if fmt == "delimited" and "\t" in first and path.name.lower().removesuffix(".gz").endswith(
        (".tsv", ".tab", ".smi", ".smiles", ".cxsmiles", ".cxsmi")) else sniff_delimiter_of_line(first)
    try:
        header = next(csv.reader([first], delimiter=delim))
    except csv.Error as exc:
        raise InputError(path, f"not a readable header line: {exc}", line=1) from None
    return MoleculeFile(path, "delimited", [h.strip() for h in header], delim)


def molecule_rows(mf: MoleculeFile) -> Iterator[tuple[int, list, str | None]]:
    """The data rows of a molecule file, streaming: ``(line, cells, problem)``, ``cells`` the row's text in
    ``mf.header``'s order, ``problem`` None or why the record gives no structure (an SD record RDKit rejects).
    Blank lines are skipped.  ``line``: the file line (text), the record's first line (SD), the row (Parquet).

    Raises
    ------
    InputError
        A delimited row whose number of fields is not the header's (naming the line and the sniffed delimiter),
        an unreadable file.
    """
    path = mf.path
    try:
        if mf.format == "parquet":
            yield from _parquet_rows(mf)
        elif mf.format == "sdf":
            index = {h: k for k, h in enumerate(mf.header)}
            with open_text(path) as fh:
                for rec in sd_records(fh):
                    smiles, problem = mol_block_smiles(rec.block)
                    cells = [""] * len(mf.header)
                    cells[0], cells[1] = smiles or "", rec.title.strip()
                    for name, value in rec.props.items():
                        cells[index[_sd_column(name)]] = value
                    if problem is not None:
                        title = f" ({rec.title.strip()[:40]!r})" if rec.title.strip() else ""
                        problem = f"SD record {rec.number}{title}: {problem}"
                    yield rec.line, cells, problem
        elif mf.format == "smi":
            with open_text(path) as fh:
                first = True
                for n, line in enumerate(fh, start=1):
                    if not line.strip() or line.lstrip().startswith("#"):
                        continue
                    if first and mf.skip_first:
                        first = False
                        continue
                    first = False
                    yield n, list(split_smiles_line(line)), None
        else:
            yield from _delimited_rows(mf)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(path, f"cannot read file: {exc}") from None


def _delimited_rows(mf: MoleculeFile) -> Iterator[tuple[int, list, None]]:
    width = len(mf.header)
    with open_text(mf.path) as fh:
        reader = csv.reader(fh, delimiter=mf.delimiter)
        header_seen = False
        try:
            for row in reader:
                if not row or all(not c.strip() for c in row):
                    continue
                if not header_seen:
                    header_seen = True
                    continue
                if len(row) != width:
                    others = [_NAMES[d] for d in _DELIMITERS if d != mf.delimiter and d in "".join(row)]
                    hint = f"; this line has {' and '.join(others)}: mixed delimiters?" if others else ""
                    raise InputError(mf.path, f"{len(row)} fields, header has "
                                              f"{width} (fields separated by {_NAMES[mf.delimiter]}, as sniffed "
                                              f"from the header line{hint})", line=reader.line_num)
                yield reader.line_num, row, None
        except csv.Error as exc:
            raise InputError(mf.path, f"not a readable row: {exc}", line=reader.line_num) from None


def _parquet_rows(mf: MoleculeFile) -> Iterator[tuple[int, list, None]]:
    import pyarrow.parquet as pq

    row = 0
    for batch in pq.ParquetFile(mf.path).iter_batches(batch_size=32_768):
        cols = [batch.column(k).to_pylist() for k in range(batch.num_columns)]
        for r in range(batch.num_rows):
            row += 1
            yield row, ["" if c[r] is None else str(c[r]) for c in cols], None


# ------------------------------------------------------------------------------------------------- SD files

@dataclass(frozen=True)
class SDRecord:
    """One SD record: its number (1-based), the line it starts on, the title line, the mol block (through
    ``M  END``; ``""`` when the record has none) and its properties (name -> value, lines joined by a space)."""

    number: int
    line: int
    title: str
    block: str
    props: dict


def sd_records(lines) -> Iterator[SDRecord]:
    """The records of SD text, streaming (any iterable of lines: an open file, ``text.splitlines()``).

    A record ends at a ``$$$$`` line; text after the last one that is not blank is a last record.  Property
    headers are ``> <name>`` lines (anything else on the line ignored), each value the lines up to a blank one."""
    number, start, body = 0, 1, []
    for n, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if line.strip() == "$$$$":
            number += 1
            yield _record(number, start, body)
            start, body = n + 1, []
        else:
            body.append(line)
    if any(x.strip() for x in body):
        yield _record(number + 1, start, body)


def _prop_name(line: str) -> str | None:
    head = line.strip()
    if not head.startswith(">") or "<" not in head:
        return None
    i = head.index("<")
    j = head.find(">", i)
    return head[i + 1:j] if j > i else None


def _record(number: int, start: int, body: list) -> SDRecord:
    end = next((i for i, x in enumerate(body) if x.startswith("M  END")), None)
    props, i = {}, (end + 1 if end is not None else len(body))
    while i < len(body):
        name = _prop_name(body[i])
        i += 1
        if name is None:
            continue
        vals = []
        while i < len(body) and body[i].strip() != "":
            vals.append(body[i].strip())
            i += 1
        props[name] = " ".join(vals)
    block = "\n".join(body[:end + 1]) + "\n" if end is not None else ""
    return SDRecord(number, start, body[0] if body else "", block, props)


def _sd_column(name: str) -> str:
    """The column of an SD property: its name, or ``<name> (property)`` when it is ``smiles`` or ``title``, the
    columns the reader fills itself."""
    return f"{name} (property)" if name in ("smiles", SD_TITLE) else name


def _sd_header(path: Path) -> list:
    names, marks = {}, 0
    with open_text(path) as fh:
        try:
            in_block = True
            for line in fh:
                if line.strip() == "$$$$":
                    marks, in_block = marks + 1, True
                elif line.startswith("M  END"):
                    marks, in_block = marks + 1, False
                elif not in_block:
                    name = _prop_name(line)
                    if name is not None:
                        names.setdefault(_sd_column(name), None)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(path, f"cannot read file: {exc}") from None
    if not marks:
        raise InputError(path, "no SD records in the file (no 'M  END' or '$$$$' line)")
    return ["smiles", SD_TITLE, *names]


def mol_block_smiles(block: str) -> tuple[str | None, str | None]:
    """``(canonical SMILES, None)`` of a mol block, or ``(None, why not)``: no mol block, one RDKit cannot read, a
    structure it rejects (its sanitisation message: a valence, an aromaticity), or no atoms."""
    if not block.strip():
        return None, "no mol block (no 'M  END' line)"
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    try:
        mol = Chem.MolFromMolBlock(block, sanitize=False)
        if mol is None:
            return None, "RDKit cannot read its mol block (a malformed counts, atom or bond line)"
        try:
            Chem.SanitizeMol(mol)
        except Exception as exc:  # noqa: BLE001 - RDKit's sanitisation errors (valence, kekulisation, ...)
            return None, f"RDKit rejects its structure: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
        if mol.GetNumAtoms() == 0:
            return None, "a mol block without atoms"
        return Chem.MolToSmiles(mol), None
    finally:
        RDLogger.EnableLog("rdApp.*")



def source_kind(path: str | os.PathLike) -> str:
    """How the pipeline reads a source: ``tu`` (a folder), ``parquet`` (a graph-store Parquet file) or ``smiles``
    (any molecule file of :data:`FORMATS`, a Parquet table of SMILES included).

    Raises
    ------
    InputError
        A file of no known type, or one that does not exist.
    """
    p = Path(path)
    if p.is_dir():
        return "tu"
    if not p.is_file():
        raise InputError(p, "file not found")
    fmt = molecule_format(p)
    return "parquet" if fmt == "parquet" and is_graph_store(p) else "smiles"
