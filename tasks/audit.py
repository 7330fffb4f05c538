"""Audit-report tasks: gather the facts of one run from the stage outputs, write the report, link it from MLflow.

Reads (paths from dvc.yaml): the graph store, the TMD ``meta.json``, ``selection.json``, ``nodes.parquet``,
``label_requests.parquet``, ``manifest.json``, ``labels.json``, ``train.json`` (its ``mlflow.run_id``),
``metrics.json``, ``metrics_nodes.json``, ``bound_vs_gap.png``, ``params.yaml`` and -- at run time, not as a
DVC dependency -- ``dvc.lock``; in production also ``predictions.parquet`` / ``.json`` and ``labels.csv``
(:func:`prediction_report`).  Writes ``report.md``, ``report.html``, ``counts.png`` and a copy of
``bound_vs_gap.png`` into one folder (production: also ``parity.png`` and ``predictions.png``, which the HTML embeds
and the Markdown links; not DVC outputs, a benchmark run has none); the rendering is :mod:`tmdlib.reporting.audit`.  The selected molecules (a
store with SMILES) are depicted by RDKit (:mod:`tmdlib.chem.depict`) and embedded in the page.
"""
from __future__ import annotations

import datetime as _dt
from pathlib import Path

import numpy as np
from prefect import task

from tmdlib import InputError
from tmdlib.reporting import audit

from . import io
from .io import read_json

REPORT_MD, REPORT_HTML, COUNTS_PNG, BOUND_PNG = "report.md", "report.html", "counts.png", "bound_vs_gap.png"
DOCUMENTS = {"tmd_meta": "TMD meta file", "manifest": "label manifest", "labels_meta": "labels metadata",
             "train_info": "train info", "metrics": "metrics file", "metrics_nodes": "node metrics file"}


# ----------------------------------------------------------------------------------------------
# Readers (each raises InputError naming the file)
# ----------------------------------------------------------------------------------------------
def read_documents(paths: dict) -> dict:
    """The JSON inputs named in :data:`DOCUMENTS`, by key (``paths`` maps the same keys to files)."""
    docs = {key: read_json(paths[key], what) for key, what in DOCUMENTS.items()}
    from .io import read_labels_meta

    docs["labels_meta"] = read_labels_meta(paths["labels_meta"], paths["labels_meta"])  # with import.json beside it
    return docs


def store_facts(graphs: str) -> tuple:
    """``(pool, facts)`` of the graph store: file sha256, content hash, graph and node counts; ``pool`` its ids and
    sizes (:class:`tmdlib.datasets.stored.StoredGraphs`: the graphs themselves are not loaded)."""
    from .graphs import open_store

    store = open_store(graphs)
    ds = store.stored()
    return ds, {"graph_store": graphs, "store_sha256": io.sha256_file(graphs),
                "content_sha256": store.content_hash(),
                "graphs": len(ds), "nodes": int(ds.nodes_per_graph.sum())}


def node_counts(path: str, ds, medoids: np.ndarray) -> tuple[dict, dict]:
    """Nodes kept and dropped (:func:`tmdlib.reporting.audit.kept_dropped`) over all graphs and over the ``medoids``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not Path(path).is_file():
        raise InputError(path, "node-subsampling file not found")
    try:
        table = pq.read_table(path, columns=["graph_id", "k"])
    except (pa.ArrowException, OSError, ValueError, KeyError) as err:
        raise InputError(path, f"not a readable nodes Parquet (graph_id, k): {err}") from None
    gids, kept = table.column("graph_id").to_numpy(), table.column("k").to_numpy()
    size = dict(zip(ds.graph_ids.tolist(), ds.nodes_per_graph.tolist()))
    unknown = [int(g) for g in gids if int(g) not in size]
    if unknown:
        raise InputError(path, f"graph ids not in the graph store: {unknown[:10]}")
    total = np.array([size[int(g)] for g in gids])
    sel = np.isin(gids, medoids)
    return (audit.kept_dropped(int(kept.sum()), int(total.sum())),
            audit.kept_dropped(int(kept[sel].sum()), int(total[sel].sum())))


def count_rows(path: str) -> int:
    """Rows of a Parquet file (the label requests)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

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
    ``limit`` with an RDKit depiction (:func:`tmdlib.chem.depict.depict_svg`, deterministic); ``{"omitted": why}``
    when the graph store has no ``smiles`` column (TU graphs)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if "smiles" not in pq.read_schema(graphs).names:
        return {"omitted": NO_SMILES}
    from tmdlib.chem.depict import depict_svg

    table = pq.read_table(graphs, columns=["graph_id", "smiles"])
    smiles_of = dict(zip(table.column("graph_id").to_pylist(), table.column("smiles").to_pylist()))
    medoids = [int(g) for g in sel["medoids"]]
    unknown = [g for g in medoids if g not in smiles_of]
    if unknown:
        raise InputError(selection, f"selected graph ids not in the graph store {graphs}: {unknown[:10]}")
    try:
        asked = pq.read_table(requests, columns=["graph_id"]).column("graph_id").to_pylist()
    except (pa.ArrowException, OSError, ValueError, KeyError) as err:
        raise InputError(requests, f"not a readable label request table (graph_id): {err}") from None
    rows = audit.molecule_rows(medoids, sel["tau"].tolist(), [smiles_of[g] for g in medoids], asked)
    shown = [{**r, "svg": depict_svg(r["smiles"])} for r in rows[:limit]]
    return {"total": len(rows), "shown": shown}


