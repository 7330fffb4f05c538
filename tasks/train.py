"""Training tasks: read the selection / labels / node subsets, build PyG data, train, save, log to MLflow.

Input formats (written by the select, nodes and labels stages):

* ``selection.json``: ``train_ids``, ``test_ids``, ``medoids`` (graph ids), ``tau`` (aligned with
  ``medoids``), ``epsilon`` (float or null), ``method``, ``fraction``, ``k``, ``seed``.
* ``labels.csv``: ``graph_id,y`` for the labelled graphs only; ``labels.json``: ``{"source": ...}``.
* ``nodes.parquet`` (optional): ``graph_id``, ``nodes`` (list<int32> kept local ids), ``epsilon``.
"""
from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from tmdlib import GraphDataset, InputError

from . import io

BENCHMARK_EVAL = "dataset (benchmark mode)"


# ----------------------------------------------------------------------------------------------
# Readers
# ----------------------------------------------------------------------------------------------
def dataset_name(graphs_path: str) -> str:
    """Dataset name recorded in the graph store's schema metadata (``tmdlib.name``), else the file stem."""
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(graphs_path).metadata or {}
    except Exception:  # noqa: BLE001 - the store itself is validated by load_graph_store
        meta = {}
    name = meta.get(b"tmdlib.name")
    return name.decode() if name else Path(graphs_path).stem


