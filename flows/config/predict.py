"""The predict stage's typed config: :class:`PredictPaths` and :class:`PredictStageConfig` (``params.yaml``'s
``predict:`` group; ``tmdsub predict``'s options)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from tmdlib import InputError

from . import _paths, _pick


@dataclass(frozen=True)
class PredictPaths:
    """The predict stage's files: the graph store, ``selection.json`` (its audit sample calibrates the intervals),
    the model and its ``train.json``, the output folder, and a molecule file predicted instead of the pool (None: the
    pool)."""

    #: Each option's help (``tmdsub predict --help`` and ``tmdsub params`` show it).
    HELP = {
        "graphs": "Graph store (default data/graphs/<DATASET>.parquet).",
        "selection": "selection.json (its audit sample calibrates the intervals; data/selection/<DATASET>/).",
        "model": "Model file (default data/models/<DATASET>/model.pt).",
        "train_info": "The model's train.json (beside the model file).",
        "out_dir": "Output folder (default data/predictions/<DATASET>).",
        "smiles_csv": ("Predict for the molecules of this CSV (a smiles column) instead of the pool; rows without a "
                       "usable molecule get a reason."),
    }

    graphs: str
    selection: str
    model: str
    train_info: str
    out_dir: str
    smiles_csv: str | None = None

    @classmethod
    def from_options(cls, options: dict) -> PredictPaths:
        return _paths(cls, options)


@dataclass(frozen=True)
class PredictStageConfig:
    """The predict stage's options, checked on construction: the confidence in (0, 1), the workers (a number or
    ``auto``, resolved by the flow)."""

    #: Each option's help (``tmdsub predict --help`` and ``tmdsub params`` show it).
    HELP = {
        "confidence": ("Coverage of the prediction intervals / sets (split-conformal on the labelled audit "
                       "sample)."),
        "experiment": "The MLflow experiment the run is logged to (no command-line option).",
        "log_mlflow": "Log the run to MLflow.",
        "workers": ("Processes (molecule models) or torch threads (graph models) sharing the pool's chunks: auto "
                    "(the cores this process may use: affinity, cgroup quota; printed) or a number."),
    }

    confidence: float = 0.9
    experiment: str = "tmdsub"
    log_mlflow: bool = True
    workers: int | str = 1

    def __post_init__(self):
        c = float(self.confidence)
        if not (0.0 < c < 1.0 and math.isfinite(c)):
            raise InputError(None, f"--confidence must be in (0, 1), got {self.confidence}")

    @classmethod
    def from_options(cls, options: dict) -> PredictStageConfig:
        return cls(**_pick(cls, options))

    @classmethod
    def from_params(cls, params: dict) -> PredictStageConfig:
        """The config ``params.yaml`` states: its ``predict:`` group."""
        return cls.from_options(params.get("predict") or {})
