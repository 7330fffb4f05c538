r"""The molecules benchmark: does labelling a TMD coreset beat what chemists pick, on real measured properties?

On each MoleculeACE set (30 ChEMBL bioactivity regression sets: the measured :math:`-\log_{10}` Ki / EC50, the
authors' train/test split, the activity-cliff flag), the **train split is the unlabelled pool**: a label-free method
picks ``fraction`` of it (:func:`tmdlib.select_graphs`: the paper's TMD coreset, Random, the paper's Feature / WL
baselines, and the chemists' pickers MaxMin, sphere exclusion, Butina, fingerprint k-medoids, one per scaffold),
only the picked molecules' labels are used to train a model, and the model is scored on the test split: RMSE,
and RMSE on the test molecules involved in an activity cliff (MoleculeACE's second metric), MAE, R², Spearman ρ.

The models are the registered ones (:func:`tmdlib.models.model_names`: ``svm``, ``rf``, ``gbm``, ``lgbm``, ``gin``,
``chemprop``, ...), trained on the same picks with :func:`model_options`:

* the molecule models (``svm``, ``rf``, ``gbm``, ``lgbm``, ``chemprop``) with the method's weights τ as sample weights
  where the method has them (``weighted`` rows), and without (``weighted = False`` rows, for every method);
* ``gin``: the GIN (the ``default`` recipe, Huber loss on standardised targets), τ-weighted as in the paper (the TMD
  coreset's unweighted twin is a variant row, ``weighted = False``).

Every pick is made once (:func:`select_all`, cached per set) and shared by the models; a **cell** is one (dataset,
method, trial) with its fractions and models.  Trial ``t`` seeds the seeded pickers and every model; the deterministic pickers
(Leader, Butina, scaffold) pick the same molecules in every trial, so their trials vary the model only.  The ε column
is the TMD certificate of the picks (every method's), read off the pool's TMD matrix.
"""
from __future__ import annotations

import math
import time

import numpy as np

__all__ = ["PROFILE", "COLUMNS", "KEY", "row_key", "plan_cells", "run_cell", "select_all", "MOLECULE_METHODS",
           "GIN_CONFIG", "RF_CONFIG", "DETERMINISTIC", "dataset_sizes", "rows_csv", "read_rows",
           "model_options", "model_epochs", "models_of"]

#: The pickers compared (label-free, registered in :mod:`tmdlib.select._methods`).
MOLECULE_METHODS = ("tmd", "random", "maxmin", "leader", "butina", "fp-kmedoids", "scaffold", "feature", "wl")
#: Columns of a results file; :data:`KEY` identifies a row.
KEY = ("dataset", "model", "method", "fraction", "trial", "weighted", "epochs")
COLUMNS = KEY + ("k", "n_train", "n_test", "n_cliff", "rmse", "rmse_cliff", "mae", "r2", "spearman", "epsilon",
                 "select_seconds", "train_seconds", "device")
#: The GIN of the benchmark: the registered ``gin`` with the ``default`` recipe (the paper's 3-layer sum-pooling GIN
#: without biases, Adam lr 1e-3, batches of 64, 100 epochs) on standardised targets with the Huber loss (the
#: certified regression loss, M = δ = 1) — the pipeline's ``train.model: gin`` with ``train.recipe: default``.
GIN_CONFIG = {"hidden": 128, "layers": 3, "pool": "add", "eta": 1.0, "bias": False, "lr": 0.001,
              "batch_size": 64, "epochs": 100, "device": "cpu"}
GIN_LOSS = "huber"
#: The random forest of the benchmark (100 trees; :class:`tmdlib.chem.models.ECFPForest` otherwise).
RF_CONFIG = {"n_estimators": 100}


def model_options(model: str, trial: int, device: str = "cpu") -> dict:
    """The options the benchmark builds registered model ``model`` with for trial ``trial`` (its seed, for the
    models that take one: ``ModelSpec.seeded``); the GIN and the forest with the benchmark's settings above."""
    from ..models import get_model

    if model == "gin":
        return {"recipe": "default", "loss": GIN_LOSS, **GIN_CONFIG, "seed": int(trial), "device": device}
    if model == "rf":
        return {**RF_CONFIG, "seed": int(trial)}
    return {"seed": int(trial)} if get_model(model).seeded else {}  # svm: deterministic


