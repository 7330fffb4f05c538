r"""Models: one interface, one registry (like :mod:`tmdlib.select`'s methods).

The registry (:mod:`tmdlib.models._registry`) is the one list of model names: ``tmdsub models`` prints it (name,
inputs, task types, one line each).  Each built-in model is declared in its own file — torch models in
``tmdlib/torch/`` (the GIN, the certified GIN, chemprop), fingerprint models in ``tmdlib/chem/`` (svm, rf, gbm,
lgbm) — and imported on the first lookup of its name.

Every caller — the train and evaluate stages, both experiment profiles, the molecules benchmark and its reports, the
MLflow model, the PyG example — finds models through :func:`get_model` / :func:`resolve_model`; a user's own
scikit-learn factory plugs in as ``"package.module:factory"``.  Importing this package imports neither torch nor
RDKit.
"""
from ._base import Inputs, Model
from ._head import TaskHead, task_head, training_labels
from ._registry import (ENTRY_POINTS, MODELS, ModelSpec, all_models, default_model, get_model, model_names, register,
                       resolve_model)

__all__ = ["Inputs", "Model", "ModelSpec", "MODELS", "ENTRY_POINTS", "TaskHead", "all_models", "get_model",
           "model_names", "register", "resolve_model", "default_model", "task_head", "training_labels",
           "restore_model"]


def restore_model(config: dict, arrays: dict) -> Model:
    """A fitted model from its saved ``(config, arrays)`` (:meth:`Model.state`): the registered model named in
    ``config["name"]`` rebuilds it; a user's ``package.module:factory`` model is resolved again."""
    return resolve_model(config["name"]).restore(config, arrays)
