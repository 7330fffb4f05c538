"""Experiment reports in the paper's form: one Markdown page per dataset and the wins / fails summary.

Pure functions of result rows (:func:`tmdlib.experiment._results.read_results`) and of the paper's
transcribed numbers (``reports/paper_results.csv``, read by :func:`read_paper`).
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from ..datasets._registry import metric_for
from ..experiment._grid import ARCHS, CONDENSE_METHODS, GRAPH_METHODS, KINDS, LABELLED_METHODS, NODE_METHODS
from . import tables

#: Row order of graph-subsampling tables: the label-free methods (ranked), then the labelled
#: condensation baselines (shown, not ranked, as in the paper's "with labels" block).
GRAPH_ORDER = GRAPH_METHODS + tuple(m for m in CONDENSE_METHODS if m not in LABELLED_METHODS) + LABELLED_METHODS
#: Methods whose paper row is printed under ours.
PAPER_ROWS = ("tmd",) + CONDENSE_METHODS

KIND_TITLES = {"graph": "Graph subsampling (fraction of the training graphs)",
               "node": "Node subsampling (fraction of each training graph's nodes)"}
ARCH_TITLES = {"gin": "GIN of paper B.2 (3 layers, hidden 128 TU / 256 OGB, add pooling)",
               "gin-wide-mean": "alternative architecture (2x hidden width, mean pooling)"}


def paper_method(method: str, labels: str) -> str:
    """Our method name of a paper row: DosCond / KiDD "with labels" are ``doscond`` / ``kidd``, "without
    labels" ``doscond-nolabel`` / ``kidd-nolabel``; other methods keep their names."""
    if method in ("doscond", "kidd"):
        return method if labels == "with" else f"{method}-nolabel"
    return method


def read_paper(path: str | None) -> dict:
    """``{(dataset, kind, arch): {method: {fraction: (mean, ci)}}}`` of the paper's rows (our method names,
    :func:`paper_method`), plus ``{(dataset, kind, arch): table label}`` under the key ``"_labels"``."""
    out: dict = {"_labels": {}}
    if not path or not Path(path).is_file():
        return out
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r["labels"] == "with" and r["method"] not in ("doscond", "kidd"):
                continue
            key = (r["dataset"], r["kind"], r["arch"])
            method = paper_method(r["method"], r["labels"])
            out.setdefault(key, {}).setdefault(method, {})[round(float(r["fraction"]), 6)] = (
                float(r["mean"]), float(r["ci"]))
            out["_labels"][key] = r["table_label"]
    return out


def _groups(rows: list[dict]) -> list[tuple]:
    order = {k: i for i, k in enumerate(KINDS)}
    aorder = {a: i for i, a in enumerate(ARCHS)}
    return sorted({(r["kind"], r["arch"], int(r["epochs"])) for r in rows},
                  key=lambda g: (order.get(g[0], 9), aorder.get(g[1], 9), g[2]))


def _ranked_wf(means: dict) -> dict:
    """Wins / fails of ``{method: {fraction: mean}}``: label-free methods ranked, labelled ones ``("–", F)``."""
    ranked = {m: v for m, v in means.items() if m not in LABELLED_METHODS}
    out = tables.wins_fails(ranked) if ranked else {}
    for m, v in means.items():
        if m in LABELLED_METHODS:
            out[m] = ("–", tables.wins_fails({m: v})[m][1])
    return out


