r"""The train stage's model policy: which model ``auto`` trains, with which recipe and certified setting, on which
labels and weights.

Pure decisions on the stage's options, the pool (molecules or graphs) and the labels' task; the registry
(:mod:`tmdlib.models._registry`: :func:`~tmdlib.models._registry.default_model`,
:func:`~tmdlib.models._registry.graph_default`, :func:`~tmdlib.models._registry.auto_recipe`) holds the measured
defaults these read.  (Which medoids, τ and weights the selection gives the training loss is
:mod:`tmdlib.select.answered`.)  Also the champion rule of the registered model (:func:`champion_decision`).
"""
from __future__ import annotations

import math

import numpy as np

from .._errors import InputError
from ._registry import auto_recipe, default_model, graph_default, resolve_model

__all__ = ["parse_target", "budget_given", "certified_asked", "check_loss_option", "model_for", "train_model",
           "recipe_for", "certified_setting", "selection_labels", "champion_decision", "champion_verdict",
           "decision_line", "registered_version", "tagged_value", "evaluation_tags"]

#: What a ``--lipschitz-budget`` that sets no budget reads as (lower case, stripped).
NO_BUDGET = ("", "0", "0.0", "none", "null", "off")


def parse_target(target) -> float | None:
    """``--lipschitz-target`` (the certificate :math:`c\\varepsilon` to aim for, in nats) as a positive float, or
    None when unset / 0 (``None``, ``""``, ``"0"``, ``"none"``, ``"off"``).

    Raises
    ------
    InputError
        A non-numeric, negative or non-finite target.
    """
    if target is None or (isinstance(target, str) and target.strip().lower() in ("", "0", "none", "off")):
        return None
    try:
        t = float(target)
    except (TypeError, ValueError):
        raise InputError(None, f"--lipschitz-target must be a number of nats (0 = off), got {target!r}") from None
    if t == 0:
        return None
    if not (t > 0 and math.isfinite(t)):
        raise InputError(None, f"--lipschitz-target must be a positive number of nats (0 = off), got {target!r}")
    return t


def budget_given(lipschitz_budget) -> bool:
    """The user set a Lipschitz budget (anything but :data:`NO_BUDGET`)."""
    return str(lipschitz_budget).strip().lower() not in NO_BUDGET


def certified_asked(lipschitz_budget, lipschitz_target) -> bool:
    """The certified mode is asked for: a Lipschitz target (:func:`parse_target`) or a budget is set."""
    return parse_target(lipschitz_target) is not None or budget_given(lipschitz_budget)


def check_loss_option(loss: str, huber_delta: float) -> None:
    """``--loss`` / ``--huber-delta`` before any file is read (which losses fit the task is decided later): the
    loss one of any task type's (:data:`tmdlib.guarantees.losses.LOSSES`) or ``auto``, δ positive and finite.

    Raises
    ------
    InputError
        An unknown loss or a bad δ.
    """
    from ..guarantees.losses import LOSSES

    known = sorted({x for v in LOSSES.values() for x in v} | {"auto"})
    if loss not in known:
        raise InputError(None, f"--loss must be one of {', '.join(known)}; got {loss!r}")
    if not (huber_delta > 0 and math.isfinite(huber_delta)):
        raise InputError(None, f"--huber-delta must be a positive number, got {huber_delta!r}")


def model_for(model: str | None, lipschitz_budget, lipschitz_target, molecules: bool = False, task=None,
              graphs_only: bool = False, n_train: int = 0) -> str:
    """The name of the model to train.

    Parameters
    ----------
    model : str or None
        ``train.model``: a name (returned as given), ``"auto"`` or None.
    lipschitz_budget, lipschitz_target
        The certified mode's options (:func:`certified_asked`).
    molecules : bool
        The pool has SMILES.
    task : TaskSpec or None
        The labels' task; ``auto`` with a task is the measured default (:func:`tmdlib.models.default_model`:
        ``svm`` for molecule regression, ``lgbm`` past ``SVM_MAX_TRAIN`` labelled training molecules ``n_train``,
        ``rf`` for molecule classification, else the graph model).
    graphs_only : bool
        Node subsampling trains on subgraphs: ``auto`` stays on the graph model.

    Returns
    -------
    str
        For None (or ``auto`` without a task): the graph model (:func:`tmdlib.models._registry.graph_default`: the
        certified GIN when a budget or target is set, else the GIN — the behaviour before ``train.model`` existed).
    """
    if model not in (None, "", "auto"):
        return str(model)
    certified = certified_asked(lipschitz_budget, lipschitz_target)
    if model == "auto" and task is not None:
        return default_model(bool(molecules) and not graphs_only, task, certified, n_train)
    return graph_default(certified)


