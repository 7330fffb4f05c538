"""Evaluation tasks: per-graph losses, the bound-vs-gap measurements of one coreset, the sweep plot.

Evaluation needs labels of every training and test graph, which a labelling workflow does not have:
it is a benchmark measurement and reads the dataset's own ``y`` (recorded as
``labels_for_evaluation = "dataset (benchmark mode)"``).  Training of the model under test used
only the imported labels (see :mod:`tasks.train`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from prefect import task

from tmdlib import InputError

from . import io


def parse_fractions(text: str | None) -> list[float]:
    """``"0.05,0.1,0.2"`` → sorted distinct floats in (0, 1]; empty/None → ``[]``."""
    if text is None or not str(text).strip():
        return []
    out = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            f = float(part)
        except ValueError:
            raise InputError(None, f"--fractions: {part!r} is not a number") from None
        if not 0.0 < f <= 1.0:
            raise InputError(None, f"--fractions: {f} is not in (0, 1]")
        out.append(f)
    return sorted(set(out))


def losses_of(model, data: list, y: np.ndarray) -> np.ndarray:
    """Per-graph BCE-with-logits losses of ``model`` on ``data`` (aligned labels ``y``)."""
    from tmdlib.torch.gin import bce_losses, predict_logits

    return bce_losses(predict_logits(model, data), y)


def score_on(model, data: list, y: np.ndarray, metric: str) -> float | None:
    """Test accuracy / ROC-AUC (None when there are no labelled test graphs or it is undefined)."""
    from tmdlib.torch.gin import evaluate, predict_logits

    if not data:
        return None
    v = evaluate(predict_logits(model, data), y, metric)
    return None if not np.isfinite(v) else float(v)


def bound_point(model, train_data: list, y_train: np.ndarray, subset: np.ndarray, tau: np.ndarray,
                epsilon: float | None, reference_loss: float, c_reference: float, weights="pascal",
                lipschitz_budget=None, assignment: np.ndarray | None = None, sample: np.ndarray | None = None,
                n_train: int | None = None, lipschitz_mode: str = "ball") -> dict:
    """Lemma 3.2 and Corollary 3.3 numbers for one model trained on one coreset.

    Parameters
    ----------
    model : GIN
        Trained on the coreset ``subset`` (positions into ``train_data``) with weights ``tau``.
    epsilon : float or None
        :math:`f_{\\mathrm{TMD}}(\\mathcal I; X)`.
    reference_loss, c_reference : float
        Mean training loss and stability constant of the model trained on all of ``train_data``.
    lipschitz_budget : float, list or None
        Certified mode (:mod:`tmdlib.torch.certified`): ``c`` is the certified constant of the budget (the
        product of the actual spectral norms is reported as ``c_measured``).
    assignment : array_like, optional
        Position (into ``train_data``) of each graph's medoid: adds the label-aware split of the gap
        (:func:`tmdlib.torch.certified.label_aware_gap`).
    sample, n_train : optional
        ``train_data`` holds the coreset graphs and a uniform sample (positions ``sample``) of a training set
        of ``n_train`` graphs: the full loss is the sample's estimate (:func:`tmdlib.guarantees.bounds.coreset_gap`).
    """
    from tmdlib.guarantees import bounds
    from tmdlib.torch.certified import label_aware_gap, stability_constant
    from tmdlib.torch.gin import predict_logits

    lip = stability_constant(model, lipschitz_budget, M=1.0, weights=weights, mode=lipschitz_mode or "ball")
    z = predict_logits(model, train_data)
    L = bounds_losses(z, y_train)
    gap = bounds.coreset_gap(L, subset, tau, sample=sample, n=n_train)
    c_class = max(lip["c"], c_reference)
    out = {"c": lip["c"], "per_layer": lip["per_layer"], "kappa": lip["kappa"], "valid": lip["valid"],
           "conditions": lip["conditions"], "epsilon": epsilon, "weighted_loss": gap["weighted"],
           "coreset_model_train_loss": gap["full"], "gap_signed": gap["signed"], "gap_observed": gap["gap"],
           "tau_sum": gap["tau_sum"], "n_train": gap["n"], "full_model_train_loss": reference_loss,
           "excess_loss": bounds.excess_loss(gap["full"], reference_loss), "c_class": c_class,
           "certified": lip["certified"], "c_certified": lip["c_certified"], "c_measured": lip["c_measured"],
           "lipschitz_budget": lip["lipschitz_budget"]}
    if sample is not None:
        out.update(sampled=gap["sampled"], coreset_model_train_loss_stderr=gap["full_stderr"])
    if lip["certified"]:
        out["constraint_ok"] = lip["constraint_ok"]
    if epsilon is not None:
        out["c_epsilon"] = bounds.lemma_bound(lip["c"], epsilon)
        out["erm_bound"] = bounds.erm_bound(c_class, epsilon)
        out["lemma_holds"] = bool(gap["gap"] <= out["c_epsilon"] * (1 + 1e-9) + 1e-12)
        out["corollary_holds"] = bool(out["excess_loss"] <= out["erm_bound"] * (1 + 1e-9) + 1e-12)
        if assignment is not None and sample is None:
            la = label_aware_gap(z, y_train, subset, tau, assignment, lip["c"], epsilon)
            out.update({k: la[k] for k in ("gap_label_consistent", "label_term", "label_mismatch_fraction",
                                           "label_term_bound", "bound_with_labels", "lemma_holds_label_consistent",
                                           "bound_with_labels_holds")})
    return out


def bounds_losses(logits: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-graph BCE-with-logits losses from logits (``tmdlib.torch.gin.bce_losses``)."""
    from tmdlib.torch.gin import bce_losses

    return bce_losses(logits, y)


