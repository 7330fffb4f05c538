"""MLflow tracking: embedded sqlite store by default, any tracking URI via ``MLFLOW_TRACKING_URI``.

Runs are tagged with the git sha, a dirty flag, the dvc.lock md5s of the stage inputs and a hash of the params.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
from pathlib import Path

import yaml

from tmdlib.datasets._checksums import file_digest
from tmdlib.reporting.provenance import (labels_profile, lock_stages, params_hash, recorded_outs, redact_uri,
                                         run_values, selection_profile, stage_md5s, store_profile)


def set_run_tag(run_id: str, key: str, value) -> None:
    """Set one tag on a run (explicit client, :func:`tracking_uri`)."""
    from mlflow import MlflowClient

    MlflowClient(tracking_uri=tracking_uri()).set_tag(run_id, key, str(value))


def tracking_uri() -> str:
    """``MLFLOW_TRACKING_URI`` if set, else an sqlite store ``mlflow.db`` in the working directory."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path('mlflow.db').resolve()}"


def git_info(root: str | os.PathLike = ".") -> dict:
    """``{"git_sha": ..., "git_dirty": "true"|"false"}`` (``unknown`` outside a git checkout)."""
    def _git(*args: str) -> str | None:
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True,
                                  timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    sha = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {"git_sha": sha or "unknown", "git_dirty": "unknown" if status is None else str(bool(status)).lower()}


def read_lock(lock_path: str | os.PathLike = "dvc.lock") -> dict:
    """The ``stages`` mapping of ``dvc.lock`` (``{}`` when there is no lock file yet)."""
    from tmdlib import InputError

    p = Path(lock_path)
    if not p.exists():
        return {}
    try:
        lock = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as err:
        raise InputError(lock_path, f"not valid YAML: {err}") from None
    return lock_stages(lock, lock_path)


def lock_entries(dataset: str, lock_path: str | os.PathLike = "dvc.lock") -> dict:
    """md5 of the deps and outs of every ``<stage>@<dataset>`` entry of ``dvc.lock``.

    Returns
    -------
    dict
        ``{"<stage>@<dataset>": {"deps": {path: md5}, "outs": {path: md5}}}`` (``{}`` without a lock).
    """
    return stage_md5s(read_lock(lock_path), dataset)


def dvc_lock_hashes(inputs: list[str], lock_path: str | os.PathLike = "dvc.lock") -> dict:
    """md5 of each input as recorded in ``dvc.lock`` (the ``outs`` of the stage that made it).

    DVC writes a stage's lock entry when that stage finishes, so while a downstream stage runs
    its inputs are already recorded there.  An input not found in the lock (e.g. a run outside
    ``dvc repro``) gets the md5 of its bytes, which is what DVC records for a file.

    Returns
    -------
    dict
        ``{"dvc.md5.<path>": md5}``.
    """
    recorded = recorded_outs(read_lock(lock_path))
    tags = {}
    for path in inputs:
        md5 = recorded.get(path)
        if md5 is None and Path(path).is_file():
            md5 = file_digest(path, "md5")
        tags[f"dvc.md5.{path}"] = md5 or "unknown"
    return tags


def run_tags(stage: str, params: dict, inputs: list[str], root: str | os.PathLike = ".") -> dict:
    """All provenance tags of a run of ``stage`` reading ``inputs``."""
    from .io import tool_version

    tags = {"tmdsub.stage": stage, "tmdsub.version": tool_version(), "params_hash": params_hash(params),
            **git_info(root)}
    tags.update(dvc_lock_hashes(inputs, Path(root) / "dvc.lock"))
    return tags


# ----------------------------------------------------------------------------------------------
# The experiment, as MLflow's UI expects it
# ----------------------------------------------------------------------------------------------
#: Opens the experiment on MLflow 3's model-training view (runs, metrics, models), not its GenAI view (traces).
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")


def experiment_id(client, name: str) -> str:
    """Id of experiment ``name`` (created if missing), tagged :data:`EXPERIMENT_KIND`.

    The tag is (re)set on an existing experiment too: MLflow's UI writes an *inferred* kind on first view,
    and older stores have none.
    """
    key, value = EXPERIMENT_KIND
    exp = client.get_experiment_by_name(name)
    if exp is None:
        try:
            return client.create_experiment(name, tags={key: value})
        except Exception:  # noqa: BLE001 - another stage created it meanwhile
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
    if exp.tags.get(key) != value:
        client.set_experiment_tag(exp.experiment_id, key, value)
    return exp.experiment_id


