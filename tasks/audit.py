"""Audit-report tasks: gather the facts of one run from the stage outputs, write the report, link it from MLflow.

Reads (paths from dvc.yaml): the graph store, the TMD ``meta.json``, ``selection.json``, ``nodes.parquet``,
``label_requests.parquet``, ``manifest.json``, ``labels.json``, ``train.json`` (its ``mlflow.run_id``),
``metrics.json``, ``metrics_nodes.json``, ``bound_vs_gap.png``, ``params.yaml`` and -- at run time, not as a
DVC dependency -- ``dvc.lock``; in production also ``predictions.parquet`` / ``.json`` and ``labels.csv``
(:func:`prediction_report`).  Writes ``report.md``, ``report.html``, ``counts.png`` and a copy of
``bound_vs_gap.png`` into one folder (production: also ``parity.png`` and ``predictions.png``, which the HTML embeds
and the Markdown links; not DVC outputs, a benchmark run has none); the rendering is :mod:`tmdlib.reporting.audit`.  The selected molecules (a
store with SMILES) are depicted by RDKit (:mod:`tmdlib.chem._depict`) and embedded in the page.
"""
from __future__ import annotations

import datetime as _dt
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task

from tmdlib import InputError
from tmdlib.reporting import audit
from tmdlib.reporting.audit_facts import REPORT_HTML, REPORT_MD

from . import io
from .io import read_json

DOCUMENTS = {"tmd_meta": "TMD meta file", "manifest": "label manifest", "labels_meta": "labels metadata",
             "train_info": "train info", "metrics": "metrics file", "metrics_nodes": "node metrics file"}


# ----------------------------------------------------------------------------------------------
# Readers (each raises InputError naming the file)
# ----------------------------------------------------------------------------------------------
def read_documents(paths: dict) -> dict:
    """The JSON inputs named in :data:`DOCUMENTS`, by key (``paths`` maps the same keys to files)."""
    docs = {key: read_json(paths[key], what) for key, what in DOCUMENTS.items()}
    docs["labels_meta"] = io.read_labels_meta(paths["labels_meta"], paths["labels_meta"])  # with import.json beside it
    return docs


def store_facts(graphs: str) -> tuple:
    """``(pool, facts)`` of the graph store: file sha256, content hash, graph and node counts; ``pool`` its ids and
    sizes (:class:`tmdlib.datasets._stored.StoredGraphs`: the graphs themselves are not loaded)."""
    from .graphs import open_store

    store = open_store(graphs)
    ds = store.stored()
    return ds, {"graph_store": graphs, "store_sha256": io.sha256_file(graphs),
                "content_sha256": store.content_hash(),
                "graphs": len(ds), "nodes": int(ds.nodes_per_graph.sum())}


def node_counts(path: str, ds, medoids: np.ndarray) -> tuple[dict, dict]:
    """Nodes kept and dropped over all graphs and over the ``medoids`` (:func:`tmdlib.reporting.audit.node_facts`)."""
    table = io.nodes_table(path, ("graph_id", "k"))
    return audit.node_facts(table.column("graph_id").to_numpy(), table.column("k").to_numpy(), ds.graph_ids,
                            ds.nodes_per_graph, medoids, path)


def count_rows(path: str) -> int:
    """Rows of a Parquet file (the label requests)."""
    if not Path(path).is_file():
        raise InputError(path, "label requests not found")
    try:
        return int(pq.read_metadata(path).num_rows)
    except (pa.ArrowException, OSError) as err:
        raise InputError(path, f"not a readable Parquet file: {err}") from None


NO_SMILES = "the graph store has no SMILES (not a molecule dataset), so there are no molecules to depict"


def molecule_facts(graphs: str, sel: dict, requests: str, selection: str,
                   limit: int = audit.MOLECULES_SHOWN) -> dict:
    """The selected molecules, largest clusters first (:func:`tmdlib.reporting.audit.molecule_rows`), the first
    ``limit`` with an RDKit depiction (:func:`tmdlib.chem._depict.depict_svg`, deterministic); ``{"omitted": why}``
    when the graph store has no ``smiles`` column (TU graphs)."""
    if "smiles" not in pq.read_schema(graphs).names:
        return {"omitted": NO_SMILES}
    from tmdlib.chem import depict_svg

    table = pq.read_table(graphs, columns=["graph_id", "smiles"])
    smiles_of = dict(zip(table.column("graph_id").to_pylist(), table.column("smiles").to_pylist()))
    if any(int(g) not in smiles_of for g in sel["medoids"]):  # named before the requests are read
        return audit.selected_molecules(sel["medoids"], [], smiles_of, [], depict_svg, limit, selection, graphs)
    try:
        asked = pq.read_table(requests, columns=["graph_id"]).column("graph_id").to_pylist()
    except (pa.ArrowException, OSError, ValueError, KeyError) as err:
        raise InputError(requests, f"not a readable label request table (graph_id): {err}") from None
    return audit.selected_molecules(sel["medoids"], sel["tau"].tolist(), smiles_of, asked, depict_svg, limit,
                                    selection, graphs)