def dataset_report(name: str, rows: list[dict], paper: dict,
                   matrix_seconds: dict | None = None) -> tuple[str, list[dict], list[tuple]]:
    """Markdown of one dataset, its per-group summaries and, for the plot, ``(title, cells, methods, paper TMD)``.

    ``matrix_seconds``: ``{matrix: seconds}`` of this dataset's distance matrices (computed once per
    dataset), printed beside the per-selection costs.
    """
    metric = rows[0]["metric"] if rows else metric_for(name)
    agg = tables.aggregate(rows)
    eps = tables.aggregate(rows, value="epsilon")
    cost = tables.aggregate([r for r in rows if r.get("select_seconds") is not None], value="select_seconds")
    md = [f"# {name}: test {metric}, mean ± 95 % CI (Student t) over trials\n",
          "Best per column **bold**, second best <u>underlined</u> (compared as printed, 2 decimals), among the "
          "label-free methods; W = columns won (ties count for each), F = columns with mean < 0.5.  `paper W/F`: "
          "the same counts recomputed from the paper's printed means over the same methods.  *Method (paper)* "
          "rows are the paper's rows, not ranked.  DosCond (labels) / KiDD (labels) read the training labels "
          "and a labelled validation set: shown, not ranked (the paper's \"with labels\" block, W \"-\").\n"]
    summaries, panels = [], []
    for kind, arch, epochs in _groups(rows):
        methods = [m for m in (GRAPH_ORDER if kind == "graph" else NODE_METHODS)
                   if any(r["method"] == m and r["kind"] == kind and r["arch"] == arch for r in rows)]
        fractions = sorted({round(r["fraction"], 6) for r in rows if r["kind"] == kind and r["arch"] == arch
                            and r["epochs"] == epochs})
        cells = {m: {f: agg[(name, kind, arch, epochs, m, f)] for f in fractions
                     if (name, kind, arch, epochs, m, f) in agg} for m in methods}
        pkey = (name, kind, arch)
        ptab = paper.get(pkey)
        md.append(f"## {KIND_TITLES[kind]} — {ARCH_TITLES.get(arch, arch)}, {epochs} epochs\n")
        if ptab:
            md.append(f"Paper's numbers: `reports/paper_results.csv`, table `{paper['_labels'][pkey]}`.\n")
        md.append(tables.markdown_table(cells, methods, fractions, ptab, paper_row=PAPER_ROWS,
                                        unranked=LABELLED_METHODS))
        if kind == "graph":
            md.append("\nMean ε = f_TMD(selection; training graphs), the medoid objective of each method's "
                      "selection under TMD (Lemma 3.2's bound is 2·c·ε; not defined for synthetic graphs):\n")
        else:
            md.append("\nMean ε = mean over training graphs of TN(G) − TN(G[S]) = TMD(G, G[S]) (Corollary 4.1):\n")
        md += _method_table(methods, fractions, lambda m, f: eps.get((name, kind, arch, epochs, m, f)), "{:.4g}")
        has_cost = [m for m in methods if any(math.isfinite(cost.get((name, kind, arch, epochs, m, f), (math.nan,))[0])
                                              for f in fractions)]
        if has_cost:
            what = ("k-medoids given the cached distance matrix; Random: the picks; condensation: end to end"
                    if kind == "graph" else "the node subsampling of all graphs")
            md.append(f"\nSelection cost, CPU seconds per selection (mean over trials; {what}):\n")
            md += _method_table(has_cost, fractions, lambda m, f: cost.get((name, kind, arch, epochs, m, f)), "{:.3g}")
            if kind == "graph" and matrix_seconds:
                md.append("Distance matrices, computed once per dataset and shared by every trial and fraction: " +
                          ", ".join(f"{m.upper() if m != 'feature' else 'Feature'} {s:.1f} s"
                                    for m, s in matrix_seconds.items()) + " (wall clock).\n")
        ours = _ranked_wf({m: {f: v[0] for f, v in cells[m].items()} for m in methods})
        theirs = None
        if ptab:
            theirs = _ranked_wf({m: {f: ptab[m][f][0] for f in fractions if f in ptab.get(m, {})}
                                 for m in methods if m in ptab})
        mean_cost = {m: float(np.nanmean([cost[(name, kind, arch, epochs, m, f)][0] for f in fractions
                                          if (name, kind, arch, epochs, m, f) in cost] or [math.nan]))
                     for m in has_cost}
        summaries.append({"dataset": name, "kind": kind, "arch": arch, "epochs": epochs, "ours": ours,
                          "paper": theirs, "trials": min((c[2] for m in methods for c in cells[m].values()),
                                                         default=0),
                          "trials_max": max((c[2] for m in methods for c in cells[m].values()), default=0),
                          "tmd_vs_paper": _tmd_gap(cells.get("tmd", {}), (ptab or {}).get("tmd", {})),
                          "cost": mean_cost,
                          "matrix_seconds": dict(matrix_seconds or {}) if kind == "graph" else {}})
        panels.append((f"{KIND_TITLES[kind].split(' (')[0]}, {arch}, {epochs} ep", cells, methods,
                       (ptab or {}).get("tmd")))
    return "\n".join(md) + "\n", summaries, panels


