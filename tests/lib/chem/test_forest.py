"""The random forest of tmdlib.chem on ECFP4 counts: τ weights, NaN targets, tasks, bad input."""
from __future__ import annotations

import numpy as np
import pytest

from tmdlib.chem import ecfp4_counts, fit_forest, predict, predict_proba
from tmdlib import InputError

SMILES = ["CCO", "CCCO", "CCCCO", "c1ccccc1", "Cc1ccccc1", "CCc1ccccc1", "CCN", "CCCN", "C1CCCCC1", "CC1CCCCC1",
          "Oc1ccccc1", "c1ccncc1"]
Y = np.linspace(-1.0, 2.0, len(SMILES)) ** 2


@pytest.fixture(scope="module")
def X():
    return ecfp4_counts(SMILES)


def test_weight_two_equals_duplicating_the_row(X):
    """Without bootstrap and with every feature tried, the trees only see weighted impurity sums (depth-limited,
    so that leaves hold several molecules and their weighted mean is what is predicted)."""
    w = np.ones(len(SMILES))
    w[[1, 4, 9]] = 2.0
    dup = np.concatenate([np.arange(len(SMILES)), [1, 4, 9]])
    opts = dict(n_estimators=4, bootstrap=False, max_features=None, max_depth=2, seed=3)
    weighted = fit_forest(X, Y, sample_weight=w, **opts)
    duplicated = fit_forest(X[dup], Y[dup], **opts)
    plain = fit_forest(X, Y, **opts)
    assert np.allclose(predict(weighted, X), predict(duplicated, X))
    assert not np.allclose(predict(weighted, X), predict(plain, X))


def test_same_as_sklearn_with_sample_weight(X):
    from sklearn.ensemble import RandomForestRegressor

    tau = np.arange(1, len(SMILES) + 1, dtype=float)
    ours = fit_forest(SMILES, Y, sample_weight=tau, n_estimators=15, seed=7)
    ref = RandomForestRegressor(n_estimators=15, max_features="sqrt", random_state=7, n_jobs=1).fit(X, Y, tau)
    assert np.array_equal(predict(ours, SMILES), ref.predict(X))
    assert ours.n_estimators == 15 and ours.n_jobs == 1 and ours.n_dropped_nan_ == 0
    import inspect

    params = inspect.signature(fit_forest).parameters
    assert params["n_estimators"].default == 500 and params["n_jobs"].default == 1


def test_nan_targets_are_dropped(X):
    y = Y.copy()
    y[[2, 5]] = np.nan
    w = np.arange(1.0, len(SMILES) + 1)
    model = fit_forest(X, y, sample_weight=w, n_estimators=10, seed=1)
    keep = ~np.isnan(y)
    ref = fit_forest(X[keep], y[keep], sample_weight=w[keep], n_estimators=10, seed=1)
    assert model.n_dropped_nan_ == 2
    assert np.array_equal(predict(model, X), predict(ref, X))
    with pytest.raises(InputError, match="all 12 targets are missing"):
        fit_forest(X, np.full(len(SMILES), np.nan), n_estimators=2)


def test_classification_binary_and_multiclass(X):
    binary = (Y > 1).astype(int)
    model = fit_forest(SMILES, binary, task="classification", n_estimators=20, seed=0)
    assert set(predict(model, SMILES)) <= {0, 1}
    assert predict_proba(model, X).shape == (len(SMILES), 2)
    multi = np.array(["a", "b", "c"] * 4)
    model = fit_forest(X, multi, task="classification", n_estimators=20, seed=0)
    assert predict_proba(model, X).shape == (len(SMILES), 3)
    assert set(predict(model, X)) <= {"a", "b", "c"}
    y = binary.astype(float)
    y[0] = np.nan
    assert fit_forest(X, y, task="classification", n_estimators=5).n_dropped_nan_ == 1
    with pytest.raises(InputError, match="two classes"):
        fit_forest(X, np.zeros(len(SMILES)), task="classification", n_estimators=2)


def test_bad_input(X):
    with pytest.raises(InputError, match=r"'C1CC'.*position 1"):
        fit_forest(["CCO", "C1CC", "CCN"], [1.0, 2.0, 3.0], n_estimators=2)
    with pytest.raises(InputError, match=r"position 0"):
        predict(fit_forest(X, Y, n_estimators=2), ["xx"])
    with pytest.raises(InputError, match="sample_weight"):
        fit_forest(X, Y, sample_weight=np.ones(3), n_estimators=2)
    with pytest.raises(InputError, match="sample_weight"):
        fit_forest(X, Y, sample_weight=-np.ones(len(SMILES)), n_estimators=2)
    with pytest.raises(InputError, match="infinite"):
        fit_forest(X, np.r_[Y[:-1], np.inf], n_estimators=2)
    with pytest.raises(InputError, match="shape"):
        fit_forest(X, Y[:3], n_estimators=2)
    with pytest.raises(InputError, match="task"):
        fit_forest(X, Y, task="ranking")
    with pytest.raises(InputError, match="classification forest"):
        predict_proba(fit_forest(X, Y, n_estimators=2), X)
