"""Label hand-off tasks: export the label requests, import (or stand in for) the labels.  The rules are
:mod:`tmdlib.datasets.intake`'s (and the ledger's tables :mod:`tmdlib.datasets.ledger`'s); here the files are read and
written."""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task

from tmdlib import InputError
from tmdlib.datasets import intake
from tmdlib.datasets.molfiles import sniff_delimiter

from . import io
from .ledger import MEASUREMENTS


@task(name="label-requests", persist_result=False)
def build_requests(store_path: str, selection: dict, labelled: set | None = None):
    """Label-request table of a selection (:func:`tmdlib.datasets.intake.label_requests`): graph_id, source id
    (SMILES for molecules), τ, rank; medoids in ``labelled`` (graph ids already in the ledger) are left out."""
    from tmdlib.datasets._smiles import ID_COLUMN

    cols = pq.read_schema(store_path).names
    table = pq.read_table(store_path, columns=["graph_id"] + [c for c in ("smiles", ID_COLUMN) if c in cols])
    of = lambda c: table.column(c).to_pylist() if c in cols else None  # noqa: E731
    return intake.label_requests(table.column("graph_id").to_numpy(), selection, of("smiles"), labelled,
                                 of(ID_COLUMN))


#: The SD file of the label requests, and what the manifest says of it when the dataset has no molecules.
REQUESTS_SDF = "label_requests.sdf"
NO_MOLECULES = "no molecules in this dataset"


def request_smiles(store_path: str, requests: pa.Table) -> list | None:
    """SMILES of the requested graphs in the order of ``requests`` (``None`` for a graph stored without one), or
    ``None`` when the graph store has no ``smiles`` column (TU graphs, PyG exports)."""
    if "smiles" not in pq.read_schema(store_path).names:
        return None
    table = pq.read_table(store_path, columns=["graph_id", "smiles"])
    of = dict(zip(table.column("graph_id").to_pylist(), table.column("smiles").to_pylist()))
    return [of.get(g) for g in requests.column("graph_id").to_pylist()]


def sdf_note(smiles: list | None) -> str:
    """The manifest's ``sdf`` entry: the SD file's name, or why it has no records."""
    return REQUESTS_SDF if smiles is not None else NO_MOLECULES


@task(name="write-requests", persist_result=False)
def write_requests(out_dir: str, requests: pa.Table, manifest: dict, smiles: list | None = None) -> str:
    """Write label_requests.csv/.parquet/.sdf and manifest.json atomically (manifest last).

    ``smiles`` (aligned with ``requests``, :func:`request_smiles`) gives the SD file one record per request
    (:func:`tmdlib.chem._sdf.requests_sdf`, largest clusters first, titled and tagged with the user's compound ids
    when the requests carry them); without it the SD file has no records, so
    the DVC output always exists.  Everything is rendered before the first write.
    """
    import pyarrow.csv as pacsv

    sdf = ""
    if smiles is not None:
        from tmdlib.chem._sdf import requests_table_sdf

        sdf = requests_table_sdf(smiles, requests)
    out = Path(out_dir)
    with io.atomic_path(out / "label_requests.csv") as tmp:
        pacsv.write_csv(requests, tmp)
    io.write_parquet(out / "label_requests.parquet", requests)
    io.write_text(out / REQUESTS_SDF, sdf)
    io.write_json(out / "manifest.json", io.stamped(manifest))
    return str(out)


