r"""The registry of models: the one list of model names the train stage, the evaluate stage, the experiment grids,
the molecules benchmark and its reports, the MLflow model, ``tmdsub models`` and the PyG example read.

A model is a :class:`~tmdlib.models._base.Model` (fit on a labelled, weighted selection of a pool; outputs;
its state as plain arrays; whether it is Lipschitz in TMD).  A :class:`ModelSpec` says how to build one from
options, how to rebuild a fitted one from its saved state, which task types and which input kind it takes
(``"graphs"``: the pool's graphs; ``"molecules"``: their SMILES), and whether the certificate of Lemma 3.2 may
be stated for it.

A built-in model is declared once, in its own file, as a ``ModelSpec`` (``tmdlib/torch/`` for torch code,
``tmdlib/chem/`` for RDKit), and named here in :data:`ENTRY_POINTS` (name → ``"module:attribute"``): the module
is imported on the first lookup of that name, so ``import tmdlib.models`` imports neither torch nor RDKit, and
this package never imports the packages that implement the models (no import loop between them).

Registering a model at run time::

    register(ModelSpec("mine", make=lambda options: MyModel(**options), restore=MyModel.from_state,
                       inputs="molecules", tasks=("regression",), summary="one line for --help"))

A user's own model needs no registration: :func:`resolve_model` also takes ``"package.module:factory"``, a
callable returning a scikit-learn estimator (trained on the molecules' ECFP4 counts with
``fit(X, y, sample_weight)`` / ``predict(X)``) or a :class:`~tmdlib.models._base.Model`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

from .._errors import InputError
from ..datasets._task import TASK_TYPES as ALL_TASKS  # the one list of task types

__all__ = ["ModelSpec", "register", "get_model", "model_names", "all_models", "resolve_model", "default_model",
           "MODELS", "INPUTS", "ENTRY_POINTS", "GRAPH_DEFAULTS", "graph_default", "auto_recipe"]

#: What a model reads of the pool: its graphs, or its molecules (SMILES).
INPUTS = ("graphs", "molecules")


@dataclass(frozen=True)
class ModelSpec:
    """A model as registered.

    Attributes
    ----------
    name : str
        What users type (``train.model``, ``--model``), lower case.
    make : callable
        ``make(options: dict) -> Model`` (unfitted); ``options`` are the model's own keywords.
    restore : callable
        ``restore(config: dict, arrays: dict) -> Model`` (fitted), from :meth:`Model.state`.
    inputs : str
        ``"graphs"`` or ``"molecules"`` (:data:`INPUTS`).
    tasks : tuple of str
        The task types it takes.
    lipschitz : bool
        Its outputs are Lipschitz in TMD with a constant it reports (the GIN): Lemma 3.2 / Corollary 3.3 are
        stated with that constant.  False: the τ-weighted coreset loss is still reported, no ``c·ε``.
    summary : str
        One line for ``tmdsub models`` and ``--help``.
    defaults : dict
        Options used when none are given (shown by ``tmdsub train --help`` and the docs).
    title : str
        The model's name in reports (the molecules benchmark's pages); ``name`` when empty.
    seeded : bool
        It takes a ``seed`` option (the experiments seed it with the trial).
    quick : dict
        Options that make it small and fast (a few epochs, few trees) for the conformance tests and smoke runs.
    auto_recipe : str
        For a model trained by the train stage's GIN options (``train.recipe``, epochs, hidden, layers, lr, ...: the
        graph models), the recipe ``train.recipe: auto`` gives it (:data:`tmdlib.torch.model.RECIPES`); empty for
        every other model (:attr:`takes_recipe`).
    certified : bool
        Trained within a Lipschitz budget by default (the certified mode): its ``defaults`` hold
        ``lipschitz_budget`` and ``lipschitz_mode``, used when the user sets neither a budget nor a target.
    """

    name: str
    make: Callable
    restore: Callable
    inputs: str = "graphs"
    tasks: tuple = ALL_TASKS
    lipschitz: bool = False
    summary: str = ""
    defaults: dict = field(default_factory=dict)
    title: str = ""
    seeded: bool = False
    quick: dict = field(default_factory=dict)
    auto_recipe: str = ""
    certified: bool = False

    @property
    def takes_recipe(self) -> bool:
        """It is trained by the train stage's GIN options (a recipe, epochs, hidden, layers, ...)."""
        return bool(self.auto_recipe)

    def build(self, options: dict | None = None):
        """An unfitted model with ``defaults`` updated by ``options``."""
        return self.make({**self.defaults, **(options or {})})

    def check_task(self, task_type: str) -> None:
        if task_type not in self.tasks:
            raise InputError(None, f"model {self.name!r} takes {', '.join(self.tasks)} tasks, not {task_type}")


