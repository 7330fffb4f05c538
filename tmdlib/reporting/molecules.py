r"""Pages of the molecules benchmark (:mod:`tmdlib.experiment.molecules`): per-set tables and plots, and the summary
that answers "does labelling a TMD coreset beat what chemists pick?" (pure functions of the result rows).

**Entries.**  For each model family, every picker enters with its own weights (τ for the clustering methods, unit
weights for Random and MaxMin: the *main* entries, the paper's protocol), and a clustering picker's unweighted twin
enters as a variant (``tmd (unweighted)`` ...).  **Cells** are (set, budget) pairs; an entry's value in a cell is
its mean test RMSE over the trials.

**Summary.**  Per model and budget: how many cells each main entry has the lowest mean RMSE in (*wins*); each entry's
mean RMSE relative to Random's, :math:`\frac1D\sum_d \mathrm{RMSE}_{d}/\mathrm{RMSE}^{\mathrm{Random}}_{d}`, with a
95 % confidence interval over the sets (Student t); the selection cost (CPU seconds per pick, the per-set matrices
apart); and the goal: the share of cells at 10–30 % where the TMD coreset beats Random and MaxMin, and whether a
TMD-based entry has the most wins.
"""
from __future__ import annotations

import io
import math
from collections import defaultdict

import numpy as np

__all__ = ["entries", "unweighted_field", "cell_means", "dataset_page", "plot_dataset", "summary_page", "goal",
           "model_title", "molecule_pages"]
GOAL_BUDGETS = (0.1, 0.2, 0.3)
#: The goal's thresholds: share of cells where TMD beats Random and MaxMin (GIN, random forest).
GOAL_SHARE = {"gin": 2 / 3, "rf": 1 / 2}


def model_title(model: str) -> str:
    """A model's name in the pages: its registered ``title`` (:mod:`tmdlib.models`), else the name as written."""
    from .._errors import InputError
    from ..models import get_model

    try:
        return get_model(model).title or model
    except (InputError, ImportError):
        return model


def _models(rows: list[dict]) -> list[str]:
    """The models of the rows in the registry's order (the chemists' fingerprint models first), then any other (a
    user's model) by name."""
    from ..models import model_names

    present = {r["model"] for r in rows}
    known = model_names()
    return [m for m in known if m in present] + sorted(present - set(known))


def _has_tau(method: str) -> bool:
    """Whether the picker gives cluster sizes τ (an unregistered name counts as one that does)."""
    from ..select._registry import get_method

    try:
        return get_method(method).weighted
    except ValueError:
        return True


def _entry(method: str, weighted: bool) -> str:
    return method if (weighted or not _has_tau(method)) else f"{method} (unweighted)"


def entries(rows: list[dict], model: str) -> list[str]:
    """Entry names of a model's rows: main entries first (registry order), then the unweighted variants."""
    names = {_entry(r["method"], r["weighted"]) for r in rows if r["model"] == model}
    main = [n for n in names if "(unweighted)" not in n]
    order = {m: i for i, m in enumerate(("tmd", "random", "maxmin", "leader", "butina", "fp-kmedoids", "scaffold",
                                         "feature", "wl"))}
    key = lambda n: (order.get(n.split(" ")[0], 99), n)  # noqa: E731
    return sorted(main, key=key) + sorted((n for n in names if n not in main), key=key)


def cell_means(rows: list[dict], model: str, metric: str = "rmse") -> dict:
    """``{(dataset, fraction): {entry: (mean, ci95, trials)}}`` of one model."""
    acc: dict = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["model"] != model:
            continue
        v = r.get(metric)
        if v is None or not math.isfinite(float(v)):
            continue
        acc[(r["dataset"], round(float(r["fraction"]), 6))][_entry(r["method"], r["weighted"])].append(float(v))
    out = {}
    for cell, by in acc.items():
        out[cell] = {e: (float(np.mean(v)), _ci(v), len(v)) for e, v in by.items()}
    return out


