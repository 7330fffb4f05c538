"""The Random control (issues 60, 67): the paired-bootstrap verdict, the two arms' models cross-fitted over every uniform
label (audit sample and control arm), and the labels a decision needs."""
from __future__ import annotations

import numpy as np
import pytest

from tmdlib.datasets import TaskSpec
from tmdlib.models.evaluate import compare_arms, control_verdict, cross_fit_arms, labels_needed


def test_verdict_sees_a_clearly_better_arm_and_stays_undecided_on_equal_arms():
    rng = np.random.default_rng(0)
    y = rng.normal(size=200)
    better = control_verdict(y + rng.normal(scale=1.0, size=200), y + rng.normal(scale=0.4, size=200), y, TaskSpec("regression"))
    assert better["verdict"] == "strategy better" and better["high"] < 0
    assert better["difference"] == pytest.approx(better["strategy"] - better["control"])
    worse = control_verdict(y + rng.normal(scale=0.4, size=200), y + rng.normal(scale=1.0, size=200), y, TaskSpec("regression"))
    assert worse["verdict"] == "Random better" and worse["low"] > 0
    same = y + rng.normal(scale=1.0, size=200)
    tie = control_verdict(same, same, y, TaskSpec("regression"))
    assert tie["verdict"] == "undecided" and tie["difference"] == 0.0


def test_equal_arms_are_called_different_at_about_the_nominal_rate():
    """Two arms of the same quality: the 90 % interval excludes 0 in about 10 % of audit samples (not tuned to win)."""
    rng = np.random.default_rng(1)
    calls = []
    for s in range(60):
        y = rng.normal(size=80)
        v = control_verdict(y + rng.normal(size=80), y + rng.normal(size=80), y, TaskSpec("regression"), n_boot=400, seed=s)
        calls.append(v["verdict"] != "undecided")
    assert 0.0 <= np.mean(calls) <= 0.25


def test_binary_uses_the_brier_score_and_small_samples_say_so():
    y = np.array([0, 1, 0, 1, 1, 0, 1, 0, 1, 1.0])
    v = control_verdict(np.full(10, 0.5), y * 0.9 + 0.05, y, TaskSpec("binary"), n_boot=200)
    assert v["metric"] == "root Brier score" and v["control"] == pytest.approx(0.5)
    few = control_verdict(np.zeros(3), np.zeros(3), np.ones(3), TaskSpec("regression"))
    assert few["verdict"] == "undecided" and "too few" in few["note"]
    with pytest.raises(ValueError, match="regression or binary"):
        control_verdict(np.zeros(9), np.zeros(9), np.zeros(9), TaskSpec("multiclass", classes=(0.0, 1.0, 2.0)))


class _Mean:
    """A model that predicts the mean of what it was trained on (enough to tell the arms apart)."""

    def fit(self, X, y, w, task):
        self.m = float(np.mean(y))
        return self

    def outputs(self, X):
        return np.full((len(X), 1), self.m)


def test_compare_arms_trains_each_arm_on_as_many_labels():
    """The production wrapper is :func:`cross_fit_arms` with the model's fit and outputs: each arm sees base + a
    labels in every fold, the same verdict."""
    y = {g: (5.0 if g < 100 else 0.0) for g in range(200)}
    seen = []

    class Spy(_Mean):
        def fit(self, X, y, w, task):
            seen.append(len(X))
            return super().fit(X, y, w, task)

    res = compare_arms(Spy, lambda ids: list(ids), lambda ids: np.array([y[int(g)] for g in ids]),
                       base=np.array([150, 151]), control=np.arange(100, 110), strategy=np.arange(0, 30),
                       audit=np.arange(30, 90), task=TaskSpec("regression"))
    assert res["folds"] == 5 and res["repeats"] == 3 and res["n"] == 70 and res["n_arm"] == 30 and res["n_base"] == 2
    # all 30 strategy picks fit in an arm: one strategy model for every fold, one Random model per fold and split
    assert seen == [32] * 16 and res["n_control"] == 10 and res["n_strategy"] == 30 and res["n_audit"] == 60
    ys = lambda ids: np.array([y[int(g)] for g in ids])  # noqa: E731
    same = cross_fit_arms(lambda tr, pr: np.full(len(pr), ys(tr).mean()), ys, np.array([150, 151]),
                          np.arange(100, 110), np.arange(0, 30), np.arange(30, 90), TaskSpec("regression"))
    assert {k: res[k] for k in ("verdict", "difference", "low", "high", "labels_needed")} == {
        k: same[k] for k in ("verdict", "difference", "low", "high", "labels_needed")}  # the one rule
    none = compare_arms(Spy, list, lambda ids: np.zeros(len(ids)), np.arange(3), np.array([4]), np.arange(5, 6),
                        np.arange(10, 12), TaskSpec("regression"))
    assert none["verdict"] == "undecided" and "not compared" in none["note"]


# ---- cross-fitting on a small pool where the answer is known by construction (issue 67) ----

