"""Build a molecule graph table from a CSV of SMILES strings.

Each SMILES is parsed once by rdkit and its atoms get the 9 categorical features of the OGB files
(:func:`mol_graph`, equal to ``ogb.utils.smiles2graph``'s codes) and the same 174-wide one-hot encoding
(:func:`tmdlib.datasets._ogb.one_hot_atom_features`).  ogb and rdkit are imported only when this reader is called.

The CSV is streamed (plain or ``.gz``) in chunks of rows, so a pool of millions of molecules (MOSES: 1.58 M)
never sits in memory as text, and chunks may be converted by several processes.  :func:`write_smiles_parquet`
writes each converted chunk to the store as a Parquet row group as it comes (two passes, memory independent of
the pool); :func:`read_smiles_csv` builds the same table in memory.

Labels come from one or several columns (several: ``y`` is ``list<double>``, one value per target); their task
type is decided once all rows are read (:func:`tmdlib.datasets._task.task_and_labels`: inferred, or forced and
checked, every offending line in one error).  A split column (train / test / valid) and further numeric columns
(MoleculeACE's ``cliff_mol``) can be kept.  Without named columns the pipeline looks for ``y`` or ``label`` and
``split`` (:func:`default_csv_columns`).
"""
from __future__ import annotations

import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from .._errors import InputError
from .molfiles import MoleculeFile, molecule_file, molecule_rows
from ._ogb import FEATURE_DESCRIPTION, distinct_atom_rows, one_hot_atom_features
from ._schema import (META_FEATURE_TABLE, META_FEATURES, META_LABEL_RULE, META_NAME, META_SCHEMA_VERSION,
                     META_SOURCE, SCHEMA_VERSION, _feature_rows, base_fields, canonical_edges, dictionary_pays_off,
                     edge_list_arrays, encode_feature_table, nested_list_array, ogb_fields,
                     validate_graph_table)
from ._task import TaskSpec, label_array, task_and_labels, with_task

__all__ = ["read_smiles_csv", "write_smiles_parquet", "smiles_to_graph", "mol_graph", "STANDIN_RULES", "standin_label", "csv_header",
           "default_csv_columns", "smiles_column_index", "DEFAULT_LABEL_COLUMNS", "DEFAULT_SPLIT_COLUMN", "SPLIT_VALUES", "canonical_smiles",
           "MAX_PREDICTION_ATOMS", "filled_keys"]


@contextmanager
def _quiet_rdkit():
    """Silence rdkit's parse-error logging (errors are reported as InputError)."""
    from rdkit import RDLogger

    RDLogger.DisableLog("rdApp.*")
    try:
        yield
    finally:
        RDLogger.EnableLog("rdApp.*")


#: Lookups from rdkit atom properties to OGB feature codes (built on first use; ``safe_index`` semantics:
#: a value outside a vocabulary gets its last, "misc", code).
_ATOM_LOOKUPS: tuple | None = None


def _atom_lookups() -> tuple:
    global _ATOM_LOOKUPS
    if _ATOM_LOOKUPS is None:
        from ogb.utils.features import allowable_features as af
        from rdkit import Chem

        def table(values):
            return {v: i for i, v in enumerate(values) if v != "misc"}, len(values) - 1

        def enum(values, kind):  # rdkit enums (their str is the OGB vocabulary word) -> code
            known = {v: i for i, v in enumerate(values)}
            return {e: known.get(str(e), len(values) - 1) for e in kind.values.values()}

        _ATOM_LOOKUPS = (table(af["possible_atomic_num_list"]),
                         enum(af["possible_chirality_list"], Chem.rdchem.ChiralType),
                         table(af["possible_degree_list"]), table(af["possible_formal_charge_list"]),
                         table(af["possible_numH_list"]), table(af["possible_number_radical_e_list"]),
                         enum(af["possible_hybridization_list"], Chem.rdchem.HybridizationType))
    return _ATOM_LOOKUPS


def mol_graph(mol) -> tuple[np.ndarray, np.ndarray]:
    """The OGB atom codes and the bonds of an rdkit molecule.

    The codes are those of ``ogb.utils.features.atom_to_feature_vector`` (a test checks that they agree on
    every molecule of a MOSES sample), computed with dictionary lookups instead of list searches: about four
    times faster than ``ogb.utils.smiles2graph``, which also parses the SMILES again and computes bond
    features the graph store does not keep.

    Parameters
    ----------
    mol : rdkit.Chem.Mol

    Returns
    -------
    codes : ndarray of int16, shape (n, 9)
        Atom ``i``'s 9 codes, in :data:`~tmdlib.datasets._ogb.ATOM_FEATURE_NAMES` order.
    bonds : ndarray of int32, shape (b, 2)
        Each bond once, ``(begin, end)`` atom indices.
    """
    (num, num_misc), chiral, (deg, deg_misc), (chg, chg_misc), (hs, hs_misc), (rad, rad_misc), hyb = \
        _atom_lookups()
    rows, bonds = [], []
    atom, bond = mol.GetAtomWithIdx, mol.GetBondWithIdx  # by index: rdkit's GetAtoms() sequence is slower
    for i in range(mol.GetNumAtoms()):
        a = atom(i)
        rows.append((num.get(a.GetAtomicNum(), num_misc), chiral[a.GetChiralTag()],
                     deg.get(a.GetTotalDegree(), deg_misc), chg.get(a.GetFormalCharge(), chg_misc),
                     hs.get(a.GetTotalNumHs(), hs_misc), rad.get(a.GetNumRadicalElectrons(), rad_misc),
                     hyb[a.GetHybridization()], int(a.GetIsAromatic()), int(a.IsInRing())))
    for i in range(mol.GetNumBonds()):
        b = bond(i)
        bonds.append((b.GetBeginAtomIdx(), b.GetEndAtomIdx()))
    return np.array(rows, dtype=np.int16).reshape(-1, 9), np.array(bonds, dtype=np.int32).reshape(-1, 2)


