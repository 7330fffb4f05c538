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
  majority class), and no bound of it is called informative (:func:`tmdlib.guarantees._bounds.bound_verdict`).

Nothing is computed from labels that do not exist: no full-data reference, no observed gap, no test metric.
"""
from __future__ import annotations

import numpy as np

from ..guarantees.losses import trivial_loss
from ..metrics import headline, higher_is_better, score

__all__ = ["pool_estimate", "weighted_loss", "constant_outputs", "compare_with_constant", "production_measurement", "benchmark_measurement", "NOT_MEASURABLE",
           "control_verdict", "compare_arms", "cross_fit_arms", "labels_needed", "errors_verdict",
           "CONTROL_FOLDS", "CONTROL_REPEATS", "CONTROL_CONFIDENCE", "production_members", "control_arms",
           "measure_without_constant"]

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
    return task.constant_outputs(y_train, tau, m)


def compare_with_constant(est: dict, const_out, y_audit, task, what: str, *, confidence: float = 0.9,
                          seed: int = 0) -> dict:
    """The constant predictor's estimate on the audit sample (:func:`pool_estimate`, the model's metric) beside the
    model's ``est``: ``worse`` (True when the model's estimate is worse than the constant's, None when either is
    missing) and one ``sentence``."""
    metric = est["metric"]
    c = pool_estimate(const_out, y_audit, task.type, metric, confidence=confidence, seed=seed,
                      num_classes=task.num_classes) if len(const_out) else {"value": None}
    name = task.constant_predictor
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


def measure_without_constant(model, X_train, X_test, y, subset, tau, *, epsilon=None, dataset: str = "") -> dict:
    """:func:`benchmark_measurement` in the shape of :func:`tmdlib.torch.measure.measure` (what
    :func:`tmdlib.reporting.evaluation.metrics_document` takes): no reference, no node bound, no sweep.

    ``y``: the pool's labels, ``(N,)`` or ``(N, T)``, indexed by ``X_train.positions`` and ``X_test.positions``
    (one target: a vector); ``tau`` ``(k,)``: the coreset's weights, ``subset`` its positions among the training
    members."""
    y = np.asarray(y)
    y = y.reshape(len(y), -1) if model.head.task.num_targets > 1 else y.reshape(len(y), -1)[:, 0]
    m = benchmark_measurement(model, X_train, y[X_train.positions], subset, tau, X_test, y[X_test.positions],
                              epsilon=epsilon, dataset=dataset)
    m["bound"]["tau_sum"] = float(np.sum(tau))
    return {**m, "task": model.head.to_dict(), "reference": {"degenerate": None, "epochs": None,
                                                             "note": m["bound"]["corollary_note"]},
            "nodes": None, "sweep": [], "sweep_note": "no sweep for a model without a TMD-Lipschitz constant",
            "epochs": {"full_model": None, "sweep": None}}


def _comparable(task) -> bool:
    """One regression target or one binary label: what the control verdict compares (the task's
    :attr:`~tmdlib.datasets._task.TaskSpec.control_error`)."""
    return task.control_error is not None


def control_verdict(pred_control, pred_strategy, y, task, *, confidence: float = 0.9, n_boot: int = 2000,
                    seed: int = 0) -> dict:
    r"""Is the strategy better than Random on this pool?  The two arms' models compared on shared test members.

    With :math:`e^R_i, e^S_i` the errors of the control (Random) arm's and the strategy arm's models on test member
    :math:`i` -- squared errors for regression, the Brier score :math:`(p_i - y_i)^2` for a binary task --,
    :func:`errors_verdict`.

    Parameters
    ----------
    pred_control, pred_strategy : ndarray, shape (m,)
        Predictions (regression) or positive-class probabilities (binary) of the two arms' models on the members.
    y : ndarray, shape (m,)
    task : TaskSpec
        Regression, or one binary label.
    confidence : float
    n_boot : int
    seed : int

    Returns
    -------
    dict
        :func:`errors_verdict`'s.
    """
    y = np.asarray(y, dtype=np.float64).ravel()
    a = (np.asarray(pred_control, dtype=np.float64).ravel() - y) ** 2
    b = (np.asarray(pred_strategy, dtype=np.float64).ravel() - y) ** 2
    return errors_verdict(a, b, task, confidence=confidence, n_boot=n_boot, seed=seed)


def errors_verdict(err_control, err_strategy, task, *, confidence: float = 0.9, n_boot: int = 2000,
                   seed: int = 0) -> dict:
    r"""The paired comparison of two arms' per-member errors.

    With :math:`e^R_i, e^S_i` the Random arm's and the strategy arm's errors on test member :math:`i` (squared errors,
    or Brier scores), the statistic is the difference of the two root mean errors,

    .. math:: \Delta = \sqrt{\overline{e^S}} - \sqrt{\overline{e^R}}

    (the RMSE difference for regression; negative: the strategy's model is better), with a **paired** percentile
    bootstrap interval over the members (``scipy.stats.bootstrap``, ``paired=True``: both arms are scored on the same
    resampled members).  The verdict is ``"strategy better"`` when the interval lies below 0, ``"Random better"``
    above, else ``"undecided"``.

    Parameters
    ----------
    err_control, err_strategy : ndarray, shape (m,)
        Non-negative per-member errors of the two arms.
    task : TaskSpec
        Regression, or one binary label.
    confidence, n_boot, seed

    Returns
    -------
    dict
        ``difference``, ``low``, ``high``, ``confidence``, ``n``, ``verdict``, ``metric``, ``control``, ``strategy``
        (each arm's root mean error).
    """
    from scipy.stats import bootstrap

    a = np.asarray(err_control, dtype=np.float64).ravel()
    b = np.asarray(err_strategy, dtype=np.float64).ravel()
    if not _comparable(task):
        raise ValueError(f"the control verdict takes a regression or binary task, not {task.describe()}")
    metric = task.control_error

    def stat(ea, eb, axis=-1):
        return np.sqrt(np.mean(eb, axis=axis)) - np.sqrt(np.mean(ea, axis=axis))

    diff = float(stat(a, b)) if a.size else None
    out = {"metric": metric, "difference": diff, "confidence": float(confidence), "n": int(a.size),
           "control": float(np.sqrt(a.mean())) if a.size else None,
           "strategy": float(np.sqrt(b.mean())) if a.size else None}
    if a.size < 5:
        return {**out, "low": None, "high": None, "verdict": "undecided",
                "note": f"{a.size} labelled test members: too few to compare the arms"}
    res = bootstrap((a, b), stat, paired=True, vectorized=True, confidence_level=float(confidence),
                    n_resamples=int(n_boot), method="percentile", random_state=np.random.default_rng(seed))
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    verdict = "strategy better" if high < 0 else ("Random better" if low > 0 else "undecided")
    return {**out, "low": low, "high": high, "verdict": verdict}


#: Folds of the Random control's cross-fitting (:func:`cross_fit_arms`).
CONTROL_FOLDS = 5
#: Fold splits it averages each member's errors over.
CONTROL_REPEATS = 3
#: The control's confidence (at least; production passes the stage's when higher): a wrong verdict is worse than
#: "undecided", and at 90 % a strategy drawing like Random was called better or worse in 15 % of the series pools'
#: rounds, at 95 % in 8 % (issue 67's measurement, docs/pool-benchmark.md).
CONTROL_CONFIDENCE = 0.95


def labels_needed(err_control, err_strategy, confidence: float = 0.9) -> int | None:
    r"""Uniform test labels a decision needs on this pool: :math:`n^\ast = \lceil (z\,s_d / |\bar d|)^2 \rceil`.

    :math:`d_i = e^S_i - e^R_i` are the paired differences of the two arms' per-member errors (squared errors or
    Brier scores), :math:`\bar d, s_d` their mean and standard deviation, :math:`z` the standard normal quantile at
    :math:`(1+\gamma)/2`: the sample size at which a two-sided interval of confidence :math:`\gamma` around a mean
    difference this large would just exclude 0 (the normal approximation of the paired comparison).  ``None`` when
    the arms' errors are identical (no number of labels decides).

    Parameters
    ----------
    err_control, err_strategy : ndarray, shape (n,)
    confidence : float

    Returns
    -------
    int or None
    """
    from statistics import NormalDist

    d = np.asarray(err_strategy, dtype=np.float64).ravel() - np.asarray(err_control, dtype=np.float64).ravel()
    mean = float(d.mean()) if d.size else 0.0
    if d.size < 2 or mean == 0.0:
        return None
    z = NormalDist().inv_cdf((1.0 + float(confidence)) / 2.0)
    return int(np.ceil((z * float(d.std(ddof=1)) / abs(mean)) ** 2))


def cross_fit_arms(fit_predict, labels_of, base, control, strategy, audit, task, *, folds: int = CONTROL_FOLDS,
                   repeats: int = CONTROL_REPEATS, confidence: float = CONTROL_CONFIDENCE, n_boot: int = 2000,
                   seed: int = 0) -> dict:
    r"""The Random control of a round, cross-fitted over every uniformly drawn label the round has.

    The uniform members :math:`U = \mathcal A \cup C` (the audit sample and the round's control arm: both drawn
    uniformly from the pool) are split into :math:`K` folds :math:`U_1, \dots, U_K` (seeded), ``repeats`` times
    with different splits.  For fold :math:`f`, with :math:`a = \min(\min_f |U \setminus U_f|,\ |S|)` labels per
    arm,

    * the **Random** model is trained on the earlier rounds' labels :math:`B` plus :math:`a` members of
      :math:`U \setminus U_f` drawn uniformly;
    * the **strategy** model on :math:`B` plus :math:`a` of the round's strategy picks :math:`S` drawn uniformly (all
      of them when :math:`a = |S|`: one model then serves every fold);

    both predict :math:`U_f`, which neither saw.  Every member of :math:`U` is thus predicted by each arm by models
    that never trained on it, the arms have as many labels each and differ only in how the round chose them.  Each
    member's errors :math:`e^R_i, e^S_i` (squared errors, or Brier scores) are averaged over the repeats (errors,
    not predictions: an average of models would be a better model than either arm's), :func:`errors_verdict`
    compares the arms over all of :math:`U` (paired bootstrap), and :func:`labels_needed` states how many uniform
    test labels a decision needs on this pool.

    Parameters
    ----------
    fit_predict : callable
        ``fit_predict(train_ids, predict_ids) -> ndarray, shape (len(predict_ids),)``: a fresh model trained on the
        labels of ``train_ids`` (unit weights), its predictions (regression) or positive-class probabilities (binary)
        on ``predict_ids``.
    labels_of : callable
        ``labels_of(ids) -> ndarray``: the labels as stored (first column read).
    base, control, strategy, audit : ndarray of int
        Labelled ids: earlier rounds, the round's uniform control arm, the round's strategy picks, the audit sample.
    task : TaskSpec
        Regression, or one binary label.
    folds : int
        :math:`K` (at most :math:`|U|`).
    repeats : int
        Fold splits (each member's errors averaged over them).
    confidence, n_boot, seed

    Returns
    -------
    dict
        :func:`errors_verdict`'s (``n``: the uniform test members :math:`|U|`), plus ``n_base``, ``n_control`` (the
        arm's size :math:`|C|`), ``n_audit``, ``n_strategy`` (:math:`|S|`), ``n_arm`` (:math:`a`), ``folds``,
        ``repeats``, ``labels_needed`` (:func:`labels_needed`; None when no number decides), ``more_needed``
        (beyond :math:`|U|`; 0 once decided) and ``rule``.

    Raises
    ------
    ValueError
        A training set would hold a member it is tested on (``base`` or ``strategy`` meeting :math:`U`).
    """
    base, control, strategy, audit = (np.asarray(a, dtype=np.int64).ravel() for a in (base, control, strategy, audit))
    test = np.union1d(audit, control)
    k = int(max(2, min(int(folds), test.size))) if test.size >= 2 else 0
    r = int(max(1, repeats))
    facts = {"n_base": int(base.size), "n_control": int(control.size), "n_audit": int(audit.size),
             "n_strategy": int(strategy.size), "folds": k, "repeats": r,
             "rule": f"{k}-fold cross-fitting ({r} splits) over the uniform labels (audit sample and control arm): "
                     "per fold, the earlier rounds' labels plus as many of the other folds' uniform labels (Random) "
                     "or of the round's strategy picks (strategy) train one model each, both predict the fold; the "
                     "arms' errors are compared over every uniform label (paired bootstrap)"}
    if np.intersect1d(np.concatenate([base, strategy]), test).size:
        raise ValueError("the control's cross-fitting would test on a trained member (earlier rounds' or strategy "
                         "picks among the uniform labels)")
    a = int(min(test.size - int(np.ceil(test.size / k)), strategy.size)) if k else 0
    if a < 2 or test.size < 5 or not _comparable(task):
        why = ("a regression or binary task" if not _comparable(task) else
               f"at least 2 labels per arm ({a}: {strategy.size} strategy picks, {test.size} uniform labels) and 5 "
               f"uniform labels to test on ({test.size})")
        return {**facts, "n_arm": a, "n": int(test.size), "verdict": "undecided", "difference": None, "low": None,
                "high": None, "labels_needed": None, "more_needed": None, "note": f"not compared: needs {why}"}
    y = np.asarray(labels_of(test), dtype=np.float64).reshape(test.size, -1)[:, 0]
    err = np.zeros((2, test.size), dtype=np.float64)

    def errors(train, part):
        if np.intersect1d(train, part).size:  # never trained and tested on the same member
            raise ValueError("the control's cross-fitting would test on a trained member")
        at = np.searchsorted(test, part)
        return at, (np.asarray(fit_predict(train, part), dtype=np.float64).ravel() - y[at]) ** 2

    if a == strategy.size:  # the strategy's whole round: one model, trained on none of U, predicts all of it
        at, e = errors(np.concatenate([base, strategy]), test)
        err[1, at] = r * e
    rng = np.random.default_rng([int(seed), 0xA53])
    for rep in range(r):
        perm = np.random.default_rng([int(seed), 0xC0F1, rep]).permutation(test)
        for part in np.array_split(perm, k):
            rest = np.setdiff1d(test, part)
            at, e = errors(np.concatenate([base, np.sort(rng.choice(rest, size=a, replace=False))]), part)
            err[0, at] += e
            if a < strategy.size:
                at, e = errors(np.concatenate([base, np.sort(rng.choice(strategy, size=a, replace=False))]), part)
                err[1, at] += e
    err /= r
    v = errors_verdict(err[0], err[1], task, confidence=confidence, n_boot=n_boot, seed=seed)
    need = labels_needed(err[0], err[1], confidence)
    more = 0 if v["verdict"] != "undecided" else (None if need is None else max(need - int(test.size), 0))
    return {**facts, "n_arm": a, **v, "labels_needed": need, "more_needed": more}


def compare_arms(make, inputs_of, labels_of, base, control, strategy, audit, task, *,
                 confidence: float = CONTROL_CONFIDENCE, seed: int = 0, folds: int = CONTROL_FOLDS,
                 repeats: int = CONTROL_REPEATS) -> dict:
    r"""The Random control of a round in production: :func:`cross_fit_arms` with the trained model's kind.

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
    confidence : float
        At least :data:`CONTROL_CONFIDENCE` is used.
    seed, folds, repeats

    Returns
    -------
    dict
        :func:`cross_fit_arms`'s.
    """
    def fit_predict(train, predict):
        out = make().fit(inputs_of(train), labels_of(train), np.ones(train.size), task).outputs(inputs_of(predict))
        return task.point_scores(out)

    return cross_fit_arms(fit_predict, labels_of, base, control, strategy, audit, task, folds=folds,
                          repeats=repeats, confidence=max(float(confidence), CONTROL_CONFIDENCE), seed=seed)


def production_members(info: dict, sel: dict, label_map: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(coreset ids, τ, labelled audit ids)`` production mode measures on: the coreset as trained (``train.json``'s
    ``medoids_trained`` / ``tau_trained`` when part of it was answered, else the selection's medoids and τ) and the
    audit sample (``sel["audit_ids"]``), each restricted to the graphs ``label_map`` (graph id -> label) has."""
    trained, trained_tau = info.get("medoids_trained", sel["medoids"]), info.get("tau_trained", sel["tau"])
    med = np.asarray([int(g) for g in trained if int(g) in label_map], dtype=np.int64)
    tau_of = dict(zip((int(g) for g in trained), np.asarray(trained_tau, dtype=np.float64)))
    audit_ids = np.asarray(sel.get("audit_ids") or [], dtype=np.int64)
    answered = np.asarray([int(g) for g in audit_ids if int(g) in label_map], dtype=np.int64)
    return med, np.asarray([tau_of[int(g)] for g in med]), answered


def control_arms(model, name: str, sel: dict, label_map: dict, audit, task, inputs_of, labels_of, *,
                 confidence: float, seed: int) -> dict | None:
    """The Random control's verdict (:func:`compare_arms`) when the selection ``sel`` has a control arm
    (``sel["rounds"]["control_ids"]``, ``select.control``), None otherwise.

    The arms split the round's labelled members: ``control`` (the Random arm), ``strategy`` (the strategy's new
    picks), and ``base`` (the medoids picked before this round); each arm is refitted from scratch with the trained
    model's kind (``name``: its registered name, :func:`tmdlib.models._registry.resolve_model`) and scored on the
    labelled ``audit`` ids.  Molecule models only (a graph model is not retrained twice per evaluation): a graph
    model, or a name that no longer resolves, gives ``{"verdict": "undecided", "note": ...}``.  ``inputs_of(ids)``
    and ``labels_of(ids)`` give the members' :class:`~tmdlib.models._base.Inputs` and labels as stored.
    """
    from .._errors import InputError
    from ._registry import resolve_model

    rounds = sel.get("rounds") or {}
    if not rounds.get("control_ids"):
        return None
    if model.inputs != "molecules":
        return {"verdict": "undecided", "note": f"model {model.name!r} reads graphs: the arms are compared for "
                                                "molecule models only (retraining a GIN twice per evaluation)"}
    lab = lambda ids: np.asarray([int(g) for g in ids if int(g) in label_map], dtype=np.int64)  # noqa: E731
    control, strategy = lab(rounds["control_ids"]), lab(rounds.get("strategy_new_ids") or [])
    this_round = set(rounds["control_ids"]) | set(rounds.get("strategy_new_ids") or [])
    base = lab([g for g in sel["medoids"] if int(g) not in this_round])
    try:
        spec = resolve_model(name)
    except (InputError, ValueError) as err:
        return {"verdict": "undecided", "note": f"the arms were not compared: {err}"}
    return compare_arms(lambda: spec.build({}), inputs_of, labels_of, base, control, strategy, audit, task,
                        confidence=confidence, seed=seed)