def _pool(n=1200, seed=0):
    """A regression pool on the unit square: y = a smooth surface plus noise; the audit sample uniform."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    y = np.sin(6 * X[:, 0]) + np.cos(5 * X[:, 1]) + rng.normal(scale=0.1, size=n)
    perm = rng.permutation(n)
    return X, y, perm[:100], perm[100:]  # audit, the rest of the pool


def _knn(X, y, calls=None, k=5):
    """fit_predict of a k-nearest-neighbour regressor (the mean of the k nearest trained members' labels)."""
    def fit_predict(train, predict):
        if calls is not None:
            calls.append((np.asarray(train).copy(), np.asarray(predict).copy()))
        d = ((X[predict][:, None, :] - X[train][None, :, :]) ** 2).sum(-1)
        near = np.argsort(d, axis=1)[:, :min(k, len(train))]
        return y[train][near].mean(axis=1)
    return fit_predict


def test_cross_fitting_calls_random_better_when_the_strategy_picks_one_corner():
    X, y, audit, rest = _pool()
    rng = np.random.default_rng(1)
    base = rng.choice(rest, 30, replace=False)
    free = np.setdiff1d(rest, base)
    control = rng.choice(free, 12, replace=False)
    corner = free[(X[free, 0] < 0.3) & (X[free, 1] < 0.3)]
    strategy = rng.choice(np.setdiff1d(corner, control), 48, replace=False)  # every pick from one corner: bad
    v = cross_fit_arms(_knn(X, y), lambda ids: y[ids], base, control, strategy, audit, TaskSpec("regression"))
    assert v["verdict"] == "Random better" and v["low"] > 0 and v["difference"] > 0
    assert v["n"] == 112 and v["folds"] == 5 and v["n_arm"] == 48 and v["more_needed"] == 0
    assert v["labels_needed"] is not None and v["labels_needed"] <= v["n"]
    # and the other way round: the strategy spread over the square, Random's arm gets ... the same uniform draw,
    # so a strategy that covers the square (a grid) beats it
    grid = np.array([int(np.argmin(((X[free] - [a, b]) ** 2).sum(1))) for a in np.linspace(0.05, 0.95, 7)
                     for b in np.linspace(0.05, 0.95, 7)])
    cover = np.setdiff1d(free[grid], control)
    w = cross_fit_arms(_knn(X, y), lambda ids: y[ids], base, control, cover, audit, TaskSpec("regression"))
    assert w["verdict"] != "Random better" and w["difference"] < 0


def test_cross_fitting_stays_undecided_when_both_arms_are_uniform():
    """The strategy's picks drawn like Random's, on top of a well-covered pool: neither arm can be better by
    construction, and the verdict stays undecided in (almost) every round."""
    calls = []
    for s in range(12):
        X, y, audit, rest = _pool(1200, seed=10 + s)
        rng = np.random.default_rng(s)
        base = rng.choice(rest, 300, replace=False)
        picks = rng.choice(np.setdiff1d(rest, base), 40, replace=False)
        v = cross_fit_arms(_knn(X, y), lambda ids: y[ids], base, picks[:8], picks[8:], audit,
                           TaskSpec("regression"), n_boot=500, seed=s)
        calls.append(v["verdict"])
        assert v["n"] == 108 and v["n_arm"] == 32
    assert calls.count("undecided") >= 10


def test_cross_fitting_never_tests_a_member_it_trained_on():
    X, y, audit, rest = _pool(400)
    base, control, strategy = rest[:20], rest[20:27], rest[27:60]
    strategy = rest[27:200]  # more picks than an arm holds: a uniform subsample of them per fold
    calls = []
    v = cross_fit_arms(_knn(X, y, calls), lambda ids: y[ids], base, control, strategy, audit, TaskSpec("regression"),
                       folds=4, repeats=1, n_boot=200)
    assert v["folds"] == 4 and v["n_arm"] == 107 - 27 and len(calls) == 8  # one Random, one strategy model per fold
    tested = np.concatenate([p for _, p in calls[::2]])
    assert np.array_equal(np.sort(tested), np.union1d(audit, control))  # every uniform label tested once per arm
    assert np.array_equal(np.sort(np.concatenate([p for _, p in calls[1::2]])), np.sort(tested))
    for train, predict in calls:
        assert not np.intersect1d(train, predict).size
        assert np.isin(base, train).all() and train.size == base.size + v["n_arm"]
    uniform = np.union1d(audit, control)
    for (tr_r, _), (tr_s, _) in zip(calls[::2], calls[1::2]):
        assert np.isin(np.setdiff1d(tr_r, base), uniform).all()  # Random's arm: uniform labels only
        assert np.isin(np.setdiff1d(tr_s, base), strategy).all()  # the strategy's: its picks only
    # every strategy pick fits in an arm: one strategy model, trained on none of the uniform labels, predicts them all
    calls = []
    cross_fit_arms(_knn(X, y, calls), lambda ids: y[ids], base, control, rest[27:60], audit, TaskSpec("regression"),
                   folds=4, repeats=2, n_boot=200)
    assert len(calls) == 1 + 2 * 4 and np.array_equal(calls[0][1], np.union1d(audit, control))
    assert all(not np.intersect1d(tr, pr).size for tr, pr in calls)
    # a model that cheats by training on a test member is refused, not scored
    with pytest.raises(ValueError, match="trained member"):
        cross_fit_arms(_knn(X, y), lambda ids: y[ids], np.concatenate([base, audit[:1]]), control, strategy, audit,
                       TaskSpec("regression"))


def test_labels_needed_is_the_normal_sample_size_of_the_paired_differences():
    rng = np.random.default_rng(3)
    y = rng.normal(size=400)
    a, b = y + rng.normal(scale=1.0, size=400), y + rng.normal(scale=0.9, size=400)
    ea, eb = (a - y) ** 2, (b - y) ** 2
    d = eb - ea
    z = 1.6448536269514722
    assert labels_needed(ea, eb, 0.9) == int(np.ceil((z * d.std(ddof=1) / abs(d.mean())) ** 2))
    assert labels_needed(ea, ea) is None
