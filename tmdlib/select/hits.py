r"""Hit hunting: later rounds that go for the best molecules of the pool (``select.goal``), not for a model good
everywhere.

A **goal** says what the rounds are for:

==============  ====================================================================================================
``model``       a model good on the whole pool (today's rounds, :func:`tmdlib.select.rounds.next_batch`)
``maximize``    the largest values of one regression label
``minimize``    the smallest: the same as ``maximize`` of :math:`-y`
``positive``    the positives of a binary pool (the score is the positive class's probability)
==============  ====================================================================================================

With the labels of the labelled set :math:`S` known, a **surrogate** (:func:`surrogate`) gives every pool member a
mean :math:`\mu_i` and a spread :math:`\sigma_i` of its (signed) value :math:`s\,y_i`, :math:`s = \pm 1`, and an
**acquisition** (:func:`acquisition`, MolPAL's) scores the members not yet labelled:

============  ========================================================================================================
``greedy``    :math:`a_i = \mu_i`
``ucb``       :math:`a_i = \mu_i + \beta\,\sigma_i` (upper confidence bound, :math:`\beta = 2` by default)
``thompson``  :math:`a_i \sim \mathcal N(\mu_i, \sigma_i^2)`, one draw per member
``ei``        expected improvement over the best measured :math:`f^* = \max_{j\in S} s\,y_j`:
              :math:`a_i = (\mu_i - f^* - \xi)\,\Phi(z_i) + \sigma_i\,\varphi(z_i)`,
              :math:`z_i = (\mu_i - f^* - \xi)/\sigma_i` (:math:`a_i = \max(\mu_i - f^* - \xi, 0)` where
              :math:`\sigma_i = 0`)
``random``    :math:`a_i \sim U(0, 1)` (the control)
============  ========================================================================================================

A batch (:func:`hit_batch`) is the ``k`` best by :math:`a`, or, with **diversity**, cluster-then-best: the
:math:`m = \lceil f k \rceil` best candidates (:math:`f = 3`) are cut into ``k`` clusters by k-medoids on a distance
(the fingerprint or TMD distance of the pool) and the best of each cluster is picked -- no two picks from one tight
analogue cluster while another promising one goes unmeasured.

On a pool with several targets, ``select.target`` (:func:`parse_target`, :func:`check_target`) says what the goal
is about: one **named target** (the surrogate is trained on the members measured for it), or a stated
**desirability**, weights :math:`w_t` per target: with :math:`\bar y_t, s_t` the mean and standard deviation of the
measured values of target :math:`t`, the desirability of a member is

.. math:: d_i = \sum_t w_t\,\frac{y_{it} - \bar y_t}{s_t},

and its prediction is the same sum over one surrogate per target, :math:`\mu_i = \sum_t w_t(\mu_{it}-\bar y_t)/s_t`,
with spread :math:`\sigma_i = \sqrt{\sum_t w_t^2\sigma_{it}^2/s_t^2}` (the targets' errors taken as independent;
:func:`desirability`).  A negative weight asks for a small value of that target; ``maximize`` then maximises
:math:`d` (``minimize`` minimises it).

The audit sample is never a candidate (callers leave it out of ``candidates`` or of the pool), so the pool estimate
and the conformal intervals stay those of a uniform sample; the ε certificate of the labelled set is the same exact
sum whatever picked it.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

__all__ = ["GOALS", "DEFAULT_GOAL", "ACQUISITIONS", "DEFAULT_ACQUISITION", "HIT_FIRST", "hunting", "check_goal",
           "goal_sign", "NO_TARGET", "parse_target", "check_target", "target_stats", "desirability",
           "desirability_spread", "surrogate", "kernel_gp", "near_best", "acquisition", "hit_scores", "hit_batch",
           "top_share", "Acquisition", "reads_spread"]

#: ``select.goal`` values.
GOALS = ("model", "maximize", "minimize", "positive")
DEFAULT_GOAL = "model"
#: The acquisition a hit-hunting round uses unless told (measured on the hit benchmark: docs/hit-hunting.md).
DEFAULT_ACQUISITION = "greedy"
#: ``tmd-rounds``' first round under a hit-hunting goal (label-free: k-medoids on the fingerprint distance, so that
#: round two's surrogate has seen every region; measured on the hit benchmark: docs/hit-hunting.md).
HIT_FIRST = "fpk"
#: ``select.target`` values that name no target (params.yaml cannot pass an empty value through ``dvc.yaml``).
NO_TARGET = ("", "none", "null")
#: Candidates per pick that the diverse batch clusters (:func:`hit_batch`).
DIVERSE_FACTOR = 3.0


def check_goal(goal: str, *, classification: bool, targets: int = 1, target=None) -> str:
    """``select.goal`` checked against the pool's task: ``maximize`` / ``minimize`` need one regression label (a
    multi-target pool names it with ``select.target``), ``positive`` a binary one.  Returns the goal.

    Raises
    ------
    tmdlib._errors.InputError
        One line naming the setting to change.
    """
    from .._errors import InputError

    g = str(goal or DEFAULT_GOAL)
    if g not in GOALS:
        raise InputError(None, f"select.goal is one of {', '.join(GOALS)}, not {goal!r}")
    if g in ("maximize", "minimize"):
        if classification:
            raise InputError(None, f"select.goal: {g} needs a regression label; this pool's labels are classes: "
                                   "set select.goal: positive (the positives of a binary pool) or model")
        if int(targets) > 1 and parse_target(target) is None:
            raise InputError(None, f"select.goal: {g} on a pool with {int(targets)} targets: set select.target to "
                                   "the one to optimise, or to a desirability {target: weight}")
    if g == "positive" and not classification:
        raise InputError(None, "select.goal: positive needs a binary pool; for a regression label set "
                               "select.goal: maximize or minimize")
    return g


def hunting(goal) -> bool:
    """Whether ``goal`` hunts hits (anything but ``model`` / unset)."""
    return goal not in (None, "", DEFAULT_GOAL)


def goal_sign(goal: str) -> float:
    """:math:`s`: +1 for ``maximize`` / ``positive``, −1 for ``minimize`` (0 for ``model``: no hit to hunt)."""
    return {"maximize": 1.0, "positive": 1.0, "minimize": -1.0}.get(str(goal), 0.0)


def parse_target(value) -> str | dict[str, float] | None:
    """``select.target`` (params.yaml) or ``--target`` (the CLI) read: no target, one target's name, or a stated
    desirability ``{target: weight}`` (module docstring).

    Parameters
    ----------
    value : None, str or mapping
        ``none`` (or empty, None): no target; a name (``pKi``); a mapping ``{pKi: 1, logS: -0.5}`` (params.yaml, the
        Python API); on the command line ``pKi=1,logS=-0.5`` or ``--pKi 1 --logS -0.5`` -- the form ``dvc.yaml``
        passes a params.yaml mapping in (DVC unpacks a dictionary into ``--key value`` pairs).

    Returns
    -------
    None, str or dict of str to float

    Raises
    ------
    tmdlib._errors.InputError
        A weight that is not a finite number, a target weighted twice, every weight zero.
    """
    from collections.abc import Mapping

    from .._errors import InputError

    if value is None:
        return None
    if isinstance(value, Mapping):
        pairs = list(value.items())
    else:
        text = str(value).strip()
        if text.lower() in NO_TARGET:
            return None
        if text.startswith("--"):
            tokens = text.split()
            if len(tokens) % 2 or not all(t.startswith("--") and len(t) > 2 for t in tokens[0::2]):
                raise InputError(None, f"select.target: cannot read {text!r} as a desirability: --NAME WEIGHT pairs")
            pairs = [(n[2:], w) for n, w in zip(tokens[0::2], tokens[1::2])]
        elif "=" in text:
            pairs = [tuple(p.split("=", 1)) if "=" in p else (p, None) for p in text.split(",") if p.strip()]
        else:
            return text
    weights: dict[str, float] = {}
    for name, w in pairs:
        name = str(name).strip()
        try:
            weight = float(w) if not isinstance(w, bool) else float("nan")
        except (TypeError, ValueError):
            weight = float("nan")
        if not np.isfinite(weight):
            raise InputError(None, f"select.target: the weight of {name!r} must be a number, not {w!r} "
                                   "(a desirability is {target: weight}, e.g. {pKi: 1, logS: -0.5})")
        if not name or name in weights:
            raise InputError(None, f"select.target: target {name!r} named twice or empty in the desirability")
        weights[name] = weight
    if not weights or not any(weights.values()):
        raise InputError(None, "select.target: a desirability needs at least one non-zero weight")
    return weights


def check_target(target, names) -> str | dict[str, float] | None:
    """``select.target`` (any form :func:`parse_target` reads) checked against the pool's target names.

    Parameters
    ----------
    target : None, str or mapping
    names : sequence of str
        The pool's targets (the task's, or the label ledger's columns).

    Returns
    -------
    None, str or dict of str to float
        None on a one-target pool (its own name accepted: nothing to choose), the name, or the desirability's
        weights.

    Raises
    ------
    tmdlib._errors.InputError
        A target the pool does not have (the known ones named), a desirability on a one-target pool.
    """
    from .._errors import InputError

    t = parse_target(target)
    names = [str(n) for n in names]
    asked = [] if t is None else [t] if isinstance(t, str) else list(t)
    unknown = [a for a in asked if a not in names]
    if unknown:
        raise InputError(None, f"select.target: {', '.join(map(repr, unknown))} is not a target of this pool; its "
                               f"targets are {', '.join(names)}")
    if len(names) <= 1:
        if isinstance(t, dict):
            raise InputError(None, f"select.target: a desirability needs several targets; this pool has one "
                                   f"({', '.join(names)}): set select.target: none")
        return None
    return t


def target_stats(Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`\bar y_t` and :math:`s_t` of each target's measured values (NaN = not measured; :math:`s_t = 1`
    where fewer than two values or no spread).

    Parameters
    ----------
    Y : ndarray, shape (m, T)

    Returns
    -------
    mean, scale : ndarray of float64, shape (T,)
    """
    Y = np.asarray(Y, dtype=np.float64).reshape(len(Y), -1)
    seen = np.isfinite(Y)
    n = seen.sum(axis=0)
    mean = np.where(n > 0, np.where(seen, Y, 0.0).sum(axis=0) / np.maximum(n, 1), 0.0)
    var = np.where(seen, (Y - mean) ** 2, 0.0).sum(axis=0) / np.maximum(n, 1)
    scale = np.sqrt(var)
    return mean, np.where((n > 1) & (scale > 0), scale, 1.0)


