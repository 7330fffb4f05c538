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
           "curve_lines", "MOSES_ROUNDS", "MOSES_TOPS", "MOSES_HUNT", "MOSES_COLUMNS", "moses_features",
           "moses_audit", "moses_hits", "GREEDY", "RANDOM"]

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


# --------------------------------------------------------------------------------------------------------------------
# MOSES at 1 % in three rounds (issue 68's second goal)

#: Cumulative shares of the pool labelled after each of the three MOSES rounds (1 % in all, a third per round).
MOSES_ROUNDS = (1 / 300, 2 / 300, 0.01)
#: The true top shares whose recovery the MOSES run reports (MolPAL's top-k as a share of the pool).
MOSES_TOPS = (0.001, 0.01)
#: The MOSES run's default hunting strategy (a uniform round, then greedy on ridge regression over ECFP4 counts).
MOSES_HUNT = "random>greedy/ridge"
MOSES_COLUMNS = ("dataset", "property", "strategy", "surrogate", "trial", "round", "budget", "k", "n_pool", "n_audit",
                 "top01", "top1", "score01", "score1", "rmse_audit", "rmse_rest", "medae_audit", "medae_rest", "seconds",
                 "peak_mib")


def moses_features(smiles, props=("logp",), chunk: int = 50_000):
    r"""ECFP4 counts (RDKit Morgan, radius 2, 2,048 folded positions, as :mod:`tmdlib.chem._fingerprints`) of a large
    list of SMILES as a sparse matrix, and RDKit-**computed** properties (:data:`tmdlib.experiment.families.PROPERTIES`)
    that play the lab -- chunk by chunk, so no dense matrix is ever built (a MOSES molecule has ~39 non-zero counts:
    1.58 M molecules take ~0.3 GB as CSR with ``uint8`` counts, not 3.2 GB dense).

    Parameters
    ----------
    smiles : sequence of str, length n
    props : sequence of str
        Names in :data:`~tmdlib.experiment.families.PROPERTIES`.
    chunk : int
        Molecules per block (the peak memory's dense-free working set).

    Returns
    -------
    X : scipy.sparse.csr_matrix of uint8, shape (n, 2048)
        Counts saturate at 255. A SMILES RDKit cannot parse has an empty row.
    values : dict of str to ndarray of float64, shape (n,)
        One array per property; NaN where RDKit cannot parse the SMILES.
    """
    import scipy.sparse as sp
    from rdkit import Chem, RDLogger
    from rdkit.Chem import QED, Crippen, rdMolDescriptors

    from ..chem._fingerprints import ECFP_BITS, _generator
    from .families import PROPERTIES

    fns = {"logp": Crippen.MolLogP, "tpsa": rdMolDescriptors.CalcTPSA, "qed": QED.qed,
           "fsp3": rdMolDescriptors.CalcFractionCSP3}
    for p in props:
        if p not in PROPERTIES:
            raise ValueError(f"unknown property {p!r}: {', '.join(PROPERTIES)}")
    RDLogger.DisableLog("rdApp.*")
    gen = _generator()
    n = len(smiles)
    values = {p: np.full(n, np.nan) for p in props}
    blocks = []
    for lo in range(0, n, int(chunk)):
        ptr, idx, cnt = [0], [], []
        for i in range(lo, min(n, lo + int(chunk))):
            m = Chem.MolFromSmiles(smiles[i])
            if m is not None:
                nz = sorted(gen.GetCountFingerprint(m).GetNonzeroElements().items())
                idx += [b for b, _ in nz]
                cnt += [min(c, 255) for _, c in nz]
                for p in props:
                    values[p][i] = float(fns[p](m))
            ptr.append(len(idx))
        blocks.append(sp.csr_matrix((np.asarray(cnt, np.uint8), np.asarray(idx, np.int32), np.asarray(ptr, np.int64)),
                                    shape=(len(ptr) - 1, ECFP_BITS)))
    X = sp.vstack(blocks, format="csr") if blocks else sp.csr_matrix((0, ECFP_BITS), dtype=np.uint8)
    return X, values


