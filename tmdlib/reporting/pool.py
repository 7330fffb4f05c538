r"""Pages of the pool benchmark (:mod:`tmdlib.experiment.pool`): each strategy against Random, set by set.

For a set, a model and a budget :math:`b`, Random's error is the mean over its seeds, :math:`\bar e_R(b)` (RMSE, or
:math:`1 - \text{ROC-AUC}` for classes), with spread :math:`s_R(b)`; a strategy's error :math:`\bar e(b)` is the mean
over its trials.  The tables give the **ratio** :math:`\bar e(b) / \bar e_R(b)` (below 1: the strategy pays), its mean
over the sets, the **worst set**, how many sets it **wins** (ratio < 1) and how many it **loses by more than one
Random sd** (:math:`\bar e(b) > \bar e_R(b) + s_R(b)`: the issue's "never worse than Random" line), and the
**labels saved**: the budget :math:`b'` at which the strategy's curve (linear in :math:`\log b` between its budgets)
reaches Random's error at 10 % (20 %), as :math:`1 - b'/b`; a strategy already below at 5 % is read as saving at least
half, one that never reaches it within its budgets as saving nothing (a negative share is a cost).
"""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np

__all__ = ["collect", "set_ratios", "summary_table", "labels_saved", "write_summary", "control_lines",
           "family_table", "labels_to_target", "target_table", "family_model", "control_counts"]


def _error(row: dict) -> float:
    v = float(row["value"])
    return v if row["metric"] == "rmse" else 1.0 - v


def epsilon_ratios(rows) -> dict:
    r"""``{(model, label, mode, budget): mean over sets of ε / ε(tmd, one shot)}``: what a strategy's picks cost in the
    certificate against the paper's k-medoids at the same budget (ε: the exact mean TMD to the nearest labelled)."""
    eps = defaultdict(list)
    for r in rows:
        label = r["strategy"] + (" (τ)" if r["weighted"] else "")
        eps[(r["dataset"], r["model"], label, r["mode"], round(float(r["budget"]), 6))].append(float(r["epsilon"]))
    out = defaultdict(list)
    for (d, m, lab, mo, b), v in eps.items():
        ref = eps.get((d, m, "tmd", "oneshot", b))
        if ref and np.isfinite(v).all():  # a pool run before its TMD matrix was prepared has no ε
            out[(m, lab, mo, b)].append(float(np.mean(v)) / float(np.mean(ref)))
    return {k: float(np.mean(v)) for k, v in out.items()}


def collect(rows) -> dict:
    """``{(dataset, model, strategy label, mode-budget key): [errors]}``; a strategy label adds ``(τ)`` for weighted
    rows."""
    out = defaultdict(list)
    for r in rows:
        label = r["strategy"] + (" (τ)" if r["weighted"] else "")
        out[(r["dataset"], r["model"], label, r["mode"], round(float(r["budget"]), 6))].append(_error(r))
    return out


def _random(cells, dataset, model, budget):
    v = cells.get((dataset, model, "random", "oneshot", budget))
    return (float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else 0.0, len(v)) if v else None


def set_ratios(cells: dict) -> dict:
    """``{(model, label, mode, budget): {dataset: (ratio, worse_than_1sd, n_trials)}}``."""
    out = defaultdict(dict)
    for (dataset, model, label, mode, budget), errs in cells.items():
        ref = _random(cells, dataset, model, budget)
        if ref is None or ref[0] <= 0:
            continue
        m = float(np.mean(errs))
        out[(model, label, mode, budget)][dataset] = (m / ref[0], bool(m > ref[0] + ref[1]), len(errs))
    return out