def read_params(path: str) -> dict:
    """Flat ``{"group.key": value}`` of ``params.yaml``, credentials in URL-like values redacted."""
    import yaml

    from .tracking import redact_uri

    if not Path(path).is_file():
        raise InputError(path, "params file not found")
    try:
        params = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise InputError(path, f"not valid YAML: {err}") from None
    if not isinstance(params, dict):
        raise InputError(path, "params file must be a mapping")
    return {k: redact_uri(v) if isinstance(v, str) else v for k, v in audit.flat_items(params).items()}


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

    from .tracking import redact_uri, tracking_uri

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


# ----------------------------------------------------------------------------------------------
# Facts
# ----------------------------------------------------------------------------------------------
def _scalars(doc: dict) -> dict:
    """The entries of a JSON object that are not lists or objects."""
    return {k: v for k, v in doc.items() if not isinstance(v, (list, dict))}


def _count(value) -> int:
    """A count recorded either as a number or as the list of the items."""
    return len(value) if isinstance(value, list) else int(value or 0)


def label_facts(manifest: dict, labels_meta: dict, requested_rows: int, pool: int) -> dict:
    """:func:`tmdlib.reporting.audit.labelling_cost` of the manifest, plus the label source (read defensively)."""
    requested = manifest.get("requested", requested_rows)
    cost = audit.labelling_cost(_count(requested), int(manifest.get("train_graphs") or pool),
                                _count(manifest.get("reused")))
    return {**cost, "source": labels_meta.get("source"), "benchmark_mode": labels_meta.get("benchmark_mode"),
            "warning": labels_meta.get("warning"), "missing": labels_meta.get("missing"),
            "missing_by_purpose": labels_meta.get("missing_by_purpose"),
            "flagged_replicates": len((labels_meta.get("replicates") or {}).get("flagged") or []),
            "conflicts": len(labels_meta.get("conflicts") or []),
            "censored_dropped": (labels_meta.get("censored") or {}).get("dropped")}


def same_store(docs: dict, sel: dict, data: dict, paths: dict) -> list:
    """Every artifact that records the graph store's content hash names this store; else one :class:`InputError`
    naming the artifact and both hashes.  Returns the check rows ``[(what, ok, detail)]``."""
    from .graphs import STORE_HASH_KEY

    have = data["content_sha256"]
    rows = []
    named = [("selection", sel, paths["selection"])] + [(DOCUMENTS[k], docs[k], paths[k]) for k in DOCUMENTS]
    for what, doc, path in named:
        want = (doc or {}).get(STORE_HASH_KEY)
        if want is None:
            continue  # written before the field existed
        if want != have:
            raise InputError(path, f"the {what} was made for another graph store: it records content sha256 {want}, "
                                   f"the store {paths['graphs']} has {have}")
        rows.append((f"{what} names this graph store (content sha256)", True, have[:16] + "..."))
    return rows


def consistency_checks(docs: dict, data: dict, paths: dict, requested_rows: int) -> list:
    """``[(what, ok, detail)]``: the files of the run describe the same dataset and selection."""
    man, meta = docs["manifest"], docs["tmd_meta"]
    checks = [("label manifest names this graph store (sha256)", man.get("dataset_sha256") == data["store_sha256"],
               None),
              ("label manifest names this selection (sha256)",
               man.get("selection_sha256") == io.sha256_file(paths["selection"]), None),
              ("label requests rows = manifest 'requested'", man.get("requested") == requested_rows,
               f"{requested_rows} rows")]
    if "graphs" in meta:
        checks.append(("TMD matrix covers every graph", int(meta["graphs"]) == data["graphs"],
                       f"{meta['graphs']} of {data['graphs']}"))
    alive = (docs.get("train_info") or {}).get("alive_units")
    if alive:  # train.json of runs before this check have none
        checks.append(("trained GIN is not collapsed (every layer has a unit non-zero on some training graph)",
                       min(alive) > 0, f"alive units per layer {alive}" + ("" if min(alive) > 0 else
                                                                           "; lower train.lr and retrain")))
    return checks


