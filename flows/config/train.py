"""The train stage's typed config: :class:`TrainPaths` and :class:`TrainStageConfig` (``params.yaml``'s
``train:`` group, ``tmdsub train``'s options)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from tmdlib import InputError
from tasks import io
from tmdlib.models.policy import check_loss_option, model_for, parse_target, recipe_for
from tmdlib.models import resolve_model as resolve_model_option
from tmdlib.torch.options import resolve_config

from . import _number, _paths, _pick


#: What a weighting may be (``train.weighting``).
WEIGHTINGS = ("auto", "tau", "none")


@dataclass(frozen=True)
class TrainPaths:
    """The train stage's files (dvc.yaml's ``train`` / ``train_nodes`` commands name them)."""

    #: Each option's help (``tmdsub ... --help`` and ``tmdsub params`` show it).
    HELP = {
        "graphs": "Graph-store Parquet (data/graphs/<DATASET>.parquet).",
        "selection": "selection.json (train/test ids, medoids, tau, epsilon).",
        "labels": "labels.csv (graph_id,y or one column per target): the ONLY labels training reads.",
        "model_out": "Output state dict (model.pt).",
        "info_out": "Output train.json (config, device, losses, c, per-layer Phi).",
        "labels_meta": "labels.json (default: next to --labels).",
        "nodes": "nodes.parquet: train on the induced subgraphs G[S].",
    }

    graphs: str
    selection: str
    labels: str
    model_out: str
    info_out: str
    labels_meta: str | None = None
    nodes: str | None = None

    @cached_property
    def dataset(self) -> str:
        """The dataset's name (the graph store's, read once)."""
        return io.dataset_name(self.graphs)

    @property
    def stage(self) -> str:
        """The DVC stage (and MLflow run) name: ``train@NAME`` or ``train_nodes@NAME``."""
        return f"{'train_nodes' if self.nodes else 'train'}@{self.dataset}"

    @classmethod
    def from_options(cls, options: dict) -> TrainPaths:
        return _paths(cls, options)


def _model_help() -> str:
    """``--model``'s help, read from the model registry (:func:`tmdlib.models.model_names`)."""
    from tmdlib.models import model_names

    return (f"A registered model ({', '.join(model_names())}; `tmdsub models` lists them) or package.module:factory "
            "returning a scikit-learn estimator; auto = the measured default: svm for molecule regression, rf for "
            "molecule classification, else certified-gin when a Lipschitz budget/target is set, else gin.")


