"""Per-depth-level weights of the tree distance."""
from __future__ import annotations

from typing import Sequence, Union

import numpy as np

__all__ = ["resolve_weights", "pascal_weights", "parse_weights"]

WeightsLike = Union[str, float, Sequence[float]]


def pascal_weights(depth: int) -> np.ndarray:
    r"""Pascal-rule weights of Chuang & Jegelka (2022), Theorem 8.

    :math:`w_l = l / (L - l)` for :math:`l = 1, \dots, L-1`; e.g. ``[1/3, 1, 3]`` at ``L = 4``.

    Returns
    -------
    ndarray of float64, shape (L - 1,)
        ``weights[0]`` is the innermost level, ``weights[L-2]`` the root level.
    """
    l = np.arange(1, depth, dtype=np.float64)
    return l / (depth - l)


def resolve_weights(depth: int, weights: WeightsLike = "pascal") -> np.ndarray:
    """Turn a weight specification into an array of ``L - 1`` positive floats.

    Parameters
    ----------
    depth : int
        Depth :math:`L \\ge 1` of the computation trees.
    weights : "pascal", float or sequence of float
        ``"pascal"`` (default) for :func:`pascal_weights`; a scalar ``w`` for
        ``[w] * (L - 1)``; or an explicit list of length ``L - 1``
        (``weights[0]`` innermost, ``weights[L-2]`` root level).

    Returns
    -------
    ndarray of float64, shape (L - 1,)
    """
    if int(depth) != depth or depth < 1:
        raise ValueError(f"depth must be an integer >= 1, got {depth!r}")
    depth = int(depth)
    if isinstance(weights, str):
        if weights.strip().lower() == "pascal":
            return pascal_weights(depth)
        return resolve_weights(depth, parse_weights(weights))
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim == 0:
        w = np.full(depth - 1, float(w))
    if w.shape != (depth - 1,):
        raise ValueError(f"expected {depth - 1} weights for depth {depth}, got {w.size}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"weights must be finite and non-negative, got {w.tolist()}")
    return w


def parse_weights(text: str) -> WeightsLike:
    """Parse a CLI weight string: ``"pascal"``, ``"0.5"`` or ``"0.33,1,3"``."""
    t = text.strip()
    if t.lower() == "pascal":
        return "pascal"
    try:
        parts = [float(p) for p in t.split(",")]
    except ValueError:
        raise ValueError(f"weights must be 'pascal', a number or a comma-separated list, got {text!r}") from None
    return parts[0] if len(parts) == 1 else parts
