"""One cell of the experiment grid: split, select, train, test (imports torch).

A cell is one (dataset, kind, arch, method, trial) and a list of fractions; it trains one model per
fraction.  Graph subsampling: :func:`tmdlib.select_graphs` on the training graphs (k-medoids with FasterPAM,
:data:`~tmdlib.experiment._grid.RESTARTS` restarts, on the TMD / Feature / WL matrix restricted to them; Random:
uniform picks, unit weights; any other registered method), trained with the method's weights τ; the ε column is
the TMD certificate of the picks, read off the TMD matrix.  Node subsampling: every training graph is replaced by its induced
subgraph on the kept nodes (:func:`tmdlib.select.nodes.subsample_nodes`); test graphs stay whole.

Condensation baselines (:data:`~tmdlib.experiment._grid.CONDENSE_METHODS`, :mod:`tmdlib.torch.condense`):
the GIN is trained on ``k`` synthetic graphs (weight 1 each) instead of ``k`` selected ones.

* ``doscond`` / ``kidd`` (the paper's "with labels" rows) read the training labels.  As in the authors'
  protocol they also use a labelled validation set: :data:`~tmdlib.experiment._grid.VALIDATION_FRACTION`
  of the training graphs (seeded by the trial), held out of the condensation; the GIN's epoch with the
  best validation metric is kept (earliest on ties).
* ``doscond-nolabel`` / ``kidd-nolabel`` (the paper's label-free rows, its Appendix "Effects of
  validation and label usage"): condensation without labels on all training graphs, no validation set,
  the model of the final epoch; synthetic graph ``i`` gets the label of the real graph it started from.

The paper runs the condensation baselines on one fixed split with random initialisations; here trial
``t`` seeds the split as for every other method, so that all rows are comparable.  Their ε column is NaN
(synthetic graphs are not training graphs); ``select_seconds`` is the condensation's CPU time.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np

from ..datasets._registry import metric_for
from .._errors import InputError
from .._graph import GraphDataset
from ..select._api import select_graphs
from ..select._coreset import budget_to_k
from ..select.nodes import NodeSubsample, subsample_nodes
from ..select._split import train_test_split
from ._grid import (ARCHS, CONDENSE_METHODS, CONDENSE_OPTIONS, DEPTH, RESTARTS, TEST_FRACTION, VALIDATION_FRACTION,
                   WEIGHTS, condense_base)


def arch_config(dataset: str, arch: str, epochs: int, seed: int, device: str = "cpu") -> dict:
    """``TrainConfig`` fields of ``arch``.

    ``gin`` is the ``paper-b2`` recipe (:data:`tmdlib.torch.model.RECIPES`: 3 layers, hidden 128 TU / 256 OGB,
    batch 16 / 64, add pooling, Adam lr 0.01, no batch norm / dropout); ``gin-wide-mean`` is the paper's alternative architecture (Appendix
    "alternative GNN architecture": 2x hidden width, mean pooling).
    """
    from ..torch.model import recipe_config

    if arch not in ARCHS:
        raise InputError(None, f"unknown architecture {arch!r}: {', '.join(ARCHS)}")
    cfg = recipe_config("paper-b2", dataset, epochs=int(epochs), seed=int(seed), device=device)
    if arch == "gin-wide-mean":
        cfg.update(hidden=2 * cfg["hidden"], pool="mean")
    return cfg


def validation_split(train: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(rest, val)``: :data:`~tmdlib.experiment._grid.VALIDATION_FRACTION` of ``train`` (at least 1 graph,
    seeded by ``seed``) held out for the labelled condensation variants' model selection; both sorted."""
    n_val = min(len(train) - 1, max(1, int(round(VALIDATION_FRACTION * len(train)))))
    val = np.sort(np.random.default_rng([int(seed), 10]).choice(train, size=n_val, replace=False))
    return np.setdiff1d(train, val), val


