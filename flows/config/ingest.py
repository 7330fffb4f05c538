"""The ingest stage's typed config (issue 69, item 2): :class:`IngestPaths` (where the dataset comes from and where
its store goes) and :class:`IngestStageConfig` (how it is read), built once from ``tmdsub ingest``'s options (which
dvc.yaml fills from ``params.yaml``'s ``ingest:`` group) or from that group directly, and checked there.

Its own module so that the ingest stage runs none of the other stages'
code: a change to the train stage's policy does not rerun every ingest (``tests/lib/house/test_lineage.py``).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from tmdlib import InputError
from tmdlib.datasets.sources import (FEATURES, INVALID_RULES, Source, SourceReading, check_sources, choose_reading,
                                     resolve_source, split_names)


def _choice(option: str, value, allowed) -> None:
    if value not in allowed:
        raise InputError(None, f"{option} must be one of {', '.join(allowed)}; got {value!r}")


def _known(cls, options: dict) -> dict:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in options.items() if k in names}


@dataclass(frozen=True)
class IngestPaths:
    """Where the dataset comes from (a built-in or a user's ``dataset`` in ``raw_root``, its ``source`` entry of
    ``base.datasets``, or a ``tu_dir`` / ``smiles_csv`` / ``parquet`` source named ``name``), where its store goes
    (``out``; None: ``data/graphs/<NAME>.parquet``) and the folder of batches appended to it (``append_dir``)."""

    dataset: str | None = None
    source: str | None = None
    tu_dir: str | None = None
    smiles_csv: str | None = None
    parquet: str | None = None
    name: str | None = None
    raw_root: str = "data/raw"
    out: str | None = None
    append_dir: str | None = None

    @cached_property
    def resolved(self) -> Source:
        """The source (:func:`tmdlib.datasets.sources.resolve_source`: kind, path, name, checksum folder)."""
        return resolve_source(self.dataset, self.raw_root, self.tu_dir, self.smiles_csv, self.parquet, self.name,
                              self.source)

    @property
    def store(self) -> str:
        """The graph store written: ``out``, else ``data/graphs/<NAME>.parquet``."""
        return self.out or str(Path("data") / "graphs" / f"{self.resolved.name}.parquet")

    @classmethod
    def from_options(cls, options: dict) -> IngestPaths:
        """The paths of ``tmdsub ingest``'s options (every path as text, an absent one as None)."""
        kw = {k: (str(v) if v not in (None, "") else None) for k, v in _known(cls, options).items()}
        if kw.get("raw_root") is None:
            kw.pop("raw_root", None)
        return cls(**kw)


@dataclass(frozen=True)
class IngestStageConfig:
    """The ingest stage's options (``params.yaml``: ``ingest:``, with ``base.task``), checked on construction.

    The column options (``smiles_column``, ``label_column``, ``split_column``, ``keep_column``, ``id_column``;
    None: not given) win over a dataset's own settings (``sources``, ``params.yaml``'s ``ingest.sources``, read
    from ``params`` when not given), which win over the defaults; a dataset's own ``task`` wins over ``task``
    (``base.task``, every dataset's default).  ``workers``: auto or a number of processes converting a molecule
    source; ``limit``: its first molecules only (0: all); ``standin``: a flagged label stand-in for an unlabelled
    pool (benchmark mode only; ``none``); ``invalid``: ``skip`` or ``refuse`` a SMILES rdkit cannot parse."""

    features: str = "onehot"
    smiles_column: str | None = None
    label_column: Any = None
    split_column: str | None = None
    keep_column: Any = None
    task: str = "auto"
    params: str | None = None
    workers: Any = "auto"
    limit: int | None = 0
    standin: str | None = "none"
    id_column: str | None = None
    invalid: str = "skip"
    sources: Any = None

    def __post_init__(self):
        for key in ("label_column", "keep_column"):
            names = split_names(getattr(self, key))
            object.__setattr__(self, key, tuple(names) if names is not None else None)
        sources = self.sources
        if sources is None and self.params:
            sources = _read_sources(self.params)
        object.__setattr__(self, "sources", check_sources(sources, self.params))
        self.check()

    def check(self) -> None:
        """Every choice checked before any file is read (a dataset's own settings when built)."""
        from tmdlib.datasets.smiles import STANDIN_RULES
        from tmdlib.datasets.task import TASK_TYPES

        _choice("--features", self.features, FEATURES)
        _choice("--task", self.task or "auto", ("auto", *TASK_TYPES))
        _choice("--standin", self.standin or "none", ("none", *STANDIN_RULES))
        _choice("--invalid", self.invalid, INVALID_RULES)
        if self.limit is not None and int(self.limit) < 0:
            raise InputError(None, f"--limit must be >= 0, got {self.limit}")

    def reading(self, name: str) -> SourceReading:
        """How dataset ``name`` is read: the options over its own settings over the defaults
        (:func:`tmdlib.datasets.sources.choose_reading`), with the features, the limit and the stand-in."""
        chosen = choose_reading(self.sources.get(name) or {}, smiles_column=self.smiles_column,
                                label_columns=self.label_column, split_column=self.split_column,
                                keep_columns=self.keep_column, task=self.task, id_column=self.id_column)
        return replace(chosen, node_attributes=self.features == "onehot+attributes",
                       limit=int(self.limit) if self.limit else None, standin=self.standin)

    @classmethod
    def from_options(cls, options: dict) -> IngestStageConfig:
        """The config of ``tmdsub ingest``'s options (``--params`` as text); the paths among them are left to
        :class:`IngestPaths`."""
        kw = _known(cls, options)
        if kw.get("params") is not None:
            kw["params"] = str(kw["params"])
        return cls(**kw)

    @classmethod
    def from_params(cls, params: dict) -> IngestStageConfig:
        """The config ``params.yaml`` states: its ``ingest:`` group with ``base.task`` (as dvc.yaml's ``ingest``
        command passes them)."""
        base = params.get("base") or {}
        return cls.from_options({**(params.get("ingest") or {}), **({"task": base["task"]} if "task" in base else {})})


def _read_sources(path: str) -> dict:
    """``ingest.sources`` of the parameters file ``path`` (not yet checked)."""
    import yaml

    try:
        params = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as err:
        raise InputError(Path(path), f"cannot read the parameters: {err}") from None
    return (params.get("ingest") or {}).get("sources") or {}
