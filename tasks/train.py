"""Training tasks: torch threads, the model file (``model.pt``, a state dict) and ``train.json``.

The readers of the selection, labels and node subsets are in :mod:`tasks.io`; MLflow runs in
:mod:`tasks.tracking`; the model policy (which model, recipe, certified setting, labels and weights) in
:mod:`tmdlib.models.policy`, the GIN's options in :mod:`tmdlib.torch.options`, what is recorded in
:mod:`tmdlib.models.records`; the science (training any task type, the stability constant) in
:mod:`tmdlib.torch.fit`.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from tmdlib import InputError
from tmdlib.models.policy import train_model
from tmdlib.models.records import model_state_of, state_arrays

from . import io


def set_torch_threads(n: int) -> int:
    """Set torch's intra-op CPU threads (``n >= 1``); returns the previous value.

    The pipeline default is 1: these models are small, so extra threads mostly spin (4-8x slower on a
    shared, oversubscribed machine), and float summation order - hence the trained weights - depends on
    the thread count: one thread makes CPU runs repeat bit for bit on any machine.
    """
    import torch

    if int(n) < 1:
        raise InputError(None, f"--torch-threads must be >= 1, got {n}")
    old = torch.get_num_threads()
    torch.set_num_threads(int(n))
    return old


# ----------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------
def calibration_set(store, sel: dict, info: dict, task) -> tuple[np.ndarray, np.ndarray, str]:
    """``(positions, labels as stored, what)`` of the held-out labelled members the intervals are calibrated on:
    the labelled audit sample (production: the lab's labels), else the test split with the dataset's labels
    (benchmark mode)."""
    from tmdlib.models.predict import calibration_members

    if not store.labelled:
        labels, _ = io.read_labels(info["labels"], None, task)
        return calibration_members(store.graph_ids, sel, task, labels=labels, where=info["labels"])
    return calibration_members(store.graph_ids, sel, task, y=store.y)


@task(name="fit-model", persist_result=False, cache_policy=NO_CACHE)
def fit_task(spec, options: dict, X, y, tau, task):
    """Build the model of ``spec`` with ``options`` and fit it on the labelled selection ``X`` (τ-weighted)."""
    import time

    t0 = time.perf_counter()
    model = spec.build(options).fit(X, y, tau, task)
    model.seconds = time.perf_counter() - t0
    return model


# ----------------------------------------------------------------------------------------------
# Model files: the model's arrays as plain tensors (torch.load(weights_only=True)), its config in train.json
# ----------------------------------------------------------------------------------------------
def save_model(model, path: str) -> dict:
    """Atomically write a fitted :class:`tmdlib.models.Model`'s arrays to ``path`` as a dict of tensors (a GIN's:
    its state dict); returns the model's config (``train.json``'s ``model_state``, with any text arrays), which
    rebuilds it."""
    import torch

    config, arrays = model.state()
    try:
        numeric, text = state_arrays(arrays, model.name)
    except ValueError as err:
        raise InputError(path, str(err)) from None
    with io.atomic_path(path) as tmp:
        torch.save({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in numeric.items()}, tmp)
    return {**config, "text_arrays": text} if text else config


def load_model(path: str, info: dict):
    """The fitted :class:`tmdlib.models.Model` of ``train.json`` ``info`` with its arrays from ``path``
    (``torch.load(weights_only=True)``: nothing is unpickled)."""
    import torch

    from tmdlib.models import restore_model

    if not Path(path).is_file():
        raise InputError(path, "model file not found")
    if info.get("skipped"):  # train_nodes with node subsampling off (skip_training): no model was trained
        raise InputError(path, f"no model: {info.get('line') or 'the training stage was skipped'}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - torch raises many kinds for a bad file
        raise InputError(path, f"not a loadable state dict: {err}") from None
    try:
        config = model_state_of(info)
        arrays = {k: v.numpy() for k, v in state.items()}
        arrays.update({k: np.asarray(v, dtype=str) for k, v in (config.get("text_arrays") or {}).items()})
        return restore_model(config, arrays)
    except (RuntimeError, KeyError, ValueError) as err:
        raise InputError(path, f"state dict does not match the model config: {err}") from None


#: The confidence of the registered model's intervals (the predict stage's default, ``predict.confidence``).
PYFUNC_CONFIDENCE = 0.9


def domain_artifact(store, pos, info: dict, task) -> dict:
    """What the registered model needs to give the predictions file's columns: the trained molecules (its
    applicability domain) and the calibration members' SMILES and labels (:func:`calibration_set`: the labelled
    audit sample in production) — it calibrates at load time as the predict stage does."""
    from tmdlib.models.records import domain_record

    cal, y, what = calibration_set(store, io.read_selection(info["selection"]), info, task)
    return domain_record(store.smiles(pos), store.smiles(cal) if len(cal) else [], y, what, PYFUNC_CONFIDENCE)


def log_smiles_model_task(run_id: str, model, model_out: str, info: dict, dataset: str, description: str,
                          tags: dict, example, domain: dict | None = None) -> dict:
    """:func:`tasks.registry.log_smiles_model` with the model's config and its labels' meta (the property the
    predictions are in) as its ``train_info`` artifact and
    ``domain`` (:func:`domain_artifact`) as its ``domain`` artifact."""
    import json
    import tempfile

    from .registry import log_smiles_model

    with tempfile.TemporaryDirectory(prefix="tmdsub-model-") as tmp:
        cfg = Path(tmp) / "train.json"
        cfg.write_text(json.dumps({"model_state": info["model_state"], "config": info["config"],
                                   "labels_meta": info.get("labels_meta")}, default=float))
        extra = {}
        if domain is not None:
            extra["domain"] = str(Path(tmp) / "domain.json")
            Path(extra["domain"]).write_text(json.dumps(domain))
        return log_smiles_model(run_id, model_out, str(cfg), dataset, description, tags=tags, example=example,
                                artifacts=extra)


def train_model_spec(model, lipschitz_budget, lipschitz_target, store, task, nodes, n_train: int = 0):
    """The model's :class:`~tmdlib.models._registry.ModelSpec` for this store and task
    (:func:`tmdlib.models.policy.train_model`), saying so when node subsampling made the graph model take over."""
    spec, note = train_model(model, lipschitz_budget, lipschitz_target, store.has_smiles, task, nodes, n_train)
    if note:
        print(note, flush=True)
    return spec


def log_trained_model(run: dict, fitted, info: dict, paths, task, spec, store, pos, graph_model: bool) -> None:
    """The trained model to the MLflow run (``model.pt`` saved first: the version names its sha256): for molecules a
    pyfunc that takes SMILES, for any model; else the GIN (registered unless trained on node subsets).  ``paths``:
    the stage's files (:class:`flows.config.train.TrainPaths`).  Sets ``info["mlflow"]`` when a model was logged."""
    from tmdlib.models.records import model_description, model_tags, smiles_model_description

    from .registry import log_gin_model
    from .tracking import set_run_tag

    name, stage, model_out, nodes = paths.dataset, paths.stage, paths.model_out, paths.nodes

    set_run_tag(run["run_id"], "device", info["device"])
    sha = io.sha256_file(model_out)
    tags = model_tags(info, task, spec, name, stage, run["run_id"], sha)
    if store.has_smiles and not nodes:  # molecules: a pyfunc that takes SMILES, for any model
        info["mlflow"] = {**run, "model": log_smiles_model_task(
            run["run_id"], fitted, model_out, info, name,
            smiles_model_description(info, task, spec, stage, run["run_id"], model_out, sha), tags,
            store.smiles(pos[:3]), domain_artifact(store, pos, info, task))}
    elif graph_model:
        info["mlflow"] = {**run, "model": log_gin_model(
            run["run_id"], fitted.model, fitted.result.data, name,
            model_description(info, stage, run["run_id"], model_out, sha, store.num_features),
            register=not nodes, head=fitted.head, tags=tags)}


