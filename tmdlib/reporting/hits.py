r"""The hit report (issue 68, ``select.goal`` ``maximize`` / ``minimize``): the best molecules measured so far and the
predicted best not yet measured, with their prediction intervals -- what the audit report and ``tmdsub summary``
show beside the pool estimate.

For the goal's sign :math:`s` (+1 maximize, −1 minimize) the measured are ranked by :math:`s\,y`, the unmeasured by
:math:`s\,\hat y`; the intervals are the predict stage's (conformal, crepes).  Pure: arrays in, rows out.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

__all__ = ["hit_facts", "hit_lines", "hit_title", "SHOWN"]

#: Molecules per list.
SHOWN = 10


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
