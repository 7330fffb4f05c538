"""The exact assignment solvers agree with each other and with SciPy's on the problem shapes the engine sends."""
import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from tmdlib.distance.assign import SUBSET_MAX, assign_rect, assign_small, assign_subsets, ot_work, rect_work


def _scipy(c):
    r, k = linear_sum_assignment(c)
    return float(c[r, k].sum())


@pytest.mark.parametrize("nc", range(1, SUBSET_MAX + 1))
def test_subsets_give_the_optimal_assignment(nc):
    rng = np.random.default_rng(nc)
    f = ot_work(nc)[-1]
    for nr in range(0, nc + 1):
        for trial in range(40):
            # integer costs give many ties (the case where two solvers may choose different optimal plans);
            # negative costs occur in the engine (cost minus blank distance)
            c = rng.integers(-5, 6, size=(nr, nc)).astype(float) if trial % 2 else rng.normal(size=(nr, nc))
            want = _scipy(c) if nr else 0.0
            got = assign_subsets(np.ascontiguousarray(c), nr, nc, f)
            assert got == pytest.approx(want, rel=1e-12, abs=1e-12)
            if nr:
                assert got == pytest.approx(assign_rect(c, nr, nc, *rect_work(nc)), rel=1e-12, abs=1e-12)
            if nr == nc <= 4:
                assert got == pytest.approx(assign_small(c, nc), rel=1e-12, abs=1e-12)


def test_subsets_read_only_the_problem_block():
    """The scratch table and the cost buffer are larger than a problem: values outside ``c[:nr, :nc]`` and
    stale table entries from a larger problem never enter a smaller one."""
    f = ot_work(SUBSET_MAX)[-1]
    big = np.full((SUBSET_MAX + 1, SUBSET_MAX + 1), -1e6)
    assign_subsets(big, SUBSET_MAX, SUBSET_MAX, f)  # fills f with very negative values
    c = big.copy()
    c[:3, :5] = np.arange(15.0).reshape(3, 5)
    assert assign_subsets(c, 3, 5, f) == _scipy(c[:3, :5])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_subsets_refuse_non_finite_costs(bad):
    c = np.ones((5, 6))
    c[2, 4] = bad
    assert np.isnan(assign_subsets(c, 5, 6, ot_work(6)[-1]))


def _padded_ot(c, ba, bb):
    """Unit-mass OT between two multisets padded with blanks, by SciPy on the square padded matrix."""
    na, nb = c.shape
    k = max(na, nb)
    if k == 0:
        return 0.0
    sq = np.zeros((k, k))
    sq[:na, :nb] = c
    sq[:na, nb:] = ba[:, None]
    sq[na:, :nb] = bb[None, :]
    return _scipy(sq)


def test_level_table_child_problems_agree_with_scipy():
    """Every shape of child problem (0-5 trees per side: the in-place 1-3 forms, the padded 4s, the general
    solver) gives the optimal padded assignment; a NaN cost reaches exactly the entries that read it."""
    from tmdlib.distance._kernels import level_table

    rng = np.random.default_rng(7)
    sizes = [s for s in range(6) for _ in range(3)]
    R = C = len(sizes)
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    U = 12  # ids of the level below (rows and columns of prev), with repeats among the children
    l_a = rng.integers(0, U, ptr[-1]).astype(np.int64)
    l_b = rng.integers(0, U, ptr[-1]).astype(np.int64)
    prev = rng.integers(0, 4, size=(U, U)).astype(float) + rng.random((U, U)) * (rng.random((U, U)) < 0.5)
    b_a, b_b = rng.random(ptr[-1]) + 0.5, rng.random(ptr[-1]) + 0.5
    g_a, g_b = np.arange(ptr[-1]), np.arange(ptr[-1]) + ptr[-1]  # never equal: no cancellation
    feat = np.zeros(R, np.int64)
    args = (feat, ptr, g_a, l_a, b_a, feat, ptr, g_b, l_b, b_b)
    out = level_table(*args, prev, np.zeros((1, 1)), 2.0, False, 5)
    for i in range(R):
        ra, ka = slice(ptr[i], ptr[i + 1]), l_a[ptr[i]:ptr[i + 1]]
        for j in range(C):
            rb, kb = slice(ptr[j], ptr[j + 1]), l_b[ptr[j]:ptr[j + 1]]
            want = 2.0 * _padded_ot(prev[np.ix_(ka, kb)], b_a[ra], b_b[rb])
            assert out[i, j] == pytest.approx(want, rel=1e-12, abs=1e-12), (sizes[i], sizes[j])
    bad = prev.copy()
    bad[l_a[ptr[3]], l_b[ptr[5]]] = np.nan  # read by row 3 (one tree) against column 5 (one tree), among others
    out = level_table(*args, bad, np.zeros((1, 1)), 2.0, False, 5)
    for i in range(R):
        for j in range(C):
            reads = np.isnan(bad[np.ix_(l_a[ptr[i]:ptr[i + 1]], l_b[ptr[j]:ptr[j + 1]])]).any()
            assert np.isnan(out[i, j]) == reads, (i, j)
