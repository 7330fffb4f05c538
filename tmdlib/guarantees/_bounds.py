r"""The loss guarantees of Jain et al. as numbers: observed gaps next to their bounds (pure numpy).

Graph coreset (Lemma 3.2, Corollary 3.3).  For training graphs :math:`X = \{G_1..G_n\}`, a coreset
:math:`\mathcal I` with cluster sizes :math:`\tau` (:math:`\sum_{j \in \mathcal I} \tau_j = n`) and medoid objective
:math:`\varepsilon = f_{\mathrm{TMD}}(\mathcal I; X)`, and any model :math:`h` with stability constant
:math:`c = M \prod_\ell \Phi_\ell`,

.. math:: \mathrm{gap}(h) = \Big|\frac1n \sum_{i\in\mathcal I}\tau_i \mathcal L(h(G_i)) -
          \frac1n \sum_{i \in [n]} \mathcal L(h(G_i))\Big| \le c\,\varepsilon ,

and a minimiser :math:`\hat h` of the τ-weighted coreset loss has excess loss on :math:`X` of at most
:math:`2 c \varepsilon` over the best model of the class (here: a model trained on all of :math:`X`).

Node subsampling (Corollary 4.1).  With :math:`\varepsilon_i = \mathrm{TMD}(G_i, G_i[S_i]) =
\mathrm{TN}(G_i) - \mathrm{TN}(G_i[S_i])`, per graph :math:`|\mathcal L(h(G_i)) - \mathcal L(h(G_i[S_i]))| \le
c\,\varepsilon_i`, so the mean loss gap is at most :math:`c \cdot \frac1n\sum_i \varepsilon_i` and the excess loss
of the model trained on the subgraphs at most :math:`2c \cdot \frac1n \sum_i\varepsilon_i`.  With graph weights
(a node-subsampled coreset) the means are τ-weighted: :math:`\sum_i \tau_i \varepsilon_i / \sum_i \tau_i`.

Verdict (:func:`bound_verdict`).  A bound that holds can still say nothing: the bound is **informative** when it is
below the loss scale (the full-data model's mean training loss, else :math:`\ln 2`) and **vacuous** otherwise.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["medoid_objective", "medoids_objective", "cluster_sizes", "weighted_subset_loss", "coreset_gap",
           "lemma_bound", "erm_bound", "excess_loss", "node_epsilon_mean", "node_gap", "node_bounds", "bound_verdict", "LN2",
           "VERDICTS"]

#: BCE (in nats) of the constant predictor p = 1/2: :math:`\ln 2`, the model-free loss scale.
LN2 = math.log(2.0)
#: The values of ``bound_verdict(...)["verdict"]``.
VERDICTS = ("informative", "vacuous", "unknown", "invalid", "worse than constant")


def _vec(a, name: str) -> np.ndarray:
    v = np.asarray(a, dtype=np.float64).ravel()
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be finite")
    return v


def medoids_objective(D: np.ndarray, medoids) -> float:
    r""":math:`f_D(\mathcal I; X) = \frac1n \sum_i \min_{j\in\mathcal I} D_{ij}` for a validated ``D``."""
    med = np.asarray(medoids, dtype=np.int64)
    return float(D[:, med].min(axis=1).mean())


def medoid_objective(D, medoids) -> float:
    r""":math:`f_D(\mathcal I; X) = \frac1n \sum_i \min_{j\in\mathcal I} D_{ij}`; ``medoids`` are positions into ``D``."""
    D = np.asarray(D, dtype=np.float64)
    med = np.asarray(medoids, dtype=np.int64).ravel()
    if D.ndim != 2 or D.shape[0] != D.shape[1] or med.size == 0:
        raise ValueError("D must be square and medoids non-empty")
    return medoids_objective(D, med)


def cluster_sizes(D, medoids) -> np.ndarray:
    r"""τ of the nearest-medoid assignment (ties to the first listed medoid; a medoid counts itself).

    Returns ``(k,)`` int64 aligned with ``medoids`` as given.
    """
    D = np.asarray(D, dtype=np.float64)
    med = np.asarray(medoids, dtype=np.int64).ravel()
    pos = np.argmin(D[:, med], axis=1)
    pos[med] = np.arange(med.size)
    return np.bincount(pos, minlength=med.size).astype(np.int64)


def weighted_subset_loss(losses, subset, tau, n: int | None = None) -> float:
    r""":math:`\frac1n \sum_{i\in\mathcal I} \tau_i \mathcal L_i`.

    Parameters
    ----------
    losses : array_like, shape (n,)
        Per-graph losses of the full training set.
    subset : array_like of int, shape (k,)
        Positions of the coreset graphs in ``losses``.
    tau : array_like, shape (k,)
        Weights aligned with ``subset``.
    n : int, optional
        Normaliser (default ``len(losses)``).
    """
    L = _vec(losses, "losses")
    idx = np.asarray(subset, dtype=np.int64).ravel()
    t = _vec(tau, "tau")
    if idx.size != t.size:
        raise ValueError(f"subset ({idx.size}) and tau ({t.size}) differ in length")
    n = L.size if n is None else int(n)
    return float(np.dot(t, L[idx]) / n) if n else float("nan")


def coreset_gap(losses, subset, tau, sample=None, n: int | None = None) -> dict:
    r"""Observed quantities of Lemma 3.2 for one model.

    Parameters
    ----------
    losses : array_like, shape (m,)
        Per-graph losses: of the whole training set (``m = n``), or of the coreset graphs and a sample.
    subset : array_like of int, shape (k,)
        Positions of the coreset graphs in ``losses``.
    tau : array_like, shape (k,)
        Their weights.
    sample : array_like of int, shape (s,), optional
        Positions in ``losses`` of a uniform sample of the training set (pools too large to score whole):
        the full mean :math:`rac1n\sum_i\mathcal L_i` is then estimated by the sample mean, with its
        standard error :math:`\hat\sigma/\sqrt s` (``full_stderr``); the weighted coreset loss stays exact.
    n : int, optional
        Size of the training set (required with ``sample``; default ``len(losses)``).

    Returns
    -------
    dict
        ``full`` :math:`= \frac1n\sum_i \mathcal L_i`, ``weighted`` :math:`= \frac1n\sum_{i\in\mathcal I}\tau_i\mathcal L_i`,
        ``signed`` = weighted − full, ``gap`` = its absolute value, ``tau_sum`` and ``n``
        (Lemma 3.2 presumes ``tau_sum == n``); with ``sample`` also ``sampled`` (its size) and ``full_stderr``.
    """
    L = _vec(losses, "losses")
    if sample is None:
        full = float(L.mean()) if L.size else float("nan")
        n = L.size
        extra = {}
    else:
        if n is None:
            raise ValueError("coreset_gap: give n (the training-set size) with a sample")
        S = L[np.asarray(sample, dtype=np.int64).ravel()]
        full = float(S.mean()) if S.size else float("nan")
        extra = {"sampled": int(S.size),
                 "full_stderr": float(S.std(ddof=1) / np.sqrt(S.size)) if S.size > 1 else float("nan")}
    weighted = weighted_subset_loss(L, subset, tau, n=n)
    return {"full": full, "weighted": weighted, "signed": weighted - full, "gap": abs(weighted - full),
            "tau_sum": float(np.sum(tau)), "n": int(n), **extra}


def lemma_bound(c: float, epsilon: float) -> float:
    r"""Right-hand side of Lemma 3.2: :math:`c\,\varepsilon`."""
    return float(c) * float(epsilon)


def erm_bound(c: float, epsilon: float) -> float:
    r"""Right-hand side of Corollary 3.3 / 4.1: :math:`2 c\,\varepsilon`."""
    return 2.0 * float(c) * float(epsilon)


def excess_loss(subsampled_model_loss: float, reference_model_loss: float) -> float:
    r"""Excess training loss :math:`\frac1n\sum_i\mathcal L(\hat h(G_i)) - \frac1n\sum_i\mathcal L(h_{\mathrm{ref}}(G_i))`.

    With :math:`h_{\mathrm{ref}}` trained on the whole training set (a stand-in for the minimiser),
    Corollary 3.3 bounds it by :math:`2c\varepsilon` (it can be negative: training is not exact ERM).
    """
    return float(subsampled_model_loss) - float(reference_model_loss)


def node_epsilon_mean(epsilon, weights=None) -> float:
    r""":math:`\frac1n\sum_i\varepsilon_i`, or :math:`\sum_i \tau_i\varepsilon_i / \sum_i\tau_i` with ``weights``."""
    e = _vec(epsilon, "epsilon")
    if e.size == 0:
        return float("nan")
    if np.any(e < 0):
        raise ValueError("node epsilons must be >= 0")
    if weights is None:
        return float(e.mean())
    w = _vec(weights, "weights")
    if w.size != e.size:
        raise ValueError(f"weights ({w.size}) and epsilon ({e.size}) differ in length")
    return float(np.dot(w, e) / w.sum())


def node_gap(losses_full, losses_sub, weights=None) -> dict:
    r"""Observed loss change from :math:`G_i` to :math:`G_i[S_i]` for one model.

    Returns
    -------
    dict
        ``gap`` = :math:`|\overline{\mathcal L(h(G[S]))} - \overline{\mathcal L(h(G))}|` (the quantity
        bounded by :math:`c \cdot \bar\varepsilon`), ``mean_abs`` = mean of the per-graph
        :math:`|\Delta\mathcal L_i|` (also bounded by it), ``max_abs``: the largest
        :math:`|\Delta\mathcal L_i|` (bounded per graph by :math:`c\varepsilon_i`).  Means are
        weighted by ``weights`` when given.
    """
    a = _vec(losses_full, "losses_full")
    b = _vec(losses_sub, "losses_sub")
    if a.size != b.size:
        raise ValueError("losses_full and losses_sub differ in length")
    w = np.ones_like(a) if weights is None else _vec(weights, "weights")
    if a.size == 0:
        return {"gap": float("nan"), "mean_abs": float("nan"), "max_abs": float("nan")}
    d = b - a
    return {"gap": float(abs(np.dot(w, d) / w.sum())), "mean_abs": float(np.dot(w, np.abs(d)) / w.sum()),
            "max_abs": float(np.abs(d).max())}


def node_bounds(c: float, epsilon, weights=None) -> dict:
    r"""``epsilon_mean``, ``bound`` :math:`= c\bar\varepsilon` (loss gap), ``erm_bound`` :math:`= 2c\bar\varepsilon`."""
    m = node_epsilon_mean(epsilon, weights)
    return {"epsilon_mean": m, "bound": lemma_bound(c, m), "erm_bound": erm_bound(c, m)}


def _number(value) -> float | None:
    """``value`` as a finite float, or None (missing, not a number, NaN or inf)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def bound_verdict(bound, full_model_train_loss=None, *, name: str = "c·ε", holds: bool | None = None,
                  gap_observed=None, certified: bool | None = None, constraint_ok: bool | None = None,
                  valid: bool | None = None, conditions=(), observed: str = "observed gap",
                  missing: str = "no ε was recorded", loss_scale=None, scale_what: str | None = None,
                  worse_than_constant: bool | None = None, constant_note: str | None = None) -> dict:
    r"""Is a proven loss bound informative or vacuous?  The verdict, its numbers and one sentence.

    A bound :math:`B` on a loss gap (Lemma 3.2: :math:`B = c\,\varepsilon` bounds
    :math:`|\frac1n\sum_{i\in\mathcal I}\tau_i\mathcal L_i - \frac1n\sum_i \mathcal L_i|`; Corollary 3.3:
    :math:`2c\,\varepsilon` bounds the excess loss; Corollary 4.1: :math:`c\bar\varepsilon`) is compared with the
    loss scale :math:`s`:

    .. math:: \text{verdict} = \begin{cases} \text{informative} & B < s \\ \text{vacuous} & B \ge s \end{cases}
              \qquad s = \begin{cases} \bar{\mathcal L}_{\mathrm{full}} & \text{when given, finite and} > 0 \\
              \ln 2 & \text{otherwise} \end{cases}

    with :math:`\bar{\mathcal L}_{\mathrm{full}} = \frac1n\sum_i \mathcal L(h_{\mathrm{full}}(G_i))` the mean
    training BCE of the model trained on all training graphs (``bound.full_model_train_loss`` of
    ``metrics.json``).  Why that scale: the gap compares two means of that very loss, so a bound
    :math:`B \ge \bar{\mathcal L}_{\mathrm{full}}` still allows the coreset loss to be anywhere from 0 to twice the
    full loss, i.e. it rules out nothing an auditor cares about; it is also the criterion of the certified sweep
    (``non_vacuous`` = c·ε < ``full_model_train_loss`` in ``benchmarks/certified_sweep.py``) and of issue 17's
    goal.  :math:`\ln 2` (the BCE of the constant ½ predictor, model-free) is reported beside it
    (``below_ln2``) and is the scale only when no full-data loss is known.  A trained model usually has
    :math:`\bar{\mathcal L}_{\mathrm{full}} < \ln 2`, which makes the verdict the stricter of the two.

    The other verdicts: **unknown** when :math:`B` is missing (no ε: a baseline selection without a TMD
    matrix), **invalid** when :math:`B` is not a proof for this model: certified mode with the spectral-norm
    constraint violated (``constraint_ok`` False, the certified c does not bound the trained weights) or the
    stability conditions of Theorem 8 failing (``valid`` False), **worse than constant** when :math:`B < s` but the
    model is worse than the constant predictor on the audit sample (``worse_than_constant``, production mode,
    :func:`tmdlib.models.evaluate.compare_with_constant`): the bound ties the coreset's loss to the pool's, and a
    small gap for a model that does worse than predicting the mean is no reason to trust it.  Only the verdict (never a bare "holds")
    describes the bound: ``holds_text`` reads "holds (vacuous: c·ε = X vs loss scale Y)" for a vacuous bound.

    Parameters
    ----------
    bound : float or None
        The bound :math:`B` (nats of BCE), e.g. ``bound.c_epsilon``.
    full_model_train_loss : float or None
        :math:`\bar{\mathcal L}_{\mathrm{full}}`; missing, non-finite or :math:`\le 0` falls back to
        :math:`\ln 2`.
    name : str
        How the bound is written in the sentence (``"c·ε"``, ``"2c·ε"``, ``"c·mean ε_i"``).
    holds : bool, optional
        Whether the observed gap is within the bound (``lemma_holds``); gives ``holds_text``.
    gap_observed : float, optional
        The observed gap, quoted in the sentence.
    certified, constraint_ok, valid : bool, optional
        ``bound.certified``, ``bound.constraint_ok``, ``bound.valid`` of ``metrics.json``.
    conditions : sequence of str
        What fails when ``valid`` is False (``bound.conditions``), quoted in the sentence.
    observed : str
        What ``gap_observed`` is (``"observed excess loss"`` for Corollary 3.3).
    missing : str
        Why the bound is missing (said in the sentence of an unknown verdict).
    loss_scale, scale_what : float and str, optional
        The task's trivial-predictor loss (:func:`tmdlib.guarantees.losses.trivial_loss`) and what it is: when
        given it is the scale :math:`s` (the evaluate stage records it as ``bound.loss_scale`` for every task type;
        the full-data loss is then quoted beside it).  Metrics written before it fall back to the rule above.
    worse_than_constant : bool, optional
        The model is worse than the constant predictor on the audit sample; ``constant_note`` says by how much.

    Returns
    -------
    dict
        ``verdict`` (one of :data:`VERDICTS`), ``informative`` (bool), ``bound``, ``name``, ``loss_scale``
        (:math:`s`), ``loss_scale_source`` (``"full_model_train_loss"`` or ``"ln2"``), ``full_model_train_loss``,
        ``ln2``, ``ratio`` (:math:`B/s`, None when unknown), ``below_ln2``, ``gap_observed``, ``holds``,
        ``certified``, ``constraint_ok``, ``valid``, ``holds_text`` and ``sentence`` (one line, starting with
        "Bound <verdict>").

    Examples
    --------
    >>> bound_verdict(117444.7, 0.452)["sentence"][:49]
    'Bound vacuous: c·ε = 1.174e+05 ≥ loss scale 0.452'
    """
    b, full = _number(bound), _number(full_model_train_loss)
    gap = _number(gap_observed)
    trivial = _number(loss_scale)
    use_full = trivial is None and full is not None and full > 0
    if trivial is not None and trivial > 0:
        scale, source = trivial, "trivial_predictor"
        scale_words = (scale_what or "the trivial predictor's loss") + (
            f"; full-data model {full:.3g}" if full is not None else "")
    else:
        scale = full if use_full else LN2
        source = "full_model_train_loss" if use_full else "ln2"
        scale_words = ("the full-data model's mean training loss" if use_full
                       else "ln 2: BCE of the constant ½ predictor; no full-data loss recorded")
    cert = " (certified c)" if certified else ""
    if b is None:
        verdict = "unknown"
    elif certified and constraint_ok is False or valid is False:
        verdict = "invalid"
    else:
        verdict = "informative" if b < scale else "vacuous"
        if verdict == "informative" and worse_than_constant:
            verdict = "worse than constant"
    nums = (f"{name} = {b:.4g} vs loss scale {scale:.3g}" if b is not None else f"{name} = n/a")
    gap_words = f", {observed} {gap:.4g}" if gap is not None else ""
    if holds is False:  # Lemma 3.2 is a theorem: only the label term (labels differ within a cluster) breaks it
        gap_words += " above the bound (the label term: graphs labelled unlike their medoid)"
    if verdict == "unknown":
        sentence = f"Bound unknown: {missing}, so {name} cannot be stated; nothing is certified."
    elif verdict == "invalid":
        why = ("the certified model's spectral norms exceed their budget (constraint violated)"
               if certified and constraint_ok is False else
               "the stability conditions of the model fail" + (f" ({'; '.join(map(str, conditions))})"
                                                                 if conditions else ""))
        sentence = f"Bound invalid: {name} = {b:.4g} is no proof for this model: {why}."
    elif verdict == "worse than constant":
        sentence = (f"Bound not informative: {name}{cert} = {b:.4g} < loss scale {scale:.3g}, but the model is "
                    f"{constant_note or 'worse than predicting the mean on the audit sample'}: a small gap between "
                    f"the coreset's loss and the pool's certifies nothing for a model that does worse than a "
                    f"constant{gap_words}.")
    elif verdict == "informative":
        sentence = (f"Bound informative: {name}{cert} = {b:.4g} < loss scale {scale:.3g} ({scale_words}"
                    + (f"; ln 2 = {LN2:.3f}" if use_full else "") + f"){gap_words}.")
    else:
        sentence = (f"Bound vacuous: {name}{cert} = {b:.4g} ≥ loss scale {scale:.3g} ({scale_words}), "
                    f"{b / scale:.3g}× the scale{gap_words}: "
                    + ("it holds but " if holds else "") + "it says nothing about the loss.")
    if holds is None:
        holds_text = "n/a" if b is None else f"not evaluated ({verdict}: {nums})"
    elif holds:
        holds_text = f"holds ({verdict}: {nums})"
    else:
        holds_text = f"does not hold: {observed} {gap:.4g} > {name} = {b:.4g}" if (
            gap is not None and b is not None) else f"does not hold ({verdict}: {nums})"
    return {"verdict": verdict, "informative": verdict == "informative", "bound": b, "name": name,
            "loss_scale": scale, "loss_scale_source": source, "full_model_train_loss": full, "ln2": LN2,
            "ratio": None if b is None else b / scale, "below_ln2": None if b is None else b < LN2,
            "gap_observed": gap, "holds": holds, "certified": certified, "constraint_ok": constraint_ok,
            "valid": valid, "holds_text": holds_text, "sentence": sentence}
