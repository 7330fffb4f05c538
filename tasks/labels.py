"""Label hand-off tasks: export the label requests, import (or stand in for) the labels."""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from prefect import task

from tmdlib import InputError

from . import io
# the ledger lives in tasks/ledger.py; its names stay importable from here
from .ledger import (LEDGER_COLUMNS, LEDGER_MAGIC, MEASUREMENTS, RULE_DEFAULTS, _cell, _empty_history,  # noqa: F401
                     _rows, _same_measurement_key, _where, _with_origin, commit_labels, ledger_digest, ledger_task,
                     read_ledger,
                     read_ledger_history, read_measurements, write_ledger)

STANDIN = "benchmark-standin"


@task(name="label-requests", persist_result=False)
def build_requests(store_path: str, selection: dict, labelled: set | None = None):
    """Label-request table of a selection: graph_id, source id (SMILES for molecules), τ, rank.

    Medoids in ``labelled`` (graph ids already in the ledger) are left out: only graphs that still
    need a label are requested, ranked 1.. by cluster size.
    """
    import pyarrow.parquet as pq
    from tmdlib.datasets.labels import label_request_table

    cols = pq.read_schema(store_path).names
    table = pq.read_table(store_path, columns=["graph_id"] + (["smiles"] if "smiles" in cols else []))
    gids = table.column("graph_id").to_numpy()
    pos_of = {int(g): k for k, g in enumerate(gids)}
    medoids = np.array([pos_of[int(g)] for g in selection["medoids"]], dtype=np.int64)
    source = table.column("smiles").to_pylist() if "smiles" in cols else None
    full = label_request_table(gids, medoids, np.rint(selection["tau"]).astype(np.int64), source)
    if selection.get("audit_ids") is not None:  # an unlabelled pool: the audit sample is asked for too
        full = with_audit(full, gids, pos_of, selection["audit_ids"], source)
    keep = ~np.isin(full.column("graph_id").to_numpy(), np.array(sorted(labelled or ()), dtype=np.int64))
    requests = full.filter(pa.array(keep))
    requests = requests.set_column(3, "rank", pa.array(np.arange(1, requests.num_rows + 1), pa.int64()))
    from tmdlib.datasets.smiles import ID_COLUMN

    if ID_COLUMN in cols:  # the user's own compound ids travel with the requests
        of = dict(zip(gids.tolist(), pq.read_table(store_path, columns=[ID_COLUMN]).column(ID_COLUMN).to_pylist()))
        requests = requests.append_column(ID_COLUMN, pa.array([of[g] for g in requests.column("graph_id").to_pylist()],
                                                              pa.string()))
    return requests


def with_audit(requests: pa.Table, gids, pos_of: dict, audit_ids, source) -> pa.Table:
    """The coreset's requests followed by the audit sample's (τ 0: it stands for no cluster, it is never trained on),
    with a ``purpose`` column (``coreset`` | ``audit``)."""
    audit = np.asarray([int(g) for g in audit_ids], dtype=np.int64)
    src = [str(source[pos_of[int(g)]]) if source is not None else str(int(g)) for g in audit]
    extra = pa.table({"graph_id": pa.array(audit, pa.int64()), "source_id": pa.array(src, pa.string()),
                      "tau": pa.array(np.zeros(len(audit), np.int64), pa.int64()),
                      "rank": pa.array(np.arange(requests.num_rows + 1, requests.num_rows + len(audit) + 1), pa.int64())},
                     schema=requests.schema)
    out = pa.concat_tables([requests, extra])
    return out.append_column("purpose", pa.array(["coreset"] * requests.num_rows + ["audit"] * len(audit), pa.string()))


#: The SD file of the label requests, and what the manifest says of it when the dataset has no molecules.
REQUESTS_SDF = "label_requests.sdf"
NO_MOLECULES = "no molecules in this dataset"


