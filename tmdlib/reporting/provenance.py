"""What a run's provenance records, computed from values already read: a URI with its credentials hidden, the hash
of the parameters, the numeric leaves of a metrics record, the md5s a ``dvc.lock`` records, and the content digests
and profiles of the label file and the selection (the inputs a tracking server shows).

Pure functions: the caller reads the files (``dvc.lock``, the labels, ``selection.json``) and talks to the tracking
server; nothing here knows where those live.
"""
from __future__ import annotations

import hashlib
import json
import math
import re

import numpy as np

__all__ = ["redact_uri", "params_hash", "flatten", "stage_md5s", "recorded_outs", "canonical_sha256",
           "labels_profile", "selection_profile", "store_profile",
           "shown_params", "run_values", "lock_stages"]


def redact_uri(uri: str) -> str:
    """A URI with its credentials replaced by ``***``.

    Parameters
    ----------
    uri : str
        ``scheme://user:secret@host/...?token=...``.

    Returns
    -------
    str
        ``scheme://***@host/...``, and secret query values (``token``, ``password``, ``key``, ``sig``, ...) as
        ``***`` (never print or log credentials).
    """
    uri = re.sub(r"//[^/@]+@", "//***@", uri)
    return re.sub(r"(?i)([?&;](?:[a-z_]*token|password|passwd|pwd|secret|[a-z_]*key|sig|signature|auth)=)[^&;#]*",
                  r"\1***", uri)


def params_hash(params: dict) -> str:
    """The first 16 hex digits of the sha256 of ``params`` as canonical JSON (sorted keys, ``str`` for the rest)."""
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:16]


def flatten(d: dict, prefix: str = "") -> dict:
    """The finite numeric (and bool) leaves of a nested mapping.

    Parameters
    ----------
    d : dict
        A nested record (``metrics.json``'s shape).
    prefix : str
        Put before every key.

    Returns
    -------
    dict
        ``{"a.b": float}``: bools as 0.0 / 1.0; non-finite numbers, strings, lists and None left out.
    """
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


def _md5s(entries) -> dict:
    """``{path: md5}`` of a lock entry's ``deps`` or ``outs`` list."""
    return {e["path"]: e["md5"] for e in entries or [] if "path" in e and "md5" in e}


def stage_md5s(stages: dict, dataset: str) -> dict:
    """The md5s of the deps and outs of every ``<stage>@<dataset>`` entry of a ``dvc.lock``.

    Parameters
    ----------
    stages : dict
        The lock's ``stages`` mapping.
    dataset : str
        The foreach key of the entries kept.

    Returns
    -------
    dict
        ``{"<stage>@<dataset>": {"deps": {path: md5}, "outs": {path: md5}}}``.
    """
    return {name: {"deps": _md5s(e.get("deps")), "outs": _md5s(e.get("outs"))}
            for name, e in stages.items() if name.endswith(f"@{dataset}")}


def recorded_outs(stages: dict) -> dict:
    """``{path: md5}`` of every stage's ``outs`` in a ``dvc.lock``'s ``stages`` mapping."""
    return {path: md5 for entry in stages.values() for path, md5 in _md5s(entry.get("outs")).items()}


def canonical_sha256(obj) -> str:
    """The sha256 (hex) of ``obj`` as compact canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def labels_profile(labels: dict, meta: dict) -> tuple[str, dict]:
    """The label file's digest and profile.

    Parameters
    ----------
    labels : dict
        ``{graph_id: y}``, ``y`` a number or an array of shape ``(T,)`` (NaN = not measured).
    meta : dict
        ``labels.json`` (its ``source``).

    Returns
    -------
    tuple
        ``(sha256, profile)``: the sha256 of the ``(graph_id, y)`` pairs in id order (:func:`canonical_sha256`, a
        missing value as null); ``profile`` ``{"labels", "source", "content_sha256"}`` and, for one target,
        ``positive`` (how many labels are 1).
    """
    def value(y):
        if np.ndim(y) == 0:
            return float(y)
        return [None if np.isnan(v) else float(v) for v in np.asarray(y, dtype=np.float64)]

    pairs = sorted((int(g), value(y)) for g, y in labels.items())
    sha = canonical_sha256(pairs)
    profile = {"labels": len(pairs), "source": str(meta.get("source", "unknown")), "content_sha256": sha}
    if all(not isinstance(y, list) for _, y in pairs):
        profile["positive"] = int(sum(y == 1.0 for _, y in pairs))
    return sha, profile


def selection_profile(sel: dict) -> tuple[str, dict]:
    """The selection's digest and profile.

    Parameters
    ----------
    sel : dict
        ``selection.json`` (``medoids``, ``tau``, ``train_ids``, ``test_ids``, ``method``, ``epsilon``, ...).

    Returns
    -------
    tuple
        ``(sha256, profile)``: the sha256 of its medoids, τ and split (:func:`canonical_sha256`); ``profile``
        ``{"method", "k", "train", "test", "epsilon", "epsilon_mean", "content_sha256"}``.
    """
    content = {key: [float(v) if key == "tau" else int(v) for v in sel[key]]
               for key in ("medoids", "tau", "train_ids", "test_ids")}
    sha = canonical_sha256(content)
    return sha, {"method": sel.get("method"), "k": len(content["medoids"]), "train": len(content["train_ids"]),
                 "test": len(content["test_ids"]), "epsilon": sel.get("epsilon"),
                 "epsilon_mean": sel.get("epsilon_mean", sel.get("epsilon")), "content_sha256": sha}


def store_profile(sha256: str, graphs: int, nodes: int, features: int) -> dict:
    """The graph store's profile as a tracking server shows it: counts and the full content hash."""
    return {"graphs": int(graphs), "nodes": int(nodes), "features": int(features), "content_sha256": sha256}


def shown_params(flat: dict) -> dict:
    """Flat parameters (``{"group.key": value}``) with credentials in URL-like values redacted (:func:`redact_uri`)."""
    return {k: redact_uri(v) if isinstance(v, str) else v for k, v in flat.items()}


def run_values(params: dict, metrics: dict, step_metrics: dict | None = None) -> tuple[list, list]:
    """What a finished run logs, in order.

    Parameters
    ----------
    params : dict
        The run's parameters (each value as text, cut at 6000 characters).
    metrics : dict
        A nested record: its finite numeric leaves (:func:`flatten`), at step 0.
    step_metrics : dict, optional
        ``{name: values}`` logged at steps 0, 1, ... (non-finite values left out).

    Returns
    -------
    tuple of list
        ``([(key, text)], [(key, value, step)])``, parameters and metrics sorted by key.
    """
    plist = [(k, str(v)[:6000]) for k, v in sorted(params.items())]
    mlist = [(k, v, 0) for k, v in sorted(flatten(metrics).items())]
    for name, values in (step_metrics or {}).items():
        mlist += [(name, float(v), s) for s, v in enumerate(values) if math.isfinite(float(v))]
    return plist, mlist


def lock_stages(lock, where=None) -> dict:
    """The ``stages`` mapping of a ``dvc.lock``'s content (``{}`` for an empty lock).

    Raises
    ------
    InputError
        Naming ``where`` when ``lock`` is not a mapping with a ``stages`` mapping.
    """
    if not isinstance(lock, dict) or not isinstance(lock.get("stages") or {}, dict):
        from .._errors import InputError

        raise InputError(where, "not a dvc.lock (no 'stages' mapping)")
    return lock.get("stages") or {}
