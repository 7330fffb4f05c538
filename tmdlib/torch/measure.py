r"""The loss guarantees of a trained coreset model, measured next to their bounds (benchmark mode).

What the pipeline's evaluate stage computes, without files, Prefect or MLflow.  For a model :math:`\hat h` trained
on a coreset :math:`\mathcal I` (weights τ, medoid objective ε) of the ``n`` training graphs, with the labels of
all graphs (a benchmark measurement: production has only the coreset's):

* **Lemma 3.2**: the observed gap :math:`|\frac1n\sum_{i\in\mathcal I}\tau_i\mathcal L_i - \frac1n\sum_i\mathcal L_i|`
  against :math:`c\,\varepsilon`, split into its label-consistent part (≤ cε) and the label term
  (:func:`tmdlib.guarantees.losses.label_term_bound`) when the assignment is known;
* **Corollary 3.3**: the excess full training loss over a reference trained on all ``n`` graphs against
  :math:`2c\varepsilon`; the reference is checked (:func:`reference_health`): one that predicts the same class
  for every graph, has a dead layer or no spread, or scores worse than the coreset model is retrained longer,
  and the report says which reference was compared against and whether it is usable;
* **Corollary 4.1** (node subsampling): per-graph loss changes against :math:`c\,\varepsilon_i`;
* the **verdict**'s loss scale: the task's trivial predictor (:func:`tmdlib.guarantees.losses.trivial_loss`);
* the test metrics of the task (:func:`tmdlib.metrics.score`) and a bound-vs-gap sweep over coreset fractions.

Every loss is the task's (:class:`tmdlib.torch.fit.TaskHead`: BCE, cross-entropy, masked BCE, Huber / L1 / MSE on
standardised targets), :math:`c` carries its Lipschitz constant :math:`M`, and an MSE model is reported uncertified.
"""
from __future__ import annotations

import numpy as np

from ..guarantees import _bounds as bounds
from ..guarantees.losses import label_term_bound, trivial_loss
from ..metrics import headline, score

__all__ = ["bound_point", "constant_loss", "reference_health", "train_reference", "measure", "score_model", "sweep_point",
           "plan_sample", "matrix_checks", "bound_weights", "evaluation_plan"]

_TOL = lambda b: b * (1 + 1e-9) + 1e-12  # noqa: E731


def plan_sample(n_train: int, subset, n_test: int, sample: int, seed: int) -> dict | None:
    r"""Pools too large to score whole: which training graphs to score (the coreset and a uniform sample).

    Parameters
    ----------
    n_train : int
    subset : ndarray of int, shape (k,)
        The coreset, positions into the ``n_train`` training graphs.
    n_test : int
    sample : int
        Sample size (0 or ``>= n_train``: no sampling).
    seed : int

    Returns
    -------
    dict or None
        ``keep`` (training positions kept: coreset ∪ sample, sorted), ``sample_idx`` and ``subset`` (positions into
        ``keep``), ``test_pick`` (sorted positions of at most ``sample`` test graphs, or None); None without sampling.
    """
    if not sample or n_train <= sample:
        return None
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(n_train, size=int(sample), replace=False))
    keep = np.union1d(subset, pick)
    test_pick = np.sort(rng.choice(n_test, size=int(sample), replace=False)) if n_test > sample else None
    return {"keep": keep, "sample_idx": np.searchsorted(keep, pick), "subset": np.searchsorted(keep, subset),
            "test_pick": test_pick}


def matrix_checks(D_train, subset, tau) -> dict:
    r"""ε of the coreset read off the TMD matrix of the training graphs, whether τ are the nearest-medoid cluster
    sizes (Lemma 3.2's), and then the assignment (nearest medoid, ties to the first listed).

    Returns
    -------
    dict
        ``epsilon`` (:math:`f_{\mathrm{TMD}}`), ``tau_match`` (bool), ``assignment`` (positions, or None).
    """
    eps = bounds.medoid_objective(D_train, subset)
    match = bool(np.array_equal(np.rint(tau).astype(np.int64), bounds.cluster_sizes(D_train, subset)))
    assignment = None
    if match:
        near = np.argmin(D_train[:, subset], axis=1)
        near[subset] = np.arange(len(subset))
        assignment = np.asarray(subset)[near]
    return {"epsilon": eps, "tau_match": match, "assignment": assignment}


