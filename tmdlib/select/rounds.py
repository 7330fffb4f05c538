r"""Picks in rounds: a robust first round, and later rounds shaped by the labels that came back.

Every function here works on the pool's exact TMD matrix :math:`D \in \mathbb R^{n\times n}` and returns
positions; whatever it picks, the certificate of Lemma 3.2 is the same exact sum,

.. math:: \varepsilon(S) = \frac1n \sum_{i=1}^n \min_{j \in S} D_{ij},

of the whole labelled set :math:`S` (:func:`union_epsilon`): the lemma holds for any set with its nearest-member
assignment, so a set chosen with the labels' help carries its certificate all the same.

**First round** (no label yet).  k-medoids minimises :math:`\varepsilon`, and at budgets of 5--20 % of a pool that
objective is cheapest to lower by making isolated members medoids of their own (a singleton removes its whole distance
from the sum): on a congeneric series those are the series' odd members, whose labels say little about the rest.
:func:`mixed_medoids` spends a share of the budget on a uniform sample and the rest on k-medoids with that sample kept
as medoids (coverage where the uniform draw left gaps), :func:`trimmed_medoids` forbids the most isolated members from
being medoids (they are still assigned and still count in ε).

**Later rounds** (:func:`next_batch`).  With the labels of :math:`S` known, a difficulty :math:`u_i \ge 0` per pool
member (from the model trained on them: an ensemble's spread, a conformal width, the spread of the nearest labelled
neighbours' values) and the TMD coverage :math:`d_i = \min_{j\in S} D_{ij}` are combined so that a batch is both
informative and diverse (batch active learning, not top-k uncertainty):

========================  ============================================================================================
``unc-cover``             greedy: pick :math:`\arg\max_i u_i\, d_i`, then update :math:`d` (a difficulty-weighted
                          k-center on TMD)
``kcenter-unc``           greedy k-center (:math:`\arg\max_i d_i`) over the more difficult half of the candidates
``badge``                 k-means++-style sampling with probability :math:`\propto (u_i d_i)^2` (BADGE's seeding with
                          the difficulty in place of the gradient norm)
``tmd-unc``               weighted k-medoids: :math:`\min_{|S'| = k} \sum_i w_i \min_{j \in S \cup S'} D_{ij}` with
                          :math:`w_i = u_i/\bar u + \lambda` (the difficult regions get more medoids, every region some)
``tmd``                   k-medoids with :math:`S` kept (the coreset grown: what round two did before)
``random``                uniform among the candidates
``strat``                 stratified random (:func:`stratified_picks`): the labelled set topped up towards a
                          proportional share of every TMD cluster, uniform inside each
``strat-unc``             the same with each cluster's share weighted by its members' :math:`u_i/\bar u + \lambda`
========================  ============================================================================================

**Stratified random** (:func:`stratified_picks`, first round ``strat``).  The pool is cut into :math:`c` TMD
clusters (k-medoids; :math:`c = k` by default) and each cluster :math:`C` receives a quota
:math:`q_C = k\,|C|/n` of the picks, rounded systematically (one uniform offset on the cumulative quotas: every
cluster gets :math:`\lfloor q_C\rfloor` or :math:`\lceil q_C\rceil`, :math:`\mathbb E = q_C`, the total exactly
:math:`k`); inside a cluster the picks are uniform.  Every member is then picked with probability exactly
:math:`k/n`, as under Random -- the labelled set follows the pool's density, where most of a congeneric series is --,
but a draw can no longer leave a region empty or pile up in one (proportional allocation: Random's expectation with
less variance).  In a later round the quotas are those of the whole labelled set, less what each cluster already
holds (its deficit, never negative).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

__all__ = ["stratified_picks", "first_picks", "FIRST_KINDS",
           "FIRST_PICKERS", "picking_distance", "default_strategy", "default_first",
           "DEFAULT_FIRST_CLASSES",
           "union_epsilon", "mixed_medoids", "trimmed_medoids", "next_batch", "NEXT_STRATEGIES", "DEFAULT_NEXT",
           "isolation", "knn_difficulty", "default_method", "DEFAULT_FIRST",
           "check_control", "forest_difficulty", "DIFFICULTIES", "DEFAULT_DIFFICULTY", "default_weighting",
           "NextStrategy", "needs_difficulty", "table_help", "Difficulty", "difficulty_name", "estimate_difficulty"]

#: First rounds (no label yet), by name: ``(kind, space)``.  The kind is ``mix`` (:func:`mixed_medoids`, half
#: uniform), ``medoids`` (k-medoids) or ``strat`` (:func:`stratified_picks`); the space is the distance it picks on:
#: ``tmd`` (the pool's TMD matrix) or ``fp`` (:func:`picking_distance`: the Tanimoto distance of ECFP4 counts, the
#: default molecule model's own kernel; a pool without SMILES falls back to TMD).  Later rounds pick on the same space.
FIRST_PICKERS = {"tmd-mix": ("mix", "tmd"), "tmd": ("medoids", "tmd"), "strat": ("strat", "tmd"),
                 "fpk-mix": ("mix", "fp"), "fpk": ("medoids", "fp"), "strat-fp": ("strat", "fp")}
#: The default first round of ``tmd-rounds`` and its later-round strategy (chosen on the pool benchmark's families:
#: docs/pool-benchmark.md).
DEFAULT_FIRST = "strat-fp"
DEFAULT_NEXT = "tmd-unc"
#: The first round where the labels are known to be classes (``base.task``, a built-in's task, or 0/1 answers so far):
#: on the classification family TMD's half-uniform mix held up best (docs/pool-benchmark.md).
DEFAULT_FIRST_CLASSES = "tmd-mix"
#: The difficulty estimate of :data:`DIFFICULTIES` a later round uses unless told (chosen on the pool benchmark).
DEFAULT_DIFFICULTY = "forest"


def default_first(classes: bool = False) -> str:
    """The measured first round of ``tmd-rounds`` (:data:`FIRST_PICKERS`): :data:`DEFAULT_FIRST_CLASSES` for labels
    known to be classes, :data:`DEFAULT_FIRST` otherwise (regression, or a pool whose labels are not known yet)."""
    return DEFAULT_FIRST_CLASSES if classes else DEFAULT_FIRST


def default_strategy(first: str | None = None, nxt: str | None = None, difficulty: str | None = None) -> str:
    """The pool benchmark's name of a rounds strategy, ``<first>><next>[:fp]/<difficulty>`` (the defaults when not
    given): the later rounds on the first round's space."""
    first = first or DEFAULT_FIRST
    space = FIRST_PICKERS[first][1]
    return f"{first}>{nxt or DEFAULT_NEXT}{':fp' if space == 'fp' else ''}/{difficulty or DEFAULT_DIFFICULTY}"