# ----------------------------------------------------------------------------------------------
# Dataset inputs (mlflow.data): the graph store, the label file, the selection
# ----------------------------------------------------------------------------------------------
#: MLflow stores at most 36 characters of a dataset digest: the first 32 hex digits (128 bits) of a sha256.
DIGEST_CHARS = 32


def _dataset(path: str, name: str, sha256: str, profile: dict, columns: list):
    """An ``mlflow.data`` dataset that holds metadata only: source = ``path`` (local), digest = the first
    :data:`DIGEST_CHARS` hex digits of ``sha256`` (the whole hash is in the profile), schema = ``columns``."""
    from mlflow.data.dataset_source_registry import get_registered_sources
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.types import ColSpec, Schema

    local = next(s for s in get_registered_sources() if s._get_source_type() == "local")

    class _Dataset(MetaDataset):
        @property
        def profile(self):
            return profile

        def to_dict(self):
            return {**super().to_dict(), "profile": json.dumps(profile)}

    schema = Schema([ColSpec(t, n) for n, t in columns])
    return _Dataset(local(str(path)), name=name, digest=sha256[:DIGEST_CHARS], schema=schema)


def graph_store_dataset(path: str, store, name: str):
    """The graph store (:class:`tasks.graphs.Store`) as an MLflow dataset: digest = its content hash, profile =
    counts and the full hash (read from the store's columns: its graphs are not loaded for it)."""
    from mlflow.types.schema import Array

    sha, pool = store.content_hash(), store.stored()  # ids, sizes and the feature table: one read
    profile = store_profile(sha, len(pool), pool.nodes_per_graph.sum(), pool.num_features)
    columns = [("graph_id", "long"), ("num_nodes", "long"), ("x", Array(Array("float"))),
               ("edge_src", Array("integer")), ("edge_dst", Array("integer")), ("y", "double")]
    return _dataset(path, name, sha, profile, columns)


def labels_dataset(path: str, labels: dict, meta: dict, name: str):
    """The label file as an MLflow dataset: digest = sha256 of its ``(graph_id, y)`` pairs in id order (``y`` a
    number, or a list for several targets, missing as null)."""
    sha, profile = labels_profile(labels, meta)
    return _dataset(path, f"{name}-labels", sha, profile, [("graph_id", "long"), ("y", "double")])


def selection_dataset(path: str, sel: dict, name: str):
    """The selection as an MLflow dataset: digest = sha256 of its medoids, τ and split (canonical JSON)."""
    sha, profile = selection_profile(sel)
    return _dataset(path, f"{name}-selection", sha, profile, [("graph_id", "long"), ("tau", "double")])


def log_datasets(run_id: str, datasets: list, context: str, model_ids: list[str] | None = None) -> None:
    """Log ``datasets`` as inputs of run ``run_id`` with ``mlflow.data.context = context`` (e.g. ``training``), and
    the MLflow logged models ``model_ids`` as model inputs (the model an evaluation run evaluates)."""
    from mlflow import MlflowClient
    from mlflow.entities import DatasetInput, InputTag, LoggedModelInput
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    inputs = [DatasetInput(d._to_mlflow_entity(), [InputTag(MLFLOW_DATASET_CONTEXT, context)]) for d in datasets]
    models = [LoggedModelInput(m) for m in model_ids or []] or None
    MlflowClient(tracking_uri=tracking_uri()).log_inputs(run_id, datasets=inputs, models=models)


# ----------------------------------------------------------------------------------------------
# Runs (called from the flow process only)
# ----------------------------------------------------------------------------------------------
def start_run(stage: str, params: dict, inputs: list[str], experiment: str = "tmdsub", run_name: str | None = None,
              extra_tags: dict | None = None) -> dict:
    """Create an MLflow run (status RUNNING) with an explicit :class:`mlflow.MlflowClient`.

    The experiment is created if missing and tagged for MLflow's model-training view
    (:func:`tasks.tracking.experiment_id`); the run is named ``run_name`` (the pipeline's ``<stage>@<DATASET>``).
    Tags: :func:`tasks.tracking.run_tags` (git sha, dirty, dvc md5 of ``inputs``, params hash) plus
    ``extra_tags``.

    Returns
    -------
    dict
        ``{"run_id", "tracking_uri" (redacted), "experiment_id"}``.
    """
    from mlflow import MlflowClient

    uri = tracking_uri()
    client = MlflowClient(tracking_uri=uri)
    exp_id = experiment_id(client, experiment)
    tags = {**run_tags(stage, params, inputs), **(extra_tags or {})}
    run = client.create_run(exp_id, tags={k: str(v) for k, v in tags.items()}, run_name=run_name or stage)
    return {"run_id": run.info.run_id, "tracking_uri": redact_uri(uri), "experiment_id": exp_id}