@task(name="audit-facts", persist_result=False)
def gather_facts(dataset: str, paths: dict, lock: str, check_mlflow: bool = True) -> dict:
    """Every fact of the report (:mod:`tmdlib.reporting.audit`'s schema) from the run's files; nothing is written.

    ``paths`` maps ``graphs``, ``selection``, ``nodes``, ``requests``, ``plot``, ``params`` and the keys of
    :data:`DOCUMENTS` to files; ``lock`` is ``dvc.lock`` (may be missing); ``check_mlflow``: the train run
    named by ``train.json`` must exist in the tracking store.
    """
    from .tracking import dvc_lock_hashes, git_info, lock_entries
    from .io import read_selection

    docs = read_documents(paths)
    sel = read_selection(paths["selection"])
    ds, data = store_facts(paths["graphs"])
    meta = docs["tmd_meta"]
    data.update({"matrix_sha256": meta.get("matrix_sha256"), "depth": meta.get("depth"),
                 "weights": meta.get("weights")})
    nodes_all, nodes_sel = node_counts(paths["nodes"], ds, sel["medoids"])
    rows = count_rows(paths["requests"])
    molecules = molecule_facts(paths["graphs"], sel, paths["requests"], paths["selection"])
    run = mlflow_run(docs["train_info"], paths["train_info"], check_mlflow)
    graphs = {**audit.kept_dropped(len(sel["medoids"]), len(sel["train_ids"])), "dataset": len(ds),
              "test": len(sel["test_ids"]), "method": sel.get("method"), "fraction": sel.get("fraction"),
              "seed": sel.get("seed")}
    files = [paths[k] for k in ("graphs", "selection", "nodes", "requests", "plot", *DOCUMENTS)]
    md5 = {k.removeprefix("dvc.md5."): v for k, v in dvc_lock_hashes(files, lock).items()}
    return {
        "dataset": dataset, "generated_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "provenance": {**git_info(), **run},
        "data": data, "graphs": graphs, "nodes": nodes_all, "nodes_selected": nodes_sel,
        "bound": {"certified": docs["metrics"].get("certified"), **(docs["metrics"].get("bound") or {})},
        "test": docs["metrics"].get("test") or {},
        "pool_estimate": docs["metrics"].get("pool_estimate"), "control": docs["metrics"].get("control"),
        "constant_predictor": docs["metrics"].get("constant_predictor"), "mode": docs["metrics"].get("mode", "benchmark"),
        "not_measurable": docs["metrics"].get("not_measurable"),
        "coreset_loss_weighted": docs["metrics"].get("coreset_loss_weighted"),
        "node_bound": docs["metrics_nodes"].get("nodes") or {},
        "node_subsampling": (io.nodes_off(paths["nodes"]) or {}).get("line"),  # off: the one line that says so
        "labels": label_facts(docs["manifest"], docs["labels_meta"], rows, len(sel["train_ids"])),
        "molecules": molecules,
        "manifest": _scalars(docs["manifest"]),
        "checks": same_store(docs, sel, data, paths) + consistency_checks(docs, data, paths, rows),
        "task": docs["metrics"].get("task"), "reference": docs["metrics"].get("reference"),
        "task_head": docs["metrics"].get("task_head"),
        "params": read_params(paths["params"]), "inputs": md5,
        "lock": {k: v for k, v in lock_entries(dataset, lock).items() if not k.startswith("audit@")} or None,
    }


def counts_plot(facts: dict) -> bytes:
    """PNG of graphs, nodes and labels kept versus dropped (:func:`tmdlib.reporting.audit.counts_png`)."""
    g, n, lab = facts["graphs"], facts["nodes"], facts["labels"]
    bars = [("graphs (training pool)", [("kept", g["kept"]), ("dropped", g["dropped"])]),
            *([] if facts.get("node_subsampling") else [("nodes (all graphs)", [("kept", n["kept"]),
                                                                                 ("dropped", n["dropped"])])]),
            ("labels (training pool)", [("requested", lab["requested"]), ("reused", lab["reused"]),
                                        ("not needed", lab["not_needed"])])]
    return audit.counts_png(bars, title=f"{facts['dataset']}: kept versus dropped")


# ----------------------------------------------------------------------------------------------
# Production: the predictions a chemist looks at
# ----------------------------------------------------------------------------------------------
PARITY_PNG, PREDICTIONS_PNG = "parity.png", "predictions.png"