def model_epochs(model: str) -> int:
    """The ``epochs`` column of a model's rows: the GIN's, or the registered default (0 for the models that have
    none)."""
    from ..models import get_model

    return int(GIN_CONFIG["epochs"]) if model == "gin" else int(get_model(model).defaults.get("epochs", 0))


#: The benchmark: all 30 MoleculeACE sets, budgets 5-30 %, 5 trials; the GIN on the 10 largest by default.
PROFILE = {"fractions": [0.05, 0.1, 0.2, 0.3], "methods": list(MOLECULE_METHODS), "models": ["rf", "gin"],
           "trials": 5, "gin_datasets": 10}


def dataset_sizes() -> dict:
    """``{name: molecules}`` of the built-in MoleculeACE sets (``ACE-*``), largest first."""
    from ..datasets._registry import DATASETS

    ace = {n: d.num_graphs for n, d in DATASETS.items() if n.startswith("ACE-")}
    return dict(sorted(ace.items(), key=lambda kv: (-kv[1], kv[0])))


def molecule_set(table, where: str = "the set") -> dict:
    """A molecule regression set's graph-store ``table`` made the benchmark's pool and test set: its ``split`` column
    if it has one, else a seeded 80/20 split (:func:`tmdlib.select._split.split_with_column`, seed 0); members
    without a label left out of both; the test members involved in an activity cliff (a ``cliff_mol`` column equal
    to 1; none without the column).

    Parameters
    ----------
    table : pyarrow.Table
        A graph store's rows (:func:`tmdlib.datasets.read_graph_parquet`, :func:`tmdlib.datasets.load_builtin`).
    where : str
        What the table is, for the errors.

    Returns
    -------
    dict
        ``ds`` (the :class:`~tmdlib.GraphDataset`, n graphs), ``smiles`` (list of n str), ``y`` (float64, shape
        (n,)), ``train`` / ``test`` (int positions), ``cliff`` (bool, aligned with ``test``).

    Raises
    ------
    tmdlib._errors.InputError
        Not one regression target, or no SMILES.
    """
    from ..datasets import to_dataset
    from ..datasets._task import table_task
    from .._errors import InputError
    from ..select._split import split_with_column

    task = table_task(table)
    # task type: the molecules benchmark measures RMSE (and activity-cliff RMSE) on one regression target
    if not task.is_regression or task.num_targets != 1:
        raise InputError(where, f"the molecules benchmark needs one regression target; this set is {task.describe()}")
    if "smiles" not in table.column_names:
        raise InputError(where, "the molecules benchmark needs SMILES (the chemists' pickers and the forest read them)")
    ds = to_dataset(table)
    split = table.column("split").to_pylist() if "split" in table.column_names else [None] * len(ds)
    train, test = split_with_column(split, [len(ds)], 0.2, 0)
    y = np.asarray(ds.y, dtype=np.float64).reshape(len(ds))
    train, test = train[~np.isnan(y[train])], test[~np.isnan(y[test])]
    cliff_col = table.column("cliff_mol").to_numpy(zero_copy_only=False) if "cliff_mol" in table.column_names \
        else np.zeros(len(ds))
    return {"ds": ds, "smiles": table.column("smiles").to_pylist(), "y": y, "train": train, "test": test,
            "cliff": np.nan_to_num(np.asarray(cliff_col, dtype=np.float64))[test] == 1}