def request_smiles(store_path: str, requests: pa.Table) -> list | None:
    """SMILES of the requested graphs in the order of ``requests`` (``None`` for a graph stored without one), or
    ``None`` when the graph store has no ``smiles`` column (TU graphs, PyG exports)."""
    import pyarrow.parquet as pq

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
    (:func:`tmdlib.chem.sdf.requests_sdf`, largest clusters first, titled and tagged with the user's compound ids
    when the requests carry them); without it the SD file has no records, so
    the DVC output always exists.  Everything is rendered before the first write.
    """
    import pyarrow.csv as pacsv

    sdf = ""
    if smiles is not None:
        from tmdlib.chem.sdf import requests_sdf

        col = lambda name: requests.column(name).to_pylist()  # noqa: E731
        from tmdlib.datasets.smiles import ID_COLUMN

        ids = col(ID_COLUMN) if ID_COLUMN in requests.column_names else None  # the user's compound ids, if any
        sdf = requests_sdf(smiles, col("graph_id"), col("tau"), col("rank"), col("source_id"), compound_ids=ids)
    out = Path(out_dir)
    with io.atomic_path(out / "label_requests.csv") as tmp:
        pacsv.write_csv(requests, tmp)
    io.write_parquet(out / "label_requests.parquet", requests)
    io.write_text(out / REQUESTS_SDF, sdf)
    io.write_json(out / "manifest.json", io.stamped(manifest))
    return str(out)


def read_label_file(path: str) -> pa.Table:
    """Read a user's ``graph_id,label`` CSV with every cell as text (validation parses them)."""
    return io.read_text_csv(path, what="label file")