def _parse(smiles: str):
    """The rdkit molecule of a SMILES, or None if rdkit cannot parse it or it has no atoms."""
    from rdkit import Chem

    mol = Chem.MolFromSmiles(smiles) if smiles else None
    return mol if mol is not None and mol.GetNumAtoms() > 0 else None


def smiles_to_graph(smiles: str) -> dict | None:
    """OGB graph dict of one SMILES, or None if rdkit cannot parse it or it has no atoms.

    Returns
    -------
    dict or None
        As ``ogb.utils.smiles2graph`` without the bond features: ``node_feat`` (n, 9) int64, ``edge_index``
        (2, 2b) int64 (both directions), ``num_nodes``.
    """
    mol = _parse(smiles)
    if mol is None:
        return None
    codes, bonds = mol_graph(mol)
    edges = np.stack([bonds, bonds[:, ::-1]], axis=1).reshape(-1, 2).T.astype(np.int64)
    return {"node_feat": codes.astype(np.int64), "edge_index": edges, "num_nodes": int(codes.shape[0])}


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


def smiles_column_index(header: list[str], name: str, path: Path) -> int:
    """Position of the SMILES column: ``name`` as :func:`column_index` finds it; for the default ``smiles`` also
    the first header the lab sheets take for a structure (``Canonical SMILES``, ``canonical_smiles``, ``Compound
    SMILES``, ChEMBL's ``Smiles``: :data:`tmdlib.datasets.labsheet.SMILES_NAMES`, compared by
    :func:`~tmdlib.datasets.labsheet.header_key`).

    Raises
    ------
    InputError
        As :func:`column_index` (the message also names the synonyms looked for).
    """
    from .labsheet import SMILES_NAMES, header_key

    try:
        return column_index(header, name, path)
    except InputError as err:
        if name != "smiles" or "ambiguous" in err.problem:
            raise
    wanted = {header_key(n) for n in SMILES_NAMES}
    found = [k for k, h in enumerate(header) if header_key(h) in wanted]
    if found:
        return found[0]
    raise InputError(path, f"no SMILES column (smiles, SMILES, Canonical SMILES, canonical_smiles, Compound SMILES, "
                           f"...; or name it: --smiles-column, ingest.sources.<NAME>.smiles_column); available "
                           f"columns: {', '.join(header) or 'none'}", line=1)


#: Benchmark label stand-ins for unlabelled pools: ``name -> (description, function of an rdkit Mol)``.
#: They exist so that the pipeline can train and evaluate on an unlabelled pool (MOSES) in benchmarks;
#: a store built with one records it in its label rule, and the labels are never real measurements.
STANDIN_RULES = {
    "logp": "STAND-IN LABEL, NOT A MEASUREMENT: y = 1 if RDKit's Crippen logP >= 2.75 else 0 "
            "(Wildman & Crippen 1999; a benchmark device for unlabelled pools)",
}
_LOGP_THRESHOLD = 2.75  # about the median of MOSES: balanced classes


def standin_label(smiles: str, rule: str = "logp") -> float:
    """The flagged benchmark stand-in label of one molecule (see :data:`STANDIN_RULES`).

    Parameters
    ----------
    smiles : str
        A SMILES rdkit can parse.
    rule : {"logp"}
        ``"logp"``: :math:`y = [\\mathrm{logP}_{\\mathrm{Crippen}} \\ge 2.75]`.

    Returns
    -------
    float
        0.0 or 1.0 (NaN when rdkit cannot parse the SMILES).
    """
    if rule not in STANDIN_RULES:
        raise InputError(None, f"unknown stand-in label rule {rule!r}; known: {', '.join(STANDIN_RULES)}")
    from rdkit import Chem

    mol = Chem.MolFromSmiles(smiles)
    return math.nan if mol is None else _standin(mol, rule)


def _standin(mol, rule: str) -> float:
    """:func:`standin_label` of a parsed molecule."""
    from rdkit.Chem import Crippen

    return float(Crippen.MolLogP(mol) >= _LOGP_THRESHOLD)