def moses_audit(n: int, share: float = 0.001, least: int = 200) -> np.ndarray:
    """The MOSES run's audit sample: :func:`tmdlib.select.audit.audit_members` on the positions as graph ids (the
    production draw: uniform, a function of the ids and seed 0), of ``max(least, ceil(share * n))`` members (at most a
    fifth of ``n``) -- production's 5 % capped at 200 would be 0.01 % of MOSES; 0.1 % keeps the audit RMSE tight
    while leaving 99.9 % of the pool to hunt in.

    Returns
    -------
    ndarray of int64, sorted positions
    """
    from ..select.audit import audit_members

    size = int(min(max(int(least), math.ceil(float(share) * int(n))), int(n) // 5))
    return audit_members(np.arange(int(n), dtype=np.int64), size, seed=0)


def _fit_predict(X, train: np.ndarray, y_train: np.ndarray, kind: str, seed: int, chunk: int = 50_000) -> np.ndarray:
    """A surrogate trained on rows ``train`` of ``X`` (CSR), its predictions for every row, ``chunk`` rows at a time.

    ``ridge``: :class:`sklearn.linear_model.RidgeCV` on the counts (α by efficient leave-one-out over 10⁻²…10³),
    predictions a sparse matrix-vector product; ``rf``: a 100-tree random forest (``max_features="sqrt"``,
    :func:`tmdlib.select.hits.surrogate`'s), predictions on dense float32 blocks of ``chunk`` rows; ``lgbm``: LightGBM
    with the registered ``lgbm``'s defaults (:mod:`tmdlib.chem.lgbm`: 500 trees of 31 leaves, learning rate 0.05, 30 %
    of the features per split, one thread), on the sparse counts."""
    y_train = np.asarray(y_train, dtype=np.float64)
    Xt = X[train].astype(np.float64)
    if kind == "ridge":
        from sklearn.linear_model import RidgeCV

        f = RidgeCV(alphas=np.logspace(-2, 3, 6)).fit(Xt, y_train)
        coef, b = np.asarray(f.coef_, dtype=np.float64), float(f.intercept_)
        return np.concatenate([X[lo:lo + chunk] @ coef + b for lo in range(0, X.shape[0], chunk)])
    if kind == "rf":
        from sklearn.ensemble import RandomForestRegressor

        f = RandomForestRegressor(n_estimators=100, max_features="sqrt", random_state=int(seed), n_jobs=1)
        f.fit(Xt.astype(np.float32), y_train)
        return np.concatenate([f.predict(X[lo:lo + chunk].toarray().astype(np.float32))
                               for lo in range(0, X.shape[0], chunk)])
    if kind == "lgbm":
        from lightgbm import LGBMRegressor

        f = LGBMRegressor(learning_rate=0.05, n_estimators=500, num_leaves=31, min_child_samples=10,
                          feature_fraction_bynode=0.3, random_state=int(seed), n_jobs=1, deterministic=True,
                          verbose=-1).fit(X[train].astype(np.float32), y_train)
        return np.concatenate([f.predict(X[lo:lo + chunk].astype(np.float32)) for lo in range(0, X.shape[0], chunk)])
    raise ValueError(f"unknown MOSES surrogate {kind!r}: ridge, rf, lgbm")


def _peak_mib() -> float:
    """This process's peak resident memory so far, MiB (Linux ``ru_maxrss``, KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def moses_hits(X, y: np.ndarray, strategy: str = MOSES_HUNT, trial: int = 0, *, rounds=MOSES_ROUNDS,
               tops=MOSES_TOPS, audit: np.ndarray | None = None, name: str = "moses", prop: str = "logp",
               surrogate_of_random: str = "ridge", picks_out: list | None = None) -> list[dict]:
    r"""One trial of the MOSES hit run (issue 68: "MOSES, 1 % labelled in three rounds: ≥ 70 % of the top 0.1 % by
    the computed property"): the rows of each round, the goal ``maximize``.

    The set (``X``, ``y``: every molecule's ECFP4 counts and its RDKit-computed property, the stand-in lab) is split
    into an **audit sample** :math:`A` (:func:`moses_audit` unless given: uniform, never picked, never trained on) and
    the pool :math:`P` (the rest, :math:`|P|` members). Round :math:`r` brings the labelled set :math:`S_r \subset P`
    to :math:`k_r = \lceil b_r |P|\rceil` members, :math:`b = (1/300, 2/300, 1/100)` (``rounds``):

    * ``random``: a uniform permutation of :math:`P`, its first :math:`k_r` (the control);
    * ``<first>><acquisition>/<surrogate>`` (default :data:`MOSES_HUNT`): round one uniform (``first`` =
      ``random``; the product's label-free first rounds need a pool-by-pool distance, out of reach at 1.58 M), then
      each later round the :math:`k_r - k_{r-1}` best of :math:`P \setminus S_{r-1}` by ``acquisition``
      (:func:`tmdlib.select.hits.acquisition`; ``greedy``, the default, is the only one that reads no spread, and
      the surrogates here give none) over the surrogate trained on :math:`S_{r-1}`'s labels.  Surrogates
      (:func:`_fit_predict`): ``ridge`` (ridge regression on the counts: trains in seconds on 16 k labels and predicts
      1.58 M by one sparse product; the registered Tanimoto SVR would hold an :math:`8k^2`-byte kernel, 2 GB at 16 k
      labels, and compare 1.58 M molecules with its support vectors each round), ``rf`` (a 100-tree forest:
      non-linear, but its prediction over 1.58 M costs minutes per round) or ``lgbm`` (the registered ``lgbm``'s
      boosted trees, which production trains above 10,000 labels).

    Each row (after round :math:`r`) carries MolPAL's metrics over :math:`P` (:func:`tmdlib.select.hits.top_share`:
    the share of the true top 0.1 % and top 1 % of :math:`P` found in :math:`S_r`, and the share of their mean score
    found), the RMSE and the median absolute error of the surrogate trained on :math:`S_r` on the audit sample and on
    the rest of the pool :math:`P \setminus S_r` (under ``random``: ``surrogate_of_random``'s; the median because a
    few hundred audit molecules can hold one far outlier of a heavy-tailed error, which alone moves their RMSE), the
    wall seconds of the trial so far (the
    features not counted) and the process's peak resident memory (:func:`_peak_mib`).

    Parameters
    ----------
    X : scipy.sparse.csr_matrix, shape (n, d)
        :func:`moses_features`' counts.
    y : ndarray, shape (n,)
        The computed property (no NaN: drop the unparsed rows first).
    strategy : str
        ``random`` or ``<first>><acquisition>/<surrogate>``.
    trial : int
        Seeds the uniform draws (and the forest).
    rounds : sequence of float
        Cumulative shares of :math:`P`, increasing.
    tops : sequence of float
        The top shares reported (the first two go to ``top01``/``score01`` and ``top1``/``score1``).
    audit : ndarray of int, optional
        Audit positions (default :func:`moses_audit` of ``n``).
    name, prop : str
        The ``dataset`` and ``property`` columns.
    surrogate_of_random : str
        The surrogate whose RMSE the ``random`` rows report.
    picks_out : list, optional
        Receives the labelled set after each round (positions into ``X``, sorted).

    Returns
    -------
    list of dict
        :data:`MOSES_COLUMNS` rows, one per round.
    """
    import time

    from ..select.hits import acquisition, hit_batch, top_share

    t0 = time.perf_counter()
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    n = y.size
    if X.shape[0] != n or not np.isfinite(y).all():
        raise ValueError("X and y differ in rows, or y has NaN (drop the molecules RDKit cannot parse)")
    A = moses_audit(n) if audit is None else np.sort(np.asarray(audit, dtype=np.int64))
    pool = np.setdiff1d(np.arange(n), A)
    P = pool.size
    yp = y[pool]
    ks = [int(math.ceil(float(b) * P)) for b in rounds]
    if strategy == RANDOM:
        order = np.random.default_rng([int(trial), 0x9001]).permutation(P)
        sur, acq = surrogate_of_random, None
    else:
        first, acq, sur, div = _parse(strategy)
        if first != RANDOM or div:
            raise ValueError(f"MOSES rounds: round one is uniform and batches plain top-k; got {strategy!r}")
        order = np.random.default_rng([int(trial), 0x9001]).permutation(P)
    picks = np.sort(order[:ks[0]])
    rows = []
    for r, k in enumerate(ks):
        if r and strategy != RANDOM:
            a = acquisition(pred[pool], np.zeros(P), acq, best=float(yp[picks].max()), seed=trial)
            picks = np.sort(np.concatenate([picks, hit_batch(a, k - picks.size, labelled=picks)]))
        elif r:
            picks = np.sort(order[:k])
        pred = _fit_predict(X, pool[picks], yp[picks], sur, trial)  # trained on S_r: this row's RMSE, next picks
        rest = np.setdiff1d(np.arange(P), picks)
        if picks_out is not None:
            picks_out.append(pool[picks])
        shares = [top_share(yp, picks, t) for t in tops]
        rows.append({"dataset": name, "property": prop, "strategy": strategy, "surrogate": sur, "trial": int(trial),
                     "round": r + 1, "budget": float(rounds[r]),
                     "k": int(picks.size), "n_pool": int(P), "n_audit": int(A.size),
                     "top01": shares[0][0], "top1": shares[1][0], "score01": shares[0][1], "score1": shares[1][1],
                     "rmse_audit": float(np.sqrt(np.mean((pred[A] - y[A]) ** 2))),
                     "rmse_rest": float(np.sqrt(np.mean((pred[pool[rest]] - yp[rest]) ** 2))),
                     "medae_audit": float(np.median(np.abs(pred[A] - y[A]))),
                     "medae_rest": float(np.median(np.abs(pred[pool[rest]] - yp[rest]))),
                     "seconds": time.perf_counter() - t0, "peak_mib": _peak_mib()})
    return rows


def moses_lines(rows: list[dict], goal: float = 0.70) -> list[str]:
    """A Markdown table per (pool, property) of MOSES hit rows (:data:`MOSES_COLUMNS`, numbers as written or as read
    from the CSVs): per strategy and round, the share of the top 0.1 % and of the top 1 % found (mean over trials,
    [min–max]), the share of the top 0.1 %'s mean score found, the surrogate's RMSE and median absolute error on the
    audit sample and on the rest of the pool, the trial's wall seconds and the peak memory; then the verdict on the goal (``goal`` of the top
    0.1 % after the last round, by the mean over the hunting trials)."""
    def f(r, c):
        return float(r[c])

    lines = []
    size = {r["dataset"]: int(r["n_pool"]) for r in rows}
    for ds, prop in sorted({(r["dataset"], r["property"]) for r in rows}, key=lambda t: (size[t[0]], t)):
        rs = [r for r in rows if r["dataset"] == ds and r["property"] == prop]
        n_pool, n_audit = int(rs[0]["n_pool"]), int(rs[0]["n_audit"])
        lines += [f"### {ds}, {prop} (RDKit-computed, maximized): pool {n_pool:,}, audit sample {n_audit:,}", "",
                  "| strategy | surrogate | trials | round | labelled (share of pool) | top 0.1 % found "
                  "| top 1 % found | top-0.1 % score | RMSE audit / rest | median abs. error audit / rest | s (trial so far) "
                  "| peak MiB |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        last = max(int(r["round"]) for r in rs)
        verdict = []
        for s in _ordered({r["strategy"] for r in rs}):
            for rnd in sorted({int(r["round"]) for r in rs if r["strategy"] == s}):
                g = [r for r in rs if r["strategy"] == s and int(r["round"]) == rnd]
                t01, t1 = [f(r, "top01") for r in g], [f(r, "top1") for r in g]
                ra, rr = _mean(f(r, "rmse_audit") for r in g), _mean(f(r, "rmse_rest") for r in g)
                ma, mr = _mean(f(r, "medae_audit") for r in g), _mean(f(r, "medae_rest") for r in g)
                k = _mean(int(r["k"]) for r in g)
                lines.append(f"| `{s}` | {g[0]['surrogate']} | {len(g)} | {rnd} | {k:,.0f} "
                             f"({100 * f(g[0], 'budget'):.2f} %) | **{_mean(t01):.3f}** "
                             f"[{min(t01):.3f}–{max(t01):.3f}] | {_mean(t1):.3f} [{min(t1):.3f}–{max(t1):.3f}] | "
                             f"{_mean(f(r, 'score01') for r in g):.3f}"
                             f" | {ra:.3f} / {rr:.3f} ({ra / rr:.2f}) | {ma:.3f} / {mr:.3f} ({ma / mr:.2f}) | "
                             f"{_mean(f(r, 'seconds') for r in g):.0f} | "
                             f"{max(f(r, 'peak_mib') for r in g):,.0f} |")
                if rnd == last and s != RANDOM:
                    verdict.append((_mean(t01), s))
        lines.append("")
        spent = 100 * max(float(r["budget"]) for r in rs)
        for v, s in verdict:
            word = "met" if v >= goal else "missed"
            lines.append(f"Goal (≥ {100 * goal:.0f} % of the top 0.1 % at {spent:.3g} % in {last} rounds), `{s}`: "
                         f"{100 * v:.1f} % — **{word}** ({100 * (v - goal):+.1f} points).")
        lines.append("")
    return lines
