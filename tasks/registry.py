"""The trained model as an MLflow model: logged, registered as ``tmdsub-<DATASET>``, tagged with its test metric by
the evaluate stage, and promoted to the alias ``champion`` by the scheduled retraining when its test metric is not
worse than the current champion's (:func:`promote_champions`).

Called from the flow process only.  A molecule pool's model (any registered model) is a pyfunc that takes SMILES
(:func:`log_smiles_model`, :mod:`tasks.smiles_model`: models from code, weights as plain tensors); a GIN on other
graphs is the GIN behind one dense-batch tensor (:class:`tmdlib.torch.serving.DenseBatchGIN`) exported with
``torch.export`` (:func:`log_gin_model`, MLflow's ``pt2`` format): it loads without tmdlib.  Neither unpickles code.
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path

from prefect import task

from tmdlib import InputError
from tmdlib.models.policy import DECISION, REASON, champion_verdict, decision_line, evaluation_tags, registered_version

from .tracking import tracking_uri

__all__ = ["registered_name", "log_gin_model", "log_smiles_model", "tag_evaluation", "consider_for_champion",
           "promote_champions", "CHAMPION"]

CHAMPION = "champion"


def registered_name(dataset: str) -> str:
    """``tmdsub-<DATASET>``: the registered model of a dataset's coreset GIN."""
    return f"tmdsub-{dataset}"


@contextlib.contextmanager
def _fluent_run(run_id: str):
    """MLflow's fluent API pointed at :func:`tasks.tracking.tracking_uri` and run ``run_id`` (``log_model`` logs to
    the active run); the previous tracking URI (and ``MLFLOW_TRACKING_URI``) are restored after."""
    import os

    import mlflow
    from mlflow.tracking._tracking_service.utils import _use_tracking_uri

    env = os.environ.get("MLFLOW_TRACKING_URI")
    try:
        with _use_tracking_uri(tracking_uri()):
            with mlflow.start_run(run_id=run_id, nested=mlflow.active_run() is not None):
                yield
    finally:
        if env is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = env


def _signature(out_dim: int = 1):
    import numpy as np
    from mlflow.models import ModelSignature
    from mlflow.types import Schema, TensorSpec

    return ModelSignature(
        inputs=Schema([TensorSpec(np.dtype("float32"), (-1, -1, -1))]),
        outputs=Schema([TensorSpec(np.dtype("float32"), (-1, int(out_dim)))]))


def _logged(info, name: str | None, description: str, tags: dict | None) -> dict:
    """``{"model_id", "model_uri", "registered_model", "version"}`` of a logged model; a registered version gets the
    description and the tags."""
    from mlflow import MlflowClient

    out = {"model_id": info.model_id, "model_uri": info.model_uri, "registered_model": name,
           "version": None if info.registered_model_version is None else str(info.registered_model_version)}
    if name is not None and out["version"] is not None:
        client = MlflowClient(tracking_uri=tracking_uri())
        client.update_model_version(name, out["version"], description=description)
        for key, value in (tags or {}).items():
            client.set_model_version_tag(name, out["version"], key, str(value))
    return out


def log_gin_model(run_id: str, model, data: list, dataset: str, description: str, register: bool = True,
                  tags: dict | None = None, head=None) -> dict:
    """Log ``model`` (a trained GIN) to run ``run_id`` as an MLflow PyTorch model; register it as
    ``tmdsub-<DATASET>`` when ``register``.

    The logged model is :class:`tmdlib.torch.serving.DenseBatchGIN` (input: float32 ``(B, n, 1 + d + n)``, one
    graph per row: node mask, features, adjacency; output ``(B, D)``: logits, or for regression (``head``, a
    :class:`tmdlib.torch.fit.TaskHead`) predictions in the targets' own units), with that signature and an input
    example made of training graphs from ``data``.

    Returns
    -------
    dict
        ``{"model_id", "model_uri", "registered_model", "version"}`` (the last two None when not registered).
    """
    import mlflow.pytorch
    import torch

    from tmdlib.torch.serving import ARTIFACT_NAME, DenseBatchGIN, export_example

    in_dim = int(model.config["in_dim"])
    wrapped = DenseBatchGIN(model, target_scale=None if head is None else head.standardizer.target_scale).eval()
    name = registered_name(dataset) if register else None
    torch_version = torch.__version__.split("+")[0]
    with _fluent_run(run_id):
        info = mlflow.pytorch.log_model(
            wrapped, name=ARTIFACT_NAME, signature=_signature(int(model.config["out_dim"])),
            input_example=export_example(data, in_dim),
            serialization_format="pt2", pip_requirements=[f"torch=={torch_version}"], registered_model_name=name,
            tags={k: str(v) for k, v in (tags or {}).items()})
    return _logged(info, name, description, tags)