def bound_weights(tau, n_train: int, certificate_tau=None) -> tuple[np.ndarray, str]:
    """The weights Lemma 3.2 is stated with: the selection's τ when they sum to ``n_train`` (the coreset's cluster
    sizes), else the certificate's cluster sizes (a method with its own weights, e.g. Random's ones)."""
    tau = np.asarray(tau, dtype=np.float64)
    if abs(float(tau.sum()) - n_train) < 1e-6 or certificate_tau is None:
        return tau, "selection"
    return np.asarray(certificate_tau, dtype=np.float64), "certificate"


def evaluation_plan(train_pos, test_pos, med_pos, sel: dict, y, task, sample: int, seed: int, graphs: str) -> tuple:
    """Where the bound evaluation looks, in pool positions: ``(train_pos, test_pos, subset, n_train, tau, tau_source,
    plan)``.

    Parameters
    ----------
    train_pos, test_pos, med_pos : ndarray of int
        Pool positions of the selection's training graphs, test graphs and medoids.
    sel : dict
        ``selection.json`` (``tau``, ``certificate_tau``).
    y : ndarray or None
        The pool's labels, ``(N,)`` or ``(N, T)`` (NaN: missing).
    sample, seed : int
        ``sample > 0``: a seeded sample of the training and test graphs (:func:`plan_sample`).
    graphs : str
        The graph store, named in errors.

    Returns
    -------
    tuple
        The training and test positions (sampled; test graphs without any label dropped), the coreset as positions
        into the training graphs, the number of training graphs, the weights the bound is stated with and where they
        came from (:func:`bound_weights`), the sample's plan (None: no sample).

    Raises
    ------
    InputError
        A training graph's label is missing and ``task`` does not allow it (benchmark mode needs the dataset's
        label of every training graph).
    """
    from .._errors import InputError

    in_train = {int(p): k for k, p in enumerate(train_pos)}
    subset = np.asarray([in_train[int(p)] for p in med_pos], dtype=np.int64)
    n_train = int(len(train_pos))
    tau, tau_source = bound_weights(sel["tau"], n_train, sel.get("certificate_tau"))
    plan = plan_sample(n_train, subset, len(test_pos), sample, seed)
    if plan is not None:
        train_pos, subset = train_pos[plan["keep"]], plan["subset"]
        test_pos = test_pos if plan["test_pick"] is None else test_pos[plan["test_pick"]]
    # task type: a benchmark needs every training label, unless the type masks missing ones out of the loss
    if y is None or (not task.allows_missing and np.isnan(y[train_pos]).any()):
        raise InputError(graphs, "the bound evaluation is a benchmark measurement: it needs the dataset's label "
                                 "of every training graph, and some are missing")
    test_pos = test_pos[~np.isnan(y[test_pos].reshape(len(test_pos), -1)).all(axis=1)]
    return train_pos, test_pos, subset, n_train, tau, tau_source, plan


def score_model(model, data, y, head, metric: str | None = None) -> dict:
    """Test metrics of ``model`` on ``data`` (labels ``y`` as stored); ``value`` is the headline metric."""
    from .fit import predict

    if not len(data):
        return {"value": None}
    s = score(predict(model, data, head), y, head.task.type, head.task.num_classes)
    m = metric or headline(head.task.type)
    v = s.get(m)
    return {**{k: (None if isinstance(v2, float) and not np.isfinite(v2) else v2) for k, v2 in s.items()},
            "value": None if v is None or not np.isfinite(v) else float(v), "metric": m}


