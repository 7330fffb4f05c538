r"""Certified mode: a GIN whose stability constant c is fixed *before* training by a Lipschitz budget.

The coreset guarantee (Lemma 3.2, Corollary 3.3) bounds the loss given up by training on the coreset by
:math:`c\,\varepsilon` (and :math:`2c\,\varepsilon`), with :math:`c = M\kappa\,\lVert W_{out}\rVert_2
\prod_\ell \lVert W_2^{(\ell)}\rVert_2 \lVert W_1^{(\ell)}\rVert_2` (:func:`tmdlib.torch.gin.lipschitz_bound`).  An
ordinary trained GIN has a c that makes the bound vacuous.  Here every weight matrix of the paper's GIN
(:class:`tmdlib.torch.gin.GIN`, unchanged: :math:`z \leftarrow \phi(z + \eta \sum_{u\in N(v)} z_u)`, no biases inside
:math:`\phi`, sum readout) is **projected after every optimiser step** onto the spectral-norm ball

.. math:: \{W : \lVert W \rVert_2 \le \beta\}, \qquad W \leftarrow W \cdot \beta / \lVert W\rVert_2
          \text{ if } \lVert W\rVert_2 > \beta ,

(the exact Euclidean projection of the singular values onto :math:`[0, \beta]` would clip only the top
ones; the rescaling keeps the direction and is what spectral normalisation does).  Spectral norms are
exact (largest singular value, float64), not power-iteration estimates.  The certificate is then known
before any data is seen:

.. math:: c_{\mathrm{cert}} = M\,\kappa(\eta, w) \prod_{m=1}^{2L_{\mathrm{GIN}}+1} \beta_m
          = M \kappa\, \beta^{2 L_{\mathrm{GIN}} + 1} \quad (\text{one budget for all matrices}),

and holds for **every** model of the class, which is what Corollary 3.3 needs (its bound compares the
coreset model with the best model of the same class; for an unconstrained GIN that class has no finite
c).  After training the measured constant (product of the actual spectral norms, ``c_measured``) is
checked to be :math:`\le c_{\mathrm{cert}}`.

Budget allocation and input scaling.  ReLU is positively homogeneous and φ has no biases, so scaling
one matrix by :math:`a > 0` and another by :math:`1/a` leaves the logit unchanged, and a fixed input
multiplier :math:`s` is the same as the budget :math:`s\beta_1` on the first matrix.  The function class
(up to the free readout bias) therefore depends on the product :math:`c_{\mathrm{cert}}` only: the
logit is :math:`c_{\mathrm{cert}} \cdot f(G) + b` with :math:`f` 1-Lipschitz w.r.t. TMD.  A per-matrix
list of budgets is accepted, but the scalar budget is the natural knob.

Two architectures (``mode``).  ``"ball"`` (above): the paper's ReLU GIN, each matrix in its β-ball.  A ReLU
network whose matrices all have norm ≤ 1 can rarely use its budget: every ReLU discards the negative half of
its input, so the gain through the network falls far below the product of the norms and, at a budget small
enough for a non-vacuous bound, the model cannot fit (a constant predictor).  ``"orthogonal"`` spends the
budget in one place instead: :class:`tmdlib.torch.gin.MaxMin` activations (norm-preserving), every weight
matrix kept **orthonormal** (all singular values 1: after every step it is replaced by the nearest such
matrix, its polar factor :math:`U V^\top` from :math:`W = U \Sigma V^\top`) and the whole budget
:math:`c` as a fixed scale of the pooled embedding, :math:`h(G) = W_{out}(c \sum_v z_v) + b`
(``GIN(act="maxmin", scale=c)``).  Then

.. math:: c_{\mathrm{cert}} = M\,\kappa(\eta, w)\, c ,

with the same conditions of Theorem 8 (σ 1-Lipschitz, σ(0) = 0, no biases in φ, sum aggregation and readout,
depth L = layers + 1); the budget *is* the constant.

Loss scale.  TMD values are in the hundreds on TU datasets (MUTAG: ε of a 10 % coreset ≈ 60), while
BCE differences are O(1): a non-vacuous certificate needs :math:`c \lesssim 1/\varepsilon`, i.e.
:math:`\beta \lesssim 0.5` for a 3-layer GIN (7 matrices).  The logit then varies by at most
:math:`c \cdot \mathrm{TMD}` between graphs, which costs accuracy: see ``reports/certified``.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
from torch import nn

from .gin import GIN, TrainConfig, TrainResult, lipschitz_bound, tmd_factor, train_gin

__all__ = ["parse_budget", "weight_matrices", "matrix_budgets", "spectral_norms", "project_", "orthogonalize_",
           "MODES", "parse_mode",
           "certified_constant", "certify", "stability_constant", "train_certified", "train_from_config",
           "budget_for_target", "describe", "label_aware_gap", "CONSTRAINT_RTOL"]

#: Relative tolerance of the post-training check ``‖W‖₂ ≤ β`` (float32 storage rounds a projected
#: matrix to within ~1e-7 of the ball; the final strict pass of :func:`train_certified` removes even that).
CONSTRAINT_RTOL = 1e-6

_NONE = {"", "none", "null", "off", "unconstrained", "0", "0.0"}

#: Certified architectures: ``"ball"`` (ReLU GIN, every matrix in the β-ball, c = β^(2·layers+1)) and
#: ``"orthogonal"`` (MaxMin GIN, orthonormal matrices, the whole budget c as the readout scale).
MODES = ("ball", "orthogonal")


def parse_mode(mode) -> str:
    """``None`` / ``""`` → ``"ball"``; otherwise one of :data:`MODES` (``ValueError`` if not)."""
    if mode is None or (isinstance(mode, str) and not mode.strip()):
        return "ball"
    m = str(mode).strip().lower()
    if m not in MODES:
        raise ValueError(f"lipschitz mode must be one of {', '.join(MODES)}, got {mode!r}")
    return m


def _scalar_budget(budget) -> float:
    b = parse_budget(budget)
    if b is None:
        raise ValueError("no lipschitz budget (unconstrained model)")
    if isinstance(b, list):
        raise ValueError("the 'orthogonal' mode takes one budget (the constant c itself), not per-matrix budgets")
    return b


def parse_budget(value) -> float | list[float] | None:
    """Normalise a Lipschitz budget: ``None``, ``0``, ``"0"``, ``"none"``, ``"null"`` → ``None`` (unconstrained).

    Otherwise a positive finite float, a comma list ``"0.5,0.5,..."`` or a sequence (per-matrix budgets, in
    :func:`weight_matrices` order).  Raises ``ValueError`` on anything else.
    """
    if value is None or isinstance(value, bool):
        if isinstance(value, bool):
            raise ValueError(f"lipschitz budget must be a number or 'none', got {value!r}")
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _NONE:
            return None
        if "," in text:
            return parse_budget([p for p in text.split(",") if p.strip()])
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"lipschitz budget must be a positive number or 'none', got {value!r}") from None
    if isinstance(value, (list, tuple, np.ndarray)):
        vals = [float(v) for v in value]
        if not vals or not all(math.isfinite(v) and v > 0 for v in vals):
            raise ValueError(f"per-matrix lipschitz budgets must be positive finite numbers, got {value!r}")
        return vals
    v = float(value)
    if v == 0:
        return None
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"lipschitz budget must be a positive finite number (0/none: unconstrained), got {value!r}")
    return v


def weight_matrices(model: GIN) -> list[tuple[str, nn.Parameter]]:
    """``[(name, weight)]``: ``conv{l}.W1``, ``conv{l}.W2`` for each GIN layer, then ``readout``."""
    out = []
    for l, conv in enumerate(model.convs, start=1):
        lin = [m for m in conv.mlp if isinstance(m, nn.Linear)]
        out += [(f"conv{l}.W{j}", m.weight) for j, m in enumerate(lin, start=1)]
    out.append(("readout", model.out.weight))
    return out


def _n_matrices(layers: int) -> int:
    return 2 * int(layers) + 1


def matrix_budgets(layers: int, budget) -> list[float]:
    """Per-matrix budgets (length ``2 * layers + 1``) from a scalar or a per-matrix list."""
    b = parse_budget(budget)
    if b is None:
        raise ValueError("no lipschitz budget (unconstrained model)")
    n = _n_matrices(layers)
    if isinstance(b, list):
        if len(b) != n:
            raise ValueError(f"{len(b)} per-matrix budgets for {n} weight matrices (2 per GIN layer + readout)")
        return b
    return [b] * n


@torch.no_grad()
def spectral_norms(model: GIN) -> list[float]:
    """Exact spectral norms (largest singular value, float64) of the :func:`weight_matrices`."""
    return [float(torch.linalg.matrix_norm(w.detach().double(), ord=2)) for _, w in weight_matrices(model)]


@torch.no_grad()
def _project_one(w: torch.Tensor, beta: float, strict: bool) -> float:
    """Rescale ``w`` in place onto ``‖w‖₂ ≤ beta``; returns its norm before."""
    w64 = w.detach().double()
    n = float(torch.linalg.matrix_norm(w64, ord=2))
    if n <= beta:
        return n
    w.copy_((w64 * (beta / n)).to(w.dtype))
    if strict:
        # storage rounding (float32) can leave ‖w‖₂ a few ulps above beta: shrink until it is not
        for _ in range(64):
            m = float(torch.linalg.matrix_norm(w.detach().double(), ord=2))
            if m <= beta:
                break
            w.copy_((w.detach().double() * (beta / m) * (1.0 - 2.0 ** -22)).to(w.dtype))
    return n


@torch.no_grad()
def project_(model: GIN, budget, strict: bool = False) -> list[float]:
    """Project every weight matrix of ``model`` in place onto its spectral-norm ball; returns the norms before.

    ``W ← W·β/‖W‖₂`` when ``‖W‖₂ > β`` (exact norm, float64); a matrix inside the ball is untouched.
    ``strict=True`` also guarantees ``‖W‖₂ ≤ β`` *after* rounding to the parameter dtype (a second SVD).
    """
    budgets = matrix_budgets(model.config["layers"], budget)
    return [_project_one(w, beta, strict) for (_, w), beta in zip(weight_matrices(model), budgets)]


@torch.no_grad()
def orthogonalize_(model: GIN, strict: bool = False) -> list[float]:
    r"""Replace every weight matrix of ``model`` in place by its polar factor; returns the norms before.

    :math:`W = U\Sigma V^\top \mapsto U V^\top` (float64 SVD): the orthonormal matrix nearest to :math:`W`
    in Frobenius norm (all singular values 1; for a row vector :math:`w/\lVert w\rVert`).  ``strict=True``
    also guarantees ``‖W‖₂ ≤ 1`` after rounding to the parameter dtype.
    """
    before = []
    for _, w in weight_matrices(model):
        w64 = w.detach().double()
        u, sv, vh = torch.linalg.svd(w64, full_matrices=False)
        before.append(float(sv[0]) if sv.numel() else 0.0)
        w.copy_((u @ vh).to(w.dtype))
        if strict:
            _project_one(w, 1.0, strict=True)
    return before


def certified_constant(layers: int, budget, eta: float = 1.0, weights="pascal", M: float = 1.0,
                       mode: str = "ball") -> float:
    r""":math:`c_{\mathrm{cert}}`, known before training: :math:`M \kappa(\eta, w) \prod_m \beta_m` (``"ball"``)
    or :math:`M \kappa(\eta, w)\, c` (``"orthogonal"``, the budget is c)."""
    if parse_mode(mode) == "orthogonal":
        return float(M) * tmd_factor(eta, layers, weights) * _scalar_budget(budget)
    return float(M) * tmd_factor(eta, layers, weights) * float(np.prod(matrix_budgets(layers, budget)))


def certify(model: GIN, budget, M: float = 1.0, weights="pascal", rtol: float = CONSTRAINT_RTOL,
            mode: str = "ball") -> dict:
    r"""The certificate of a (trained) constrained model and its check against the actual weights.

    Returns
    -------
    dict
        ``certified`` (True), ``lipschitz_budget`` (as given), ``budgets`` (per matrix), ``c`` and
        ``c_certified`` (:func:`certified_constant`), ``c_measured`` (:func:`tmdlib.torch.gin.lipschitz_bound`'s c
        from the actual spectral norms, ≤ ``c_certified``), ``spectral_norms`` and ``matrices`` (names),
        ``constraint_ok`` (every ``‖W‖₂ ≤ β (1 + rtol)``), ``kappa``, ``M``, ``per_layer`` / ``readout``
        (measured Φ_ℓ and ‖W_out‖), ``valid`` (the stability conditions of :mod:`tmdlib.torch.gin` hold *and* the
        constraint holds) and ``conditions`` (what fails).
    """
    cfg = model.config
    mode = parse_mode(mode)
    norms = spectral_norms(model)
    lip = lipschitz_bound(model, M=M, weights=weights)
    scale = float(cfg.get("scale", 1.0))
    broken = []  # what breaks the certificate itself (the constraint), on top of lipschitz_bound's conditions
    if mode == "orthogonal":
        c = _scalar_budget(budget)
        budgets = [1.0] * _n_matrices(cfg["layers"])
        c_cert = certified_constant(cfg["layers"], c, cfg["eta"], weights, M, mode)
        if scale > c * (1 + rtol):
            broken.append(f"readout scale {scale:g} above the budget {c:g}")
    else:
        budgets = matrix_budgets(cfg["layers"], budget)
        c_cert = certified_constant(cfg["layers"], budgets, cfg["eta"], weights, M)
        if scale > 1.0 * (1 + rtol):
            broken.append(f"readout scale {scale:g} > 1 is not part of the 'ball' certificate")
    over = [name for (name, _), n, b in zip(weight_matrices(model), norms, budgets) if n > b * (1 + rtol)]
    if over:
        broken.append(f"spectral norm above the budget: {over}")
    conditions = list(lip["conditions"]) + broken
    ok = not broken
    return {"certified": True, "lipschitz_budget": parse_budget(budget), "lipschitz_mode": mode, "budgets": budgets,
            "c": c_cert, "c_certified": c_cert, "c_measured": lip["c"], "spectral_norms": norms,
            "matrices": [name for name, _ in weight_matrices(model)], "constraint_ok": ok,
            "kappa": lip["kappa"], "M": float(M), "per_layer": lip["per_layer"], "readout": lip["readout"],
            "valid": lip["valid"] and ok, "conditions": conditions}


def stability_constant(model: GIN, budget=None, M: float = 1.0, weights="pascal", mode: str = "ball") -> dict:
    """:func:`certify` when ``budget`` is set, else :func:`tmdlib.torch.gin.lipschitz_bound` (``c`` = measured).

    Both return ``c`` (the constant to use in the bounds), ``c_measured``, ``certified`` and
    ``c_certified`` (None when unconstrained), ``valid``, ``conditions``, ``per_layer``, ``kappa``.
    ``mode`` is the certified architecture (:data:`MODES`) the model was trained in.
    """
    if parse_budget(budget) is not None:
        return certify(model, budget, M=M, weights=weights, mode=mode)
    lip = lipschitz_bound(model, M=M, weights=weights)
    return {**lip, "certified": False, "lipschitz_budget": None, "c_certified": None, "c_measured": lip["c"]}


def train_certified(data, cfg: TrainConfig, budget, in_dim: int | None = None, on_loss=None,
                    mode: str = "ball") -> TrainResult:
    """:func:`tmdlib.torch.gin.train_gin` with every weight matrix constrained after each step.

    ``mode="ball"``: each matrix projected onto its β-ball (:func:`project_`), ReLU GIN.  ``mode="orthogonal"``:
    the GIN is built with ``act="maxmin"`` and ``scale=budget`` (the budget is c) and each matrix is replaced by
    its polar factor (:func:`orthogonalize_`).  The initial weights are constrained too, and a final strict pass
    makes ``‖W‖₂ ≤ β`` hold exactly for the stored float weights.  Same seeds → same run.  ``on_loss`` as in
    :func:`tmdlib.torch.gin.train_gin`.
    """
    mode = parse_mode(mode)
    if cfg.bias:
        raise ValueError("certified mode needs bias=False (phi(0) = 0) for the TMD stability bound")
    if cfg.pool != "add":
        raise ValueError("certified mode needs pool='add' (sum readout) for the TMD stability bound")
    if mode == "orthogonal":
        from dataclasses import replace

        cfg = replace(cfg, act="maxmin", scale=_scalar_budget(budget))
        res = train_gin(data, cfg, in_dim=in_dim, post_step=orthogonalize_, on_loss=on_loss)
        orthogonalize_(res.model, strict=True)
        return res
    budgets = matrix_budgets(cfg.layers, budget)

    def hook(model: GIN) -> None:
        project_(model, budgets)

    res = train_gin(data, cfg, in_dim=in_dim, post_step=hook, on_loss=on_loss)
    project_(res.model, budgets, strict=True)
    return res


def train_from_config(data, cfg_dict: dict, in_dim: int | None = None, on_loss=None) -> TrainResult:
    """Train from a pipeline config dict: :class:`TrainConfig` fields plus optional ``lipschitz_budget`` and
    ``lipschitz_mode`` (:data:`MODES`, default ``"ball"``).

    ``lipschitz_budget`` absent / None / 0 → the ordinary :func:`tmdlib.torch.gin.train_gin`.  ``on_loss(epoch,
    loss)`` is called after every epoch (:func:`tmdlib.torch.gin.train_gin`).
    """
    cfg = dict(cfg_dict)
    budget = parse_budget(cfg.pop("lipschitz_budget", None))
    mode = parse_mode(cfg.pop("lipschitz_mode", None))
    tc = TrainConfig(**cfg)
    if budget is None:
        return train_gin(data, tc, in_dim=in_dim, on_loss=on_loss)
    return train_certified(data, tc, budget, in_dim=in_dim, on_loss=on_loss, mode=mode)


def budget_for_target(layers: int, c_target: float, eta: float = 1.0, weights="pascal", M: float = 1.0) -> float:
    r"""The scalar per-matrix budget :math:`\beta` with :math:`c_{\mathrm{cert}} = c_{\mathrm{target}}`."""
    kappa = tmd_factor(eta, layers, weights)
    return float((float(c_target) / (float(M) * kappa)) ** (1.0 / _n_matrices(layers)))



def describe(budget: float | Sequence[float] | None, layers: int = 3, mode: str = "ball") -> str:
    """One line: ``"β = 0.5 per matrix (7 matrices), c_cert = 0.0078"`` or ``"unconstrained"``."""
    b = parse_budget(budget)
    if b is None:
        return "unconstrained"
    if parse_mode(mode) == "orthogonal":
        return f"orthonormal MaxMin GIN, readout scale c_cert = {_scalar_budget(b):.4g}"
    c = certified_constant(layers, b)
    if isinstance(b, list):
        return f"per-matrix budgets {b}, c_cert = {c:.4g}"
    return f"β = {b:g} per matrix ({_n_matrices(layers)} matrices), c_cert = {c:.4g}"



def label_aware_gap(logits, y, subset, tau, assignment, c: float, epsilon: float) -> dict:
    r"""Lemma 3.2 split into the part it bounds and the part due to labels that differ inside a cluster.

    Lemma 3.2 treats the loss as a function of the graph, :math:`\mathcal L(h(G))`: it holds when every
    graph has its medoid's label (or, more generally, when the labelled loss is c-Lipschitz in TMD).
    With real labels and BCE, :math:`\mathcal L(z; y') - \mathcal L(z; y) = z\,(y - y')`, so the observed
    signed gap splits **exactly** into

    .. math:: \underbrace{\tfrac1n\textstyle\sum_{j\in\mathcal I}\tau_j\mathcal L(z_j; y_j)
              - \tfrac1n\sum_i \mathcal L(z_i; y_{a(i)})}_{\text{label-consistent gap},\ |\cdot| \le c\varepsilon}
              \;+\; \underbrace{\tfrac1n\textstyle\sum_{i} z_i\,(y_i - y_{a(i)})}_{\text{label term}} ,

    with :math:`a(i)` the medoid of graph :math:`i`.  Hence ``|gap| ≤ c ε + (1/n) Σ_{y_i ≠ y_a(i)} |z_i|``
    always (``bound_with_labels``); for a certified model :math:`|z_i - b| \le c\,\mathrm{TN}(G_i)`.

    Parameters
    ----------
    logits, y : array_like, shape (n,)
        Logits of the model and labels of all ``n`` training graphs.
    subset, tau : array_like, shape (k,)
        Coreset positions (into the ``n`` graphs) and weights (the cluster sizes of ``assignment``).
    assignment : array_like of int, shape (n,)
        Position of each graph's medoid (``tmdlib.select._coreset.CoresetResult.assignment``).
    c, epsilon : float
        Stability constant and medoid objective.

    Returns
    -------
    dict
        ``gap_observed``, ``gap_signed``, ``gap_label_consistent`` (≤ ``c_epsilon``), ``label_term`` (signed),
        ``label_mismatch_fraction``, ``label_term_bound`` ``(1/n) Σ_mismatch |z_i|``, ``c_epsilon``,
        ``bound_with_labels`` (= ``c_epsilon + label_term_bound`` ≥ ``gap_observed``),
        ``lemma_holds`` (plain c·ε ≥ observed gap), ``lemma_holds_label_consistent``, ``bound_with_labels_holds``.
    """
    from ..guarantees._bounds import coreset_gap
    from .gin import bce_losses

    z = np.asarray(logits, dtype=np.float64).ravel()
    yv = np.asarray(y, dtype=np.float64).ravel()
    a = np.asarray(assignment, dtype=np.int64).ravel()
    y_med = yv[a]
    L = bce_losses(z, yv)
    L_cons = bce_losses(z, y_med)
    g = coreset_gap(L, subset, tau)
    g_cons = coreset_gap(L_cons, subset, tau)
    mismatch = yv != y_med
    n = max(z.size, 1)
    label_term = float(np.mean(L_cons - L)) if z.size else float("nan")
    label_bound = float(np.abs(z[mismatch]).sum() / n)
    ce = float(c) * float(epsilon)
    tol = lambda b: b * (1 + 1e-9) + 1e-12  # noqa: E731
    return {"gap_observed": g["gap"], "gap_signed": g["signed"], "gap_label_consistent": g_cons["gap"],
            "label_term": label_term, "label_mismatch_fraction": float(mismatch.mean()) if z.size else float("nan"),
            "label_term_bound": label_bound, "c_epsilon": ce, "bound_with_labels": ce + label_bound,
            "lemma_holds": bool(g["gap"] <= tol(ce)),
            "lemma_holds_label_consistent": bool(g_cons["gap"] <= tol(ce)),
            "bound_with_labels_holds": bool(g["gap"] <= tol(ce + label_bound))}

