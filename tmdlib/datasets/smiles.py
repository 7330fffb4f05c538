"""Build a molecule graph table from a CSV of SMILES strings.

Each SMILES goes through ``ogb.utils.smiles2graph`` (rdkit), so atoms get the
same 9 categorical features as the OGB files and the same 174-wide one-hot
encoding (:func:`tmdlib.datasets.ogb.one_hot_atom_features`).  ogb and rdkit
are imported only when this reader is called.

The CSV is streamed (plain or ``.gz``) in chunks of rows, so a pool of millions
of molecules (MOSES: 1.58 M) never sits in memory as text, and chunks may be
converted by several processes; atoms are kept as raw codes and dictionary-
encoded at the end (:func:`tmdlib.datasets.ogb.distinct_atom_rows`).
"""
from __future__ import annotations

import csv
import gzip
import math
import os
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing import get_context
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa

from ..errors import InputError
from .schema import META_LABEL_RULE
from .ogb import molecule_table

__all__ = ["read_smiles_csv", "smiles_to_graph", "STANDIN_RULES", "standin_label"]


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
    from rdkit import Chem
    from rdkit.Chem import Crippen

    if rule not in STANDIN_RULES:
        raise InputError(None, f"unknown stand-in label rule {rule!r}; known: {', '.join(STANDIN_RULES)}")
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        return math.nan
    return float(Crippen.MolLogP(mol) >= _LOGP_THRESHOLD)


def _open_text(path: Path):
    """A text stream over ``path`` (gunzipped when the name ends in ``.gz``)."""
    try:
        if path.name.endswith(".gz"):
            return gzip.open(path, "rt", encoding="utf-8-sig", errors="replace", newline="")
        return open(path, encoding="utf-8-sig", errors="replace", newline="")
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    except IsADirectoryError:
        raise InputError(path, "is a folder, expected a file") from None
    except OSError as exc:
        raise InputError(path, f"cannot read file: {exc}") from None


def _rows(path: Path, smiles_column: str, label_column: str | None) -> Iterator[tuple[int, str, str | None]]:
    """Yield ``(line, smiles, label_text)`` for every data row of the CSV, streaming."""
    with _open_text(path) as fh:
        reader = csv.reader(fh)
        try:
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
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(path, f"cannot read file: {exc}") from None


def _convert_chunk(rows: list[tuple[int, str, str | None]], labelled: bool, standin: str | None):
    """Graphs of one chunk of rows: ``("ok", codes, src, dst, sizes, labels)`` with chunk-local atom ids,
    or ``("error", line, message)`` (plain data, so that it crosses process boundaries)."""
    codes, src, dst, sizes, labels = [], [], [], [], []
    offset = 0
    with _quiet_rdkit():
        for line, smi, lab in rows:
            graph = smiles_to_graph(smi)
            if graph is None:
                return "error", line, f"invalid SMILES {smi!r} (rdkit cannot parse it, or it has no atoms)"
            if labelled:
                text = (lab or "").strip()
                if text == "" or text.lower() == "nan":
                    value = math.nan
                else:
                    try:
                        value = float(text)
                    except ValueError:
                        return "error", line, f"label {text!r} is not a number"
                    if math.isinf(value):
                        return "error", line, f"label {text!r} is infinite"
            else:
                value = standin_label(smi, standin) if standin else math.nan
            labels.append(value)
            codes.append(graph["node_feat"].astype(np.int16))
            src.append(graph["edge_index"][0].astype(np.int32) + offset)
            dst.append(graph["edge_index"][1].astype(np.int32) + offset)
            sizes.append(graph["num_nodes"])
            offset += graph["num_nodes"]
    return ("ok", np.concatenate(codes), np.concatenate(src), np.concatenate(dst),
            np.asarray(sizes, dtype=np.int64), np.asarray(labels, dtype=np.float64))


