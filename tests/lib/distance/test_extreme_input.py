"""Extreme features: one clear error at the library boundary, a range check before the engine computes,
assignment solvers that refuse non-finite costs (never a crash), and numba caches that follow the code.

Whatever could crash the interpreter runs in a subprocess, so a segfault fails the test instead of
killing pytest.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import ROOT, examples

ISOLATED = "np.zeros((2, 0), dtype=np.int64)"


def _python(code: str, cwd: Path = ROOT, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter; a crash shows as a negative return code."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONFAULTHANDLER": "1"})


def _survived(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 0, f"exit {res.returncode} (negative: killed by signal)\n{res.stdout}\n{res.stderr[-3000:]}"
    return res.stdout


def test_reported_case_is_one_clear_error_not_a_segfault():
    """7 against 6 isolated nodes, |x| ~ 1e200, depth 1: the process used to die with SIGSEGV."""
    out = _survived(_python(f"""
        import numpy as np, tmdlib
        try:
            g1 = tmdlib.Graph(np.full((7, 1), 1e200), {ISOLATED})
            g2 = tmdlib.Graph(np.full((6, 1), -1e200), {ISOLATED})
            print("value", tmdlib.tmd(g1, g2, depth=1))
        except ValueError as err:
            print("error", type(err).__name__, err)
    """))
    assert out.startswith("error GraphValidationError node 0: feature 0 = ")
    assert "exceeds the feature limit" in out and "FEATURE_LIMIT = 3.4028234663852886e+38" in out


def test_unvalidated_extreme_graphs_are_refused_by_every_entry_point():
    """Graphs built with validate=False bypass the boundary: the engine's range check still refuses them,
    and the raw kernel returns NaN instead of reading out of bounds."""
    out = _survived(_python(f"""
        import numpy as np, tmdlib
        from tmdlib.distance import _kernels as K
        g1 = tmdlib.Graph(np.full((7, 1), 1e200), {ISOLATED}, validate=False)
        g2 = tmdlib.Graph(np.full((6, 1), -1e200), {ISOLATED}, validate=False)
        raw = lambda gs: tmdlib.GraphDataset(x=np.concatenate([g.x for g in gs]),
                                             node_ptr=np.cumsum([0] + [g.num_nodes for g in gs]),
                                             edge_ptr=np.zeros(len(gs) + 1, np.int64), src=[], dst=[],
                                             graph_ids=np.arange(len(gs)), validate=False)
        calls = {{"tmd": lambda: tmdlib.tmd(g1, g2, depth=1),
                  "tmd_matrix": lambda: tmdlib.tmd_matrix(raw([g1, g2]), depth=1),
                  "tmd_block": lambda: tmdlib.tmd_block(raw([g1]), raw([g2]), depth=1),
                  "tmd_pairs": lambda: tmdlib.tmd_pairs(raw([g1, g2]), [0], [1], depth=1),
                  "tree_norm": lambda: tmdlib.tree_norm(g1, depth=1)}}
        for name, call in calls.items():
            try:
                print(name, "value", call())
            except tmdlib.InputError as err:
                print(name, "refused", "could overflow float64" in str(err))
        try:  # a list of unvalidated graphs is checked when the engine concatenates it
            tmdlib.tmd_matrix([g1, g2], depth=1)
        except tmdlib.GraphValidationError as err:
            print("list", "refused", "exceeds the feature limit" in str(err))
        print("kernel", K.pair_tmd(g1.x, g1.indptr, g1.indices, g2.x, g2.indptr, g2.indices, np.zeros(0)))
    """))
    lines = out.splitlines()
    assert lines[:5] == [f"{n} refused True" for n in ("tmd", "tmd_matrix", "tmd_block", "tmd_pairs", "tree_norm")]
    assert lines[5:] == ["list refused True", "kernel nan"]


def test_assignment_solvers_refuse_non_finite_costs():
    out = _survived(_python("""
        import numpy as np
        from tmdlib.distance.assign import assign_rect, assign_small, rect_work
        for bad in (np.nan, np.inf, -np.inf):
            for nr, nc in ((5, 5), (6, 7), (3, 9)):
                c = np.arange(nr * nc, dtype=float).reshape(nr, nc)
                c[nr // 2, nc - 1] = bad
                print("rect", assign_rect(c, nr, nc, *rect_work(nc)))
            c = np.full((7, 7), np.nan)  # nothing finite at all: the search finds no column
            print("rect", assign_rect(c, 6, 7, *rect_work(7)))
            for k in (1, 2, 3, 4):
                c = np.ones((4, 4))
                c[k - 1, 0] = bad
                print("small", assign_small(c, k))
        c = np.array([[1.0, 2.0], [2.0, 1.0]])
        print("ok", assign_small(c, 2), assign_rect(c, 2, 2, *rect_work(2)))
    """))
    lines = out.splitlines()
    assert lines[-1] == "ok 2.0 2.0"
    assert lines[:-1] and all(line.endswith(" nan") for line in lines[:-1]), out


def test_features_at_the_limit_give_finite_exact_values():
    """The store's float32 range is safe: the largest features give finite, consistent TMDs and tree norms."""
    from tmdlib import FEATURE_LIMIT, Graph, tmd, tmd_matrix, tree_norm

    big = np.float64(np.finfo(np.float32).max)
    assert big == FEATURE_LIMIT
    star = Graph(np.array([[big, -big], [big, big], [-big, big], [big, 0.0], [0.0, -big]]),
                 np.array([[0, 0, 0, 0, 1, 2, 3, 4], [1, 2, 3, 4, 0, 0, 0, 0]]))
    path = Graph(np.array([[-big, -big], [big, -big], [0.0, big]]), np.array([[0, 1, 1, 2], [1, 0, 2, 1]]))
    empty = Graph.empty(2)
    mat = tmd_matrix([star, path, empty], depth=4)
    assert np.isfinite(mat).all() and (mat >= 0).all()
    np.testing.assert_allclose(mat, mat.T, rtol=1e-12)
    np.testing.assert_allclose(mat[0, 2], tree_norm(star, 4), rtol=1e-12)
    np.testing.assert_allclose(mat[0, 1], tmd(star, path, 4), rtol=1e-12)
    assert mat[0, 1] <= mat[0, 2] + mat[1, 2] * (1 + 1e-12)  # triangle inequality through the blank graph
    with pytest.raises(ValueError, match="exceeds the feature limit"):
        Graph(np.array([[np.nextafter(big, np.inf)]]), np.zeros((2, 0), np.int64))
    with pytest.raises(ValueError, match="is not finite"):
        Graph(np.array([[0.0], [np.nan]]), np.array([[0, 1], [1, 0]]))


def test_absurd_weights_are_refused_before_computing():
    from tmdlib import Graph, InputError, tmd, tmd_matrix, tree_norm

    path = Graph(np.ones((3, 1)), np.array([[0, 1, 1, 2], [1, 0, 2, 1]]))
    for call in (lambda: tmd(path, path, 4, 1e200), lambda: tmd_matrix([path, path], 4, 1e200),
                 lambda: tree_norm(path, 4, 1e200)):
        with pytest.raises(InputError, match="could overflow float64: graphs of up to 3 nodes, degree 2"):
            call()
    assert np.isfinite(tmd(path, Graph.empty(1), 4, 1e30))  # large but safe


@settings(max_examples=examples(30), deadline=None)
@given(st.integers(1, 8), st.integers(1, 4), st.floats(0.0, 50.0), st.integers(0, 2 ** 32 - 1))
def test_value_bound_dominates_tree_norms(n, depth, weight, seed):
    """The range check's bound is an upper bound: every tree norm is at most R = 2 n beta_{L-1}."""
    from tmdlib import Graph, tree_norm
    from tmdlib.distance._limits import value_bound

    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < 0.5, 1)
    src, dst = np.nonzero(upper | upper.T)
    x = rng.normal(0, 1e30, (n, 3))
    g = Graph(x, np.stack([src, dst]))
    w = np.full(depth - 1, weight)
    bound = value_bound(np.abs(x).max(), 3, n, int(g.degree.max()), w)
    assert tree_norm(g, depth, w) <= bound


