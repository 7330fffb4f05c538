"""The estimators of tmdlib.chem.models: the MinMax kernel, the SVMs, the forest and boosting as node arrays,
weights, persistence without pickle, classification, bad input."""
from __future__ import annotations

import io

import numpy as np
import pytest

from tmdlib.chem import ecfp4_counts
from tmdlib.chem import fit_forest
from tmdlib.chem.models import ECFPBoosting, ECFPForest, TanimotoSVC, TanimotoSVR, minmax_kernel
from tmdlib import InputError

SMILES = ["CCO", "CCCO", "CCCCO", "c1ccccc1", "Cc1ccccc1", "CCc1ccccc1", "CCN", "CCCN", "C1CCCCC1", "CC1CCCCC1",
          "Oc1ccccc1", "c1ccncc1", "CC(=O)O", "CCC(=O)O", "OCCO", "NCCN", "c1ccc2ccccc2c1", "Clc1ccccc1",
          "Brc1ccccc1", "CC(C)O", "CC(C)(C)O", "CCOC(=O)C", "c1ccoc1", "c1ccsc1", "CCCCCCCC", "CCCCCC(=O)N"]


@pytest.fixture(scope="module")
def X():
    return ecfp4_counts(SMILES)


@pytest.fixture(scope="module")
def y(X):
    rng = np.random.default_rng(1)
    return X[:, :300].sum(axis=1) / 10.0 + rng.normal(0, 0.3, X.shape[0])


def _direct(A, B):
    A, B = np.asarray(A, float), np.asarray(B, float)
    mn = np.minimum(A[:, None, :], B[None, :, :]).sum(-1)
    mx = np.maximum(A[:, None, :], B[None, :, :]).sum(-1)
    return np.where(mx > 0, mn / np.where(mx > 0, mx, 1), 1.0)


def _round_trip(model):
    """to_arrays -> npz bytes -> np.load(allow_pickle=False) -> from_arrays."""
    buf = io.BytesIO()
    np.savez(buf, **model.to_arrays())
    buf.seek(0)
    with np.load(buf, allow_pickle=False) as z:
        return type(model).from_arrays({k: z[k] for k in z.files})


# ------------------------------------------------------------------------------------------------- the kernel
def test_kernel_counts_equal_the_direct_formula(X):
    rng = np.random.default_rng(0)
    A = rng.poisson(0.3, (17, 64)).astype(np.float32)
    A[3] = 0  # an empty row: K(0, 0) = 1, K(0, b) = 0
    B = rng.poisson(0.3, (11, 64)).astype(np.float32)
    B[0] = 0
    assert np.allclose(minmax_kernel(A, B, block=4), _direct(A, B), rtol=0, atol=1e-15)
    assert minmax_kernel(A, B)[3, 0] == 1.0 and minmax_kernel(A, B)[3, 1] == 0.0
    K = minmax_kernel(X)
    assert np.allclose(K, _direct(X, X), atol=1e-15) and np.allclose(K, K.T) and np.all(np.diag(K) == 1.0)


def test_kernel_on_bits_is_tanimoto_and_on_reals_is_minmax():
    from rdkit import DataStructs

    from tmdlib.chem import ecfp4_bits

    bits = ecfp4_bits(SMILES[:8])
    A = np.array([list(b) for b in bits], dtype=np.float32)
    ref = np.array([DataStructs.BulkTanimotoSimilarity(b, bits) for b in bits])
    assert np.allclose(minmax_kernel(A), ref, atol=1e-12)
    rng = np.random.default_rng(2)
    R = rng.random((9, 30)) * (rng.random((9, 30)) < 0.4)
    assert np.allclose(minmax_kernel(R[:5], R), _direct(R[:5], R), atol=1e-13)


