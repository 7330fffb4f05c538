"""Intervals per bin of similarity (issue 67, item 5): Mondrian split-conformal regression per bin, normalised within
a bin by a fitted power of the difficulty, a bin with too few calibration members merged and said
(:func:`tmdlib.models.predict.calibrate`)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("crepes")


def _pool(rng, n: int = 20_000):
    """A pool whose fifth is shifted away from the training set (similarity 0.05-0.35 against 0.35-0.95), the errors'
    scale the cube of the difficulty the intervals are given (1 - similarity + 0.05: a shallow proxy, as on MOSES)."""
    shifted = rng.random(n) < 0.2
    s = np.where(shifted, rng.uniform(0.05, 0.35, n), rng.uniform(0.35, 0.95, n))
    d = 1 - s + 0.05
    return s, d, rng.normal(0, d ** 3)


def _bins(s_cal, k: int = 4):
    return np.unique(np.sort(s_cal)[[i * len(s_cal) // k for i in range(1, k)]])


def test_similarity_bins_cover_every_decile_of_a_shifted_pool_where_one_quantile_does_not():
    from tmdlib.datasets import TaskSpec
    from tmdlib.models.predict import calibrate

    task, rng = TaskSpec("regression"), np.random.default_rng(0)
    s, d, y = _pool(rng)
    pred = np.zeros((len(y), 1))
    decile = np.searchsorted(np.quantile(s, np.linspace(0, 1, 11)[1:-1]), s, side="right")
    cover = {"old": [], "new": []}
    for _ in range(20):  # 20 uniform audit samples of 200: the guarantee is over the draw of the audit sample
        a = rng.choice(len(s), 200, replace=False)
        rest = np.setdiff1d(np.arange(len(s)), a)
        edges = _bins(s[a])
        b = np.searchsorted(edges, s, side="right")
        old = calibrate(pred[a], y[a], task, 0.9, sigmas=d[a])
        new = calibrate(pred[a], y[a], task, 0.9, sigmas=d[a], bins=b[a], power=True)
        assert new.mondrian and [r["n_calibration"] for r in new.describe(edges)["bins"]["y"]] == [50] * 4
        assert 2.0 < new.powers[0] < 4.0  # the errors grow as the cube of the difficulty
        for name, p in (("old", old.predict(pred[rest], sigmas=d[rest])),
                        ("new", new.predict(pred[rest], sigmas=d[rest], bins=b[rest]))):
            hit = (p["lower"][:, 0] <= y[rest]) & (y[rest] <= p["upper"][:, 0])
            cover[name].append([hit[decile[rest] == j].mean() for j in range(10)])
    new, old = np.mean(cover["new"], axis=0), np.mean(cover["old"], axis=0)
    assert (new >= 0.88).all() and (new <= 0.93).all(), new  # nominal in every decile, none inflated
    assert old[0] < 0.6 and old[-1] > 0.99  # one quantile: the shifted decile under-covered, the nearest over-covered
    assert np.mean(cover["new"]) == pytest.approx(0.9, abs=0.015)


def test_a_bin_with_too_few_calibration_members_is_merged_and_says_so():
    from tmdlib.datasets import TaskSpec
    from tmdlib.models.predict import calibrate, min_bin

    rng = np.random.default_rng(1)
    bins = np.repeat([0, 1, 2], [12, 60, 70])  # the lowest bin: 12 members, fewer than min_bin
    y = rng.normal(0, 1 + bins)
    cal = calibrate(np.zeros((len(y), 1)), y, TaskSpec("regression"), 0.9, sigmas=np.ones(len(y)), bins=bins)
    desc = cal.describe(np.array([0.3, 0.6]))
    rows = desc["bins"]["y"]
    assert [r["bins"] for r in rows] == [[0, 1], [2]] and [r["n_calibration"] for r in rows] == [72, 70]
    assert rows[0]["similarity_from"] == 0.0 and rows[0]["similarity_to"] == 0.6 and rows[1]["similarity_to"] == 1.0
    assert desc["min_bin"] == 50 and len(desc["bin_notes"]) == 1
    assert "had 12 labelled calibration members (< 50): merged into bin 1" in desc["bin_notes"][0]
    p = cal.predict(np.zeros((3, 1)), sigmas=np.ones(3), bins=np.array([0, 1, 2]))
    assert np.isfinite(p["lower"]).all() and p["lower"][0, 0] == p["lower"][1, 0] != p["lower"][2, 0]
    # missing labels count: a target whose middle bin is mostly unlabelled merges it; the other target keeps three
    Y = np.column_stack([y, y])
    Y[12:60, 1] = np.nan
    two = calibrate(np.zeros((len(y), 2)), Y, TaskSpec("regression", targets=("a", "b")), 0.9,
                    sigmas=np.ones(len(y)), bins=np.repeat([0, 1, 2], [50, 50, 42]))
    assert [len(r) for r in two.describe()["bins"].values()] == [2, 1]
    assert any(n.startswith("a: similarity bin 2 had 42") for n in two.bin_notes)
    assert min_bin(0.9) == 50 and min_bin(0.99) == 100  # a bin must be able to give a finite interval


def test_without_bins_nothing_changes_and_a_flat_difficulty_keeps_power_one():
    from tmdlib.datasets import TaskSpec
    from tmdlib.models.predict import calibrate, fit_power

    rng = np.random.default_rng(2)
    y = rng.normal(size=100)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cal = calibrate(np.zeros((100, 1)), y, TaskSpec("regression"), 0.9, sigmas=np.full(100, 0.5))
    assert not cal.mondrian and cal.powers is None and "bins" not in cal.describe()
    assert fit_power(y, np.full(100, 0.5)) == 1.0
    d = rng.uniform(0.1, 1.0, 5000)
    assert fit_power(rng.normal(0, d ** 2), d) == pytest.approx(2.0, abs=0.15)
    # errors that shrink with the difficulty, or grow slower than it: never flatter than the plain normalisation
    assert fit_power(rng.normal(0, d ** -1), d) == fit_power(rng.normal(0, d ** 0.5), d) == 1.0


def test_similarity_bins_hold_at_least_the_minimum_members_and_ties_stay_together():
    """The domain's bins (tmdlib.chem.domain.Domain.set_bins): equal counts of >= min_bin, ties never split, a small
    remainder kept in the bin below; one bin below 2 x min_bin."""
    pytest.importorskip("rdkit")
    from tmdlib.chem.domain import Domain

    d = Domain(["CCO", "c1ccccc1"])
    for sims, sizes in ((np.arange(200) / 200, [50, 50, 50, 50]), (np.arange(149) / 149, [74, 75]),
                        (np.r_[np.zeros(30), np.full(40, 0.5), 1 + np.arange(130) / 130], [70, 50, 80]),
                        (np.arange(99) / 99, [99]), (np.r_[np.ones(180), np.arange(20) / 20], [200]),
                        (np.arange(2000) / 2000, [200] * 10)):
        d.set_bins(sims, 50)
        assert d.bin_sizes == sizes and len(d.edges) == len(sizes) - 1
        assert np.bincount(d.bin_of(sims), minlength=len(sizes)).tolist() == sizes