def molecules_profile(datasets: str | None = None, trials: int | None = None, methods: str | None = None,
                      models: str | None = None, fractions: str | None = None, gin_datasets: int | None = None) -> dict:
    """:data:`PROFILE` with the command line's overrides, checked: ``datasets`` / ``methods`` / ``models`` comma
    lists (a method or model must be registered; duplicates dropped, order kept; no datasets: every built-in set,
    largest first), ``fractions`` a comma list in (0, 1] (sorted, distinct), ``trials`` >= 1; ``gin_sets`` the
    first ``gin_datasets`` sets.

    Raises
    ------
    tmdlib._errors.InputError
        Naming the option at fault.
    """
    from .._errors import InputError
    from ..models import model_names
    from ..select import method_names

    def _list(text, allowed, what):
        items = [s.strip() for s in text.split(",") if s.strip()]
        bad = [s for s in items if allowed is not None and s not in allowed]
        if not items or bad:
            raise InputError(None, f"--{what}: unknown {bad or text!r}; choose from {', '.join(allowed)}")
        return list(dict.fromkeys(items))

    p = {k: (list(v) if isinstance(v, list) else v) for k, v in PROFILE.items()}
    sizes = dataset_sizes()
    p["datasets"] = _list(datasets, None, "datasets") if datasets else list(sizes)
    p["gin_sets"] = p["datasets"][:int(p["gin_datasets"] if gin_datasets is None else gin_datasets)]
    if methods:
        p["methods"] = _list(methods, method_names(), "methods")
    if models:
        p["models"] = _list(models, model_names(), "models")
    if fractions:
        try:
            p["fractions"] = sorted({float(f) for f in fractions.split(",") if f.strip()})
        except ValueError:
            raise InputError(None, f"--fractions: {fractions!r} is not a comma list of numbers") from None
        if not p["fractions"] or not all(0 < f <= 1 for f in p["fractions"]):
            raise InputError(None, f"--fractions must lie in (0, 1], got {fractions!r}")
    if trials is not None:
        if trials < 1:
            raise InputError(None, f"--trials must be >= 1, got {trials}")
        p["trials"] = int(trials)
    return p


def row_key(row: dict) -> tuple:
    """Normalised :data:`KEY` tuple of a row."""
    w = row["weighted"]
    w = w if isinstance(w, bool) else str(w).strip().lower() in ("true", "1")
    return (str(row["dataset"]), str(row["model"]), str(row["method"]), round(float(row["fraction"]), 6),
            int(row["trial"]), bool(w), int(row["epochs"]))


def _variants(model: str, method: str) -> list[bool]:
    """Weighted flags of the rows one (model, method) gives: the forest both ways for methods with weights; the GIN
    weighted (the paper's), plus the TMD coreset unweighted as a variant."""
    from ..select._registry import get_method

    weighted = get_method(method).weighted
    if model != "gin":  # the molecule models: both ways for every method with weights (like for like)
        return [True, False] if weighted else [False]
    return [True, False] if method == "tmd" else [weighted]


def models_of(profile: dict, dataset: str) -> list[str]:
    """The models of ``profile`` trained on ``dataset``: the GIN on the profile's ``gin_sets`` only (the first
    ``gin_datasets`` sets: it is the slow one), every other model everywhere."""
    return [m for m in profile["models"] if m != "gin" or dataset in profile["gin_sets"]]


def plan_cells(profile: dict, dataset: str, done, models: list[str]) -> list[dict]:
    """Specs of the cells of ``dataset`` still to run (trial-major), each with its unfinished (model, weighted,
    fraction) rows."""
    specs = []
    for trial in range(int(profile["trials"])):
        for method in profile["methods"]:
            todo = []
            for model in models:
                epochs = model_epochs(model)
                for w in _variants(model, method):
                    for f in profile["fractions"]:
                        key = row_key({"dataset": dataset, "model": model, "method": method, "fraction": f,
                                       "trial": trial, "weighted": w, "epochs": epochs})
                        if not done(key):
                            todo.append((model, w, float(f)))
            if todo:
                specs.append({"dataset": dataset, "method": method, "trial": trial, "rows": todo})
    return specs


def _metrics(pred: np.ndarray, y: np.ndarray, cliff: np.ndarray) -> dict:
    from ..metrics import score

    s = score(pred, y, "regression")
    c = score(pred[cliff], y[cliff], "regression") if cliff.any() else {"rmse": float("nan")}
    return {"rmse": s["rmse"], "mae": s["mae"], "r2": s["r2"], "spearman": s["spearman"], "rmse_cliff": c["rmse"]}


#: The pickers that ignore the seed (the same picks in every trial: selected once, reused).
DETERMINISTIC = ("leader", "butina", "scaffold")


