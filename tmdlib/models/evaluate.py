r"""What can be measured of a trained model from the labels a team actually has (production mode), and the
benchmark measurement of a model without a TMD-Lipschitz constant.

Production mode: the labels are the lab's answers for the coreset :math:`\mathcal I` (weights τ) and for an **audit
sample** :math:`\mathcal A` — a uniform random sample of the pool outside the coreset, never trained on
(:func:`tmdlib.select.audit.audit_sample`).  From them:

* the model's metric **on the pool**, estimated on :math:`\mathcal A` with a percentile-bootstrap confidence interval
  (:func:`pool_estimate`: ``n_boot`` resamples of the audit members with replacement, the metric recomputed on each;
  the interval is the :math:`(1-\gamma)/2` and :math:`(1+\gamma)/2` quantiles at confidence :math:`\gamma`); the
  model's mean loss likewise.  Because :math:`\mathcal A` is uniform over the pool outside the coreset, these
  estimate the model's quality on exactly the molecules it will be used for;
* the τ-weighted training loss on the coreset, :math:`\frac1n\sum_{i\in\mathcal I}\tau_i\mathcal L_i`;
* the certificate :math:`c\,\varepsilon` of Lemma 3.2 (when the model reports a TMD-Lipschitz constant :math:`c`)
  against the loss scale of the task that was trained (the trivial predictor's loss, fitted on the coreset's labels).

* the **constant predictor** on the same audit sample (:func:`constant_outputs`: the τ-weighted mean of the coreset's
  labels for regression, the coreset's class frequencies -- the majority class -- for classes), scored with the same
  metric: a model whose estimate is worse than the constant's is reported "worse than predicting the mean" (or the
  majority class), and no bound of it is called informative (:func:`tmdlib.guarantees.bounds.bound_verdict`).

Nothing is computed from labels that do not exist: no full-data reference, no observed gap, no test metric.
"""
from __future__ import annotations

import numpy as np

from ..guarantees.losses import trivial_loss
from ..metrics import headline, higher_is_better, score

__all__ = ["pool_estimate", "weighted_loss", "constant_outputs", "compare_with_constant", "production_measurement", "benchmark_measurement", "NOT_MEASURABLE",
           "control_verdict", "compare_arms"]

#: What production mode cannot measure, and why (reported as such in metrics.json).
NOT_MEASURABLE = {
    "test_metric": "not measurable without the pool's labels: the audit sample's estimate stands for it",
    "observed_gap": "not measurable without the labels of every pool member (Lemma 3.2's left-hand side)",
    "full_data_reference": "not measurable: no model can be trained on labels that do not exist (Corollary 3.3)",
}


def weighted_loss(losses, weights) -> float:
    """:math:`\\sum_i w_i \\ell_i / \\sum_i w_i`."""
    w = np.asarray(weights, dtype=np.float64)
    return float(np.dot(w, np.asarray(losses, dtype=np.float64)) / w.sum())


