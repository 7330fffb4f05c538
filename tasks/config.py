"""One typed config per stage (issue 69, item 2): the train and evaluate stages' options as frozen dataclasses, built
once (from the command line's options, or from ``params.yaml``'s groups) and checked there, before any file is read.

The flow takes the config and the stage's paths (:class:`TrainPaths`, :class:`EvaluatePaths`); the tasks take what
they need of them.  The defaults are the flows' own (a direct call ``train_flow(...)``); the command line passes every
option, with its own defaults (``tmdsub train --help``).  ``params.yaml``'s ``train:`` and ``evaluate:`` groups name
fields of these classes (a house test, ``tests/lib/house/test_stage_configs.py``, holds both to it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

from tmdlib import InputError

from . import io
from tmdlib.models.policy import check_loss_option, model_for, parse_target, recipe_for
from tmdlib.models.registry import resolve_model as resolve_model_option
from tmdlib.torch.options import resolve_config

#: A command-line option whose config field has another name.
RENAMED = {"mlflow": "log_mlflow"}
#: What a weighting may be (``train.weighting``).
WEIGHTINGS = ("auto", "tau", "none")


def _number(text, option: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        raise InputError(None, f"{option} must be a number or auto, got {text!r}") from None


def _pick(cls, options: dict) -> dict:
    """The options that are fields of ``cls`` (a command-line name mapped by :data:`RENAMED`)."""
    names = {f.name for f in fields(cls)}
    out = {}
    for key, value in options.items():
        key = RENAMED.get(key, key)
        if key in names:
            out[key] = value
    return out


def _paths(cls, options: dict):
    """``cls`` (a paths dataclass) from the command's options: every path as text, an absent one as None."""
    return cls(**{k: (str(v) if v not in (None, "") else None) for k, v in _pick(cls, options).items()})


# ----------------------------------------------------------------------------------------------
# train
# ----------------------------------------------------------------------------------------------
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


# ----------------------------------------------------------------------------------------------
# evaluate
# ----------------------------------------------------------------------------------------------
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


# ----------------------------------------------------------------------------------------------
# ingest
# ----------------------------------------------------------------------------------------------
# IngestPaths / IngestStageConfig live in tasks/ingest_config.py: a stage runs every module its flow imports
# (tests/lib/house/test_lineage.py), and this one imports the train stage's policy, which the ingest stage must
# not depend on (a change to it would rerun every ingest).


# ----------------------------------------------------------------------------------------------
# audit
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AuditPaths:
    """The audit stage's files (dvc.yaml's ``audit`` command names them): the upstream outputs the report reads
    (``graphs`` ... ``plot``, ``params``, ``lock``; ``predictions`` and ``labels`` in production), the report
    folder ``out_dir``; ``dataset`` is the ``<DATASET>`` of them all."""

    dataset: str
    graphs: str
    tmd_meta: str
    selection: str
    nodes: str
    requests: str
    manifest: str
    labels_meta: str
    train_info: str
    metrics: str
    metrics_nodes: str
    plot: str
    out_dir: str
    params: str = "params.yaml"
    lock: str = "dvc.lock"
    predictions: str | None = None
    labels: str | None = None

    @property
    def inputs(self) -> dict[str, str]:
        """The upstream outputs the facts are gathered from (:func:`tasks.audit.gather_facts`), by role."""
        return {k: getattr(self, k) for k in ("graphs", "tmd_meta", "selection", "nodes", "requests", "manifest",
                                              "labels_meta", "train_info", "metrics", "metrics_nodes", "plot",
                                              "params")}

    def check(self) -> None:
        """The dataset's name, and every input present (a missing upstream output fails before Prefect starts)."""
        from pathlib import Path

        from tmdlib.datasets import check_dataset_name

        check_dataset_name(self.dataset)
        missing = next((p for p in (*self.inputs.values(), self.predictions, self.labels)
                        if p is not None and not Path(p).is_file()), None)
        if missing is not None:
            raise InputError(Path(missing), "not found (run the pipeline up to the stage that writes it: dvc repro)")

    @classmethod
    def from_options(cls, options: dict) -> AuditPaths:
        return _paths(cls, options)