def read_params(path: str) -> dict:
    """Flat ``{"group.key": value}`` of ``params.yaml``, credentials in URL-like values redacted."""
    import yaml

    from tmdlib.reporting.provenance import shown_params

    if not Path(path).is_file():
        raise InputError(path, "params file not found")
    try:
        params = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise InputError(path, f"not valid YAML: {err}") from None
    if not isinstance(params, dict):
        raise InputError(path, "params file must be a mapping")
    return shown_params(audit.flat_items(params))


def read_plot(path: str) -> bytes:
    """Bytes of a PNG plot (InputError if missing or not a PNG)."""
    if not Path(path).is_file():
        raise InputError(path, "plot not found")
    data = Path(path).read_bytes()
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise InputError(path, "not a PNG image")
    return data


def mlflow_run(info: dict, train_info: str, check: bool = True) -> dict:
    """The train run named by ``train.json`` (``mlflow.run_id``; ``{}`` when the run was not logged).

    With ``check`` the run must exist in the tracking store (its experiment id is read from there).

    Returns
    -------
    dict
        ``{"mlflow_run_id", "mlflow_experiment_id", "tracking_uri"}`` (URI redacted), or ``{}``.
    """
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    from tmdlib.reporting.provenance import redact_uri

    from .tracking import tracking_uri

    logged = info.get("mlflow") or {}
    run_id = logged.get("run_id")
    if not run_id:
        return {}
    if not check:
        return {"mlflow_run_id": run_id, "mlflow_experiment_id": logged.get("experiment_id"),
                "tracking_uri": logged.get("tracking_uri")}
    uri = redact_uri(tracking_uri())
    try:
        run = MlflowClient(tracking_uri=tracking_uri()).get_run(run_id)
    except MlflowException as err:
        raise InputError(train_info, f"MLflow run {run_id} not found at {uri}: {err.message}") from None
    return {"mlflow_run_id": run_id, "mlflow_experiment_id": run.info.experiment_id, "tracking_uri": uri}


def same_store(docs: dict, sel: dict, data: dict, paths: dict) -> list:
    """Every artifact that records the graph store's content hash names this store
    (:func:`tmdlib.reporting.audit.store_checks`); returns the check rows ``[(what, ok, detail)]``."""
    from tmdlib.datasets._identity import STORE_HASH_KEY

    named = [("selection", sel, paths["selection"])] + [(DOCUMENTS[k], docs[k], paths[k]) for k in DOCUMENTS]
    return audit.store_checks(named, data["content_sha256"], paths["graphs"], STORE_HASH_KEY)


@task(name="audit-facts", persist_result=False)
def gather_facts(dataset: str, paths: dict, lock: str, check_mlflow: bool = True) -> dict:
    """Every fact of the report (:mod:`tmdlib.reporting.audit`'s schema) from the run's files; nothing is written.

    ``paths`` maps ``graphs``, ``selection``, ``nodes``, ``requests``, ``plot``, ``params`` and the keys of
    :data:`DOCUMENTS` to files; ``lock`` is ``dvc.lock`` (may be missing); ``check_mlflow``: the train run
    named by ``train.json`` must exist in the tracking store.
    """
    from tmdlib.reporting.audit_facts import report_facts

    from .tracking import dvc_lock_hashes, git_info, lock_entries

    docs = read_documents(paths)
    sel = io.read_selection(paths["selection"])
    ds, store = store_facts(paths["graphs"])
    nodes = node_counts(paths["nodes"], ds, sel["medoids"])
    rows = count_rows(paths["requests"])
    molecules = molecule_facts(paths["graphs"], sel, paths["requests"], paths["selection"])
    run = mlflow_run(docs["train_info"], paths["train_info"], check_mlflow)
    files = [paths[k] for k in ("graphs", "selection", "nodes", "requests", "plot", *DOCUMENTS)]
    read = {"generated_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
            "provenance": {**git_info(), **run}, "nodes": nodes, "requests": rows, "molecules": molecules,
            "inputs": dvc_lock_hashes(files, lock),
            "node_line": (io.nodes_off(paths["nodes"]) or {}).get("line"),  # off: the one line that says so
            "store_checks": same_store(docs, sel, store, paths), "selection_sha256": io.sha256_file(paths["selection"]),
            "params": read_params(paths["params"]), "lock": lock_entries(dataset, lock)}
    return report_facts(dataset, docs, sel, store, read)