def pool_estimate(outputs, y, task_type: str, metric: str | None = None, losses=None, confidence: float = 0.9,
                  n_boot: int = 2000, seed: int = 0, num_classes: int = 0) -> dict:
    r"""The metric (and mean loss) of a model on the pool, estimated on a uniform audit sample.

    Parameters
    ----------
    outputs : array_like, shape (m, D)
        The model's outputs on the audit members (task units: logits, or predictions).
    y : array_like, shape (m,) or (m, T)
        Their labels (NaN = missing; such members are left out).
    task_type : str
    metric : str, optional
        Default: :func:`tmdlib.metrics.headline`.
    losses : array_like, shape (m,), optional
        Per-member training losses (a loss estimate is added when given).
    confidence : float
        :math:`\gamma \in (0, 1)`.
    n_boot : int
        Bootstrap resamples.
    seed : int

    Returns
    -------
    dict
        ``metric``, ``value`` (on the audit sample), ``ci_low``, ``ci_high``, ``confidence``, ``n_audit``,
        ``method``, ``higher_is_better`` and, with ``losses``, ``loss`` / ``loss_ci_low`` / ``loss_ci_high``.  With
        fewer than 2 labelled audit members the interval is None and ``note`` says why.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    Z = np.asarray(outputs, dtype=np.float64)
    Z = Z.reshape(len(Z), -1) if Z.size else Z.reshape(len(Z), Z.shape[-1] if Z.ndim == 2 else 1)
    Y = np.asarray(y, dtype=np.float64)
    Y = Y.reshape(len(Y), -1) if Y.size else Y.reshape(len(Y), 1)
    keep = ~np.isnan(Y).all(axis=1)
    Z, Y = Z[keep], Y[keep]
    L = None if losses is None else np.asarray(losses, dtype=np.float64)[keep]
    metric = metric or headline(task_type)
    m = int(len(Y))
    out = {"metric": metric, "value": None, "ci_low": None, "ci_high": None, "confidence": float(confidence),
           "n_audit": m, "higher_is_better": higher_is_better(metric),
           "method": f"percentile bootstrap ({n_boot} resamples of the audit sample)"}
    if m == 0:
        return {**out, "note": "no labelled audit member: nothing to estimate from"}
    value = score(Z, Y, task_type, num_classes).get(metric)
    out["value"] = None if value is None or not np.isfinite(value) else float(value)
    if L is not None:
        out["loss"] = float(L.mean())
    if m < 2:
        return {**out, "note": "one labelled audit member: no interval"}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, m, size=(int(n_boot), m))
    vals = np.array([score(Z[i], Y[i], task_type, num_classes).get(metric, np.nan) for i in idx], dtype=np.float64)
    vals = vals[np.isfinite(vals)]
    a = (1 - confidence) / 2
    if vals.size:
        out["ci_low"], out["ci_high"] = (float(v) for v in np.quantile(vals, [a, 1 - a]))
    if L is not None:
        means = L[idx].mean(axis=1)
        out["loss_ci_low"], out["loss_ci_high"] = (float(v) for v in np.quantile(means, [a, 1 - a]))
    return out


def constant_outputs(task, y_train, tau, m: int) -> tuple[np.ndarray, str]:
    """The constant predictor's outputs ``(m, D)`` in task units, fitted on the training labels (as stored, NaN =
    missing) with weights ``tau``, and what it is: regression the τ-weighted mean per target; binary the logit of the
    τ-weighted positive rate; multi-class the log class frequencies (its prediction is the majority class)."""
    Y = np.asarray(y_train, dtype=np.float64)
    Y = Y.reshape(len(Y), -1) if Y.size else np.zeros((0, 1))
    w = np.ones(len(Y)) if tau is None else np.asarray(tau, dtype=np.float64).ravel()
    obs = ~np.isnan(Y)
    if task.is_regression:
        c = np.array([np.average(Y[obs[:, t], t], weights=w[obs[:, t]]) if obs[:, t].any() else 0.0
                      for t in range(Y.shape[1])])
        return np.tile(c, (m, 1)), "the τ-weighted mean of the coreset's labels"
    if task.class_indices:
        k = obs[:, 0]
        freq = np.bincount(Y[k, 0].astype(np.int64), weights=w[k], minlength=task.num_classes) + 1e-6
        return np.tile(np.log(freq / freq.sum()), (m, 1)), "the coreset's class frequencies (the majority class)"
    p = np.array([np.average(Y[obs[:, t], t], weights=w[obs[:, t]]) if obs[:, t].any() else 0.5
                  for t in range(Y.shape[1])])
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.tile(np.log(p / (1 - p)), (m, 1)), "the coreset's positive rate (the majority class)"


def compare_with_constant(est: dict, const_out, y_audit, task, what: str, *, confidence: float = 0.9,
                          seed: int = 0) -> dict:
    """The constant predictor's estimate on the audit sample (:func:`pool_estimate`, the model's metric) beside the
    model's ``est``: ``worse`` (True when the model's estimate is worse than the constant's, None when either is
    missing) and one ``sentence``."""
    metric = est["metric"]
    c = pool_estimate(const_out, y_audit, task.type, metric, confidence=confidence, seed=seed,
                      num_classes=task.num_classes) if len(const_out) else {"value": None}
    name = "the mean" if task.is_regression else "the majority class"
    out = {"predictor": f"constant: {what}", "metric": metric, "value": c.get("value"), "ci_low": c.get("ci_low"),
           "ci_high": c.get("ci_high"), "model_value": est.get("value"), "n_audit": est.get("n_audit"),
           "compared_with": name}
    v, cv = est.get("value"), c.get("value")
    if v is None or cv is None or not (np.isfinite(v) and np.isfinite(cv)):
        return {**out, "worse": None, "sentence": f"not compared with predicting {name}: no labelled audit sample "
                                                  "or coreset (or the metric is undefined on the audit sample)"}
    worse = bool(v < cv) if higher_is_better(metric) else bool(v > cv)
    out["worse"] = worse
    out["sentence"] = (f"{'worse' if worse else 'better'} than predicting {name}: {metric} {v:.4g} vs {cv:.4g} for "
                       f"the constant ({what}) on {est.get('n_audit')} audit graphs")
    return out


def production_measurement(model, X_coreset, y_coreset, tau, X_audit, y_audit, *, n_pool: int, epsilon=None,
                           confidence: float = 0.9, seed: int = 0, dataset: str = "") -> dict:
    r"""Everything production mode can state about a trained model (module doc).

    Parameters
    ----------
    model : tmdlib.models.Model
        Fitted (``head`` set).
    X_coreset, y_coreset, tau
        The labelled coreset members (:class:`tmdlib.models.Inputs`), their labels as stored and weights τ.
    X_audit, y_audit
        The labelled audit members and their labels.
    n_pool : int
        Pool size :math:`n` (the τ's sum when the coreset covers the pool).
    epsilon : float, optional
        The selection's mean medoid objective :math:`\varepsilon` (TMD).
    confidence : float
    seed : int
    dataset : str
        For the headline metric's choice.

    Returns
    -------
    dict
        ``pool_estimate`` (:func:`pool_estimate`), ``constant_predictor`` (:func:`compare_with_constant`),
        ``coreset_loss``, ``bound`` (with ``worse_than_constant`` and ``constant_note``) (``c``, ``epsilon``, ``c_epsilon``,
        ``loss_scale`` and what it is, ``certified``), ``not_measurable``.
    """
    head = model.head
    task = head.task
    tau = np.asarray(tau, dtype=np.float64)
    core_loss = weighted_loss(model.losses(X_coreset, y_coreset), tau) if len(X_coreset) else None
    audit_out = model.outputs(X_audit) if len(X_audit) else np.zeros((0, task.output_dim))
    audit_losses = head.losses(audit_out, y_audit) if len(X_audit) else np.zeros(0)
    est = pool_estimate(audit_out, y_audit, task.type, headline(task.type, dataset), losses=audit_losses,
                        confidence=confidence, seed=seed, num_classes=task.num_classes)
    # no labelled coreset: nothing to fit the constant on (compare_with_constant then says it did not compare)
    const_out, const_what = constant_outputs(task, y_coreset, tau, len(audit_out) if len(y_coreset) else 0)
    const = compare_with_constant(est, const_out, y_audit, task, const_what, confidence=confidence, seed=seed)
    scale, what = trivial_loss(task.type, head.loss, head.encode(y_coreset), tau, task.num_classes, head.delta)
    cert = model.certificate()
    c = None if cert is None else cert.get("c")
    c_eps = None if c is None or epsilon is None else float(c) * float(epsilon)
    bound = {"c": c, "epsilon": None if epsilon is None else float(epsilon), "c_epsilon": c_eps,
             "erm_bound": None if c_eps is None else 2 * c_eps, "loss_scale": scale, "loss_scale_what": what,
             "full_model_train_loss": None, "coreset_loss_weighted": core_loss,
             "certified": None if cert is None else bool(cert.get("certified")),
             "constraint_ok": None if cert is None else cert.get("constraint_ok"),
             "valid": None if cert is None else bool(cert.get("valid", True)), "conditions": [],
             "gap_observed": None, "lemma_holds": None, "excess_loss": None, "corollary_holds": None,
             "corollary_note": "the excess loss over a full-data model is not measurable in production",
             "worse_than_constant": const["worse"], "constant_note": const["sentence"],
             "lipschitz_note": None if cert is not None else (
                 f"model {model.name!r} has no Lipschitz constant in TMD: Lemma 3.2 holds with some c, none is "
                 "known, so no c*eps is stated")}
    return {"pool_estimate": est, "coreset_loss": core_loss, "n_pool": int(n_pool), "bound": bound,
            "constant_predictor": const, "not_measurable": dict(NOT_MEASURABLE)}


def benchmark_measurement(model, X_train, y_train, subset, tau, X_test, y_test, *, epsilon=None,
                          dataset: str = "") -> dict:
    r"""Benchmark mode for a model without a TMD-Lipschitz constant: the test metrics, and Lemma 3.2's observed gap
    :math:`|\frac1n\sum_{i\in\mathcal I}\tau_i\mathcal L_i - \frac1n\sum_i\mathcal L_i|` (every training label is
    known here), with no :math:`c\,\varepsilon` to compare it with.

    Returns
    -------
    dict
        ``test`` (``metric``, ``coreset_model``, ``coreset_metrics``, ``n``), ``bound`` (``gap_observed``,
        ``coreset_loss_weighted``, ``full_train_loss``, ``loss_scale``; ``c`` None).
    """
    head = model.head
    task = head.task
    losses = model.losses(X_train, y_train)
    n = len(losses)
    core = float(np.dot(np.asarray(tau, dtype=np.float64), losses[np.asarray(subset)]) / n)
    full = float(losses.mean())
    metric = headline(task.type, dataset)
    test_scores = score(model.outputs(X_test), y_test, task.type, task.num_classes) if len(X_test) else {}
    scale, what = trivial_loss(task.type, head.loss, head.encode(y_train), None, task.num_classes, head.delta)
    return {"test": {"metric": metric, "coreset_model": test_scores.get(metric), "coreset_metrics": test_scores,
                     "full_model": None, "n": int(len(X_test))},
            "bound": {"c": None, "epsilon": None if epsilon is None else float(epsilon), "c_epsilon": None,
                      "gap_observed": abs(core - full), "coreset_loss_weighted": core, "full_train_loss": full,
                      "loss_scale": scale, "loss_scale_what": what, "full_model_train_loss": None,
                      "lemma_holds": None, "erm_bound": None, "excess_loss": None, "corollary_holds": None,
                      "corollary_note": "no full-data reference is trained for a model without a TMD constant",
                      "certified": None, "valid": None, "conditions": [],
                      "lipschitz_note": f"model {model.name!r} has no Lipschitz constant in TMD: no c*eps is stated"}}


def _comparable(task) -> bool:
    """One regression target or one binary label: what the control verdict compares."""
    return (task.is_regression and task.num_targets == 1) or (task.single_label and not task.class_indices)


def control_verdict(pred_control, pred_strategy, y, task, *, confidence: float = 0.9, n_boot: int = 2000,
                    seed: int = 0) -> dict:
    r"""Is the strategy better than Random on this pool?  The two arms' models compared on the shared audit sample.

    With :math:`e^R_i, e^S_i` the errors of the control (Random) arm's and the strategy arm's models on audit member
    :math:`i` -- squared errors for regression, the Brier score :math:`(p_i - y_i)^2` for a binary task --, the
    statistic is the difference of the two root mean errors,

    .. math:: \Delta = \sqrt{\overline{e^S}} - \sqrt{\overline{e^R}}

    (the RMSE difference for regression; negative: the strategy's model is better), with a **paired** percentile
    bootstrap interval over the audit members (``scipy.stats.bootstrap``, ``paired=True``: both arms are scored on
    the same resampled members).  The verdict is ``"strategy better"`` when the interval lies below 0, ``"Random
    better"`` above, else ``"undecided"``.

    Parameters
    ----------
    pred_control, pred_strategy : ndarray, shape (m,)
        Predictions (regression) or positive-class probabilities (binary) of the two arms' models on the audit sample.
    y : ndarray, shape (m,)
    task : TaskSpec
        Regression, or one binary label.
    confidence : float
    n_boot : int
    seed : int

    Returns
    -------
    dict
        ``difference``, ``low``, ``high``, ``confidence``, ``n``, ``verdict``, ``metric``, ``control``, ``strategy``
        (each arm's root mean error).
    """
    from scipy.stats import bootstrap

    y = np.asarray(y, dtype=np.float64).ravel()
    a = (np.asarray(pred_control, dtype=np.float64).ravel() - y) ** 2
    b = (np.asarray(pred_strategy, dtype=np.float64).ravel() - y) ** 2
    if not _comparable(task):
        raise ValueError(f"the control verdict takes a regression or binary task, not {task.describe()}")
    metric = "rmse" if task.is_regression else "root Brier score"

    def stat(ea, eb, axis=-1):
        return np.sqrt(np.mean(eb, axis=axis)) - np.sqrt(np.mean(ea, axis=axis))

    diff = float(stat(a, b))
    out = {"metric": metric, "difference": diff, "confidence": float(confidence), "n": int(y.size),
           "control": float(np.sqrt(a.mean())) if y.size else None,
           "strategy": float(np.sqrt(b.mean())) if y.size else None}
    if y.size < 5:
        return {**out, "low": None, "high": None, "verdict": "undecided",
                "note": f"{y.size} labelled audit members: too few to compare the arms"}
    res = bootstrap((a, b), stat, paired=True, vectorized=True, confidence_level=float(confidence),
                    n_resamples=int(n_boot), method="percentile", random_state=np.random.default_rng(seed))
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    verdict = "strategy better" if high < 0 else ("Random better" if low > 0 else "undecided")
    return {**out, "low": low, "high": high, "verdict": verdict}


def compare_arms(make, inputs_of, labels_of, base, control, strategy, audit, task, *, confidence: float = 0.9,
                 seed: int = 0) -> dict:
    r"""The Random control of a round: one model per arm, each on its own labels, compared on the audit sample.

    The control arm's model is trained on the labels of the earlier rounds (``base``) and of the round's uniform picks
    (``control``); the strategy arm's on ``base`` and as many of the round's other picks (``strategy``), drawn
    uniformly among them (seeded), so that both models see the same number of labels and differ only in how the
    round chose them.  Both are scored on the labelled audit sample by :func:`control_verdict`.

    Parameters
    ----------
    make : callable
        ``make() -> Model`` (unfitted, the trained model's kind and options).
    inputs_of : callable
        ``inputs_of(ids) -> Inputs``.
    labels_of : callable
        ``labels_of(ids) -> ndarray`` (labels as stored).
    base, control, strategy, audit : ndarray of int
        Graph ids, labelled.
    task : TaskSpec
    confidence, seed

    Returns
    -------
    dict
        :func:`control_verdict`'s, plus ``n_base``, ``n_control``, ``n_strategy`` (labels each arm's model had beyond
        ``base``) and ``rule``.
    """
    from .predict import probabilities

    base, control, strategy, audit = (np.asarray(a, dtype=np.int64) for a in (base, control, strategy, audit))
    m = int(min(control.size, strategy.size))
    rng = np.random.default_rng([int(seed), 0xA53])
    control_arm = control if control.size == m else np.sort(rng.choice(control, size=m, replace=False))
    strategy_arm = np.sort(rng.choice(strategy, size=m, replace=False)) if m else strategy[:0]
    facts = {"n_base": int(base.size), "n_control": m, "n_strategy": m,
             "rule": "each arm's model: the earlier rounds' labels plus as many of the round's picks of its arm "
                     "(the strategy's drawn uniformly); compared on the labelled audit sample"}
    if m < 2 or audit.size < 5 or not _comparable(task):
        why = ("a regression or binary task" if not _comparable(task) else
               f"at least 2 labelled picks per arm ({m}) and 5 labelled audit members ({audit.size})")
        return {**facts, "verdict": "undecided", "difference": None, "low": None, "high": None,
                "note": f"not compared: needs {why}"}
    preds = []
    for arm in (control_arm, strategy_arm):
        ids = np.concatenate([base, arm])
        out = make().fit(inputs_of(ids), labels_of(ids), np.ones(ids.size), task).outputs(inputs_of(audit))
        preds.append(np.asarray(out)[:, 0] if task.is_regression else probabilities(out, task)[:, 1])
    y = np.asarray(labels_of(audit), dtype=np.float64).reshape(audit.size, -1)[:, 0]
    return {**facts, **control_verdict(preds[0], preds[1], y, task, confidence=confidence, seed=seed)}