def csv_header(path: str | os.PathLike) -> list[str]:
    """The column names of a molecule file (stripped): a CSV's header line -- its delimiter sniffed --, a ``.smi``
    file's ``smiles, name``, an SD file's ``smiles, title`` and properties, a Parquet table's columns
    (:func:`tmdlib.datasets.molfiles.molecule_file`; ``.gz`` allowed).

    Raises
    ------
    InputError
        Unreadable file, an unknown file type, or no header line.
    """
    return list(molecule_file(path).header)


#: Column names a CSV's labels are found under when none is named (in this order), and its split column.
DEFAULT_LABEL_COLUMNS = ("y", "label")
DEFAULT_SPLIT_COLUMN = "split"


def default_csv_columns(path: str | os.PathLike, header: list[str] | None = None, *, labels: bool = True
                        ) -> tuple[tuple[str, ...], str | None]:
    """The label and split columns a CSV gets when none is named: ``y`` or ``label``, and ``split``.

    Matched as :func:`column_index` does (the exact name, else the one name equal ignoring case).

    Parameters
    ----------
    path : path
        The CSV (its header is read unless ``header`` is given).
    header : list of str, optional
        Its column names.
    labels : bool, default True
        Look for the label column (False: only the split column; ``()`` is returned for the labels).

    Returns
    -------
    labels : tuple of str
        ``(name,)`` of the label column found (its name as written in the header), or ``()`` (unlabelled).
    split : str or None
        The split column's name as written, or None.

    Raises
    ------
    InputError
        Both a ``y`` and a ``label`` column (name the one meant), or an unreadable header.
    """
    path = Path(path)
    header = csv_header(path) if header is None else header

    def find(name):
        try:
            return header[column_index(header, name, path)]
        except InputError:
            return None

    found = [c for c in (find(n) for n in DEFAULT_LABEL_COLUMNS) if c is not None] if labels else []
    if len(found) > 1:
        raise InputError(path, f"both {found[0]!r} and {found[1]!r} columns could be the label: name the label "
                               "column(s) (--label-column)", line=1)
    return tuple(found), find(DEFAULT_SPLIT_COLUMN)


#: Accepted values of a split column (lower-cased) and what they are stored as.
SPLIT_VALUES = {"train": "train", "test": "test", "valid": "valid", "validation": "valid"}
#: Columns of a molecule store that a kept source column may not replace.
_RESERVED = ("graph_id", "num_nodes", "x", "x_id", "edge_src", "edge_dst", "y", "smiles", "atom_features", "split",
             "compound_id", "canonical_smiles")
#: The store's column of the user's own compound ids (a registry number, a name), when the source has one.
ID_COLUMN = "compound_id"
#: The store's column of each molecule's RDKit canonical SMILES (:func:`canonical_smiles`), written at ingest from
#: the molecule already parsed: the key index a lab's SMILES-keyed answer is matched on without parsing the pool
#: again (a store without it, from an older version or an OGB source, is canonicalised when an answer needs it).
CANONICAL_COLUMN = "canonical_smiles"


def _rows(mf: MoleculeFile, cols: tuple) -> Iterator[tuple]:
    """Yield ``(line, smiles, label_texts, split_text, kept_texts, id_text, problem, text_cells)`` for every data
    row of a molecule file, streaming (``problem``: why a record gives no structure, :func:`molecule_rows`;
    ``text_cells``: the SD properties kept as text)."""
    i_s, i_l, i_split, i_keep, i_id, i_text = cols
    for line, row, problem in molecule_rows(mf):
        yield (line, row[i_s].strip(), tuple(row[i] for i in i_l), None if i_split is None else row[i_split],
               tuple(row[i] for i in i_keep), None if i_id is None else row[i_id].strip(), problem,
               tuple(row[i] for i in i_text))


def _number(text: str | None) -> float | str:
    """A CSV cell as a float (empty / ``nan`` = NaN), or the reason it is not one."""
    text = (text or "").strip()
    if text == "" or text.lower() == "nan":
        return math.nan
    try:
        value = float(text)
    except ValueError:
        return f"{text!r} is not a number"
    return f"{text!r} is infinite" if math.isinf(value) else value


