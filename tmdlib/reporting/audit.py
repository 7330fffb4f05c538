"""Audit report of one pipeline run: the facts that reproduce it, as Markdown and as a static HTML page.

Pure functions on plain dicts (no files, MLflow or DVC here); :mod:`tasks.audit` gathers the facts from the
stage outputs.  The facts are one dict with these keys (any may be missing; missing values read ``n/a``):

``dataset``, ``generated_utc``
    Dataset name and when the report was made.
``provenance``
    ``git_sha``, ``git_dirty``, ``mlflow_run_id``, ``mlflow_experiment_id``, ``tracking_uri`` (redacted).
``data``
    ``graph_store``, ``store_sha256`` (the file), ``content_sha256`` (:func:`tmdlib.datasets._identity.content_hash`), ``graphs``,
    ``nodes``, ``matrix_sha256``, ``depth``, ``weights``.
``graphs``, ``nodes``, ``nodes_selected``
    :func:`kept_dropped` dicts (``graphs`` also has ``dataset``, ``test``, ``method``, ``fraction``, ``seed``).
``node_subsampling``
    The line that says node subsampling was off (``nodes.method``), or None: the report says it once, no numbers.
``bound``, ``node_bound``, ``test``
    From ``metrics.json`` (``bound``, ``test``) and ``metrics_nodes.json`` (``nodes``).  The report opens with
    their verdict (:mod:`tmdlib.reporting.verdict`): informative or vacuous, with c·ε and the loss scale.
``labels``, ``manifest``
    :func:`labelling_cost` plus ``source`` / ``benchmark_mode``; the manifest's scalar entries.
``checks``
    ``[(what, ok, detail)]`` consistency checks between the files.
``params``, ``inputs``, ``lock``
    Flat ``params.yaml`` values; ``{path: md5}`` of the files read; ``{stage: {"deps"|"outs": {path: md5}}}``
    of the dataset's ``dvc.lock`` entries (``None`` outside ``dvc repro``).
``molecules``
    The selected molecules (:func:`molecule_rows` orders them): ``total`` (selected graphs), ``shown`` (at most
    :data:`MOLECULES_SHOWN` dicts of ``rank``, ``graph_id``, ``tau``, ``smiles``, ``requested`` (asked of the
    labelling team in this run, else reused from the ledger) and ``svg`` (an RDKit depiction,
    :func:`tmdlib.chem._depict.depict_svg`, or ``None``)); or ``omitted``: why there are none (a dataset
    without SMILES).
``predictions`` (production)
    What a chemist looks at (:mod:`tmdlib.reporting.predictions`): ``file``, ``rows`` (pool molecules predicted),
    ``model``, ``confidence``, ``task``, ``quantity`` (what was predicted), ``domain``
    (:func:`~tmdlib.reporting.predictions.domain_share`), ``audit``
    (:func:`~tmdlib.reporting.predictions.audit_agreement` of the labelled audit sample), ``confusion``
    (classification: :func:`~tmdlib.reporting.predictions.confusion_counts`), ``parity_note`` (why there is no
    parity plot) and ``plots``: ``[(file name, caption)]`` of the images shown in this section (the parity plot
    and the distribution of the pool's predictions) rather than at the end.
``files``
    ``{"markdown": path, "html": path}`` of the report itself.

Every text is escaped (:func:`html.escape` in HTML, ``|`` and line breaks in Markdown tables).  The HTML page
embeds its plots and molecule depictions (SVG) as ``data:`` URIs and carries a Content-Security-Policy that forbids
any other resource, so it opens the same from disk, from an MLflow artifact view or from an e-mail attachment.
"""
from __future__ import annotations

import base64
import html
import io
import math
from typing import Any, Mapping, Sequence

from ..guarantees.losses import TRIVIAL_PREDICTOR
from .hits import hit_title
from .verdict import coreset_verdicts, node_verdicts

__all__ = ["kept_dropped", "labelling_cost", "flat_items", "reproduce_commands", "molecule_rows", "label_facts",
           "store_checks", "consistency_checks", "node_facts", "graph_facts", "selected_molecules", "counts_bars",
           "report_sections", "render_markdown", "render_html", "counts_png", "MOLECULES_SHOWN"]

NA = "n/a"
#: At most this many selected molecules are shown (depicted in HTML, listed in Markdown).
MOLECULES_SHOWN = 48


# ----------------------------------------------------------------------------------------------
# Figures computed from the facts
# ----------------------------------------------------------------------------------------------
def kept_dropped(kept: int, total: int) -> dict:
    """Counts of a subsample.

    Parameters
    ----------
    kept : int
        Items kept (graphs of the coreset, nodes of the subsampled graphs).
    total : int
        Items there were to choose from.

    Returns
    -------
    dict
        ``kept``, ``dropped`` (= total − kept), ``total`` and ``fraction_kept`` (``None`` when total is 0).
    """
    return {"kept": int(kept), "dropped": int(total) - int(kept), "total": int(total),
            "fraction_kept": kept / total if total else None}


