"""The audit report's facts assembled from what the audit stage read (:mod:`tmdlib.reporting.audit` renders them).

The caller reads the run's files (the JSON documents, the selection, the graph store's counts, the node subsets, the
label requests, ``dvc.lock``, ``params.yaml``, the MLflow run) and passes their contents; :func:`report_facts`
builds the one mapping the Markdown and HTML pages are rendered from.  Nothing here reads a file.
"""
from __future__ import annotations

from typing import Mapping

from . import audit

__all__ = ["report_facts", "counts_plot", "report_pages", "REPORT_MD", "REPORT_HTML", "COUNTS_PNG", "BOUND_PNG"]

#: The report's files, in the folder the caller chooses (the pages link the plots by these names).
REPORT_MD, REPORT_HTML, COUNTS_PNG, BOUND_PNG = "report.md", "report.html", "counts.png", "bound_vs_gap.png"

#: The keys of ``metrics.json`` the report shows as they are (None when a run lacks one).
METRIC_KEYS = ("pool_estimate", "control", "constant_predictor", "not_measurable", "coreset_loss_weighted",
               "task", "reference", "task_head")


def report_facts(dataset: str, docs: Mapping, sel: Mapping, store: Mapping, read: Mapping) -> dict:
    """Every fact of the audit report (:mod:`tmdlib.reporting.audit`'s schema).

    Parameters
    ----------
    dataset : str
        The dataset's name.
    docs : mapping
        The run's JSON documents by key: ``tmd_meta``, ``manifest``, ``labels_meta``, ``train_info``, ``metrics``,
        ``metrics_nodes``.
    sel : mapping
        ``selection.json``, checked (``medoids``, ``tau``, ``train_ids``, ``test_ids``, ...).
    store : mapping
        The graph store's facts: ``graph_store``, ``store_sha256``, ``content_sha256``, ``graphs``, ``nodes``.
    read : mapping
        What else was read: ``generated_utc`` (str), ``provenance`` (git and MLflow run), ``nodes`` (the pair
        ``(all, selected)`` of :func:`tmdlib.reporting.audit.node_facts`), ``requests`` (label request rows),
        ``molecules`` (:func:`tmdlib.reporting.audit.selected_molecules`), ``store_checks``
        (:func:`tmdlib.reporting.audit.store_checks`' rows), ``selection_sha256``, ``node_line`` (the line of a
        run whose node subsampling was off, else None), ``params`` (flat ``params.yaml``), ``inputs``
        (``{"dvc.md5.<path>": md5}``), ``lock`` (``{"<stage>@<dataset>": md5s}`` of ``dvc.lock``).

    Returns
    -------
    dict
        The report's facts; ``lock`` leaves out the audit stage's own entries (None when nothing is left).
    """
    meta, metrics, rows = docs["tmd_meta"], docs["metrics"], read["requests"]
    data = {**store, "matrix_sha256": meta.get("matrix_sha256"), "depth": meta.get("depth"),
            "weights": meta.get("weights")}
    nodes_all, nodes_sel = read["nodes"]
    return {
        "dataset": dataset, "generated_utc": read["generated_utc"], "provenance": read["provenance"],
        "data": data, "graphs": audit.graph_facts(sel, store["graphs"]), "nodes": nodes_all,
        "nodes_selected": nodes_sel,
        "bound": {"certified": metrics.get("certified"), **(metrics.get("bound") or {})},
        "test": metrics.get("test") or {}, "mode": metrics.get("mode", "benchmark"),
        **{key: metrics.get(key) for key in METRIC_KEYS},
        "node_bound": docs["metrics_nodes"].get("nodes") or {},
        "node_subsampling": read["node_line"],
        "labels": audit.label_facts(docs["manifest"], docs["labels_meta"], rows, len(sel["train_ids"])),
        "molecules": read["molecules"],
        "manifest": audit.scalars(docs["manifest"]),
        "checks": list(read["store_checks"]) + audit.consistency_checks(docs, data, read["selection_sha256"], rows),
        "params": read["params"], "inputs": {k.removeprefix("dvc.md5."): v for k, v in read["inputs"].items()},
        "lock": {k: v for k, v in read["lock"].items() if not k.startswith("audit@")} or None,
    }


def counts_plot(facts: Mapping) -> bytes:
    """PNG of graphs, nodes and labels kept versus dropped (:func:`tmdlib.reporting.audit.counts_png` of
    :func:`~tmdlib.reporting.audit.counts_bars`), titled with the dataset."""
    return audit.counts_png(audit.counts_bars(facts), title=f"{facts['dataset']}: kept versus dropped")


def report_pages(facts: Mapping, bound_plot: bytes, extra: list | None = None) -> dict:
    """Every file of the audit report, rendered: the plots, then ``report.md`` and ``report.html`` (last).

    Parameters
    ----------
    facts : mapping
        :func:`report_facts`' facts, with ``files`` (the pages' own paths, which they name).
    bound_plot : bytes
        The evaluate stage's bound-versus-gap PNG.
    extra : list of tuple, optional
        More ``(file name, caption, PNG)`` plots (production: the predictions'), shown in their section.

    Returns
    -------
    dict
        ``{file name: PNG bytes or text}`` in the order they are to be written (:data:`COUNTS_PNG`,
        :data:`BOUND_PNG`, the extra plots, :data:`REPORT_MD`, :data:`REPORT_HTML`).
    """
    images = [(COUNTS_PNG, "Graphs, nodes and labels kept versus dropped", counts_plot(facts)),
              (BOUND_PNG, "Bound versus observed gap across coreset fractions (evaluate stage)", bound_plot),
              *(extra or [])]
    return {**{name: png for name, _, png in images}, REPORT_MD: audit.render_markdown(facts, images),
            REPORT_HTML: audit.render_html(facts, images)}