def labels_saved(cells: dict, dataset: str, model: str, label: str, mode: str, target: float) -> float | None:
    r"""Share of Random's labels at budget ``target`` saved by a strategy (module docstring); None without data."""
    ref = _random(cells, dataset, model, round(target, 6))
    budgets = sorted(b for (d, m, lab, mo, b) in cells if (d, m, lab, mo) == (dataset, model, label, mode))
    if ref is None or not budgets:
        return None
    curve = [(b, float(np.mean(cells[(dataset, model, label, mode, b)]))) for b in budgets]
    if curve[0][1] <= ref[0]:
        if curve[0][0] >= target:
            return 1.0 - curve[0][0] / target
        return 1.0 - curve[0][0] / target  # at least this much (already below at its smallest budget)
    for (b0, e0), (b1, e1) in zip(curve, curve[1:]):
        if e1 <= ref[0] < e0:
            t = (e0 - ref[0]) / (e0 - e1)
            b = math.exp(math.log(b0) + t * (math.log(b1) - math.log(b0)))
            return 1.0 - b / target
    return 1.0 - curve[-1][0] / target if curve[-1][0] > target else 0.0


def summary_table(cells: dict, model: str, mode: str, budgets=(0.05, 0.1, 0.2), eps: dict | None = None
                  ) -> tuple[list[str], list[dict]]:
    """Markdown lines and records: per strategy, per budget, mean ratio, worst set, wins, losses > 1 sd; with
    ``eps`` (:func:`epsilon_ratios`) the certificate's cost against the paper's k-medoids at 10 %."""
    ratios = set_ratios(cells)
    labels = sorted({lab for (m, lab, mo, b) in ratios if m == model and mo == mode and lab != "random"})
    lines = ["| strategy | " + " | ".join(f"{int(b * 100)} %: mean ratio · wins · > 1 sd · worst" for b in budgets)
             + " | labels saved at 10 % / 20 % (median) | ε / ε(tmd) at 10 % |",
             "|---|" + "---|" * len(budgets) + "---|---|"]
    records = []
    for lab in labels:
        cells_txt = []
        for b in budgets:
            per = ratios.get((model, lab, mode, round(b, 6)), {})
            if not per:
                cells_txt.append("–")
                continue
            r = np.array([v[0] for v in per.values()])
            worst = max(per, key=lambda d: per[d][0])
            lose = sum(v[1] for v in per.values())
            cells_txt.append(f"{r.mean():.3f} · {int((r < 1).sum())}/{len(r)} · {lose} · {per[worst][0]:.2f} "
                             f"({worst.replace('ACE-', '')})")
            records.append({"model": model, "mode": mode, "strategy": lab, "budget": b, "mean_ratio": float(r.mean()),
                            "wins": int((r < 1).sum()), "sets": len(r), "worse_1sd": int(lose),
                            "worst": worst, "worst_ratio": float(per[worst][0])})
        sets = sorted({d for (d, m, la, mo, b) in cells if m == model and la == lab and mo == mode})
        saved = []
        for target in (0.1, 0.2):
            s = [labels_saved(cells, d, model, lab, mode, target) for d in sets]
            s = [x for x in s if x is not None]
            saved.append(f"{100 * float(np.median(s)):.0f} %" if s else "–")
        e = (eps or {}).get((model, lab, mode, 0.1))
        lines.append(f"| {lab} | " + " | ".join(cells_txt) + f" | {saved[0]} / {saved[1]} | "
                     + ("–" if e is None else f"{e:.3f}") + " |")
    return lines, records


def family_model(family: str) -> str:
    """The product's default model on a family: the Tanimoto SVR for regression pools, the forest for classes."""
    return "rf" if family == "classification" else "svm"