def picking_distance(smiles) -> np.ndarray:
    r"""The fingerprint space the ``fp`` pickers work in: :math:`1 - K_{\mathrm{MinMax}}` of ECFP4 counts
    (:func:`tmdlib.chem.models.minmax_kernel`, the Tanimoto SVR's kernel).  Imports RDKit.

    Parameters
    ----------
    smiles : sequence of str, length n

    Returns
    -------
    ndarray of float64, shape (n, n)
        Symmetric, zero diagonal, values in [0, 1].
    """
    from ..chem._fingerprints import ecfp4_counts
    from ..chem.models import minmax_kernel

    D = 1.0 - minmax_kernel(ecfp4_counts(list(smiles)))
    np.fill_diagonal(D, 0.0)
    return np.ascontiguousarray(D)


def _medoid_picks(D, k, seed, *, fixed=None, restarts=3):
    from ._coreset import kmedoids_coreset

    return kmedoids_coreset(D, k, seed=seed, restarts=restarts, fixed=fixed).medoids.astype(np.int64)


#: The label-free first-round pickers by kind (:data:`FIRST_PICKERS` names a kind and a space): ``mix`` half uniform
#: and half k-medoids, ``strat`` stratified random over k-medoids clusters, ``medoids`` k-medoids.  Each is
#: ``(D, k, seed, *, fixed, restarts) -> positions``; a new kind is one entry here.
FIRST_KINDS = {
    "mix": lambda D, k, seed, **kw: mixed_medoids(D, k, 0.5, seed, **kw),
    "strat": lambda D, k, seed, **kw: stratified_picks(D, k, seed, **kw),
    "medoids": lambda D, k, seed, **kw: _medoid_picks(D, k, seed, **kw),
}


