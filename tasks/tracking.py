"""MLflow tracking: embedded sqlite store by default, any tracking URI via ``MLFLOW_TRACKING_URI``.

Runs are tagged with the git sha, a dirty flag, the dvc.lock md5s of the stage inputs and a hash of the params.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import yaml

DEFAULT_URI = "sqlite:///mlflow.db"


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
    if not isinstance(lock, dict) or not isinstance(lock.get("stages") or {}, dict):
        raise InputError(lock_path, "not a dvc.lock (no 'stages' mapping)")
    return lock.get("stages") or {}


def _md5s(entries) -> dict:
    """``{path: md5}`` of a lock entry's ``deps`` or ``outs`` list."""
    return {e["path"]: e["md5"] for e in entries or [] if "path" in e and "md5" in e}


def lock_entries(dataset: str, lock_path: str | os.PathLike = "dvc.lock") -> dict:
    """md5 of the deps and outs of every ``<stage>@<dataset>`` entry of ``dvc.lock``.

    Returns
    -------
    dict
        ``{"<stage>@<dataset>": {"deps": {path: md5}, "outs": {path: md5}}}`` (``{}`` without a lock).
    """
    return {name: {"deps": _md5s(e.get("deps")), "outs": _md5s(e.get("outs"))}
            for name, e in read_lock(lock_path).items() if name.endswith(f"@{dataset}")}


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
    recorded = {path: md5 for entry in read_lock(lock_path).values()
                for path, md5 in _md5s(entry.get("outs")).items()}
    tags = {}
    for path in inputs:
        md5 = recorded.get(path)
        if md5 is None and Path(path).is_file():
            h = hashlib.md5()
            with open(path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            md5 = h.hexdigest()
        tags[f"dvc.md5.{path}"] = md5 or "unknown"
    return tags


def params_hash(params: dict) -> str:
    """sha256 (first 16 hex) of the canonical JSON of ``params``."""
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_tags(stage: str, params: dict, inputs: list[str], root: str | os.PathLike = ".") -> dict:
    """All provenance tags of a run of ``stage`` reading ``inputs``."""
    tags = {"tmdsub.stage": stage, "params_hash": params_hash(params), **git_info(root)}
    tags.update(dvc_lock_hashes(inputs, Path(root) / "dvc.lock"))
    return tags


def redact_uri(uri: str) -> str:
    """``scheme://user:secret@host`` -> ``scheme://***@host``, and secret query values
    (``?token=...``, ``password``, ``key``, ``sig``...) -> ``***`` (never print or log credentials)."""
    import re

    uri = re.sub(r"//[^/@]+@", "//***@", uri)
    return re.sub(r"(?i)([?&;](?:[a-z_]*token|password|passwd|pwd|secret|[a-z_]*key|sig|signature|auth)=)[^&;#]*",
                  r"\1***", uri)


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


def _canonical_sha256(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


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


def graph_store_dataset(path: str, ds, name: str):
    """The graph store as an MLflow dataset: digest = its content hash, profile = counts and the full hash."""
    from mlflow.types.schema import Array

    from .graphs import store_content_hash

    sha = store_content_hash(ds)
    profile = {"graphs": len(ds), "nodes": int(ds.num_nodes), "features": int(ds.num_features),
               "content_sha256": sha}
    columns = [("graph_id", "long"), ("num_nodes", "long"), ("x", Array(Array("float"))),
               ("edge_src", Array("integer")), ("edge_dst", Array("integer")), ("y", "double")]
    return _dataset(path, name, sha, profile, columns)


def labels_dataset(path: str, labels: dict, meta: dict, name: str):
    """The label file as an MLflow dataset: digest = sha256 of its ``(graph_id, y)`` pairs in id order."""
    pairs = sorted((int(g), float(y)) for g, y in labels.items())
    sha = _canonical_sha256(pairs)
    profile = {"labels": len(pairs), "positive": int(sum(y == 1.0 for _, y in pairs)),
               "source": str(meta.get("source", "unknown")), "content_sha256": sha}
    return _dataset(path, f"{name}-labels", sha, profile, [("graph_id", "long"), ("y", "double")])


def selection_dataset(path: str, sel: dict, name: str):
    """The selection as an MLflow dataset: digest = sha256 of its medoids, τ and split (canonical JSON)."""
    content = {key: [float(v) if key == "tau" else int(v) for v in sel[key]]
               for key in ("medoids", "tau", "train_ids", "test_ids")}
    sha = _canonical_sha256(content)
    profile = {"method": sel.get("method"), "k": len(content["medoids"]), "train": len(content["train_ids"]),
               "test": len(content["test_ids"]), "epsilon": sel.get("epsilon"), "epsilon_mean": sel.get("epsilon_mean", sel.get("epsilon")), "content_sha256": sha}
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