def bound_point(model, train_data, y_train, subset, tau, epsilon, reference_loss, c_reference, head, weights="pascal",
                lipschitz_budget=None, lipschitz_mode="ball", assignment=None, sample=None, n_train=None) -> dict:
    r"""Lemma 3.2 and Corollary 3.3 numbers for one model trained on one coreset.

    Parameters
    ----------
    model : GIN
        Trained on the coreset ``subset`` (positions into ``train_data``) with weights ``tau``.
    train_data : list of Data, y_train : ndarray (n,) or (n, T)
        All training graphs (or the coreset and a sample) and their labels as stored.
    subset : ndarray of int, shape (k,), tau : ndarray, shape (k,)
        The coreset and the weights the bound is stated for (summing to ``n``).
    epsilon : float or None
        :math:`f_{\mathrm{TMD}}(\mathcal I; X)`.
    reference_loss, c_reference : float or None
        Mean training loss and stability constant of the full-data reference (None: no usable reference).
    head : TaskHead
    assignment : ndarray of int, shape (n,), optional
        Position (into ``train_data``) of each graph's medoid: adds the label-term split.
    sample, n_train : optional
        ``train_data`` holds the coreset and a uniform sample (positions ``sample``) of ``n_train`` graphs.
    """
    from .certified import stability_constant
    from .fit import losses_on
    from .gin import predict_outputs

    M = head.M if head.M is not None else 1.0
    lip = stability_constant(model, lipschitz_budget, M=M, weights=weights, mode=lipschitz_mode or "ball")
    z = predict_outputs(model, train_data)
    L = losses_on(model, train_data, y_train, head, outputs=z)
    gap = bounds.coreset_gap(L, subset, tau, sample=sample, n=n_train)
    c_class = max(lip["c"], c_reference) if c_reference is not None else lip["c"]
    excess = None if reference_loss is None else bounds.excess_loss(gap["full"], reference_loss)
    out = {"c": lip["c"], "per_layer": lip["per_layer"], "kappa": lip["kappa"], "valid": lip["valid"],
           "conditions": list(lip["conditions"]), "epsilon": epsilon, "weighted_loss": gap["weighted"],
           "coreset_model_train_loss": gap["full"], "gap_signed": gap["signed"], "gap_observed": gap["gap"],
           "tau_sum": gap["tau_sum"], "n_train": gap["n"], "full_model_train_loss": reference_loss,
           "excess_loss": excess, "c_class": c_class,
           "certified": lip["certified"], "c_certified": lip["c_certified"], "c_measured": lip["c_measured"],
           "lipschitz_budget": lip["lipschitz_budget"], "loss": head.loss, "M": head.M,
           "loss_certified": head.certified_loss}
    if not head.certified_loss:
        out["valid"] = False
        out["conditions"].append(f"the {head.loss} loss has no Lipschitz constant: uncertified")
    if sample is not None:
        out.update(sampled=gap["sampled"], coreset_model_train_loss_stderr=gap["full_stderr"])
    if lip["certified"]:
        out["constraint_ok"] = lip["constraint_ok"]
    if epsilon is not None:
        out["c_epsilon"] = bounds.lemma_bound(lip["c"], epsilon)
        out["erm_bound"] = bounds.erm_bound(c_class, epsilon)
        out["lemma_holds"] = bool(gap["gap"] <= _TOL(out["c_epsilon"]))
        out["corollary_holds"] = None if excess is None else bool(excess <= _TOL(out["erm_bound"]))
        if assignment is not None and sample is None:
            Y = np.asarray(y_train, dtype=np.float64)
            a = np.asarray(assignment, dtype=np.int64)
            lt = label_term_bound(head.loss, z, head.encode(Y), head.encode(Y[a]), head.delta)
            L_cons = L - (losses_on(model, train_data, Y, head, outputs=z) - losses_on(model, train_data, Y[a], head,
                                                                                           outputs=z))
            g_cons = bounds.coreset_gap(L_cons, subset, tau)
            ce = out["c_epsilon"]
            label_bound = lt["label_term_bound"]
            out.update({"gap_label_consistent": g_cons["gap"], "label_term": lt["label_term"],
                        "label_mismatch_fraction": lt["label_mismatch_fraction"], "label_term_bound": label_bound,
                        "label_term_model_free": lt["label_term_model_free"], "bound_with_labels": ce + label_bound,
                        "lemma_holds_label_consistent": bool(g_cons["gap"] <= _TOL(ce)),
                        "bound_with_labels_holds": bool(gap["gap"] <= _TOL(ce + label_bound))})
    return out


