"""The sparse MinMax index: the same kernel values as the dense route, its top-k and weighted sums."""
import numpy as np
import pytest

from tmdlib import InputError
from tmdlib.chem._minmax import MinMaxIndex, sparse_rows
from tmdlib.chem.models import TanimotoSVR, minmax_kernel


def _counts(rng, n, d=64, density=0.03, common=4):
    A = (rng.random((n, d)) < density) * rng.integers(1, 6, (n, d))
    A[:, :common] = rng.integers(0, 4, (n, common))  # positions most rows hold: stored densely
    return A.astype(np.float32)


def test_scan_matches_dense_kernel_values_top_k_and_sums():
    rng = np.random.default_rng(0)
    B, A = _counts(rng, 300), _counts(rng, 120)
    A[0] = 0  # an empty query: similarity 0 to every non-empty row
    B[5] = 0
    A[1] = 0
    idx = MinMaxIndex(B)
    assert 0 < idx.D.shape[0] < B.shape[1]  # both the dense rows and the postings are exercised
    W = rng.normal(size=(300, 2))
    sums, top = idx.scan(A, W, top=5)
    K = minmax_kernel(A, B)
    np.testing.assert_allclose(sums, K @ W, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(top, -np.sort(-K, axis=1)[:, :5])  # the same float64 values, exactly
    assert top[0, 0] == 1.0  # empty vs empty: K = 1, as the dense route defines it


def test_scan_on_real_fingerprints():
    from tmdlib.chem import ecfp4_counts

    train = ecfp4_counts(["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "CCN(CC)CC", "O=C(O)c1ccccc1OC(C)=O"])
    query = ecfp4_counts(["CCCO", "c1ccccc1N", "CC(=O)Nc1ccc(O)cc1"])
    _, top = MinMaxIndex(train).scan(query, top=2)
    np.testing.assert_array_equal(top, -np.sort(-minmax_kernel(query, train), axis=1)[:, :2])
    assert top[2, 0] == 1.0  # paracetamol is in the training set


def test_top_is_capped_and_optional_results():
    rng = np.random.default_rng(1)
    idx = MinMaxIndex(_counts(rng, 3))
    sums, top = idx.scan(_counts(rng, 4), top=10)
    assert sums is None and top.shape == (4, 3)
    assert idx.scan(_counts(rng, 4)) == (None, None)


def test_sparse_rows():
    A = np.array([[0, 2, 0], [0, 0, 0], [1, 0, 3]])
    ptr, idx, cnt, norm = sparse_rows(A)
    assert ptr.tolist() == [0, 1, 1, 3] and idx.tolist() == [1, 0, 2] and cnt.tolist() == [2, 1, 3]
    assert norm.tolist() == [2.0, 0.0, 4.0]


@pytest.mark.parametrize("bad", [np.array([[-1.0, 0.0]]), np.array([[0.5, 1.0]]), np.zeros(3)])
def test_bad_reference_refused(bad):
    with pytest.raises(InputError):
        MinMaxIndex(bad)


def test_bad_queries_refused():
    idx = MinMaxIndex(np.ones((2, 3)))
    with pytest.raises(InputError, match="shape"):
        idx.scan(np.ones((2, 4)))
    with pytest.raises(InputError, match="query counts must be integers"):
        idx.scan(np.full((1, 3), 0.5))
    with pytest.raises(InputError, match="weights"):
        idx.scan(np.ones((1, 3)), np.ones((3, 1)))


def test_svr_predicts_the_same_through_the_index():
    rng = np.random.default_rng(2)
    X, Q = _counts(rng, 80), _counts(rng, 50)
    y = X[:, :5].sum(axis=1) + rng.normal(size=80)
    m = TanimotoSVR().fit(X, y)
    dense = m.y_mean_ + m.y_scale_ * (minmax_kernel(Q, m.support_vectors_) @ m.dual_coef_ + m.intercept_)
    np.testing.assert_allclose(m.predict(Q), dense, rtol=1e-12)
    assert m._sv_index() is m._sv_index()  # built once
    m2 = TanimotoSVR().fit(X[:40], y[:40])  # a refit rebuilds it
    np.testing.assert_allclose(m2.predict(Q), m2.y_mean_ + m2.y_scale_ * (
        minmax_kernel(Q, m2.support_vectors_) @ m2.dual_coef_ + m2.intercept_), rtol=1e-12)
