r"""The pool benchmark: pickers compared in the users' setting -- the whole set is the pool.

In production the pool is everything, and the model is for the molecules that were not picked.  So each set is used
whole as an unlabelled pool of :math:`N` molecules:

1. an **audit sample** :math:`A` is drawn as in production (:func:`tmdlib.select.audit.audit_members` on the graph
   ids, ``labels.audit: auto``: 5 % of the pool, 50 to 200); it is never picked and never trained on;
2. a **strategy** picks :math:`S \subset P = [N] \setminus A`, :math:`|S| = \lceil b\,|P| \rceil` for a budget
   :math:`b \in \{5, 10, 20\}\,\%` -- in one shot, or in **rounds** (5 %, then 10 %, then 20 % in total, each round
   seeing the labels of the earlier rounds' picks);
3. one **model** (the registered ``svm`` -- the Tanimoto SVR, computed here on the pool's precomputed MinMax kernel,
   the same estimator -- or the benchmark's 100-tree ``rf``) is trained on :math:`y_S` only (unit weights, or τ for the
   TMD coreset's weighted rows);
4. it is scored on :math:`P \setminus S`, every pool molecule that was neither picked nor in the audit sample: RMSE
   (regression) or ROC-AUC (binary).

Random is averaged over ``random_seeds`` seeds; every other seeded strategy runs ``trials`` times.  Each row also
carries the exact TMD certificate of the labelled set, :math:`\varepsilon = \frac1{|P|}\sum_{i\in P}\min_{j\in S}
D_{ij}` (:func:`tmdlib.select.rounds.union_epsilon`), whatever picked it.

Strategies (:data:`FIRST`, :data:`NEXT`): the label-free first rounds -- ``random``, ``tmd`` (the paper's k-medoids),
``fp-kmedoids``, ``maxmin`` (RDKit), ``tmd-mix`` (half uniform, half k-medoids around it) and ``tmd-trim`` (k-medoids
whose medoids avoid the most isolated tenth) -- and the rounds ``<first>><next>/<difficulty>``: round one by a first
strategy, later rounds by :func:`tmdlib.select.rounds.next_batch` with a difficulty from the labels of the picks so
far (never the audit sample's: it is the estimate's test set):

* ``knn``: the spread of the labels of the 5 nearest labelled molecules (crepes' ``DifficultyEstimator``, on ECFP4
  counts);
* ``forest``: the spread of a 100-tree random forest's trees (scikit-learn) trained on the labels so far.
"""
from __future__ import annotations

import functools
import math
import time

import numpy as np

__all__ = ["load_pool", "PoolCase", "FIRST", "NEXT", "STRATEGIES", "BUDGETS", "COLUMNS", "KEY", "row_key",
           "run_set", "notation", "read_rows", "append_rows", "fit_predict", "difficulty", "svr_on_kernel",
           "run_control", "CONTROL_COLUMNS", "control_round"]

#: The task name of the regression sets (the results' ``task`` column).
REGRESSION = "regression"
#: Total budgets (share of the pool less the audit sample); rounds reach them in this order.
BUDGETS = (0.05, 0.10, 0.20)
#: Further budgets for "labels to a target" (``run_set(budgets=BUDGETS + LONG)``): the curve past 20 %.
LONG = (0.30, 0.40, 0.60)
#: Label-free first rounds.
FIRST = ("random", "tmd", "fp-kmedoids", "maxmin", "tmd-mix")
#: Rounds: ``<first>><next>/<difficulty>`` (``tmd``, ``random`` take no difficulty); ``tmd>tmd`` is what production
#: did before (the coreset grown round after round).
NEXT = ("tmd>tmd", "tmd>badge/forest", "tmd-mix>badge/forest", "tmd-mix>tmd-unc/forest")
#: Measured on the first sets only, then dropped from the grid (their rows stay in the results): the first 5 sets,
#: then the next 4 to 9 (not better than the ones kept on those sets, or a set lost by more than one Random sd).
EARLY = ("tmd-trim", "tmd-mix>random", "tmd-mix>unc-cover/knn", "tmd-mix>kcenter-unc/knn", "tmd-mix>badge/knn",
         "tmd-mix>tmd-unc/knn", "random>unc-cover/knn", "tmd-mix>tmd", "tmd-mix>unc-cover/forest",
         "tmd>unc-cover/forest", "tmd>tmd-unc/knn")
