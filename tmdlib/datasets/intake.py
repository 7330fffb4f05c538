"""Label intake rules: what ``labels:`` of params.yaml may say, which graphs a round requests, the benchmark's
flagged stand-in, and how an import's measurements join the ledger's into labels.

Pure functions on dicts and Arrow tables (no files): :mod:`tasks.labels` reads the parameters, the store, the
answer file and the ledger, calls these, and writes the labels.  Measurements and histories are the tables of
:mod:`tmdlib.datasets.ledger`.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from .._errors import InputError
from .labels import CENSORED_RULES, MEASUREMENT_SCHEMA, REPLICATE_RULES, label_request_table
from .ledger import RULE_DEFAULTS, cell, next_round, rows_matrix, same_measurement_key, where_namer, with_origin

#: ``labels.source`` that joins the dataset's own labels (flagged) instead of a lab's answers.
STANDIN = "benchmark-standin"
#: Keys of an import's report that describe the import, not the labels: written to import.json, not labels.json.
IMPORT_KEYS = ("round", "new_measurements", "already_in_ledger", "ledger_measurements", "task_decided", "requested",
               "answered", "missing", "missing_ids", "missing_by_purpose", "unrequested", "unrequested_ids",
               "answer_rows", "sheet", "copies", "task_reason")


# ----------------------------------------------------------------------------------------------
# labels: of params.yaml
# ----------------------------------------------------------------------------------------------
def label_rules(params: dict, dataset: str, params_path=None) -> dict:
    """``labels:`` of params.yaml for one dataset, checked.

    Parameters
    ----------
    params : dict
        params.yaml's content (``{}`` when there is none).
    dataset : str
        The dataset whose ``labels.source`` is wanted (a mapping ``{DATASET: path}`` is resolved here).
    params_path : str, optional
        Named in errors.

    Returns
    -------
    dict
        ``source`` (a path, ``benchmark-standin`` or None), ``replicates``, ``censored``, ``max_spread``, ``task``
        (``base.task``), ``sheet`` (:func:`sheet_params`) and ``name`` (:func:`property_param`).

    Raises
    ------
    InputError
        A mapping without this dataset, or a rule that is none of the stated ones.
    """
    out = dict(RULE_DEFAULTS, source=None, task="auto", sheet=sheet_params({}), name="auto")
    if not params_path:
        return out
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


def sheet_params(group: dict, params_path=None) -> dict:
    """How the lab's sheet is read (``labels.columns``, ``transform``, ``units``, ``sheet``), checked."""
    from .labsheet import COLUMN_ROLES, TRANSFORMS, molar_factor

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


# ----------------------------------------------------------------------------------------------
# The property and the task the labels fix
# ----------------------------------------------------------------------------------------------
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


def property_from(labels_meta: dict | None, task) -> str | None:
    """The property a trained model predicts: ``labels.json``'s ``name`` (``train.json``'s ``labels_meta``), else
    (labels imported before it was recorded) the task's one target; None for several targets."""
    name = (labels_meta or {}).get("name")
    return name or (task.targets[0] if task.num_targets == 1 else None)


def labelled_task(store_task, labels_meta: dict | None, where=None):
    """The dataset's task for the stages after labels: the store's when ingest decided it, else the one the first
    label import fixed (``labels_meta``: ``labels.json``'s content, its ``task``).

    Raises
    ------
    InputError
        A pool without labels whose label set records no task (``where`` named).
    """
    from ._task import TaskSpec

    meta = labels_meta or {}
    if store_task.decided:
        return store_task
    if meta.get("task"):
        return TaskSpec.from_dict(meta["task"])
    raise InputError(where, "the pool was stored without labels and no label import has fixed its task yet: import "
                            "the lab's labels first (`tmdsub labels import DATASET FILE`, or labels.source)")