@dataclass(frozen=True)
class AuditStageConfig:
    """The audit stage's options: ``log_mlflow`` links the report from the MLflow train run (``--mlflow``)."""

    log_mlflow: bool = True

    @classmethod
    def from_options(cls, options: dict) -> AuditStageConfig:
        """The config of ``tmdsub audit``'s options (``mlflow`` is ``log_mlflow``)."""
        return cls(**_pick(cls, options))

    @classmethod
    def from_params(cls, params: dict) -> AuditStageConfig:
        """The config ``params.yaml`` states (its ``audit:`` group, none today: the command's defaults)."""
        return cls.from_options(params.get("audit") or {})


# ----------------------------------------------------------------------------------------------
# experiment
# ----------------------------------------------------------------------------------------------
# ExperimentPaths / ExperimentStageConfig live in tasks/experiment_config.py, apart for the reason the ingest
# stage's are (their check reads tmdlib.experiment's grid, which no DVC stage runs).



# ----------------------------------------------------------------------------------------------
# select
# ----------------------------------------------------------------------------------------------
#: ``--next`` fills the select config's ``next`` (params.yaml's ``select.next``).
RENAMED.update({"next_strategy": "next"})
#: The select stage's engines and k-medoids backends.
SELECT_ENGINES = ("exact", "scalable", "auto")
SELECT_BACKENDS = ("fasterpam", "sklearn-extra", "sklearn-extra-alternate")


def _one_of(option: str, value, allowed) -> None:
    if value not in allowed:
        raise InputError(None, f"{option} must be one of {', '.join(allowed)}; got {value!r}")


def parse_max_pairs(text) -> int | str:
    """``--max-pairs``: ``auto`` or a whole number >= 0 (0: no budget)."""
    text = str(text).strip().lower()
    if text == "auto" or text.isdigit():
        return text if text == "auto" else int(text)
    raise InputError(None, f"--max-pairs must be auto, 0 (no budget) or a whole number of pairs; got {text!r}")


def parse_part_size(text) -> int | str:
    """``--part-size``: ``auto`` or a whole number >= 2."""
    text = str(text).strip().lower()
    if text == "auto":
        return text
    if text.isdigit() and int(text) >= 2:
        return int(text)
    raise InputError(None, f"--part-size must be auto or a whole number of graphs (at least 2); got {text!r}")


@dataclass(frozen=True)
class SelectPaths:
    """The select stage's files (dvc.yaml's ``select`` command names them): the graph store, ``selection.json``, the
    TMD matrix of the exact engine (None: none, the scalable engine), the label ledger (None: nothing labelled) and
    the scalable engine's cache (None: no cache)."""

    graphs: str
    out: str
    matrix: str | None = None
    labelled: str | None = None
    cache_dir: str | None = None

    @classmethod
    def from_options(cls, options: dict) -> SelectPaths:
        return _paths(cls, options)