@contextlib.contextmanager
def open_run(stage: str, params: dict, inputs: list[str], experiment: str = "tmdsub",
             extra_tags: dict | None = None, enabled: bool = True, run_name: str | None = None):
    """A run created up front (:func:`start_run`; ``None`` unless ``enabled``) so the stage's outputs can name
    its id and metrics can be logged while it works; finish it with ``log_run(..., run=run)``.  Marked FAILED if
    the body raises."""
    if not enabled:
        yield None
        return
    run = start_run(stage, params, inputs, experiment, run_name=run_name, extra_tags=extra_tags)
    try:
        yield run
    except BaseException:
        from mlflow import MlflowClient

        MlflowClient(tracking_uri=tracking_uri()).set_terminated(run["run_id"], "FAILED")
        raise


def log_run(stage: str, params: dict, metrics: dict, inputs: list[str], artifacts: list[str],
            experiment: str = "tmdsub", step_metrics: dict | None = None, run_name: str | None = None,
            extra_tags: dict | None = None, run: dict | None = None) -> dict:
    """Log one finished stage run with an explicit :class:`mlflow.MlflowClient` (no global MLflow state).

    The run is ``run`` (from :func:`start_run`/:func:`open_run`), else a new one (:func:`start_run` with
    ``stage``, ``inputs``, ``run_name``, ``extra_tags``).  ``step_metrics`` maps a name to a list of values
    logged at steps 0, 1, ...

    Returns
    -------
    dict
        ``{"run_id", "tracking_uri", "experiment_id"}``.
    """
    import time

    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    run = run or start_run(stage, params, inputs, experiment, run_name, extra_tags)
    run_id = run["run_id"]
    client = MlflowClient(tracking_uri=tracking_uri())
    try:
        now = int(time.time() * 1000)
        plain, values = run_values(params, metrics, step_metrics)
        plist, mlist = [Param(k, v) for k, v in plain], [Metric(k, v, now, s) for k, v, s in values]
        for i in range(0, len(plist), 100):
            client.log_batch(run_id, params=plist[i:i + 100])
        for i in range(0, len(mlist), 1000):
            client.log_batch(run_id, metrics=mlist[i:i + 1000])
        for a in artifacts:
            if a and Path(a).is_file():
                client.log_artifact(run_id, a)
        client.set_terminated(run_id, "FINISHED")
    except BaseException:
        client.set_terminated(run_id, "FAILED")
        raise
    return run


class LiveMetric:
    """``on_loss`` callback that logs ``key`` at step = epoch to a run while training goes.

    Values are sent in batches at most every ``interval`` seconds, and always at step ``last_step`` (and on
    :meth:`flush`), so a long training shows its curve as it goes without one request per epoch on a fast one.
    """

    def __init__(self, run_id: str, key: str = "train_loss", last_step: int | None = None, interval: float = 1.0):
        import time

        from mlflow import MlflowClient

        self.run_id, self.key, self.last_step, self.interval = run_id, key, last_step, float(interval)
        self.client = MlflowClient(tracking_uri=tracking_uri())
        self.pending: list = []
        self.sent = 0
        self._clock = time.monotonic
        self._last = self._clock()

    def __call__(self, epoch: int, value: float) -> None:
        import time

        from mlflow.entities import Metric

        if math.isfinite(float(value)):
            self.pending.append(Metric(self.key, float(value), int(time.time() * 1000), int(epoch)))
        if epoch == self.last_step or self._clock() - self._last >= self.interval:
            self.flush()

    def flush(self) -> None:
        """Send what is pending."""
        if self.pending:
            self.client.log_batch(self.run_id, metrics=self.pending)
            self.sent += len(self.pending)
            self.pending = []
        self._last = self._clock()