# ----------------------------------------------------------------------------------------------
# Requests
# ----------------------------------------------------------------------------------------------
def label_requests(graph_ids, selection: dict, source=None, labelled=None, compound_ids=None) -> pa.Table:
    """The label-request table of a selection: ``graph_id, source_id, tau, rank`` (and ``purpose`` with an audit
    sample, the user's compound ids when given).

    Parameters
    ----------
    graph_ids : array_like of int, shape (n,)
        The store's graph ids, in its order.
    selection : dict
        ``medoids`` (graph ids), ``tau`` (cluster sizes), optional ``audit_ids`` (an unlabelled pool's audit sample,
        asked for too: :func:`with_audit`).
    source : list of str, optional
        Per store row, the source id (SMILES for molecules); default the graph id.
    labelled : set of int, optional
        Graph ids already in the ledger: left out, so only graphs that still need a label are requested, ranked 1..
        by cluster size.
    compound_ids : list of str, optional
        Per store row, the user's compound id (column :data:`tmdlib.datasets._smiles.ID_COLUMN` appended).
    """
    gids = np.asarray(graph_ids)
    pos_of = {int(g): k for k, g in enumerate(gids)}
    medoids = np.array([pos_of[int(g)] for g in selection["medoids"]], dtype=np.int64)
    full = label_request_table(gids, medoids, np.rint(selection["tau"]).astype(np.int64), source)
    if selection.get("audit_ids") is not None:  # an unlabelled pool: the audit sample is asked for too
        full = with_audit(full, pos_of, selection["audit_ids"], source)
    keep = ~np.isin(full.column("graph_id").to_numpy(), np.array(sorted(labelled or ()), dtype=np.int64))
    requests = full.filter(pa.array(keep))
    requests = requests.set_column(3, "rank", pa.array(np.arange(1, requests.num_rows + 1), pa.int64()))
    if compound_ids is not None:  # the user's own compound ids travel with the requests
        from ._smiles import ID_COLUMN

        of = dict(zip(gids.tolist(), compound_ids))
        requests = requests.append_column(ID_COLUMN, pa.array([of[g] for g in requests.column("graph_id").to_pylist()],
                                                              pa.string()))
    return requests


def with_audit(requests: pa.Table, pos_of: dict, audit_ids, source) -> pa.Table:
    """The coreset's requests followed by the audit sample's (τ 0: it stands for no cluster, it is never trained on),
    with a ``purpose`` column (``coreset`` | ``audit``); ``pos_of`` maps a graph id to its store row."""
    audit = np.asarray([int(g) for g in audit_ids], dtype=np.int64)
    src = [str(source[pos_of[int(g)]]) if source is not None else str(int(g)) for g in audit]
    first = requests.num_rows + 1
    extra = pa.table({"graph_id": pa.array(audit, pa.int64()), "source_id": pa.array(src, pa.string()),
                      "tau": pa.array(np.zeros(len(audit), np.int64), pa.int64()),
                      "rank": pa.array(np.arange(first, first + len(audit)), pa.int64())}, schema=requests.schema)
    out = pa.concat_tables([requests, extra])
    return out.append_column("purpose", pa.array(["coreset"] * requests.num_rows + ["audit"] * len(audit), pa.string()))


# ----------------------------------------------------------------------------------------------
# The benchmark stand-in
# ----------------------------------------------------------------------------------------------
def no_labels_message(dataset: str) -> str:
    """What to do when the benchmark stand-in meets a pool without labels (the labels stage's one message)."""
    return (f"{dataset} is a pool without labels: the benchmark stand-in has nothing to join.  Send "
            f"data/labels/{dataset}/label_requests.csv (or .sdf) to your lab, then set labels.source in params.yaml "
            f"to their answer file (or {{{dataset}: path/to/answers.csv}} per dataset) and run `dvc repro` again "
            f"(or run `tmdsub labels import {dataset} FILE`)")


def standin_measurements(requested: np.ndarray, known: np.ndarray, dataset_y, task, dataset: str = "the pool"):
    """The flagged benchmark stand-in: the dataset's own labels of the requested graphs, as measurements.

    ``known``: the pool's graph ids, sorted; ``dataset_y``: their labels in that order (``(n,)`` or ``(n, T)``,
    NaN = none; class indices for a multi-class task).  Returns a :data:`~tmdlib.datasets.labels.MEASUREMENT_SCHEMA`
    table, one row per finite label.
    """
    if dataset_y is None or not np.isfinite(np.asarray(dataset_y, dtype=np.float64)).any() or not task.decided:
        raise InputError(None, no_labels_message(dataset))
    pos = np.searchsorted(known, requested)
    Y = rows_matrix(np.asarray(dataset_y, dtype=np.float64)[pos], len(requested), task)
    Y = task.decode_labels(Y)  # multi-class: the store holds class indices
    rows = {k: [] for k in MEASUREMENT_SCHEMA.names}
    for g, row in zip(requested, Y):
        for t, v in zip(task.targets, row):
            if np.isfinite(v):
                for k, x in (("graph_id", int(g)), ("target", t), ("value", float(v)), ("qualifier", ""),
                             ("note", ""), ("line", 0)):
                    rows[k].append(x)
    return pa.table(rows, schema=MEASUREMENT_SCHEMA)


