r"""What the evaluate stage writes and logs, from its measurement: ``metrics.json`` (benchmark mode,
:func:`metrics_document`; production mode, :func:`production_document`), the run's parameters and flat metrics
(:func:`evaluation_run`, :func:`production_run`) and the bound-vs-gap figure (:func:`bound_vs_gap_figure`).

Pure functions on plain dicts; matplotlib is imported inside the figure builders (Agg backend), nothing is written
here.
"""
from __future__ import annotations

import numpy as np

__all__ = ["BENCHMARK_EVAL", "PRODUCTION_EVAL", "metrics_document", "production_document", "evaluation_run",
           "production_run", "bound_vs_gap_figure", "notice_figure"]

#: ``labels_for_evaluation`` of benchmark mode: the dataset's own labels of every training and test graph.
BENCHMARK_EVAL = "dataset (benchmark mode)"
#: ``labels_for_evaluation`` of production mode: the lab's labels, the audit sample estimating the pool.
PRODUCTION_EVAL = "the lab's labels only (production): the audit sample estimates the pool"


def _main_bound(m: dict, sel: dict, checks: dict, tmd: tuple, tau_source: str, n_train: int) -> dict:
    """``metrics.json``'s ``bound``: the measured one with where ε and τ came from and whether Lemma 3.2 applies
    (τ the nearest-medoid cluster sizes: they sum to ``n_train`` and match the matrix's assignment when checked)."""
    depth, weights, problems = tmd
    main = dict(m["bound"])
    main.update({"fraction": sel.get("fraction"), "k": int(len(sel["medoids"])),
                 "epsilon_source": "selection" if sel["epsilon_mean"] is not None else (
                     "matrix" if checks.get("epsilon") is not None else None),
                 "epsilon_matrix": checks.get("epsilon"), "tau_matches_tmd_assignment": checks.get("tau_match"),
                 "bound_weights": tau_source, "depth": depth, "weights": weights})
    main["lemma_applies"] = bool(abs(float(main["tau_sum"]) - n_train) < 1e-6 and checks.get("tau_match") is not False)
    if problems:
        main["valid"] = False
        main["conditions"] = list(main["conditions"]) + list(problems)
    return main


def metrics_document(m: dict, name: str, sel: dict, info: dict, checks: dict, tmd: tuple, where: tuple, opts,
                     seconds: float) -> dict:
    """``metrics.json`` of benchmark mode: the measurement ``m`` with what it was made from.

    Parameters
    ----------
    m : dict
        :func:`tmdlib.torch.measure.measure` (or the same shape for a model without a TMD constant).
    sel, info : dict
        ``selection.json`` and ``train.json``.
    checks : dict
        :func:`tmdlib.torch.measure.matrix_checks` (empty without a matrix).
    tmd : tuple
        ``(depth, weights, problems)`` of the TMD the bound is stated with.
    where : tuple
        ``(tau_source, plan, n_train)`` (:func:`tmdlib.torch.measure.evaluation_plan`).
    opts : object
        The stage's options (``sample``, ``seed``, ``device``; the seed resolved).
    """
    tau_source, plan, n_train = where
    sample, seed, device = opts.sample, opts.seed, opts.device
    cfg = info["config"]
    budget = cfg.get("lipschitz_budget")
    main = _main_bound(m, sel, checks, tmd, tau_source, n_train)
    sample_info = None
    if plan is not None:
        sample_info = {"train_sample": int(sample), "n_train": n_train, "test_sample": int(m["test"]["n"]),
                       "seed": seed, "note": "full training loss estimated on a uniform sample (full_stderr); the "
                                             "full-data reference model is trained on that sample; no matrix check, "
                                             "no sweep"}
    test = dict(m["test"])
    test["full_model_trained_on"] = ("all training graphs" if plan is None else
                                     f"a uniform sample of {len(plan['sample_idx'])} of {n_train} training graphs")
    return {"dataset": name, "task": m["task"]["task"], "store_content_sha256": sel.get("store_content_sha256"),
            "method": sel.get("method"), "fraction": sel.get("fraction"),
            "k": int(len(sel["medoids"])), "n_train": n_train, "n_test": int(test["n"]), "seed": seed,
            "sample": sample_info, "labels_for_evaluation": BENCHMARK_EVAL,
            "labels_for_training": info.get("labels_source", "unknown"),
            "labels_for_reference_and_sweep_training": BENCHMARK_EVAL, "test": test,
            "certified": budget is not None, "lipschitz_budget": budget,
            "lipschitz_mode": cfg.get("lipschitz_mode", "ball") if budget is not None else None,
            "bound": main, "reference": m["reference"], "nodes": m["nodes"], "sweep": m["sweep"],
            "sweep_note": m["sweep_note"], "epochs": m["epochs"], "task_head": m["task"], "device": device,
            "seconds": round(seconds, 2)}