def test_kernel_rejects_bad_input():
    with pytest.raises(InputError, match="non-negative"):
        minmax_kernel(-np.ones((2, 3)))
    with pytest.raises(InputError, match="non-finite"):
        minmax_kernel(np.array([[np.nan, 1.0]]))
    with pytest.raises(InputError, match="fitted on 3 features"):
        minmax_kernel(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(InputError, match="2-D"):
        minmax_kernel(np.ones(3))
    with pytest.raises(InputError, match="single string"):
        minmax_kernel("CCO")


# ----------------------------------------------------------------------------------------------------- the SVMs
def test_svr_equals_sklearn_on_the_full_kernel(X, y):
    from sklearn.svm import SVR

    model = TanimotoSVR(C=3.0, epsilon=0.1).fit(X[:20], y[:20])
    mu, sd = y[:20].mean(), y[:20].std()
    ref = SVR(kernel="precomputed", C=3.0, epsilon=0.1).fit(minmax_kernel(X[:20]), (y[:20] - mu) / sd)
    expect = mu + sd * ref.predict(minmax_kernel(X[20:], X[:20]))
    assert np.allclose(model.predict(X[20:]), expect, rtol=0, atol=1e-10)
    assert model.support_vectors_.shape[0] == ref.support_.size < 20 + 1
    assert np.allclose(model.predict(SMILES[20:]), expect, atol=1e-10)  # SMILES are featurised the same way


def test_svr_weight_two_equals_the_row_twice(X, y):
    w = np.ones(len(SMILES))
    w[[1, 4, 9]] = 2.0
    dup = np.concatenate([np.arange(len(SMILES)), [1, 4, 9]])
    opts = dict(C=2.0, epsilon=0.05, tol=1e-9)
    weighted = TanimotoSVR(**opts).fit(X, y, sample_weight=w).predict(X)
    duplicated = TanimotoSVR(**opts).fit(X[dup], y[dup]).predict(X)
    plain = TanimotoSVR(**opts).fit(X, y).predict(X)
    assert np.allclose(weighted, duplicated, atol=1e-6)
    assert not np.allclose(weighted, plain, atol=1e-3)
    zero = w.copy()
    zero[[0, 2]] = 0.0  # weight 0 = the row left out
    keep = np.setdiff1d(np.arange(len(SMILES)), [0, 2])
    assert np.allclose(TanimotoSVR(**opts).fit(X, y, sample_weight=zero).predict(X),
                       TanimotoSVR(**opts).fit(X[keep], y[keep], sample_weight=w[keep]).predict(X), atol=1e-9)


def test_svr_drops_nan_targets_and_rejects_bad_input(X, y):
    yy = y.copy()
    yy[[0, 5]] = np.nan
    model = TanimotoSVR().fit(X, yy)
    assert model.n_dropped_nan_ == 2
    keep = ~np.isnan(yy)
    assert np.allclose(model.predict(X), TanimotoSVR().fit(X[keep], y[keep]).predict(X), atol=1e-12)
    with pytest.raises(InputError, match="shape"):
        TanimotoSVR().fit(X, y[:-1])
    with pytest.raises(InputError, match="sample_weight"):
        TanimotoSVR().fit(X, y, sample_weight=-np.ones(len(y)))
    with pytest.raises(InputError, match="infinite"):
        TanimotoSVR().fit(X, np.full(len(y), np.inf))
    with pytest.raises(InputError, match="no row to fit"):
        TanimotoSVR().fit(X, np.full(len(y), np.nan))
    with pytest.raises(InputError, match="C must be"):
        TanimotoSVR(C=0).fit(X, y)
    with pytest.raises(InputError, match="invalid SMILES"):
        TanimotoSVR().fit(["CCO", "not a smiles"], [1.0, 2.0])
    with pytest.raises(InputError, match="fitted on 2048 features"):
        model.predict(X[:, :100])


def test_svc_binary_equals_sklearn_and_platt_is_calibrated(X, y):
    from sklearn.svm import SVC

    from tmdlib.chem.models import _fit_platt, _platt

    labels = np.where(y > np.median(y), "active", "inactive")
    model = TanimotoSVC(C=2.0, seed=3).fit(X[:20], labels[:20])
    ref = SVC(kernel="precomputed", C=2.0).fit(minmax_kernel(X[:20]), labels[:20])
    Kt = minmax_kernel(X, X[:20])
    assert list(model.classes_) == list(ref.classes_)
    assert np.allclose(model.decision_function(X), ref.decision_function(Kt), atol=1e-10)
    assert np.array_equal(model.predict(X), ref.predict(Kt))
    p = model.predict_proba(X)
    order = np.argsort(model.decision_function(X))
    assert np.allclose(p.sum(axis=1), 1.0) and np.all(np.diff(p[order, 1]) >= 0)  # P(classes_[1]) rises with f
    # Platt's fit recovers a known sigmoid from many draws
    rng = np.random.default_rng(0)
    f = rng.normal(0, 2, 20000)
    positive = rng.random(f.size) < _platt(f, -1.5, 0.4)
    a, b = _fit_platt(f, positive, np.ones(f.size))
    assert abs(a + 1.5) < 0.1 and abs(b - 0.4) < 0.1


def test_svc_multiclass_one_vs_rest_and_weights(X, y):
    labels = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    model = TanimotoSVC(C=5.0).fit(X, labels)
    p = model.predict_proba(X)
    assert p.shape == (len(SMILES), 3) and np.allclose(p.sum(axis=1), 1.0) and (p >= 0).all()
    assert set(model.predict(X)) <= {0, 1, 2} and model.decision_function(X).shape == (len(SMILES), 3)
    assert (model.predict(X) == labels).mean() > 0.5  # it learned something on its own training rows
    w = np.ones(len(SMILES))
    w[[2, 7]] = 3.0
    dup = np.concatenate([np.arange(len(SMILES)), [2, 7, 2, 7]])
    a = TanimotoSVC(C=5.0, probability=False, tol=1e-9).fit(X, labels, sample_weight=w).decision_function(X)
    b = TanimotoSVC(C=5.0, probability=False, tol=1e-9).fit(X[dup], labels[dup]).decision_function(X)
    assert np.allclose(a, b, atol=1e-6)
    with pytest.raises(InputError, match="probability=True"):
        TanimotoSVC(probability=False).fit(X, labels).predict_proba(X)
    with pytest.raises(InputError, match="two classes"):
        TanimotoSVC().fit(X, np.zeros(len(SMILES)))


# ------------------------------------------------------------------------------------------- trees as arrays
def test_forest_arrays_reproduce_sklearn(X, y):
    ref = fit_forest(X, y, sample_weight=np.arange(1.0, len(y) + 1), n_estimators=30, seed=4)
    model = ECFPForest(n_estimators=30, seed=4).fit(X, y, sample_weight=np.arange(1.0, len(y) + 1))
    rng = np.random.default_rng(5)
    Xt = np.vstack([X, rng.poisson(0.2, (40, X.shape[1])).astype(np.float32)])
    assert np.allclose(model.predict(Xt), ref.predict(Xt), rtol=0, atol=1e-9)
    labels = (y > np.median(y)).astype(int) + (y > np.quantile(y, 0.8)).astype(int)
    refc = fit_forest(X, labels, task="classification", n_estimators=20, seed=1)
    clf = ECFPForest(task="classification", n_estimators=20, seed=1).fit(X, labels)
    assert np.allclose(clf.predict_proba(Xt), refc.predict_proba(Xt), atol=1e-9)
    assert np.array_equal(clf.predict(Xt), refc.predict(Xt))
    with pytest.raises(InputError, match="predict_proba"):
        model.predict_proba(X)


def test_boosting_arrays_reproduce_sklearn(X, y):
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    opts = dict(learning_rate=0.1, max_iter=15, max_leaf_nodes=7, min_samples_leaf=2, max_features=0.5)
    w = np.linspace(0.5, 2.0, len(y))
    model = ECFPBoosting(seed=2, **opts).fit(X, y, sample_weight=w)
    ref = HistGradientBoostingRegressor(early_stopping=False, random_state=2, **opts).fit(X, y, sample_weight=w)
    assert np.allclose(model.predict(X), ref.predict(X), rtol=0, atol=1e-9)
    for labels in ((y > np.median(y)).astype(int), np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))):
        clf = ECFPBoosting(task="classification", seed=2, **opts).fit(X, labels)
        refc = HistGradientBoostingClassifier(early_stopping=False, random_state=2, **opts).fit(X, labels)
        assert np.allclose(clf.predict_proba(X), refc.predict_proba(X), atol=1e-9)
        assert np.array_equal(clf.predict(X), refc.predict(X))