STRATEGIES = FIRST + NEXT
KEY = ("dataset", "model", "strategy", "mode", "budget", "trial", "weighted")
COLUMNS = KEY + ("task", "k", "n_pool", "n_audit", "n_eval", "metric", "value", "epsilon", "seconds")
#: The benchmark's random forest (the molecules benchmark's: 100 trees).
RF_TREES = 100


def load_pool(name: str, raw_root: str, csv_path=None) -> dict:
    r"""A built-in molecule set used whole as an unlabelled pool, or a cut pool's CSV (``smiles``, ``y``:
    :mod:`tmdlib.experiment.families`) when ``csv_path`` is given.

    Returns
    -------
    dict
        ``ds`` (GraphDataset of the ``n`` molecules with a label), ``smiles`` (list of str, length n), ``y``
        (ndarray of float64, shape (n,)), ``graph_ids`` (int64, shape (n,)), ``task`` (``"regression"`` or
        ``"binary"``).
    """
    from ..datasets import load_builtin, to_dataset
    from ..datasets._task import table_task

    if csv_path is None:
        table = load_builtin(name, raw_root)
    else:
        from ..datasets._smiles import read_smiles_csv

        table = read_smiles_csv(csv_path, "smiles", "y", task="regression", name=name)
    task = table_task(table)
    if task.control_error is None:  # the control verdict's error: one regression target or one binary label
        raise ValueError(f"{name}: the pool benchmark takes one regression or binary target, not {task.describe()}")
    ds = to_dataset(table)
    y = np.asarray(ds.y, dtype=np.float64).reshape(len(ds))
    keep = np.flatnonzero(~np.isnan(y))
    smiles = table.column("smiles").to_pylist()
    ids = table.column("graph_id").to_numpy()
    return {"ds": ds.take(keep), "smiles": [smiles[i] for i in keep], "y": y[keep],
            "graph_ids": np.asarray(ids, dtype=np.int64)[keep], "task": task.type}


class PoolCase:
    r"""One set as a pool: its arrays, the audit sample, and the caches every row shares.

    Parameters
    ----------
    name : str
    y : ndarray, shape (N,)
    counts : ndarray, shape (N, d)
        ECFP4 counts.
    tmd : ndarray, shape (N, N), or None
        Exact TMD matrix; None: only the fingerprint strategies run, their ε unknown (NaN).
    smiles : list of str
    graph_ids : ndarray of int64, shape (N,)
    task : {"regression", "binary"}
    """

    def __init__(self, name, y, counts, tmd, smiles, graph_ids, task):
        from ..select.audit import audit_members, default_audit_size

        from ..datasets._task import TaskSpec

        self.name, self.task = name, str(task)
        self.spec = TaskSpec(self.task)
        self.regression = bool(self.spec.is_regression)
        self.y = np.asarray(y, dtype=np.float64)
        self.counts, self.smiles = counts, list(smiles)
        n = len(self.y)
        self.audit = audit_members(graph_ids, default_audit_size(n), seed=0)
        self.pool = np.setdiff1d(np.arange(n), self.audit)  # positions into the set
        self._tmd = tmd
        self._kernel = None
        self._tanimoto = None

    @property
    def P(self) -> int:
        return int(self.pool.size)

    def k(self, budget: float) -> int:
        return int(math.ceil(float(budget) * self.P))

    @functools.cached_property
    def features(self) -> np.ndarray:
        """The pool's ECFP4 counts as float64, shape (P, d): what every round's difficulty reads, converted once."""
        return self.counts[self.pool].astype(np.float64)

    @functools.cached_property
    def D(self) -> np.ndarray:
        """The exact TMD matrix of the pool, shape (P, P) (a set prepared without it: a clear error)."""
        if self._tmd is None:
            raise ValueError(f"{self.name}: no TMD matrix prepared (prepare without --no-tmd)")
        return np.ascontiguousarray(np.asarray(self._tmd, dtype=np.float64)[np.ix_(self.pool, self.pool)])

    @property
    def has_tmd(self) -> bool:
        return self._tmd is not None

    @functools.cached_property
    def D_fp(self) -> np.ndarray:
        """The fingerprint distance of the pool, :math:`1 - K` (MinMax on ECFP4 counts: the SVR's own kernel),
        shape (P, P): what the ``fpk`` first round and the ``:fp`` later rounds cluster on."""
        return np.ascontiguousarray(1.0 - self.kernel)

    @property
    def kernel(self) -> np.ndarray:
        """MinMax kernel of the pool (the SVR's), shape (P, P), computed once (read from :attr:`set_kernel` when that
        was computed first)."""
        if self._kernel is None:
            from ..chem.models import minmax_kernel

            self._kernel = (minmax_kernel(self.counts[self.pool]) if "set_kernel" not in self.__dict__ else
                            np.ascontiguousarray(self.set_kernel[np.ix_(self.pool, self.pool)]))
        return self._kernel

    @functools.cached_property
    def set_kernel(self) -> np.ndarray:
        """MinMax kernel of the whole set (pool and audit sample), shape (N, N): the Random control's cross-fitting
        trains on audit members too."""
        from ..chem.models import minmax_kernel

        return minmax_kernel(self.counts)