def _chunks(rows: Iterator, size: int) -> Iterator[list]:
    chunk = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def read_smiles_csv(path: str | os.PathLike, smiles_column: str = "smiles",
                    label_column: str | None = None, *, standin: str | None = None, workers: int = 1,
                    chunk_size: int = 20_000, limit: int | None = None,
                    progress: Callable[[int, float], None] | None = None) -> pa.Table:
    """Read a CSV (header line; ``.gz`` allowed) of SMILES into a graph table, streaming.

    Parameters
    ----------
    path : str or os.PathLike
        The CSV file.
    smiles_column : str, default "smiles"
        Column holding the SMILES, matched ignoring case when no column has exactly this name
        (:func:`column_index`).
    label_column : str, optional
        Column holding a numeric graph label (matched the same way) (empty / ``nan`` = missing);
        without it ``y`` is all null (or the stand-in).
    standin : {"logp"}, optional
        Unlabelled pools only (no ``label_column``): fill ``y`` with a flagged benchmark stand-in label
        (:data:`STANDIN_RULES`); the table's label rule says so.
    workers : int, default 1
        Processes converting chunks (rdkit is single-threaded); chunks keep their order.
    chunk_size : int, default 20000
        Rows per chunk.
    limit : int, optional
        Read only the first ``limit`` molecules (a smaller pool from a large file).
    progress : callable, optional
        Called as ``progress(rows_done, seconds)`` after every chunk.

    Returns
    -------
    pyarrow.Table
        Graph-store table in row order (``graph_id`` 0..G-1), with ``smiles``,
        ``atom_features`` (raw 9 OGB codes) and dictionary-encoded one-hot node features
        (width 174).

    Raises
    ------
    InputError
        Missing column (the message lists the available ones), a SMILES rdkit
        cannot parse (or with no atoms), a non-numeric label, a row with the
        wrong number of fields -- each with the 1-based CSV line.
    """
    path = Path(path)
    if standin is not None and label_column is not None:
        raise InputError(path, "a stand-in label is only for unlabelled pools: give standin or label_column")
    if standin is not None and standin not in STANDIN_RULES:
        raise InputError(path, f"unknown stand-in label rule {standin!r}; known: {', '.join(STANDIN_RULES)}")
    if workers < 1 or chunk_size < 1 or (limit is not None and limit < 1):
        raise InputError(path, "workers, chunk_size and limit must be >= 1")
    labelled = label_column is not None
    parts, smiles = [], []
    start, done = time.perf_counter(), 0

    def rows():
        for row in _rows(path, smiles_column, label_column):
            if limit is not None and len(smiles) >= limit:
                return
            smiles.append(row[1])
            yield row

    def collect(result) -> None:
        nonlocal done
        if result[0] == "error":
            raise InputError(path, result[2], line=result[1])
        parts.append(result[1:])
        done += len(result[4])
        if progress is not None:
            progress(done, time.perf_counter() - start)

    chunks = _chunks(rows(), chunk_size)
    if workers == 1:
        for chunk in chunks:
            collect(_convert_chunk(chunk, labelled, standin))
    else:
        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            pending = []
            for chunk in chunks:  # at most 2 chunks per worker in flight: memory stays bounded
                pending.append(pool.submit(_convert_chunk, chunk, labelled, standin))
                while len(pending) > 2 * workers or (pending and pending[0].done()):
                    collect(pending.pop(0).result())
            for fut in pending:
                collect(fut.result())
    if not smiles:
        raise InputError(path, "no molecules (the CSV has no data rows)")
    sizes = np.concatenate([p[3] for p in parts])
    node_ptr = np.concatenate([[0], np.cumsum(sizes)])
    bases = np.concatenate([[0], np.cumsum([p[0].shape[0] for p in parts])])
    src = np.concatenate([p[1].astype(np.int64) + b for p, b in zip(parts, bases)])
    dst = np.concatenate([p[2].astype(np.int64) + b for p, b in zip(parts, bases)])
    codes = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[4] for p in parts]) if (labelled or standin) else None
    del parts
    table = molecule_table(codes, node_ptr, src, dst, y, smiles, path.stem.split(".")[0], "smiles")
    if standin is not None:
        meta = dict(table.schema.metadata or {})
        meta[META_LABEL_RULE.encode()] = STANDIN_RULES[standin].encode()
        table = table.replace_schema_metadata(meta)
    return table