def read_json(path: str, what: str) -> dict:
    """A JSON object from ``path`` (InputError naming the file otherwise)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(path, f"{what} not found")
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(path, f"not valid JSON: {err}") from None
    if not isinstance(obj, dict):
        raise InputError(path, f"{what} must be a JSON object")
    return obj


def _int_list(sel: dict, key: str, path: str) -> np.ndarray:
    vals = sel.get(key)
    if not isinstance(vals, list):
        raise InputError(path, f"key {key!r} must be a list of graph ids")
    out = []
    for v in vals:
        if isinstance(v, bool) or not (isinstance(v, int) or (isinstance(v, float) and float(v).is_integer())):
            raise InputError(path, f"key {key!r}: {v!r} is not an integer graph id")
        out.append(int(v))
    return np.asarray(out, dtype=np.int64)


def read_selection(path: str) -> dict:
    """Validated ``selection.json``: id arrays as int64, ``tau`` as float64, ``epsilon`` (the certificate's sum of
    exact TMDs to the medoids) and ``epsilon_mean`` (= epsilon / n_train, the ε of Lemma 3.2) float or None,
    and the certificate's ``assignment`` / ``distance`` (aligned with ``train_ids``) when present."""
    sel = read_json(path, "selection file")
    out = dict(sel)
    for key in ("train_ids", "test_ids", "medoids"):
        out[key] = _int_list(sel, key, path)
    tau = sel.get("tau")
    if not isinstance(tau, list) or len(tau) != len(out["medoids"]):
        raise InputError(path, f"'tau' must be a list aligned with 'medoids' ({len(out['medoids'])} entries)")
    try:
        out["tau"] = np.asarray(tau, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(path, "'tau' must hold numbers") from None
    if not np.all(np.isfinite(out["tau"])) or np.any(out["tau"] < 0):
        raise InputError(path, "'tau' must hold finite numbers >= 0")
    if out["medoids"].size == 0:
        raise InputError(path, "no selected graphs ('medoids' is empty)")
    if np.unique(out["medoids"]).size != out["medoids"].size:
        raise InputError(path, "'medoids' has duplicate graph ids")
    missing = np.setdiff1d(out["medoids"], out["train_ids"])
    if missing.size:
        raise InputError(path, f"selected graphs not in 'train_ids': {missing[:10].tolist()}")
    if np.intersect1d(out["train_ids"], out["test_ids"]).size:
        raise InputError(path, "'train_ids' and 'test_ids' overlap")
    for key in ("epsilon", "epsilon_mean"):
        eps = sel.get(key)
        if eps is not None and not (isinstance(eps, (int, float)) and not isinstance(eps, bool) and math.isfinite(eps)):
            raise InputError(path, f"{key!r} must be a number or null, got {eps!r}")
        out[key] = None if eps is None else float(eps)
    if "epsilon_mean" not in sel:  # selections written before the certificate: 'epsilon' held the mean
        out["epsilon_mean"] = out["epsilon"]
    if "assignment" in sel or "distance" in sel:
        out["assignment"] = _int_list(sel, "assignment", path)
        dist = sel.get("distance")
        if not isinstance(dist, list) or len(dist) != len(out["train_ids"]) or out["assignment"].size != len(dist):
            raise InputError(path, "'assignment' and 'distance' must be lists aligned with 'train_ids'")
        try:
            out["distance"] = np.asarray(dist, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError(path, "'distance' must hold numbers") from None
        if not np.all(np.isfinite(out["distance"])) or np.any(out["distance"] < 0):
            raise InputError(path, "'distance' must hold finite numbers >= 0")
        stray = np.setdiff1d(out["assignment"], out["medoids"])
        if stray.size:
            raise InputError(path, f"'assignment' names graphs that are not medoids: {stray[:10].tolist()}")
    return out


def positions(ids: np.ndarray, graph_ids: np.ndarray, path: str, what: str) -> np.ndarray:
    """Positions in the graph store of ``ids`` (InputError listing unknown ids)."""
    lookup = {int(g): k for k, g in enumerate(graph_ids)}
    unknown = [int(g) for g in ids if int(g) not in lookup]
    if unknown:
        raise InputError(path, f"{what}: graph ids not in the graph store: {unknown[:10]}")
    return np.asarray([lookup[int(g)] for g in ids], dtype=np.int64)


def read_labels(csv_path: str, meta_path: str | None = None) -> tuple[dict, dict]:
    """``({graph_id: y}, labels.json)`` from ``labels.csv`` (``graph_id,y``; y in {0, 1}).

    ``meta_path`` defaults to ``labels.json`` next to the CSV; missing → ``{"source": "unknown"}``.
    """
    from .io import read_text_csv

    table = read_text_csv(csv_path, ("graph_id", "y"), what="labels file")
    labels: dict[int, float] = {}
    for row, (g, y) in enumerate(zip(table.column("graph_id").to_pylist(), table.column("y").to_pylist())):
        try:
            gid = int(g)
        except (TypeError, ValueError):
            raise InputError(csv_path, f"graph_id {g!r} is not an integer", line=row + 2) from None
        try:
            val = float(y)
        except (TypeError, ValueError):
            raise InputError(csv_path, f"label {y!r} is not a number", line=row + 2) from None
        if val not in (0.0, 1.0):
            raise InputError(csv_path, f"label {y!r} is not a binary label (0 or 1)", line=row + 2)
        if gid in labels:
            raise InputError(csv_path, f"graph_id {gid} appears twice", line=row + 2)
        labels[gid] = val
    mp = Path(meta_path) if meta_path else Path(csv_path).with_suffix(".json")
    meta = read_json(str(mp), "labels metadata") if mp.is_file() else {"source": "unknown"}
    return labels, meta


def read_nodes(path: str) -> dict[int, tuple[np.ndarray, float]]:
    """``{graph_id: (kept local node ids, epsilon)}`` from ``nodes.parquet``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = Path(path)
    if not p.is_file():
        raise InputError(path, "node-subsampling file not found")
    try:
        table = pq.read_table(p, columns=["graph_id", "nodes", "epsilon"])
    except (pa.ArrowException, OSError, ValueError, KeyError) as err:
        raise InputError(path, f"not a readable nodes Parquet (graph_id, nodes, epsilon): {err}") from None
    out = {}
    gids = table.column("graph_id").to_pylist()
    nodes = table.column("nodes").to_pylist()
    eps = table.column("epsilon").to_pylist()
    for row, (g, s, e) in enumerate(zip(gids, nodes, eps)):
        if g is None or s is None or e is None or not math.isfinite(e) or e < -1e-9:
            raise InputError(path, "null graph_id/nodes or a missing/negative epsilon", line=row + 1)
        out[int(g)] = (np.asarray(s, dtype=np.int64), max(float(e), 0.0))
    return out


# ----------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------
def node_subsets_for(nodes: dict, ids: np.ndarray, path: str) -> tuple[list, np.ndarray]:
    """Aligned node subsets and ε_i of graph ``ids`` (InputError if a graph has no row)."""
    missing = [int(g) for g in ids if int(g) not in nodes]
    if missing:
        raise InputError(path, f"no node subset for selected graph ids {missing[:10]}")
    return [nodes[int(g)][0] for g in ids], np.asarray([nodes[int(g)][1] for g in ids], dtype=np.float64)


def set_torch_threads(n: int) -> int:
    """Set torch's intra-op CPU threads (``n >= 1``); returns the previous value.

    The pipeline default is 1: these models are small, so extra threads mostly spin (4-8x slower on a
    shared, oversubscribed machine), and float summation order - hence the trained weights - depends on
    the thread count: one thread makes CPU runs repeat bit for bit on any machine.
    """
    import torch

    if int(n) < 1:
        raise InputError(None, f"--torch-threads must be >= 1, got {n}")
    old = torch.get_num_threads()
    torch.set_num_threads(int(n))
    return old


# ----------------------------------------------------------------------------------------------
# Model files
# ----------------------------------------------------------------------------------------------
def save_model(model, path: str) -> str:
    """Atomically save ``model.state_dict()`` (tensors only; load with ``weights_only=True``)."""
    import torch

    with io.atomic_path(path) as tmp:
        torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, tmp)
    return path


def load_model(path: str, config: dict):
    """A :class:`tmdlib.torch.gin.GIN` built from ``config`` with the state dict at ``path`` (``weights_only=True``)."""
    import torch

    from tmdlib.torch.gin import build_model

    if not Path(path).is_file():
        raise InputError(path, "model file not found")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - torch raises many kinds for a bad file
        raise InputError(path, f"not a loadable state dict: {err}") from None
    model = build_model(config)
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        raise InputError(path, f"state dict does not match the model config: {err}") from None
    return model.eval()


# ----------------------------------------------------------------------------------------------
# Tasks
# ----------------------------------------------------------------------------------------------
@task(name="train-gin", persist_result=False, cache_policy=NO_CACHE)
def train_model(data: list, cfg_dict: dict, in_dim: int, on_loss=None) -> tuple:
    """Train a GIN (``tmdlib.torch.gin.train_gin``); returns ``(model, losses, device)``.

    ``cfg_dict`` may hold ``lipschitz_budget`` (certified mode, :mod:`tmdlib.torch.certified`): every weight
    matrix is then projected onto ``‖W‖₂ ≤ budget`` after each step; absent / None / 0 → unconstrained.
    ``on_loss(epoch, loss)`` is called after every epoch (e.g. :class:`LiveMetric`).
    """
    from tmdlib.torch.certified import train_from_config

    res = train_from_config(data, cfg_dict, in_dim=in_dim, on_loss=on_loss)
    return res.model, res.losses, res.device


@task(name="write-model", persist_result=False, cache_policy=NO_CACHE)
def write_model(model, model_out: str, info_out: str, info: dict) -> dict:
    """Write ``model.pt`` (unless ``model`` is None: already written) and ``train.json`` atomically (the JSON
    last, naming the model's sha256)."""
    if model is not None:
        save_model(model, model_out)
    info = {**info, "model_sha256": io.sha256_file(model_out)}
    io.write_json(info_out, info)
    return info


# ----------------------------------------------------------------------------------------------
# MLflow (called from the flow process only)
# ----------------------------------------------------------------------------------------------
def flatten(d: dict, prefix: str = "") -> dict:
    """Nested dict → ``{"a.b": number}`` of its finite numeric (and bool) leaves."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif isinstance(v, bool):
            out[key] = float(v)
        elif isinstance(v, (int, float, np.integer, np.floating)) and math.isfinite(float(v)):
            out[key] = float(v)
    return out


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

    from .tracking import experiment_id, redact_uri, run_tags, tracking_uri

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

        from .tracking import tracking_uri

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

    from .tracking import tracking_uri

    run = run or start_run(stage, params, inputs, experiment, run_name, extra_tags)
    run_id = run["run_id"]
    client = MlflowClient(tracking_uri=tracking_uri())
    try:
        now = int(time.time() * 1000)
        plist = [Param(k, str(v)[:6000]) for k, v in sorted(params.items())]
        mlist = [Metric(k, v, now, 0) for k, v in sorted(flatten(metrics).items())]
        for name, values in (step_metrics or {}).items():
            mlist += [Metric(name, float(v), now, s) for s, v in enumerate(values) if math.isfinite(float(v))]
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

        from .tracking import tracking_uri

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