@task(name="sweep-point", persist_result=False)
def sweep_point(ds, train_pos: np.ndarray, y_train: np.ndarray, D_train: np.ndarray, fraction: float, seed: int,
                cfg: dict, train_data: list, reference_loss: float, c_reference: float, test_data: list,
                y_test: np.ndarray, metric: str, weights="pascal") -> dict:
    """k-medoids coreset of ``fraction`` of the training graphs, a τ-weighted model on it, its bound numbers.

    Labels of the coreset come from the dataset (benchmark mode): the sweep explores budgets nobody
    labelled.
    """
    from tmdlib.select.coreset import budget_to_k, kmedoids_coreset
    from tmdlib.torch.certified import train_from_config
    from tmdlib.torch.pyg import dataset_to_pyg

    n = D_train.shape[0]
    k = budget_to_k(n, fraction=fraction)
    cr = kmedoids_coreset(D_train, k, seed=seed)
    tau = cr.tau.astype(float)
    data = dataset_to_pyg(ds, positions=train_pos[cr.medoids], y=y_train[cr.medoids], weights=tau)
    res = train_from_config(data, cfg, in_dim=ds.num_features)
    point = bound_point(res.model, train_data, y_train, cr.medoids, tau, float(cr.epsilon), reference_loss,
                        c_reference, weights, lipschitz_budget=cfg.get("lipschitz_budget"),
                        lipschitz_mode=cfg.get("lipschitz_mode", "ball"),
                        assignment=cr.assignment)
    point.update({"fraction": float(fraction), "k": int(k), "test": score_on(res.model, test_data, y_test, metric),
                  "final_weighted_loss": res.losses[-1] if res.losses else None})
    return point


def plot_bound_vs_gap(rows: list[dict], out: str, title: str, main: dict | None = None) -> str:
    """Two panels against the fraction of training graphs kept (atomic PNG write).

    Left: Lemma 3.2, the bound :math:`c\\varepsilon` and the observed :math:`|{\\rm gap}|` (log scale).
    Right: Corollary 3.3, the bound :math:`2c\\varepsilon` and the observed excess loss over the model
    trained on all training graphs (symlog: the excess can be negative).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
        ax1.plot([main["fraction"]], pos([main["c_epsilon"]]), "*", ms=14, color="tab:red", mec="k",
                 label="pipeline selection (bound)")
        ax1.plot([main["fraction"]], pos([main["gap_observed"]]), "*", ms=14, color="tab:blue", mec="k",
                 label="pipeline selection (observed)")
        ax2.plot([main["fraction"]], [main["erm_bound"]], "*", ms=14, color="tab:red", mec="k")
        ax2.plot([main["fraction"]], [main["excess_loss"]], "*", ms=14, color="tab:blue", mec="k")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    if not pts and main is None:
        ax1.text(0.5, 0.5, "no coreset with a TMD epsilon", transform=ax1.transAxes, ha="center")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    with io.atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return str(Path(out))


@task(name="write-metrics", persist_result=False)
def write_metrics(path: str, metrics: dict) -> str:
    """Atomic JSON write of ``metrics.json``."""
    io.write_json(path, metrics)
    return path
