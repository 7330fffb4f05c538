"""Seeded train/test splits (label-agnostic)."""
from __future__ import annotations

import numpy as np

__all__ = ["train_test_split"]


def train_test_split(n: int, test_fraction: float = 0.2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random split of positions ``0..n-1`` (the paper's 80/20 protocol).

    Parameters
    ----------
    n : int
        Number of graphs.
    test_fraction : float in [0, 1)
        Share of graphs held out; the test size is ``round(test_fraction * n)``.
    seed : int
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    train, test : ndarray of int64
        Sorted disjoint positions covering ``0..n-1``.
    """
    if not 0.0 <= test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction}")
    perm = np.random.default_rng(seed).permutation(n)
    n_test = int(round(test_fraction * n))
    return np.sort(perm[n_test:]).astype(np.int64), np.sort(perm[:n_test]).astype(np.int64)