def _convert_chunk(rows: list[tuple], labels: tuple[str, ...], standin: str | None, keep: tuple[str, ...] = (),
                   skip_invalid: bool = False):
    """Graphs of one chunk of rows: ``("ok", codes, bonds, sizes, labels (n, T), lines, splits, kept (n, K),
    smiles, skipped)`` with chunk-local atom ids, or ``("error", line, message)`` (plain data, so that it crosses
    process boundaries).  Each SMILES is parsed once.  ``labels`` and ``keep`` name the label and kept columns
    (for messages); ``skip_invalid``: a SMILES rdkit cannot parse is left out and listed in ``skipped``
    (``(line, smiles, reason)``) instead of stopping."""
    from rdkit import Chem

    codes, bonds, sizes, values, lines, splits, kept, smiles, skipped, ids, texts, keys = ([] for _ in range(12))
    offset = 0
    with _quiet_rdkit():
        for line, smi, labs, split, keeps, ident, problem, text in rows:
            mol = _parse(smi) if problem is None else None
            if mol is None:
                why = problem or "rdkit cannot parse it, or it has no atoms"
                if skip_invalid:
                    skipped.append((int(line), smi, why))
                    continue
                return "error", line, problem or f"invalid SMILES {smi!r} ({why})"
            if labels:
                row = []
                for name, text in zip(labels, labs):
                    value = _number(text)
                    if isinstance(value, str):
                        return "error", line, f"label {value}" + (f" (column {name!r})" if len(labels) > 1 else "")
                    row.append(value)
                values.append(row)
            else:
                values.append([_standin(mol, standin) if standin else math.nan])
            if split is not None:
                value = SPLIT_VALUES.get(split.strip().lower())
                if value is None:
                    return "error", line, (f"split {split!r} is not one of train, test, valid (or validation)")
                splits.append(value)
            row = []
            for name, text in zip(keep, keeps):
                value = _number(text)
                if isinstance(value, str):
                    return "error", line, f"column {name!r}: {value}"
                row.append(value)
            kept.append(row)
            lines.append(line)
            smiles.append(smi)
            keys.append(Chem.MolToSmiles(mol))  # 0.04 ms on the parsed molecule: the answers' key index
            ids.append(ident or None)
            texts.append(text)
            atom_codes, mol_bonds = mol_graph(mol)
            codes.append(atom_codes)
            bonds.append(mol_bonds + offset)
            sizes.append(atom_codes.shape[0])
            offset += atom_codes.shape[0]
    n = len(sizes)
    if not n:
        return "ok", None, None, np.zeros(0, np.int64), None, None, None, None, None, None, None, None, skipped
    return ("ok", np.concatenate(codes), np.concatenate(bonds), np.asarray(sizes, dtype=np.int64),
            np.asarray(values, dtype=np.float64).reshape(n, -1), np.asarray(lines, dtype=np.int64), splits,
            np.asarray(kept, dtype=np.float64).reshape(n, len(keep)), smiles, ids, texts, keys, skipped)