# ------------------------------------------------------------------------------------------------ persistence
@pytest.mark.parametrize("make", [
    lambda: TanimotoSVR(C=3.0),
    lambda: TanimotoSVC(C=3.0),
    lambda: ECFPForest(n_estimators=15),
    lambda: ECFPForest(task="classification", n_estimators=15),
    lambda: ECFPBoosting(max_iter=10, min_samples_leaf=2),
    lambda: ECFPBoosting(task="classification", max_iter=10, min_samples_leaf=2),
], ids=["svr", "svc", "rf", "rf-classes", "gbm", "gbm-classes"])
def test_round_trip_without_pickle_gives_the_same_predictions(make, X, y):
    model = make()
    classify = isinstance(model, TanimotoSVC) or getattr(model, "task", "") == "classification"
    target = np.where(y > np.median(y), "hi", "lo") if classify else y
    model.fit(X[:20], target[:20])
    arrays = model.to_arrays()
    assert all(isinstance(v, np.ndarray) and v.dtype.kind != "O" for v in arrays.values())
    back = _round_trip(model)
    if classify:
        assert np.array_equal(back.predict(X), model.predict(X))
        assert np.allclose(back.predict_proba(X), model.predict_proba(X), rtol=0, atol=1e-12)
    else:
        assert np.allclose(back.predict(X), model.predict(X), rtol=0, atol=1e-12)


def test_from_arrays_rejects_another_kind_and_broken_arrays(X, y):
    svr = TanimotoSVR().fit(X, y).to_arrays()
    with pytest.raises(InputError, match="not a 'forest'"):
        ECFPForest.from_arrays(svr)
    with pytest.raises(InputError, match="lack 'dual_coef'"):
        TanimotoSVR.from_arrays({k: v for k, v in svr.items() if k != "dual_coef"})
    with pytest.raises(InputError, match="disagree"):
        TanimotoSVR.from_arrays({**svr, "dual_coef": svr["dual_coef"][:-1]})
    rf = ECFPForest(n_estimators=3).fit(X, y).to_arrays()
    bad = rf["children_left"].copy()
    bad[0] = 10 ** 6
    with pytest.raises(InputError, match="outside its tree"):
        ECFPForest.from_arrays({**rf, "children_left": bad})