def svr_on_kernel(K: np.ndarray, train: np.ndarray, y: np.ndarray, w, predict: np.ndarray, *,
                  K_predict: np.ndarray | None = None, **options) -> np.ndarray:
    r"""The registered ``svm`` (:class:`tmdlib.chem.models.TanimotoSVR`, its defaults) fitted and applied on rows of a
    precomputed MinMax kernel ``K``: same targets' standardisation, same libsvm problem, same predictions.

    Parameters
    ----------
    K : ndarray, shape (P, P)
    train : ndarray of int, shape (m,)
    y : ndarray, shape (m,)
    w : ndarray, shape (m,), or None
    predict : ndarray of int
        Rows of ``K`` to predict (ignored with ``K_predict``).
    K_predict : ndarray, shape (q, m), optional
        The kernel of other molecules against the training rows (the audit sample's).
    """
    from sklearn.svm import SVR

    from ..chem.models import TanimotoSVR

    ref = TanimotoSVR(**options)
    ww = np.ones(len(y)) if w is None else np.asarray(w, dtype=np.float64)
    mean = float(np.average(y, weights=ww))
    scale = float(np.sqrt(np.average((y - mean) ** 2, weights=ww))) or 1.0
    svr = SVR(kernel="precomputed", C=float(ref.C), epsilon=float(ref.epsilon), tol=float(ref.tol),
              cache_size=float(ref.cache_size))
    svr.fit(K[np.ix_(train, train)], (y - mean) / scale, sample_weight=w)
    return mean + scale * svr.predict(K[np.ix_(predict, train)] if K_predict is None else K_predict)


def fit_predict(case: PoolCase, model: str, train: np.ndarray, w, predict: np.ndarray, seed: int, *,
                X_predict: np.ndarray | None = None) -> np.ndarray:
    """Scores of ``model`` trained on pool positions ``train`` (weights ``w`` or None) for pool positions ``predict``,
    or for the molecules of counts ``X_predict`` (the audit sample's) when given: predictions (regression) or the
    positive class's probability (binary)."""
    y = case.y[case.pool[train]]
    X = case.counts[case.pool]
    if model == "svm":
        if not case.regression:
            raise ValueError("the pool benchmark's svm is the regression SVR")
        from ..chem.models import minmax_kernel

        return svr_on_kernel(case.kernel, train, y, w, predict,
                             K_predict=None if X_predict is None else minmax_kernel(X_predict, X[train]))
    if model == "rf":
        return _forest(case, X[train], y, w, X[predict] if X_predict is None else X_predict, seed)
    raise ValueError(f"unknown model {model!r}: svm, rf")


def _forest(case: PoolCase, X, y, w, Xp, seed: int) -> np.ndarray:
    """The benchmark's forest fitted on ``X, y`` (weights ``w`` or None): its predictions on ``Xp``, or the positive
    class's probability."""
    from ..chem._forest import fit_forest

    if case.regression:
        return fit_forest(X, y, sample_weight=w, seed=seed, n_estimators=RF_TREES).predict(Xp)
    if np.unique(y).size < 2:  # one class picked: a constant score
        return np.full(len(Xp), float(y[0]))
    f = fit_forest(X, y.astype(int), sample_weight=w, task="classification", seed=seed, n_estimators=RF_TREES)
    return f.predict_proba(Xp)[:, list(f.classes_).index(1)]


