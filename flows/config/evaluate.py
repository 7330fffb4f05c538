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

    #: Each option's help (``tmdsub ... --help`` and ``tmdsub params`` show it).
    HELP = {
        "graphs": "Graph-store Parquet (data/graphs/<DATASET>.parquet).",
        "selection": "selection.json (train/test ids, medoids, tau, epsilon).",
        "model": "model.pt from `tmdsub train`.",
        "train_info": "train.json from `tmdsub train` (model config).",
        "metrics_out": "Output metrics.json.",
        "plot_out": "Output bound_vs_gap.png.",
        "matrix": "TMD matrix.npy (graph-store order): checks epsilon, enables the sweep.",
        "tmd_meta": "The matrix's meta.json (depth, weights) to check against the GIN.",
        "nodes": "nodes.parquet, if the model was trained on node-subsampled graphs.",
    }

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

    #: Each option's help (``tmdsub ... --help`` and ``tmdsub params`` show it).
    HELP = {
        "confidence": "Confidence of the pool estimate's bootstrap interval (no command-line option).",
        "fractions": "Comma list of coreset fractions for the bound-vs-gap sweep, e.g. 0.05,0.1,0.2,0.5.",
        "sweep_epochs": "Epochs of each sweep model.",
        "full_epochs": "Epochs of the full-training-set model (default: as train.json).",
        "seed": "Seed of the sweep's k-medoids and models (default: train.json's).",
        "device": "auto (cuda when present) | cpu | cuda[:N].",
        "torch_threads": "CPU threads of torch (1: fastest for these small models, bit-reproducible).",
        "sample": ("Large pools: score the coreset exactly and estimate the full training loss on a uniform sample"
                   " of this many training graphs (0 = all)."),
        "experiment": "MLflow experiment name.",
        "log_mlflow": "Log the run to MLflow.",
        "trust_matrix": "Use a TMD matrix that has no meta.json beside it, unchecked.",
    }

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
