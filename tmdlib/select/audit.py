r"""The audit sample: a uniform random sample of the pool, labelled beside the coreset and never trained on.

Its labels give an unbiased estimate of the trained model's quality on the pool outside the coreset — the molecules
the model is used for — with a confidence interval (:func:`tmdlib.models.evaluate.pool_estimate`), and they calibrate
the prediction intervals (conformal prediction needs held-out labelled members).  It is drawn once, with the seed,
by :func:`audit_members` from the graph ids and the seed alone — the same members in every round, whatever was
selected or labelled — and the selection runs on the rest of the pool (the audit sample is the test set of an
unlabelled pool; there is no 80/20 split of a pool without labels).

Size: ``audit`` is a count (``>= 1``) or a fraction of the pool (``< 1``); ``"auto"`` is
:func:`default_audit_size`: 5 % of the pool, at least 50 and at most 200 members (never more than a fifth of the
pool) — every audit label is paid for, and past ~200 the interval narrows slowly (as :math:`1/\sqrt{m}`).  With 100
audit members a bootstrap 90 % interval of an RMSE is about ±15 % of its value; with 200, about ±10 %.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["audit_members", "audit_sample", "audit_size", "default_audit_size", "graph_keys"]


def default_audit_size(n: int) -> int:
    """5 % of the pool, clipped to [50, 200], and at most a fifth of the pool (at least 1 when ``n >= 2``)."""
    if n < 2:
        return 0
    return int(max(1, min(max(50, math.ceil(0.05 * n)), 200, n // 5 or 1)))


def audit_size(audit, n: int) -> int:
    """Members an ``audit`` setting asks for in a pool of ``n``: ``"auto"``, a count, or a fraction in (0, 1);
    0 / ``"none"`` = no audit sample."""
    if audit in (None, "", "auto"):
        return default_audit_size(n)
    if isinstance(audit, str) and audit.strip().lower() in ("none", "off", "0"):
        return 0
    a = float(audit)
    if not math.isfinite(a) or a < 0:
        raise ValueError(f"labels.audit must be auto, a count >= 0 or a fraction in (0, 1); got {audit!r}")
    return int(math.ceil(a * n)) if 0 < a < 1 else int(a)


def audit_sample(n: int, size: int, seed: int = 0, exclude=None, keep=None) -> np.ndarray:
    r"""Positions of the audit sample in a pool of ``n``, sorted.

    Parameters
    ----------
    n : int
    size : int
        Members wanted (:func:`audit_size`).
    seed : int
    exclude : array_like of int, optional
        Positions never in the sample (the coreset and what is already labelled for training).
    keep : array_like of int, optional
        The audit sample of an earlier round: kept as it is (topped up uniformly to ``size`` when smaller).

    Returns
    -------
    ndarray of int64, shape (min(size, available),)
    """
    keep = np.unique(np.asarray([] if keep is None else keep, dtype=np.int64))
    banned = np.zeros(n, dtype=bool)
    if exclude is not None:
        banned[np.asarray(exclude, dtype=np.int64)] = True
    keep = keep[~banned[keep]]
    need = int(size) - len(keep)
    if need <= 0:
        return keep
    banned[keep] = True
    free = np.flatnonzero(~banned)
    rng = np.random.default_rng([int(seed), 0xA0D17])
    new = rng.choice(free, size=min(need, len(free)), replace=False) if len(free) else np.zeros(0, np.int64)
    return np.sort(np.concatenate([keep, np.asarray(new, dtype=np.int64)]))


def graph_keys(graph_ids, seed: int = 0) -> np.ndarray:
    """A uniform pseudo-random number in [0, 1) per graph id, a function of the id and the seed only (splitmix64)."""
    with np.errstate(over="ignore"):
        z = np.asarray(graph_ids, dtype=np.int64).astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15) * np.uint64(
            (int(seed) + 1) & 0xFFFFFFFF)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def audit_members(graph_ids, size: int, seed: int = 0) -> np.ndarray:
    r"""Positions (sorted) of the audit sample of a pool: the ``size`` members with the smallest
    :func:`graph_keys` — a uniform random sample without replacement that depends on the ids and the seed only, so it
    is the same in every round and grows by whole members when the pool grows.

    Parameters
    ----------
    graph_ids : array_like of int, shape (n,)
    size : int
    seed : int

    Returns
    -------
    ndarray of int64, shape (min(size, n),)
    """
    keys = graph_keys(graph_ids, seed)
    size = int(min(max(size, 0), len(keys)))
    if size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.sort(np.argpartition(keys, size - 1)[:size]).astype(np.int64)