def family_table(cells: dict, strategies, budgets=(0.05, 0.1, 0.2)) -> tuple[list[str], list[dict]]:
    r"""Each family on its own line, and the mean over families: per strategy (``(label, mode)``) and budget, the mean
    ratio to Random over the family's pools (its default model, :func:`family_model`), the pools lost by more than
    one Random sd and the worst pool; the last line of each strategy is the unweighted mean of the families' means.

    Returns
    -------
    (list of str, list of dict)
        Markdown lines and one record per (strategy, family, budget).
    """
    from ..experiment.families import FAMILIES, family_of

    ratios = set_ratios(cells)
    lines = ["| strategy | family | pools | " + " | ".join(f"{int(b * 100)} %: mean · lost > 1 sd · worst"
                                                          for b in budgets) + " |",
             "|---|---|---|" + "---|" * len(budgets)]
    records = []
    for label, mode in strategies:
        fam_means = {b: [] for b in budgets}
        for fam in FAMILIES:
            model = family_model(fam)
            txt, n = [], 0
            for b in budgets:
                per = {d: v for d, v in ratios.get((model, label, mode, round(b, 6)), {}).items()
                       if family_of(d) == fam}
                if not per:
                    txt.append("–")
                    continue
                r = np.array([v[0] for v in per.values()])
                worst = max(per, key=lambda d: per[d][0])
                lost = int(sum(v[1] for v in per.values()))
                n = max(n, len(per))
                fam_means[b].append(float(r.mean()))
                txt.append(f"{r.mean():.3f} · {lost} · {per[worst][0]:.2f}")
                records.append({"strategy": label, "mode": mode, "family": fam, "model": model, "budget": b,
                                "mean_ratio": float(r.mean()), "pools": len(per), "lost": lost,
                                "worst": worst, "worst_ratio": float(per[worst][0])})
            if n:
                lines.append(f"| `{label}` ({mode}) | {fam} | {n} | " + " | ".join(txt) + " |")
        means = [f"**{np.mean(fam_means[b]):.3f}** ({len(fam_means[b])} families)" if fam_means[b] else "–"
                 for b in budgets]
        lines.append(f"| `{label}` ({mode}) | **mean over families** | | " + " | ".join(means) + " |")
    return lines, records


def labels_to_target(cells: dict, dataset: str, model: str, label: str, mode: str, factor: float = 1.1):
    r"""The budget (share of the pool less the audit sample) at which a strategy's mean error reaches ``factor`` × the
    full-data error (the ``full`` row: cross-fitted over the pool), linear in :math:`\log b` between its budgets.

    Returns
    -------
    (float or None, str)
        The budget, and ``"="`` (reached between budgets), ``"<="`` (already below at the smallest budget: at most
        that), ``">"`` (not reached at the largest: more than that); ``(None, "")`` without a full-data row.
    """
    full = cells.get((dataset, model, "full", "cv", 0.8))
    budgets = sorted(b for (d, m, lab, mo, b) in cells if (d, m, lab, mo) == (dataset, model, label, mode))
    if not full or not budgets:
        return None, ""
    target = factor * float(np.mean(full))
    curve = [(b, float(np.mean(cells[(dataset, model, label, mode, b)]))) for b in budgets]
    if curve[0][1] <= target:
        return curve[0][0], "<="
    for (b0, e0), (b1, e1) in zip(curve, curve[1:]):
        if e1 <= target < e0:
            t = (e0 - target) / (e0 - e1)
            return math.exp(math.log(b0) + t * (math.log(b1) - math.log(b0))), "="
    return curve[-1][0], ">"