def test_numba_cache_follows_the_files_a_kernel_calls(tmp_path):
    """numba recompiles a cached function when its own file changes, not when a compiled callee in another
    file does; tmdlib's locator adds the folder's fingerprint to the stamp, so an edit of the callee counts."""
    pkg = tmp_path / "pk"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "callee.py").write_text("from numba import njit\n\n@njit(cache=True)\ndef f():\n    return 1\n")
    (pkg / "caller.py").write_text("from numba import njit\nfrom .callee import f\n\n"
                                   "@njit(cache=True)\ndef g():\n    return f() * 10\n")
    script = f"""
        import tmdlib.distance._fingerprint as fp
        fp.install_numba_cache_key({str(pkg)!r})
        from pk.caller import g
        print(g())
    """
    env_dir = tmp_path / "numba-cache"
    run = lambda: subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=tmp_path, capture_output=True,
                                 text=True, timeout=600, env={**os.environ, "NUMBA_CACHE_DIR": str(env_dir),
                                                              "PYTHONPATH": f"{tmp_path}:{ROOT}"})
    assert _survived(run()).strip() == "10"
    assert _survived(run()).strip() == "10"  # from the cache
    (pkg / "callee.py").write_text("from numba import njit\n\n@njit(cache=True)\ndef f():\n    return 2\n")
    assert _survived(run()).strip() == "20"


def test_tmdlib_kernels_carry_the_engine_fingerprint_in_their_cache_stamp():
    from tmdlib.distance import engine_fingerprint
    from tmdlib.distance import _kernels as kernels

    stamp = kernels.pair_tmd._cache._cache_file._source_stamp
    assert stamp[1] == engine_fingerprint()
