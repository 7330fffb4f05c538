r"""The hit benchmark (issue 68): rounds that hunt the best molecules of a pool, beside the pool benchmark.

Each set is used whole as an unlabelled pool, as in :mod:`tmdlib.experiment.pool` (:class:`~tmdlib.experiment.pool.
PoolCase`): an **audit sample** :math:`A` is drawn as in production and never picked nor trained on; the goal is to
**maximize** the label (for the property pools, the RDKit-computed property).  Two rounds on the pool
:math:`P = [N]\setminus A`:

1. round one, :math:`\lceil 0.05\,|P|\rceil` picks, label-free: uniform (``random``) or one of the product's first
   rounds (:data:`tmdlib.select.rounds.FIRST_PICKERS`: ``strat-fp`` stratified, ``fpk`` k-medoids on the
   fingerprint distance, ``fpk-mix`` / ``tmd-mix`` half uniform, ``tmd`` the paper's TMD coreset);
2. round two, to :math:`\lceil 0.10\,|P|\rceil` in total, by an acquisition (:func:`tmdlib.select.hits.acquisition`)
   over a surrogate trained on round one's labels only.

Strategies are named ``<first>><acquisition>/<surrogate>[:div]``:

* surrogate ``svm``: :math:`\mu` the registered ``svm`` (Tanimoto SVR on ECFP4 counts,
  :func:`~tmdlib.experiment.pool.svr_on_kernel`), :math:`\sigma` the spread of a 100-tree forest's trees; ``rf``: the
  forest's mean and spread (:func:`tmdlib.select.hits.surrogate`); ``ens``: the mean of the two models' predictions,
  the forest's spread; ``gp``: a Gaussian process on the MinMax kernel (:func:`tmdlib.select.hits.kernel_gp`);
  ``knn`` / ``near``: the labels of the most similar measured molecules, or the similarity to the best measured
  (:func:`tmdlib.select.hits.near_best`);
* ``:div`` / ``:div15``: the batch cluster-then-best among the 3 k / 1.5 k best on the fingerprint distance
  (:func:`tmdlib.select.hits.hit_batch`);
* ``random`` alone: 10 % uniform, the control (:data:`RANDOM_SEEDS` seeds; the others :data:`TRIALS` trials).

``random>greedy/svm`` is the plain greedy baseline of the issue (5 % uniform, then the 5 % with the highest SVR
predictions).  Each row (one strategy, trial and budget) carries MolPAL's metrics over :math:`P`
(:func:`tmdlib.select.hits.top_share`: the share of the true top 1 % / 5 % found among the labelled, the share of
their mean score found), the error of the SVR trained on the labelled set measured on the audit sample and on the
rest of the pool (is the pool estimate still honest when the picks chase the best?), and the exact ε of the labelled
set when the TMD matrix is prepared.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["STRATEGIES", "FOCUS", "COLUMNS", "BUDGETS", "run_hits", "hit_picks", "notation", "summary_lines",
           "curve_lines", "GREEDY", "RANDOM"]

BUDGETS = (0.05, 0.10)
RANDOM = "random"
GREEDY = "random>greedy/svm"
STRATEGIES = (RANDOM, GREEDY, "random>greedy/rf", "random>greedy/ens", "random>ucb/svm", "random>ei/svm",
              "random>thompson/rf", "random>greedy/svm:div", "random>greedy/svm:div15", "random>ucb/svm:div",
              "strat-fp>greedy/svm", "strat-fp>greedy/ens", "strat-fp>greedy/svm:div15", "strat-fp>ucb/svm:div",
              "random>greedy/gp", "random>ucb/gp", "random>ei/gp", "random>thompson/gp", "strat-fp>greedy/gp",
              "strat-fp>ucb/gp", "strat-fp>ei/gp", "random>greedy/knn", "random>greedy/near", "strat-fp>greedy/knn",
              "strat-fp>greedy/near", "fpk>greedy/svm", "fpk-mix>greedy/svm", "tmd-mix>greedy/svm", "tmd>greedy/svm",
              "fpk-mix>ucb/svm", "fpk>ucb/svm", "fpk>greedy/gp")
#: The strategies run on the larger families (the rest were dropped after the series pools: docs/hit-hunting.md).
FOCUS = (RANDOM, GREEDY, "random>ucb/svm", "random>ei/svm", "random>greedy/gp", "strat-fp>greedy/svm",
         "fpk>greedy/svm", "fpk-mix>greedy/svm", "tmd-mix>greedy/svm", "fpk>ucb/svm", "fpk>greedy/gp")
RANDOM_SEEDS = 10
TRIALS = 3
COLUMNS = ("dataset", "family", "strategy", "trial", "budget", "k", "n_pool", "n_audit", "top1", "top5", "score1",
           "score5", "rmse_audit", "rmse_rest", "epsilon")


def _parse(strategy: str) -> tuple[str, str, str, float | None]:
    """``(first, acquisition, surrogate, factor)``: ``:div`` the diverse batch over the 3 k best, ``:div15`` over
    the 1.5 k best, none: the plain top k (factor None)."""
    from ..select.hits import ACQUISITIONS

    first, _, rest = strategy.partition(">")
    acq, _, sur = rest.partition("/")
    sur, _, div = sur.partition(":")
    if strategy != RANDOM and acq not in ACQUISITIONS:
        raise ValueError(f"{strategy!r}: the acquisition is one of {', '.join(ACQUISITIONS)}, not {acq!r}")
    factor = {"": None, "div": 3.0, "div15": 1.5}[div]
    return first, acq, sur, factor


def notation() -> str:
    """The hit benchmark's ``--strategies`` help, read from the product's tables
    (:data:`tmdlib.select.hits.ACQUISITIONS`, :data:`tmdlib.select.rounds.FIRST_PICKERS`)."""
    from ..select.hits import ACQUISITIONS
    from ..select.rounds import FIRST_PICKERS

    return (f"random, or <first>><acquisition>/<surrogate>[:div|:div15]: first random or {', '.join(FIRST_PICKERS)}; "
            f"acquisition {', '.join(ACQUISITIONS)}; surrogate svm, rf, ens, gp, knn, near (default: STRATEGIES)")


def hit_picks(case, strategy: str, trial: int, budgets=BUDGETS) -> list[np.ndarray]:
    """The labelled pool positions after each budget of ``strategy`` (one array per budget), the goal ``maximize``.

    Parameters
    ----------
    case : tmdlib.experiment.pool.PoolCase
    strategy : str
        :data:`STRATEGIES` (or any ``<first>><acquisition>/<surrogate>[:div]``).
    trial : int

    Returns
    -------
    list of ndarray of int64, sorted
    """
    from ..select.hits import acquisition, hit_batch, reads_spread, surrogate
    from .pool import first_round, svr_on_kernel

    if strategy == RANDOM:
        order = np.random.default_rng([int(trial), 0x9001]).permutation(case.P)
        return [np.sort(order[:case.k(b)]) for b in budgets]
    first, acq, sur, div = _parse(strategy)
    picks, _ = first_round(case, first, case.k(budgets[0]), trial)
    out = [np.sort(picks)]
    for b in budgets[1:]:
        y = case.y[case.pool[picks]]
        X = case.features
        mean = None
        if sur == "gp":
            from ..select.hits import kernel_gp

            K = case.kernel
            mu, sigma = kernel_gp(K[np.ix_(picks, picks)], K[:, picks], y)
        elif sur in ("knn", "near"):
            from ..select.hits import near_best

            mu, sigma = near_best(case.kernel[:, picks], y, how=sur), np.zeros(case.P)
        elif sur in ("svm", "ens"):
            mean = svr_on_kernel(case.kernel, picks, y, None, np.arange(case.P))
        if sur in ("gp", "knn", "near"):
            pass
        elif reads_spread(acq) or sur != "svm":
            mu, sigma = surrogate(X[picks], y, X, trees=100, seed=trial, mean=mean if sur == "svm" else None)
            if sur == "ens":  # the mean of the SVR's and the forest's predictions
                mu = 0.5 * (mu + mean)
        else:
            mu, sigma = mean, np.zeros(case.P)
        a = acquisition(mu, sigma, acq, best=float(y.max()), seed=trial)
        new = hit_batch(a, case.k(b) - picks.size, labelled=picks, D=case.D_fp if div else None,
                        factor=div or 1.0, seed=trial)
        picks = np.sort(np.concatenate([picks, new]))
        out.append(picks)
    return out


def run_hits(data: dict, family: str, strategies=STRATEGIES, *, random_seeds: int = RANDOM_SEEDS,
             trials: int = TRIALS, skip=frozenset()) -> list[dict]:
    """The rows of one set (regression only): one per (strategy, trial, budget); ``(strategy, trial)`` pairs in
    ``skip`` are not recomputed."""
    from ..chem.models import minmax_kernel
    from ..select.hits import top_share
    from ..select.rounds import union_epsilon
    from .pool import PoolCase, svr_on_kernel

    case = PoolCase(data["name"], data["y"], data["counts"], data["tmd"], data["smiles"], data["graph_ids"],
                    data["task"])
    if not case.regression:
        raise ValueError(f"{case.name}: the hit benchmark maximizes a regression label")
    y = case.y[case.pool]
    y_audit = case.y[case.audit]
    rows = []
    for strategy in strategies:
        if not case.has_tmd and _parse(strategy)[0] in ("tmd", "tmd-mix", "strat"):
            continue  # a first round on TMD, and the set was prepared without its matrix
        for trial in range(int(random_seeds) if strategy == RANDOM else int(trials)):
            if (strategy, trial) in skip:
                continue
            for b, picks in zip(BUDGETS, hit_picks(case, strategy, trial)):
                rest = np.setdiff1d(np.arange(case.P), picks)
                pred_rest = svr_on_kernel(case.kernel, picks, y[picks], None, rest)
                pred_audit = svr_on_kernel(case.kernel, picks, y[picks], None, rest,
                                           K_predict=minmax_kernel(case.counts[case.audit],
                                                                   case.counts[case.pool[picks]]))
                t1, s1 = top_share(y, picks, 0.01)
                t5, s5 = top_share(y, picks, 0.05)
                rows.append({"dataset": case.name, "family": family, "strategy": strategy, "trial": trial,
                             "budget": b, "k": int(picks.size), "n_pool": case.P, "n_audit": int(case.audit.size),
                             "top1": t1, "top5": t5, "score1": s1, "score5": s5,
                             "rmse_audit": float(np.sqrt(np.mean((pred_audit - y_audit) ** 2))),
                             "rmse_rest": float(np.sqrt(np.mean((pred_rest - y[rest]) ** 2))),
                             "epsilon": union_epsilon(case.D, picks) if case.has_tmd else float("nan")})
    return rows


def _mean(v) -> float:
    v = [float(x) for x in v if not math.isnan(float(x))]
    return sum(v) / len(v) if v else float("nan")


def summary_lines(rows: list[dict], family: str, budget: float = 0.10) -> list[str]:
    """A Markdown summary of one family at ``budget``: per strategy, the mean share of the top 5 % / 1 % found and of
    the top 5 %'s score, the ratio to Random's share of the top 5 %, the pools at ≥ 4 × Random, the pools above the
    plain greedy baseline, and the audit-to-rest RMSE ratio (the pool estimate's honesty)."""
    rs = [r for r in rows if r["family"] == family and abs(float(r["budget"]) - budget) < 1e-9]
    sets = sorted({r["dataset"] for r in rs})
    per = {}  # (strategy, set) -> mean over trials
    for r in rs:
        per.setdefault((r["strategy"], r["dataset"]), []).append(r)
    strategies = [s for s in STRATEGIES if any((s, d) in per for d in sets)]
    strategies += sorted({s for s, _ in per} - set(strategies))

    def m(s, d, col):
        return _mean(r[col] for r in per.get((s, d), []))

    lines = [f"## {family} ({len(sets)} pools, {budget:.0%} of the pool labelled: 5 % then 5 % more)", "",
             "| strategy | top 5 % found | × Random | pools ≥ 4 × Random | top 1 % found | top-5 % score | "
             "pools > greedy | RMSE audit / rest |", "|---|---|---|---|---|---|---|---|"]
    for s in strategies:
        done = [d for d in sets if (s, d) in per and (RANDOM, d) in per]
        if not done:
            continue
        top5 = [m(s, d, "top5") for d in done]
        rnd = [m(RANDOM, d, "top5") for d in done]
        ratio = _mean(a / r for a, r in zip(top5, rnd) if r > 0)
        four = sum(a >= 4 * r for a, r in zip(top5, rnd))
        g = [d for d in done if (GREEDY, d) in per]
        above = sum(m(s, d, "top5") > m(GREEDY, d, "top5") + 1e-12 for d in g)
        honest = _mean(m(s, d, "rmse_audit") / m(s, d, "rmse_rest") for d in done)
        lines.append(f"| `{s}` | {_mean(top5):.3f} | {ratio:.2f} | {four}/{len(done)} | "
                     f"{_mean(m(s, d, 'top1') for d in done):.3f} | {_mean(m(s, d, 'score5') for d in done):.3f} | "
                     f"{'–' if s == GREEDY else f'{above}/{len(g)}'} | {honest:.2f} |")
    return lines


def _ordered(strategies) -> list[str]:
    return [s for s in STRATEGIES if s in strategies] + sorted(set(strategies) - set(STRATEGIES))


def curve_lines(rows: list[dict], family: str, col: str = "top5") -> list[str]:
    r"""The curve of top-k found against labels spent (issue 68) of one family, as a Markdown table: per strategy and
    round (budget :math:`b`, the share :math:`k/|P|` of the pool picked so far), the mean over pools (each the mean
    of its trials) of the share of the pool's true top 5 % found (``col``), from 0 before any label.  A strategy's
    row covers the pools that have every round of it (their number shown).  Labels spent are given both as the share
    of the pool picked and, with the audit sample measured on top, as :math:`(k + |A|)/(|P| + |A|)` of the set
    (the means over the family's rows); Random's expected share found is the share picked.

    Parameters
    ----------
    rows : list of dict
        :data:`COLUMNS` rows (numbers as read from the CSVs or as written).
    family : str
    col : str
        ``top5`` or ``top1``.

    Returns
    -------
    list of str
    """
    rs = [r for r in rows if r["family"] == family]
    if not rs:
        return []
    budgets = sorted({round(float(r["budget"]), 9) for r in rs})
    per, spent = {}, {b: ([], []) for b in budgets}
    for r in rs:
        b, k, n, a = round(float(r["budget"]), 9), int(r["k"]), int(r["n_pool"]), int(r["n_audit"])
        per.setdefault((r["strategy"], r["dataset"], b), []).append(float(r[col]))
        spent[b][0].append(k / n)
        spent[b][1].append((k + a) / (n + a))
    what = {"top5": "top 5 %", "top1": "top 1 %"}.get(col, col)
    head = " | ".join(f"{100 * _mean(spent[b][0]):.1f} % ({100 * _mean(spent[b][1]):.1f} %)" for b in budgets)
    lines = [f"### {family}: share of the {what} found against labels spent", "",
             "Labels spent: share of the pool picked (in brackets: with the audit sample, of the whole set). "
             "Random's expected share found is the share picked.", "",
             f"| strategy | pools | 0 % | {head} |", "|---|---|---|" + "---|" * len(budgets)]
    for s in _ordered({r["strategy"] for r in rs}):
        pools = sorted({d for (t, d, _) in per if t == s})
        pools = [d for d in pools if all((s, d, b) in per for b in budgets)]
        if not pools:
            continue
        cells = " | ".join(f"{_mean(_mean(per[(s, d, b)]) for d in pools):.3f}" for b in budgets)
        lines.append(f"| `{s}` | {len(pools)} | 0 | {cells} |")
    return lines