def score(case: PoolCase, pred: np.ndarray, at: np.ndarray) -> tuple[str, float]:
    y = case.y[case.pool[at]]
    if case.regression:
        return "rmse", float(np.sqrt(np.mean((pred - y) ** 2)))
    from sklearn.metrics import roc_auc_score

    return "roc_auc", float(roc_auc_score(y, pred)) if np.unique(y).size == 2 else float("nan")


def difficulty(case: PoolCase, labelled: np.ndarray, how: str, seed: int) -> np.ndarray:
    r"""A difficulty per pool member from the labels of ``labelled`` (pool positions) alone.

    ``how``: a name of :data:`tmdlib.select.rounds.DIFFICULTIES` (the product's table and rule,
    :func:`tmdlib.select.rounds.estimate_difficulty`), on the pool's ECFP4 counts; the forest with
    :data:`RF_TREES` trees.

    Returns
    -------
    ndarray, shape (P,)
    """
    X = case.features
    lab = np.asarray(labelled, dtype=np.int64)
    # the audit sample's labels stay out: it is the estimate's test set, and picks steered by it would flatter it
    train_x, train_y = X[lab], case.y[case.pool[lab]]
    from ..select.rounds import estimate_difficulty

    return estimate_difficulty(how, train_x, train_y, X, classes=not case.regression, trees=RF_TREES, seed=seed)