def train_model(model, lipschitz_budget, lipschitz_target, molecules: bool, task, nodes: bool,
                n_train: int = 0) -> tuple:
    """``(spec, note)``: the :class:`~tmdlib.models._registry.ModelSpec` of :func:`model_for` for this pool and task,
    and the line to say when node subsampling (``nodes``: training on subgraphs) made a model that reads molecules
    give way to the graph model (else None)."""
    spec = resolve_model(model_for(model, lipschitz_budget, lipschitz_target, molecules, task, bool(nodes), n_train))
    if nodes and spec.inputs != "graphs":  # node subsampling trains on subgraphs: a graph model
        fallback = model_for(None, lipschitz_budget, lipschitz_target)
        return resolve_model(fallback), (f"node subsampling trains graph models: model {spec.name!r} reads molecules, "
                                         f"{fallback} is trained on the subgraphs")
    return spec, None


def recipe_for(model: str, recipe: str) -> str:
    """The GIN's training recipe: ``recipe``, or for ``auto`` the measured one of ``model``
    (:func:`tmdlib.models._registry.auto_recipe`) — ``default`` (Adam lr 0.001, batch 64) for the GIN
    (benchmarks/gin_recipe.py: better on 3 of 4 MoleculeACE sets, R² 0.51 against 0.08 on CHEMBL204_Ki, and on
    MUTAG and PROTEINS), ``paper-b2`` (lr 0.01, batch 16) for the certified GIN (the certified sweep's setting,
    reports/certified/summary.md)."""
    return recipe if recipe != "auto" else auto_recipe(model)


def certified_setting(spec, lipschitz_budget, lipschitz_mode, target) -> tuple:
    """``(budget, mode)`` the model ``spec`` is trained with: ``(None, None)`` for a model that is not certified; the
    user's budget (mode as given, ``ball`` by default) when a budget or a ``target`` is given; else the certified
    model's registered defaults (``spec.defaults``)."""
    if not spec.certified:
        return None, None
    given = budget_given(lipschitz_budget)
    if given or target is not None:
        return (lipschitz_budget if given else spec.defaults.get("lipschitz_budget")), lipschitz_mode
    return spec.defaults.get("lipschitz_budget"), lipschitz_mode or spec.defaults.get("lipschitz_mode")


def selection_labels(label_map: dict, med_ids, task, path: str) -> np.ndarray:
    """Labels of the graphs ``med_ids`` as stored for training: ``(k,)`` for one target, ``(k, T)`` otherwise
    (multi-class: class indices, :func:`tmdlib.datasets._task.validate_labels`).

    Raises
    ------
    InputError
        Naming ``path`` when a graph has no label in ``label_map`` (graph id -> label).
    """
    from ..datasets._task import validate_labels

    missing = [int(g) for g in med_ids if int(g) not in label_map]
    if missing:
        raise InputError(path, f"{len(missing)} selected graphs have no label, e.g. graph ids {missing[:10]}")
    y = np.asarray([label_map[int(g)] for g in med_ids], dtype=np.float64)
    enc = validate_labels(y.reshape(len(y), task.num_targets), task, path=path, encoded=False)
    return enc[:, 0] if task.num_targets == 1 else enc


