r"""The built-in graph-selection methods, registered once (:mod:`tmdlib.select._registry`).

==============  ================================================================  =========================
name            what it picks                                                     needs
==============  ================================================================  =========================
``tmd``         k-medoids on the exact TMD (the paper's coreset; τ = cluster      graphs or the TMD matrix
                sizes); ``exact`` engine on the full matrix, ``scalable`` without
``random``      ``k`` members uniformly without replacement; **unit weights**     nothing
                (τ_j = 1: a uniform sample needs no reweighting)
``feature``     k-medoids on the distance of mean node features (paper B.3)       graphs
``wl``          k-medoids on the WL-subtree-kernel distance (paper B.3)           graphs
``tmd-mix``     half a uniform draw, half k-medoids on TMD with the draw kept     the TMD matrix
                (:mod:`tmdlib.select.rounds`; τ = TMD cluster sizes)
``tmd-rounds``  the pool setting: round one its ``first`` picker, later rounds    the TMD matrix, and from
                steered by a difficulty per member from the labels so far         round two a difficulty
                (``next_batch``), a uniform ``control`` share kept apart          (**reads labels**)
``maxmin``      RDKit's MaxMin diversity picker on ECFP4 (Tanimoto)               SMILES
``leader``      RDKit's sphere exclusion (LeaderPicker), threshold searched to k  SMILES
``butina``      centroids of the k largest Butina clusters on Tanimoto            SMILES
``fp-kmedoids`` FasterPAM k-medoids on the Tanimoto distance of ECFP4             SMILES
``scaffold``    one molecule per Bemis–Murcko scaffold, largest scaffolds first   SMILES
==============  ================================================================  =========================

**Weights convention.**  Clustering methods weight each pick by the size of its cluster in the method's own
assignment (τ sums to the pool size ``n``); Random and MaxMin weight every pick 1.  Training normalises by the
mean weight, so unit weights and equal weights ``n/k`` train the same model.  Whatever the method, the TMD
certificate of Lemma 3.2 (nearest-medoid assignment under TMD, its cluster sizes and ε) is attached by
:func:`tmdlib.select.select_graphs` and recorded apart (``certificate_tau``): the bound is stated for those
weights.

The chemistry methods call RDKit through :mod:`tmdlib.chem` (imported only when such a method runs).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .._errors import InputError
from ._registry import MethodSpec, Picked, Problem, register

__all__: list[str] = []


def _kmedoids(problem: Problem, D: np.ndarray) -> Picked:
    """k-medoids of ``problem`` on ``D`` (FasterPAM by default, label reuse through candidates / fixed)."""
    from ._coreset import kmedoids_coreset

    o = problem.options
    res = kmedoids_coreset(D, problem.k, seed=problem.seed, method=o.get("backend", "fasterpam"),
                           restarts=int(o.get("restarts", 5)), candidates=problem.candidates, fixed=problem.fixed)
    return Picked(res.medoids, res.tau.astype(np.float64), float(res.epsilon))


def _matrix_bytes(problem: Problem) -> float:
    """k-medoids on an n × n float64 matrix: the matrix and the validated copy."""
    return 2 * 8.0 * problem.n * problem.n


def _tmd(problem: Problem) -> Picked:
    """The paper's coreset: k-medoids on exact TMD (exact engine), or the scalable engine's certified coreset."""
    if problem.engine == "scalable":
        from ._certificate import tmd_coreset

        o, plan = problem.options, _plan(problem)
        scal = {key: o[key] for key in ("map_parts", "progress", "scratch_dir") if o.get(key) is not None}
        cert = tmd_coreset(problem.dataset, problem.k, problem.depth, problem.weights, engine="scalable",
                           seed=problem.seed, candidates=problem.candidates, fixed=problem.fixed,
                           num_threads=o.get("num_threads"), part_size=plan.part_size, max_pairs=plan.max_pairs,
                           **scal)
        return Picked(cert.medoids, cert.tau.astype(np.float64), None, cert)
    if problem.matrix is None:  # exact engine without a given matrix: compute it (the engine chose it as cheap)
        from ..distance._engine import DEFAULT_MEMORY_LIMIT, tmd_matrix

        o = problem.options
        problem.matrix = tmd_matrix(problem.dataset, problem.depth, problem.weights,
                                    memory_limit=o.get("memory_limit", DEFAULT_MEMORY_LIMIT),
                                    num_threads=o.get("num_threads"))
    return _kmedoids(problem, problem.matrix)


def _plan(problem: Problem):
    """The plan :func:`~tmdlib.select.select_graphs` made (its part size and pair budget), or one made here for a
    :class:`Problem` built by hand (options ``part_size`` / ``max_pairs``, left out or None: ``"auto"``)."""
    if problem.plan is not None:
        return problem.plan
    from ._plan import plan_selection

    o = problem.options
    return plan_selection(problem.dataset, "tmd", k=problem.k, engine=problem.engine,
                          part_size=o.get("part_size") or "auto",
                          max_pairs="auto" if o.get("max_pairs") is None else o["max_pairs"])


def _tmd_memory(problem: Problem) -> float:
    if problem.engine == "scalable":
        from ._certificate import engine_memory_bytes

        ds = problem.dataset
        return engine_memory_bytes("scalable", ds.nodes_per_graph, problem.k, ds.num_features, ds.features.shape[0],
                                   problem.depth, _plan(problem).part_size)
    return _matrix_bytes(problem) + (0 if problem.matrix is not None else 8.0 * problem.n * problem.n)


def _rounds_memory(problem: Problem) -> float:
    """``tmd-rounds``: the TMD matrix, and on a molecule pool the fingerprint distance beside it."""
    extra = 8.0 * problem.n * problem.n if problem.smiles is not None and problem.engine != "scalable" else 0.0
    return _tmd_memory(problem) + extra


def _random(problem: Problem) -> Picked:
    """``k`` uniform picks; already-labelled members first (all of them when they fit, else ``k`` among them)."""
    from ._baselines import random_selection

    n, k = problem.n, problem.k
    if problem.candidates is not None:
        pool = np.flatnonzero(problem.candidates)
    elif problem.fixed is not None:
        pool = np.flatnonzero(~problem.fixed)
    else:
        pool = np.arange(n)
    kept = np.flatnonzero(problem.fixed) if problem.fixed is not None else np.zeros(0, dtype=np.int64)
    extra = pool[random_selection(pool.size, k - kept.size, problem.seed)] if k > kept.size else kept[:0]
    pos = np.sort(np.concatenate([kept, extra])).astype(np.int64)
    return Picked(pos, np.ones(k))


def _feature(problem: Problem) -> Picked:
    from ._baselines import feature_distance_matrix

    D = problem.distance if problem.distance is not None else feature_distance_matrix(problem.dataset)
    return _kmedoids(problem, D)


def _wl(problem: Problem) -> Picked:
    from ._baselines import wl_distance_matrix

    D = problem.distance if problem.distance is not None else wl_distance_matrix(problem.dataset)
    return _kmedoids(problem, D)


# ---------------------------------------------------------------------------------- rounds (the pool setting)
def _matrix_of(problem: Problem) -> np.ndarray:
    if problem.matrix is None:
        from ..distance._engine import DEFAULT_MEMORY_LIMIT, tmd_matrix

        o = problem.options
        problem.matrix = tmd_matrix(problem.dataset, problem.depth, problem.weights,
                                    memory_limit=o.get("memory_limit", DEFAULT_MEMORY_LIMIT),
                                    num_threads=o.get("num_threads"))
    return problem.matrix


def _with_tau(problem: Problem, D: np.ndarray, positions, info: dict) -> Picked:
    """Picks with τ = their cluster sizes under the nearest-pick TMD assignment (the certificate's)."""
    from ._coreset import assign_to_medoids

    med, assignment, tau = assign_to_medoids(D, np.asarray(positions, dtype=np.int64))
    return Picked(med, tau.astype(np.float64), float(D[np.arange(D.shape[0]), assignment].mean()), None, info)


def _tmd_mix(problem: Problem) -> Picked:
    """Round one of the pool setting: a uniform share, the rest k-medoids around it (:mod:`tmdlib.select.rounds`)."""
    from .rounds import mixed_medoids

    if problem.engine == "scalable":
        picked = _tmd(problem)
        picked.info["fallback"] = "scalable engine: the paper's coreset (tmd-mix needs the TMD matrix)"
        return picked
    D = _matrix_of(problem)
    share = float(problem.options.get("share", MIX_SHARE))
    if problem.candidates is not None:  # more labelled than k: k-medoids among them, nothing new
        return _kmedoids(problem, D)
    pos = mixed_medoids(D, problem.k, share, problem.seed, fixed=problem.fixed,
                        restarts=int(problem.options.get("restarts", 3)))
    return _with_tau(problem, D, pos, {"share": share})


def _control(problem: Problem) -> tuple[Problem, np.ndarray]:
    """The Random control arm of a round (option ``control``: a share of the round's new picks, drawn uniformly among
    the members that may be picked); returns the problem with them kept (``fixed``) and their positions."""
    share = float(problem.options.get("control") or 0.0)
    if not 0.0 <= share < 1.0:
        raise InputError(None, f"select.control must be a share in [0, 1), got {share}")
    fixed = np.zeros(problem.n, dtype=bool) if problem.fixed is None else problem.fixed.copy()
    new = problem.k - int(fixed.sum())
    m = int(np.ceil(share * new)) if share > 0 and problem.candidates is None else 0
    if m == 0:
        return problem, np.zeros(0, dtype=np.int64)
    free = ~fixed
    if problem.options.get("exclude") is not None:
        free &= ~np.asarray(problem.options["exclude"], dtype=bool)
    rng = np.random.default_rng([int(problem.seed), 0xC0A7, int(problem.k)])
    arm = np.sort(rng.choice(np.flatnonzero(free), size=min(m, int(free.sum())), replace=False)).astype(np.int64)
    fixed[arm] = True
    return replace(problem, fixed=fixed), arm


def _tmd_rounds(problem: Problem) -> Picked:
    r"""The pool setting's rounds: round one :func:`_tmd_mix`; later rounds (members already labelled, ``fixed``)
    :func:`tmdlib.select.rounds.next_batch` with the ``difficulty`` option (one value per pool member, from the
    labels so far) and the ``strategy`` option (default :data:`tmdlib.select.rounds.DEFAULT_NEXT`).  Option
    ``control``: a share of each round's new picks drawn uniformly (the Random control arm, :func:`_control`)."""
    before = np.zeros(problem.n, dtype=bool) if problem.fixed is None else problem.fixed.copy()
    first = not before.any()
    if problem.engine == "scalable" or problem.candidates is not None:  # (more labelled than k: k-medoids among them)
        return _tmd_mix(problem)
    problem, arm = _control(problem)
    picked = _first_round(problem) if first else _next_round(problem)
    new = np.setdiff1d(np.asarray(picked.positions, dtype=np.int64), np.flatnonzero(before))
    picked.info.update({"round_new": int(new.size), **({"control": arm.tolist(),
                                                        "strategy_new": np.setdiff1d(new, arm).tolist()}
                                                       if arm.size else {})})
    return picked


def _space(problem: Problem, first: str) -> tuple[str, np.ndarray]:
    """The distance ``tmd-rounds`` picks on (:data:`tmdlib.select.rounds.FIRST_PICKERS`): the fingerprint distance of
    a molecule pool (:func:`tmdlib.select.rounds.picking_distance`, computed once per selection), else the TMD
    matrix; returns its name and the matrix."""
    from .rounds import FIRST_PICKERS, picking_distance

    if FIRST_PICKERS[first][1] == "fp" and problem.smiles is not None:
        if problem.distance is None:
            problem.distance = picking_distance(problem.smiles)
        return "fp", problem.distance
    return "tmd", _matrix_of(problem)


def _first_of(problem: Problem) -> str:
    """Option ``first``, else :data:`tmdlib.select.hits.HIT_FIRST` under a hit-hunting ``goal``, else
    :data:`tmdlib.select.rounds.DEFAULT_FIRST`."""
    from .hits import HIT_FIRST, hunting
    from .rounds import DEFAULT_FIRST, FIRST_PICKERS

    first = str(problem.options.get("first") or (HIT_FIRST if hunting(problem.options.get("goal")) else DEFAULT_FIRST))
    if first not in FIRST_PICKERS:
        raise InputError(None, f"tmd-rounds' first round is one of {', '.join(FIRST_PICKERS)}, not {first!r}")
    return first


def _first_round(problem: Problem) -> Picked:
    """Round one of ``tmd-rounds``: option ``first`` (default :data:`tmdlib.select.rounds.DEFAULT_FIRST`), one of
    :data:`tmdlib.select.rounds.FIRST_PICKERS`, on its space (:func:`_space`); τ and ε from the TMD assignment."""
    from .rounds import FIRST_PICKERS, first_picks

    first = _first_of(problem)
    space, P = _space(problem, first)
    pos = first_picks(P, problem.k, FIRST_PICKERS[first][0], problem.seed, fixed=problem.fixed,
                      restarts=int(problem.options.get("restarts", 3)))
    return _with_tau(problem, _matrix_of(problem), pos, {"first": first, "space": space})


def _next_round(problem: Problem) -> Picked:
    """A later round of ``tmd-rounds``: the labelled members (and a control arm), ``fixed``, kept; the rest of the
    budget by :func:`tmdlib.select.rounds.next_batch` on the first round's space, or, with options ``goal`` (not
    ``model``) and ``scores`` (an acquisition score per member, :mod:`tmdlib.select.hits`), the best by score
    (:func:`tmdlib.select.hits.hit_batch`; ``exclude``, the audit sample when it is in the pool, never picked)."""
    from .rounds import DEFAULT_NEXT, needs_difficulty, next_batch

    diff = problem.options.get("difficulty")
    strategy = str(problem.options.get("strategy") or DEFAULT_NEXT)
    if diff is None and needs_difficulty(strategy):
        strategy = "tmd"  # no difficulty (a pool without SMILES or fingerprints): the coreset grows
    space, P = _space(problem, _first_of(problem))
    kept = np.flatnonzero(problem.fixed)
    cand = None if problem.options.get("exclude") is None else ~np.asarray(problem.options["exclude"], dtype=bool)
    goal, scores = problem.options.get("goal"), problem.options.get("scores")
    if goal not in (None, "", "model") and scores is not None:  # hit hunting (tmdlib.select.hits): best by score
        from .hits import hit_batch

        new = hit_batch(scores, problem.k - kept.size, labelled=kept, candidates=cand, seed=problem.seed)
        return _with_tau(problem, _matrix_of(problem), np.concatenate([kept, new]), {
            "strategy": "hits", "space": space, "goal": goal, "acquisition": problem.options.get("acquisition"),
            **({"target": problem.options["target"]} if problem.options.get("target") else {})})
    new = next_batch(P, kept, problem.k - kept.size, diff, strategy, problem.seed, candidates=cand,
                     restarts=int(problem.options.get("restarts", 3)))
    return _with_tau(problem, _matrix_of(problem), np.concatenate([kept, new]), {"strategy": strategy, "space": space, **(
        {"difficulty_from": problem.options["difficulty_from"]} if diff is not None and
        problem.options.get("difficulty_from") else {})})


#: Uniform share of a ``tmd-mix`` first round (measured on the pool benchmark: docs/pool-benchmark.md).
MIX_SHARE = 0.5


# ------------------------------------------------------------------------------------------- chemistry pickers
def _chem(name: str):
    """A picker of :mod:`tmdlib.chem` as a method: SMILES in, picks (and τ where the picker clusters) out."""

    def run(problem: Problem) -> Picked:
        from .. import chem

        if problem.fixed is not None or problem.candidates is not None:
            raise InputError(None, f"method {name!r} cannot keep already-labelled molecules first; "
                                   "use tmd, random, feature or wl, or start without a label ledger")
        picker = chem.PICKERS[name]
        opts = {key: v for key, v in problem.options.items() if key in chem.PICKER_OPTIONS.get(name, ())}
        res = picker(problem.smiles, problem.k, seed=problem.seed, **opts)
        tau = np.ones(problem.k) if res.tau is None else np.asarray(res.tau, dtype=np.float64)
        return Picked(np.asarray(res.positions, dtype=np.int64), tau, None, None, dict(res.info))

    return run


def _chem_memory(name: str):
    def memory(problem: Problem) -> float:
        from .. import chem

        return float(chem.memory_bytes(name, problem.n, problem.k))

    return memory


register(MethodSpec("tmd", _tmd, needs=("tmd",), summary="k-medoids on the Tree Mover's Distance (the paper's coreset)",
                    memory=_tmd_memory, max_pool_hint="use the scalable engine (--engine scalable)"))
register(MethodSpec("random", _random, needs=(), weighted=False, summary="uniform random picks, unit weights"))
register(MethodSpec("feature", _feature, needs=("graphs",), summary="k-medoids on mean node features (paper B.3)",
                    memory=_matrix_bytes, max_pool_hint="use tmd with the scalable engine, or random"))
register(MethodSpec("wl", _wl, needs=("graphs",), summary="k-medoids on the WL subtree kernel distance (paper B.3)",
                    memory=_matrix_bytes, max_pool_hint="use tmd with the scalable engine, or random"))
register(MethodSpec("tmd-mix", _tmd_mix, needs=("tmd",), summary="half uniform, half k-medoids on TMD around it "
                    "(a first round that cannot stray far from Random)", memory=_tmd_memory,
                    max_pool_hint="use tmd with the scalable engine"))
register(MethodSpec("tmd-rounds", _tmd_rounds, needs=("tmd",), label_free=False, uses=("smiles",),
                    summary="the pool setting's rounds: a label-free first round, then picks steered by the labels "
                    "so far (on a molecule pool in the fingerprint space), the TMD certificate of every round",
                    memory=_rounds_memory, max_pool_hint="use tmd with the scalable engine"))
_CHEM = {
    "maxmin": ("RDKit MaxMin diversity picker on ECFP4 (Tanimoto)", False, "use leader or tmd (scalable)"),
    "leader": ("RDKit sphere exclusion (LeaderPicker) on ECFP4, threshold searched to k", True, "use maxmin"),
    "butina": ("centroids of the k largest Butina clusters (RDKit) on ECFP4 Tanimoto", True, "use maxmin or leader"),
    "fp-kmedoids": ("FasterPAM k-medoids on the Tanimoto distance of ECFP4", True, "use maxmin or leader"),
    "scaffold": ("one molecule per Bemis-Murcko scaffold, largest scaffolds first", True, "use maxmin"),
}
for _name, (_summary, _weighted, _hint) in _CHEM.items():
    register(MethodSpec(_name, _chem(_name), needs=("smiles",), weighted=_weighted, reuses_labels=False,
                        summary=_summary, memory=_chem_memory(_name), max_pool_hint=_hint))