@task(name="write-model", persist_result=False, cache_policy=NO_CACHE)
def skip_training(off: dict, graphs: str, model_out: str, info_out: str) -> dict:
    """``train_nodes`` when ``nodes.parquet`` records node subsampling as off (:func:`tasks.io.nodes_off`): nothing
    is trained or logged to MLflow; ``model_nodes.pt`` holds only the reason (no tensor), ``train_nodes.json`` says
    the stage was skipped and why (``skipped``, ``reason``, ``line``)."""
    import torch

    from tmdlib.models.records import skipped_record

    name = io.dataset_name(graphs)
    with io.atomic_path(model_out) as tmp:
        torch.save({"skipped": off["line"]}, tmp)
    info = skipped_record(off, name)
    print(f"{off['line']}: train_nodes@{name} skipped (no model trained, no MLflow run)", flush=True)
    return write_model(None, model_out, info_out, info)


def write_model(model, model_out: str, info_out: str, info: dict) -> dict:
    """Write ``model.pt`` (unless ``model`` is None: already written) and ``train.json`` atomically (the JSON
    last, naming the model's sha256)."""
    if model is not None:
        save_model(model, model_out)
    info = io.stamped({**info, "model_sha256": io.sha256_file(model_out)})
    io.write_json(info_out, info)
    return info


