"""The experiment grid: profiles, protocol constants, and the cells still to run."""
from __future__ import annotations

from typing import Callable

from .._errors import InputError
from ..select.nodes import NODE_METHODS
from ..select._registry import method_names

#: The paper's graph-subsampling methods (the profiles' default); any registered selection method
#: (:func:`tmdlib.select.method_names`) can be asked for with ``--methods``.
GRAPH_METHODS = ("tmd", "random", "feature", "wl")
#: Condensation baselines (graph subsampling only; not in the profiles' defaults, ask with ``--methods``).
#: ``doscond`` / ``kidd`` use the training labels and a labelled validation set (the paper's "with
#: labels" rows); ``*-nolabel`` are the paper's label-free variants (no validation set, final epoch).
CONDENSE_METHODS = ("doscond", "kidd", "doscond-nolabel", "kidd-nolabel")
LABELLED_METHODS = ("doscond", "kidd")
ALL_GRAPH_METHODS = tuple(method_names()) + CONDENSE_METHODS
ARCHS = ("gin", "gin-wide-mean")
KINDS = ("graph", "node")
DATASETS = ("MUTAG", "COX2", "PROTEINS", "NCI1", "DD", "ogbg-molbace", "ogbg-molbbbp")

#: Columns of a results file; :data:`KEY` identifies a row (a rerun skips finished keys).
#: ``select_seconds``: CPU seconds (``time.process_time``) of one selection -- k-medoids on the cached
#: matrix (TMD / Feature / WL; the matrix itself is computed once per dataset and reported apart), the
#: random picks, the node subsampling of all graphs, or the condensation (DosCond / KiDD).  Files written
#: before the column existed read as NaN.  ``train_seconds`` is wall-clock time of the GIN training.
KEY = ("dataset", "kind", "method", "fraction", "trial", "arch", "epochs")
COLUMNS = KEY + ("metric", "value", "k", "n_train", "n_test", "epsilon", "final_loss", "train_seconds",
                 "select_seconds")

#: The paper's grid (``full``) and a CI-sized one (``quick``).  Epochs: the paper does not state them
#: (B.2 gives optimiser, lr, batch, width, pooling only); 100 is the pipeline's default (params.yaml).
PROFILES = {
    "quick": {
        "datasets": ["MUTAG"],
        "kinds": ["graph", "node"],
        "graph_methods": list(GRAPH_METHODS), "graph_fractions": [0.02, 0.05, 0.1],
        "node_methods": list(NODE_METHODS), "node_fractions": [0.5],
        "archs": ["gin"], "trials": 3, "graph_epochs": 20, "node_epochs": 5,
    },
    "full": {
        "datasets": list(DATASETS),
        "kinds": ["graph", "node"],
        "graph_methods": list(GRAPH_METHODS), "graph_fractions": [round(0.01 * i, 2) for i in range(1, 11)],
        "node_methods": list(NODE_METHODS), "node_fractions": [round(0.1 * i, 1) for i in range(1, 10)],
        "archs": list(ARCHS), "trials": 20, "graph_epochs": 100, "node_epochs": 100,
    },
}

DEPTH = 4            # TMD depth L = GIN layers + 1 (3 layers, paper B.2)
WEIGHTS = "pascal"   # TMD level weights (paper B.2)
TEST_FRACTION = 0.2  # 80/20 split (paper Section 5)
RESTARTS = 5         # k-medoids restarts (params.yaml select.restarts)
#: Labelled condensation variants hold out this share of the training graphs as their validation set
#: (10 % of the dataset, DosCond's 80/10/10 split); they condense the rest.
VALIDATION_FRACTION = 0.125
#: Condensation settings of the experiment (overrides of the library defaults, which are the papers':
#: DosCond 1000 steps x 256 real graphs per class, KiDD 300 steps x 128 real graphs): fewer steps and
#: smaller real batches, so that the 4 datasets x 10 fractions x trials fit a shared CPU.  The objectives
#: level off well before (checked on MUTAG and PROTEINS).
CONDENSE_OPTIONS = {"doscond": {"steps": 100, "batch_real": 128}, "kidd": {"steps": 200, "batch_real": 64}}


def condense_base(method: str) -> tuple[str, bool]:
    """``("doscond" | "kidd", uses labels)`` of a condensation method name."""
    base = method.removesuffix("-nolabel")
    return base, method in LABELLED_METHODS


