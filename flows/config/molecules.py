"""The molecules benchmark's typed config: :class:`MoleculesPaths` and :class:`MoleculesStageConfig`
(``tmdsub experiment --profile molecules``'s options)."""
from __future__ import annotations

from dataclasses import dataclass

from tmdlib import InputError

from . import _pick
from .experiment import ExperimentPaths


@dataclass(frozen=True)
class MoleculesPaths(ExperimentPaths):
    """The molecules benchmark's folders (``tmdsub experiment --profile molecules``): the experiment's
    (:class:`flows.config.experiment.ExperimentPaths`: the reports, the raw datasets, the matrices' cache)."""


@dataclass(frozen=True)
class MoleculesStageConfig:
    """The molecules benchmark's options (no ``params.yaml`` group: a benchmark, run from the command line): the
    profile's overrides (comma lists of ``datasets``, ``methods``, ``models``, ``fractions``; ``trials``,
    ``gin_datasets``), read and checked by :func:`tmdlib.experiment.molecules.molecules_profile` (the flow's first
    step, the command's before it; not here: the pipeline's stages, which read this module, do not run the
    benchmark's code), and ``torch_threads``, checked on construction.  ``threads``: numba threads of each set's TMD
    matrix (None: the cores this process may use); ``report_only``: train nothing, only the reports."""

    datasets: str | None = None
    trials: int | None = None
    methods: str | None = None
    models: str | None = None
    fractions: str | None = None
    gin_datasets: int | None = None
    device: str = "cpu"
    torch_threads: int = 1
    threads: int | None = None
    report: bool = True
    report_only: bool = False

    def __post_init__(self):
        self.check()

    def check(self) -> None:
        if int(self.torch_threads) < 1:
            raise InputError(None, f"--torch-threads must be >= 1, got {self.torch_threads}")

    @property
    def overrides(self) -> tuple:
        """The profile's overrides, in :func:`tmdlib.experiment.molecules.molecules_profile`'s order."""
        return self.datasets, self.trials, self.methods, self.models, self.fractions, self.gin_datasets

    @classmethod
    def from_options(cls, options: dict) -> MoleculesStageConfig:
        """The config of ``tmdsub experiment --profile molecules``'s options (its other options left out)."""
        return cls(**_pick(cls, options))