def target_table(cells: dict, strategies, factor: float = 1.1) -> list[str]:
    """Per family and strategy: the median budget that reaches ``factor`` × the full-data error
    (:func:`labels_to_target`; a pool not reached counts as beyond every budget), and how many pools reached it."""
    from ..experiment.families import FAMILIES, family_of

    lines = [f"| family | " + " | ".join(f"`{lab}` ({mo})" for lab, mo in strategies) + " |",
             "|---|" + "---|" * len(strategies)]
    for fam in FAMILIES:
        model = family_model(fam)
        pools = sorted({d for (d, m, lab, mo, b) in cells if m == model and lab == "full" and family_of(d) == fam})
        if not pools:
            continue
        txt = []
        for lab, mo in strategies:
            got = [labels_to_target(cells, d, model, lab, mo, factor) for d in pools]
            got = [g for g in got if g[0] is not None]
            if not got:
                txt.append("–")
                continue
            vals = sorted(math.inf if how == ">" else b for b, how in got)
            med = vals[len(vals) // 2] if len(vals) % 2 else 0.5 * (vals[len(vals) // 2 - 1] + vals[len(vals) // 2])
            reached = sum(1 for b, how in got if how != ">")
            txt.append(("beyond" if math.isinf(med) else f"{100 * med:.1f} %") + f" ({reached}/{len(got)})")
        lines.append(f"| {fam} | " + " | ".join(txt) + " |")
    return lines


def _per_set(cells: dict, dataset: str, models) -> list[str]:
    ratios = set_ratios(cells)
    lines = []
    for model in models:
        keys = sorted({(lab, mo) for (d, m, lab, mo, b) in cells if d == dataset and m == model and lab != "random"})
        if not keys:
            continue
        budgets = sorted({b for (d, m, lab, mo, b) in cells if d == dataset and m == model})
        ref = [_random(cells, dataset, model, b) for b in budgets]
        lines += [f"**{model}** (Random: " + ", ".join(f"{int(b * 100)} % {r[0]:.3f} ± {r[1]:.3f} ({r[2]} seeds)"
                                                      for b, r in zip(budgets, ref) if r) + ")", "",
                  "| strategy | mode | " + " | ".join(f"{int(b * 100)} %" for b in budgets) + " |",
                  "|---|---|" + "---|" * len(budgets)]
        for lab, mo in keys:
            vals = []
            for b in budgets:
                v = ratios.get((model, lab, mo, b), {}).get(dataset)
                vals.append("–" if v is None else f"{v[0]:.3f}" + (" ✗" if v[1] else ""))
            lines.append(f"| {lab} | {mo} | " + " | ".join(vals) + " |")
        lines.append("")
    return lines


def _judge(verdict: str, ratio: float | None) -> str | None:
    """``right`` / ``wrong`` / ``undecided`` of one verdict against a ratio to Random (below 1: the strategy did
    better); None without a truth."""
    if ratio is None or not math.isfinite(ratio):
        return None
    if verdict == "undecided":
        return "undecided"
    return "right" if (verdict == "strategy better") == (ratio < 1.0) else "wrong"


def control_counts(control_rows: list[dict], cells: dict) -> dict:
    r"""Right / wrong / undecided per family, for the rule (``verdict``) and the rule before issue 67
    (``old_verdict``), against two truths.

    * **benchmark**: the strategy's mean error in rounds at 10 % over Random's mean at 10 % on the whole rest of the
      pool (:func:`set_ratios`; the issue's truth: is the strategy, as a procedure, better than Random on this pool?);
    * **round**: ``round_ratio``, this round's strategy picks over as many uniform ones (each on top of round one's),
      on the pool members neither saw (the question a user asks: would Random have done better this round?).

    Returns
    -------
    dict
        ``{family: {"sets", "runs", "new", "old", "new_round", "old_round": Counter of right / wrong / undecided,
        "labels_needed": [int], "n": [int], "folds": int}}``; ``"all"`` sums the families.
    """
    from collections import Counter

    from ..experiment.families import family_of

    ratios = set_ratios(cells)
    out: dict = {}
    for r in control_rows:
        truth = ratios.get((r["model"], r["strategy"], "rounds", 0.1), {}).get(r["dataset"])
        rr = r.get("round_ratio")
        rr = float(rr) if rr not in (None, "", "None") else None
        for fam in (family_of(r["dataset"]), "all"):
            f = out.setdefault(fam, {"sets": set(), "runs": 0, "labels_needed": [], "n": [], "folds": None,
                                     **{k: Counter() for k in ("new", "old", "new_round", "old_round")}})
            f["sets"].add(r["dataset"])
            f["runs"] += 1
            for key, col, t in (("new", "verdict", truth and truth[0]), ("old", "old_verdict", truth and truth[0]),
                                ("new_round", "verdict", rr), ("old_round", "old_verdict", rr)):
                j = _judge(str(r.get(col) or ""), t) if r.get(col) else None
                if j:
                    f[key][j] += 1
            if r.get("labels_needed") not in (None, "", "None"):
                f["labels_needed"].append(int(float(r["labels_needed"])))
            if r.get("n") not in (None, "", "None"):
                f["n"].append(int(float(r["n"])))
            if r.get("folds") not in (None, "", "None"):
                f["folds"] = int(float(r["folds"]))
    return out


def _rwu(c) -> str:
    n = sum(c.values())
    if not n:
        return "–"
    return (f"{c['right']} / {c['wrong']} / {c['undecided']} "
            f"({100 * c['wrong'] / n:.0f} % wrong, {100 * c['undecided'] / n:.0f} % undecided)")


def control_lines(control_rows: list[dict], cells: dict) -> list[str]:
    r"""How often the Random control's verdict is right, per family, the rule before issue 67 beside it, and what the
    control costs.

    A verdict is **right** when it names the side the truth measured (:func:`control_counts`: the benchmark's ratio to
    Random at 10 %, and the round's own ratio); ``undecided`` is counted apart.  The **cost**: the error of the
    round's model with the control arm in it, over the same strategy's without (same set, model and trial), at 10 %.
    """
    if not control_rows:
        return []
    by = {}
    for r in control_rows:
        by.setdefault(r["strategy"], []).append(r)
    if len(by) > 1:  # one table per strategy replayed (the default's first)
        from ..select.rounds import default_strategy

        order = sorted(by, key=lambda st: (st != default_strategy(), st))
        return [line for st in order for line in control_lines(by[st], cells)]
    counts = control_counts(control_rows, cells)
    costs = []
    for r in control_rows:
        same = cells.get((r["dataset"], r["model"], r["strategy"], "rounds", 0.1))
        if same:
            err = float(r["value"]) if r["metric"] == "rmse" else 1.0 - float(r["value"])
            costs.append(err / float(np.mean(same)))
    share = float(control_rows[0]["share"])
    c = counts.get("all") or {}
    lines = [f"## The Random control (select.control: {share:g}) replayed in round two (5 % → 10 %): "
             f"`{control_rows[0]['strategy']}`", "",
             f"{c.get('runs', 0)} verdicts ({len(c.get('sets', ()))} sets, strategy "
             f"`{control_rows[0]['strategy']}`). The rule: {c.get('folds') or '–'}-fold cross-fitting over every "
             "uniform label of the round (the audit sample and the control arm), each arm trained on the earlier "
             "rounds' labels plus as many labels of its own (up to all the round's strategy picks), 95 % paired "
             "bootstrap over every uniform label. Before (issue 60): one model per arm of the control arm's size, "
             "compared on the audit sample only. Right / wrong / undecided against the benchmark's truth (the "
             "strategy's ratio to Random at 10 % on the rest of the pool) and against the round's own truth (this "
             "round's strategy picks against as many uniform ones).", "",
             "| family | sets | verdicts | rule: right / wrong / undecided | before | rule vs the round's truth | "
             "before vs the round's truth | uniform labels used (median) | labels a decision needs (median) |",
             "|---|---|---|---|---|---|---|---|---|"]
    from ..experiment.families import FAMILIES

    for fam in [f for f in FAMILIES if f in counts] + ["all"]:
        f = counts[fam]
        need = f"{int(np.median(f['labels_needed']))}" if f["labels_needed"] else "–"
        used = f"{int(np.median(f['n']))}" if f["n"] else "–"
        lines.append(f"| {fam} | {len(f['sets'])} | {f['runs']} | {_rwu(f['new'])} | {_rwu(f['old'])} | "
                     f"{_rwu(f['new_round'])} | {_rwu(f['old_round'])} | {used} | {need} |")
    if costs:
        lines += ["", f"What the control costs: the round's model with the control arm in it has "
                      f"{float(np.mean(costs)):.3f}× the error of the strategy's without it (mean over {len(costs)} "
                      "runs)."]
    return lines + [""]


def write_summary(results_dir, out: str | None = None) -> str:
    """Read every ``<set>.csv`` under ``results_dir`` and write ``summary.md`` beside them; returns its path."""
    from ..experiment.pool import read_rows

    d = Path(results_dir)
    rows = [r for f in sorted(d.glob("*.csv")) if not f.name.startswith("control") for r in read_rows(f)]
    cells = collect(rows)
    models = [m for m in ("svm", "rf") if any(k[1] == m for k in cells)]
    sets = sorted({k[0] for k in cells})
    lines = ["# The pool benchmark: each strategy against Random, the whole set as the pool", "",
             "Generated by `benchmarks/pool_benchmark.py summary` from the CSVs beside this file (protocol: "
             "`tmdlib/experiment/pool.py`; reading: `tmdlib/reporting/pool.py`). Error = RMSE on the pool molecules "
             "neither picked nor in the audit sample (1 − ROC-AUC for the classification sets); ratio = strategy's "
             "mean error / Random's mean error at the same total budget; lower is better. "
             f"{len(sets)} sets.", ""]
    from ..experiment.families import FAMILIES, family_of

    both = sorted({(lab, mo) for (dd, m, lab, mo, b) in cells if lab not in ("random", "full")},
                  key=lambda k: (k[1], k[0]))
    shared = [k for k in both if len({family_of(dd) for (dd, m, lab, mo, b) in cells if (lab, mo) == k}) >= 2]
    if shared:
        tab, _ = family_table(cells, shared)
        lines += ["## By family (each family's default model: the SVR for regression, the forest for classes)", "",
                  "Each cell: mean ratio to Random over the family's pools · pools lost by more than one Random sd · "
                  "the worst pool's ratio; the strategy's last line is the unweighted mean of the families' means. "
                  "Strategies measured on at least two families.", ""] + tab + [""]
    long = sorted({(lab, mo) for (dd, m, lab, mo, b) in cells if b > 0.2 + 1e-9 and lab != "full"},
                  key=lambda k: (k[0] != "random", k[1], k[0]))
    if long:
        lines += ["## Labels to 1.1 × the full-data error", "",
                  "The budget (share of the pool) at which the strategy's mean error reaches 1.1 × the full-data "
                  "error (the model cross-fitted over the whole pool, 5 folds), median over the family's pools (a "
                  "pool not reached within the strategy's budgets, up to 60 %, counts as beyond them) · (pools "
                  "reached / pools). Strategies run past 20 % (`run --long`).",
                  ""] + target_table(cells, long) + [""]
    for fam in FAMILIES:
        fam_cells = {k: v for k, v in cells.items() if family_of(k[0]) == fam}
        eps = epsilon_ratios([r for r in rows if family_of(r["dataset"]) == fam])
        for model in models:
            for mode in ("oneshot", "rounds"):
                tab, _ = summary_table(fam_cells, model, mode, eps=eps)
                if len(tab) > 2:
                    lines += [f"## {fam}: {model}, {'one shot' if mode == 'oneshot' else 'in rounds (5 % → 10 % → 20 %)'}",
                              "", "Each cell: mean ratio to Random over the pools · pools won (ratio < 1) / pools · "
                              "pools lost by more than one Random sd · worst pool.", ""] + tab + [""]
    if (d / "control.csv").is_file():
        import csv

        with open(d / "control.csv", newline="", encoding="utf-8") as fh:
            lines += control_lines(list(csv.DictReader(fh)), cells)
    lines += ["## Per set (ratio to Random; ✗ = worse than Random's mean + 1 sd)", ""]
    for s in sets:
        lines += [f"### {s}", ""] + _per_set(cells, s, models)
    path = Path(out) if out else d / "summary.md"
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)
    return str(path)
