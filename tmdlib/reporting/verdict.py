r"""The verdict on a run's loss bounds, read from the ``bound`` / ``nodes`` entries of ``metrics.json``.

Pure functions on plain dicts (the JSON written by the evaluate stage); the math and the choice of the loss scale
are :func:`tmdlib.guarantees._bounds.bound_verdict`.  The audit report (:mod:`tmdlib.reporting.audit`) and
``tmdsub summary`` open with :func:`verdict_lines`; wherever they say whether a bound holds they use the verdict's
``holds_text`` ("holds (vacuous: c·ε = X vs loss scale Y)"), never a bare "holds".

The ``bound`` entry (Lemma 3.2 and Corollary 3.3 of the graph coreset) has ``c_epsilon``, ``gap_observed``,
``lemma_holds``, ``erm_bound`` (and, with node subsampling, ``erm_bound_with_nodes``), ``excess_loss``,
``corollary_holds`` (None with ``corollary_note`` when the full-data reference learned nothing), ``loss_scale`` and
``loss_scale_what`` (the task's trivial-predictor loss: the verdict's scale), ``full_model_train_loss`` (the scale of
files written before ``loss_scale``), ``certified``, ``constraint_ok``, ``valid``,
``conditions``, in production ``worse_than_constant`` / ``constant_note`` (the model against the constant
predictor on the audit sample: a bound of a model worse than the mean is never called informative) and, with the
label split, ``bound_with_labels`` / ``bound_with_labels_holds``.  The ``nodes``
entry (Corollary 4.1, ``metrics_nodes.json``) has ``bound`` (:math:`c\bar\varepsilon`), ``gap_observed``,
``lemma_holds``, ``erm_bound``, ``excess_loss`` and ``corollary_holds``; its loss scale is the graph coreset's
``full_model_train_loss`` (the same BCE on the same dataset's training graphs).
"""
from __future__ import annotations

from typing import Mapping

from ..guarantees._bounds import bound_verdict

__all__ = ["constant_line", "coreset_verdicts", "estimate_line", "node_verdicts", "verdict_lines"]

NO_EPSILON = "no ε was recorded (a selection without a TMD medoid objective, and no TMD matrix given)"


def _mode(bound: Mapping, certified) -> dict:
    cert = bound.get("certified") if bound.get("certified") is not None else certified
    return {"certified": None if cert is None else bool(cert), "constraint_ok": bound.get("constraint_ok"),
            "valid": bound.get("valid"), "conditions": bound.get("conditions") or (),
            "loss_scale": bound.get("loss_scale"), "scale_what": bound.get("loss_scale_what"),
            "worse_than_constant": bound.get("worse_than_constant"), "constant_note": bound.get("constant_note")}


def coreset_verdicts(bound: Mapping | None, certified: bool | None = None) -> dict:
    r"""Verdicts on the graph-coreset bounds of one run.

    Parameters
    ----------
    bound : mapping or None
        ``metrics.json``'s ``bound`` (see the module docstring); None or empty reads as unknown.
    certified : bool, optional
        ``metrics.json``'s top-level ``certified`` when ``bound`` lacks it.

    Returns
    -------
    dict
        ``lemma`` (:math:`c\varepsilon` vs the observed gap, Lemma 3.2), ``corollary`` (:math:`2c\varepsilon`, or
        :math:`2c(\varepsilon + \sum_{i\in\mathcal I}\tau_i\varepsilon_i/n)` with node subsampling, vs the
        observed excess loss, Corollary 3.3) and ``with_labels`` (:math:`c\varepsilon` + label term bound, None
        when not recorded): each a :func:`~tmdlib.guarantees._bounds.bound_verdict` dict.
    """
    b = bound or {}
    scale, mode = b.get("full_model_train_loss"), _mode(b, certified)
    missing = b.get("lipschitz_note") or NO_EPSILON  # a model with no TMD constant, or no ε
    with_nodes = b.get("erm_bound_with_nodes") is not None
    out = {
        "lemma": bound_verdict(b.get("c_epsilon"), scale, name="c·ε", holds=b.get("lemma_holds"),
                               gap_observed=b.get("gap_observed"), missing=missing, **mode),
        "corollary": bound_verdict(b.get("erm_bound_with_nodes") if with_nodes else b.get("erm_bound"), scale,
                                   name="2c·(ε + Στε_i/n)" if with_nodes else "2c·ε", holds=b.get("corollary_holds"),
                                   gap_observed=b.get("excess_loss"), observed="observed excess loss",
                                   missing=missing, **mode),
        "with_labels": None,
    }
    if b.get("reference_note"):  # a usable reference with something to know about it
        cor = out["corollary"]
        cor["sentence"] = cor["sentence"].rstrip(".") + f" (note: {b['reference_note']})."
    if b.get("corollary_note"):  # the reference learned nothing: flagged, not compared against
        cor = out["corollary"]
        cor["sentence"] = cor["sentence"].rstrip(".") + f"; {b['corollary_note']}."
        cor["holds_text"] = b["corollary_note"]
    if b.get("bound_with_labels") is not None:
        out["with_labels"] = bound_verdict(b.get("bound_with_labels"), scale, name="c·ε + label term",
                                           holds=b.get("bound_with_labels_holds"),
                                           gap_observed=b.get("gap_observed"), missing=NO_EPSILON, **mode)
    return out