def constant_loss(y, head, weights=None) -> float:
    r"""The mean training loss of the best constant predictor (what a model that learned nothing reaches):
    binary / multi-task BCE at the base rate (the label entropy), multi-class CE at the class frequencies,
    regression at the (standardised) mean."""
    from ..guarantees.losses import per_graph_losses

    Y = head.encode(y)
    n = len(Y)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    obs = ~np.isnan(Y)
    if head.loss == "ce":  # the constant minimising cross-entropy: the log-frequencies of the classes
        counts = np.bincount(Y[obs[:, 0], 0].astype(np.int64), weights=w[obs[:, 0]],
                             minlength=max(head.task.num_classes, 1))
        p = np.clip(counts / max(counts.sum(), 1e-300), 1e-12, None)
        z = np.broadcast_to(np.log(p), (n, p.size))
    else:
        cols = []
        for t in range(Y.shape[1]):
            o = obs[:, t]
            m = float(np.average(Y[o, t], weights=w[o])) if o.any() else 0.0
            if head.loss == "bce":
                m = float(np.log(np.clip(m, 1e-12, 1 - 1e-12) / np.clip(1 - m, 1e-12, 1)))
            cols.append(m)
        z = np.broadcast_to(np.asarray(cols), Y.shape)
    L = per_graph_losses(z, Y, head.loss, head.delta)
    return float(np.average(L, weights=w))


def reference_health(model, data, y, head, loss: float, trivial: float, alive=None) -> dict:
    r"""Is a full-data reference usable for Corollary 3.3?  Flags a model that learned nothing.

    A reference is **degenerate** (it learned nothing: not a stand-in for the class minimum of Corollary 3.3) when a
    hidden layer is dead (``alive`` has a 0), its outputs have no spread over the training graphs, or its training
    loss is not below the best constant predictor's (``trivial``, :func:`constant_loss`).  A classifier that puts every
    training graph in one class while the labels hold several is **noted** (``notes``), not degenerate: under a tight
    Lipschitz budget that can be the loss minimiser of the class (its test accuracy is then the majority rate).

    Returns
    -------
    dict
        ``degenerate`` (bool), ``why`` (list of str), ``output_std``, ``predicted_classes``, ``train_loss``.
    """
    from .gin import predict_outputs

    z = predict_outputs(model, data)
    why, notes = [], []
    if alive is not None and len(alive) and min(alive) == 0:
        why.append(f"collapsed: a layer has no live unit (alive units {list(alive)})")
    spread = float(np.max(np.std(z, axis=0))) if len(z) else 0.0
    if spread <= 1e-9 * (1.0 + float(np.max(np.abs(z))) if len(z) else 1.0):
        why.append("constant output on every training graph")
    classes = None
    pred = head.task.predicted_classes(z)  # None: no one class per graph (regression, multi-task)
    if pred is not None:
        Y = np.asarray(y, dtype=np.float64).reshape(len(z), -1)[:, 0]
        classes = int(np.unique(pred).size)
        if classes == 1 and np.unique(Y[~np.isnan(Y)]).size > 1:
            notes.append("it predicts the same class for every training graph (its test accuracy is the majority "
                         "rate), though its loss is below the best constant predictor's")
    if np.isfinite(trivial) and loss >= trivial - 1e-9:
        why.append(f"training loss {loss:.4g} not below the best constant predictor's {trivial:.4g}")
    return {"degenerate": bool(why), "why": why, "notes": notes if not why else [], "output_std": spread,
            "predicted_classes": classes, "train_loss": float(loss)}