def _method_table(methods, fractions, get, fmt) -> list[str]:
    """Markdown lines of a method x fraction table of ``get(method, fraction) -> (mean, ...) | None``."""
    out = ["| Method | " + " | ".join(f"{100 * f:g}%" for f in fractions) + " |", "|---|" + "---:|" * len(fractions)]
    for m in methods:
        vals = [get(m, f) for f in fractions]
        out.append(f"| {tables.METHOD_LABELS.get(m, m)} | " + " | ".join(
            fmt.format(v[0]) if v is not None and math.isfinite(v[0]) else "–" for v in vals) + " |")
    out.append("")
    return out


def _tmd_gap(ours: dict, paper: dict) -> dict:
    """Mean of (our TMD mean − paper's TMD mean) over the shared fractions, and how many are within our CI."""
    shared = [f for f in ours if f in paper and math.isfinite(ours[f][0])]
    if not shared:
        return {}
    diffs = [ours[f][0] - paper[f][0] for f in shared]
    inside = sum(abs(ours[f][0] - paper[f][0]) <= (ours[f][1] if math.isfinite(ours[f][1]) else 0) + paper[f][1]
                 for f in shared)
    return {"mean_diff": float(np.mean(diffs)), "overlap": int(inside), "n": len(shared)}


def _trials(s: dict) -> str:
    """``"20"`` or, when the methods differ in trial count, ``"5–20"`` (fewest–most)."""
    lo, hi = s["trials"], s.get("trials_max", s["trials"])
    return f"{lo}" if hi == lo else f"{lo}–{hi}"


def summary_markdown(summaries: list[dict], profile: str) -> str:
    """Wins / fails per method summed over datasets, ours next to the paper's (same methods, same datasets),
    and the selection cost per method beside the once-per-dataset matrix cost (each summary's
    ``matrix_seconds``, set by :func:`dataset_report`; empty for node subsampling, which reads no matrix)."""
    md = [f"# Summary ({profile} profile): wins / fails per method\n",
          "W = columns (fractions) won among the label-free methods, F = columns with mean below 0.5, summed over "
          "the datasets listed.  `paper` = the same counts recomputed from the paper's printed means over the "
          "same methods and datasets (the paper's Table 1 counts all six label-free methods: DosCond, KiDD, "
          "Feature, WL, Random, TMD, on its six datasets).  DosCond / KiDD (labels) use labels: W \"–\".\n"]
    keys = sorted({(s["kind"], s["arch"], s["epochs"]) for s in summaries},
                  key=lambda g: (KINDS.index(g[0]) if g[0] in KINDS else 9, g[1], g[2]))
    for kind, arch, epochs in keys:
        group = [s for s in summaries if (s["kind"], s["arch"], s["epochs"]) == (kind, arch, epochs)]
        present = {m for s in group for m in s["ours"]}
        methods = [m for m in (GRAPH_ORDER if kind == "graph" else NODE_METHODS) if m in present]
        methods += sorted(present - set(methods))
        md.append(f"## {KIND_TITLES[kind]} — {arch}, {epochs} epochs\n")
        head = ["Method"] + [f"{s['dataset']} ({_trials(s)} tr.) W/F" for s in group] + ["total W/F",
                                                                                          "paper total W/F"]
        md.append("| " + " | ".join(head) + " |")
        md.append("|---|" + "---:|" * (len(head) - 1))
        for m in methods:
            row = [tables.METHOD_LABELS.get(m, m)]
            tw = tf = pw = pf = 0
            have_paper = False
            for s in group:
                if m not in s["ours"]:
                    row.append("–")
                    continue
                w, f = s["ours"][m]
                tw, tf = (tw + w if isinstance(w, int) else "–"), tf + f
                cell = f"{w}/{f}"
                if s["paper"] and m in s["paper"]:
                    have_paper = True
                    p_w, p_f = s["paper"][m]
                    pw, pf = (pw + p_w if isinstance(p_w, int) and isinstance(pw, int) else "–"), pf + p_f
                    cell += f" (paper {p_w}/{p_f})"
                row.append(cell)
            row += [f"{tw}/{tf}", f"{pw}/{pf}" if have_paper else "–"]
            md.append("| " + " | ".join(row) + " |")
        gaps = [(s["dataset"], s["tmd_vs_paper"]) for s in group if s["tmd_vs_paper"]]
        if gaps:
            md.append("\nOur TMD vs the paper's TMD row: " + "; ".join(
                f"{d}: mean difference {g['mean_diff']:+.3f}, CIs overlap at {g['overlap']}/{g['n']} fractions"
                for d, g in gaps) + ".")
        costed = [m for m in methods if any(m in s.get("cost", {}) for s in group)]
        if costed:
            md.append("\nSelection cost, CPU seconds per selection (mean over fractions and trials):\n")
            md.append("| Method | " + " | ".join(s["dataset"] for s in group) + " |")
            md.append("|---|" + "---:|" * len(group))
            for m in costed:
                md.append(f"| {tables.METHOD_LABELS.get(m, m)} | " + " | ".join(
                    f"{s['cost'][m]:.3g}" if m in s.get("cost", {}) and math.isfinite(s["cost"][m]) else "–"
                    for s in group) + " |")
            mats = [(s["dataset"], s["matrix_seconds"]) for s in group if s.get("matrix_seconds")]
            if mats:
                md.append("\nk-medoids methods first compute a distance matrix of all graphs, once per dataset "
                          "(wall clock): " + "; ".join(
                              f"{d}: " + ", ".join(f"{k} {v:.1f} s" for k, v in m.items()) for d, m in mats) + ".")
        md.append("")
    return "\n".join(md) + "\n"


