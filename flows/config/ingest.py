"""The ingest stage's typed config (issue 69, item 2): :class:`IngestPaths` (where the dataset comes from and where
its store goes) and :class:`IngestStageConfig` (how it is read), built once from ``tmdsub ingest``'s options (which
dvc.yaml fills from ``params.yaml``'s ``ingest:`` group) or from that group directly, and checked there.

Its own module so that the ingest stage runs none of the other stages'
code: a change to the train stage's policy does not rerun every ingest (``tests/lib/house/test_lineage.py``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from tmdlib import InputError

from . import _pick, one_of
from tmdlib.datasets.sources import (FEATURES, INVALID_RULES, Source, SourceReading, check_sources, choose_reading,
                                     resolve_source, split_names)


@dataclass(frozen=True)
class IngestPaths:
    """Where the dataset comes from (a built-in or a user's ``dataset`` in ``raw_root``, its ``source`` entry of
    ``base.datasets``, or a ``tu_dir`` / ``smiles_csv`` / ``parquet`` source named ``name``), where its store goes
    (``out``; None: ``data/graphs/<NAME>.parquet``) and the folder of batches appended to it (``append_dir``)."""

    #: Each option's help (``tmdsub ... --help`` and ``tmdsub params`` show it).
    HELP = {
        "dataset": ("Built-in dataset (MUTAG, PROTEINS, COX2, NCI1, DD, ogbg-molbace, ogbg-molbbbp, MOSES, the 30 "
                    "MoleculeACE sets ACE-<set> such as ACE-CHEMBL204_Ki), or a dataset in the raw root (<NAME>/ "
                    "TU folder, <NAME>.csv/.tsv/.smi/.cxsmiles/.sdf[.gz], <NAME>.parquet), or the file --source "
                    "names."),
        "source": ("The dataset's entry in base.datasets: a file (any molecule file: .csv, .tsv, .smi, .cxsmiles, "
                   ".sdf, .parquet, each may be .gz) or folder under the raw root; ignored for a built-in dataset."),
        "tu_dir": "A folder in the TU raw layout (NAME_A.txt, ...).",
        "smiles_csv": ("A molecule file: CSV/TSV/semicolons with a SMILES column (delimiter sniffed), "
                       ".smi/.cxsmiles (SMILES then name), SD file (.sdf), a Parquet table with a SMILES column; "
                       "each may be .gz."),
        "parquet": "A Parquet file already in the graph-store schema.",
        "name": "Dataset name for user data (letters, digits, _ . -).",
        "raw_root": "Folder with the shipped raw datasets.",
        "out": "Output Parquet (default data/graphs/<NAME>.parquet).",
        "append_dir": ("Folder of batches of new graphs (TU folders, SMILES .csv, graph-store .parquet) appended "
                       "in name order after the dataset."),
    }

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
        kw = {k: (str(v) if v not in (None, "") else None) for k, v in _pick(cls, options).items()}
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

    #: Each option's help (``tmdsub ... --help`` and ``tmdsub params`` show it).
    HELP = {
        "sources": ("Per-dataset source settings (params.yaml's ingest.sources.<NAME>: label_columns, split_column, "
                    "smiles_column, keep_columns, task), used where no option is given."),
        "features": ("TU node features: 'onehot' (one-hot of node labels, PyG's default) or 'onehot+attributes' "
                     "(append the node attributes)."),
        "smiles_column": ("SMILES CSV: the SMILES column (default smiles; case-insensitive when no column has "
                          "exactly this name)."),
        "label_column": ("SMILES CSV: the label column(s); repeat it or give a comma list for several targets "
                         "(default: a column named y or label, if any)."),
        "split_column": ("SMILES CSV: the column holding each molecule's split, train / test / valid(ation) "
                         "(default: a column named split, if any; '' = none)."),
        "keep_column": ("SMILES CSV: further numeric column(s) kept in the store (repeat or comma list), e.g. "
                        "cliff_mol."),
        "task": ("auto (from the labels: 0/1 -> binary or multitask, a few integers -> multiclass, else "
                 "regression) | binary | multiclass | multitask | regression."),
        "params": ("params.yaml: per-dataset source settings under ingest.sources.<NAME> (label_columns, "
                   "split_column, smiles_column, keep_columns, task) used where no option is given."),
        "workers": ("SMILES: processes converting molecules: auto (the cores this process may use: affinity, "
                    "cgroup quota; printed) or a number."),
        "limit": "SMILES: only the first N molecules (a smaller pool; 0 = all).",
        "standin": ("Unlabelled SMILES pools (MOSES), benchmark mode only: fill y with a flagged label stand-in, "
                    "never a measurement (logp: y = 1 if RDKit's Crippen logP >= 2.75, else 0). none (default): "
                    "the pool stays unlabelled, as a real one is."),
        "id_column": ("SMILES CSV: the column of your own compound ids (a registry number), carried to the label "
                      "requests and the predictions (default: a column named ID, compound id, registry number, "
                      "name, ..., if any; '' = none)."),
        "invalid": ("SMILES: a SMILES RDKit cannot parse: skip (default: left out, listed with its line and reason"
                    " in <store>.invalid.csv beside the store) | refuse (stop, naming its line)."),
    }

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
        from tmdlib.datasets._smiles import STANDIN_RULES
        from tmdlib.datasets import TASK_TYPES

        one_of("--features", self.features, FEATURES)
        one_of("--task", self.task or "auto", ("auto", *TASK_TYPES))
        one_of("--standin", self.standin or "none", ("none", *STANDIN_RULES))
        one_of("--invalid", self.invalid, INVALID_RULES)
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
        kw = _pick(cls, options)
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
