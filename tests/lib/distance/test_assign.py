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