def condense_graphs(ds: GraphDataset, y: np.ndarray, train: np.ndarray, method: str, fraction: float, seed: int,
                    gin: dict, options: dict | None = None):
    """Synthetic training set of a condensation method for a budget of ``fraction`` of the training graphs.

    Parameters
    ----------
    ds : GraphDataset
        All graphs.
    y : ndarray, shape (G,)
        Labels of all graphs (the labelled variants read those of the training graphs; the label-free
        ones only the ``k`` labels of the synthetic graphs' source graphs, after condensing).
    train : ndarray of int64
        Training positions.
    method : str
        One of :data:`~tmdlib.experiment._grid.CONDENSE_METHODS`.
    fraction : float
    seed : int
    gin : dict
        :func:`arch_config` of the cell.
    options : dict, optional
        Overrides of :data:`~tmdlib.experiment._grid.CONDENSE_OPTIONS` for this method (tests).

    Returns
    -------
    data : list of Data, length k
        With ``y`` and ``weight`` (1).
    k : int
        ``budget_to_k(len(train), fraction)``, as for every selection method.
    seconds : float
        CPU seconds of the condensation.
    val : ndarray of int64 or None
        Validation positions (labelled variants).
    """
    import torch

    from ..torch.condense import condense
    from ..torch.condense._common import without_labels

    if method not in CONDENSE_METHODS:
        raise InputError(None, f"unknown condensation method {method!r}: {', '.join(CONDENSE_METHODS)}")
    base, labelled = condense_base(method)
    opts = {**CONDENSE_OPTIONS.get(base, {}), **(options or {})}
    k = budget_to_k(len(train), fraction=fraction)
    if labelled:
        pool, val = validation_split(train, seed)
        res = condense(base, ds.take(pool), k, labels=y[pool], seed=seed, gin=gin, **opts)
    else:
        val = None
        res = condense(base, without_labels(ds.take(train)), k, labels=None, seed=seed, gin=gin, **opts)
        for d, s in zip(res.graphs, res.source):
            d.y = torch.tensor([float(y[train[s]])])
    return res.graphs, k, res.seconds, val


def _best_on_validation(val_data, y_val: np.ndarray, metric: str):
    """``(on_epoch, restore)``: track the epoch with the best validation metric; ``restore(model)`` loads it."""
    import copy

    from torch_geometric.data import Batch

    from ..torch.gin import evaluate

    batch = Batch.from_data_list(list(val_data))
    best = {"score": -np.inf, "state": None}

    def on_epoch(epoch, model):
        dev = next(model.parameters()).device
        b = batch.to(dev)
        z = model(b.x, b.edge_index, b.batch, b.num_graphs).reshape(-1).double().cpu().numpy()
        score = evaluate(z, y_val, metric)
        if np.isfinite(score) and score > best["score"]:
            best["score"] = score
            best["state"] = copy.deepcopy({k: v.detach().cpu() for k, v in model.state_dict().items()})

    def restore(model):
        if best["state"] is not None:
            model.load_state_dict(best["state"])
        return model

    return on_epoch, restore