def first_picks(D: np.ndarray, k: int, kind: str, seed: int = 0, *, fixed=None, restarts: int = 3) -> np.ndarray:
    """A label-free first round of ``k`` picks on the distance ``D`` (``fixed`` kept): ``kind`` one of
    :data:`FIRST_KINDS` (``mix``, ``strat``, ``medoids``), as :data:`FIRST_PICKERS` names them.

    Returns
    -------
    ndarray of int64, shape (k,), sorted
    """
    if kind not in FIRST_KINDS:
        raise ValueError(f"unknown first-round kind {kind!r}: {', '.join(FIRST_KINDS)}")
    return FIRST_KINDS[kind](D, k, seed, fixed=fixed, restarts=restarts)


def default_method(method: str, production: bool, scalable: bool = False) -> str:
    """``"auto"`` resolved: ``tmd-rounds`` for a pool without labels (production: the pool setting, measured on the
    pool benchmark) while the TMD matrix is at hand, the paper's ``tmd`` coreset in benchmark mode and for a pool the
    scalable engine takes (no matrix: no coverage to steer by); any other name as it is."""
    if method != "auto":
        return method
    return "tmd-rounds" if production and not scalable else "tmd"


def check_control(method: str, control) -> float:
    """``select.control`` checked: a share in [0, 1), and only with ``tmd-rounds`` (the method that draws the arm)."""
    from .._errors import InputError

    c = float(control or 0.0)
    if not 0.0 <= c < 1.0:
        raise InputError(None, f"select.control must be a share in [0, 1), got {control!r}")
    if c > 0 and method != "tmd-rounds":
        raise InputError(None, f"select.control needs select.method tmd-rounds (auto in production), not {method!r}")
    return c


def forest_difficulty(X_labelled: np.ndarray, y_labelled: np.ndarray, X: np.ndarray, *, classes: bool = False,
                      trees: int = 100, seed: int = 0) -> np.ndarray:
    r"""The spread of a random forest's trees (scikit-learn, ``trees`` trees, :math:`\sqrt d` features per split, on the
    labelled rows): the standard
    deviation over the trees of their predictions (regression) or of their positive-class probability (``classes``).

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    y = np.asarray(y_labelled, dtype=np.float64)
    if y.size < 2 or np.unique(y).size < 2:
        return np.ones(len(X))
    Forest = RandomForestClassifier if classes else RandomForestRegressor
    f = Forest(n_estimators=int(trees), max_features="sqrt", random_state=int(seed), n_jobs=1).fit(
        X_labelled, y.astype(int) if classes else y)
    if classes:
        return np.stack([t.predict_proba(X)[:, -1] for t in f.estimators_]).std(axis=0)
    return np.stack([t.predict(X) for t in f.estimators_]).std(axis=0)


def default_weighting(weighting: str, production: bool) -> str:
    """``train.weighting: auto`` resolved: unit weights on a pool without labels (the pool benchmark: τ-weighting
    never helped the SVM and cost the forest, docs/pool-benchmark.md), the paper's τ in benchmark mode."""
    if weighting != "auto":
        return weighting
    return "none" if production else "tau"