def train_reference(ds, positions, y, cfg: dict, head, train_data, y_train, weights="pascal",
                    retry_epochs: int = 4, sample=None) -> tuple:
    """The full-data reference: trained with ``cfg``; if degenerate (:func:`reference_health`), retrained with
    ``retry_epochs`` × the epochs and the better (lower full training loss) kept.  Returns ``(model, losses on
    train_data, c, info)``."""
    from .fit import fit, losses_on

    trivial = constant_loss(y, head)
    attempts, best = [], None
    for mult in (1, retry_epochs):
        c2 = dict(cfg, epochs=int(cfg["epochs"]) * mult)
        r = fit(ds, positions, y, np.ones(len(positions)), c2, head.task, head=head, weights=weights)
        L = losses_on(r.model, train_data, y_train, head)
        loss = float(L.mean() if sample is None else L[sample].mean())
        h = reference_health(r.model, train_data, y_train, head, loss, trivial, r.alive_units)
        attempts.append({"epochs": c2["epochs"], "train_loss": loss, **{k: h[k] for k in ("degenerate", "why", "notes")}})
        if best is None or loss < best[3]:
            best = (r, L, h, loss)
        if not h["degenerate"] or mult == retry_epochs:
            break
    r, L, h, loss = best
    info = {"model": "full-data model, same architecture and budget as the coreset model",
            "epochs": int(attempts[[a["train_loss"] for a in attempts].index(loss)]["epochs"]),
            "attempts": attempts, "degenerate": h["degenerate"], "why": h["why"], "notes": h["notes"],
            "output_std": h["output_std"], "predicted_classes": h["predicted_classes"],
            "constant_predictor_loss": trivial}
    return r.model, L, r.lipschitz["c"], info


def sweep_point(ds, train_pos, y_train, D_train, fraction, seed, cfg, train_data, reference_loss, c_reference,
                test_data, y_test, head, metric, weights="pascal") -> dict:
    """k-medoids coreset of ``fraction`` of the training graphs (:func:`tmdlib.select_graphs` on the matrix), a
    τ-weighted model on it (benchmark labels), its bound numbers and test metric."""
    from ..select._api import select_graphs
    from .fit import fit

    sel = select_graphs(D_train, "tmd", fraction=fraction, seed=seed)
    tau = sel.tau
    r = fit(ds, train_pos[sel.positions], y_train[sel.positions], tau, cfg, head.task, head=head, weights=weights)
    point = bound_point(r.model, train_data, y_train, sel.positions, tau, float(sel.epsilon_mean), reference_loss,
                        c_reference, head, weights, lipschitz_budget=cfg.get("lipschitz_budget"),
                        lipschitz_mode=cfg.get("lipschitz_mode", "ball"), assignment=sel.certificate.assignment)
    point.update({"fraction": float(fraction), "k": int(sel.k),
                  "test": score_model(r.model, test_data, y_test, head, metric)["value"],
                  "final_weighted_loss": r.losses[-1] if r.losses else None})
    return point