def run_cell(spec: dict, ds: GraphDataset, matrices: dict,
             node_subsample: Callable[[str, float, int], NodeSubsample] | None = None,
             smiles: list | None = None, task=None, split: tuple | None = None) -> list[dict]:
    """Train and test one model per fraction of ``spec["fractions"]``.

    Parameters
    ----------
    spec : dict
        ``dataset``, ``kind`` (graph | node), ``method``, ``arch``, ``trial``, ``epochs``, ``fractions``,
        optional ``torch_threads`` (default 1), ``device`` and ``condense_options`` (overrides of
        :data:`~tmdlib.experiment._grid.CONDENSE_OPTIONS`, for tests).
    ds : GraphDataset
        All graphs of the dataset, with labels ``ds.y`` (read for training and testing only, and by the
        labelled condensation methods).
    matrices : dict
        ``{"tmd": D, "feature": D, "wl": D}``, each of shape (G, G), over all graphs; only those the cell
        reads need be present (:func:`~tmdlib.experiment._grid.needed_matrices`).
    node_subsample : callable, optional
        ``(method, fraction, seed) -> NodeSubsample`` of all graphs, or ``-> (NodeSubsample, seconds)``
        when the caller caches it and reports its compute time; default computes
        :func:`tmdlib.select.nodes.subsample_nodes`.
    smiles : list of str, optional
        The molecules of all graphs (the chemistry pickers need them).
    task : TaskSpec, optional
        The dataset's task (default binary): the loss, the output width and the test metric follow it
        (:mod:`tmdlib.torch.fit`, :func:`tmdlib.metrics.headline`; regression targets standardised on the picks).
    split : (train, test), optional
        The dataset's own split (positions); default the seeded 80/20 split of the trial.

    Returns
    -------
    list of dict
        One row per fraction, with the columns of :data:`~tmdlib.experiment._grid.COLUMNS`.
    """
    import torch

    from ..datasets._task import BINARY
    from ..models._head import task_head, training_labels
    from ..torch.fit import train_on
    from ..torch.measure import score_model
    from ..torch.pyg import dataset_to_pyg

    if node_subsample is None:
        def node_subsample(method, fraction, seed):
            return subsample_nodes(ds, fraction=fraction, method=method, depth=DEPTH, weights=WEIGHTS, seed=seed)

    torch.set_num_threads(int(spec.get("torch_threads", 1)))
    name, kind, method, trial = spec["dataset"], spec["kind"], spec["method"], int(spec["trial"])
    task = task or BINARY
    # task type: the paper's binary sets report the paper's own metric per dataset (grid.metric_for)
    metric = metric_for(name) if task.is_binary else task.headline_metric(name)
    y = np.asarray(ds.y, dtype=np.float64)
    train, test = split if split is not None else train_test_split(len(ds), TEST_FRACTION, seed=trial)
    test_data = dataset_to_pyg(ds, positions=test)
    cfg = arch_config(name, spec["arch"], int(spec["epochs"]), trial, spec.get("device", "cpu"))
    pool = ds.take(train)
    pool_smiles = None if smiles is None else [smiles[int(p)] for p in train]
    cache: dict = {}

    def train_matrix(m):  # rows/columns of the training graphs, sliced once per cell
        if m not in cache:
            if m not in matrices:
                raise InputError(None, f"{name}: the {m} distance matrix was not prepared for this run")
            cache[m] = np.asarray(matrices[m])[np.ix_(train, train)]
        return cache[m]

    rows = []
    for fraction in spec["fractions"]:
        on_epoch = restore = None
        # task type: the paper runs node subsampling and the condensation baselines on binary tasks only
        if not task.is_binary and (kind != "graph" or method in CONDENSE_METHODS):
            raise InputError(None, f"{name}: {kind} subsampling / condensation runs on binary tasks only; this "
                                   f"dataset is {task.describe()}")
        if kind == "graph" and method in CONDENSE_METHODS:
            data, k, sel_seconds, val = condense_graphs(ds, y, train, method, float(fraction), trial, cfg,
                                                        spec.get("condense_options", {}).get(
                                                            condense_base(method)[0]))
            eps = float("nan")
            if val is not None:
                on_epoch, restore = _best_on_validation(dataset_to_pyg(ds, positions=val), y[val], metric)
        elif kind == "graph":
            own = train_matrix(method) if method in ("feature", "wl") else None
            sel = select_graphs(pool, method, fraction=float(fraction), seed=trial, matrix=train_matrix("tmd"),
                                distance=own, smiles=pool_smiles, restarts=RESTARTS)
            sel_seconds = sel.seconds["select"]
            pos = train[sel.positions]
            head = task_head(task, y=y[pos], weights=sel.tau)
            data = dataset_to_pyg(ds, y=training_labels(head, y[pos]), weights=sel.tau, positions=pos)
            k, eps = sel.k, float(sel.epsilon_mean)
        elif kind == "node":
            t0 = time.process_time()
            sub = node_subsample(method, float(fraction), trial)
            sel_seconds = time.process_time() - t0
            if isinstance(sub, tuple):
                sub, sel_seconds = sub
            local = np.arange(ds.num_nodes) - np.repeat(ds.node_ptr[:-1], ds.nodes_per_graph)
            subsets = [local[ds.node_ptr[p]:ds.node_ptr[p + 1]][sub.mask[ds.node_ptr[p]:ds.node_ptr[p + 1]]]
                       for p in train]
            data = dataset_to_pyg(ds, y=y[train], positions=train, node_subsets=subsets)
            k, eps = int(sub.k[train].sum()), float(sub.epsilon[train].mean())
        else:
            raise InputError(None, f"unknown kind {kind!r}: graph or node")
        if kind != "graph" or method in CONDENSE_METHODS:
            head = task_head(task)
        t0 = time.perf_counter()
        res = train_on(data, cfg, head, in_dim=ds.num_features, on_epoch=on_epoch)
        seconds = time.perf_counter() - t0
        model = restore(res.model) if restore is not None else res.model
        scored = score_model(model, test_data, y[test], head, metric)["value"]
        value = float("nan") if scored is None else scored
        rows.append({"dataset": name, "kind": kind, "method": method, "fraction": float(fraction),
                     "trial": trial, "arch": spec["arch"], "epochs": int(spec["epochs"]), "metric": metric,
                     "value": value, "k": k, "n_train": int(len(train)), "n_test": int(len(test)),
                     "epsilon": eps, "final_loss": res.losses[-1] if res.losses else float("nan"),
                     "train_seconds": round(seconds, 3), "select_seconds": round(float(sel_seconds), 4)})
    return rows
