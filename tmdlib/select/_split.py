"""Seeded train/test splits (label-agnostic)."""
from __future__ import annotations

import numpy as np

__all__ = ["train_test_split", "batched_train_test_split", "split_with_column", "TRAIN_SPLITS", "TEST_SPLITS"]

#: Values of a dataset's own ``split`` column (lower case) that put a graph in the pool to select from ...
TRAIN_SPLITS = ("train", "valid", "validation", "val")
#: ... or in the held-out test set.
TEST_SPLITS = ("test",)


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


def batched_train_test_split(sizes, test_fraction: float = 0.2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Split a dataset that grew by batches so that appending never moves an old graph.

    Segment ``b`` (positions ``start_b .. start_b + sizes[b] - 1``) is split on its own by
    :func:`train_test_split` with seed ``seed`` for the base (``b = 0``, so a dataset without batches
    splits exactly as :func:`train_test_split`) and ``SeedSequence([seed, b])`` for batch ``b``.

    Parameters
    ----------
    sizes : sequence of int, shape (B,)
        Graphs in the base and in each appended batch, in order; ``n = sum(sizes)``.
    test_fraction : float in [0, 1)
        Share held out of each segment (``round(test_fraction * sizes[b])`` graphs).
    seed : int
        Base seed.

    Returns
    -------
    train, test : ndarray of int64
        Sorted disjoint positions covering ``0..n-1``; those of the first ``B - 1`` segments are the
        same whatever batches follow.
    """
    trains, tests, start = [], [], 0
    for b, size in enumerate(int(s) for s in sizes):
        s = seed if b == 0 else int(np.random.SeedSequence([int(seed), b]).generate_state(1)[0])
        tr, te = train_test_split(size, test_fraction, s)
        trains.append(tr + start)
        tests.append(te + start)
        start += size
    empty = np.zeros(0, dtype=np.int64)
    return np.concatenate(trains or [empty]), np.concatenate(tests or [empty])


def split_with_column(split, sizes, test_fraction: float = 0.2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The dataset's own split where it has one (MoleculeACE's, a user's ``split`` column), else the seeded one.

    Graphs whose ``split`` is ``train`` / ``valid`` (:data:`TRAIN_SPLITS`) form the pool, ``test`` the held-out set;
    graphs without a value (``None`` or ``""``) are split by :func:`batched_train_test_split` as usual.

    Parameters
    ----------
    split : sequence of str or None, shape (n,)
    sizes : sequence of int
        Segment sizes for :func:`batched_train_test_split`.
    test_fraction, seed
        For the graphs without a value.

    Returns
    -------
    train, test : ndarray of int64
        Sorted disjoint positions covering ``0..n-1``.
    """
    values = np.array([(v or "").strip().lower() for v in split], dtype=object)
    unknown = sorted({v for v in values if v and v not in TRAIN_SPLITS + TEST_SPLITS})
    if unknown:
        raise ValueError(f"split values {unknown} are neither {'/'.join(TRAIN_SPLITS)} nor {'/'.join(TEST_SPLITS)}")
    tr, te = batched_train_test_split(sizes, test_fraction, seed)
    given = values != ""
    in_train = np.isin(values, TRAIN_SPLITS)
    in_test = np.isin(values, TEST_SPLITS)
    train = np.union1d(tr[~given[tr]], np.flatnonzero(in_train)).astype(np.int64)
    test = np.union1d(te[~given[te]], np.flatnonzero(in_test)).astype(np.int64)
    return train, test
