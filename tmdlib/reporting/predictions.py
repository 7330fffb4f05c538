"""What a chemist looks at in a production audit report: the audit sample's parity plot, the distribution of the
pool's predictions and the share of the pool inside the model's applicability domain.

Pure functions on arrays and plain dicts (no files); :mod:`tasks.audit` reads ``predictions.parquet`` /
``predictions.json`` and the lab's labels, :mod:`tmdlib.reporting.audit` renders the facts these functions give.
The plots are PNG bytes from matplotlib's Agg canvas (no global pyplot state), embedded in the report's HTML as
``data:`` URIs.

Examples
--------
>>> from tmdlib.reporting.predictions import audit_agreement, domain_share
>>> audit_agreement([1.0, 2.0, 3.0], [1.5, 2.0, 2.0], [1.0, 1.5, 2.5], [2.0, 2.5, 2.9])
{'n': 3, 'covered': 2, 'coverage': 0.6666666666666666, 'rmse': 0.6454972243679028, 'mae': 0.5}
>>> domain_share({"computed": True, "rows_in_domain": 30, "rows_out_of_domain": 10, "threshold": 0.4})["share_in_domain"]
0.75
"""
from __future__ import annotations

import io
import textwrap
from typing import Mapping, Sequence

import numpy as np

__all__ = ["audit_agreement", "domain_share", "confusion_counts", "parity_png", "distribution_png", "audit_positions",
           "prediction_facts", "audit_columns", "PARITY_PNG", "PREDICTIONS_PNG"]

_IN, _OUT, _LINE = "#2b8a3e", "#e8590c", "#495057"