def first_round(case: PoolCase, strategy: str, k: int, seed: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Pool positions picked by a label-free strategy, and its τ (None without clusters)."""
    from ..select import rounds
    from ..select._coreset import kmedoids_coreset

    if strategy == "random":
        rng = np.random.default_rng([int(seed), 0x9001])
        return np.sort(rng.choice(case.P, size=k, replace=False)), None
    if strategy == "tmd":
        res = kmedoids_coreset(case.D, k, seed=seed, restarts=5)
        return res.medoids, res.tau.astype(np.float64)
    if strategy in rounds.FIRST_PICKERS:  # the product's first rounds, on TMD or the fingerprint distance
        kind, space = rounds.FIRST_PICKERS[strategy]
        D = case.D_fp if space == "fp" else case.D
        return rounds.first_picks(D, k, kind, seed, restarts=5 if kind == "medoids" else 3), None
    if strategy == "tmd-trim":
        return rounds.trimmed_medoids(case.D, k, 0.1, seed), None
    if strategy in ("fp-kmedoids", "maxmin"):
        from ..chem._pickers import pick

        res = pick(strategy, [case.smiles[i] for i in case.pool], k, seed=seed)
        return np.asarray(res.positions, dtype=np.int64), None
    raise ValueError(f"unknown first-round strategy {strategy!r}")


def row_key(row: dict) -> tuple:
    w = row["weighted"]
    w = w if isinstance(w, bool) else str(w).strip().lower() in ("true", "1")
    return (str(row["dataset"]), str(row["model"]), str(row["strategy"]), str(row["mode"]),
            round(float(row["budget"]), 6), int(row["trial"]), bool(w))


def _seeds(strategy: str, random_seeds: int, trials: int) -> range:
    return range(int(random_seeds) if strategy == "random" else int(trials))


def run_set(data: dict, models, strategies, *, random_seeds: int = 10, trials: int = 3, skip=frozenset(),
            budgets=BUDGETS):
    """Rows of one set, yielded per (strategy, trial) as soon as they are done; rows whose :func:`row_key` is in
    ``skip`` are not recomputed (their picks may be, when a later row of the same run needs them)."""
    case = PoolCase(data["name"], data["y"], data["counts"], data["tmd"], data["smiles"], data["graph_ids"],
                    data["task"])
    models = [m for m in models if not (m == "svm" and not case.regression)]
    base = {"dataset": case.name, "task": case.task, "n_pool": case.P, "n_audit": int(case.audit.size)}

    def row(model, strategy, mode, budget, trial, weighted, picks, w, seconds):
        t0 = time.process_time()
        rest = np.setdiff1d(np.arange(case.P), picks)
        metric, value = score(case, fit_predict(case, model, picks, w, rest, trial), rest)
        from ..select.rounds import union_epsilon

        return {**base, "model": model, "strategy": strategy, "mode": mode, "budget": float(budget),
                "trial": int(trial), "weighted": bool(weighted), "k": int(picks.size), "n_eval": int(rest.size),
                "metric": metric, "value": value,
                "epsilon": union_epsilon(case.D, picks) if case.has_tmd else float("nan"),
                "seconds": round(seconds + time.process_time() - t0, 3)}

    def todo(strategy, mode, budget, trial, weighted=False):
        return [m for m in models if (case.name, m, strategy, mode, round(float(budget), 6), int(trial),
                                      bool(weighted)) not in skip]

    for strategy in strategies:
        if strategy == FULL:
            out = [full_row(case, m, base) for m in todo(FULL, "cv", FULL_BUDGET, 0)]
            if out:
                yield out
            continue
        for trial in _seeds(strategy, random_seeds, trials):
            out = []
            if ">" not in strategy:
                for b in budgets:
                    need = todo(strategy, "oneshot", b, trial)
                    need_w = todo(strategy, "oneshot", b, trial, True) if strategy == "tmd" else []
                    if not need and not need_w:
                        continue
                    t0 = time.process_time()
                    picks, tau = first_round(case, strategy, case.k(b), trial)
                    sec = time.process_time() - t0
                    out += [row(m, strategy, "oneshot", b, trial, False, picks, None, sec) for m in need]
                    out += [row(m, strategy, "oneshot", b, trial, True, picks, tau, sec) for m in need_w]
            else:
                out += _rounds(case, strategy, trial, todo, row, budgets)
            if out:
                yield out


#: The full-data reference: every pool member predicted by a model trained on the other folds (``FOLDS``-fold
#: cross-fitting over the pool less the audit sample); its row has mode ``cv`` and budget ``FULL_BUDGET``.
FULL = "full"
FOLDS = 5
FULL_BUDGET = 1.0 - 1.0 / FOLDS


def full_row(case: PoolCase, model: str, base: dict, seed: int = 0) -> dict:
    r"""The full-data error of ``model`` on a pool: :data:`FOLDS`-fold cross-fitting over the pool :math:`P` (each
    member predicted by the model trained on the other folds, :math:`(1 - 1/F)\,|P|` labels), scored over all of
    :math:`P` -- what labelling nearly everything would give, the reference of "labels to a target"."""
    t0 = time.process_time()
    rng = np.random.default_rng([int(seed), 0xF01D])
    fold = rng.permutation(case.P) % FOLDS
    pred = np.zeros(case.P)
    for f in range(FOLDS):
        test, train = np.flatnonzero(fold == f), np.flatnonzero(fold != f)
        pred[test] = fit_predict(case, model, train, None, test, seed)
    metric, value = score(case, pred, np.arange(case.P))
    return {**base, "model": model, "strategy": FULL, "mode": "cv", "budget": FULL_BUDGET, "trial": 0,
            "weighted": False, "k": int(round(FULL_BUDGET * case.P)), "n_eval": case.P, "metric": metric,
            "value": value, "epsilon": float("nan"), "seconds": round(time.process_time() - t0, 3)}


def notation() -> str:
    """The benchmark's ``--strategies`` help, read from the product's tables
    (:data:`tmdlib.select.rounds.FIRST_PICKERS`, :data:`~tmdlib.select.rounds.NEXT_STRATEGIES`,
    :data:`~tmdlib.select.rounds.DIFFICULTIES`)."""
    from ..select.rounds import DIFFICULTIES, FIRST_PICKERS, NEXT_STRATEGIES

    return (f"a first round (random, tmd-trim, fp-kmedoids, maxmin, {', '.join(FIRST_PICKERS)}) or rounds "
            f"<first>><next>[:fp]/<difficulty>: next {', '.join(NEXT_STRATEGIES)}; difficulty "
            f"{', '.join(DIFFICULTIES)} (default: STRATEGIES)")


def _parse_rounds(case: PoolCase, strategy: str):
    """``<first>><next>[:fp]/<difficulty>`` → ``(first, next, difficulty, D)``: ``D`` the distance the later rounds
    pick on (``:fp``: the fingerprint distance, else TMD)."""
    first, nxt = strategy.split(">")
    nxt, _, how = nxt.partition("/")
    nxt, _, metric = nxt.partition(":")
    return first, nxt, how, (case.D_fp if metric == "fp" else case.D)


def _rounds(case: PoolCase, strategy: str, trial: int, todo, row, budgets=BUDGETS) -> list[dict]:
    from ..select.rounds import next_batch

    first, nxt, how, D = _parse_rounds(case, strategy)
    if not any(todo(strategy, "rounds", b, trial) for b in budgets):
        return []
    out = []
    t0 = time.process_time()
    picks, _ = first_round(case, first, case.k(budgets[0]), trial)
    sec = time.process_time() - t0
    out += [row(m, strategy, "rounds", budgets[0], trial, False, picks, None, sec)
            for m in todo(strategy, "rounds", budgets[0], trial)]
    for b in budgets[1:]:
        t0 = time.process_time()
        u = difficulty(case, picks, how, trial) if how else None
        new = next_batch(D, picks, case.k(b) - picks.size, u, nxt, seed=trial, restarts=3)
        picks = np.sort(np.concatenate([picks, new]))
        sec = time.process_time() - t0
        out += [row(m, strategy, "rounds", b, trial, False, picks, None, sec) for m in todo(strategy, "rounds", b, trial)]
    return out


def _fmt(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    return str(v)


def append_rows(path, rows: list[dict]) -> None:
    """Append rows to a results CSV (header written with the first rows); flushed and synced per call."""
    import os
    from pathlib import Path

    p = Path(path)
    new = not p.is_file() or p.stat().st_size == 0
    with open(p, "a", encoding="utf-8") as fh:
        if new:
            fh.write(",".join(COLUMNS) + "\n")
        for r in rows:
            fh.write(",".join(_fmt(r.get(c)) for c in COLUMNS) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_rows(path) -> list[dict]:
    """Rows of a pool-benchmark CSV ([] when missing); a bad line is an InputError naming it."""
    from ._results import read_csv_rows

    return read_csv_rows(str(path), "a pool benchmark results file", KEY + ("value",), columns=COLUMNS,
                         floats=("budget", "value", "epsilon", "seconds"),
                         ints=("trial", "k", "n_pool", "n_audit", "n_eval"), bools=("weighted",))


#: Columns of ``control.csv``: the Random control's verdict in round two (5 % → 10 %), one row per (set, trial).
#: ``verdict`` … ``more_needed``: the rule (:func:`tmdlib.models.evaluate.cross_fit_arms`); ``old_*``: the rule before
#: issue 67 (one model per arm of the control arm's size, compared on the audit sample only), kept for comparison;
#: ``round_ratio``: the round's own truth (the strategy's picks over as many uniform ones, on the rest of the pool).
CONTROL_COLUMNS = ("dataset", "model", "strategy", "trial", "share", "n_control", "n_audit", "verdict", "difference",
                   "low", "high", "metric", "value", "n", "folds", "repeats", "n_arm", "labels_needed", "more_needed",
                   "old_verdict", "old_difference", "old_low", "old_high", "round_ratio")
#: Uniform draws the round's truth (``round_ratio``) averages over.
ROUND_TRUTH_DRAWS = 10


def control_round(case: PoolCase, strategy: str, share: float, trial: int):
    """Round two of ``strategy`` with a Random control arm, as production draws it: round one by the first picker at
    5 %, then ``share`` of round two's new picks drawn uniformly (the arm), the rest by the strategy with the arm kept.

    Returns
    -------
    base, arm, strat : ndarray of int
        Pool positions: round one's picks, the control arm, the strategy's new picks.
    """
    from ..select.rounds import next_batch

    first, nxt, how, D = _parse_rounds(case, strategy)
    picks, _ = first_round(case, first, case.k(BUDGETS[0]), trial)
    new = case.k(BUDGETS[1]) - picks.size
    m = int(math.ceil(share * new))
    rng = np.random.default_rng([trial, 0xC0A7])
    arm = np.sort(rng.choice(np.setdiff1d(np.arange(case.P), picks), size=m, replace=False))
    u = difficulty(case, picks, how, trial) if how else None
    strat = next_batch(D, np.concatenate([picks, arm]), new - m, u, nxt, seed=trial, restarts=3)
    return picks, arm, np.sort(np.asarray(strat, dtype=np.int64))


def _set_scorer(case: PoolCase, model: str, seed: int):
    """``fit_predict(train, predict)`` on positions in the whole set (pool and audit sample): the benchmark's model
    trained on ``train``'s labels, its scores on ``predict`` (what :func:`~tmdlib.models.evaluate.cross_fit_arms`
    calls)."""
    def fit_predict(train, predict):
        train, predict = np.asarray(train, dtype=np.int64), np.asarray(predict, dtype=np.int64)
        if model == "svm":
            return svr_on_kernel(case.set_kernel, train, case.y[train], None, predict)
        return _forest(case, case.counts[train], case.y[train], None, case.counts[predict], seed)

    return fit_predict


def _round_truth(case: PoolCase, model: str, base, taken, strat, trial: int) -> float:
    """The round's own truth: the error of a model on round one's picks plus the strategy's, over the mean error of
    one on round one's plus as many uniform picks (``ROUND_TRUTH_DRAWS`` draws among the pool not yet labelled), each
    scored on the pool members neither model saw (below 1: the strategy's picks did better this round)."""
    rng = np.random.default_rng([trial, 0x7A0])
    free = np.setdiff1d(np.arange(case.P), taken)
    s_pred = fit_predict(case, model, np.concatenate([base, strat]), None, free, trial)
    err = []
    for _ in range(ROUND_TRUTH_DRAWS):
        uni = np.sort(rng.choice(free, size=strat.size, replace=False))
        keep = ~np.isin(free, uni)
        r_pred = fit_predict(case, model, np.concatenate([base, uni]), None, free[keep], trial)
        err.append((score(case, s_pred[keep], free[keep])[1], score(case, r_pred, free[keep])[1]))
    e = np.asarray(err)
    if not case.regression:
        e = 1.0 - e  # ROC-AUC → error
    return float(e[:, 0].mean() / e[:, 1].mean())


def run_control(data: dict, strategy: str, model: str = "svm", share: float = 0.2, trials: int = 3,
                skip=frozenset()) -> list[dict]:
    r"""The Random control of production (``select.control``) replayed on a pool: how often is its verdict right?

    Round two with a control arm as production draws it (:func:`control_round`), then **the production rule**,
    :func:`tmdlib.models.evaluate.cross_fit_arms`, with the benchmark's model on the set (the audit sample and the
    control arm are the uniform labels it cross-fits over).  Beside it, for comparison: the rule before issue 67
    (``old_*``: one model per arm of the control arm's size, the strategy's picks subsampled to it, compared on the
    audit sample by :func:`~tmdlib.models.evaluate.control_verdict`) and the round's own truth (``round_ratio``,
    :func:`_round_truth`).  ``value`` is the error of the round's full model (every label) on the rest of the pool:
    against the strategy's rounds rows without a control it says what the control costs.  The verdict's truth is read
    from the benchmark's rows (the strategy's ratio to Random at 10 %) by :mod:`tmdlib.reporting.pool`.
    """
    from ..models.evaluate import control_verdict, cross_fit_arms

    case = PoolCase(data["name"], data["y"], data["counts"], data["tmd"], data["smiles"], data["graph_ids"],
                    data["task"])
    if model == "svm" and not case.regression:
        return []
    out = []
    audit_x = case.counts[case.audit]
    for trial in range(int(trials)):
        if (case.name, model, strategy, trial) in skip:
            continue
        base, arm, strat = control_round(case, strategy, share, trial)
        pos = case.pool
        v = cross_fit_arms(_set_scorer(case, model, trial), lambda ids: case.y[ids], pos[base], pos[arm], pos[strat],
                           case.audit, case.spec, seed=trial)
        sub = np.sort(np.random.default_rng([trial, 0xA53]).choice(strat, size=arm.size, replace=False))
        old = [fit_predict(case, model, np.concatenate([base, a]), None, base, trial, X_predict=audit_x)
               for a in (arm, sub)]
        o = control_verdict(old[0], old[1], case.y[case.audit], case.spec, seed=trial)
        allp = np.sort(np.concatenate([base, arm, strat]))
        rest = np.setdiff1d(np.arange(case.P), allp)
        metric, value = score(case, fit_predict(case, model, allp, None, rest, trial), rest)
        out.append({"dataset": case.name, "model": model, "strategy": strategy, "trial": trial, "share": share,
                    "n_control": int(arm.size), "n_audit": int(case.audit.size), "metric": metric, "value": value,
                    **{k: v.get(k) for k in ("verdict", "difference", "low", "high", "n", "folds", "repeats",
                                             "n_arm", "labels_needed", "more_needed")},
                    **{f"old_{k}": o[k] for k in ("verdict", "difference", "low", "high")},
                    "round_ratio": _round_truth(case, model, base, allp, strat, trial)})
    return out