def desirability(Y: np.ndarray, weights, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    r"""The stated desirability :math:`d_i = \sum_t w_t (Y_{it} - \bar y_t)/s_t` (module docstring): of measured
    labels (NaN where a weighted target is not measured) or of the surrogates' means.

    Parameters
    ----------
    Y : ndarray, shape (n, T)
        One column per weighted target, in ``weights``' order.
    weights : array_like, shape (T,)
    mean, scale : ndarray, shape (T,)
        :math:`\bar y_t`, :math:`s_t` (:func:`target_stats` of the measured values).

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    Y = np.asarray(Y, dtype=np.float64).reshape(len(Y), -1)
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    return ((Y - mean) / scale) @ w


def desirability_spread(S: np.ndarray, weights, scale: np.ndarray) -> np.ndarray:
    r"""The spread of the predicted desirability, :math:`\sigma_i = \sqrt{\sum_t w_t^2\sigma_{it}^2/s_t^2}` (the
    targets' errors taken as independent).

    Parameters
    ----------
    S : ndarray, shape (n, T)
        :math:`\sigma_{it}`, each target's surrogate spread.
    weights : array_like, shape (T,)
    scale : ndarray, shape (T,)

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    S = np.asarray(S, dtype=np.float64).reshape(len(S), -1)
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    return np.sqrt(((S / scale) ** 2) @ (w ** 2))


def surrogate(X_labelled: np.ndarray, y_labelled: np.ndarray, X: np.ndarray, *, classes: bool = False,
              trees: int = 100, seed: int = 0, mean: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    r"""A random forest's per-tree predictions as the surrogate: :math:`\mu_i` the trees' mean and :math:`\sigma_i`
    their standard deviation (the positive class's probability with ``classes``), the approach of
    :func:`tmdlib.select.rounds.forest_difficulty`.

    Parameters
    ----------
    X_labelled : ndarray, shape (m, d)
    y_labelled : ndarray, shape (m,)
    X : ndarray, shape (n, d)
    classes : bool
    trees, seed : int
    mean : ndarray, shape (n,), optional
        Another model's predictions (e.g. the registered ``svm``) to use as :math:`\mu` with the forest's spread.

    Returns
    -------
    mu, sigma : ndarray of float64, shape (n,)
    """
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    y = np.asarray(y_labelled, dtype=np.float64)
    n = len(X)
    if y.size < 2 or np.unique(y).size < 2:
        mu = np.full(n, float(y.mean()) if y.size else 0.0) if mean is None else np.asarray(mean, np.float64)
        return mu, np.ones(n)
    Forest = RandomForestClassifier if classes else RandomForestRegressor
    f = Forest(n_estimators=int(trees), max_features="sqrt", random_state=int(seed), n_jobs=1).fit(
        X_labelled, y.astype(int) if classes else y)
    P = np.stack([t.predict_proba(X)[:, -1] if classes else t.predict(X) for t in f.estimators_])
    mu = P.mean(axis=0) if mean is None else np.asarray(mean, dtype=np.float64).reshape(n)
    return mu, P.std(axis=0)


def kernel_gp(K_labelled: np.ndarray, K_cross: np.ndarray, y_labelled: np.ndarray, *, noise: float = 0.1,
              prior_var: np.ndarray | float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    r"""A Gaussian process on a precomputed kernel (the MinMax / Tanimoto kernel of ECFP4 counts, :math:`k(x,x)=1`)
    as the surrogate: with the labels standardised, :math:`z = (y - \bar y)/s_y`,

    .. math:: \mu_* = \bar y + s_y\,K_{*S}(K_{SS} + \lambda I)^{-1} z, \qquad
              \sigma_*^2 = s_y^2\,\bigl(k_{**} - \operatorname{diag}(K_{*S}(K_{SS}+\lambda I)^{-1}K_{S*})\bigr),

    :math:`\lambda` = ``noise`` (in units of the standardised label's variance).

    Parameters
    ----------
    K_labelled : ndarray, shape (m, m)
        :math:`K_{SS}`.
    K_cross : ndarray, shape (n, m)
        :math:`K_{*S}`, the members to predict against the labelled ones.
    y_labelled : ndarray, shape (m,)
    noise : float
    prior_var : float or ndarray, shape (n,)
        :math:`k_{**}` (1 for MinMax).

    Returns
    -------
    mu, sigma : ndarray of float64, shape (n,)
    """
    from scipy.linalg import cho_factor, cho_solve

    y = np.asarray(y_labelled, dtype=np.float64).reshape(-1)
    mean, scale = float(y.mean()), float(y.std()) or 1.0
    K = np.asarray(K_labelled, dtype=np.float64) + float(noise) * np.eye(y.size)
    C = cho_factor(K, lower=True)
    Ks = np.asarray(K_cross, dtype=np.float64)
    mu = mean + scale * (Ks @ cho_solve(C, (y - mean) / scale))
    var = np.asarray(prior_var, dtype=np.float64) - np.einsum("ij,ji->i", Ks, cho_solve(C, Ks.T))
    return mu, scale * np.sqrt(np.maximum(var, 0.0))


def near_best(K_cross: np.ndarray, y_labelled: np.ndarray, how: str = "knn", neighbours: int = 3,
              best: float = 0.2) -> np.ndarray:
    r"""Scores from the similarities alone, the medicinal chemist's way (analogues of the best compounds):

    * ``knn``: :math:`\mu_i = \sum_{j \in N_k(i)} K_{ij} y_j / \sum_{j\in N_k(i)} K_{ij}`, the
      similarity-weighted mean label of the ``neighbours`` most similar measured molecules;
    * ``near``: :math:`\max_{j \in B} K_{ij}`, the similarity to the nearest of the best measured :math:`B` (the top
      ``best`` share of the labels, at least one), ties broken by the knn score.

    Parameters
    ----------
    K_cross : ndarray, shape (n, m)
        Similarity of every member to the measured ones.
    y_labelled : ndarray, shape (m,)

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    K = np.asarray(K_cross, dtype=np.float64)
    y = np.asarray(y_labelled, dtype=np.float64).reshape(-1)
    k = int(min(max(1, neighbours), y.size))
    nn = np.argpartition(-K, k - 1, axis=1)[:, :k]
    w = np.take_along_axis(K, nn, axis=1) + 1e-12
    knn = (w * y[nn]).sum(axis=1) / w.sum(axis=1)
    if how == "knn":
        return knn
    if how != "near":
        raise ValueError(f"unknown similarity score {how!r}: knn, near")
    top = np.argsort(-y, kind="stable")[:max(1, int(np.ceil(float(best) * y.size)))]
    spread = float(np.ptp(knn)) or 1.0
    return K[:, top].max(axis=1) + 1e-3 * (knn - knn.min()) / spread


def _greedy(mu, sigma, *, best, beta, xi, rng) -> np.ndarray:
    r"""``greedy``: :math:`\mu`."""
    return mu.copy()


def _ucb(mu, sigma, *, best, beta, xi, rng) -> np.ndarray:
    r"""``ucb``: :math:`\mu + \beta\sigma`."""
    return mu + float(beta) * sigma


def _thompson(mu, sigma, *, best, beta, xi, rng) -> np.ndarray:
    r"""``thompson``: one draw of :math:`\mathcal N(\mu, \sigma^2)` per member."""
    return rng.normal(mu, sigma)


def _random(mu, sigma, *, best, beta, xi, rng) -> np.ndarray:
    """``random``: :math:`U(0, 1)`, the control."""
    return rng.random(mu.size)


def _ei(mu, sigma, *, best, beta, xi, rng) -> np.ndarray:
    r"""``ei``: expected improvement over ``best`` (the largest :math:`\mu` when None)."""
    from scipy.stats import norm

    f = float(np.max(mu) if best is None else best)
    gain = mu - f - float(xi)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sigma > 0, gain / np.where(sigma > 0, sigma, 1.0), 0.0)
    return np.where(sigma > 0, gain * norm.cdf(z) + sigma * norm.pdf(z), np.maximum(gain, 0.0))


class Acquisition(NamedTuple):
    r"""An acquisition of :func:`acquisition` (an entry of :data:`ACQUISITIONS`).

    Attributes
    ----------
    score : callable
        ``score(mu, sigma, *, best, beta, xi, rng) -> ndarray``: larger = pick first.
    help : str
        One line for the help and the docs.
    spread : bool
        It reads the surrogate's spread :math:`\sigma` (without, the product's regression surrogate fits no forest).
    """

    score: Callable
    help: str
    spread: bool


#: Acquisitions of :func:`acquisition`, by name (module docstring): the one table the product's rounds and the hit
#: benchmark read.  A new acquisition is one entry here.
ACQUISITIONS: dict[str, Acquisition] = {
    "greedy": Acquisition(_greedy, "the predicted value", False),
    "ucb": Acquisition(_ucb, "upper confidence bound mu + beta sigma", True),
    "thompson": Acquisition(_thompson, "one draw from the surrogate per member", True),
    "ei": Acquisition(_ei, "expected improvement over the best measured", True),
    "random": Acquisition(_random, "uniform scores: the control", True),
}


def reads_spread(kind: str) -> bool:
    r"""Whether the acquisition ``kind`` reads :math:`\sigma` (:attr:`Acquisition.spread`; an unknown name: True, so
    that :func:`acquisition` names it)."""
    entry = ACQUISITIONS.get(str(kind))
    return entry is None or entry.spread


def acquisition(mu: np.ndarray, sigma: np.ndarray, kind: str = DEFAULT_ACQUISITION, *, best: float | None = None,
                beta: float = 2.0, xi: float = 0.0, seed: int = 0) -> np.ndarray:
    r"""The acquisition score of every member (module docstring), larger = pick first; ``mu``, ``sigma`` already in
    the goal's sign (maximize).

    Parameters
    ----------
    mu, sigma : ndarray, shape (n,)
    kind : str
        One of :data:`ACQUISITIONS`.
    best : float, optional
        ``ei``'s :math:`f^*` (default: the largest :math:`\mu`).
    beta, xi : float
    seed : int

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    mu = np.asarray(mu, dtype=np.float64).reshape(-1)
    sigma = np.maximum(np.asarray(sigma, dtype=np.float64).reshape(-1), 0.0)
    if mu.shape != sigma.shape:
        raise ValueError(f"mu and sigma differ in shape: {mu.shape} vs {sigma.shape}")
    entry = ACQUISITIONS.get(kind)
    if entry is None:
        raise ValueError(f"unknown acquisition {kind!r}: {', '.join(ACQUISITIONS)}")
    return entry.score(mu, sigma, best=best, beta=beta, xi=xi, rng=np.random.default_rng([int(seed), 0x417]))


def _regression_surrogate(X_labelled: np.ndarray, y: np.ndarray, X: np.ndarray, kind: str,
                          seed: int) -> tuple[np.ndarray, np.ndarray]:
    """:math:`\\mu` the registered ``svm`` (:class:`tmdlib.chem.models.TanimotoSVR`), :math:`\\sigma` a forest's
    spread (zero for an acquisition that does not read it, :func:`reads_spread`); the mean label where the labels do
    not vary."""
    from ..chem.models import TanimotoSVR

    y = np.asarray(y, dtype=np.float64)
    mean = (TanimotoSVR().fit(X_labelled, y).predict(X) if np.unique(y).size > 1 else
            np.full(len(X), float(y.mean()) if y.size else 0.0))
    return surrogate(X_labelled, y, X, seed=seed, mean=mean) if reads_spread(kind) else (mean, np.zeros(len(X)))


def hit_scores(X_labelled: np.ndarray, y: np.ndarray, X: np.ndarray, goal: str, kind: str = "auto", *,
               seed: int = 0, names=None, target=None) -> dict:
    r"""``{"scores", "acquisition"}``: the acquisition score (:func:`acquisition`, ``kind``, default
    :data:`DEFAULT_ACQUISITION`) of every pool member for ``goal`` -- the product's later round.

    The surrogate: for a regression label the registered ``svm`` (Tanimoto SVR) as :math:`\mu`, a forest's spread as
    :math:`\sigma`, both of the goal's signed value :math:`s\,y`; for ``positive`` the forest's positive-class
    probability and its spread.  With several targets (``y`` of shape (m, T), ``names`` their names) ``target``
    (:func:`check_target`'s value) picks one -- the members measured for it train the surrogate -- or states a
    desirability: one surrogate per weighted target, combined by :func:`desirability` and
    :func:`desirability_spread`.  ``ei``'s :math:`f^*` is the best measured value (desirability) so far.

    Parameters
    ----------
    X_labelled : ndarray, shape (m, d)
        Features of the labelled members (ECFP4 counts in the product).
    y : ndarray, shape (m,) or (m, T)
        Their labels (NaN = not measured).
    X : ndarray, shape (n, d)
        Every pool member.
    goal : {"maximize", "minimize", "positive"}
    kind : str
    seed : int
    names : sequence of str, optional
        The targets of ``y``'s columns.
    target : None, str or dict of str to float

    Returns
    -------
    dict
    """
    kind = DEFAULT_ACQUISITION if kind in (None, "", "auto") else str(kind)
    Y = np.asarray(y, dtype=np.float64)
    Xl = np.asarray(X_labelled)
    if goal == "positive":
        v = Y.reshape(-1)
        mu, sigma = surrogate(Xl, v, X, classes=True, seed=seed)
        return {"scores": acquisition(mu, sigma, kind, best=float(v.max()), seed=seed), "acquisition": kind}
    s = goal_sign(goal)
    if Y.ndim == 2 and Y.shape[1] > 1 and isinstance(target, dict):
        cols = [list(names).index(t) for t in target]
        w = np.array(list(target.values()), dtype=np.float64)
        Yw = Y[:, cols]
        mean, scale = target_stats(Yw)
        M, S = np.zeros((len(X), len(cols))), np.zeros((len(X), len(cols)))
        for c in range(len(cols)):
            ok = np.isfinite(Yw[:, c])
            M[:, c], S[:, c] = _regression_surrogate(Xl[ok], Yw[ok, c], X, kind, seed)
        mu, sigma = desirability(M, w, mean, scale), desirability_spread(S, w, scale)
        measured = desirability(Yw, w, mean, scale)
    else:
        if Y.ndim == 2 and Y.shape[1] > 1:
            if not isinstance(target, str):
                raise ValueError(f"{Y.shape[1]} targets and no target named (check_target)")
            Y = Y[:, list(names).index(target)]
        measured = Y.reshape(-1)
        ok = np.isfinite(measured)
        mu, sigma = _regression_surrogate(Xl[ok], measured[ok], X, kind, seed)
    mu, measured = s * mu, s * measured
    best = float(np.nanmax(measured)) if np.isfinite(measured).any() else float(mu.max())
    return {"scores": acquisition(mu, sigma, kind, best=best, seed=seed), "acquisition": kind}


def hit_batch(scores: np.ndarray, k_new: int, *, labelled=None, candidates=None, D: np.ndarray | None = None,
              factor: float = DIVERSE_FACTOR, seed: int = 0, restarts: int = 3) -> np.ndarray:
    r"""The next round's ``k_new`` picks by acquisition ``scores``: the best not labelled, or cluster-then-best among
    the :math:`\lceil f\,k\rceil` best when a distance ``D`` is given (module docstring).

    Parameters
    ----------
    scores : ndarray, shape (n,)
    k_new : int
    labelled, candidates : int positions or bool mask, optional
        Already labelled (never picked again); who may be picked (default: everyone), e.g. the pool less the audit
        sample.
    D : ndarray, shape (n, n), optional
        Distance for the batch's diversity (None: plain top-k).
    factor : float
    seed, restarts : int

    Returns
    -------
    ndarray of int64, shape (k_new,), sorted
    """
    from .rounds import _mask

    a = np.asarray(scores, dtype=np.float64).reshape(-1)
    n = a.size
    cand = (np.ones(n, dtype=bool) if candidates is None else _mask(candidates, n)) & ~_mask(labelled, n)
    k_new = int(k_new)
    if k_new < 0 or k_new > cand.sum():
        raise ValueError(f"cannot pick {k_new} new members among {int(cand.sum())} candidates")
    if k_new == 0:
        return np.zeros(0, dtype=np.int64)
    c = np.flatnonzero(cand)
    order = c[np.argsort(-np.nan_to_num(a[c], nan=-np.inf), kind="stable")]
    m = int(min(order.size, max(k_new, np.ceil(float(factor) * k_new))))
    if D is None or m == k_new:
        return np.sort(order[:k_new]).astype(np.int64)
    from ._coreset import kmedoids_coreset

    top = order[:m]
    labels = kmedoids_coreset(np.ascontiguousarray(np.asarray(D)[np.ix_(top, top)], dtype=np.float64), k_new,
                              seed=int(seed), restarts=int(restarts)).labels
    picks = []
    for j in np.unique(labels):  # ``top`` is best-first: the first member of each cluster is its best
        picks.append(int(top[np.flatnonzero(labels == j)[0]]))
    left = [int(i) for i in top if int(i) not in set(picks)]
    picks += left[:k_new - len(picks)]
    return np.sort(np.asarray(picks[:k_new], dtype=np.int64))


def top_share(y: np.ndarray, labelled, share: float, sign: float = 1.0) -> tuple[float, float]:
    r"""MolPAL's metrics: of the pool's true top ``share`` (:math:`T`, the :math:`t = \lceil share\cdot n\rceil` largest
    :math:`v = s\,y`), the fraction found in the labelled set :math:`S`, :math:`|T\cap S|/t`, and the share of their
    mean score found: with :math:`B` the :math:`t` largest :math:`v` in :math:`S` (all of :math:`S` when smaller),
    :math:`(\bar v_B - \bar v)/(\bar v_T - \bar v)`, both centred on the pool's mean :math:`\bar v` (1: the best
    measured are the pool's best; 0: no better than a typical member; sign-free, unlike MolPAL's ratio of means).

    Parameters
    ----------
    y : ndarray, shape (n,)
    labelled : int positions or bool mask
    share : float in (0, 1]
    sign : float

    Returns
    -------
    (found, score_found) : floats; found in [0, 1], score_found at most 1
    """
    from .rounds import _mask

    v = float(sign) * np.asarray(y, dtype=np.float64).reshape(-1)
    n = v.size
    t = int(np.ceil(float(share) * n))
    lab = _mask(labelled, n)
    top = np.argsort(-v, kind="stable")[:t]
    best = np.sort(v[lab])[::-1][:t]
    span = v[top].mean() - v.mean()
    score = float((best.mean() - v.mean()) / span) if best.size and span > 0 else float("nan")
    return float(lab[top].mean()), score