def _chunks(rows: Iterator, size: int) -> Iterator[list]:
    chunk = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _names(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """A column argument as a tuple of names (one string is one name)."""
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


class _Columns:
    """The resolved columns of a SMILES CSV (positions and names as written in the header)."""

    def __init__(self, path: Path, smiles_column: str, label_column, split_column, keep_columns,
                 standin: str | None, id_column: str | None = None):
        labels, keep = _names(label_column), _names(keep_columns)
        if standin is not None and labels:
            raise InputError(path, "a stand-in label is only for unlabelled pools: give standin or label_column")
        if standin is not None and standin not in STANDIN_RULES:
            raise InputError(path, f"unknown stand-in label rule {standin!r}; known: {', '.join(STANDIN_RULES)}")
        self.file = molecule_file(path)
        header = self.file.header
        i_s = smiles_column_index(header, smiles_column, path)
        i_l = tuple(column_index(header, c, path) for c in labels)
        i_split = column_index(header, split_column, path) if split_column is not None else None
        i_keep = tuple(column_index(header, c, path) for c in keep)
        i_id = column_index(header, id_column, path) if id_column else None
        for what, idx in (("label", i_l), ("kept", i_keep)):
            if len(set(idx)) != len(idx):
                raise InputError(path, f"a {what} column is named twice: {', '.join(header[i] for i in idx)}",
                                 line=1)
        self.labels, self.keep = tuple(header[i] for i in i_l), tuple(header[i] for i in i_keep)
        clash = [c for c in self.keep if c in _RESERVED]
        if clash:
            raise InputError(path, f"kept column {clash[0]!r} would replace the graph store's own column of that "
                                   "name", line=1)
        self.split = header[i_split] if i_split is not None else None
        self.ident = header[i_id] if i_id is not None else None
        used = {i_s, *i_l, i_split, *i_keep, i_id}
        # an SD file's other properties (and its title) are kept as text columns: what the vendor wrote
        i_text = tuple(k for k, h in enumerate(header) if self.file.format == "sdf" and k not in used
                       and h not in _RESERVED and h not in (self.split, self.ident))
        self.text = tuple(header[i] for i in i_text)
        self.positions = (i_s, i_l, i_split, i_keep, i_id, i_text)
        self.standin = standin


def _converted(path: Path, cols: _Columns, workers: int, chunk_size: int, limit: int | None,
               progress: Callable[[int, float], None] | None, skipped: list | None = None) -> Iterator[tuple]:
    """The converted chunks of a CSV in row order (:func:`_convert_chunk`'s ``"ok"`` tuples, without the skipped
    rows); an error row raises :class:`InputError` with its line.  ``skipped`` (a list): SMILES rdkit cannot parse
    are left out and appended to it as ``(line, smiles, reason)``; None: they stop the read."""
    start, done, read = time.perf_counter(), 0, 0

    def rows():
        nonlocal read
        for row in _rows(cols.file, cols.positions):
            if limit is not None and read >= limit:
                return
            read += 1
            yield row

    def checked(result):
        nonlocal done
        if result[0] == "error":
            raise InputError(path, result[2], line=result[1])
        done += len(result[3]) + len(result[-1])
        if skipped is not None:
            skipped.extend(result[-1])
        if progress is not None:
            progress(done, time.perf_counter() - start)
        return result[1:-1] if len(result[3]) else None

    skip = skipped is not None
    chunks = _chunks(rows(), chunk_size)
    if workers == 1:
        for chunk in chunks:
            part = checked(_convert_chunk(chunk, cols.labels, cols.standin, cols.keep, skip))
            if part is not None:
                yield part
        return
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        pending = []
        try:
            for chunk in chunks:  # at most 2 chunks per worker in flight: memory stays bounded
                pending.append(pool.submit(_convert_chunk, chunk, cols.labels, cols.standin, cols.keep, skip))
                while len(pending) > 2 * workers or (pending and pending[0].done()):
                    part = checked(pending.pop(0).result())
                    if part is not None:
                        yield part
            while pending:
                part = checked(pending.pop(0).result())
                if part is not None:
                    yield part
        finally:
            for fut in pending:
                fut.cancel()


class _Assembly:
    """Converted chunks -> graph-store tables, in two passes that hold one chunk at a time.

    Pass 1 (:meth:`raw`) turns a chunk into a *raw* table: the store's columns with atoms numbered by a running
    dictionary of distinct atom-code rows (first seen, first numbered), labels kept aside (``n x T`` floats:
    the only per-molecule state).  Once every chunk is in, :meth:`finish` decides the task from all labels and
    the final feature table (the distinct one-hot rows, sorted, as :func:`build_graph_table` stores them);
    pass 2 (:meth:`final`) renumbers each raw table into the final schema.  Read whole or streamed, a CSV gives
    the same table.
    """

    def __init__(self, path: Path, cols: _Columns, name: str):
        self.path, self.cols, self.name = path, cols, name
        self.atom_ids: dict[bytes, int] = {}
        self.atom_rows: list[np.ndarray] = []
        self.y: list[np.ndarray] = []
        self.lines: list[np.ndarray] = []
        self.graphs = self.nodes = self.edges = 0
        self.schema: pa.Schema | None = None

    def raw(self, part: tuple) -> pa.Table:
        """The raw table of one converted chunk."""
        codes, bonds, sizes, values, lines, splits, kept, smiles, compound, texts, keys = part
        node_ptr = np.concatenate([[0], np.cumsum(sizes)])
        rows, index = distinct_atom_rows(codes)
        ids = np.empty(rows.shape[0], dtype=np.int32)
        for r, row in enumerate(rows.astype(np.int16)):
            key = row.tobytes()
            if key not in self.atom_ids:
                self.atom_ids[key] = len(self.atom_rows)
                self.atom_rows.append(row)
            ids[r] = self.atom_ids[key]
        src, dst = canonical_edges(bonds[:, 0], bonds[:, 1], int(node_ptr[-1]))
        edge_src, edge_dst = edge_list_arrays(src, dst, node_ptr)
        columns = {
            "num_nodes": pa.array(sizes),
            "x_gid": pa.ListArray.from_arrays(pa.array(node_ptr.astype(np.int32)), pa.array(ids[index])),
            "edge_src": edge_src, "edge_dst": edge_dst,
            "smiles": pa.array(smiles, type=pa.string()),
            "atom_features": nested_list_array(codes, node_ptr, pa.int16()),
            CANONICAL_COLUMN: pa.array(keys, type=pa.string()),
        }
        if self.cols.split is not None:
            columns["split"] = pa.array(splits, pa.string())
        if self.cols.ident is not None:
            columns[ID_COLUMN] = pa.array(compound, pa.string())
        for k, name in enumerate(self.cols.text):
            columns[name] = pa.array([t[k] or None for t in texts], pa.string())
        for k, name in enumerate(self.cols.keep):
            columns[name] = pa.array(kept[:, k], type=pa.float64(), mask=np.isnan(kept[:, k]))
        self.y.append(values)
        self.lines.append(lines)
        self.graphs += len(sizes)
        self.nodes += int(node_ptr[-1])
        self.edges += src.size // 2
        return pa.table(columns)

    def finish(self, task, task_source: str | None = None) -> TaskSpec:
        """Decide the task from every label (all offending lines in one error) and the final schema;
        ``task_source``, when given, is recorded as the task's source."""
        if not self.graphs:
            raise InputError(self.path, "no molecules (the CSV has no data rows)")
        cols = self.cols
        y = np.concatenate(self.y)
        spec, y = _task_of(y, cols.labels, task, cols.standin, self.path, np.concatenate(self.lines))
        if task_source is not None:
            spec = replace(spec, source=task_source)
        self.y = self.lines = None
        self.labels = y if (cols.labels or cols.standin) else None
        one_hot = one_hot_atom_features(np.stack(self.atom_rows))
        self.features, self.remap = _feature_rows(None, one_hot, np.arange(one_hot.shape[0]))
        self.compact = dictionary_pays_off(self.features.shape[0], self.nodes, self.features.shape[1])
        fields = base_fields(self.compact) + ogb_fields()
        fields.append(pa.field(CANONICAL_COLUMN, pa.string(), nullable=True))  # null: appended without it
        if self.labels is not None and self.labels.ndim == 2 and self.labels.shape[1] > 1:
            fields[5] = pa.field("y", pa.list_(pa.float64()), nullable=True)
        if cols.split is not None:
            fields.append(pa.field("split", pa.string(), nullable=True))
        if cols.ident is not None:
            fields.append(pa.field(ID_COLUMN, pa.string(), nullable=True))
        fields += [pa.field(name, pa.float64(), nullable=True) for name in cols.keep]
        fields += [pa.field(name, pa.string(), nullable=True) for name in cols.text]
        meta = {META_SCHEMA_VERSION: SCHEMA_VERSION, META_SOURCE: "smiles", META_NAME: self.name,
                META_FEATURES: FEATURE_DESCRIPTION,
                META_LABEL_RULE: _label_rule(spec, cols.labels, cols.standin, cols.split, cols.keep)
                + (f"; compound ids = column {cols.ident!r} as text" if cols.ident else "")
                + (f"; SD properties kept as text: {', '.join(cols.text)}" if cols.text else "")}
        if self.compact:
            meta[META_FEATURE_TABLE] = encode_feature_table(self.features)
        schema = pa.schema(fields, metadata={k.encode(): str(v).encode() for k, v in meta.items()})
        self.schema = with_task(schema.empty_table(), spec).schema
        return spec

    def final(self, raw: pa.Table, start: int) -> pa.Table:
        """The final table of the raw table whose first graph is ``start`` (after :meth:`finish`)."""
        raw = raw.combine_chunks()
        g = raw.num_rows
        gid = raw.column("x_gid").chunk(0)  # a raw table holds one converted chunk: never empty
        node_ptr = np.asarray(gid.offsets, dtype=np.int64)
        node_ptr -= node_ptr[0]
        feature = self.remap[np.asarray(gid.flatten(), dtype=np.int64)]
        if self.compact:
            x = pa.ListArray.from_arrays(pa.array(node_ptr.astype(np.int32)), pa.array(feature.astype(np.int32)))
        else:
            x = nested_list_array(self.features[feature], node_ptr, pa.float32())
        y = pa.nulls(g, pa.float64()) if self.labels is None else label_array(self.labels[start:start + g])
        columns = [pa.array(np.arange(start, start + g, dtype=np.int64)), raw.column("num_nodes"), x,
                   raw.column("edge_src"), raw.column("edge_dst"), y]
        columns += [raw.column(f.name) for f in list(self.schema)[6:]]
        return pa.Table.from_arrays(columns, schema=self.schema)


def read_smiles_csv(path: str | os.PathLike, smiles_column: str = "smiles",
                    label_column: str | Sequence[str] | None = None, *, split_column: str | None = None,
                    keep_columns: str | Sequence[str] = (), task: str | TaskSpec | None = None,
                    standin: str | None = None, workers: int = 1, chunk_size: int = 20_000, limit: int | None = None,
                    progress: Callable[[int, float], None] | None = None, name: str | None = None,
                    skipped: list | None = None, id_column: str | None = None) -> pa.Table:
    """Read a CSV (header line; ``.gz`` allowed) of SMILES into a graph table, streaming.

    Parameters
    ----------
    path : str or os.PathLike
        The CSV file.
    smiles_column : str, default "smiles"
        Column holding the SMILES, matched ignoring case when no column has exactly this name
        (:func:`column_index`).
    label_column : str or sequence of str, optional
        Column(s) holding numeric graph labels (matched the same way; empty / ``nan`` = missing): one
        column gives a float64 ``y``, several a ``list<double>`` ``y`` of length ``T``.  Without it ``y`` is
        all null (or the stand-in).  The task type is decided from the values (:mod:`tmdlib.datasets._task`).
    split_column : str, optional
        Column holding each molecule's split (``train``, ``test``, ``valid`` or ``validation``, any case),
        stored lower-cased as the string column ``split`` (``validation`` as ``valid``).
    keep_columns : str or sequence of str
        Further numeric columns kept as they are (float64, null where empty), under their names as written in
        the header (e.g. MoleculeACE's ``cliff_mol``).
    task : {"auto", "binary", "multiclass", "multitask", "regression"} or TaskSpec, optional
        Force the task type (the labels must fit it); a :class:`~tmdlib.datasets._task.TaskSpec` is an
        existing dataset's task (an appended batch: its classes and all).  Default: inferred.
    standin : {"logp"}, optional
        Unlabelled pools only (no ``label_column``): fill ``y`` with a flagged benchmark stand-in label
        (:data:`STANDIN_RULES`, binary); the table's label rule says so.
    workers : int, default 1
        Processes converting chunks (rdkit is single-threaded); chunks keep their order.
    chunk_size : int, default 20000
        Rows per chunk.
    limit : int, optional
        Read only the first ``limit`` molecules (a smaller pool from a large file).
    progress : callable, optional
        Called as ``progress(rows_done, seconds)`` after every chunk.
    name : str, optional
        The dataset's name in the table's metadata (default: the file name's stem).
    skipped : list, optional
        Given, a SMILES rdkit cannot parse (or with no atoms) is left out of the table instead of stopping the
        read, and appended here as ``(line, smiles, reason)``; the other molecules keep their order (graph ids
        0..G-1 over the molecules kept).
    id_column : str, optional
        Column holding the user's own compound id (a registry number, a name), stored as text in the column
        ``compound_id`` (:data:`ID_COLUMN`): the label requests and the predictions carry it.

    Returns
    -------
    pyarrow.Table
        Graph-store table in row order (``graph_id`` 0..G-1), with ``smiles``,
        ``atom_features`` (raw 9 OGB codes), dictionary-encoded one-hot node features
        (width 174), ``split`` and the kept columns when asked for, and the task spec in the
        schema metadata (:data:`~tmdlib.datasets._task.META_TASK`; multi-class labels stored as class indices).

    Raises
    ------
    InputError
        Missing column (the message lists the available ones), a SMILES rdkit
        cannot parse (or with no atoms), a non-numeric label or kept value, a split value
        other than train / test / valid(ation), a row with the wrong number of fields -- each with the
        1-based CSV line; labels that do not fit the task (every offending line in one error).

    See Also
    --------
    write_smiles_parquet : the same table written to a Parquet file as it is read, in memory that does not
        grow with the pool.
    """
    path = Path(path)
    _check_sizes(path, workers, chunk_size, limit)
    cols = _Columns(path, smiles_column, label_column, split_column, keep_columns, standin, id_column)
    build = _Assembly(path, cols, name or path.stem.split(".")[0])
    raws = [build.raw(part) for part in _converted(path, cols, workers, chunk_size, limit, progress, skipped)]
    build.finish(task)
    finals, start = [], 0
    for raw in raws:
        finals.append(build.final(raw, start))
        start += raw.num_rows
    return pa.concat_tables(finals).combine_chunks()


def write_smiles_parquet(path: str | os.PathLike, out: str | os.PathLike, smiles_column: str = "smiles",
                         label_column: str | Sequence[str] | None = None, *, split_column: str | None = None,
                         keep_columns: str | Sequence[str] = (), task: str | TaskSpec | None = None,
                         task_source: str | None = None, standin: str | None = None, workers: int = 1,
                         chunk_size: int = 20_000, limit: int | None = None,
                         progress: Callable[[int, float], None] | None = None, name: str | None = None,
                         skip_invalid: bool = False, id_column: str | None = None) -> dict:
    """Convert a CSV of SMILES into a graph-store Parquet file, one row group per chunk, as it is read.

    The table is the one :func:`read_smiles_csv` returns (same arguments), but no more than one chunk of it is
    ever in memory: pass 1 writes each converted chunk to a scratch file beside ``out`` (atoms numbered by a
    running dictionary) and keeps only the labels (``G x T`` floats); once the task is decided from all labels,
    pass 2 reads the scratch file back a row group at a time, renumbers the atoms into the final feature table,
    adds the labels, validates each row group (:func:`~tmdlib.datasets._schema.validate_graph_table`) and writes
    it to ``out`` (zstd).  Peak memory is that of a few chunks, whatever the pool's size; a pool whose list
    offsets would overflow 32 bits in one table (10⁷ molecules of MOSES size) is fine, as each row group has
    its own.

    Parameters
    ----------
    path, smiles_column, label_column, split_column, keep_columns, task, standin, workers, chunk_size, limit, \
progress, name, id_column
        As for :func:`read_smiles_csv`.
    out : str or os.PathLike
        The Parquet file to write (replaced).  An error while reading the CSV or deciding the task leaves it as
        it was; one while writing it removes it.  The scratch file is always removed.
    task_source : str, optional
        Recorded as the task spec's ``source`` (e.g. ``"builtin"``: the registry's task, not the user's).
    skip_invalid : bool
        A SMILES rdkit cannot parse is left out (listed in the result's ``invalid``) instead of stopping.

    Returns
    -------
    dict
        ``graphs``, ``nodes``, ``edges`` (undirected) counts, ``task`` (the
        :class:`~tmdlib.datasets._task.TaskSpec`) and ``invalid`` (``(line, smiles, reason)`` of every SMILES left
        out).

    Raises
    ------
    InputError
        As :func:`read_smiles_csv`.
    """
    import pyarrow.parquet as pq

    path, out = Path(path), Path(out)
    _check_sizes(path, workers, chunk_size, limit)
    cols = _Columns(path, smiles_column, label_column, split_column, keep_columns, standin, id_column)
    build = _Assembly(path, cols, name or path.stem.split(".")[0])
    scratch = out.with_name(f".{out.name}.{os.getpid()}.pass1")
    invalid: list | None = [] if skip_invalid else None
    try:
        writer = None
        try:
            for part in _converted(path, cols, workers, chunk_size, limit, progress, invalid):
                raw = build.raw(part)
                if writer is None:
                    writer = pq.ParquetWriter(scratch, raw.schema, compression="lz4")
                writer.write_table(raw, row_group_size=raw.num_rows)
        finally:
            if writer is not None:
                writer.close()
        spec = build.finish(task, task_source)
        source, start = pq.ParquetFile(scratch), 0
        try:
            with pq.ParquetWriter(out, build.schema, compression="zstd") as writer:
                for i in range(source.num_row_groups):
                    table = build.final(source.read_row_group(i), start)
                    validate_graph_table(table, out)
                    writer.write_table(table, row_group_size=table.num_rows)
                    start += table.num_rows
        except BaseException:
            out.unlink(missing_ok=True)
            raise
    finally:
        scratch.unlink(missing_ok=True)
    return {"graphs": build.graphs, "nodes": build.nodes, "edges": build.edges, "task": spec,
            "invalid": invalid or []}


def _check_sizes(path: Path, workers: int, chunk_size: int, limit: int | None) -> None:
    if workers < 1 or chunk_size < 1 or (limit is not None and limit < 1):
        raise InputError(path, "workers, chunk_size and limit must be >= 1")


def _task_of(y: np.ndarray, labels: tuple[str, ...], task, standin: str | None, path: Path,
             lines: np.ndarray) -> tuple[TaskSpec, np.ndarray]:
    """The task spec of a CSV's labels and the labels as stored (see :func:`task_and_labels`)."""
    if standin is not None:  # the stand-in rule gives 0/1: a binary task, whatever the values
        forced = task if isinstance(task, TaskSpec) else TaskSpec("binary", ("y",))
        if not isinstance(task, TaskSpec) and task not in (None, "", "auto") and task != forced.type:
            raise InputError(path, f"the {standin!r} stand-in label is binary; --task {task} does not fit it")
        return task_and_labels(y, ("y",), forced, path=path, lines=lines)
    if not labels and isinstance(task, TaskSpec):  # an unlabelled batch of a dataset: its task, no labels
        return task, np.full((y.shape[0], task.num_targets), np.nan)
    return task_and_labels(y, labels or ("y",), task, path=path, lines=lines)


def _label_rule(spec: TaskSpec, labels: tuple[str, ...], standin: str | None, split: str | None,
                keep: tuple[str, ...]) -> str:
    """The label rule recorded in the table's metadata."""
    if standin is not None:
        rule = STANDIN_RULES[standin]
    elif not labels:
        rule = "no labels (y null)"
    elif spec.class_indices:
        rule = (f"y = index of column {labels[0]!r} among the classes "
                + ", ".join(f"{c:g}" for c in spec.classes) + "; missing -> null")
    else:
        rule = f"y = column{'s' if len(labels) > 1 else ''} {', '.join(map(repr, labels))} as given (float); " \
               "missing -> null"
    rule += f"; task {spec.type}"
    if split is not None:
        rule += f"; split = column {split!r} lower-cased (train, test, valid)"
    if keep:
        rule += f"; kept as given: {', '.join(keep)}"
    return rule


# --------------------------------------------------------------------------------------------------------------
# Molecules from users: canonical keys (label answers) and prediction inputs row by row
# --------------------------------------------------------------------------------------------------------------

def canonical_smiles(smiles: str | None) -> str | None:
    """RDKit's canonical SMILES of a molecule however it was written (``OCC`` and ``C(O)C`` give ``CCO``), or None
    when RDKit cannot parse it (or it has no atoms).  The key a lab's SMILES-keyed answer is matched on."""
    from rdkit import Chem

    with _quiet_rdkit():
        mol = _parse(str(smiles).strip()) if smiles else None
        return Chem.MolToSmiles(mol) if mol is not None else None


def filled_keys(keys: list, smiles: list) -> list:
    """The key index of a store with its gaps filled: a molecule appended without a key (``None``) gets
    :func:`canonical_smiles` of its SMILES as stored, or those SMILES when RDKit cannot parse them."""
    return [k if k is not None else canonical_smiles(s) or s for k, s in zip(keys, smiles)]


#: The most heavy atoms a molecule given for prediction may have (a larger one gets a row-level reason).
MAX_PREDICTION_ATOMS = 1000


def smiles_reason(smiles, max_atoms: int = MAX_PREDICTION_ATOMS) -> str | None:
    """Why a SMILES gives no molecule to predict for (empty, unparseable, too many heavy atoms), or None."""
    if smiles is None or not str(smiles).strip():
        return "empty SMILES"
    s = str(smiles).strip()
    with _quiet_rdkit():
        mol = _parse(s)
    if mol is None:
        return f"RDKit cannot parse SMILES {s[:80]!r}"
    if mol.GetNumAtoms() > max_atoms:
        return f"{mol.GetNumAtoms():,} heavy atoms, more than the {max_atoms:,} a prediction takes"
    return None


def _bad_bytes(text: str) -> bool:
    """True if ``text`` holds bytes that were not UTF-8 (decoded with ``surrogateescape``)."""
    return any("\udc80" <= ch <= "\udcff" for ch in text)