def measure(ds, model, head, cfg: dict, *, train_pos, test_pos, subset, tau, epsilon, assignment=None,
            D_train=None, sample_idx=None, n_train=None, weights="pascal", full_epochs=None, fractions=(),
            sweep_epochs: int = 20, seed: int = 0, nodes=None, metric: str | None = None) -> dict:
    r"""Everything the evaluate stage reports about one trained coreset model (see the module doc).

    Parameters
    ----------
    ds : GraphDataset
        All graphs, with labels ``ds.y`` (benchmark mode).
    model : GIN
        The coreset model.
    head : TaskHead
        Its task, loss and target standardiser (``train.json``).
    cfg : dict
        Its training config (the reference and sweep models use the same).
    train_pos, test_pos : ndarray of int
        Store positions of the training graphs (the coreset and a sample with ``sample_idx``) and test graphs.
    subset : ndarray of int, shape (k,)
        The coreset as positions into ``train_pos``.
    tau : ndarray, shape (k,)
        The weights the bound is stated for (summing to ``n_train``).
    epsilon : float or None
    assignment : ndarray of int, optional
        Medoid of each training graph (positions into ``train_pos``): the label-term split.
    D_train : ndarray, optional
        TMD matrix of the training graphs: enables the sweep.
    sample_idx, n_train : optional
        Pools too large to score whole: positions (into ``train_pos``) of a uniform sample, and the pool size.
    nodes : tuple, optional
        ``(subsets, eps_i)`` of the coreset graphs (node subsampling: Corollary 4.1).

    Returns
    -------
    dict
        ``test`` (metrics of the coreset model and of the reference), ``bound`` (Lemma 3.2 / Corollary 3.3,
        ``loss_scale``), ``reference`` (which, and whether usable), ``nodes``, ``sweep``, ``epochs``, ``task``.
    """
    from .certified import stability_constant
    from .fit import fit, losses_on
    from .pyg import dataset_to_pyg

    n_train = int(n_train if n_train is not None else len(train_pos))
    budget, mode = cfg.get("lipschitz_budget"), cfg.get("lipschitz_mode", "ball")
    y_train = ds.y[train_pos]
    y_test = ds.y[test_pos]
    train_data = dataset_to_pyg(ds, positions=train_pos)
    test_data = dataset_to_pyg(ds, positions=test_pos)
    Yc = np.asarray(y_train)[subset]
    trivial, trivial_what = trivial_loss(head.task.type, head.loss, head.encode(Yc), tau, head.task.num_classes,
                                         head.delta)

    full_cfg = dict(cfg, epochs=int(full_epochs if full_epochs is not None else cfg["epochs"]))
    ref_pos = train_pos if sample_idx is None else train_pos[sample_idx]
    full_net, full_L, c_full, ref_info = train_reference(ds, ref_pos, ds.y[ref_pos], full_cfg, head, train_data,
                                                         y_train, weights, sample=sample_idx)
    ref_loss = float(full_L.mean() if sample_idx is None else full_L[sample_idx].mean())
    main = bound_point(model, train_data, y_train, subset, tau, epsilon, ref_loss, c_full, head, weights,
                       lipschitz_budget=budget, lipschitz_mode=mode, assignment=assignment, sample=sample_idx,
                       n_train=n_train)
    if main.get("excess_loss") is not None and main["excess_loss"] < -1e-9:
        ref_info["notes"] = ref_info.get("notes", []) + ["the coreset model has the lower full-data training loss: "
                                                         "the reference did not reach the class minimum"]
    ref_info["usable"] = not ref_info["degenerate"]
    if not ref_info["usable"]:  # flagged, not compared against
        main["corollary_holds"] = None
        main["corollary_note"] = "not compared: the full-data reference learned nothing (" + "; ".join(
            ref_info["why"]) + ")"
    elif ref_info.get("notes"):
        main["reference_note"] = "the full-data reference: " + "; ".join(ref_info["notes"])
    full_gap = bounds.coreset_gap(full_L, subset, tau, sample=sample_idx, n=n_train)
    main.update({"c_full_model": c_full, "full_model_gap_observed": full_gap["gap"],
                 "full_model_c_epsilon": None if epsilon is None else bounds.lemma_bound(c_full, epsilon),
                 "loss_scale": trivial, "loss_scale_source": "trivial_predictor", "loss_scale_what": trivial_what})

    node_metrics = None
    if nodes is not None:
        eps_i = nodes[1]
        node_metrics = _node_metrics(ds, model, head, cfg, train_pos[subset], tau, nodes, main["c"], weights)
        if epsilon is not None:
            comb = epsilon + float(np.dot(tau, eps_i)) / n_train
            main["erm_bound_with_nodes"] = bounds.erm_bound(main["c_class"], comb)
            if main.get("excess_loss") is not None and ref_info["usable"]:
                main["corollary_holds"] = bool(main["excess_loss"] <= _TOL(main["erm_bound_with_nodes"]))

    sweep, sweep_note = [], None
    if fractions and D_train is None:
        sweep_note = "no TMD matrix: sweep skipped"
    elif fractions:
        scfg = dict(cfg, epochs=int(sweep_epochs), seed=seed)
        if scfg["epochs"] == full_cfg["epochs"] and seed == int(cfg["seed"]):
            s_ref_loss, s_ref_c = ref_loss, c_full
        else:
            s = fit(ds, train_pos, y_train, np.ones(len(train_pos)), scfg, head.task, head=head, weights=weights)
            s_ref_loss = float(losses_on(s.model, train_data, y_train, head).mean())
            s_ref_c = stability_constant(s.model, budget, head.M or 1.0, weights, mode=mode)["c"]
        for f in fractions:
            sweep.append(sweep_point(ds, train_pos, y_train, D_train, f, seed, scfg, train_data, s_ref_loss, s_ref_c,
                                     test_data, y_test, head, metric, weights))
    coreset_test = score_model(model, test_data, y_test, head, metric)
    full_test = score_model(full_net, test_data, y_test, head, metric)
    return {"test": {"metric": coreset_test.get("metric"), "coreset_model": coreset_test["value"],
                     "full_model": full_test["value"], "n": int(len(test_pos)),
                     "coreset_metrics": {k: v for k, v in coreset_test.items() if k not in ("value", "metric")},
                     "full_metrics": {k: v for k, v in full_test.items() if k not in ("value", "metric")}},
            "bound": main, "reference": ref_info, "nodes": node_metrics, "sweep": sweep, "sweep_note": sweep_note,
            "epochs": {"coreset_model": int(cfg["epochs"]), "full_model": int(ref_info["epochs"]),
                       "sweep": int(sweep_epochs) if sweep else None},
            "task": head.to_dict()}


