"""The Random control (issue 60): the paired-bootstrap verdict on the audit sample, and the two arms' models."""
from __future__ import annotations

import numpy as np
import pytest

from tmdlib.datasets.task import TaskSpec
from tmdlib.models.evaluate import compare_arms, control_verdict


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
    """A strategy arm drawn where the audit values are gets the better model; each arm sees base + m labels."""
    y = {g: (5.0 if g < 100 else 0.0) for g in range(200)}
    seen = []

    class Spy(_Mean):
        def fit(self, X, y, w, task):
            seen.append(len(X))
            return super().fit(X, y, w, task)

    res = compare_arms(Spy, lambda ids: list(ids), lambda ids: np.array([y[int(g)] for g in ids]),
                       base=np.array([150, 151]), control=np.arange(100, 110), strategy=np.arange(0, 30),
                       audit=np.arange(30, 90), task=TaskSpec("regression"))
    assert seen == [12, 12] and res["n_control"] == res["n_strategy"] == 10 and res["n_base"] == 2
    assert res["verdict"] == "strategy better"
    none = compare_arms(Spy, list, lambda ids: np.zeros(len(ids)), np.arange(3), np.arange(1), np.arange(5, 9),
                        np.arange(10, 20), TaskSpec("regression"))
    assert none["verdict"] == "undecided" and "not compared" in none["note"]
