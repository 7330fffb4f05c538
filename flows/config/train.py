"""The train stage's typed config: :class:`TrainPaths` and :class:`TrainStageConfig` (``params.yaml``'s
``train:`` group, ``tmdsub train``'s options)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from tmdlib import InputError
from tasks import io
from tmdlib.models.policy import check_loss_option, model_for, parse_target, recipe_for
from tmdlib.models.registry import resolve_model as resolve_model_option
from tmdlib.torch.options import resolve_config

from . import _number, _paths, _pick


#: What a weighting may be (``train.weighting``).
WEIGHTINGS = ("auto", "tau", "none")


@dataclass(frozen=True)
class TrainPaths:
    """The train stage's files (dvc.yaml's ``train`` / ``train_nodes`` commands name them)."""

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


@dataclass(frozen=True)
class TrainStageConfig:
    """The train stage's options (``params.yaml``: ``train:``, with ``base.seed`` and ``base.weights``), checked on
    construction (:meth:`check`): :class:`~tmdlib.errors.InputError` names the option at fault.

    GIN options (``epochs`` ... ``bias``, ``recipe``, ``lipschitz_*``) are ignored by the other models;
    ``lipschitz_target`` > 0 sets c = target / the selection's ε (overrides ``lipschitz_budget``)."""

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
        from tmdlib.models.registry import graph_default

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