def champion_decision(metric: str | None, value: float | None, champion_version: str | None,
                      champion_metric: str | None, champion_value: float | None) -> tuple[bool, str]:
    """Whether a new model version takes the alias ``champion``, and why.

    It does when it has a test value and there is no champion, the champion has no comparable value, or its
    value is not worse (``>=`` for accuracy / ROC-AUC / R² / ρ / macro-F1, ``<=`` for the error metrics RMSE and MAE,
    :func:`tmdlib.metrics.higher_is_better`); it does not when it has no test value or is worse.

    Returns
    -------
    tuple of (bool, str)
        ``(promoted, reason)``.
    """
    from ..metrics import higher_is_better

    if value is None:
        return False, "no test metric recorded for this version (the evaluate stage tags it)"
    if champion_version is None:
        return True, f"no champion yet; test {metric} {value:.6g}"
    if champion_value is None or champion_metric != metric:
        return True, (f"champion v{champion_version} has no comparable test {metric}; this version's is "
                      f"{value:.6g}")
    up = higher_is_better(metric or "")
    ge, lt = (">=", "<") if up else ("<=", ">")
    if (value >= champion_value) if up else (value <= champion_value):
        return True, (f"test {metric} {value:.6g} {ge} {champion_value:.6g} of champion v{champion_version} "
                      "(not worse)")
    return False, f"test {metric} {value:.6g} {lt} {champion_value:.6g} of champion v{champion_version} (worse)"


#: The registered model versions' tags the champion rule reads (set by the evaluate stage) and writes.
TEST_METRIC, TEST_VALUE, DECISION, REASON = "test_metric", "test_value", "champion_decision", "champion_reason"


def tagged_value(tags: dict) -> float | None:
    """The test value a model version's tags record (:data:`TEST_VALUE`), None when absent or not finite."""
    try:
        v = float(tags[TEST_VALUE])
    except (KeyError, ValueError):
        return None
    return v if math.isfinite(v) else None


def champion_verdict(version: str, tags: dict, champion_version: str | None, champion_tags: dict) -> dict:
    """:func:`champion_decision` on a model version's tags against the current champion's.

    Parameters
    ----------
    version : str
        The version considered.
    tags : dict
        Its tags (:data:`TEST_METRIC`, :data:`TEST_VALUE`).
    champion_version : str or None
        The version holding the alias now (None: no champion).
    champion_tags : dict
        The champion's tags (ignored without one).

    Returns
    -------
    dict
        ``{"metric", "value", "champion_before", "champion_value", "promoted", "reason"}``; a version that already
        is the champion stays it ("already the champion").
    """
    metric, value = tags.get(TEST_METRIC), tagged_value(tags)
    c_metric = None if champion_version is None else champion_tags.get(TEST_METRIC)
    c_value = None if champion_version is None else tagged_value(champion_tags)
    if champion_version == str(version):
        promoted, reason = True, "already the champion"
    else:
        promoted, reason = champion_decision(metric, value, champion_version, c_metric, c_value)
    return {"metric": metric, "value": value, "champion_before": champion_version, "champion_value": c_value,
            "promoted": promoted, "reason": reason}


def decision_line(promoted: bool, reason: str, when: str = "") -> str:
    """The line a decided version's description gets: ``Champion decision (when): promoted - reason.``"""
    return f"Champion decision{f' ({when})' if when else ''}: {'promoted' if promoted else 'not promoted'} - {reason}."


def registered_version(train_info: dict) -> tuple:
    """``(registered model, version)`` that ``train.json`` names (``mlflow.model``); None for each it lacks."""
    model = (train_info.get("mlflow") or {}).get("model") or {}
    return model.get("registered_model"), model.get("version")


def evaluation_tags(metric: str, value, evaluate_run_id: str | None = None) -> dict:
    """The tags the evaluate stage sets on a model version, which :func:`champion_verdict` reads: its test metric,
    its value (``nan`` when there is none) and, when known, the evaluate run."""
    tags = {TEST_METRIC: metric, TEST_VALUE: "nan" if value is None else repr(float(value))}
    return {**tags, "evaluate_run_id": evaluate_run_id} if evaluate_run_id else tags