@dataclass(frozen=True)
class TrainStageConfig:
    """The train stage's options (``params.yaml``: ``train:``, with ``base.seed`` and ``base.weights``), checked on
    construction (:meth:`check`): :class:`~tmdlib._errors.InputError` names the option at fault.

    GIN options (``epochs`` ... ``bias``, ``recipe``, ``lipschitz_*``) are ignored by the other models;
    ``lipschitz_target`` > 0 sets c = target / the selection's ε (overrides ``lipschitz_budget``)."""

    #: Each option's help (``tmdsub ... --help`` and ``tmdsub params`` show it).
    HELP = {
        "model": _model_help(),
        "epochs": "Training epochs.",
        "hidden": "Hidden width (default 128 TU, 256 OGB).",
        "layers": "GIN layers (TMD depth = layers + 1).",
        "batch_size": "Batch size (default 16 TU, 64 OGB).",
        "lr": "Adam learning rate; auto = the recipe's.",
        "seed": "Seed of the initialisation and the batch order.",
        "device": "auto (cuda when present) | cpu | cuda[:N].",
        "pool": "Readout pooling: add (the guarantee needs it) | mean.",
        "eta": "GIN neighbour weight eta (1 pairs with Pascal TMD weights).",
        "bias": "Biases in the GIN MLPs (off: phi(0)=0, needed by the bound).",
        "weights": "TMD level weights the constant c is stated for.",
        "lipschitz_budget": ("Certified mode: spectral-norm budget of every weight matrix (projected after each "
                             "step), c = budget^(2*layers+1); 0 or none = unconstrained."),
        "lipschitz_target": ("Certified mode: the certificate c*eps to aim for, in nats (c = target / the "
                             "selection's epsilon_mean); overrides --lipschitz-budget; 0 = off."),
        "lipschitz_mode": ("Certified architecture: ball (ReLU GIN, budget per matrix) | orthogonal (MaxMin GIN, "
                           "orthonormal matrices, the budget is c itself)."),
        "torch_threads": "CPU threads of torch (1: fastest for these small models, bit-reproducible).",
        "experiment": "MLflow experiment name.",
        "log_mlflow": "Log the run to MLflow.",
        "loss": ("auto (the task's: bce binary / multi-task, ce multi-class, huber regression) | huber | l1 | mse "
                 "(regression; mse is uncertified)."),
        "huber_delta": "Huber's delta in standard deviations of the target (the loss's Lipschitz constant M).",
        "recipe": ("GIN training recipe: auto (measured: default for the GIN, paper-b2 for the certified GIN) | "
                   "paper-b2 (Adam lr 0.01, batch 16 TU / 64 OGB) | default (lr 0.001, batch 64)."),
        "weighting": ("auto (none on a pool without labels, measured on the pool benchmark; tau in benchmark mode)"
                      " | tau (cluster sizes: Corollary 3.3) | none (unit weights; Lemma 3.2 still certifies the "
                      "tau-weighted coreset loss)."),
    }

    epochs: int = 100
    hidden: int | None = None
    layers: int = 3
    batch_size: int | None = None
    lr: float | None = None
    seed: int = 0
    device: str = "auto"
    pool: str = "add"
    eta: float = 1.0
    bias: bool = False
    weights: str = "pascal"
    torch_threads: int = 1
    experiment: str = "tmdsub"
    log_mlflow: bool = True
    lipschitz_budget: Any = None
    lipschitz_mode: str | None = None
    lipschitz_target: float | str | None = None
    loss: str = "auto"
    huber_delta: float = 1.0
    model: str | None = None
    recipe: str = "paper-b2"
    weighting: str = "auto"

    def __post_init__(self):
        self.check()

    def check(self) -> None:
        """Every option checked before any file is read: the model when named, the GIN's options whatever ``auto``
        picks later, the loss, the weighting, the torch threads."""
        parse_target(self.lipschitz_target)
        check_loss_option(self.loss, self.huber_delta)
        from tmdlib.models._registry import graph_default

        spec = (resolve_model_option(model_for(self.model, self.lipschitz_budget, self.lipschitz_target))
                if self.model != "auto" else None)  # a named model is checked before any file is read
        if spec is None or not self.model or spec.takes_recipe:  # so are the GIN's, whatever auto picks later
            resolve_config("", self, recipe=recipe_for(graph_default(False), self.recipe))
        if self.weighting not in WEIGHTINGS:
            raise InputError(None, f"--weighting must be {', '.join(WEIGHTINGS[:-1])} or {WEIGHTINGS[-1]}, "
                                   f"got {self.weighting!r}")
        if int(self.torch_threads) < 1:
            raise InputError(None, f"--torch-threads must be >= 1, got {self.torch_threads}")

    @property
    def target(self) -> float | None:
        """The Lipschitz target in nats (:func:`tmdlib.models.policy.parse_target`), None when off."""
        return parse_target(self.lipschitz_target)

    @classmethod
    def from_options(cls, options: dict) -> TrainStageConfig:
        """The config of ``tmdsub train``'s options (the command's parameters: ``mlflow`` is ``log_mlflow``;
        ``--lr auto`` is None); the paths among them are left to :class:`TrainPaths`."""
        kw = _pick(cls, options)
        if "lr" in kw:
            lr = kw["lr"]
            kw["lr"] = None if lr is None or str(lr).strip().lower() in ("auto", "", "none") else _number(lr, "--lr")
        return cls(**kw)

    @classmethod
    def from_params(cls, params: dict) -> TrainStageConfig:
        """The config ``params.yaml`` states: its ``train:`` group with ``base.seed`` and ``base.weights``, and the
        command line's defaults where the file says nothing (as dvc.yaml's command would pass them)."""
        base, train = params.get("base") or {}, params.get("train") or {}
        defaults = {"lipschitz_mode": "ball", "model": "auto", "recipe": "auto"}
        return cls.from_options({**defaults, **train, **{k: base[k] for k in ("seed", "weights") if k in base}})