def select_all(pool, pool_smiles: list, matrices: dict, methods, fractions, trials: int) -> list[dict]:
    r"""Every pick of the benchmark for one set: :func:`tmdlib.select_graphs` per (method, fraction, trial).

    Parameters
    ----------
    pool : GraphDataset
        The train split (the unlabelled pool), ``n`` molecules.
    pool_smiles : list of str, length n
    matrices : dict
        ``tmd`` (the pool's TMD matrix: the certificate, and the ``tmd`` method's distance), ``feature``, ``wl``.
    methods, fractions, trials
        The grid; a deterministic picker (:data:`DETERMINISTIC`) is run once per fraction and its picks reused.

    Returns
    -------
    list of dict
        ``method``, ``fraction``, ``trial``, ``positions`` (into the pool), ``tau``, ``epsilon`` (the TMD certificate's
        mean), ``select_seconds`` (CPU seconds of the picking, matrices excluded: they are computed once per set).
    """
    from ..select._api import select_graphs

    out = []
    for method in methods:
        own = matrices.get(method) if method in ("feature", "wl") else None
        for fraction in fractions:
            first = None
            for trial in range(int(trials)):
                if method in DETERMINISTIC and first is not None:
                    out.append({**first, "trial": trial})
                    continue
                sel = select_graphs(pool, method, fraction=float(fraction), seed=trial, matrix=matrices["tmd"],
                                    distance=own, smiles=pool_smiles, restarts=5)
                first = {"method": method, "fraction": float(fraction), "trial": trial,
                         "positions": sel.positions.tolist(), "tau": sel.tau.tolist(),
                         "epsilon": float(sel.epsilon_mean), "select_seconds": round(float(sel.seconds["select"]), 4)}
                out.append(first)
    return out


def run_cell(spec: dict, ds, y: np.ndarray, train: np.ndarray, test: np.ndarray, cliff: np.ndarray,
             counts: np.ndarray, picks: dict, gin_device: str = "cpu", smiles=None) -> list[dict]:
    r"""Train every requested (model, weighted) row of one (set, method, trial) on its picks; score on the test split.

    Every model is a registered one (:func:`tmdlib.models.get_model`) built with :func:`model_options`.

    Parameters
    ----------
    spec : dict
        ``dataset``, ``method``, ``trial``, ``rows`` (list of ``(model, weighted, fraction)``).
    ds : GraphDataset
        All molecules of the set.
    y : ndarray, shape (G,)
        The measured values (:math:`-\log_{10}` of the nM value).
    train, test : ndarray of int
        The authors' split (the pool and the test set).
    cliff : ndarray of bool, shape (len(test),)
        Test molecules involved in an activity cliff.
    counts : ndarray, shape (G, 2048)
        ECFP4 counts (the fingerprint models' features).
    picks : dict
        ``{(method, fraction, trial): pick}`` from :func:`select_all`.
    gin_device : str
    smiles : list of str, length G, optional
        The molecules (models reading SMILES: chemprop).

    Returns
    -------
    list of dict
        One row per requested (model, weighted, fraction), columns :data:`COLUMNS`.
    """
    from ..datasets._task import TaskSpec
    from ..models import Inputs, get_model

    name, method, trial = spec["dataset"], spec["method"], int(spec["trial"])
    task = TaskSpec("regression")
    rows = []
    for model, weighted, fraction in spec["rows"]:
        pick = picks[(method, round(float(fraction), 6), trial)]
        pos = train[np.asarray(pick["positions"], dtype=np.int64)]
        tau = np.asarray(pick["tau"], dtype=np.float64)
        w = tau if weighted else np.ones(len(pos))
        device = gin_device if model == "gin" else "cpu"
        t0 = time.process_time()
        fitted = get_model(model).build(model_options(model, trial, device)).fit(
            Inputs(ds, smiles, pos, features=counts), y[pos], w, task)
        if model != "gin":  # chemprop: where lightning trained it (the GPU when one is present)
            device = str(getattr(fitted, "device", device))
        pred = fitted.outputs(Inputs(ds, smiles, test, features=counts))[:, 0]
        rows.append({"dataset": name, "model": model, "method": method, "fraction": float(fraction),
                     "trial": trial, "weighted": bool(weighted), "epochs": model_epochs(model), "k": int(len(pos)),
                     "n_train": int(len(train)), "n_test": int(len(test)), "n_cliff": int(cliff.sum()),
                     **_metrics(np.asarray(pred, dtype=np.float64), y[test], cliff), "epsilon": pick["epsilon"],
                     "select_seconds": pick["select_seconds"], "train_seconds": round(time.process_time() - t0, 3),
                     "device": device})
    return rows