def production_document(m: dict, sel: dict, info: dict, model, task, *, name: str, seed: int, n_labelled: int,
                        audit: tuple, control: dict | None) -> dict:
    """``metrics.json`` of production mode from :func:`tmdlib.models.evaluate.production_measurement`'s ``m``: the
    model's metric on the pool estimated on the labelled audit sample, the τ-weighted coreset loss, c·ε against the
    trained task's loss scale, what is not measurable, and the Random control's verdict ``control`` when there is
    one.  ``n_labelled``: the labelled medoids trained on; ``audit``: ``(requested, labelled)`` audit graphs."""
    requested, labelled = audit
    est = m["pool_estimate"]
    if not requested:
        est["note"] = "no audit sample was requested (labels.audit = 0, or a benchmark selection)"
    elif labelled < requested:
        est["note"] = f"{requested - labelled} of {requested} audit graphs have no label yet"
    budget = info["config"].get("lipschitz_budget")
    return {"dataset": name, "mode": "production", "task": task.to_dict(), "model": info.get("model_name"),
            "store_content_sha256": sel.get("store_content_sha256"), "method": sel.get("method"),
            "fraction": sel.get("fraction"), "k": int(len(sel["medoids"])), "labelled_coreset": int(n_labelled),
            "partial_answers": info.get("partial"),
            "n_pool": m["n_pool"], "audit_requested": int(requested), "audit_labelled": int(labelled),
            "seed": seed, "labels_for_evaluation": PRODUCTION_EVAL,
            "labels_for_training": info.get("labels_source", "unknown"), "pool_estimate": est,
            "constant_predictor": m["constant_predictor"],
            "coreset_loss_weighted": m["coreset_loss"],
            "test": {"metric": est["metric"], "coreset_model": None, "full_model": None, "n": 0,
                     "note": m["not_measurable"]["test_metric"]},
            "certified": budget is not None, "lipschitz_budget": budget,
            "bound": {**m["bound"], "fraction": sel.get("fraction"), "k": int(len(sel["medoids"]))},
            "not_measurable": m["not_measurable"], "reference": None, "nodes": None, "sweep": [],
            "task_head": model.head.to_dict(), **({"control": control} if control is not None else {})}


def evaluation_run(metrics: dict, sel: dict, opts, node_subsampling: bool) -> tuple[dict, dict, dict]:
    """``(params, flat metrics, step metrics)`` of the benchmark evaluate run from ``metrics.json``'s ``metrics``:
    the sweep as steps (one per fraction, NaN where a point has no value).  ``opts``: the stage's options
    (``fractions``, ``sweep_epochs``, ``seed``, ``device``, ``torch_threads``, ``sample``)."""
    main, metric = metrics["bound"], metrics["test"]["metric"]
    params = {"dataset": metrics["dataset"], "task": metrics["task"]["type"], "selection.method": sel.get("method"),
              "selection.fraction": sel.get("fraction"), "selection.k": metrics["k"],
              "fractions": ",".join(map(str, opts.fractions)), "sweep_epochs": opts.sweep_epochs,
              "full_epochs": metrics["epochs"]["full_model"], "seed": opts.seed, "device": opts.device,
              "torch_threads": opts.torch_threads, "tmd.depth": main["depth"], "tmd.weights": str(main["weights"]),
              "node_subsampling": bool(node_subsampling), "certified": metrics["certified"],
              "lipschitz_budget": metrics["lipschitz_budget"], "sample": opts.sample}
    test = {k: v for k, v in metrics["test"].items() if k not in ("metric", "coreset_metrics", "full_metrics")}
    flat = {"test": {**test, **{f"coreset.{k}": v for k, v in metrics["test"]["coreset_metrics"].items()}},
            "bound": {k: v for k, v in main.items() if k not in ("per_layer", "fraction", "k")},
            "nodes": metrics["nodes"] or {}, f"test_{metric}": metrics["test"]["coreset_model"],
            "reference": {"degenerate": metrics["reference"]["degenerate"], "epochs": metrics["reference"]["epochs"]}}
    steps = {f"sweep.{key}": [p.get(key) if p.get(key) is not None else float("nan") for p in metrics["sweep"]]
             for key in ("fraction", "epsilon", "c_epsilon", "gap_observed", "erm_bound", "excess_loss")}
    return params, flat, steps