def _ci(values) -> float:
    """Half-width of the 95 % Student-t confidence interval of the mean (NaN with one value)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size < 2:
        return float("nan")
    from scipy.stats import t

    return float(t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))


def _pct(f: float) -> str:
    return f"{100 * f:g} %"


def _fmt(m: float, ci: float) -> str:
    return f"{m:.3f}" if not math.isfinite(ci) else f"{m:.3f} ± {ci:.3f}"


def dataset_page(name: str, rows: list[dict], seconds: dict | None = None) -> str:
    """Markdown page of one set: per model, mean test RMSE ± 95 % CI over trials per entry and budget (lowest in
    bold), the activity-cliff RMSE, the certificate ε of each picker, and the selection cost."""
    lines = [f"# {name}: which molecules to label", ""]
    r0 = rows[0]
    lines.append(f"Pool (train split) {r0['n_train']} molecules, test {r0['n_test']} ({r0['n_cliff']} in activity "
                 "cliffs). Test RMSE in log units of the measured value; mean ± 95 % CI over trials; lowest mean in "
                 "bold per budget.")
    fr = sorted({round(float(r["fraction"]), 6) for r in rows})
    for model in _models(rows):
        for metric, what in (("rmse", "test RMSE"), ("rmse_cliff", "test RMSE on activity-cliff molecules")):
            cm = cell_means(rows, model, metric)
            ents = entries(rows, model)
            lines += ["", f"## {model_title(model)}: {what}", "",
                      "| picker | " + " | ".join(_pct(f) for f in fr) + " |", "|---|" + "---|" * len(fr)]
            best = {f: min((cm.get((name, f), {}).get(e, (math.inf,))[0], e) for e in ents if "(unweighted)" not in e)
                    for f in fr}
            for e in ents:
                cells = []
                for f in fr:
                    v = cm.get((name, f), {}).get(e)
                    if v is None:
                        cells.append("")
                        continue
                    txt = _fmt(v[0], v[1])
                    cells.append(f"**{txt}**" if best[f][1] == e else txt)
                lines.append(f"| {e} | " + " | ".join(cells) + " |")
    eps: dict = defaultdict(list)
    cost: dict = defaultdict(list)
    for r in rows:
        eps[(r["method"], round(float(r["fraction"]), 6))].append(float(r["epsilon"]))
        cost[r["method"]].append(float(r["select_seconds"]))
    methods = entries([{"model": "x", "method": m, "weighted": True} for m in {r["method"] for r in rows}], "x")
    lines += ["", "## The TMD certificate of each picker's molecules (ε = mean TMD to the nearest pick)", "",
              "| picker | " + " | ".join(_pct(f) for f in fr) + " | CPU s per pick |", "|---|" + "---|" * (len(fr) + 1)]
    for m in methods:
        lines.append(f"| {m} | " + " | ".join(f"{np.mean(eps[(m, f)]):.4g}" if eps[(m, f)] else "" for f in fr)
                     + f" | {np.mean(cost[m]):.3g} |")
    if seconds:
        lines += ["", "Computed once for the set (seconds): " + ", ".join(f"{k} {v:g}" for k, v in sorted(seconds.items()))]
    return "\n".join(lines) + "\n"


def plot_dataset(name: str, rows: list[dict]) -> bytes:
    """PNG: mean test RMSE against the budget, one line per main entry, one panel per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = _models(rows)
    fig, axes = plt.subplots(1, len(models), figsize=(5.2 * len(models), 3.8), squeeze=False)
    fr = sorted({round(float(r["fraction"]), 6) for r in rows})
    for ax, model in zip(axes[0], models):
        cm = cell_means(rows, model)
        for e in entries(rows, model):
            if "(unweighted)" in e and e != "tmd (unweighted)":
                continue
            ys = [cm.get((name, f), {}).get(e, (np.nan,))[0] for f in fr]
            style = dict(lw=2.4, color="black") if e == "tmd" else dict(lw=1.2)
            if e == "tmd (unweighted)":
                style = dict(lw=1.6, color="black", ls="--")
            ax.plot([100 * f for f in fr], ys, marker="o", ms=3, label=e, **style)
        ax.set_xlabel("budget (% of the pool labelled)")
        ax.set_ylabel("test RMSE")
        ax.set_title(f"{name}: {model_title(model)}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def _wins(cm: dict, ents: list[str], f: float, sets: list[str]) -> dict:
    wins = {e: 0 for e in ents}
    for d in sets:
        vals = {e: cm.get((d, f), {}).get(e, (math.inf,))[0] for e in ents}
        if all(math.isinf(v) for v in vals.values()):
            continue
        wins[min(vals, key=lambda e: (vals[e], e))] += 1
    return wins


def unweighted_field(ents: list[str]) -> list[str]:
    """One entry per picker, each trained without τ: its ``(unweighted)`` variant where it has one, its only entry
    where it gives no τ (Random, MaxMin); a picker with τ but no unweighted rows is left out -- the like-for-like
    field when τ-weighting hurts the model (complete only when it holds every picker)."""
    field = []
    for m in [e for e in ents if "(unweighted)" not in e]:
        if f"{m} (unweighted)" in ents:
            field.append(f"{m} (unweighted)")
        elif not _has_tau(m):
            field.append(m)
    return field


def _total_wins(cm: dict, field: list[str], sets: list[str]) -> tuple[dict, bool]:
    """Cells won by each entry of ``field`` over every budget, and whether ``field[0]`` alone has the most."""
    wins: dict = defaultdict(int)
    for f in sorted({k[1] for k in cm}):
        for e, w in _wins(cm, field, f, sets).items():
            wins[e] += w
    top = max(wins.values()) if wins else 0
    return dict(wins), wins.get(field[0], 0) == top and sum(1 for v in wins.values() if v == top) == 1


def complete_cells(rows: list[dict]) -> list[dict]:
    """The rows of the (model, set, budget) cells that hold every entry the model has anywhere: a cell still being
    filled (a run stopped part-way through a set) would compare some pickers and not others."""
    have: dict = defaultdict(set)
    for r in rows:
        have[(r["model"], r["dataset"], round(float(r["fraction"]), 6))].add(_entry(r["method"], r["weighted"]))
    every: dict = defaultdict(set)
    for (model, _, _), ents in have.items():
        every[model] |= ents
    return [r for r in rows if have[(r["model"], r["dataset"], round(float(r["fraction"]), 6))] == every[r["model"]]]


def goal(per_set: dict) -> dict:
    r"""Per model: the share of (set, budget ∈ 10–30 %) cells where the TMD coreset's mean RMSE is below Random's
    and below MaxMin's (against :data:`GOAL_SHARE` where the model has a goal there, ``threshold`` None otherwise),
    and whether the TMD entry has the most wins among the label-free pickers, like for like only: ``tmd``
    (τ-weighted) among the main entries (every picker with its own weights); ``tmd (unweighted)`` among every picker
    trained without τ, counted only when every picker has such rows (``wins`` None otherwise: Random and MaxMin have
    no τ, so the share of cells beating them is like for like either way)."""
    out = {}
    rows = complete_cells([r for rs in per_set.values() for r in rs])
    for model in _models(rows):
        mrows = [r for r in rows if r["model"] == model]
        cm = cell_means(mrows, model)
        sets = sorted({r["dataset"] for r in mrows})
        ents = entries(mrows, model)
        main = [e for e in ents if "(unweighted)" not in e]
        field = unweighted_field(ents)
        res = {"sets": len(sets)}
        for tmd in ("tmd", "tmd (unweighted)"):
            if tmd not in ents:  # the model has no rows of this entry
                continue
            beat = {"random": [0, 0], "maxmin": [0, 0]}
            for d in sets:
                for f in GOAL_BUDGETS:
                    c = cm.get((d, f), {})
                    if tmd not in c:
                        continue
                    for other in beat:
                        if other in c:
                            beat[other][1] += 1
                            beat[other][0] += int(c[tmd][0] < c[other][0])
            rivals = main if tmd == "tmd" else (field if len(field) == len(main) else None)
            wins, most = (None, None) if rivals is None else _total_wins(
                cm, [tmd] + [e for e in rivals if e != tmd], sets)
            res[tmd] = {"beats_random": beat["random"], "beats_maxmin": beat["maxmin"],
                        "share_random": beat["random"][0] / max(beat["random"][1], 1),
                        "share_maxmin": beat["maxmin"][0] / max(beat["maxmin"][1], 1),
                        "wins": wins, "most_wins": most}
        if res.get("tmd (unweighted)", {}).get("wins") is not None:
            res["all_unweighted"] = {"wins": res["tmd (unweighted)"]["wins"],
                                     "most_wins": res["tmd (unweighted)"]["most_wins"]}
        res["threshold"] = GOAL_SHARE.get(model)
        out[model] = res
    return out


def summary_page(per_set: dict, seconds: dict) -> str:
    """Markdown summary over all sets (see the module doc)."""
    every = [r for rs in per_set.values() for r in rs]
    rows = complete_cells(every)
    partial = len({(r["model"], r["dataset"], r["fraction"]) for r in every}) - \
        len({(r["model"], r["dataset"], r["fraction"]) for r in rows})
    lines = ["# The molecules benchmark: TMD coresets against the chemists' pickers", "",
             f"{len(per_set)} sets; the train split of each is the unlabelled pool, the picked molecules' labels train "
             "the model, the test split scores it. Cells are (set, budget); an entry's value is its mean test RMSE "
             "over the trials" + (f"; {partial} cells that lack some of their model's pickers (a run stopped "
                                  "part-way) are left out" if partial else "") + "."]
    g = goal(per_set)
    for model in _models(rows):
        mrows = [r for r in rows if r["model"] == model]
        cm = cell_means(mrows, model)
        sets = sorted({r["dataset"] for r in mrows})
        ents = entries(mrows, model)
        main = [e for e in ents if "(unweighted)" not in e]
        fr = sorted({k[1] for k in cm})
        trials = sorted({r["trial"] for r in mrows})
        plural = "s" if len(trials) != 1 else ""
        lines += ["", f"## {model_title(model)} ({len(sets)} sets, {len(trials)} trial{plural})", "",
                  "### Cells where each picker has the lowest mean RMSE (main entries: each picker with its own "
                  "weights)", "", "| picker | " + " | ".join(_pct(f) for f in fr) + " | all |",
                  "|---|" + "---|" * (len(fr) + 1)]
        per_f = {f: _wins(cm, main, f, sets) for f in fr}
        for e in main:
            lines.append(f"| {e} | " + " | ".join(str(per_f[f][e]) for f in fr) + f" | {sum(per_f[f][e] for f in fr)} |")
        field = unweighted_field(ents)
        if field != main and len(field) == len(main):  # every picker has rows without τ
            lines += ["", "### Cells where each picker has the lowest mean RMSE, every picker trained without τ", "",
                      "| picker | " + " | ".join(_pct(f) for f in fr) + " | all |", "|---|" + "---|" * (len(fr) + 1)]
            per_u = {f: _wins(cm, field, f, sets) for f in fr}
            for e in field:
                lines.append(f"| {e} | " + " | ".join(str(per_u[f][e]) for f in fr)
                             + f" | {sum(per_u[f][e] for f in fr)} |")
        lines += ["", "### Mean RMSE relative to Random (mean over sets of RMSE / RMSE of Random; 95 % CI over sets; "
                  "below 1 = better than Random)", "", "| picker | " + " | ".join(_pct(f) for f in fr) + " |",
                  "|---|" + "---|" * len(fr)]
        for e in ents:
            cells = []
            for f in fr:
                ratios = [cm[(d, f)][e][0] / cm[(d, f)]["random"][0] for d in sets
                          if (d, f) in cm and e in cm[(d, f)] and "random" in cm[(d, f)]]
                cells.append(_fmt(float(np.mean(ratios)), _ci(ratios)) if ratios else "")
            lines.append(f"| {e} | " + " | ".join(cells) + " |")
        res = g.get(model, {})
        thr = res.get("threshold")
        lines += ["", f"### The goal ({100 * thr:.0f} % of the cells at 10–30 %)" if thr is not None else
                  "### TMD against Random and MaxMin (cells at 10–30 %)", ""]
        for tmd in ("tmd", "tmd (unweighted)"):
            t = res.get(tmd)
            if not t:
                continue
            br, bm = t["beats_random"], t["beats_maxmin"]
            line = (f"* **{tmd}** beats Random in {br[0]} of {br[1]} cells ({100 * t['share_random']:.0f} %), "
                    f"MaxMin in {bm[0]} of {bm[1]} ({100 * t['share_maxmin']:.0f} %)")
            field = "every picker with its own weights" if tmd == "tmd" else "every picker trained without τ"
            if t["wins"] is None:
                line += ("; which picker has the lowest RMSE among the unweighted ones is not measured (the other "
                         "clustering pickers have τ-weighted rows only).")
            else:
                line += (f"; lowest mean RMSE of all label-free pickers ({field}) in {t['wins'].get(tmd, 0)} cells, "
                         + ("more than any other picker" if t["most_wins"] else
                            f"the most: {max(t['wins'], key=t['wins'].get)} ({max(t['wins'].values())})") + ".")
            lines.append(line)
    cost = defaultdict(list)
    for r in rows:
        cost[r["method"]].append(float(r["select_seconds"]))
    lines += ["", "## Selection cost (CPU seconds per pick, mean over sets, budgets and trials; the per-set matrices "
              "below apart)", "", "| picker | CPU s |", "|---|---|"]
    for m in entries([{"model": "x", "method": k, "weighted": True} for k in cost], "x"):
        lines.append(f"| {m} | {np.mean(cost[m]):.3g} |")
    if seconds:
        keys = sorted({k for v in seconds.values() for k in v})
        lines += ["", "Computed once per set (seconds, mean over sets): "
                  + ", ".join(f"{k} {np.mean([v[k] for v in seconds.values() if k in v]):.3g}" for k in keys)
                  + " (tmd: the pool's exact TMD matrix, which the certificate of every picker reads)"]
    return "\n".join(lines) + "\n"


def molecule_pages(per_set: dict, seconds: dict | None) -> dict:
    """Every page of the molecules benchmark's report.

    Parameters
    ----------
    per_set : dict
        ``{set: rows}``, each with at least one row, in the order the pages are listed.
    seconds : dict or None
        ``{set: {matrix: seconds}}``, what computing each set's arrays took.

    Returns
    -------
    dict
        ``{file name: text or PNG bytes}``: per set ``<set>.md`` (:func:`dataset_page`) and ``<set>.png``
        (:func:`plot_dataset`), then ``summary.md`` (:func:`summary_page`) when there is any set.
    """
    pages = {}
    for name, rows in per_set.items():
        pages[f"{name}.md"], pages[f"{name}.png"] = dataset_page(name, rows, (seconds or {}).get(name)), \
            plot_dataset(name, rows)
    if per_set:
        pages["summary.md"] = summary_page(per_set, seconds or {})
    return pages
