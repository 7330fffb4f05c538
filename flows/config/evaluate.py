"""The evaluate stage's typed config: :class:`EvaluatePaths` and :class:`EvaluateStageConfig` (``params.yaml``'s
``evaluate:`` group, ``tmdsub evaluate``'s options)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from tmdlib import InputError
from tasks import io

from . import _paths, _pick


@dataclass(frozen=True)
class EvaluatePaths:
    """The evaluate stage's files (dvc.yaml's ``evaluate`` / ``evaluate_nodes`` commands name them)."""

    graphs: str
    selection: str
    model: str
    train_info: str
    metrics_out: str
    plot_out: str
    matrix: str | None = None
    nodes: str | None = None
    tmd_meta: str | None = None

    @cached_property
    def dataset(self) -> str:
        """The dataset's name (the graph store's, read once)."""
        return io.dataset_name(self.graphs)

    @property
    def stage(self) -> str:
        """The DVC stage (and MLflow run) name: ``evaluate@NAME`` or ``evaluate_nodes@NAME``."""
        return f"{'evaluate_nodes' if self.nodes else 'evaluate'}@{self.dataset}"

    @classmethod
    def from_options(cls, options: dict) -> EvaluatePaths:
        return _paths(cls, options)


def parse_fractions(text: str | None) -> list[float]:
    """``"0.05,0.1,0.2"`` → sorted distinct floats in (0, 1]; empty/None → ``[]``."""
    if text is None or not str(text).strip():
        return []
    out = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            f = float(part)
        except ValueError:
            raise InputError(None, f"--fractions: {part!r} is not a number") from None
        if not 0.0 < f <= 1.0:
            raise InputError(None, f"--fractions: {f} is not in (0, 1]")
        out.append(f)
    return sorted(set(out))


@dataclass(frozen=True)
class EvaluateStageConfig:
    """The evaluate stage's options (``params.yaml``: ``evaluate:``, with ``train.device`` and ``torch_threads``),
    checked on construction; ``fractions`` is kept as the sorted tuple of the sweep's
    coreset fractions.  ``seed`` None: train.json's (the flow resolves it)."""

    fractions: Any = ()
    sweep_epochs: int = 20
    full_epochs: int | None = None
    seed: int | None = None
    device: str = "auto"
    torch_threads: int = 1
    experiment: str = "tmdsub"
    log_mlflow: bool = True
    sample: int = 0
    trust_matrix: bool = False
    confidence: float = 0.9

    def __post_init__(self):
        fr = self.fractions
        object.__setattr__(self, "fractions", tuple(parse_fractions(",".join(map(str, fr)) if isinstance(
            fr, (list, tuple)) else fr)))
        self.check()

    def check(self) -> None:
        if self.sweep_epochs < 0 or (self.full_epochs is not None and self.full_epochs < 0):
            raise InputError(None, "--sweep-epochs/--full-epochs must be >= 0")
        if self.sample and self.sample < 0:
            raise InputError(None, f"--sample must be >= 0, got {self.sample}")
        if int(self.torch_threads) < 1:
            raise InputError(None, f"--torch-threads must be >= 1, got {self.torch_threads}")
        if not (0.0 < float(self.confidence) < 1.0 and math.isfinite(float(self.confidence))):
            raise InputError(None, f"the confidence must be in (0, 1), got {self.confidence!r}")

    @classmethod
    def from_options(cls, options: dict) -> EvaluateStageConfig:
        """The config of ``tmdsub evaluate``'s options (``mlflow`` is ``log_mlflow``); paths left to
        :class:`EvaluatePaths`."""
        return cls(**_pick(cls, options))

    @classmethod
    def from_params(cls, params: dict) -> EvaluateStageConfig:
        """The config ``params.yaml`` states: ``evaluate:`` with ``train.device`` and ``train.torch_threads`` (as
        dvc.yaml's ``evaluate`` command passes them)."""
        train = params.get("train") or {}
        return cls.from_options({**(params.get("evaluate") or {}),
                                 **{k: train[k] for k in ("device", "torch_threads") if k in train}})