def labelling_cost(requested: int, pool: int, reused: int = 0) -> dict:
    """Labels paid for by this run against labelling the whole pool.

    Parameters
    ----------
    requested : int
        Labels requested from the labelling team in this run (graphs that still needed one).
    pool : int
        Graphs in the unlabelled pool the coreset was chosen from (the training graphs): what labelling
        "the full set" would cost.
    reused : int
        Selected graphs whose label was already paid for (the label ledger), not requested again.

    Returns
    -------
    dict
        ``requested``, ``reused``, ``used`` (= requested + reused, the labels training reads), ``pool``,
        ``not_needed`` (= pool − used), ``fraction_saved`` (= 1 − requested / pool: the labelling cost this run
        saved) and ``fraction_saved_by_coreset`` (= 1 − used / pool: the saving of the coreset alone,
        without the ledger).  Fractions are ``None`` for an empty pool.
    """
    used = int(requested) + int(reused)
    return {"requested": int(requested), "reused": int(reused), "used": used, "pool": int(pool),
            "not_needed": int(pool) - used,
            "fraction_saved": 1.0 - requested / pool if pool else None,
            "fraction_saved_by_coreset": 1.0 - used / pool if pool else None}


def flat_items(tree: Mapping, prefix: str = "") -> dict:
    """``{"a.b.c": leaf}`` of a nested mapping (lists stay leaves), e.g. the contents of ``params.yaml``."""
    out = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flat_items(value, name + "."))
        else:
            out[name] = value
    return out


def molecule_rows(graph_ids: Sequence[int], tau: Sequence[float], smiles: Sequence[str | None],
                  requested: Sequence[int] = ()) -> list[dict]:
    """The selected molecules in the label requests' order: largest τ first, ties by increasing graph id.

    Parameters
    ----------
    graph_ids, tau, smiles : sequences of length k
        The selected graphs (medoids), their cluster sizes τ and SMILES.
    requested : sequence of int
        Graph ids asked of the labelling team in this run (the others were reused from the label ledger).

    Returns
    -------
    list of dict
        ``{"rank" (1 = largest cluster), "graph_id", "tau", "smiles", "requested"}`` for every molecule.
    """
    if not len(graph_ids) == len(tau) == len(smiles):
        raise ValueError(f"graph_ids, tau and smiles differ in length: {len(graph_ids)}, {len(tau)}, {len(smiles)}")
    asked = {int(g) for g in requested}
    order = sorted(range(len(graph_ids)), key=lambda i: (-float(tau[i]), int(graph_ids[i])))
    rows = []
    for r, i in enumerate(order, start=1):
        t = float(tau[i])
        rows.append({"rank": r, "graph_id": int(graph_ids[i]), "tau": int(t) if t.is_integer() else t,
                     "smiles": smiles[i], "requested": int(graph_ids[i]) in asked})
    return rows


def scalars(doc: Mapping) -> dict:
    """The entries of a JSON object that are not lists or objects."""
    return {k: v for k, v in doc.items() if not isinstance(v, (list, dict))}


def _count(value) -> int:
    """A count recorded either as a number or as the list of the items."""
    return len(value) if isinstance(value, list) else int(value or 0)


def label_facts(manifest: Mapping, labels_meta: Mapping, requested_rows: int, pool: int) -> dict:
    """:func:`labelling_cost` of the label manifest (``requested`` -- else ``requested_rows`` --, ``train_graphs``
    -- else ``pool`` --, ``reused``, each a count or a list), plus the label source and the intake's flags from
    ``labels.json`` (read defensively: older runs lack some)."""
    requested = manifest.get("requested", requested_rows)
    cost = labelling_cost(_count(requested), int(manifest.get("train_graphs") or pool), _count(manifest.get("reused")))
    return {**cost, "source": labels_meta.get("source"), "benchmark_mode": labels_meta.get("benchmark_mode"),
            "warning": labels_meta.get("warning"), "missing": labels_meta.get("missing"),
            "missing_by_purpose": labels_meta.get("missing_by_purpose"),
            "flagged_replicates": len((labels_meta.get("replicates") or {}).get("flagged") or []),
            "conflicts": len(labels_meta.get("conflicts") or []),
            "censored_dropped": (labels_meta.get("censored") or {}).get("dropped")}


def store_checks(named: Sequence[tuple[str, Mapping | None, str]], have: str, graphs: str, key: str) -> list:
    """Every artifact that records the graph store's content hash (``key``) names this store (``have``); else one
    :class:`~tmdlib._errors.InputError` naming the artifact's file and both hashes.

    ``named``: ``(what, document, its file)`` per artifact (a document without ``key`` was written before the field
    existed: skipped).  Returns the check rows ``[(what, ok, detail)]``.
    """
    from .._errors import InputError

    rows = []
    for what, doc, path in named:
        want = (doc or {}).get(key)
        if want is None:
            continue  # written before the field existed
        if want != have:
            raise InputError(path, f"the {what} was made for another graph store: it records content sha256 {want}, "
                                   f"the store {graphs} has {have}")
        rows.append((f"{what} names this graph store (content sha256)", True, have[:16] + "..."))
    return rows