def log_smiles_model(run_id: str, model_out: str, info_out: str, dataset: str, description: str,
                     register: bool = True, tags: dict | None = None, example: list | None = None,
                     artifacts: dict | None = None) -> dict:
    """Log a molecule pool's trained model (any registered model) to run ``run_id`` as an MLflow pyfunc that takes
    SMILES (:mod:`tasks.smiles_model`, "models from code": the weights as plain tensors and the config as artifacts,
    nothing pickled; ``artifacts`` adds more, e.g. ``domain``); register it as ``tmdsub-<DATASET>`` when
    ``register``.

    Returns
    -------
    dict
        ``{"model_id", "model_uri", "registered_model", "version"}`` (the last two None when not registered).
    """
    import mlflow.pyfunc
    import pandas as pd

    name = registered_name(dataset) if register else None
    trained = json.loads(Path(info_out).read_text(encoding="utf-8"))
    prop = (trained.get("labels_meta") or {}).get("name")  # labels.name: what prediction / lower / upper are in
    tags = {**(tags or {}), **({"property": prop} if prop else {})}
    with _fluent_run(run_id):
        info = mlflow.pyfunc.log_model(
            name="model", python_model=str(Path(__file__).with_name("smiles_model.py")),
            artifacts={"model": str(model_out), "train_info": str(info_out), **(artifacts or {})},
            input_example=pd.DataFrame({"smiles": list(example or ["CCO"])}), registered_model_name=name,
            tags={k: str(v) for k, v in tags.items()}, metadata={"property": prop} if prop else None)
    return {**_logged(info, name, description, tags), "kind": "smiles-pyfunc"}


def tag_evaluation(registered: dict | None, metric: str, value, evaluate_run_id: str | None) -> bool:
    """Tag the model version named in train.json's ``mlflow.model`` with its test metric (``test_metric``,
    ``test_value``, ``evaluate_run_id``): what :func:`consider_for_champion` compares.  False when the model was
    not registered."""
    from mlflow import MlflowClient

    if not registered or not registered.get("registered_model") or not registered.get("version"):
        return False
    client = MlflowClient(tracking_uri=tracking_uri())
    name, version = registered["registered_model"], str(registered["version"])
    for key, tag in evaluation_tags(metric, value, evaluate_run_id).items():
        client.set_model_version_tag(name, version, key, tag)
    return True


def consider_for_champion(name: str, version: str, when: str = "") -> dict:
    """Apply :func:`tmdlib.models.policy.champion_decision` to version ``version`` of registered model ``name``: set
    the alias when it wins, and record the decision on the version (tags ``champion_decision``, ``champion_reason`` and a line
    of its description) either way.

    Returns
    -------
    dict
        ``{"registered_model", "version", "metric", "value", "champion_before", "champion_value", "promoted",
        "reason"}``.
    """
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = MlflowClient(tracking_uri=tracking_uri())
    new = client.get_model_version(name, version)
    try:
        champ = client.get_model_version_by_alias(name, CHAMPION)
    except MlflowException:
        champ = None
    verdict = champion_verdict(str(version), new.tags, None if champ is None else str(champ.version),
                               {} if champ is None else champ.tags)
    if verdict["promoted"] and verdict["champion_before"] != str(version):
        client.set_registered_model_alias(name, CHAMPION, str(version))
    client.set_model_version_tag(name, version, DECISION, "promoted" if verdict["promoted"] else "not promoted")
    client.set_model_version_tag(name, version, REASON, verdict["reason"])
    line = decision_line(verdict["promoted"], verdict["reason"], when)
    client.update_model_version(name, version, description="\n\n".join(filter(None, [new.description, line])))
    return {"registered_model": name, "version": str(version), **verdict}


@task(name="promote-champions", persist_result=False)
def promote_champions(datasets: list[str], when: str = "") -> list[dict]:
    """For each dataset, the model version named in ``data/models/<DATASET>/train.json`` is considered for the
    alias ``champion`` (:func:`consider_for_champion`), unless an earlier run already decided on it (a ``dvc
    repro`` that did not retrain).  Returns one entry per dataset (with ``dataset`` and, for versions decided
    earlier, ``decided_before: true``)."""
    from mlflow import MlflowClient

    out = []
    for ds in datasets:
        path = Path("data/models") / ds / "train.json"
        if not path.is_file():
            out.append({"dataset": ds, "promoted": False, "reason": f"no {path}"})
            continue
        try:
            name, version = registered_version(json.loads(path.read_text()))
        except json.JSONDecodeError as err:
            raise InputError(path, f"not valid JSON: {err}") from None
        if not name or not version:
            out.append({"dataset": ds, "promoted": False, "reason": "the model of train.json is not registered"})
            continue
        tags = MlflowClient(tracking_uri=tracking_uri()).get_model_version(name, str(version)).tags
        if DECISION in tags:
            out.append({"dataset": ds, "registered_model": name, "version": str(version), "decided_before": True,
                        "promoted": tags[DECISION] == "promoted", "reason": tags.get(REASON, "")})
            continue
        out.append({"dataset": ds, **consider_for_champion(name, str(version), when)})
    return out