def label_params(params_path: str | None, dataset: str) -> dict:
    """``labels:`` of params.yaml for one dataset (:func:`tmdlib.datasets.intake.label_rules`).

    Raises
    ------
    InputError
        An unreadable file, a mapping without this dataset, or a rule that is none of the stated ones.
    """
    import yaml

    params = {}
    if params_path:
        try:
            params = yaml.safe_load(Path(params_path).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as err:
            raise InputError(params_path, f"cannot read the parameters: {err}") from None
    return intake.label_rules(params, dataset, params_path)


#: Spreadsheet suffixes read through openpyxl.
XLSX = (".xlsx", ".xlsm")


def read_answer_sheet(source: str, sheet=None) -> tuple:
    """A lab's answer file as a text table ``(table, line_numbers or None, form)``: an SD file, a spreadsheet
    (``.xlsx``: the first sheet, or ``sheet``, a name or position; line = spreadsheet row) or a CSV whose delimiter
    (comma, semicolon, tab) is sniffed from its header."""
    suffix = Path(source).suffix.lower()
    if suffix in (".sdf", ".sd"):
        from tmdlib.chem.answers import read_sdf_answers

        table, lines = read_sdf_answers(source)
        return table, lines, "SD file"
    if suffix in XLSX:
        return (*_read_xlsx(source, sheet), f"spreadsheet{'' if sheet is None else f' (sheet {sheet!r})'}")
    delim = sniff_delimiter(source)
    form = {",": "CSV", ";": "CSV (semicolons)", "\t": "CSV (tabs)"}[delim]
    return io.read_text_csv(source, what="label file", delimiter=delim), None, form


def _read_xlsx(source: str, sheet=None) -> tuple:
    import pandas as pd

    from tmdlib.datasets.labsheet import frame_table

    if not Path(source).is_file():
        raise InputError(source, "label file not found")
    try:
        frame = pd.read_excel(source, sheet_name=0 if sheet is None else sheet, dtype=str, keep_default_na=False,
                              engine="openpyxl")
    except (ValueError, KeyError) as err:  # a sheet it does not have, a file that is no workbook
        raise InputError(source, f"cannot read the spreadsheet: {err}") from None
    except Exception as err:  # noqa: BLE001 - openpyxl's errors on a damaged file
        raise InputError(source, f"not a readable spreadsheet: {type(err).__name__}: {err}") from None
    return frame_table(frame)


@task(name="read-answers", persist_result=False)
def read_answer_file(source: str, store_path: str, requests_path: str, known: np.ndarray, targets,
                     sheet: dict | None = None) -> tuple:
    """A lab's answer file (CSV with any delimiter, ``.xlsx``, or SD file: ``.sdf`` / ``.sd``) as measurements
    ``(table, info)``: columns found however the lab named them and values by the stated rule
    (:func:`tmdlib.datasets.labsheet.normalize_answers`; ``sheet``: :func:`tmdlib.datasets.intake.sheet_params`),
    keys resolved against the requests (``source_id``) and the pool (``graph_id``, canonical ``smiles``); one error
    naming every offending line, nothing written."""
    from tmdlib.datasets.labels import answer_key, key_index, read_answers, source_index, wanted_keys
    from tmdlib.datasets.labsheet import normalize_answers
    from tmdlib.datasets._smiles import ID_COLUMN, canonical_smiles

    sheet = sheet or {}
    table, lines, form = read_answer_sheet(source, sheet.get("sheet"))
    table, how = normalize_answers(table, targets, columns=sheet.get("columns"), transform=sheet.get("transform",
                                   "none"), units=sheet.get("units"), path=source, line_numbers=lines)
    request_sources = pool = canonical = index = None
    key = answer_key(table.column_names)
    stored = pq.read_schema(store_path).names
    if key == "source_id":  # the requests' source ids, and the user's compound ids of the whole pool
        req = pq.read_table(requests_path, columns=["graph_id", "source_id"])
        ids = pq.read_table(store_path, columns=["graph_id", ID_COLUMN]) if ID_COLUMN in stored else None
        request_sources = source_index(req, wanted_keys(table, "source_id"), ids, ID_COLUMN)
    elif key == "smiles" and "smiles" in stored:
        canonical = functools.lru_cache(maxsize=None)(canonical_smiles)  # each lab SMILES parsed once
        keys = io.canonical_keys(store_path)
        if keys is not None:  # the key index written at ingest: only the lab's molecules are parsed
            gids = pq.read_table(store_path, columns=["graph_id"]).column("graph_id")
            index = key_index(keys, gids, wanted_keys(table, "smiles", canonical))
        else:  # a store from before the key index (or an OGB source): every pool molecule canonicalised
            t = pq.read_table(store_path, columns=["graph_id", "smiles"])
            pool = (t.column("graph_id").to_pylist(), t.column("smiles").to_pylist())
    m, info = read_answers(table, known, targets, request_sources=request_sources, pool_smiles=pool,
                           canonical=canonical, smiles_index=index, path=source, line_numbers=lines)
    return m, {**info, "sheet": {"form": form, **how}}


@task(name="resolve-labels", persist_result=False)
def resolve_import(new: pa.Table, history: pa.Table, ledger_meta: dict, store_task, requested: np.ndarray,
                   rules: intake.ImportRules) -> tuple:
    """The labels of the ledger plus a new import, by the stated rules (:func:`tmdlib.datasets.intake.resolve_labels`);
    ``(graph_ids, Y, task, report, added)``."""
    return intake.resolve_labels(new, history, ledger_meta, store_task, requested, rules)


IMPORT_JSON = "import.json"


@task(name="write-labels", persist_result=False)
def write_labels(out_dir: str, graph_ids: np.ndarray, y: np.ndarray, meta: dict, task=None,
                 measurements: pa.Table | None = None) -> str:
    """measurements.csv (this import's new measurements, for ``labels commit``), labels.csv
    (:func:`tmdlib.datasets.intake.labels_csv_text`), import.json and labels.json last
    (:func:`~tmdlib.datasets.intake.split_import_meta`), each atomically."""
    from tmdlib.datasets.ledger import ledger_text

    out = Path(out_dir)
    if measurements is not None:
        io.write_text(out / MEASUREMENTS, ledger_text(measurements))
    io.write_text(out / "labels.csv", intake.labels_csv_text(graph_ids, y, task))
    imported, labels = intake.split_import_meta(meta, len(graph_ids))
    io.write_json(out / IMPORT_JSON, imported)
    io.write_json(out / "labels.json", io.stamped(labels))
    return str(out)


def task_of(store_task, labels_meta=None):
    """The dataset's task for the stages after labels (train, evaluate): :func:`tmdlib.datasets.intake.labelled_task`
    of ``labels_meta`` -- ``labels.json``'s content (or ``train.json``'s ``labels_meta``), or the path of
    ``labels.json`` / ``labels.csv`` (its ``.json`` sibling is read)."""
    meta = labels_meta
    if isinstance(meta, (str, Path)):
        p = Path(meta).with_suffix(".json")
        meta = io.read_json(str(p), "labels metadata") if p.is_file() else {}
    return intake.labelled_task(store_task, meta, labels_meta if isinstance(labels_meta, (str, Path)) else None)