def consistency_checks(docs: Mapping, data: Mapping, selection_sha256: str, requested_rows: int) -> list:
    """``[(what, ok, detail)]``: the files of the run describe the same dataset and selection.

    ``docs``: the run's JSON documents (``manifest``, ``tmd_meta``, ``train_info``); ``data``: the store's facts
    (``store_sha256``, ``graphs``); ``selection_sha256``: the selection file's sha256; ``requested_rows``: rows of
    the label requests.
    """
    man, meta = docs["manifest"], docs["tmd_meta"]
    checks = [("label manifest names this graph store (sha256)", man.get("dataset_sha256") == data["store_sha256"],
               None),
              ("label manifest names this selection (sha256)", man.get("selection_sha256") == selection_sha256, None),
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


def node_facts(graph_ids, kept, store_ids, nodes_per_graph, medoids, path=None) -> tuple[dict, dict]:
    """Nodes kept and dropped (:func:`kept_dropped`) over all graphs and over the ``medoids``.

    ``graph_ids``, ``kept``: the node-subsampling table (nodes kept per graph); ``store_ids``, ``nodes_per_graph``:
    the store's graphs and their sizes.  A graph id the store lacks is an :class:`~tmdlib._errors.InputError` naming
    ``path``.
    """
    import numpy as np

    from .._errors import InputError

    gids, kept = np.asarray(graph_ids), np.asarray(kept)
    size = dict(zip(np.asarray(store_ids).tolist(), np.asarray(nodes_per_graph).tolist()))
    unknown = [int(g) for g in gids if int(g) not in size]
    if unknown:
        raise InputError(path, f"graph ids not in the graph store: {unknown[:10]}")
    total = np.array([size[int(g)] for g in gids])
    sel = np.isin(gids, medoids)
    return (kept_dropped(int(kept.sum()), int(total.sum())),
            kept_dropped(int(kept[sel].sum()), int(total[sel].sum())))


def graph_facts(sel: Mapping, dataset: int) -> dict:
    """The graphs of a selection (``selection.json``'s content): :func:`kept_dropped` of the medoids among the
    training graphs, the dataset's size, the test graphs, the method, fraction and seed."""
    return {**kept_dropped(len(sel["medoids"]), len(sel["train_ids"])), "dataset": int(dataset),
            "test": len(sel["test_ids"]), "method": sel.get("method"), "fraction": sel.get("fraction"),
            "seed": sel.get("seed")}


def selected_molecules(medoids, tau, smiles_of: Mapping, asked, depict, limit: int = MOLECULES_SHOWN,
                       where=None, graphs: str = "") -> dict:
    """The selected molecules, largest clusters first (:func:`molecule_rows`), the first ``limit`` with a
    depiction ``depict(smiles) -> svg``; ``{"total", "shown"}``.  A medoid ``smiles_of`` (graph id -> SMILES of the
    store ``graphs``) lacks is an :class:`~tmdlib._errors.InputError` naming ``where`` (the selection)."""
    from .._errors import InputError

    medoids = [int(g) for g in medoids]
    unknown = [g for g in medoids if g not in smiles_of]
    if unknown:
        raise InputError(where, f"selected graph ids not in the graph store {graphs}: {unknown[:10]}")
    rows = molecule_rows(medoids, list(tau), [smiles_of[g] for g in medoids], asked)
    return {"total": len(rows), "shown": [{**r, "svg": depict(r["smiles"])} for r in rows[:limit]]}


def counts_bars(facts: Mapping) -> list:
    """The bars of :func:`counts_png`: graphs, nodes (unless node subsampling was off) and labels kept versus
    dropped."""
    g, n, lab = facts["graphs"], facts["nodes"], facts["labels"]
    return [("graphs (training pool)", [("kept", g["kept"]), ("dropped", g["dropped"])]),
            *([] if facts.get("node_subsampling") else [("nodes (all graphs)", [("kept", n["kept"]),
                                                                                 ("dropped", n["dropped"])])]),
            ("labels (training pool)", [("requested", lab["requested"]), ("reused", lab["reused"]),
                                        ("not needed", lab["not_needed"])])]


def reproduce_commands(dataset: str, git_sha: str, run_id: str | None, tracking_uri: str | None) -> list[str]:
    """Shell commands that reproduce the run (and find its MLflow record).

    Parameters
    ----------
    dataset : str
        Dataset name (the ``@<DATASET>`` of the DVC stages).
    git_sha : str
        Commit the run was made from.
    run_id, tracking_uri : str or None
        The MLflow train run and its (redacted) tracking URI, when the run was logged.

    Returns
    -------
    list of str
        Command lines, comments starting with ``#``.
    """
    lines = [f"git checkout {git_sha}", "dvc pull            # the data of this run from the DVC remote",
             f"dvc repro audit@{dataset}   # reruns whatever differs, up to this report"]
    if run_id:
        lines += [f"# MLflow train run {run_id}:",
                  f"mlflow ui --backend-store-uri '{tracking_uri}'   # then open run {run_id}"]
    return lines


# ----------------------------------------------------------------------------------------------
# Sections: (title, rows of (label, text), optional paragraph, optional code block)
# ----------------------------------------------------------------------------------------------
def _fmt(value: Any) -> str:
    """Text of one value: n/a, yes/no, 4 significant digits for floats, str otherwise."""
    if value is None:
        return NA
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(_fmt(v) for v in value)
    return str(value)


def _pct(value: float | None) -> str:
    return NA if value is None else f"{100.0 * value:.1f} %"


def _section(title: str, rows: Sequence[tuple[str, Any]] = (), text: str | None = None,
             code: Sequence[str] | None = None, tone: str = "warn") -> dict:
    return {"title": title, "rows": [(label, _fmt(v)) for label, v in rows], "text": text,
            "code": list(code) if code else None, "tone": tone}


def _estimate_section(f: Mapping) -> dict:
    """Production mode's opening: the model's metric on the pool, estimated on the audit sample, with its interval,
    and what cannot be measured without the pool's labels."""
    from .verdict import estimate_line

    e = f["pool_estimate"]
    rows = [("metric", e.get("metric")), ("estimate on the audit sample", e.get("value")),
            (f"{100 * e.get('confidence', 0.9):g} % interval", None if e.get("ci_low") is None else
             f"[{_fmt(e['ci_low'])}, {_fmt(e['ci_high'])}]"), ("labelled audit graphs", e.get("n_audit")),
            ("interval method", e.get("method")), ("mean loss on the audit sample", e.get("loss")),
            ("τ-weighted training loss on the labelled coreset", f.get("coreset_loss_weighted"))]
    rows += [(f"{k.replace('_', ' ')}", v) for k, v in (f.get("not_measurable") or {}).items()]
    if e.get("note"):
        rows.append(("note", e["note"]))
    text = estimate_line(e)
    tone = "ok"
    k = f.get("constant_predictor")
    if k:
        from .verdict import constant_line

        rows += [(f"constant predictor ({k.get('predictor')}) on the audit sample", k.get("value")),
                 (f"model vs predicting {k.get('compared_with')}", "worse" if k.get("worse") else
                  ("better" if k.get("worse") is False else "not compared"))]
        text += " " + constant_line(k)
        tone = "warn" if k.get("worse") else tone
    if f.get("control"):
        from .verdict import control_line

        c = f["control"]
        rows += [("Random control: verdict", c.get("verdict")), ("Random control: difference (strategy − Random)",
                  c.get("difference")), ("Random control: interval", None if c.get("low") is None else
                                         f"[{_fmt(c['low'])}, {_fmt(c['high'])}]"),
                 ("Random control: uniform labels used (audit + control arm)", c.get("n")),
                 ("Random control: folds", c.get("folds")), ("Random control: labels per arm", c.get("n_arm")),
                 ("Random control: uniform labels a decision needs", c.get("labels_needed")),
                 ("Random control: rule", c.get("rule") or c.get("note"))]
        text += " " + control_line(c)
    return _section("Pool estimate (production: the audit sample)", rows, text=text, tone=tone)


def _predictions_section(f: Mapping) -> dict:
    """Production: the audit sample's parity with the lab, the pool's predictions and its in-domain share."""
    p = f["predictions"]
    d, a = p.get("domain") or {}, p.get("audit") or {}
    rows = [("predictions file", p.get("file")), ("pool molecules predicted", p.get("rows")), ("model", p.get("model")),
            ("property predicted (labels.name)", p.get("quantity")), ("interval confidence", _pct(p.get("confidence")))]
    if d.get("computed"):
        n_in, n_out = d.get("in_domain"), d.get("out_of_domain")
        share = d.get("share_in_domain")
        rows += [("in the applicability domain", f"{n_in} of {n_in + n_out} ({_pct(share)})"),
                 ("out of the applicability domain",
                  f"{n_out} of {n_in + n_out} ({_pct(None if share is None else 1 - share)})"),
                 ("domain threshold (similarity to the nearest trained molecule)", d.get("threshold")),
                 ("domain similarity", d.get("similarity")), ("domain threshold rule", d.get("rule"))]
        text = (f"{_pct(share)} of the pool ({n_in} of {n_in + n_out} molecules) lies inside the model's "
                "applicability domain; the plots show the lab's audit measurements against the predictions and how "
                "the pool's predictions are distributed.")
    else:
        rows.append(("applicability domain", d.get("why") or "not computed"))
        text = "No applicability domain: " + (d.get("why") or "not computed") + "."
    if a.get("n"):
        rows += [("audit sample: molecules measured by the lab", a.get("n")),
                 ("audit sample: RMSE / MAE of the predictions", None if a.get("rmse") is None else
                  f"{_fmt(a['rmse'])} / {_fmt(a['mae'])}")]
        if a.get("covered") is not None:
            rows.append(("audit sample: measurements inside their interval",
                         f"{a['covered']} of {a['n']} ({_pct(a.get('coverage'))}); the intervals are calibrated on "
                         "these molecules, so this is not an out-of-sample coverage"))
    rows += [(f"audit sample: measured {y}, predicted {q}", n) for y, q, n in p.get("confusion") or []]
    if p.get("parity_note"):
        rows.append(("parity plot", p["parity_note"]))
    sec = _section("Predictions: the audit sample and the pool", rows, text=text, tone="note")
    sec["plots"] = [tuple(x) for x in p.get("plots") or []]
    return sec


def _hits_section(h: Mapping) -> dict:
    """``select.goal`` maximize / minimize: the best measured so far (compound ids when ingested) and the predicted
    best not yet measured with their intervals (:func:`tmdlib.reporting.hits.hit_facts`)."""
    word = "lowest" if h.get("goal") == "minimize" else "highest"
    rows = [(f"measured #{i + 1}: {nm or ''} (graph {g})".replace(":  (", ": ("), v)
            for i, (g, nm, v) in enumerate(h["measured"])]
    rows += [(f"predicted #{i + 1}: {nm or ''} (graph {g})".replace(":  (", ": ("),
              f"{_fmt(p)}" + ("" if lo is None else f" [{_fmt(lo)}, {_fmt(hi)}]"))
             for i, (g, nm, p, lo, hi) in enumerate(h["predicted"])]
    text = (f"The {word} values measured so far ({len(h['measured'])} of {h['n_measured']} labelled molecules) and "
            f"the {word} predictions among the {h['n_unmeasured']} molecules not yet measured, with their prediction "
            "intervals: the next round's candidates.")
    return _section(hit_title(h), rows, text=text, tone="note")


def _verdict_section(f: Mapping) -> dict:
    """The report's opening: is the bound informative or vacuous (:mod:`tmdlib.reporting.verdict`)?"""
    b = f.get("bound") or {}
    v = coreset_verdicts(b)
    n = node_verdicts(f.get("node_bound"), b)
    lemma = v["lemma"]  # the headline (the section's text); the rows add the other bounds and the numbers
    rows = []
    if v["with_labels"] is not None:
        rows.append(("Lemma 3.2 with the label term", v["with_labels"]["sentence"]))
    rows.append(("Corollary 3.3 (excess training loss)", v["corollary"]["sentence"]))
    if n is not None:
        rows.append(("Corollary 4.1 (node subsampling, loss gap)", n["lemma"]["sentence"]))
        if n["corollary"] is not None:
            rows.append(("Corollary 4.1 (node subsampling, excess loss)", n["corollary"]["sentence"]))
    source = {"full_model_train_loss": "mean training loss of the full-data model (bound.full_model_train_loss)",
              "ln2": "ln 2, the BCE of the constant ½ predictor (no full-data loss recorded)",
              "trivial_predictor": b.get("loss_scale_what") or "the trivial predictor's loss"}
    task = (f.get("task") or {}).get("type", "binary")
    rows += [("task", task), (f"loss scale ({_loss_name(f)} loss)", lemma["loss_scale"]),
             ("loss scale: what it is", source[lemma["loss_scale_source"]]),
             ("c·ε / loss scale", lemma["ratio"])]
    if TRIVIAL_PREDICTOR.get(task) == "constant":  # BCE tasks: the constant ½ predictor's ln 2
        rows += [("ln 2 (constant ½ predictor)", lemma["ln2"]), ("c·ε below ln 2", lemma["below_ln2"])]
    return _section("Verdict", rows, text=lemma["sentence"],
                    tone="ok" if lemma["verdict"] == "informative" else "warn")


def _run_section(f: Mapping) -> dict:
    p, files = f.get("provenance") or {}, f.get("files") or {}
    dirty = p.get("git_dirty")
    return _section("Run", [
        ("dataset", f.get("dataset")), ("generated (UTC)", f.get("generated_utc")),
        ("git sha", p.get("git_sha")), ("uncommitted changes", dirty),
        ("MLflow train run id", p.get("mlflow_run_id") or "not logged"),
        ("MLflow experiment id", p.get("mlflow_experiment_id")), ("MLflow tracking URI", p.get("tracking_uri")),
        ("report (Markdown)", files.get("markdown")), ("report (HTML)", files.get("html")),
    ], text=("WARNING: the working tree had uncommitted changes; the git sha alone does not reproduce this run."
             if dirty == "true" else None))


def _data_section(f: Mapping) -> dict:
    d = f.get("data") or {}
    return _section("Dataset", [
        ("graph store", d.get("graph_store")), ("graph store sha256 (file)", d.get("store_sha256")),
        ("content sha256 (graph ids, node features, edges)", d.get("content_sha256")),
        ("graphs", d.get("graphs")), ("nodes", d.get("nodes")),
        ("TMD matrix sha256", d.get("matrix_sha256")), ("TMD depth", d.get("depth")),
        ("TMD level weights", d.get("weights")),
    ])


def _graphs_section(f: Mapping) -> dict:
    g = f.get("graphs") or {}
    return _section("Graphs kept and dropped", [
        ("graphs in the dataset", g.get("dataset")), ("training pool (selection chooses from these)", g.get("total")),
        ("kept (coreset medoids, labelled and trained on)", g.get("kept")), ("dropped", g.get("dropped")),
        ("fraction kept", _pct(g.get("fraction_kept"))), ("held-out test graphs", g.get("test")),
        ("selection method", g.get("method")), ("selection fraction", g.get("fraction")),
        ("seed", g.get("seed")),
    ])


def _nodes_section(f: Mapping) -> dict:
    if f.get("node_subsampling"):  # off (nodes.method): said once, here
        return _section("Nodes kept and dropped", text=f"{f['node_subsampling']}.", tone="note")
    rows = []
    for key, what in (("nodes", "all graphs"), ("nodes_selected", "selected graphs (node-subsampled model)")):
        n = f.get(key) or {}
        rows += [(f"{what}: nodes", n.get("total")), (f"{what}: kept", n.get("kept")),
                 (f"{what}: dropped", n.get("dropped")), (f"{what}: fraction kept", _pct(n.get("fraction_kept")))]
    return _section("Nodes kept and dropped", rows)


def _bound_section(f: Mapping) -> dict:
    b, t = f.get("bound") or {}, f.get("test") or {}
    v = coreset_verdicts(b)
    n = f.get("node_bound") or {}
    nv = node_verdicts(n, b)
    # whether a bound holds is only ever said together with its verdict (never a bare "holds: yes")
    ref = f.get("reference") or {}
    rows = [("task", (f.get("task") or {}).get("type", "binary")), ("training loss", _loss_name(f)),
            ("M (the loss's Lipschitz constant in the model output)", b.get("M", 1.0)),
            ("ε (medoid objective, TMD units)", b.get("epsilon")), ("c (stability constant, M included)", b.get("c")),
            ("certified mode (spectral-norm budget, c known before training)", b.get("certified")),
            ("certified constraint (spectral norms within the budget)", b.get("constraint_ok")),
            ("c·ε: bound on |coreset loss − full loss| (Lemma 3.2)", b.get("c_epsilon")),
            ("observed gap", b.get("gap_observed")),
            ("full-data reference's mean training loss", b.get("full_model_train_loss")),
            ("full-data reference: epochs", ref.get("epochs")),
            ("full-data reference usable (not a model that learned nothing)",
             None if not ref else (ref.get("usable", not ref.get("degenerate")) if not ref.get("why") else
                                   "no: " + "; ".join(ref.get("why") or []))),
            ("full-data reference: notes", "; ".join(ref.get("notes") or []) or None),
            ("Lemma 3.2 (observed gap ≤ c·ε)", v["lemma"]["holds_text"]),
            ("2c·ε: bound on the excess training loss (Cor. 3.3)", b.get("erm_bound")),
            ("observed excess loss", b.get("excess_loss")),
            ("Corollary 3.3 (observed excess loss ≤ its bound)", v["corollary"]["holds_text"])]
    if v["with_labels"] is not None:
        rows += [("c·ε + label term bound", b.get("bound_with_labels")),
                 ("bound with labels (observed gap ≤ c·ε + label term)", v["with_labels"]["holds_text"])]
    rows += [(f"test {t.get('metric', 'metric')}: coreset model", t.get("coreset_model")),
             (f"test {t.get('metric', 'metric')}: full-data model", t.get("full_model"))]
    rows += [(f"test {k} (coreset model)", v) for k, v in (t.get("coreset_metrics") or {}).items()
             if k not in (t.get("metric"), "n")]
    rows += [] if f.get("node_subsampling") else [
        ("nodes: mean ε_i (Cor. 4.1)", n.get("epsilon_mean")), ("nodes: c·mean ε_i", n.get("bound")),
        ("nodes: observed gap", n.get("gap_observed")),
        ("nodes: observed gap ≤ c·mean ε_i", nv["lemma"]["holds_text"] if nv else None),
        ("nodes: 2c·mean ε_i", n.get("erm_bound")), ("nodes: observed excess loss", n.get("excess_loss"))]
    if f.get("mode") == "production":  # say once what a pool without labels cannot give, not a row of n/a each
        rows = [r for r in rows if _fmt(r[1]) != NA] + [(
            "not measurable in production", "the observed gap, the full-data reference, the excess loss and the test "
            "metric need every pool member's label: the audit sample's estimate (above) stands for them")]
    return _section("ε and the bound", rows)


def _loss_name(f: Mapping) -> str:
    """The loss the model was trained with: the bound's, else the task head's (a regression run's Huber or MSE), else
    the binary default BCE."""
    return (f.get("bound") or {}).get("loss") or (f.get("task_head") or {}).get("loss") or "bce"


def _labels_section(f: Mapping) -> dict:
    lab = f.get("labels") or {}
    return _section("Labels requested versus the full set", [
        ("labels requested in this run", lab.get("requested")),
        ("labels reused from the ledger (paid before)", lab.get("reused")),
        ("labels training used", lab.get("used")), ("full set: graphs in the training pool", lab.get("pool")),
        ("graphs never labelled", lab.get("not_needed")),
        ("labelling cost saved (1 − requested / pool)", _pct(lab.get("fraction_saved"))),
        ("saved by the coreset alone (1 − used / pool)", _pct(lab.get("fraction_saved_by_coreset"))),
        ("label source", lab.get("source")), ("benchmark stand-in labels", lab.get("benchmark_mode")),
        ("requested graphs without an answer yet (they stay requested)", lab.get("missing")),
        ("... of which", ", ".join(f"{k}: {v}" for k, v in (lab.get("missing_by_purpose") or {}).items()) or None),
        ("replicates spread beyond labels.max_spread (flagged)", lab.get("flagged_replicates")),
        ("values that changed across rounds (conflicts)", lab.get("conflicts")),
        ("censored values dropped (labels.censored)", lab.get("censored_dropped")),
    ], text=lab.get("warning"))


def _molecules_section(f: Mapping) -> dict:
    """The selected molecules, largest clusters first: a table (both formats) and RDKit depictions (HTML)."""
    m = f.get("molecules")
    title = "Selected molecules"
    if not m or m.get("omitted") or not m.get("shown"):
        why = (m or {}).get("omitted") or "no molecules recorded for this run"
        return _section(title, text=f"Omitted: {why}.", tone="note")
    shown, total = list(m["shown"]), int(m.get("total") or len(m["shown"]))
    more = total - len(shown)
    text = (f"The {total} selected molecules, largest clusters first (τ: the training graphs each one stands for; "
            "label status: requested from the labelling team in this run, or reused from the label ledger)"
            + (f"; the first {len(shown)} are shown." if more > 0 else "."))
    sec = _section(title, text=text, tone="note")
    sec["table"] = {"header": ["rank", "graph id", "τ", "label status", "SMILES"],
                    "rows": [[_fmt(r.get("rank")), _fmt(r.get("graph_id")), _fmt(r.get("tau")),
                              "requested" if r.get("requested") else "reused (ledger)", _fmt(r.get("smiles"))]
                             for r in shown],
                    "code_columns": [4]}
    sec["figures"] = [(f"#{_fmt(r.get('rank'))}: graph {_fmt(r.get('graph_id'))}, τ = {_fmt(r.get('tau'))}",
                       _fmt(r.get("smiles")), r.get("svg")) for r in shown]
    if more > 0:
        sec["more"] = (f"... and {more} more (every selected graph: selection.json; the ones requested for "
                       "labelling: label_requests.csv / label_requests.sdf).")
    return sec


def _table_section(title: str, mapping: Mapping | None, empty: str) -> dict:
    items = sorted((mapping or {}).items())
    return _section(title, items, text=None if items else empty)


def _lock_section(f: Mapping) -> dict:
    lock = f.get("lock")
    rows = [(f"{stage} {kind}: {path}", md5) for stage, entry in sorted((lock or {}).items())
            for kind in ("deps", "outs") for path, md5 in sorted((entry.get(kind) or {}).items())]
    return _section("dvc.lock entries of this dataset", rows,
                    text=None if lock else "No dvc.lock entry: the run was made outside `dvc repro`; "
                                           "see the md5 of the files read above.")


def _checks_section(f: Mapping) -> dict:
    rows = [(what, ("ok" if ok else "MISMATCH") + (f" ({detail})" if detail else ""))
            for what, ok, detail in f.get("checks") or []]
    return _section("Consistency checks", rows)


def report_sections(facts: Mapping) -> list[dict]:
    """The report's sections, each ``{"title", "rows": [(label, text)], "text", "code"}`` (texts unescaped).

    Parameters
    ----------
    facts : mapping
        The facts described in the module docstring.

    Returns
    -------
    list of dict
        In reading order: (production) the pool estimate and the predictions (``plots``: ``[(file name,
        caption)]`` of the images the section shows), the verdict on the bound (informative or vacuous, with the
        numbers), run, dataset,
        graphs, nodes, bound, labels, selected molecules, label manifest, checks, parameters, files read,
        dvc.lock entries, reproduce.  The molecules section also has ``table`` (``header``, ``rows``,
        ``code_columns``), ``figures`` (``(caption, alt text, SVG or None)``) and ``more`` (the line saying how
        many were not shown), when there are molecules.
    """
    p = facts.get("provenance") or {}
    head = [_estimate_section(facts)] if facts.get("pool_estimate") else []
    head += [_predictions_section(facts)] if facts.get("predictions") else []
    head += [_hits_section(facts["predictions"]["hits"])] if (facts.get("predictions") or {}).get("hits") else []
    return head + [
        _verdict_section(facts), _run_section(facts), _data_section(facts), _graphs_section(facts), _nodes_section(facts),
        _bound_section(facts), _labels_section(facts), _molecules_section(facts),
        _table_section("Label manifest (manifest.json)", facts.get("manifest"), "no manifest entries"),
        _checks_section(facts),
        _table_section("Parameters (params.yaml)", facts.get("params"), "no parameters recorded"),
        _table_section("Files read (md5 as recorded by DVC)", facts.get("inputs"), "no files recorded"),
        _lock_section(facts),
        _section("Reproduce", code=reproduce_commands(str(facts.get("dataset")), p.get("git_sha", NA),
                                                      p.get("mlflow_run_id"), p.get("tracking_uri"))),
    ]


# ----------------------------------------------------------------------------------------------
# Rendering
# ----------------------------------------------------------------------------------------------
def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _md_code(text: str) -> str:
    """A table cell as a code span (SMILES: ``[C@@H](O)`` must not read as a link); backslashes stay literal."""
    if "`" in text:
        return _md_cell(text)
    return "`" + text.replace("|", "\\|").replace("\r", " ").replace("\n", " ") + "`"


def _md_table(table: Mapping) -> list[str]:
    code = set(table.get("code_columns") or ())
    out = ["| " + " | ".join(_md_cell(h) for h in table["header"]) + " |",
           "|" + "---|" * len(table["header"])]
    out += ["| " + " | ".join(_md_code(c) if k in code else _md_cell(c) for k, c in enumerate(row)) + " |"
            for row in table["rows"]]
    return out + [""]


def render_markdown(facts: Mapping, images: Sequence[tuple[str, str, bytes]] = ()) -> str:
    """The report as Markdown.

    Parameters
    ----------
    facts : mapping
        The facts described in the module docstring.
    images : sequence of (file name, caption, PNG bytes)
        Plots, referenced by their file name (relative: they sit next to the report).

    Returns
    -------
    str
        Markdown text ending with a newline.
    """
    out = [f"# tmdsub audit report: {_md_cell(str(facts.get('dataset')))}", ""]
    sections = report_sections(facts)
    have, inline = {name for name, _, _ in images}, _inline_plots(sections)
    for s in sections:
        out += [f"## {s['title']}", ""]
        if s["text"]:
            out += [_md_cell(s["text"]), ""]
        out += [f"![{_md_cell(caption)}]({name})\n" for name, caption in s.get("plots") or () if name in have]
        if s["rows"]:
            out += ["| fact | value |", "|---|---|"]
            out += [f"| {_md_cell(label)} | {_md_cell(value)} |" for label, value in s["rows"]] + [""]
        if s.get("table"):
            out += _md_table(s["table"])
        if s.get("more"):
            out += [_md_cell(s["more"]), ""]
        if s["code"]:
            out += ["```bash", *s["code"], "```", ""]
    rest = [(name, caption) for name, caption, _ in images if name not in inline]
    if rest:
        out += ["## Plots", ""]
        out += [f"![{_md_cell(caption)}]({name})\n" for name, caption in rest]
    return "\n".join(out).rstrip("\n") + "\n"


_CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:72em;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;width:100%}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f4f4f4;font-weight:normal;width:40%}td{font-family:ui-monospace,monospace;word-break:break-all}
pre{background:#f4f4f4;padding:.8em;overflow-x:auto}.warn{color:#a00;font-weight:bold}
.ok{color:#2b8a3e;font-weight:bold}
img{max-width:100%;border:1px solid #ddd}figure{margin:1em 0}
.mols{display:flex;flex-wrap:wrap;gap:.6em;margin:.5em 0 1.5em}.mols figure{margin:0;width:202px}
.mols figcaption{font-size:.85em}table.wide th{width:auto;font-weight:bold}
.nodepict{width:200px;height:150px;border:1px solid #ddd;color:#a00}"""

# No scripts, no fetches: only inline styles and data: images may load.
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def _inline_plots(sections: Sequence[Mapping]) -> set:
    """File names of the images a section shows itself (not repeated under "Plots")."""
    return {name for s in sections for name, _ in s.get("plots") or ()}


def _html_figure(name: str, caption: str, png: bytes) -> str:
    esc = html.escape
    uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return (f'<figure><img src="{uri}" alt="{esc(caption)}" title="{esc(name)}">'
            f"<figcaption>{esc(caption)}</figcaption></figure>")


def _html_section(s: Mapping, pngs: Mapping[str, bytes] | None = None) -> list[str]:
    esc = html.escape
    out = [f"<section><h2>{esc(s['title'])}</h2>"]
    if s["text"]:
        out.append(f'<p class="{esc(s.get("tone") or "warn")}">{esc(s["text"])}</p>')
    out += [_html_figure(name, caption, (pngs or {})[name]) for name, caption in s.get("plots") or ()
            if name in (pngs or {})]
    if s["rows"]:
        out.append("<table><tbody>")
        out += [f'<tr><th scope="row">{esc(label)}</th><td>{esc(value)}</td></tr>' for label, value in s["rows"]]
        out.append("</tbody></table>")
    if s.get("figures"):
        out.append('<div class="mols">')
        for caption, alt, svg in s["figures"]:
            pic = ('<div class="nodepict">no depiction: RDKit cannot parse this SMILES</div>' if not svg else
                   f'<img src="data:image/svg+xml;base64,{base64.b64encode(svg.encode("utf-8")).decode("ascii")}" '
                   f'alt="{esc(alt)}" title="{esc(alt)}">')
            out.append(f"<figure>{pic}<figcaption>{esc(caption)}</figcaption></figure>")
        out.append("</div>")
    if s.get("table"):
        t = s["table"]
        head = "".join(f"<th>{esc(h)}</th>" for h in t["header"])
        out.append(f'<table class="wide"><thead><tr>{head}</tr></thead><tbody>')
        out += ["<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in t["rows"]]
        out.append("</tbody></table>")
    if s.get("more"):
        out.append(f"<p>{esc(s['more'])}</p>")
    if s["code"]:
        out.append(f"<pre><code>{esc(chr(10).join(s['code']))}</code></pre>")
    out.append("</section>")
    return out


def render_html(facts: Mapping, images: Sequence[tuple[str, str, bytes]] = ()) -> str:
    """The report as one self-contained static HTML page (no scripts, plots embedded as data URIs).

    Parameters
    ----------
    facts : mapping
        The facts described in the module docstring.
    images : sequence of (file name, caption, PNG bytes)
        Plots to embed, in order.

    Returns
    -------
    str
        An HTML5 document.
    """
    esc = html.escape
    title = f"tmdsub audit report: {facts.get('dataset')}"
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f'<meta http-equiv="Content-Security-Policy" content="{esc(_CSP)}">',
           f"<title>{esc(title)}</title><style>{_CSS}</style></head><body><main>", f"<h1>{esc(title)}</h1>"]
    sections = report_sections(facts)
    pngs, inline = {name: png for name, _, png in images}, _inline_plots(sections)
    for s in sections:
        out += _html_section(s, pngs)
    rest = [x for x in images if x[0] not in inline]
    if rest:
        out.append("<section><h2>Plots</h2>")
        out += [_html_figure(name, caption, png) for name, caption, png in rest]
        out.append("</section>")
    out += ["</main></body></html>", ""]
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------
# Plot
# ----------------------------------------------------------------------------------------------
_KEPT_COLOURS = ("#2b8a3e", "#94d82d")
_DROPPED_COLOUR = "#ced4da"


def counts_png(bars: Sequence[tuple[str, Sequence[tuple[str, int]]]], title: str = "") -> bytes:
    """Horizontal bars of what was kept and what was dropped, as shares of each bar's total.

    Parameters
    ----------
    bars : sequence of (label, parts)
        One bar per entry; ``parts`` are ``(name, count)`` pairs, the last one being what was dropped (grey),
        e.g. ``("labels", [("requested", 12), ("reused", 3), ("not needed", 135)])``.
    title : str
        Figure title.

    Returns
    -------
    bytes
        A PNG image (matplotlib's Agg canvas; no global pyplot state).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 0.9 + 0.7 * len(bars)), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for row, (_, parts) in enumerate(bars):
        total = sum(c for _, c in parts) or 1
        left = 0.0
        for k, (_, count) in enumerate(parts):
            colour = _DROPPED_COLOUR if k == len(parts) - 1 else _KEPT_COLOURS[k % len(_KEPT_COLOURS)]
            share = 100.0 * count / total
            ax.barh(row, share, left=left, color=colour, edgecolor="white")
            left += share
    ax.set_yticks(range(len(bars)))
    ax.set_yticklabels([f"{label}\n" + ", ".join(f"{c} {n}" for n, c in parts) for label, parts in bars], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of the total")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()
