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
