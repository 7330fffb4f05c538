r"""Models: one interface, one registry (like :mod:`tmdlib.select`'s methods).

=====================  ==========  ==========================================================================
name                   inputs      what
=====================  ==========  ==========================================================================
``gin``                graphs      the paper's GIN (B.2 architecture), any task type; Lipschitz in TMD (c)
``certified-gin``      graphs      the GIN trained within a Lipschitz budget: an exact, small c (the certificate)
``rf``                 molecules   random forest on ECFP4 counts
``svm``                molecules   support vector machine with the Tanimoto (MinMax) kernel on ECFP4 counts
``gbm``                molecules   gradient boosting on ECFP4 counts
``chemprop``           molecules   the chemprop D-MPNN (when the ``chemprop`` package is installed)
=====================  ==========  ==========================================================================

Every caller — the train and evaluate stages, both experiment profiles, the molecules benchmark, the MLflow model,
the PyG example — finds models through :func:`get_model` / :func:`resolve_model`; a user's own scikit-learn factory
plugs in as ``"package.module:factory"``.  Importing this package imports neither torch nor RDKit: the built-in
models are built lazily.
"""
from .base import EstimatorModel, Inputs, Model
from .head import TaskHead, task_head, training_labels
from .registry import MODELS, ModelSpec, default_model, get_model, model_names, register, resolve_model
from . import builtin  # noqa: F401  (registers the built-in models)

__all__ = ["EstimatorModel", "Inputs", "Model", "ModelSpec", "MODELS", "TaskHead", "get_model", "model_names",
           "register", "resolve_model", "default_model", "task_head", "training_labels", "restore_model"]


def restore_model(config: dict, arrays: dict) -> Model:
    """A fitted model from its saved ``(config, arrays)`` (:meth:`Model.state`): the registered model named in
    ``config["name"]`` rebuilds it; a user's ``package.module:factory`` model is resolved again."""
    return resolve_model(config["name"]).restore(config, arrays)