def audit_agreement(measured: Sequence[float], predicted: Sequence[float], lower: Sequence[float] | None = None,
                    upper: Sequence[float] | None = None) -> dict:
    """How the audit sample's predictions agree with the lab's measurements.

    Parameters
    ----------
    measured, predicted : sequences of float, length n
        The lab's values and the model's predictions of the same molecules (NaN pairs are left out).
    lower, upper : sequences of float, length n, optional
        The prediction intervals.

    Returns
    -------
    dict
        ``n`` (pairs used), ``covered`` (measurements inside their interval; None without intervals), ``coverage``
        (= covered / n; None without intervals or pairs), ``rmse`` and ``mae`` (None without pairs).
    """
    y, p = np.asarray(measured, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    if y.shape != p.shape:
        raise ValueError(f"measured and predicted differ in length: {len(y)}, {len(p)}")
    ok = np.isfinite(y) & np.isfinite(p)
    n = int(ok.sum())
    out = {"n": n, "covered": None, "coverage": None,
           "rmse": float(np.sqrt(np.mean((p[ok] - y[ok]) ** 2))) if n else None,
           "mae": float(np.mean(np.abs(p[ok] - y[ok]))) if n else None}
    if lower is not None and upper is not None:
        lo, hi = np.asarray(lower, dtype=np.float64)[ok], np.asarray(upper, dtype=np.float64)[ok]
        covered = int(np.sum((lo <= y[ok]) & (y[ok] <= hi)))
        out.update(covered=covered, coverage=covered / n if n else None)
    return {k: out[k] for k in ("n", "covered", "coverage", "rmse", "mae")}


def domain_share(domain: Mapping | None) -> dict:
    """The pool's in-domain share from ``predictions.json``'s ``domain``.

    Parameters
    ----------
    domain : mapping or None
        ``{"computed", "rows_in_domain", "rows_out_of_domain", "threshold", "rule", "similarity", "why"}`` as
        :func:`tmdlib.chem.domain.domain_meta` writes it.

    Returns
    -------
    dict
        ``computed``, ``in_domain``, ``out_of_domain``, ``share_in_domain`` (None when no row has a flag),
        ``threshold``, ``rule``, ``similarity`` and ``why`` (why there is no domain, when not computed).
    """
    d = dict(domain or {})
    if not d.get("computed"):
        return {"computed": False, "in_domain": None, "out_of_domain": None, "share_in_domain": None,
                "threshold": None, "rule": None, "similarity": None,
                "why": d.get("why") or "predictions.json records no applicability domain"}
    n_in, n_out = int(d.get("rows_in_domain") or 0), int(d.get("rows_out_of_domain") or 0)
    return {"computed": True, "in_domain": n_in, "out_of_domain": n_out,
            "share_in_domain": n_in / (n_in + n_out) if n_in + n_out else None, "threshold": d.get("threshold"),
            "rule": d.get("rule"), "similarity": d.get("similarity"), "why": None}


def confusion_counts(measured: Sequence, predicted: Sequence) -> list[tuple[str, str, int]]:
    """``[(measured class, predicted class, count)]`` of a classification audit sample, every pair that occurs,
    sorted by class (classes as text: ``1``, ``0``, ``2.5``)."""
    pairs: dict = {}
    for y, p in zip(measured, predicted):
        if y is None or p is None or (isinstance(y, float) and np.isnan(y)) or (isinstance(p, float) and np.isnan(p)):
            continue
        key = (float(y), float(p))
        pairs[key] = pairs.get(key, 0) + 1
    return [(f"{y:g}", f"{p:g}", n) for (y, p), n in sorted(pairs.items())]


def _canvas(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _png(fig) -> bytes:
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def parity_png(measured: Sequence[float], predicted: Sequence[float], lower: Sequence[float] | None = None,
               upper: Sequence[float] | None = None, in_domain: Sequence | None = None, title: str = "",
               quantity: str = "value") -> bytes:
    """Parity plot of the audit sample: the prediction against the lab's measurement, each with its prediction
    interval as an error bar, and the line y = x.

    Parameters
    ----------
    measured, predicted : sequences of float, length n
        The lab's values (x) and the predictions (y); NaN pairs are left out.
    lower, upper : sequences of float, length n, optional
        The prediction intervals (vertical error bars).
    in_domain : sequence of bool or None, length n, optional
        Colours the points in (green) and out of (orange) the applicability domain.
    title : str
        Figure title.
    quantity : str
        What was measured, with its units (the axis labels).

    Returns
    -------
    bytes
        A PNG image.
    """
    y, p = np.asarray(measured, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    ok = np.isfinite(y) & np.isfinite(p)
    fig, ax = _canvas(5.5, 5.0)
    flags = np.array([None] * len(y) if in_domain is None else list(in_domain), dtype=object)
    groups = [(flags != False, _IN, "in domain" if in_domain is not None else None),  # noqa: E712 - None is in
              (flags == False, _OUT, "out of domain")]  # noqa: E712
    lo = None if lower is None else np.asarray(lower, dtype=np.float64)
    hi = None if upper is None else np.asarray(upper, dtype=np.float64)
    for mask, colour, label in groups:
        m = ok & mask.astype(bool)
        if not m.any():
            continue
        err = None if lo is None or hi is None else np.vstack([p[m] - lo[m], hi[m] - p[m]]).clip(min=0)
        ax.errorbar(y[m], p[m], yerr=err, fmt="o", ms=4, color=colour, ecolor=colour, elinewidth=0.8, alpha=0.75,
                    capsize=0, label=label)
    span = [v for v in (y[ok], p[ok], None if lo is None else lo[ok], None if hi is None else hi[ok])
            if v is not None and v.size]
    if span:
        low = float(min(np.nanmin(v) for v in span))
        high = float(max(np.nanmax(v) for v in span))
        pad = 0.05 * (high - low or 1.0)
        ax.plot([low - pad, high + pad], [low - pad, high + pad], color=_LINE, lw=1, ls="--", label="y = x")
        ax.set_xlim(low - pad, high + pad)
        ax.set_ylim(low - pad, high + pad)
    ax.set_aspect("equal", adjustable="box")
    ax.set_xlabel(f"measured {quantity}")
    ax.set_ylabel(f"predicted {quantity}")
    ax.set_title(textwrap.fill(title, 70), fontsize=9)  # long titles wrap instead of running off the image
    ax.legend(fontsize=8, loc="upper left")
    return _png(fig)


def distribution_png(predictions: Sequence, in_domain: Sequence | None = None, title: str = "",
                     quantity: str = "value", discrete: bool = False, bins: int = 40) -> bytes:
    """Distribution of the pool's predictions: a histogram (regression) or one bar per predicted class
    (``discrete``), stacked in and out of the applicability domain when ``in_domain`` is given.

    Parameters
    ----------
    predictions : sequence of float, length n
        Every pool member's prediction (NaN left out).
    in_domain : sequence of bool or None, length n, optional
        The members' domain flags.
    title, quantity : str
        Figure title; what was predicted (the x axis).
    discrete : bool
        One bar per distinct value (classification).
    bins : int
        Histogram bins (regression).

    Returns
    -------
    bytes
        A PNG image.
    """
    v = np.asarray(predictions, dtype=np.float64)
    ok = np.isfinite(v)
    flags = np.array([None] * len(v) if in_domain is None else list(in_domain), dtype=object)
    parts = ([(ok & (flags != False), _IN, "in domain"), (ok & (flags == False), _OUT, "out of domain")]  # noqa: E712
             if in_domain is not None else [(ok, _IN, None)])
    fig, ax = _canvas(7.0, 3.6)
    if discrete:
        classes = np.unique(v[ok])
        bottom = np.zeros(len(classes))
        for mask, colour, label in parts:
            counts = np.array([np.sum(v[mask] == c) for c in classes], dtype=float)
            ax.bar([f"{c:g}" for c in classes], counts, bottom=bottom, color=colour, label=label)
            bottom += counts
        ax.set_xlabel(f"predicted {quantity}")
    else:
        edges = np.histogram_bin_edges(v[ok], bins=bins) if ok.any() else bins
        ax.hist([v[m] for m, _, _ in parts], bins=edges, stacked=True, color=[c for _, c, _ in parts],
                label=[lab for _, _, lab in parts] if in_domain is not None else None)
        ax.set_xlabel(f"predicted {quantity}")
    ax.set_ylabel("pool molecules")
    ax.set_title(textwrap.fill(title, 70), fontsize=9)  # long titles wrap instead of running off the image
    if in_domain is not None:
        ax.legend(fontsize=8)
    return _png(fig)


# ----------------------------------------------------------------------------------------------
# The facts of a production run's predictions
# ----------------------------------------------------------------------------------------------
#: The plots a production audit report adds.
PARITY_PNG, PREDICTIONS_PNG = "parity.png", "predictions.png"


def audit_positions(graph_ids, audit_ids, labels: Mapping, where=None) -> tuple[np.ndarray, list]:
    """``(rows of the predictions table, measured values)`` of the labelled audit sample (first target).

    Parameters
    ----------
    graph_ids : array_like of int, shape (P,)
        The predictions table's graph ids.
    audit_ids : sequence of int or None
        ``selection.json``'s ``audit_ids``; those without a label in ``labels`` are left out.
    labels : mapping graph_id -> value or (T,) values
    where : str, optional
        Named in the error when a labelled audit graph has no prediction.
    """
    from .._errors import InputError

    audit = np.asarray([int(g) for g in audit_ids or [] if int(g) in labels], dtype=np.int64)
    gids = np.asarray(graph_ids, dtype=np.int64)
    order = np.argsort(gids, kind="stable")  # the pool's rows by id: no per-row lookup table for a pool of millions
    at = np.minimum(np.searchsorted(gids, audit, sorter=order), max(len(gids) - 1, 0))
    found = gids[order[at]] == audit if len(gids) else np.zeros(len(audit), bool)
    if not found.all():
        raise InputError(where, f"labelled audit graphs not in the predictions: {audit[~found][:10].tolist()} "
                                "(rerun tmdsub predict)")
    y = [float(np.ravel(labels[int(g)])[0]) for g in audit]
    return order[at], y


def _pct_text(value) -> str:
    return "" if value is None else f"{100 * float(value):g} %"


def prediction_facts(table, spec, meta: Mapping, file: str, rows, measured, hits: dict | None = None) -> tuple:
    """``(facts["predictions"], images)`` of a production run's audit report.

    Parameters
    ----------
    table : pyarrow.Table
        The predictions (``graph_id``, ``prediction<suffix>``, optional ``in_domain``, ``lower<suffix>``,
        ``upper<suffix>``; the suffix of the task's first prediction column).
    spec : TaskSpec
    meta : mapping
        ``predictions.json`` (``model``, ``confidence``, ``property``, ``domain``).
    file : str
        The predictions file, as the facts name it.
    rows, measured : the labelled audit sample (:func:`audit_positions`).
    hits : dict, optional
        The hit report's facts (:func:`tmdlib.reporting.hits.table_hits`), when the run hunts hits.

    Returns
    -------
    facts : dict
        The report's ``predictions`` section: the pool's distribution, the domain share, the audit sample's agreement
        (values with intervals: :func:`audit_agreement` and a parity plot; classes: :func:`confusion_counts`).
    images : list of (file name, caption, PNG bytes)
    """
    target, suffix = spec.prediction_names[0], spec.column_suffix(0)
    names = table.column_names
    values = np.asarray(table.column(f"prediction{suffix}").to_numpy(zero_copy_only=False), dtype=np.float64)
    flags = table.column("in_domain").to_pylist() if "in_domain" in names else None
    quantity = meta.get("property") or target  # labels.name: pIC50, ...; else the target, or "class"
    facts = {"file": file, "rows": table.num_rows, "model": meta.get("model"),
             "confidence": meta.get("confidence"), "task": spec.type, "quantity": quantity,
             "domain": domain_share(meta.get("domain")), "audit": None, "confusion": None, "parity_note": None}
    caption = (f"Distribution of the pool's {table.num_rows} predictions" +
               (", in and out of the applicability domain" if flags is not None else ""))
    images = [(PREDICTIONS_PNG, caption, distribution_png(values, flags, title=caption, quantity=quantity,
                                                          discrete=not spec.is_regression))]
    if spec.conformal == "intervals" and len(rows):  # values with intervals: the parity plot
        bounds = [f"{b}{suffix}" for b in ("lower", "upper")]
        lo, hi = (np.asarray(table.column(b).to_numpy(zero_copy_only=False), dtype=np.float64)[rows]
                  if b in names else None for b in bounds)
        facts["audit"] = audit_agreement(measured, values[rows], lo, hi)
        cap = (f"Audit sample: prediction vs the lab's measurement ({len(rows)} molecules), "
               f"{_pct_text(meta.get('confidence'))} prediction intervals, y = x")
        images.insert(0, (PARITY_PNG, cap, parity_png(measured, values[rows], lo, hi,
                                                      None if flags is None else [flags[i] for i in rows],
                                                      title=cap, quantity=quantity)))
    elif not len(rows):
        facts["parity_note"] = "no labelled audit molecule yet: nothing to plot against the lab"
    else:
        facts["audit"] = {"n": len(rows)}
        facts["confusion"] = confusion_counts(measured, values[rows].tolist())
        facts["parity_note"] = ("classification: no parity plot; the audit sample's predicted against measured "
                                "classes are counted above")
    if hits is not None:
        facts["hits"] = hits
    facts["plots"] = [(name, cap) for name, cap, _ in images]
    return facts, images


def audit_columns(spec, names, where=None) -> list[str]:
    """The columns of a predictions table the audit report reads (not the SMILES): ``graph_id``, the first target's
    ``prediction`` and, those it has of them, ``in_domain``, ``lower`` and ``upper``.

    Raises
    ------
    InputError
        Naming ``where`` when the table has no ``prediction`` column of the first target.
    """
    suffix = spec.column_suffix(0)
    col = f"prediction{suffix}"
    if col not in names:
        from .._errors import InputError

        raise InputError(where, f"no {col} column (columns {', '.join(names)})")
    return [c for c in ("graph_id", col, "in_domain", f"lower{suffix}", f"upper{suffix}") if c in names]