@dataclass(frozen=True)
class SelectStageConfig:
    """The select stage's options (``params.yaml``: ``select:``, with ``base.seed``, ``base.depth``,
    ``base.weights`` and ``labels.audit``), checked and normalised on construction: ``count`` 0 is None (the
    fraction is the budget), a count makes ``fraction`` None (the count is the budget), one of them is needed;
    ``weights`` parsed (checked against ``depth``), ``target`` parsed (:func:`tmdlib.select.hits.parse_target`),
    ``part_size`` / ``max_pairs`` parsed.  ``threads`` (numba threads of the scalable parts) is no command-line
    option.  The defaults are the flow's (a direct call); ``tmdsub select`` passes its own."""

    method: str = "tmd"
    fraction: float | None = 0.1
    count: int | None = None
    seed: int = 0
    test_fraction: float = 0.2
    restarts: int = 5
    backend: str = "fasterpam"
    engine: str = "auto"
    depth: int = 4
    weights: Any = "pascal"
    part_size: int | str = "auto"
    max_pairs: int | str | None = "auto"
    threads: int | None = None
    trust_matrix: bool = False
    audit: Any = "auto"
    next: str = "auto"
    control: float = 0.0
    goal: str = "model"
    target: Any = None

    def __post_init__(self):
        from tmdlib.distance.weights import parse_weights
        from tmdlib.select.hits import parse_target

        count = self.count or None  # 0: no count, the fraction is the budget
        set_ = object.__setattr__
        set_(self, "count", None if count is None else int(count))
        if count is not None:
            set_(self, "fraction", None)
        w = self.weights
        if isinstance(w, str):
            try:
                w = parse_weights(w)
            except ValueError as err:
                raise InputError(None, f"--depth/--weights: {err}") from None
        set_(self, "weights", w)
        set_(self, "target", parse_target(self.target))
        for name, parse in (("part_size", parse_part_size), ("max_pairs", parse_max_pairs)):
            if isinstance(getattr(self, name), str):  # the command line's text (a direct call may pass a number)
                set_(self, name, parse(getattr(self, name)))
        self.check()

    def check(self) -> None:
        """Every option checked before any file is read: the budget, the method, the later rounds' strategy, the
        goal, the engine and backend, the weights against the depth."""
        from tmdlib.distance.weights import resolve_weights
        from tmdlib.select import method_names
        from tmdlib.select.hits import GOALS
        from tmdlib.select.rounds import NEXT_STRATEGIES

        if self.fraction is None and self.count is None:
            raise InputError(None, "give --fraction or --count")
        try:
            resolve_weights(int(self.depth), self.weights)
        except ValueError as err:
            raise InputError(None, f"--depth/--weights: {err}") from None
        _one_of("--method", self.method, ("auto",) + tuple(method_names()))
        _one_of("--next", self.next, ("auto", *NEXT_STRATEGIES))
        _one_of("--goal", self.goal, GOALS)
        _one_of("--engine", self.engine, SELECT_ENGINES)
        _one_of("--backend", self.backend, SELECT_BACKENDS)

    @classmethod
    def from_options(cls, options: dict) -> SelectStageConfig:
        """The config of ``tmdsub select``'s options (``next_strategy`` is ``next``); the paths among them, the
        dataset and the task runner's options are the command's."""
        return cls(**_pick(cls, options))

    @classmethod
    def from_params(cls, params: dict) -> SelectStageConfig:
        """The config ``params.yaml`` states: ``select:`` with ``base.seed`` / ``depth`` / ``weights`` and
        ``labels.audit`` (as dvc.yaml's ``select`` command passes them), the command line's method default (auto)
        where the file says nothing."""
        base, labels = params.get("base") or {}, params.get("labels") or {}
        return cls.from_options({"method": "auto", **(params.get("select") or {}),
                                 **{k: base[k] for k in ("seed", "depth", "weights") if k in base},
                                 **({"audit": labels["audit"]} if "audit" in labels else {})})


# ----------------------------------------------------------------------------------------------
# molecules
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MoleculesPaths:
    """The molecules benchmark's folders (``tmdsub experiment --profile molecules``): the reports (``results/``,
    ``molecules/``), the raw datasets, and the matrices' cache (None: ``<out_dir>/cache``)."""

    out_dir: str = "reports"
    raw_root: str = "data/raw"
    cache_dir: str | None = None

    @property
    def cache(self) -> str:
        """The matrices' cache folder."""
        from pathlib import Path

        return self.cache_dir or str(Path(self.out_dir) / "cache")

    @classmethod
    def from_options(cls, options: dict) -> MoleculesPaths:
        """The folders among the command's options (an absent one: the default)."""
        return cls(**{k: str(v) for k, v in _pick(cls, options).items() if v not in (None, "")})


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