def needed_matrices(profile: dict) -> tuple[str, ...]:
    """Distance matrices the profile's cells read: TMD for every k-medoids / Random graph cell (its ε
    column), Feature and WL for their own methods; none for node subsampling or condensation."""
    if "graph" not in profile["kinds"]:
        return ()
    methods = set(profile["graph_methods"])
    out = ["tmd"] if methods - set(CONDENSE_METHODS) else []
    out += [m for m in ("feature", "wl") if m in methods]
    return tuple(out)


def row_key(row: dict) -> tuple:
    """Normalised :data:`KEY` tuple of a row (fractions rounded to 6 decimals)."""
    return (str(row["dataset"]), str(row["kind"]), str(row["method"]), round(float(row["fraction"]), 6),
            int(row["trial"]), str(row["arch"]), int(row["epochs"]))


def plan_cells(profile: dict, dataset: str, done: Callable[[tuple], bool], **fields) -> list[dict]:
    """Specs of the cells still to run, trial-major (an interrupted run leaves every cell with some trials).

    Parameters
    ----------
    profile : dict
        A :data:`PROFILES` entry (possibly narrowed).
    dataset : str
    done : callable
        ``done(key) -> bool`` for a :data:`KEY` tuple (normalised by
        :func:`row_key`).
    **fields
        Copied into every spec (e.g. ``raw_root``, ``paths``, ``torch_threads``, ``device``).

    Returns
    -------
    list of dict
        One spec per (trial, kind, arch, method) with its unfinished ``fractions``.
    """
    specs = []
    for trial in range(int(profile["trials"])):
        for kind in profile["kinds"]:
            epochs = int(profile[f"{kind}_epochs"])
            for arch in profile["archs"]:
                for method in profile[f"{kind}_methods"]:
                    todo = [f for f in profile[f"{kind}_fractions"]
                            if not done(row_key({"dataset": dataset, "kind": kind, "method": method,
                                                 "fraction": f, "trial": trial, "arch": arch,
                                                 "epochs": epochs}))]
                    if todo:
                        specs.append({"dataset": dataset, "kind": kind, "method": method, "arch": arch,
                                      "trial": trial, "epochs": epochs, "fractions": todo, **fields})
    return specs


def resolve_profile(profile: str, datasets: str | None = None, trials: int | None = None,
                    epochs: int | None = None, kinds: str | None = None, archs: str | None = None,
                    methods: str | None = None) -> dict:
    """The profile's grid with command-line overrides applied, checked.

    ``methods`` replaces the profile's method lists: graph methods (:data:`~tmdlib.experiment._grid.
    ALL_GRAPH_METHODS`, condensation baselines included) go to graph subsampling, node methods to node
    subsampling (``tmd`` and ``random`` to both); a kind left with no method runs nothing.

    Parameters
    ----------
    profile : str
        A key of :data:`PROFILES`.
    datasets, kinds, archs, methods : str or None
        Comma lists replacing the profile's (``--datasets`` ...).
    trials, epochs : int or None
        Trials per cell, training epochs of graph and node runs (>= 1).

    Returns
    -------
    dict
        The profile's entries (lists copied), overridden, with ``name``.

    Raises
    ------
    InputError
        An unknown profile or name, an empty list, or a count below 1 (naming the option).
    """
    from ..datasets import dataset_names

    if profile not in PROFILES:
        raise InputError(None, f"unknown profile {profile!r}: {', '.join(PROFILES)}")
    p = {k: (list(v) if isinstance(v, list) else v) for k, v in PROFILES[profile].items()}

    def _list(text: str, allowed, what: str) -> list[str]:
        items = [s.strip() for s in text.split(",") if s.strip()]
        bad = [s for s in items if s not in allowed]
        if not items or bad:
            raise InputError(None, f"--{what}: unknown {bad or text!r}; choose from {', '.join(allowed)}")
        return list(dict.fromkeys(items))

    if datasets:
        p["datasets"] = _list(datasets, dataset_names(), "datasets")
    if kinds:
        p["kinds"] = _list(kinds, KINDS, "kinds")
    if archs:
        p["archs"] = _list(archs, ARCHS, "archs")
    if methods:
        chosen = _list(methods, tuple(dict.fromkeys(ALL_GRAPH_METHODS + NODE_METHODS)), "methods")
        p["graph_methods"] = [m for m in chosen if m in ALL_GRAPH_METHODS]
        p["node_methods"] = [m for m in chosen if m in NODE_METHODS]
    if trials is not None:
        if trials < 1:
            raise InputError(None, f"--trials must be >= 1, got {trials}")
        p["trials"] = int(trials)
    if epochs is not None:
        if epochs < 1:
            raise InputError(None, f"--epochs must be >= 1, got {epochs}")
        p["graph_epochs"] = p["node_epochs"] = int(epochs)
    p["name"] = profile
    return p