# ----------------------------------------------------------------------------------------------
# An import joined to the ledger
# ----------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ImportRules:
    """What an import is and the rules it is read by.

    Attributes
    ----------
    source, sha256 : str
        The answer file (or :data:`STANDIN`) and its sha256 (``""`` for the stand-in).
    override : str
        ``auto`` or a task type, for a pool whose task is not decided yet.
    replicates, censored : str
        :data:`~tmdlib.datasets.labels.REPLICATE_RULES`, :data:`~tmdlib.datasets.labels.CENSORED_RULES`.
    max_spread : float
        Replicates further apart are flagged.
    purposes : dict, optional
        ``{graph_id: "coreset" | "audit"}`` of the requests.
    """

    source: str
    sha256: str
    override: str = "auto"
    replicates: str = "mean"
    censored: str = "drop"
    max_spread: float = 1.0
    purposes: dict | None = None


def fresh_measurements(new: pa.Table, history: pa.Table, rules: ImportRules, rnd: int) -> tuple:
    """The finite measurements of ``new`` the ledger does not hold yet (a file imported before -- same sha256 --, or
    the same graph, target, value and qualifier), with their origin; ``(fresh, already, notes)``, ``notes``
    ``{note: [graph ids]}`` of the answers that carried one."""
    notes = {}
    vals = np.asarray(new.column("value"), dtype=np.float64)
    for g, note in zip(new.column("graph_id").to_pylist(), new.column("note").to_pylist()):
        if note:
            notes.setdefault(note, []).append(int(g))
    new = new.filter(pa.array(np.isfinite(vals)))
    old_files = set(history.column("sha256").to_pylist()) - {""}
    same = same_measurement_key(history)
    fresh = [rules.sha256 not in old_files and (g, t, v, q) not in same for g, t, v, q in
             zip(*(new.column(c).to_pylist() for c in ("graph_id", "target", "value", "qualifier")))]
    already = int(len(fresh) - sum(fresh))
    return with_origin(new.filter(pa.array(fresh, pa.bool_())), rnd, rules.source, rules.sha256), already, notes


def _current_task(ledger_meta: dict, store_task):
    from ._task import TaskSpec

    ledger_spec = TaskSpec.from_dict(ledger_meta["task"]) if ledger_meta.get("task") else None
    if store_task.decided and ledger_spec is not None and ledger_spec != store_task:
        raise InputError(None, f"the label ledger's task ({ledger_spec.describe()}) is not the dataset's "
                               f"({store_task.describe()})")
    return store_task if store_task.decided else (ledger_spec or store_task)


def _decide(kept: pa.Table, current, rules: ImportRules) -> tuple:
    """The task of the kept measurements: ``current`` when decided, else fixed by their values; ``(spec, kv)``,
    ``kv`` the values ``(rows, targets)``."""
    from ._task import decide_task

    k_tgt = kept.column("target").to_pylist()
    targets = current.targets
    if not current.decided and set(k_tgt) - set(targets):
        targets = tuple(dict.fromkeys(k_tgt))
    kv = np.full((kept.num_rows, len(targets)), np.nan)
    for r, (t, v) in enumerate(zip(k_tgt, kept.column("value").to_pylist())):
        kv[r, targets.index(t)] = v
    lines = np.asarray(kept.column("line"), dtype=np.int64)
    try:
        return decide_task(kv, targets, rules.override, current=current, path=rules.source, lines=lines), kv
    except InputError as err:
        if not current.decided or current.source == "import":
            how = 'fixed by the first label import' if current.decided else 'inferred from these labels'
            raise InputError(rules.source, f"{err.problem} (the task was {how}; "
                                           "set base.task or --task to choose it)", line=err.line) from None
        raise


