r"""Aggregation of experiment results in the paper's form (Jain et al., Section 5 tables).

Pure functions on lists of dicts (one dict per trained model); no files.  The paper reports, per method and
sampling fraction, the mean test metric over 20 trials with a 95 % confidence interval, marks the best and
second-best method of each column, and counts per method

* **wins** -- columns where the method is best (ties count for every tied method: in the paper's COX2 table
  Random and TMD are both marked best at 1 % and both counted), and
* **fails** -- columns where its mean is below 0.5 (worse than chance on these binary tasks).

Best / second best are decided on the means *as printed* (rounded to ``decimals``, 2 in the paper), so that
the marks agree with the printed numbers; the second best is the next distinct printed value.

The confidence interval is Student's t: :math:`\bar x \pm t_{0.975,\,n-1}\, s / \sqrt n` with the sample
standard deviation :math:`s` (``ddof = 1``); NaN half-width for :math:`n < 2`.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Iterable, Mapping, Sequence

import numpy as np

__all__ = ["mean_ci", "aggregate", "column_marks", "wins_fails", "format_cell", "markdown_table",
           "METHOD_LABELS", "plot_curves"]

METHOD_LABELS = {"tmd": "TMD", "random": "Random", "feature": "Feature", "wl": "WL", "rw": "RW",
                 "kcore": "k-cores", "doscond": "DosCond (labels)", "kidd": "KiDD (labels)",
                 "doscond-nolabel": "DosCond (no labels)", "kidd-nolabel": "KiDD (no labels)"}


def mean_ci(values: Iterable[float], confidence: float = 0.95) -> tuple[float, float, int]:
    r"""``(mean, half_width, n)`` of the finite ``values``; half-width :math:`t_{(1+c)/2,\,n-1}\,s/\sqrt n`.

    NaN values are dropped (e.g. ROC-AUC of a one-class test set).  ``n = 0`` gives ``(nan, nan, 0)``,
    ``n = 1`` ``(x, nan, 1)``.
    """
    from scipy.stats import t

    x = np.asarray([v for v in values if v is not None and math.isfinite(float(v))], dtype=np.float64)
    n = int(x.size)
    if n == 0:
        return float("nan"), float("nan"), 0
    mean = float(x.mean())
    if n < 2:
        return mean, float("nan"), 1
    half = float(t.ppf(0.5 + confidence / 2.0, n - 1) * x.std(ddof=1) / math.sqrt(n))
    return mean, half, n


def aggregate(rows: Iterable[Mapping], by: Sequence[str] = ("dataset", "kind", "arch", "epochs", "method", "fraction"),
              value: str = "value", confidence: float = 0.95) -> dict[tuple, tuple[float, float, int]]:
    """``{group key: (mean, half_width, n)}`` of ``value`` over rows grouped by the ``by`` columns."""
    groups: dict[tuple, list[float]] = defaultdict(list)
    for r in rows:
        key = tuple(round(float(r[c]), 6) if c == "fraction" else r[c] for c in by)
        groups[key].append(float(r[value]) if r.get(value) is not None else float("nan"))
    return {k: mean_ci(v, confidence) for k, v in groups.items()}


def column_marks(means: Mapping[str, float], decimals: int = 2) -> dict[str, str | None]:
    """``{method: "best" | "second" | None}`` for one column (one fraction) of means.

    Compared as printed (rounded to ``decimals``); ties share a mark; NaN means get no mark.
    """
    printed = {m: round(v, decimals) for m, v in means.items() if v is not None and math.isfinite(v)}
    levels = sorted(set(printed.values()), reverse=True)
    marks: dict[str, str | None] = {m: None for m in means}
    for m, v in printed.items():
        if levels and v == levels[0]:
            marks[m] = "best"
        elif len(levels) > 1 and v == levels[1]:
            marks[m] = "second"
    return marks


def wins_fails(table: Mapping[str, Mapping[float, float]], decimals: int = 2,
               fail_below: float = 0.5) -> dict[str, tuple[int, int]]:
    """``{method: (wins, fails)}`` of a ``{method: {fraction: mean}}`` table (the paper's W and F columns).

    Wins are counted over every fraction among the methods that have a mean there (ties: every tied
    method wins); fails are means below ``fail_below``.
    """
    fractions = sorted({f for col in table.values() for f in col})
    wins = {m: 0 for m in table}
    fails = {m: 0 for m in table}
    for f in fractions:
        col = {m: table[m][f] for m in table if f in table[m]}
        for m, mark in column_marks(col, decimals).items():
            wins[m] += mark == "best"
        for m, v in col.items():
            fails[m] += bool(math.isfinite(v) and v < fail_below)
    return {m: (wins[m], fails[m]) for m in table}


def format_cell(mean: float, half: float, mark: str | None = None, decimals: int = 2) -> str:
    """``0.73±0.04`` with ``**bold**`` for the best, ``<u>underline</u>`` for the second best."""
    if mean is None or not math.isfinite(mean):
        return "–"
    text = f"{mean:.{decimals}f}±{half:.{decimals}f}" if half is not None and math.isfinite(half) else f"{mean:.{decimals}f}"
    if mark == "best":
        return f"**{text}**"
    if mark == "second":
        return f"<u>{text}</u>"
    return text


def _pct(f: float) -> str:
    return f"{100 * f:g}%"


def markdown_table(cells: Mapping[str, Mapping[float, tuple[float, float, int]]], methods: Sequence[str],
                   fractions: Sequence[float], paper: Mapping[str, Mapping[float, tuple[float, float]]] | None = None,
                   paper_row: str | Sequence[str] | None = "tmd", decimals: int = 2, fail_below: float = 0.5,
                   unranked: Sequence[str] = ()) -> str:
    """One result table in the paper's form.

    Parameters
    ----------
    cells : ``{method: {fraction: (mean, half_width, n)}}`` -- our results.
    methods, fractions : row and column order.
    paper : ``{method: {fraction: (mean, half_width)}}`` -- the paper's numbers for the same table, if any.
        Adds the columns ``paper W`` / ``paper F`` (recomputed over the same methods from the paper's
        printed means) and, under each of our ``paper_row`` methods (one name or several), a row
        ``<Method> (paper)`` with the paper's values (not ranked).
    unranked : methods shown but neither marked nor counted in W (their F is counted): the labelled
        condensation baselines, which the paper lists apart ("with labels", W "-").
    """
    fractions = [round(float(f), 6) for f in fractions]
    shown = [m for m in methods if m not in unranked]
    means = {m: {f: cells[m][f][0] for f in fractions if f in cells.get(m, {})} for m in methods}
    wf = wins_fails({m: means[m] for m in shown}, decimals, fail_below)
    wf.update({m: ("–", wins_fails({m: means[m]}, decimals, fail_below)[m][1]) for m in methods if m in unranked})
    marks = {f: column_marks({m: means[m][f] for m in shown if f in means[m]}, decimals) for f in fractions}
    pwf = None
    if paper:
        pmeans = {m: {f: paper[m][f][0] for f in fractions if f in paper.get(m, {})} for m in shown if m in paper}
        pwf = wins_fails(pmeans, decimals, fail_below) if pmeans else None
        if pwf is not None:
            pwf.update({m: ("–", wins_fails({m: {f: paper[m][f][0] for f in fractions if f in paper[m]}},
                                            decimals, fail_below)[m][1]) for m in methods if m in unranked and m in paper})
    prows = [paper_row] if isinstance(paper_row, str) else list(paper_row or ())
    head = ["Method"] + [_pct(f) for f in fractions] + ["W", "F", "trials"]
    if pwf is not None:
        head += ["paper W", "paper F"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    for m in methods:
        ns = [cells[m][f][2] for f in fractions if f in cells.get(m, {})]
        row = [METHOD_LABELS.get(m, m)]
        row += [format_cell(*cells[m][f][:2], marks[f].get(m), decimals) if f in cells.get(m, {}) else "–"
                for f in fractions]
        row += [str(wf[m][0]), str(wf[m][1]), (f"{min(ns)}" if ns and min(ns) == max(ns) else
                                               f"{min(ns)}–{max(ns)}" if ns else "0")]
        if pwf is not None:
            row += [str(pwf[m][0]), str(pwf[m][1])] if m in pwf else ["–", "–"]
        lines.append("| " + " | ".join(row) + " |")
        if paper and m in prows and m in paper:
            prow = [f"*{METHOD_LABELS.get(m, m)} (paper)*"]
            prow += [format_cell(*paper[m][f], None, decimals) if f in paper[m] else "–" for f in fractions]
            prow += ["", "", "20"] + (["", ""] if pwf is not None else [])
            lines.append("| " + " | ".join(prow) + " |")
    return "\n".join(lines) + "\n"


def plot_curves(ax, cells: Mapping[str, Mapping[float, tuple[float, float, int]]], methods: Sequence[str],
                paper: Mapping[float, tuple[float, float]] | None = None, title: str = "", ylabel: str = "") -> None:
    """Mean test metric against fraction with CI bands on the matplotlib axes ``ax`` (paper TMD dashed)."""
    lo, hi = [], []
    for m in methods:
        pts = sorted((f, v) for f, v in cells.get(m, {}).items() if math.isfinite(v[0]))
        if not pts:
            continue
        x = np.array([100 * f for f, _ in pts])
        mu = np.array([v[0] for _, v in pts])
        hw = np.array([v[1] if math.isfinite(v[1]) else 0.0 for _, v in pts])
        (line,) = ax.plot(x, mu, marker="o", ms=3, label=METHOD_LABELS.get(m, m), lw=2 if m == "tmd" else 1.2,
                          ls=(0, (4, 2)) if m in ("doscond", "kidd") else "-")  # dashed: uses labels
        ax.fill_between(x, mu - hw, mu + hw, color=line.get_color(), alpha=0.15, lw=0)
        lo.append(mu.min())
        hi.append(mu.max())
    if paper:
        pts = sorted(paper.items())
        ax.errorbar([100 * f for f, _ in pts], [v[0] for _, v in pts], yerr=[v[1] for _, v in pts], color="k",
                    ls="--", lw=1, capsize=2, label="TMD (paper)")
        lo.append(min(v[0] for _, v in pts))
        hi.append(max(v[0] for _, v in pts))
    if lo:  # the means set the view; wide CI bands (few trials) are clipped
        ax.set_ylim(max(0.0, min(lo) - 0.12), min(1.0, max(hi) + 0.12))
    ax.axhline(0.5, color="grey", lw=0.6, ls=":")
    ax.set_xlabel("fraction kept (%)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
