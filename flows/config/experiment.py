"""The experiment's typed config (issue 69, item 2): :class:`ExperimentPaths` (the reports folder, the raw data, the
matrix cache) and :class:`ExperimentStageConfig` (the grid and how it runs), built once from ``tmdsub experiment``'s
options and checked there.

Its own module: its check reads :mod:`tmdlib.experiment`'s grid, which no DVC stage runs (a stage
runs every module its flow imports, ``tests/lib/house/test_lineage.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from tmdlib import InputError

from . import _pick

#: The profile that runs the molecules benchmark (:mod:`flows.molecules`) instead of the paper's grid.
MOLECULES = "molecules"


@dataclass(frozen=True)
class ExperimentPaths:
    """The experiment's folders: ``out_dir`` (``results/``, ``<profile>/``), ``raw_root`` (the shipped raw
    datasets) and the distance-matrix cache ``cache_dir`` (None: ``<out_dir>/cache``)."""

    #: Each option's help (``tmdsub ... --help`` and ``tmdsub params`` show it).
    HELP = {
        "out_dir": "Reports folder (results/, <profile>/, cache/).",
        "raw_root": "Folder of the shipped raw datasets.",
        "cache_dir": "Distance-matrix cache (default: <out-dir>/cache).",
    }

    out_dir: str = "reports"
    raw_root: str = "data/raw"
    cache_dir: str | None = None

    @property
    def cache(self) -> str:
        """The matrix cache: ``cache_dir``, else ``<out_dir>/cache``."""
        return self.cache_dir or str(Path(self.out_dir) / "cache")

    def results(self, profile: str) -> Path:
        """The results files' folder of ``profile``: ``<out_dir>/results/<profile>``."""
        return Path(self.out_dir) / "results" / profile

    def check(self) -> None:
        if not Path(self.raw_root).is_dir():
            raise InputError(str(self.raw_root), "raw data folder not found")

    @classmethod
    def from_options(cls, options: dict) -> ExperimentPaths:
        """The paths of ``tmdsub experiment``'s options (as text; an absent cache as None)."""
        return cls(**{k: (str(v) if v not in (None, "") else None) for k, v in _pick(cls, options).items()})


@dataclass(frozen=True)
class ExperimentStageConfig:
    """The experiment's options, checked on construction: the ``profile`` (``quick``, ``full``, or ``molecules``:
    the molecules benchmark, which checks its own options) with its overrides (``datasets``, ``trials``,
    ``epochs``, ``kinds``, ``archs``, ``methods``: :func:`tmdlib.experiment._grid.resolve_profile`), the molecules
    benchmark's (``models``, ``gin_datasets``, ``fractions``), how it runs (``workers``, ``torch_threads``,
    ``device``, ``prepare_threads``: numba threads computing a TMD matrix, None: the cores this process may use),
    and the reports (``report``; ``report_only``: train nothing, regenerate them from the results files)."""

    #: Each option's help (``tmdsub ... --help`` and ``tmdsub params`` show it).
    HELP = {
        "prepare_threads": ("numba threads computing a dataset's TMD matrix (no command-line option; None: the cores "
                            "this process may use)."),
        "profile": ("quick (CI: MUTAG, 3 fractions, 3 trials, few epochs) | full (the paper's grid) | molecules "
                    "(TMD coresets against the chemists' pickers on the 30 MoleculeACE sets, or --datasets NAME: "
                    "your ingested regression set)."),
        "datasets": "Comma list of built-in datasets (default: the profile's).",
        "trials": "Trials per cell (default: the profile's; quick 3, full 20).",
        "epochs": "Training epochs, graph and node runs (default: the profile's).",
        "kinds": "Comma list of graph,node (default: both).",
        "archs": "Comma list of gin (paper B.2), gin-wide-mean (2x width, mean pooling).",
        "methods": ("Comma list replacing the profile's methods: tmd, random, feature, wl, doscond, kidd, doscond-"
                    "nolabel, kidd-nolabel (graph); tmd, random, rw, kcore (node). doscond/kidd use labels."),
        "workers": ("Parallel trial processes: auto (the cores this process may use -- affinity, cgroup quota -- /"
                    " --torch-threads; printed) or a number (default: auto; quick: 1, in-process)."),
        "torch_threads": "Torch CPU threads per worker.",
        "device": "cpu | cuda[:N] | auto.",
        "report": "Write tables and plots at the end.",
        "report_only": ("Train nothing: regenerate the tables, plots and summary from <out-"
                        "dir>/results/<profile>/*.csv."),
        "models": ("molecules profile: comma list of rf (random forest on ECFP4 counts), gin (default both; the "
                   "GIN on --gin-datasets sets)."),
        "gin_datasets": "molecules profile: the GIN runs on the first N sets, largest first (default 10).",
        "fractions": "molecules profile: comma list of budgets (default 0.05,0.1,0.2,0.3).",
    }

    profile: str = "quick"
    datasets: str | None = None
    trials: int | None = None
    epochs: int | None = None
    kinds: str | None = None
    archs: str | None = None
    methods: str | None = None
    workers: str | None = None
    torch_threads: int = 1
    device: str = "cpu"
    report: bool = True
    report_only: bool = False
    models: str | None = None
    gin_datasets: int | None = None
    fractions: str | None = None
    prepare_threads: int | None = None

    def __post_init__(self):
        self.check()

    def check(self) -> None:
        """The grid (not the molecules benchmark's: its flow checks them), the torch threads, the device."""
        if self.profile != MOLECULES:  # the molecules benchmark resolves its own options
            _ = self.grid
        if self.torch_threads < 1:
            raise InputError(None, f"--torch-threads must be >= 1, got {self.torch_threads}")
        if self.profile != MOLECULES and self.device != "auto" and not (self.device == "cpu"
                                                                         or self.device.startswith("cuda")):
            raise InputError(None, "--device must be auto, cpu or cuda[:N]")

    @cached_property
    def grid(self) -> dict:
        """The profile's grid with the overrides applied (:func:`tmdlib.experiment._grid.resolve_profile`)."""
        from tmdlib.experiment._grid import resolve_profile

        return resolve_profile(self.profile, self.datasets, self.trials, self.epochs, self.kinds, self.archs,
                               self.methods)

    @classmethod
    def from_options(cls, options: dict) -> ExperimentStageConfig:
        """The config of ``tmdsub experiment``'s options; the paths among them are left to
        :class:`ExperimentPaths`."""
        return cls(**_pick(cls, options))

    @classmethod
    def from_params(cls, params: dict) -> ExperimentStageConfig:
        """The config ``params.yaml`` states (its ``experiment:`` group, none today: the command's defaults)."""
        return cls.from_options(params.get("experiment") or {})

