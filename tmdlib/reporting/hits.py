r"""The hit report (issue 68, ``select.goal`` ``maximize`` / ``minimize``): the best molecules measured so far and the
predicted best not yet measured, with their prediction intervals -- what the audit report and ``tmdsub summary``
show beside the pool estimate.

For the goal's sign :math:`s` (+1 maximize, −1 minimize) the measured are ranked by :math:`s\,y`, the unmeasured by
:math:`s\,\hat y`; the intervals are the predict stage's (conformal, crepes).  Pure: arrays in, rows out.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

__all__ = ["hit_facts", "hit_lines", "hit_title", "hunted", "ranks_hits", "table_hits", "SHOWN", "GOALS"]

#: Molecules per list.
SHOWN = 10
#: The goals (``select.goal``) that hunt hits: a ranking of values.
GOALS = ("maximize", "minimize")


def ranks_hits(goal: str, spec) -> bool:
    """Whether a run under ``goal`` has hits to report: a goal of :data:`GOALS` and predictions that are values
    with intervals (``spec.conformal == "intervals"``; not a classification)."""
    return goal in GOALS and spec.conformal == "intervals"


def hunted(spec, hunt=None) -> tuple[str, int, tuple[str, str, str]]:
    """The target a hit hunt ranks: the one ``hunt`` names (``select.target``, a name) on a multi-target pool, else
    the first; ``(target, its index, (prediction, lower, upper) column names))``."""
    multi = spec.num_targets > 1
    target = hunt if multi and isinstance(hunt, str) and hunt in spec.targets else spec.targets[0]
    cols = tuple(f"{c}_{target}" if multi else c for c in ("prediction", "lower", "upper"))
    return target, spec.targets.index(target), cols


def table_hits(goal: str, spec, table, labels: Mapping, hunt=None, n: int | None = None) -> dict:
    """:func:`hit_facts` (``n`` per list) of a predictions table (Arrow: ``graph_id``, the :func:`hunted` columns,
    optional ``lower`` / ``upper`` / ``compound_id``) and every label (``{graph_id: value or (T,) values}``): a
    molecule counts as measured once it has a finite value for the hunted target."""
    target, j, (col, lo_col, hi_col) = hunted(spec, hunt)
    names = table.column_names
    measured = {int(g): float(np.ravel(v)[j]) for g, v in labels.items()}
    measured = {g: v for g, v in measured.items() if np.isfinite(v)}
    lo, hi = (table.column(b).to_numpy(zero_copy_only=False) if b in names else None for b in (lo_col, hi_col))
    ids = table.column("compound_id").to_pylist() if "compound_id" in names else None
    values = np.asarray(table.column(col).to_numpy(zero_copy_only=False), dtype=np.float64)
    return hit_facts(goal, measured, table.column("graph_id").to_numpy(), values, lo, hi, ids,
                     n=SHOWN if n is None else n, target=target if spec.num_targets > 1 else None)


def hit_facts(goal: str, measured: Mapping[int, float], graph_ids: Sequence[int], predicted: Sequence[float],
              lower: Sequence[float] | None = None, upper: Sequence[float] | None = None,
              names: Sequence | None = None, n: int = SHOWN, target: str | None = None) -> dict:
    """The two lists of the hit report.

    Parameters
    ----------
    goal : {"maximize", "minimize"}
    measured : mapping graph_id -> float
        Every label paid for so far (the audit sample's included: they are measured molecules too).
    graph_ids : sequence of int, length P
        The pool's molecules, as predicted.
    predicted, lower, upper : sequences of float, length P
        Predictions and their interval (None: no interval).
    names : sequence of str or None, length P, optional
        Compound ids (the user's, as ingested).
    n : int
    target : str, optional
        The target ranked, on a pool with several (``select.target``).

    Returns
    -------
    dict
        ``goal``, ``target`` (given one), ``measured`` (``[graph_id, name, value]``, best first), ``predicted``
        (``[graph_id, name, prediction, lower, upper]``, best first, only molecules not measured), ``n_measured``,
        ``n_unmeasured``.
    """
    s = -1.0 if goal == "minimize" else 1.0
    gids = np.asarray(graph_ids, dtype=np.int64)
    pred = np.asarray(predicted, dtype=np.float64)
    name_of = {int(g): (None if names is None else names[i]) for i, g in enumerate(gids)}
    m = sorted(((int(g), float(v)) for g, v in measured.items() if np.isfinite(v)), key=lambda t: -s * t[1])
    un = np.flatnonzero(~np.isin(gids, np.fromiter(measured.keys(), dtype=np.int64, count=len(measured))))
    un = un[np.argsort(-s * pred[un], kind="stable")][:int(n)]
    lo = None if lower is None else np.asarray(lower, dtype=np.float64)
    hi = None if upper is None else np.asarray(upper, dtype=np.float64)
    return {"goal": goal, **({"target": target} if target else {}), "n_measured": len(m),
            "n_unmeasured": int(gids.size - np.isin(gids, list(measured)).sum()),
            "measured": [[g, name_of.get(g), v] for g, v in m[:int(n)]],
            "predicted": [[int(gids[i]), name_of[int(gids[i])], float(pred[i]),
                           None if lo is None else float(lo[i]), None if hi is None else float(hi[i])] for i in un]}


def _name(gid, name) -> str:
    return f"{name} (graph {gid})" if name else f"graph {gid}"


def hit_title(h: Mapping) -> str:
    """``Hits (select.goal: maximize)``, with ``, select.target: NAME`` when :func:`hit_facts` ranked a named target."""
    return f"Hits (select.goal: {h.get('goal')}" + (f", select.target: {h['target']})" if h.get("target") else ")")


def hit_lines(h: Mapping) -> list[str]:
    """Plain-text lines of :func:`hit_facts` (``tmdsub summary``, the report's section rows)."""
    word = "lowest" if h.get("goal") == "minimize" else "highest"
    out = [f"{hit_title(h)}: the {word} measured so far, {len(h['measured'])} of "
           f"{h['n_measured']}:"]
    out += [f"  {i + 1:2d}. {_name(g, nm)}: {v:.4g}" for i, (g, nm, v) in enumerate(h["measured"])]
    out.append(f"Predicted {word} not yet measured, {len(h['predicted'])} of {h['n_unmeasured']} "
               "(prediction [interval]):")
    out += [f"  {i + 1:2d}. {_name(g, nm)}: {p:.4g}" + ("" if lo is None else f" [{lo:.4g}, {hi:.4g}]")
            for i, (g, nm, p, lo, hi) in enumerate(h["predicted"])]
    return out