def resolve_labels(new: pa.Table, history: pa.Table, ledger_meta: dict, store_task, requested,
                   rules: ImportRules) -> tuple:
    """The labels of the ledger plus a new import, by the stated rules; ``(graph_ids, Y, task, report, added)``.

    * already there: a file imported before (same sha256), or a value the ledger holds for the same graph and
      target (qualifier included), is not a new measurement (:func:`fresh_measurements`);
    * the task: the store's when decided, else the ledger's, else fixed now from the values (``rules.override``:
      ``auto`` or a type);
    * censored values (``censored``), then replicates and conflicts across rounds (``replicates``,
      ``max_spread``): :func:`tmdlib.datasets.labels.apply_censored`, :func:`~.aggregate_measurements`;
    * partial answers: the requested graphs without a label are counted and listed (they stay requested).

    Parameters
    ----------
    new : pyarrow.Table
        This import's measurements (:data:`~tmdlib.datasets.labels.MEASUREMENT_SCHEMA`).
    history : pyarrow.Table
        The ledger's (:mod:`tmdlib.datasets.ledger`), ``ledger_meta`` what its seal records.
    store_task : TaskSpec
        The store's task (decided at ingest, or not).
    requested : array_like of int
        The graph ids this round requested.
    rules : ImportRules
    """
    from .labels import aggregate_measurements, apply_censored

    rnd = next_round(history)
    new, already, notes = fresh_measurements(new, history, rules, rnd)
    everything = pa.concat_tables([history, new])
    # the task: decided already, or fixed by these labels (values read as written; censored ones under the rule)
    current = _current_task(ledger_meta, store_task)
    kept, cens = apply_censored(everything, rules.censored, path=rules.source,
                                where=where_namer(everything, rules.source, rnd))
    spec, kv = _decide(kept, current, rules)
    ids, Y, info = aggregate_measurements(kept, spec, rules.replicates, rules.max_spread, path=rules.source,
                                          where=where_namer(kept, rules.source, rnd))
    labelled = set(ids[~np.isnan(Y).all(axis=1)].tolist())
    missing = [int(g) for g in requested if int(g) not in labelled]
    req = {int(g) for g in requested}
    unrequested = sorted(g for g in set(new.column("graph_id").to_pylist()) if g not in req)
    report = {
        "task": spec.to_dict(), "task_decided": "now" if not current.decided else (
            "ingest" if store_task.decided else "earlier import (the ledger)"),
        "rules": {"replicates": rules.replicates, "censored": rules.censored, "max_spread": float(rules.max_spread)},
        "round": rnd, "new_measurements": int(new.num_rows), "already_in_ledger": already,
        "ledger_measurements": int(history.num_rows),
        "requested": int(len(requested)), "answered": int(len(requested) - len(missing)),
        "missing": len(missing), "missing_ids": missing[:200],
        "unrequested": len(unrequested), "unrequested_ids": unrequested[:200],
        "notes": {k: {"count": len(v), "graph_ids": sorted(set(v))[:50]} for k, v in sorted(notes.items())},
        "censored": cens, "replicates": {"rule": rules.replicates, "graphs": info["replicated"],
                                         "flagged": info["flagged"], "max_spread": float(rules.max_spread)},
        "conflicts": info["conflicts"],
    }
    if not current.decided:
        from ._task import task_reason

        report["task_reason"] = task_reason(kv, spec)
    if rules.purposes:
        report["missing_by_purpose"] = {p: sum(1 for g in missing if rules.purposes.get(g) == p)
                                        for p in sorted(set(rules.purposes.values()))}
    return ids, Y, spec, report, new


def labels_csv_text(graph_ids, y, task=None) -> str:
    """labels.csv: ``graph_id,y`` (or one column per target), one row per graph; an empty cell is not measured."""
    Y = rows_matrix(y, len(graph_ids), task)
    head = ["y"] if task is None or task.num_targets == 1 else list(task.targets)
    lines = [",".join(["graph_id", *head])] + [f"{int(g)},{','.join(cell(v) for v in row)}"
                                               for g, row in zip(graph_ids, Y)]
    return "\n".join(lines) + "\n"


def split_import_meta(meta: dict, labelled: int) -> tuple[dict, dict]:
    """``(import.json, labels.json)`` of an import's record: the import's bookkeeping (:data:`IMPORT_KEYS`: its
    round, what the ledger held) apart, so labels.json changes only when the labels do (a ``labels commit`` that
    changes no label retrains nothing)."""
    return ({k: meta[k] for k in IMPORT_KEYS if k in meta},
            {**{k: v for k, v in meta.items() if k not in IMPORT_KEYS}, "labelled": int(labelled)})