def production_run(metrics: dict, name: str) -> tuple[dict, dict]:
    """``(params, flat metrics)`` of the production evaluate run: the pool estimate and its interval, the constant
    predictor, the coreset loss, c·ε, the loss scale, ε and the Random control's numbers (None values dropped)."""
    est, b = metrics["pool_estimate"], metrics["bound"]
    params = {"dataset": name, "task": metrics["task"]["type"], "mode": "production", "model": metrics.get("model"),
              "selection.method": metrics.get("method"), "selection.k": metrics["k"],
              "confidence": est["confidence"], "audit_labelled": metrics["audit_labelled"]}
    flat = {f"pool_estimate.{k}": v for k, v in est.items() if isinstance(v, (int, float)) and v is not None}
    const = metrics.get("constant_predictor") or {}
    flat.update({"constant_predictor.value": const.get("value"),
                 "worse_than_constant": None if const.get("worse") is None else float(const["worse"])})
    flat.update({"coreset_loss_weighted": metrics["coreset_loss_weighted"], "c_epsilon": b.get("c_epsilon"),
                 "loss_scale": b.get("loss_scale"), "epsilon": b.get("epsilon")})  # ε: the whole labelled set's
    control = metrics.get("control") or {}
    flat.update({f"control.{k}": control.get(k) for k in ("difference", "low", "high", "control", "strategy", "n",
                                                           "folds", "n_arm", "labels_needed")
                 if isinstance(control.get(k), (int, float))})
    return params, {k: v for k, v in flat.items() if v is not None}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _mark(ax1, ax2, main: dict, pos) -> None:
    """The pipeline's own selection as stars on both panels."""
    ax1.plot([main["fraction"]], pos([main["c_epsilon"]]), "*", ms=14, color="tab:red", mec="k",
             label="pipeline selection (bound)")
    ax1.plot([main["fraction"]], pos([main["gap_observed"]]), "*", ms=14, color="tab:blue", mec="k",
             label="pipeline selection (observed)")
    ax2.plot([main["fraction"]], [main["erm_bound"]], "*", ms=14, color="tab:red", mec="k")
    ax2.plot([main["fraction"]], [main["excess_loss"]], "*", ms=14, color="tab:blue", mec="k")


def bound_vs_gap_figure(rows: list[dict], title: str, main: dict | None = None):
    r"""Two panels against the fraction of training graphs kept (a matplotlib ``Figure``; the caller saves and
    closes it).

    Left: Lemma 3.2, the bound :math:`c\varepsilon` and the observed :math:`|{\rm gap}|` (log scale).
    Right: Corollary 3.3, the bound :math:`2c\varepsilon` and the observed excess loss over the model
    trained on all training graphs (symlog: the excess can be negative).  ``rows``: the sweep's points (those
    without ε left out); ``main``: the pipeline's own selection, starred, when it has ε and a fraction.
    """
    plt = _pyplot()
    pts = sorted([r for r in rows if r.get("epsilon") is not None], key=lambda r: r["fraction"])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    x = [r["fraction"] for r in pts]

    def pos(v):
        return [val if val is not None and val > 0 else np.nan for val in v]

    ax1.plot(x, pos([r["c_epsilon"] for r in pts]), "o-", color="tab:red", label=r"bound $c\,\varepsilon$ (Lemma 3.2)")
    ax1.plot(x, pos([r["gap_observed"] for r in pts]), "s-", color="tab:blue",
             label="observed |weighted coreset loss − full loss|")
    ax1.set_yscale("log")
    ax1.set_xlabel("fraction of training graphs kept")
    ax1.set_ylabel("loss gap")
    ax1.set_title("Lemma 3.2: loss gap vs bound")
    ax2.plot(x, [r["erm_bound"] for r in pts], "o-", color="tab:red", label=r"bound $2c\,\varepsilon$ (Cor. 3.3)")
    ax2.plot(x, [r["excess_loss"] for r in pts], "s-", color="tab:blue",
             label="observed excess loss vs full-data model")
    ax2.axhline(0.0, color="grey", lw=0.6)
    ax2.set_yscale("symlog", linthresh=1e-2)
    ax2.set_xlabel("fraction of training graphs kept")
    ax2.set_ylabel("training loss excess")
    ax2.set_title("Corollary 3.3: excess loss vs bound")
    if main is not None and main.get("epsilon") is not None and main.get("fraction") is not None:
        _mark(ax1, ax2, main, pos)
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    if not pts and main is None:
        ax1.text(0.5, 0.5, "no coreset with a TMD epsilon", transform=ax1.transAxes, ha="center")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def notice_figure(text: str):
    """A one-line notice as a figure (a stage that was skipped says why where its plot would be)."""
    fig = _pyplot().figure(figsize=(6, 1.2))
    fig.text(0.5, 0.5, text, ha="center", va="center", fontsize=9)
    return fig
