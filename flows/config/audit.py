"""The audit stage's typed config: :class:`AuditPaths` and :class:`AuditStageConfig` (``tmdsub audit``'s
options)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tmdlib import InputError

from . import _paths, _pick


@dataclass(frozen=True)
class AuditPaths:
    """The audit stage's files (dvc.yaml's ``audit`` command names them): the upstream outputs the report reads
    (``graphs`` ... ``plot``, ``params``, ``lock``; ``predictions`` and ``labels`` in production), the report
    folder ``out_dir``; ``dataset`` is the ``<DATASET>`` of them all."""

    #: Each option's help (``tmdsub ... --help`` and ``tmdsub params`` show it).
    HELP = {
        "dataset": "Dataset name (the <DATASET> of the stage outputs).",
        "graphs": "Graph-store Parquet (data/graphs/<DATASET>.parquet).",
        "tmd_meta": "The TMD matrix's meta.json.",
        "selection": "selection.json.",
        "nodes": "nodes.parquet (node subsampling).",
        "requests": "label_requests.parquet.",
        "manifest": "The label requests' manifest.json.",
        "labels_meta": "labels.json (label source).",
        "train_info": "train.json (names the MLflow train run).",
        "metrics": "metrics.json (epsilon, the bounds, test metric).",
        "metrics_nodes": "metrics_nodes.json (node-subsampling bound).",
        "plot": "bound_vs_gap.png of the evaluate stage (copied into the report).",
        "out_dir": "Report folder (data/audit/<DATASET>).",
        "params": "The pipeline's params.yaml.",
        "lock": "dvc.lock, read at run time (may not exist yet).",
        "predictions": ("predictions.parquet of the predict stage (production: the parity plot, the pool's "
                        "predictions, the in-domain share)."),
        "labels": "labels.csv, the lab's audit measurements (default: the one train.json names).",
    }

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

    #: Each option's help (``tmdsub ... --help`` and ``tmdsub params`` show it).
    HELP = {
        "log_mlflow": "Link the report from the MLflow train run.",
    }

    log_mlflow: bool = True

    @classmethod
    def from_options(cls, options: dict) -> AuditStageConfig:
        """The config of ``tmdsub audit``'s options (``mlflow`` is ``log_mlflow``)."""
        return cls(**_pick(cls, options))

    @classmethod
    def from_params(cls, params: dict) -> AuditStageConfig:
        """The config ``params.yaml`` states (its ``audit:`` group, none today: the command's defaults)."""
        return cls.from_options(params.get("audit") or {})