def node_verdicts(nodes: Mapping | None, bound: Mapping | None = None, certified: bool | None = None) -> dict | None:
    r"""Verdicts on the node-subsampling bounds (Corollary 4.1), or None without a ``nodes`` entry.

    Parameters
    ----------
    nodes : mapping or None
        ``metrics_nodes.json``'s ``nodes``.
    bound : mapping, optional
        The same file's ``bound``: its ``full_model_train_loss`` is the loss scale, its ``certified`` /
        ``constraint_ok`` / ``valid`` the mode (the node bound uses the same c).

    Returns
    -------
    dict or None
        ``lemma`` (:math:`c\bar\varepsilon` vs the observed gap) and ``corollary`` (:math:`2c\bar\varepsilon` vs
        the observed excess loss; None when no ``erm_bound`` was recorded), each a
        :func:`~tmdlib.guarantees._bounds.bound_verdict` dict.
    """
    if not nodes:
        return None
    b = bound or {}
    scale, mode = b.get("full_model_train_loss"), _mode(b, certified)
    missing = "no node ε_i were recorded"
    return {"lemma": bound_verdict(nodes.get("bound"), scale, name="c·mean ε_i", holds=nodes.get("lemma_holds"),
                                   gap_observed=nodes.get("gap_observed"), missing=missing, **mode),
            "corollary": None if nodes.get("erm_bound") is None else
            bound_verdict(nodes.get("erm_bound"), scale, name="2c·mean ε_i", holds=nodes.get("corollary_holds"),
                          gap_observed=nodes.get("excess_loss"), observed="observed excess loss", missing=missing,
                          **mode)}


def constant_line(const: Mapping) -> str:
    """The production comparison with the constant predictor (the mean, or the majority class) on the audit sample."""
    return f"Constant predictor: {const.get('sentence', 'not compared')}"


def estimate_line(est: Mapping) -> str:
    """The production headline: the model's metric on the pool, estimated on the audit sample, with its interval."""
    if est.get("value") is None:
        return f"Pool estimate: none ({est.get('note', 'no labelled audit graph')})"
    ci = ("" if est.get("ci_low") is None else
          f" [{est['ci_low']:.4g}, {est['ci_high']:.4g}] at {100 * est['confidence']:g} % confidence")
    note = f"; {est['note']}" if est.get("note") else ""
    return (f"Pool estimate ({est['n_audit']} audit graphs, {est['method']}): {est['metric']} {est['value']:.4g}{ci}"
            f"{note}")


def control_line(control: Mapping) -> str:
    """The Random control's verdict (``select.control``): is the strategy better than Random on this pool?  With the
    uniform labels it used (audit sample and control arm), its folds, and the labels a decision needs."""
    if control.get("difference") is None:
        return f"Random control: {control.get('verdict', 'undecided')} ({control.get('note', 'not compared')})"
    if control.get("folds"):
        how = (f"{control['folds']}-fold cross-fitting over {control['n']} uniform labels ({control.get('n_audit')} "
               f"audit + {control.get('n_control')} control arm), {control.get('n_arm')} labels per arm")
    else:  # a metrics.json written before issue 67: one model per arm, the audit sample only
        how = (f"{control['n_control']} uniform vs {control['n_strategy']} strategy picks this round, "
               f"{control['n']} audit graphs")
    need = control.get("labels_needed")
    if need is None:
        tail = ""
    elif control["verdict"] == "undecided":
        tail = (f"; a decision needs about {need} uniform labels on this pool"
                + (f" ({control['more_needed']} more)" if control.get("more_needed") else ""))
    else:
        tail = f"; about {need} uniform labels suffice for it on this pool"
    return (f"Random control ({how}): {control['metric']} {control['strategy']:.4g} (strategy) vs "
            f"{control['control']:.4g} (Random), difference {control['difference']:+.4g} "
            f"[{control['low']:+.4g}, {control['high']:+.4g}] at {100 * control['confidence']:g} %: "
            f"{control['verdict']}{tail}")


def verdict_lines(metrics: Mapping | None, node_bound: Mapping | None = None) -> list[str]:
    """The verdict as lines of text, headline first: the one a report or a summary opens with.

    Parameters
    ----------
    metrics : mapping or None
        ``metrics.json`` (its ``bound`` and ``certified``; ``nodes`` when it is a ``metrics_nodes.json``).
    node_bound : mapping, optional
        A ``nodes`` entry from another file (the audit report reads ``metrics_nodes.json`` beside
        ``metrics.json``); default ``metrics["nodes"]``.

    Returns
    -------
    list of str
        ``"Lemma 3.2: <sentence>"`` first, then the label-aware bound when recorded, Corollary 3.3, and the node
        bounds (Corollary 4.1) when there are any.
    """
    m = metrics or {}
    b = m.get("bound") or {}
    v = coreset_verdicts(b, m.get("certified"))
    lines = [estimate_line(m["pool_estimate"])] if m.get("pool_estimate") else []
    if m.get("constant_predictor"):
        lines.append(constant_line(m["constant_predictor"]))
    if m.get("control"):
        lines.append(control_line(m["control"]))
    lines.append(f"Lemma 3.2 (coreset loss gap): {v['lemma']['sentence']}")
    if v["with_labels"] is not None:
        lines.append(f"Lemma 3.2 with the label term: {v['with_labels']['sentence']}")
    lines.append(f"Corollary 3.3 (excess training loss): {v['corollary']['sentence']}")
    n = node_verdicts(node_bound if node_bound is not None else m.get("nodes"), b, m.get("certified"))
    if n is not None:
        lines.append(f"Corollary 4.1 (node subsampling, loss gap): {n['lemma']['sentence']}")
        if n["corollary"] is not None:
            lines.append(f"Corollary 4.1 (node subsampling, excess loss): {n['corollary']['sentence']}")
    return lines