def _node_metrics(ds, model, head, cfg: dict, med_pos, tau, nodes, c: float, weights) -> dict:
    """Corollary 4.1's terms for the coreset graphs subsampled to their node sets ``nodes = (subsets, eps_i)``:
    the observed loss gap against the bound ``c * eps_i`` (τ-weighted), per-graph violations, and the excess loss
    against a model trained on the same graphs without node subsampling."""
    from .fit import fit, losses_on
    from .pyg import dataset_to_pyg

    subsets, eps_i = nodes
    y_med = ds.y[med_pos]
    data_sub = dataset_to_pyg(ds, positions=med_pos, node_subsets=subsets)
    data_whole = dataset_to_pyg(ds, positions=med_pos)
    L_whole, L_sub = losses_on(model, data_whole, y_med, head), losses_on(model, data_sub, y_med, head)
    ng = bounds.node_gap(L_whole, L_sub, weights=tau)
    nb = bounds.node_bounds(c, eps_i, weights=tau)
    viol = int(np.sum(np.abs(L_sub - L_whole) > c * eps_i * (1 + 1e-9) + 1e-12))
    ref = fit(ds, med_pos, y_med, np.ones(len(med_pos)), cfg, head.task, head=head, weights=weights)
    ref_L = losses_on(ref.model, data_whole, y_med, head)
    c_node_class = max(c, ref.lipschitz["c"])
    w = tau / tau.sum()
    excess = bounds.excess_loss(float(np.dot(w, L_whole)), float(np.dot(w, ref_L)))
    out = {
        "epsilon_mean": nb["epsilon_mean"], "c": c, "bound": nb["bound"], "gap_observed": ng["gap"],
        "mean_abs_observed": ng["mean_abs"], "max_abs_observed": ng["max_abs"], "per_graph_violations": viol,
        "lemma_holds": bool(ng["gap"] <= nb["bound"] * (1 + 1e-9) + 1e-12),
        "reference": "model trained on the same selected graphs without node subsampling",
        "excess_loss": excess, "c_class": c_node_class,
        "erm_bound": bounds.erm_bound(c_node_class, nb["epsilon_mean"]),
    }
    out["corollary_holds"] = bool(excess <= out["erm_bound"] * (1 + 1e-9) + 1e-12)
    return out