# ----------------------------------------------------------------------------------------------
# Production: the predictions a chemist looks at
# ----------------------------------------------------------------------------------------------
@task(name="audit-predictions", persist_result=False)
def prediction_report(predictions: str, labels: str, selection: str, task_dict: dict | None,
                      goal: str = "model", hunt=None) -> tuple[dict, list]:
    """``(facts["predictions"], images)`` of a production run (:func:`tmdlib.reporting.predictions.prediction_facts`).

    Reads ``predictions.parquet`` and the ``predictions.json`` beside it (one set:
    :func:`tasks.predict.read_prediction_set`), the lab's ``labels.csv`` and ``selection.json``'s ``audit_ids``
    (:func:`tmdlib.reporting.predictions.audit_positions`).  ``goal`` ``maximize`` / ``minimize`` (``select.goal``)
    adds ``hits`` (:func:`_hits`) of the target ``hunt`` names (``select.target``).
    """
    from tmdlib.datasets import TaskSpec
    from tmdlib.reporting import predictions as rp
    from tmdlib.reporting.hits import ranks_hits

    from .predict import read_prediction_set

    meta = read_prediction_set(str(Path(predictions).parent), Path(predictions).name.removesuffix(".parquet"))
    spec = TaskSpec.from_dict(task_dict or meta.get("task") or {})
    try:
        table = pq.read_table(predictions, columns=rp.audit_columns(spec, pq.read_schema(predictions).names,
                                                                    predictions))
    except (pa.ArrowException, OSError) as err:
        raise InputError(predictions, f"not a readable predictions Parquet: {err}") from None
    label_map, _ = io.read_labels(labels, None, spec)
    audit_ids = io.read_selection(selection).get("audit_ids")
    rows, measured = rp.audit_positions(table.column("graph_id").to_numpy(), audit_ids, label_map, labels)
    hits = _hits(predictions, labels, spec, goal, hunt) if ranks_hits(goal, spec) else None
    return rp.prediction_facts(table, spec, meta, predictions, rows, measured, hits)


def _hits(predictions: str, labels: str, spec, goal: str, hunt=None, n: int | None = None) -> dict:
    """The hit report's facts (:func:`tmdlib.reporting.hits.table_hits`, ``n`` per list) from the predictions and
    every label, of the target ``hunt`` names on a multi-target pool (``select.target``), else of the first."""
    from tmdlib.reporting.hits import hunted, table_hits

    names = pq.read_schema(predictions).names
    table = pq.read_table(predictions, columns=[c for c in ("graph_id", *hunted(spec, hunt)[2], "compound_id")
                                                if c in names])
    return table_hits(goal, spec, table, io.read_labels(labels, None, spec)[0], hunt, n)


def hit_summary(predictions: str, labels: str, goal: str, n: int = 5, hunt=None) -> list[str]:
    """``tmdsub summary``'s hit lines (:func:`tmdlib.reporting.hits.hit_lines`, ``n`` per list) of a production run
    under ``select.goal`` maximize / minimize, of the target ``hunt`` names on a multi-target pool (``select.target``;
    else the first): [] for another goal or a classification run."""
    from tmdlib.datasets import TaskSpec
    from tmdlib.reporting.hits import GOALS, hit_lines, ranks_hits

    from .predict import read_prediction_set

    if goal not in GOALS or not Path(labels).is_file():
        return []
    meta = read_prediction_set(str(Path(predictions).parent), Path(predictions).name.removesuffix(".parquet"))
    spec = TaskSpec.from_dict(meta.get("task") or {})
    if not ranks_hits(goal, spec):  # no values to rank
        return []
    return hit_lines(_hits(predictions, labels, spec, goal, hunt, n))


# ----------------------------------------------------------------------------------------------
# Outputs
# ----------------------------------------------------------------------------------------------
@task(name="write-audit-report", persist_result=False)
def write_report(out_dir: str, facts: dict, bound_plot: bytes, extra: list | None = None) -> dict:
    """Render and write the plots, ``report.md`` and (last) ``report.html``, each atomically.

    ``extra``: more ``(file name, caption, PNG)`` plots (production: :func:`prediction_report`'s, shown in their
    section).  Everything is rendered before the first write, so a rendering error writes nothing.

    Returns
    -------
    dict
        ``{"markdown", "html", "plots": [...]}`` paths.
    """
    from tmdlib.reporting.audit_facts import report_pages

    out = Path(out_dir)
    facts = {**facts, "files": {"markdown": str(out / REPORT_MD), "html": str(out / REPORT_HTML)}}
    written = io.write_pages(out, report_pages(facts, bound_plot, extra))  # rendered before the first write
    return {**facts["files"], "plots": written[:-2]}


@task(name="link-audit-report", persist_result=False)
def link_report(run_id: str, files: dict) -> dict:
    """Log the report files as artifacts (``audit/``) of the MLflow run and tag the run with the report's path.

    Tags: ``tmdsub.audit_report`` (report.html path in the workspace), ``tmdsub.audit_report_md``,
    ``tmdsub.audit_artifact`` (artifact path) and the run description ``mlflow.note.content``.
    """
    from mlflow import MlflowClient

    from .tracking import tracking_uri

    client = MlflowClient(tracking_uri=tracking_uri())
    for path in (files["markdown"], files["html"], *files["plots"]):
        client.log_artifact(run_id, path, artifact_path="audit")
    tags = {"tmdsub.audit_report": files["html"], "tmdsub.audit_report_md": files["markdown"],
            "tmdsub.audit_artifact": f"audit/{REPORT_HTML}",
            "mlflow.note.content": f"Audit report: artifact `audit/{REPORT_HTML}` (Markdown: `audit/{REPORT_MD}`); "
                                   f"in the workspace `{files['html']}`."}
    for key, value in tags.items():
        client.set_tag(run_id, key, value)
    return tags