def label_params(params_path: str | None, dataset: str) -> dict:
    """``labels:`` of params.yaml for one dataset: ``source`` (a path, ``benchmark-standin``, or a mapping
    ``{DATASET: path}`` resolved here), ``replicates``, ``censored``, ``max_spread``; and ``task`` (``base.task``).

    Raises
    ------
    InputError
        An unreadable file, a mapping without this dataset, or a rule that is none of the stated ones.
    """
    import yaml

    from tmdlib.datasets.labels import CENSORED_RULES, REPLICATE_RULES

    out = dict(RULE_DEFAULTS, source=None, task="auto", sheet=sheet_params({}), name="auto")
    if not params_path:
        return out
    try:
        params = yaml.safe_load(Path(params_path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as err:
        raise InputError(params_path, f"cannot read the parameters: {err}") from None
    group = params.get("labels") or {}
    out["task"] = str((params.get("base") or {}).get("task") or "auto")
    src = group.get("source")
    if isinstance(src, dict):
        if dataset not in src:
            raise InputError(params_path, f"labels.source maps {', '.join(map(str, src)) or 'no dataset'} to their "
                                          f"answer files, not {dataset}: add `{dataset}: path/to/answers.csv` (or "
                                          f"{STANDIN})")
        src = src[dataset]
    out["source"] = None if src is None else str(src)
    for key, allowed in (("replicates", REPLICATE_RULES), ("censored", CENSORED_RULES)):
        v = group.get(key, out[key])
        if v not in allowed:
            raise InputError(params_path, f"labels.{key} must be one of {', '.join(allowed)}; got {v!r}")
        out[key] = v
    spread = group.get("max_spread", out["max_spread"])
    if isinstance(spread, bool) or not isinstance(spread, (int, float)) or not spread >= 0:
        raise InputError(params_path, f"labels.max_spread must be a number >= 0; got {spread!r}")
    out["max_spread"] = float(spread)
    out["sheet"] = sheet_params(group, params_path)
    out["name"] = property_param(group, params_path)
    return out


def property_param(group: dict, params_path=None) -> str:
    """``labels.name``: ``auto`` (the answer's value column, ``pIC50`` after ``labels.transform: p``:
    :func:`tmdlib.datasets.labsheet.property_name`) or the property's own name, checked."""
    name = group.get("name", "auto")
    if name is None:
        return "auto"
    if not isinstance(name, str) or not name.strip() or any(c in name for c in ",\n\r\""):
        raise InputError(params_path, f"labels.name is auto or the property's name (pIC50, solubility, ...), "
                                      f"without commas or quotes; got {name!r}")
    return name.strip()


def property_of(setting: str, task, sheet: dict | None = None) -> str | None:
    """The property the labels measure, as the predictions, the report and the registered model name it.

    ``setting``: ``labels.name`` (:func:`property_param`); ``auto`` takes the answer sheet's value column
    (``sheet``: the import's ``sheet`` record, its ``name``), else (the benchmark stand-in) the task's target.  A task
    with several targets has none: each target's column names it.
    """
    if task.num_targets != 1:
        if setting != "auto":
            raise InputError(None, f"labels.name names one property; these labels have {task.num_targets} targets "
                                   f"({', '.join(task.targets)}): their columns name them")
        return None
    if setting != "auto":
        return setting
    return (sheet or {}).get("name") or task.targets[0]


def sheet_params(group: dict, params_path=None) -> dict:
    """How the lab's sheet is read (``labels.columns``, ``transform``, ``units``, ``sheet``), checked."""
    from tmdlib.datasets.labsheet import COLUMN_ROLES, TRANSFORMS, molar_factor

    cols = group.get("columns") or {}
    if not isinstance(cols, dict) or set(cols) - set(COLUMN_ROLES) or not all(
            v is None or isinstance(v, str) or (k == "value" and isinstance(v, list)) for k, v in cols.items()):
        raise InputError(params_path, f"labels.columns maps {', '.join(COLUMN_ROLES)} to column names; got {cols!r}")
    transform = str(group.get("transform") or "none")
    if transform not in TRANSFORMS:
        raise InputError(params_path, f"labels.transform must be one of {', '.join(TRANSFORMS)}; got {transform!r}")
    units = group.get("units")
    if units is not None and molar_factor(units) is None:
        raise InputError(params_path, f"labels.units must be a concentration unit (M, mM, uM, nM, pM); got {units!r}")
    sheet = group.get("sheet")
    if sheet is not None and (isinstance(sheet, bool) or not isinstance(sheet, (str, int))):
        raise InputError(params_path, f"labels.sheet is a sheet's name or its position (0 = the first); got {sheet!r}")
    return {"columns": {k: v for k, v in cols.items() if v}, "transform": transform,
            "units": None if units is None else str(units), "sheet": sheet}


def no_labels_message(dataset: str) -> str:
    """What to do when the benchmark stand-in meets a pool without labels (the labels stage's one message)."""
    return (f"{dataset} is a pool without labels: the benchmark stand-in has nothing to join.  Send "
            f"data/labels/{dataset}/label_requests.csv (or .sdf) to your lab, then set labels.source in params.yaml "
            f"to their answer file (or {{{dataset}: path/to/answers.csv}} per dataset) and run `dvc repro` again "
            f"(or run `tmdsub labels import {dataset} FILE`)")


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
    delim = io.sniff_delimiter(source)
    form = {",": "CSV", ";": "CSV (semicolons)", "\t": "CSV (tabs)"}[delim]
    return io.read_text_csv(source, what="label file", delimiter=delim), None, form


def _read_xlsx(source: str, sheet=None) -> tuple:
    import pandas as pd

    if not Path(source).is_file():
        raise InputError(source, "label file not found")
    try:
        frame = pd.read_excel(source, sheet_name=0 if sheet is None else sheet, dtype=str, keep_default_na=False,
                              engine="openpyxl")
    except (ValueError, KeyError) as err:  # a sheet it does not have, a file that is no workbook
        raise InputError(source, f"cannot read the spreadsheet: {err}") from None
    except Exception as err:  # noqa: BLE001 - openpyxl's errors on a damaged file
        raise InputError(source, f"not a readable spreadsheet: {type(err).__name__}: {err}") from None
    # a column without a header and without a value (a formatted but empty column) is no column
    frame = frame[[c for c in frame.columns if not str(c).startswith("Unnamed: ") or frame[c].str.strip().any()]]
    names = [str(c) for c in frame.columns]
    cols = {n: pa.array(["" if v is None else str(v) for v in frame[c].tolist()], pa.string())
            for n, c in zip(names, frame.columns)}
    return pa.table(cols), np.arange(2, len(frame) + 2)


@task(name="read-answers", persist_result=False)
def read_answer_file(source: str, store_path: str, requests_path: str, known: np.ndarray, targets,
                     sheet: dict | None = None) -> tuple:
    """A lab's answer file (CSV with any delimiter, ``.xlsx``, or SD file: ``.sdf`` / ``.sd``) as measurements
    ``(table, info)``: columns found however the lab named them and values by the stated rule
    (:func:`tmdlib.datasets.labsheet.normalize_answers`; ``sheet``: :func:`sheet_params`), keys resolved against
    the requests (``source_id``) and the pool (``graph_id``, canonical ``smiles``); one error naming every
    offending line, nothing written."""
    import pyarrow.parquet as pq

    from tmdlib.datasets.labels import read_answers
    from tmdlib.datasets.labsheet import normalize_answers

    sheet = sheet or {}
    table, lines, form = read_answer_sheet(source, sheet.get("sheet"))
    table, how = normalize_answers(table, targets, columns=sheet.get("columns"), transform=sheet.get("transform",
                                   "none"), units=sheet.get("units"), path=source, line_numbers=lines)
    names = table.column_names
    request_sources = pool = canonical = index = None
    key = next((k for k in ("graph_id", "source_id", "smiles") if k in names), None)
    stored = pq.read_schema(store_path).names
    if key == "source_id":  # the requests' source ids, and the user's compound ids of the whole pool
        from tmdlib.datasets.labels import key_index
        from tmdlib.datasets.smiles import ID_COLUMN

        wanted = {str(k).strip() for k in table.column("source_id").to_pylist() if k is not None}
        req = pq.read_table(requests_path, columns=["graph_id", "source_id"])
        request_sources = key_index(pc.utf8_trim_whitespace(req.column("source_id").cast(pa.string())),
                                    req.column("graph_id"), wanted)
        if ID_COLUMN in stored:  # the pool's ids filtered to the lab's (vectorised): no loop over the pool
            t = pq.read_table(store_path, columns=["graph_id", ID_COLUMN])
            for k, gids in key_index(t.column(ID_COLUMN), t.column("graph_id"), wanted).items():
                hits = request_sources.setdefault(k, [])
                hits.extend(g for g in gids if g not in hits)
    elif key == "smiles" and "smiles" in stored:
        from tmdlib.datasets.labels import key_index
        from tmdlib.datasets.smiles import canonical_smiles

        canonical = functools.lru_cache(maxsize=None)(canonical_smiles)  # each lab SMILES parsed once
        keys = io.canonical_keys(store_path)
        if keys is not None:  # the key index written at ingest: only the lab's molecules are parsed
            wanted = {canonical(str(s).strip()) for s in table.column("smiles").to_pylist() if s}
            gids = pq.read_table(store_path, columns=["graph_id"]).column("graph_id")
            index = key_index(keys, gids, wanted - {None})
        else:  # a store from before the key index (or an OGB source): every pool molecule canonicalised
            t = pq.read_table(store_path, columns=["graph_id", "smiles"])
            pool = (t.column("graph_id").to_pylist(), t.column("smiles").to_pylist())
    m, info = read_answers(table, known, targets, request_sources=request_sources, pool_smiles=pool,
                           canonical=canonical, smiles_index=index, path=source, line_numbers=lines)
    return m, {**info, "sheet": {"form": form, **how}}


def standin_measurements(requested: np.ndarray, known: np.ndarray, dataset_y, task, dataset: str = "the pool"):
    """The flagged benchmark stand-in: the dataset's own labels of the requested graphs, as measurements."""
    from tmdlib.datasets.labels import MEASUREMENT_SCHEMA

    if dataset_y is None or not np.isfinite(np.asarray(dataset_y, dtype=np.float64)).any() or not task.decided:
        raise InputError(None, no_labels_message(dataset))
    pos = np.searchsorted(known, requested)
    Y = _rows(np.asarray(dataset_y, dtype=np.float64)[pos], len(requested), task)
    Y = task.decode_labels(Y)  # multi-class: the store holds class indices
    rows = {k: [] for k in MEASUREMENT_SCHEMA.names}
    for g, row in zip(requested, Y):
        for t, v in zip(task.targets, row):
            if np.isfinite(v):
                for k, x in (("graph_id", int(g)), ("target", t), ("value", float(v)), ("qualifier", ""),
                             ("note", ""), ("line", 0)):
                    rows[k].append(x)
    return pa.table(rows, schema=MEASUREMENT_SCHEMA)


@task(name="resolve-labels", persist_result=False)
def resolve_import(new: pa.Table, history: pa.Table, ledger_meta: dict, store_task, requested: np.ndarray, *,
                   source: str, sha256: str, override: str = "auto", replicates: str = "mean",
                   censored: str = "drop", max_spread: float = 1.0, purposes: dict | None = None) -> tuple:
    """The labels of the ledger plus a new import, by the stated rules; ``(graph_ids, Y, task, report, added)``.

    * already there: a file imported before (same sha256), or a value the ledger holds for the same graph and
      target (qualifier included), is not a new measurement;
    * the task: the store's when decided, else the ledger's, else fixed now from the values (``override``:
      ``auto`` or a type);
    * censored values (``censored``), then replicates and conflicts across rounds (``replicates``,
      ``max_spread``): :func:`tmdlib.datasets.labels.apply_censored`, :func:`~.aggregate_measurements`;
    * partial answers: the requested graphs without a label are counted and listed (they stay requested).
    """
    from tmdlib.datasets.labels import aggregate_measurements, apply_censored
    from tmdlib.datasets.task import TaskSpec, decide_task

    rnd = (max(history.column("round").to_pylist()) if history.num_rows else 0) + 1
    notes = {}
    vals = np.asarray(new.column("value"), dtype=np.float64)
    for g, note in zip(new.column("graph_id").to_pylist(), new.column("note").to_pylist()):
        if note:
            notes.setdefault(note, []).append(int(g))
    new = new.filter(pa.array(np.isfinite(vals)))
    old_files = set(history.column("sha256").to_pylist()) - {""}
    same = _same_measurement_key(history)
    fresh = [sha256 not in old_files and (g, t, v, q) not in same for g, t, v, q in
             zip(*(new.column(c).to_pylist() for c in ("graph_id", "target", "value", "qualifier")))]
    already = int(len(fresh) - sum(fresh))
    new = _with_origin(new.filter(pa.array(fresh, pa.bool_())), rnd, source, sha256)
    everything = pa.concat_tables([history, new])
    # the task: decided already, or fixed by these labels (values read as written; censored ones under the rule)
    ledger_spec = TaskSpec.from_dict(ledger_meta["task"]) if ledger_meta.get("task") else None
    current = store_task if store_task.decided else (ledger_spec or store_task)
    if store_task.decided and ledger_spec is not None and ledger_spec != store_task:
        raise InputError(None, f"the label ledger's task ({ledger_spec.describe()}) is not the dataset's "
                               f"({store_task.describe()})")
    where = _where(everything, source, rnd)
    kept, cens = apply_censored(everything, censored, path=source, where=where)
    k_tgt = kept.column("target").to_pylist()
    targets = current.targets
    if not current.decided and set(k_tgt) - set(targets):
        targets = tuple(dict.fromkeys(k_tgt))
    kv = np.full((kept.num_rows, len(targets)), np.nan)
    for r, (t, v) in enumerate(zip(k_tgt, kept.column("value").to_pylist())):
        kv[r, targets.index(t)] = v
    lines = np.asarray(kept.column("line"), dtype=np.int64)
    decided_now = not current.decided
    try:
        spec = decide_task(kv, targets, override, current=current, path=source, lines=lines)
    except InputError as err:
        if decided_now or current.source == "import":
            raise InputError(source, f"{err.problem} (the task was {'fixed by the first label import' if not decided_now else 'inferred from these labels'}; "
                                     "set base.task or --task to choose it)", line=err.line) from None
        raise
    ids, Y, info = aggregate_measurements(kept, spec, replicates, max_spread, path=source, where=_where(kept, source, rnd))
    labelled = set(ids[~np.isnan(Y).all(axis=1)].tolist())
    missing = [int(g) for g in requested if int(g) not in labelled]
    new_ids = set(new.column("graph_id").to_pylist())
    req = {int(g) for g in requested}
    unrequested = sorted(g for g in new_ids if g not in req)
    report = {
        "task": spec.to_dict(), "task_decided": "now" if decided_now else (
            "ingest" if store_task.decided else "earlier import (the ledger)"),
        "rules": {"replicates": replicates, "censored": censored, "max_spread": float(max_spread)},
        "round": rnd, "new_measurements": int(new.num_rows), "already_in_ledger": already,
        "ledger_measurements": int(history.num_rows),
        "requested": int(len(requested)), "answered": int(len(requested) - len(missing)),
        "missing": len(missing), "missing_ids": missing[:200],
        "unrequested": len(unrequested), "unrequested_ids": unrequested[:200],
        "notes": {k: {"count": len(v), "graph_ids": sorted(set(v))[:50]} for k, v in sorted(notes.items())},
        "censored": cens, "replicates": {"rule": replicates, "graphs": info["replicated"],
                                         "flagged": info["flagged"], "max_spread": float(max_spread)},
        "conflicts": info["conflicts"],
    }
    if decided_now:
        from tmdlib.datasets.task import task_reason

        report["task_reason"] = task_reason(kv, spec)
    if purposes:
        report["missing_by_purpose"] = {p: sum(1 for g in missing if purposes.get(g) == p)
                                        for p in sorted(set(purposes.values()))}
    return ids, Y, spec, report, new


#: Keys of an import's report that describe the import, not the labels: written to import.json, not labels.json.
IMPORT_KEYS = ("round", "new_measurements", "already_in_ledger", "ledger_measurements", "task_decided", "requested",
               "answered", "missing", "missing_ids", "missing_by_purpose", "unrequested", "unrequested_ids",
               "answer_rows", "sheet", "copies", "task_reason")
IMPORT_JSON = "import.json"


@task(name="write-labels", persist_result=False)
def write_labels(out_dir: str, graph_ids: np.ndarray, y: np.ndarray, meta: dict, task=None,
                 measurements: pa.Table | None = None) -> str:
    """measurements.csv (this import's new measurements, for ``labels commit``), labels.csv (``graph_id,y``, or one
    column per target; empty = not measured) and labels.json last, each atomically."""
    import csv
    import io as _io

    out = Path(out_dir)
    if measurements is not None:
        buf = _io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(LEDGER_COLUMNS)
        for row in zip(*(measurements.column(c).to_pylist() for c in LEDGER_COLUMNS)):
            w.writerow([row[0], row[1], repr(float(row[2])), *row[3:]])
        io.write_text(out / MEASUREMENTS, buf.getvalue())
    Y = _rows(y, len(graph_ids), task)
    head = ["y"] if task is None or task.num_targets == 1 else list(task.targets)
    lines = [",".join(["graph_id", *head])] + [f"{int(g)},{','.join(_cell(v) for v in row)}"
                                               for g, row in zip(graph_ids, Y)]
    io.write_text(out / "labels.csv", "\n".join(lines) + "\n")
    # the import's bookkeeping (its round, what the ledger held) in import.json: labels.json changes only when the
    # labels do, so a `labels commit` that changes no label retrains nothing
    io.write_json(out / IMPORT_JSON, {k: meta[k] for k in IMPORT_KEYS if k in meta})
    io.write_json(out / "labels.json", io.stamped({**{k: v for k, v in meta.items() if k not in IMPORT_KEYS},
                                                   "labelled": int(len(graph_ids))}))
    return str(out)


def property_from(labels_meta: dict | None, task) -> str | None:
    """The property a trained model predicts: ``labels.json``'s ``name`` (``train.json``'s ``labels_meta``), else
    (labels imported before it was recorded) the task's one target; None for several targets."""
    name = (labels_meta or {}).get("name")
    return name or (task.targets[0] if task.num_targets == 1 else None)


def task_of(store_task, labels_meta=None):
    """The dataset's task for the stages after labels (train, evaluate): the store's when ingest decided it,
    else the one the first label import fixed (``labels.json``'s ``task``).

    Parameters
    ----------
    store_task : TaskSpec
        :func:`tasks.graphs.store_task`.
    labels_meta : dict or path, optional
        ``labels.json``'s content (or ``train.json``'s ``labels_meta``), or the path of ``labels.json`` /
        ``labels.csv`` (its ``.json`` sibling is read).

    Raises
    ------
    InputError
        A pool without labels whose label set records no task (import the lab's labels first).
    """
    from tmdlib.datasets.task import TaskSpec

    meta = labels_meta
    if isinstance(meta, (str, Path)):
        p = Path(meta).with_suffix(".json")
        meta = io.read_json(str(p), "labels metadata") if p.is_file() else {}
    meta = meta or {}
    if store_task.decided:
        return store_task
    if meta.get("task"):
        return TaskSpec.from_dict(meta["task"])
    raise InputError(labels_meta if isinstance(labels_meta, (str, Path)) else None,
                     "the pool was stored without labels and no label import has fixed its task yet: import the "
                     "lab's labels first (`tmdsub labels import DATASET FILE`, or labels.source)")