def knn_difficulty(X_labelled: np.ndarray, y_labelled: np.ndarray, X: np.ndarray, neighbours: int = 5) -> np.ndarray:
    r"""The spread of the labels of each row's ``neighbours`` nearest labelled rows (crepes' ``DifficultyEstimator``
    fitted with the labels): :math:`u_i = \mathrm{sd}\{y_j : j \in N_k(x_i)\} + \beta`, Euclidean on the features,
    :math:`\beta = 0.01` (crepes' default: no member has a difficulty of 0).

    Parameters
    ----------
    X_labelled : ndarray, shape (m, d)
    y_labelled : ndarray, shape (m,)
    X : ndarray, shape (n, d)
    neighbours : int

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    from crepes.extras import DifficultyEstimator

    y = np.asarray(y_labelled, dtype=np.float64)
    if y.size < 2:
        return np.ones(len(X))
    de = DifficultyEstimator().fit(X=np.asarray(X_labelled, dtype=np.float64), y=y, k=int(min(neighbours, y.size - 1)))
    return np.asarray(de.apply(np.asarray(X, dtype=np.float64)), dtype=np.float64)


class Difficulty(NamedTuple):
    """A difficulty estimate from the labels so far (an entry of :data:`DIFFICULTIES`).

    Attributes
    ----------
    estimate : callable
        ``estimate(X_labelled, y_labelled, X, *, classes, trees, seed) -> ndarray, shape (n,)``.
    help : str
        One line for the help and the docs.
    """

    estimate: Callable
    help: str


def _forest_estimate(X_labelled, y_labelled, X, *, classes: bool, trees: int, seed: int) -> np.ndarray:
    """:func:`forest_difficulty` as a :class:`Difficulty`."""
    return forest_difficulty(X_labelled, y_labelled, X, classes=classes, trees=trees, seed=seed)


def _knn_estimate(X_labelled, y_labelled, X, *, classes: bool, trees: int, seed: int) -> np.ndarray:
    """:func:`knn_difficulty` (5 neighbours) as a :class:`Difficulty`; reads neither the classes nor a seed."""
    return knn_difficulty(X_labelled, y_labelled, X)


#: Difficulty estimates from the labels so far, by name: the one table the product's rounds
#: (:func:`estimate_difficulty`) and the pool benchmark read.  A new estimate is one entry here.
DIFFICULTIES: dict[str, Difficulty] = {
    "forest": Difficulty(_forest_estimate, "the spread of a random forest's trees (forest_difficulty)"),
    "knn": Difficulty(_knn_estimate, "the spread of the nearest labelled members' labels (knn_difficulty)"),
}


def difficulty_name(how) -> str:
    """The difficulty estimate ``how`` names: :data:`DEFAULT_DIFFICULTY` for ``auto`` (or None, empty), else a name of
    :data:`DIFFICULTIES` (:class:`ValueError` otherwise): the one rule."""
    name = DEFAULT_DIFFICULTY if how in (None, "", "auto") else str(how)
    if name not in DIFFICULTIES:
        raise ValueError(f"unknown difficulty {how!r}: {', '.join(DIFFICULTIES)}")
    return name


def estimate_difficulty(how, X_labelled: np.ndarray, y_labelled: np.ndarray, X: np.ndarray, *,
                        classes: bool = False, trees: int = 100, seed: int = 0) -> np.ndarray:
    """A difficulty per row of ``X`` from the labelled rows, by the estimate ``how`` (:func:`difficulty_name`).

    Parameters
    ----------
    how : str or None
        A name of :data:`DIFFICULTIES`, or ``auto``.
    X_labelled : ndarray, shape (m, d)
    y_labelled : ndarray, shape (m,)
    X : ndarray, shape (n, d)
    classes : bool
        The labels are classes (the forest's positive-class probability).
    trees, seed : int
        The forest's.

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    return DIFFICULTIES[difficulty_name(how)].estimate(X_labelled, y_labelled, X, classes=bool(classes),
                                                       trees=int(trees), seed=int(seed))


def _mask(spec, n: int) -> np.ndarray:
    """A boolean mask over ``n`` members from a mask or positions (:func:`tmdlib.select._coreset._index_set`); None is
    nobody."""
    from ._coreset import _index_set

    return np.zeros(n, dtype=bool) if spec is None else _index_set(spec, n, "members")


def _who(D: np.ndarray, candidates, fixed) -> tuple[np.ndarray, np.ndarray]:
    """``(candidates, fixed)`` as boolean masks over the ``n`` members of ``D`` (default: everyone, no one)."""
    n = D.shape[0]
    return (np.ones(n, dtype=bool) if candidates is None else _mask(candidates, n)), _mask(fixed, n)


def union_epsilon(D: np.ndarray, labelled, members=None) -> float:
    r"""The exact certificate of a labelled set: :math:`\frac1{|P|}\sum_{i \in P} \min_{j \in S} D_{ij}`.

    Parameters
    ----------
    D : ndarray, shape (n, n)
        Exact TMD matrix.
    labelled : array_like of int or bool mask, shape (n,)
        :math:`S`, non-empty.
    members : array_like of int or bool mask, optional
        :math:`P`, the members the bound is stated over (default: all ``n``).

    Returns
    -------
    float
    """
    from ..guarantees._bounds import medoids_objective

    n = D.shape[0]
    s = np.flatnonzero(_mask(labelled, n))
    if s.size == 0:
        raise ValueError("the labelled set is empty")
    return medoids_objective(D if members is None else np.asarray(D)[_mask(members, n)], s)


def isolation(D: np.ndarray, neighbours: int = 5, members=None) -> np.ndarray:
    r"""How isolated each member is: the distance to its ``neighbours``-th nearest other member.

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    n = D.shape[0]
    p = np.arange(n) if members is None else np.flatnonzero(_mask(members, n))
    sub = np.asarray(D[np.ix_(p, p)])
    m = int(min(max(1, neighbours), max(1, p.size - 1)))
    out = np.full(n, np.inf)
    out[p] = np.partition(sub, m, axis=1)[:, m] if p.size > 1 else 0.0
    return out


def _kmedoids(D, k, seed, candidates, fixed, restarts, point_weights=None):
    """k-medoids restricted to ``candidates`` with ``fixed`` kept; optional per-point weights (row scaling)."""
    from ._coreset import _run_swap, kmedoids_coreset

    if point_weights is None:
        return kmedoids_coreset(D, k, seed=seed, restarts=restarts, candidates=candidates, fixed=fixed).medoids
    Dw = np.ascontiguousarray(np.asarray(D, dtype=np.float64) * np.asarray(point_weights, dtype=np.float64)[:, None])
    cand = candidates | fixed
    best, best_loss = None, np.inf
    for s in np.random.SeedSequence(int(seed)).generate_state(int(restarts)):
        med = _run_swap(Dw, int(k), int(s), cand, fixed, 100)
        loss = float(Dw[:, med].min(axis=1).sum())
        if loss < best_loss:
            best, best_loss = med, loss
    return np.sort(best)


def mixed_medoids(D: np.ndarray, k: int, share: float = 0.5, seed: int = 0, *, candidates=None, fixed=None,
                  restarts: int = 3) -> np.ndarray:
    r"""A first round that cannot stray far from Random: ``ceil(share·k)`` uniform picks, the rest k-medoids.

    The uniform part is drawn among ``candidates`` (default: all); the k-medoids part minimises ε with the uniform
    part (and ``fixed``) kept as medoids, so it fills the gaps the draw left.

    Parameters
    ----------
    D : ndarray, shape (n, n)
    k : int
        Total picks, ``fixed`` included.
    share : float in [0, 1]
        Uniform share of the new picks.
    seed : int
    candidates, fixed : bool mask or int positions, optional
    restarts : int

    Returns
    -------
    ndarray of int64, shape (k,), sorted
    """
    cand, fix = _who(D, candidates, fixed)
    new = int(k) - int(fix.sum())
    if new < 0 or (cand & ~fix).sum() < new:
        raise ValueError(f"cannot pick {k} with {int(fix.sum())} fixed among {int((cand | fix).sum())} candidates")
    if not 0.0 <= float(share) <= 1.0:
        raise ValueError(f"share must be in [0, 1], got {share}")
    m = int(np.ceil(float(share) * new))
    rng = np.random.default_rng([int(seed), 0x3A1])
    uni = rng.choice(np.flatnonzero(cand & ~fix), size=m, replace=False) if m else np.zeros(0, np.int64)
    keep = fix.copy()
    keep[uni] = True
    if new - m == 0:
        return np.flatnonzero(keep).astype(np.int64)
    return np.sort(_kmedoids(D, int(k), seed, cand, keep, restarts)).astype(np.int64)


def _systematic(quota: np.ndarray, total: int, rng) -> np.ndarray:
    """Integer counts with ``E[count] = quota`` (scaled to sum to ``total``), each the floor or ceil of its quota, the
    sum exactly ``total``: the number of points ``u, u+1, ...`` in each cumulative interval."""
    q = np.asarray(quota, dtype=np.float64)
    q = q * (float(total) / q.sum()) if q.sum() > 0 else np.zeros_like(q)
    edges = np.concatenate([[0.0], np.cumsum(q)])
    edges[-1] = float(total)  # exactly: the counts then sum to ``total``
    u = float(rng.random())
    return (np.floor(edges[1:] - u + 1.0) - np.floor(edges[:-1] - u + 1.0)).astype(np.int64).clip(0)


def stratified_picks(D: np.ndarray, k: int, seed: int = 0, *, strata: int | None = None, candidates=None,
                     fixed=None, weights=None, restarts: int = 3) -> np.ndarray:
    r"""Stratified random picks over TMD clusters (module doc, "Stratified random").

    Parameters
    ----------
    D : ndarray, shape (n, n)
        Exact TMD matrix of the pool.
    k : int
        Total picks, ``fixed`` included.
    seed : int
    strata : int, optional
        Clusters :math:`c` (k-medoids on ``D``); default ``k``, at most the number of members.
    candidates, fixed : bool mask or int positions, optional
        Who may be picked (default: all); who is labelled already (kept, counted in its cluster's share).
    weights : ndarray, shape (n,), optional
        A cluster's share is proportional to the sum of its members' weights (default: its size).
    restarts : int

    Returns
    -------
    ndarray of int64, shape (k,), sorted
        ``fixed`` and the new picks.
    """
    from ._coreset import kmedoids_coreset

    cand, fix = _who(D, candidates, fixed)
    n = D.shape[0]
    new = int(k) - int(fix.sum())
    free = cand & ~fix
    if new < 0 or free.sum() < new:
        raise ValueError(f"cannot pick {k} with {int(fix.sum())} fixed among {int((cand | fix).sum())} candidates")
    rng = np.random.default_rng([int(seed), 0x57A7])
    if new == 0:
        return np.flatnonzero(fix).astype(np.int64)
    c = int(min(max(1, strata or int(k)), n))
    labels = kmedoids_coreset(D, c, seed=int(seed), restarts=int(restarts)).labels
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    mass = np.bincount(labels, weights=w, minlength=c)
    have = np.bincount(labels[fix], minlength=c)
    room = np.bincount(labels[free], minlength=c)
    deficit = np.maximum(mass / mass.sum() * int(k) - have, 0.0)
    deficit = np.where(room > 0, deficit, 0.0)
    picks = list(np.flatnonzero(fix))
    left = new
    while left > 0:  # a quota above a cluster's room is capped and its excess allocated again
        if deficit.sum() <= 0:
            deficit = room.astype(np.float64)
        count = np.minimum(_systematic(deficit, left, rng), room)
        for j in np.flatnonzero(count):
            pool = np.flatnonzero(free & (labels == j))
            got = rng.choice(pool, size=int(count[j]), replace=False)
            picks.extend(got.tolist())
            free[got] = False
        room -= count
        left -= int(count.sum())
        deficit = np.where(room > 0, np.maximum(deficit - count, 0.0), 0.0)
    return np.sort(np.asarray(picks, dtype=np.int64))


def trimmed_medoids(D: np.ndarray, k: int, trim: float = 0.1, seed: int = 0, *, neighbours: int = 5,
                    candidates=None, fixed=None, restarts: int = 3) -> np.ndarray:
    r"""k-medoids whose medoids avoid the most isolated ``trim`` share of the pool.

    Isolation is :func:`isolation` (distance to the ``neighbours``-th nearest member); the trimmed members still
    count in the objective and in ε, they just cannot be picked.

    Returns
    -------
    ndarray of int64, shape (k,), sorted
    """
    cand, fix = _who(D, candidates, fixed)
    iso = isolation(D, neighbours)
    free = np.flatnonzero(cand & ~fix)
    drop = int(np.floor(float(trim) * free.size))
    drop = min(drop, max(0, free.size - (int(k) - int(fix.sum()))))
    if drop:
        cand = cand.copy()
        cand[free[np.argsort(-iso[free], kind="stable")[:drop]]] = False
    return np.sort(_kmedoids(D, int(k), seed, cand, fix, restarts)).astype(np.int64)


@dataclass(frozen=True)
class _Round:
    """One later round's inputs, checked (:func:`next_batch`): the boolean masks ``lab`` (labelled), ``cand`` (may
    be picked, never labelled), ``mem`` (counts in coverage); ``u`` the difficulty (None for a strategy that reads
    none)."""

    D: np.ndarray
    lab: np.ndarray
    cand: np.ndarray
    mem: np.ndarray
    k_new: int
    u: np.ndarray | None
    seed: int
    restarts: int
    floor: float
    rng: np.random.Generator


def _next_random(r: _Round) -> np.ndarray:
    """``random``: uniform among the candidates."""
    return np.sort(r.rng.choice(np.flatnonzero(r.cand), size=r.k_new, replace=False)).astype(np.int64)


def _next_strat(r: _Round) -> np.ndarray:
    """``strat`` / ``strat-unc``: :func:`stratified_picks` topping the labelled set up, each cluster's share weighted
    by :math:`u_i/\\bar u + \\lambda` when there is a difficulty."""
    w = r.mem.astype(np.float64)
    if r.u is not None:
        w = (r.u / (r.u[r.mem].mean() or 1.0) + float(r.floor)) * r.mem
    allp = stratified_picks(r.D, int(r.lab.sum()) + r.k_new, r.seed, candidates=r.cand, fixed=r.lab, weights=w,
                            restarts=r.restarts)
    return np.sort(np.setdiff1d(allp, np.flatnonzero(r.lab))).astype(np.int64)


def _next_medoids(r: _Round) -> np.ndarray:
    """``tmd`` / ``tmd-unc``: k-medoids with the labelled set kept, weighted by :math:`u_i/\\bar u + \\lambda` when
    there is a difficulty (the members outside ``mem`` weigh nothing)."""
    sub = np.flatnonzero(r.mem | r.lab | r.cand)
    Ds = np.asarray(r.D[np.ix_(sub, sub)], dtype=np.float64)
    w = None
    if r.u is not None:
        u = r.u[sub]
        w = u / (u[r.mem[sub]].mean() or 1.0) + float(r.floor)
        w[~r.mem[sub]] = 0.0
    elif not r.mem.all():
        w = r.mem[sub].astype(np.float64)
    med = _kmedoids(Ds, int(r.lab.sum()) + r.k_new, r.seed, r.cand[sub], r.lab[sub], r.restarts, w)
    return np.sort(np.setdiff1d(sub[med], np.flatnonzero(r.lab))).astype(np.int64)


def _greedy(r: _Round, u: np.ndarray, allowed: np.ndarray, sample: bool) -> np.ndarray:
    """``k_new`` picks one at a time by :math:`u_i d_i` (its argmax, or with ``sample`` a draw with probability
    :math:`\\propto (u_i d_i)^2`) among ``allowed``, :math:`d` the coverage updated after each pick."""
    n = r.D.shape[0]
    d = (np.asarray(r.D[:, r.lab], dtype=np.float64).min(axis=1) if r.lab.any() else np.full(n, np.float64(1.0)))
    allowed = allowed.copy()
    picks = []
    for _ in range(r.k_new):
        if sample:
            p = np.where(allowed, (u * d) ** 2, 0.0)
            tot = p.sum()
            j = int(r.rng.choice(n, p=p / tot)) if tot > 0 else int(r.rng.choice(np.flatnonzero(allowed)))
        else:
            j = int(np.argmax(np.where(allowed, u * d, -np.inf)))
        picks.append(j)
        allowed[j] = False
        np.minimum(d, np.asarray(r.D[:, j], dtype=np.float64), out=d)
    return np.sort(np.asarray(picks, dtype=np.int64))


def _next_unc_cover(r: _Round) -> np.ndarray:
    """``unc-cover``: the difficulty-weighted k-center."""
    return _greedy(r, r.u, r.cand, sample=False)


def _next_kcenter_unc(r: _Round) -> np.ndarray:
    """``kcenter-unc``: k-center over the more difficult half of the candidates (all of them when that half is
    smaller than the batch)."""
    c = np.flatnonzero(r.cand)
    hard = c[r.u[c] >= np.median(r.u[c])]
    allowed = np.zeros_like(r.cand)
    allowed[hard if hard.size >= r.k_new else c] = True
    return _greedy(r, np.ones(r.D.shape[0]), allowed, sample=False)


def _next_badge(r: _Round) -> np.ndarray:
    """``badge``: k-means++-style sampling by :math:`(u_i d_i)^2`."""
    return _greedy(r, r.u, r.cand, sample=True)


class NextStrategy(NamedTuple):
    """A later-round strategy of :func:`next_batch` (an entry of :data:`NEXT_STRATEGIES`).

    Attributes
    ----------
    pick : callable
        ``pick(round) -> ndarray of int64``: the new picks, sorted.
    help : str
        One line for ``--next``'s help and params.yaml's comment.
    difficulty : bool
        It reads a difficulty per pool member (without one, ``tmd-rounds`` grows the coreset instead).
    """

    pick: Callable
    help: str
    difficulty: bool


#: The later-round strategies of :func:`next_batch`, by name (module docstring): the one table the CLI's ``--next``,
#: params.yaml's ``select.next`` and the pool benchmark read.  A new strategy is one entry here.
NEXT_STRATEGIES: dict[str, NextStrategy] = {
    "unc-cover": NextStrategy(_next_unc_cover, "difficulty-weighted k-center on the coverage", True),
    "kcenter-unc": NextStrategy(_next_kcenter_unc, "k-center over the more difficult half", True),
    "badge": NextStrategy(_next_badge, "BADGE seeding with the difficulty as the gradient norm", True),
    "tmd-unc": NextStrategy(_next_medoids, "k-medoids weighted by the difficulty, every region some", True),
    "tmd": NextStrategy(_next_medoids, "k-medoids with the labelled set kept: the coreset grown", False),
    "random": NextStrategy(_next_random, "uniform among the candidates", False),
    "strat": NextStrategy(_next_strat, "stratified random over TMD clusters, topped up", False),
    "strat-unc": NextStrategy(_next_strat, "stratified random, each cluster's share weighted by the difficulty", True),
}


def needs_difficulty(strategy: str) -> bool:
    """Whether ``strategy`` reads a difficulty (:attr:`NextStrategy.difficulty`; an unknown name: True, so that
    :func:`next_batch` names it)."""
    entry = NEXT_STRATEGIES.get(str(strategy))
    return entry is None or entry.difficulty


def table_help(table) -> str:
    """``name (help) | name (help) ...``: a table's entries for a command's help and params.yaml's comments."""
    return " | ".join(f"{name} ({entry.help})" for name, entry in table.items())


def next_batch(D: np.ndarray, labelled, k_new: int, difficulty=None, strategy: str = "tmd-unc", seed: int = 0, *,
               candidates=None, members=None, restarts: int = 3, floor: float = 0.5) -> np.ndarray:
    r"""The next round's ``k_new`` picks, given the labelled set and a difficulty per pool member.

    Parameters
    ----------
    D : ndarray, shape (n, n)
        Exact TMD matrix of the pool.
    labelled : int positions or bool mask
        :math:`S`, already labelled (kept; never picked again).
    k_new : int
        New picks.
    difficulty : ndarray, shape (n,), optional
        :math:`u_i \ge 0` (larger = the model is less sure); needed by every strategy whose
        :attr:`NextStrategy.difficulty` is set.
    strategy : str
        One of :data:`NEXT_STRATEGIES` (module docstring).
    seed : int
    candidates : int positions or bool mask, optional
        Who may be picked (default: everyone not labelled); e.g. the pool less the audit sample.
    members : int positions or bool mask, optional
        Who counts in coverage and in the k-medoids objective (default: everyone).
    restarts : int
    floor : float
        The difficulty-weighted strategies: :math:`\lambda`, the weight every member keeps whatever its difficulty.

    Returns
    -------
    ndarray of int64, shape (k_new,)
        The new picks (sorted), disjoint from ``labelled``.
    """
    n = D.shape[0]
    lab = _mask(labelled, n)
    cand = (np.ones(n, dtype=bool) if candidates is None else _mask(candidates, n)) & ~lab
    mem = np.ones(n, dtype=bool) if members is None else _mask(members, n)
    k_new = int(k_new)
    if k_new < 0 or k_new > cand.sum():
        raise ValueError(f"cannot pick {k_new} new members among {int(cand.sum())} candidates")
    if k_new == 0:
        return np.zeros(0, dtype=np.int64)
    entry = NEXT_STRATEGIES.get(strategy)
    if entry is None:
        raise ValueError(f"unknown strategy {strategy!r}: {', '.join(NEXT_STRATEGIES)}")
    u = _difficulty(difficulty, n) if entry.difficulty else None
    return entry.pick(_Round(D, lab, cand, mem, k_new, u, int(seed), restarts, float(floor),
                             np.random.default_rng([int(seed), 0xB47])))


def _difficulty(u, n: int) -> np.ndarray:
    if u is None:
        raise ValueError("this strategy needs a difficulty per pool member")
    u = np.asarray(u, dtype=np.float64).reshape(-1)
    if u.shape != (n,) or not np.all(np.isfinite(u)) or (u < 0).any():
        raise ValueError(f"difficulty must be finite and >= 0 with shape ({n},)")
    return u
