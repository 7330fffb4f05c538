"""Losses of every task type: their Lipschitz constants (the certificate), label terms, loss scales."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tmdlib.guarantees.losses import (Standardizer, check_loss, label_term_bound, loss_lipschitz, per_graph_losses,
                                      trivial_loss)
from tmdlib.metrics import roc_auc, score


@pytest.mark.parametrize("loss,D,T", [("bce", 1, 1), ("bce", 3, 3), ("ce", 4, 1), ("l1", 2, 2), ("huber", 1, 1)])
def test_lipschitz_constant_holds_on_random_pairs(loss, D, T):
    """|L(z; y) - L(z'; y)| <= M ||z - z'||_2 for the constant each loss claims (the certificate's M)."""
    rng = np.random.default_rng(0)
    M, _ = loss_lipschitz(loss, delta=0.7)
    n = 4000
    z, z2 = rng.normal(0, 3, (n, D)), rng.normal(0, 3, (n, D))
    if loss == "ce":
        y = rng.integers(0, D, (n, 1)).astype(float)
    elif loss == "bce":
        y = rng.integers(0, 2, (n, T)).astype(float)
        y[rng.random((n, T)) < 0.3] = np.nan  # masked multi-task
    else:
        y = rng.normal(0, 1, (n, T))
        y[rng.random((n, T)) < 0.2] = np.nan
    diff = np.abs(per_graph_losses(z, y, loss, 0.7) - per_graph_losses(z2, y, loss, 0.7))
    assert np.all(diff <= M * np.linalg.norm(z - z2, axis=1) + 1e-12)
    if loss == "ce":  # sqrt 2 is tight: two far-apart logit vectors approach it
        assert M == pytest.approx(math.sqrt(2))


def test_mse_is_uncertified_and_losses_fit_task_types():
    assert loss_lipschitz("mse")[0] is None
    assert check_loss("regression", None) == "huber" and check_loss("multiclass", "auto") == "ce"
    with pytest.raises(ValueError):
        check_loss("binary", "l1")


def test_missing_labels_contribute_nothing():
    z = np.array([[0.5, -1.0, 2.0]])
    y_full = np.array([[1.0, 0.0, 1.0]])
    y_gap = np.array([[1.0, np.nan, 1.0]])
    L_gap = per_graph_losses(z, y_gap, "bce")
    only = per_graph_losses(z[:, [0, 2]], y_full[:, [0, 2]], "bce")
    assert L_gap == pytest.approx(only)  # the missing task is left out of the mean
    assert per_graph_losses(z, np.full((1, 3), np.nan), "bce")[0] == 0.0


def test_binary_bce_matches_the_paper_loss():
    from tmdlib.torch.gin import bce_losses

    rng = np.random.default_rng(1)
    z, y = rng.normal(size=50), rng.integers(0, 2, 50).astype(float)
    assert per_graph_losses(z, y, "bce") == pytest.approx(bce_losses(z, y), rel=1e-15)


def test_label_term_l1_is_bounded_model_free():
    rng = np.random.default_rng(2)
    z = rng.normal(size=(30, 1))
    y = rng.normal(size=(30, 1))
    ya = y[rng.integers(0, 30, 30)]
    lt = label_term_bound("l1", z, y, ya)
    assert abs(lt["label_term"]) <= lt["label_term_bound"] + 1e-12
    assert lt["label_term_bound"] <= lt["label_term_model_free"] + 1e-12
    assert lt["label_term_model_free"] == pytest.approx(np.abs(y - ya).mean())


def test_trivial_loss_scales():
    assert trivial_loss("binary", "bce")[0] == pytest.approx(math.log(2))
    assert trivial_loss("multiclass", "ce", num_classes=5)[0] == pytest.approx(math.log(5))
    y = np.array([[-1.0], [1.0], [0.0], [2.0]])
    scale, what = trivial_loss("regression", "l1", y)
    assert scale == pytest.approx(np.abs(y - y.mean()).mean()) and "mean" in what


def test_standardizer_round_trip_and_weights():
    y = np.array([[1.0, 10.0], [3.0, np.nan], [5.0, 30.0]])
    s = Standardizer.fit(y, weights=[1, 1, 2])
    assert s.mean[0] == pytest.approx((1 + 3 + 10) / 4)
    assert np.allclose(s.inverse(s.transform(y)), y, equal_nan=True)
    assert Standardizer.from_dict(s.to_dict()).mean.tolist() == s.mean.tolist()
    assert s.target_scale[0] is s.mean and Standardizer.identity(2).target_scale is None


def test_metrics_per_task():
    assert roc_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.75)
    r = score(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 5.0]), "regression")
    assert r["rmse"] == pytest.approx(math.sqrt(4 / 3)) and r["mae"] == pytest.approx(2 / 3)
    assert r["spearman"] == pytest.approx(1.0)
    mc = score(np.array([[2.0, 0, 0], [0, 2.0, 0], [0, 0, 2.0], [2.0, 0, 0]]), np.array([0, 1, 1, 0]), "multiclass", 3)
    assert mc["accuracy"] == 0.75
    mt = score(np.array([[1.0, -1], [-1, 1], [2, np.nan]]), np.array([[1, np.nan], [0, 1], [1, 0]]), "multitask")
    assert mt["tasks_scored"] == 1 and mt["rocauc"] == 1.0  # task 2 has one class only among its labels


def test_the_standardizer_maps_no_rows_to_no_rows():
    """A selection without one labelled member encodes to ``(0, T)``: the production measurement's empty case."""
    s = Standardizer([1.0, 2.0], [2.0, 4.0])
    assert s.transform(np.zeros((0, 2))).shape == (0, 2) and s.inverse([]).shape == (0, 2)
    assert Standardizer.identity().transform(np.array([])).shape == (0, 1)