def _audit_measurements(labels: str, sel: dict, spec, gids) -> tuple[np.ndarray, list]:
    """``(rows of the predictions table, measured values)`` of the labelled audit sample (first target)."""
    from .io import read_labels

    label_map, _ = read_labels(labels, None, spec)
    audit = np.asarray([int(g) for g in sel.get("audit_ids") or [] if int(g) in label_map], dtype=np.int64)
    gids = np.asarray(gids, dtype=np.int64)
    order = np.argsort(gids, kind="stable")  # the pool's rows by id: no per-row lookup table for a pool of millions
    at = np.minimum(np.searchsorted(gids, audit, sorter=order), max(len(gids) - 1, 0))
    found = gids[order[at]] == audit if len(gids) else np.zeros(len(audit), bool)
    if not found.all():
        raise InputError(labels, f"labelled audit graphs not in the predictions: {audit[~found][:10].tolist()} "
                                 "(rerun tmdsub predict)")
    y = [float(np.ravel(label_map[int(g)])[0]) for g in audit]
    return order[at], y


@task(name="audit-predictions", persist_result=False)
def prediction_report(predictions: str, labels: str, selection: str, task_dict: dict | None,
                      goal: str = "model", hunt=None) -> tuple[dict, list]:
    """``(facts["predictions"], images)`` of a production run (:mod:`tmdlib.reporting.predictions`).

    Reads ``predictions.parquet`` and the ``predictions.json`` beside it (one set:
    :func:`tasks.predict.read_prediction_set`), the lab's ``labels.csv`` and ``selection.json``'s ``audit_ids``.
    The parity plot (regression) pairs each labelled audit molecule's measurement with its prediction and interval;
    the distribution covers every pool molecule's prediction, split by its ``in_domain`` flag.  A multi-target
    regression shows its first target.  Images: ``[(file name, caption, PNG)]``.  ``goal`` ``maximize`` /
    ``minimize`` (``select.goal``) adds ``hits`` (:func:`tmdlib.reporting.hits.hit_facts`: the best measured so far,
    with compound ids when ingested, and the predicted best not yet measured with their intervals) of the target
    ``hunt`` names (``select.target``) on a multi-target pool, else of the first target.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tmdlib.datasets.task import TaskSpec
    from tmdlib.reporting import predictions as rp

    from .io import read_selection
    from .predict import read_prediction_set

    folder, stem = Path(predictions).parent, Path(predictions).name.removesuffix(".parquet")
    meta = read_prediction_set(str(folder), stem)
    spec = TaskSpec.from_dict(task_dict or meta.get("task") or {})
    target, suffix = spec.prediction_names[0], spec.column_suffix(0)
    col = f"prediction{suffix}"
    try:
        names = pq.read_schema(predictions).names
        if col not in names:
            raise InputError(predictions, f"no {col} column (columns {', '.join(names)})")
        wanted = ["graph_id", col, "in_domain", *(f"{b}{suffix}" for b in ("lower", "upper"))]
        table = pq.read_table(predictions, columns=[c for c in wanted if c in names])  # not the SMILES
    except (pa.ArrowException, OSError) as err:
        raise InputError(predictions, f"not a readable predictions Parquet: {err}") from None
    names = table.column_names
    values = np.asarray(table.column(col).to_numpy(zero_copy_only=False), dtype=np.float64)
    flags = table.column("in_domain").to_pylist() if "in_domain" in names else None
    rows, measured = _audit_measurements(labels, read_selection(selection), spec, table.column("graph_id").to_numpy())
    quantity = meta.get("property") or target  # labels.name: pIC50, ...; else the target, or "class"
    facts = {"file": predictions, "rows": table.num_rows, "model": meta.get("model"),
             "confidence": meta.get("confidence"), "task": spec.type, "quantity": quantity,
             "domain": rp.domain_share(meta.get("domain")), "audit": None, "confusion": None, "parity_note": None}
    caption = (f"Distribution of the pool's {table.num_rows} predictions" +
               (", in and out of the applicability domain" if flags is not None else ""))
    images = [(PREDICTIONS_PNG, caption, rp.distribution_png(values, flags, title=caption, quantity=quantity,
                                                               discrete=not spec.is_regression))]
    if spec.conformal == "intervals" and len(rows):  # values with intervals: the parity plot
        bounds = [f"{b}{suffix}" for b in ("lower", "upper")]
        lo, hi = (np.asarray(table.column(b).to_numpy(zero_copy_only=False), dtype=np.float64)[rows]
                  if b in names else None for b in bounds)
        facts["audit"] = rp.audit_agreement(measured, values[rows], lo, hi)
        cap = (f"Audit sample: prediction vs the lab's measurement ({len(rows)} molecules), "
               f"{_pct_text(meta.get('confidence'))} prediction intervals, y = x")
        images.insert(0, (PARITY_PNG, cap, rp.parity_png(measured, values[rows], lo, hi,
                                                         None if flags is None else [flags[i] for i in rows],
                                                         title=cap, quantity=quantity)))
    elif not len(rows):
        facts["parity_note"] = "no labelled audit molecule yet: nothing to plot against the lab"
    else:
        facts["audit"] = {"n": len(rows)}
        facts["confusion"] = rp.confusion_counts(measured, values[rows].tolist())
        facts["parity_note"] = ("classification: no parity plot; the audit sample's predicted against measured "
                                "classes are counted above")
    if goal in ("maximize", "minimize") and spec.conformal == "intervals":  # values to rank, any target
        facts["hits"] = _hits(predictions, labels, spec, goal, hunt)
    facts["plots"] = [(name, cap) for name, cap, _ in images]
    return facts, images


def _hits(predictions: str, labels: str, spec, goal: str, hunt=None, n: int | None = None) -> dict:
    """The hit report's facts (:func:`tmdlib.reporting.hits.hit_facts`, ``n`` per list) from the predictions and
    every label: of the target ``hunt`` names (``select.target``, a name) on a multi-target pool, else of the first;
    a molecule counts as measured once it has a value for that target."""
    import pyarrow.parquet as pq

    from tmdlib.reporting.hits import SHOWN, hit_facts

    from .io import read_labels

    multi = spec.num_targets > 1
    target = hunt if multi and isinstance(hunt, str) and hunt in spec.targets else spec.targets[0]
    j = spec.targets.index(target)
    col, lo_col, hi_col = (f"{c}_{target}" if multi else c for c in ("prediction", "lower", "upper"))
    names = pq.read_schema(predictions).names
    table = pq.read_table(predictions, columns=[c for c in ("graph_id", col, lo_col, hi_col, "compound_id")
                                                if c in names])
    label_map, _ = read_labels(labels, None, spec)
    measured = {int(g): float(np.ravel(v)[j]) for g, v in label_map.items()}
    measured = {g: v for g, v in measured.items() if np.isfinite(v)}
    lo, hi = (table.column(b).to_numpy(zero_copy_only=False) if b in names else None for b in (lo_col, hi_col))
    ids = table.column("compound_id").to_pylist() if "compound_id" in names else None
    values = np.asarray(table.column(col).to_numpy(zero_copy_only=False), dtype=np.float64)
    return hit_facts(goal, measured, table.column("graph_id").to_numpy(), values, lo, hi, ids,
                     n=SHOWN if n is None else n, target=target if multi else None)


def hit_summary(predictions: str, labels: str, goal: str, n: int = 5, hunt=None) -> list[str]:
    """``tmdsub summary``'s hit lines (:func:`tmdlib.reporting.hits.hit_lines`, ``n`` per list) of a production run
    under ``select.goal`` maximize / minimize, of the target ``hunt`` names on a multi-target pool (``select.target``;
    else the first): [] for another goal or a classification run."""
    from tmdlib.datasets.task import TaskSpec
    from tmdlib.reporting.hits import hit_lines

    from .predict import read_prediction_set

    if goal not in ("maximize", "minimize") or not Path(labels).is_file():
        return []
    folder, stem = Path(predictions).parent, Path(predictions).name.removesuffix(".parquet")
    spec = TaskSpec.from_dict(read_prediction_set(str(folder), stem).get("task") or {})
    if spec.conformal != "intervals":  # no values to rank
        return []
    return hit_lines(_hits(predictions, labels, spec, goal, hunt, n))


def _pct_text(value) -> str:
    return "" if value is None else f"{100 * float(value):g} %"


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
    out = Path(out_dir)
    facts = {**facts, "files": {"markdown": str(out / REPORT_MD), "html": str(out / REPORT_HTML)}}
    images = [(COUNTS_PNG, "Graphs, nodes and labels kept versus dropped", counts_plot(facts)),
              (BOUND_PNG, "Bound versus observed gap across coreset fractions (evaluate stage)", bound_plot),
              *(extra or [])]
    markdown, page = audit.render_markdown(facts, images), audit.render_html(facts, images)
    for name, _, png in images:
        io.write_bytes(out / name, png)
    io.write_text(out / REPORT_MD, markdown)
    io.write_text(out / REPORT_HTML, page)
    return {**facts["files"], "plots": [str(out / name) for name, _, _ in images]}


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