#: The built-in models: name -> ``"module:attribute"`` of its :class:`ModelSpec`, declared in the model's own file
#: and imported on the first lookup of the name (this order is the order of ``tmdsub models`` and of the reports).
ENTRY_POINTS = {
    "svm": "tmdlib.chem.models:SVM",
    "rf": "tmdlib.chem.models:RF",
    "gbm": "tmdlib.chem.models:GBM",
    "lgbm": "tmdlib.chem.lgbm:LGBM",
    "chemprop": "tmdlib.torch.chemprop:CHEMPROP",
    "gin": "tmdlib.torch.model:GIN",
    "certified-gin": "tmdlib.torch.model:CERTIFIED_GIN",
}

#: The models loaded so far (built-in ones on their first lookup) and those registered at run time.
MODELS: dict[str, ModelSpec] = {}


def _attribute(ref: str):
    """The object ``"package.module:attribute"`` names (imported)."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def register(spec: ModelSpec) -> ModelSpec:
    """Add a model (its name must be new, its input kind and task types known); returns it."""
    if spec.name in MODELS or spec.name in ENTRY_POINTS:
        raise ValueError(f"model {spec.name!r} is already registered")
    _check(spec)
    MODELS[spec.name] = spec
    return spec


def _check(spec: ModelSpec) -> None:
    if spec.inputs not in INPUTS:
        raise ValueError(f"model {spec.name!r}: inputs must be one of {INPUTS}, got {spec.inputs!r}")
    if not set(spec.tasks) <= set(ALL_TASKS) or not spec.tasks:
        raise ValueError(f"model {spec.name!r}: unknown task types {sorted(set(spec.tasks) - set(ALL_TASKS))}")


def model_names() -> tuple[str, ...]:
    """Every model name: the built-in ones (:data:`ENTRY_POINTS`, imported nothing) then those registered at run
    time, in registration order."""
    return tuple(ENTRY_POINTS) + tuple(n for n in MODELS if n not in ENTRY_POINTS)


def get_model(name: str) -> ModelSpec:
    """The model ``name`` (a built-in one's module is imported on its first lookup); :class:`InputError` listing
    the known ones otherwise."""
    if name in MODELS:
        return MODELS[name]
    if name not in ENTRY_POINTS:
        raise InputError(None, f"unknown model {name!r}: known models are {', '.join(model_names())}, "
                               f"or 'package.module:factory'")
    spec = _attribute(ENTRY_POINTS[name])
    if not isinstance(spec, ModelSpec) or spec.name != name:
        raise TypeError(f"{ENTRY_POINTS[name]} is not the ModelSpec of {name!r}")
    _check(spec)
    MODELS[name] = spec
    return spec


def all_models() -> list[ModelSpec]:
    """Every model's spec, in :func:`model_names` order (imports every built-in model's module)."""
    return [get_model(n) for n in model_names()]


def resolve_model(name: str) -> ModelSpec:
    """A registered model, or the spec of a user's factory ``"package.module:factory"``.

    The factory is imported (the user's own code; the working directory — the repository the pipeline runs in — is
    on the import path) and called once with no argument to check what it returns: a
    :class:`~tmdlib.models._base.Model`, or an object with ``fit`` and ``predict`` (a scikit-learn estimator, then
    trained on the molecules' ECFP4 counts).
    """
    if ":" not in str(name):
        return get_model(str(name))
    from ._base import Model

    import os
    import sys

    module, _, attr = str(name).partition(":")
    if os.getcwd() not in sys.path:  # the user's module may live in the repository the pipeline runs in
        sys.path.append(os.getcwd())
    try:
        factory = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise InputError(None, f"model {name!r}: cannot import {attr!r} from {module!r} ({err})") from None
    if not callable(factory):
        raise InputError(None, f"model {name!r}: {attr!r} is not callable")
    probe = factory()
    if isinstance(probe, Model):
        return ModelSpec(name, make=lambda options: factory(**options), restore=type(probe).from_state,
                         inputs=probe.inputs, tasks=probe.tasks, lipschitz=False, summary=f"user model {name}")
    if not (hasattr(probe, "fit") and hasattr(probe, "predict")):
        raise InputError(None, f"model {name!r}: the factory must return a scikit-learn estimator (fit / predict) "
                               f"or a tmdlib.models.Model, got {type(probe).__name__}")
    classifier = hasattr(probe, "predict_proba")
    EstimatorModel = _attribute("tmdlib.chem.estimator:EstimatorModel")  # the ECFP4 adapter (RDKit's side)
    return ModelSpec(name, make=lambda options: EstimatorModel(factory(**options), name=name),
                     restore=EstimatorModel.from_state, inputs="molecules",
                     tasks=("binary", "multiclass") if classifier else ("regression",), lipschitz=False,
                     summary=f"user estimator {name} on ECFP4 counts")


#: Labelled training molecules above which ``auto`` trains ``lgbm`` instead of the Tanimoto SVM: the SVM's kernel
#: matrix holds :math:`8n^2` bytes (0.8 GB at 10,000, 2.0 GB at 16,000) and libsvm's time grows faster than
#: :math:`n^2`.
SVM_MAX_TRAIN = 10_000


#: The measured default model on molecules per task type, (at most, over) :data:`SVM_MAX_TRAIN` labelled training
#: molecules (:func:`default_model`); a type not listed (multi-task panels) takes the GIN.
MOLECULE_DEFAULTS = {"regression": ("svm", "lgbm"), "binary": ("rf", "rf"), "multiclass": ("rf", "rf")}


def default_model(molecules: bool, task, certified: bool = True, n_train: int = 0) -> str:
    """The model ``train.model: auto`` trains, chosen by measurement (BENCHMARKS.md, reports/results/molecules/):

    * molecules (the pool has SMILES) with a regression task: ``svm`` — the Tanimoto SVM averages 0.644 test RMSE
      over the 30 MoleculeACE sets at full data (the published best single method: 0.671), the forest 0.677, the
      GIN 0.799 (worse than the forest and the SVM on 30 of 30 sets; reports/results/molecules/full_data.md);
      with more than :data:`SVM_MAX_TRAIN` labelled training molecules (``n_train``; 1 % of MOSES is 15,845)
      ``lgbm`` — LightGBM on the same counts, 0.660 on those 30 sets (2.5 % above the SVM), linear in memory;
    * molecules with a binary or multi-class task: ``rf`` — test ROC-AUC at full data on OGB's scaffold splits:
      ogbg-molbace rf 0.852 / svm 0.819 / GIN 0.747, ogbg-molbbbp rf 0.690 / svm 0.685 / GIN 0.614
      (benchmarks/ogb_classification_defaults.py);
    * anything else (graphs without SMILES; multi-task panels): the certified GIN when ``certified`` (a Lipschitz
      budget or target is set: the informative certificate of ``make run`` on MUTAG), else the GIN.
    """
    if molecules and task.type in MOLECULE_DEFAULTS:
        small, large = MOLECULE_DEFAULTS[task.type]
        return large if int(n_train) > SVM_MAX_TRAIN else small
    return graph_default(certified)


#: The graph models ``auto`` trains where no molecule model applies (and a ``train.json`` written before models were
#: registered held): by whether the certified mode is asked for (:func:`graph_default`).
GRAPH_DEFAULTS = {False: "gin", True: "certified-gin"}


def graph_default(certified: bool) -> str:
    """The graph model trained when no molecule model applies: the certified GIN when ``certified`` (a Lipschitz
    budget or target is set), else the GIN (:data:`GRAPH_DEFAULTS`)."""
    return GRAPH_DEFAULTS[bool(certified)]


def auto_recipe(name: str) -> str:
    """The GIN recipe ``train.recipe: auto`` means for the model ``name`` (:attr:`ModelSpec.auto_recipe`):
    ``default`` for a model that names none, a user's model or an unknown name."""
    return (get_model(name).auto_recipe if name in model_names() else "") or "default"