def rows_csv(rows: list[dict]) -> str:
    """CSV text of result rows (header :data:`~tmdlib.experiment.molecules.COLUMNS`, floats in full precision)."""
    def fmt(v) -> str:
        if v is None:
            return ""
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            return "nan" if math.isnan(v) else repr(v)
        return str(v)

    return "\n".join([",".join(COLUMNS)] + [",".join(fmt(r.get(c)) for c in COLUMNS) for r in rows]) + "\n"


def read_rows(path: str) -> list[dict]:
    """Rows of a molecules results CSV ([] when missing); a bad row is an :class:`InputError` naming its line
    (:func:`tmdlib.experiment._results.read_csv_rows`, the grid's reader, with this benchmark's columns)."""
    from ._results import read_csv_rows

    return read_csv_rows(path, "a molecules results file", KEY + ("rmse",), columns=COLUMNS,
                         floats=("fraction", "rmse", "rmse_cliff", "mae", "r2", "spearman", "epsilon",
                                 "select_seconds", "train_seconds"),
                         ints=("trial", "epochs", "k", "n_train", "n_test", "n_cliff"), bools=("weighted",))


#: The arrays a set's cache holds: the pool's three distance matrices and every molecule's ECFP4 counts.
SET_ARRAYS = ("tmd", "feature", "wl", "counts")


def set_key(s: dict) -> str:
    """The key a set's cached arrays are valid for: its size, the pool's size and members' sum, the TMD's depth and
    weights (:func:`molecule_set`'s ``ds`` and ``train``)."""
    from ._grid import DEPTH, WEIGHTS

    return f"{len(s['ds'])}:{len(s['train'])}:{int(s['train'].sum())}:{DEPTH}:{WEIGHTS}"


def set_arrays(s: dict, threads: int = 2) -> dict:
    """How each of :data:`SET_ARRAYS` is computed for a set (:func:`molecule_set`).

    Returns
    -------
    dict
        ``{name: callable}``, each returning an array: ``tmd``, ``feature``, ``wl`` the pool's ``(m, m)`` distance
        matrices (TMD at the grid's depth and weights on ``threads`` threads, Feature, WL with 3 iterations),
        ``counts`` the ECFP4 counts of every molecule of the set.
    """
    from ..chem._fingerprints import ecfp4_counts
    from ..distance._engine import tmd_matrix
    from ..select import _baselines as baselines
    from ._grid import DEPTH, WEIGHTS

    pool = s["ds"].take(s["train"])
    return {"tmd": lambda: tmd_matrix(pool, DEPTH, WEIGHTS, num_threads=threads),
            "feature": lambda: baselines.feature_distance_matrix(pool),
            "wl": lambda: baselines.wl_distance_matrix(pool, iterations=3),
            "counts": lambda: ecfp4_counts(s["smiles"])}


def picks_cover(cached: dict, fractions, trials: int) -> bool:
    """Whether cached picks (``{"fractions", "trials", ...}``) hold this grid's: the same budgets and at least as
    many trials (trial t's picks do not depend on how many trials are run)."""
    try:
        return cached["fractions"] == [float(f) for f in fractions] and int(cached["trials"]) >= int(trials)
    except (KeyError, ValueError):
        return False


def picks_index(docs) -> dict:
    """``{(method, fraction rounded to 6 places, trial): pick}`` of cached picks documents (each ``{"picks"}``)."""
    return {(p["method"], round(float(p["fraction"]), 6), int(p["trial"])): p for doc in docs for p in doc["picks"]}


def is_results_header(header) -> bool:
    """Whether a CSV's columns are a results table's (:data:`KEY` among them), not another table kept beside."""
    return set(KEY) <= set(header)