def dataset_plot(name: str, rows: list[dict], panels: list) -> bytes:
    """PNG of a dataset's curves: one panel per entry of ``panels`` (:func:`dataset_report`'s third value).

    Parameters
    ----------
    name : str
        The dataset, in each panel's title.
    rows : list of dict
        Its result rows (the first one's ``metric`` labels the y axis).
    panels : list of tuple
        ``(title, cells, methods, paper_tmd)`` each, drawn by :func:`tmdlib.reporting.tables.plot_curves`.

    Returns
    -------
    bytes
        The figure as PNG (110 dpi, width 4.6 inches per panel).
    """
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.6), squeeze=False)
    for ax, (title, cells, methods, ptmd) in zip(axes[0], panels):
        tables.plot_curves(ax, cells, methods, ptmd, title=f"{name}: {title}", ylabel=f"test {rows[0]['metric']}")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, dpi=110, format="png")
    plt.close(fig)
    return buf.getvalue()


def experiment_pages(results: dict, paper: dict, matrix_seconds: dict | None, profile: str) -> tuple[dict, list]:
    """Every page of the experiment's report: per dataset its Markdown (:func:`dataset_report`) and plot
    (:func:`dataset_plot`), and the summary (:func:`summary_markdown`) when there is any.

    Parameters
    ----------
    results : dict
        ``{dataset: rows}``, each with at least one row, in the order the pages are listed.
    paper : dict
        The paper's numbers (:func:`read_paper`).
    matrix_seconds : dict or None
        ``{dataset: {matrix: seconds}}``, what computing each distance matrix took.
    profile : str
        The grid's profile, in the summary.

    Returns
    -------
    tuple
        ``(pages, summaries)``: ``{file name: text or PNG bytes}`` (``<dataset>.md``, ``<dataset>.png``,
        ``summary.md``) and the per-group summaries.
    """
    pages, summaries = {}, []
    for name, rows in results.items():
        text, summ, panels = dataset_report(name, rows, paper, (matrix_seconds or {}).get(name))
        summaries += summ
        pages[f"{name}.md"], pages[f"{name}.png"] = text, dataset_plot(name, rows, panels)
    if summaries:
        pages["summary.md"] = summary_markdown(summaries, profile)
    return pages, summaries
