"""Property tests: the fast exact engine against the slow oracle on random small graphs."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextlib import contextmanager

import tmdlib.distance._engine as T
from tmd_oracle import tmd_oracle
from tmdlib import Graph, GraphDataset
from tmdlib.distance import tmd, tmd_block, tmd_matrix, tmd_pairs

@contextmanager
def engine_path(path: str):
    """Force the id-table engine (``"tables"``) or the per-pair kernel (``"pairs"``) in blocks."""
    old = T.PAIR_PATH_SHARING
    T.PAIR_PATH_SHARING = np.inf if path == "tables" else -1.0
    try:
        yield
    finally:
        T.PAIR_PATH_SHARING = old


SETTINGS = settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def graphs(draw, dim: int, max_nodes: int = 6, discrete: bool | None = None) -> Graph:
    """A random simple undirected graph (possibly empty, possibly with isolated nodes)."""
    n = draw(st.integers(0, max_nodes))
    pairs = [(u, v) for u in range(n) for v in range(u + 1, n)]
    keep = draw(st.lists(st.booleans(), min_size=len(pairs), max_size=len(pairs)))
    edges = [p for p, k in zip(pairs, keep) if k]
    if discrete is None:
        discrete = draw(st.booleans())
    if discrete:  # one-hot-like labels: many identical computation trees
        labels = draw(st.lists(st.integers(0, dim - 1), min_size=n, max_size=n))
        x = np.zeros((n, dim))
        x[np.arange(n), labels] = 1.0
    else:  # continuous attributes, incl. zeros and negatives
        vals = draw(st.lists(st.floats(-3, 3, allow_nan=False, width=32), min_size=n * dim, max_size=n * dim))
        x = np.array(vals, dtype=np.float64).reshape(n, dim)
    ei = np.array([[u for u, v in edges] + [v for u, v in edges],
                   [v for u, v in edges] + [u for u, v in edges]], dtype=np.int64).reshape(2, -1)
    return Graph(x, ei)


@st.composite
def depth_and_weights(draw):
    depth = draw(st.integers(1, 4))
    kind = draw(st.sampled_from(["pascal", "scalar", "list"]))
    if kind == "pascal":
        return depth, "pascal"
    if kind == "scalar":
        return depth, draw(st.floats(0.0, 3.0))
    return depth, draw(st.lists(st.floats(0.0, 3.0), min_size=depth - 1, max_size=depth - 1))


def _depth_cap(depth: int, g1: Graph, g2: Graph) -> bool:
    """Keep the oracle cheap: depth 4 only on sparse small graphs."""
    return depth < 4 or (g1.num_edges <= 6 and g2.num_edges <= 6)


@SETTINGS
@given(data=st.data(), dim=st.integers(1, 3), dw=depth_and_weights())
def test_engine_matches_oracle(data, dim, dw):
    depth, weights = dw
    g1 = data.draw(graphs(dim))
    g2 = data.draw(graphs(dim))
    if not _depth_cap(depth, g1, g2):
        depth = 3
        weights = weights if not isinstance(weights, list) else weights[:2]
    want = tmd_oracle(g1, g2, depth, weights)
    got = tmd(g1, g2, depth, weights)  # node-level pair kernel
    assert got == pytest.approx(want, rel=1e-9, abs=1e-9)
    assert tmd(g2, g1, depth, weights) == pytest.approx(got, rel=1e-12, abs=1e-12)
    with engine_path("tables"):
        blk = tmd_block([g1], [g2], depth, weights)
    assert blk[0, 0] == pytest.approx(want, rel=1e-9, abs=1e-9)


@SETTINGS
@given(data=st.data(), dim=st.integers(1, 3), dw=depth_and_weights())
def test_block_matches_oracle(data, dim, dw):
    """A block of several graphs (shared ids across graphs) equals the oracle entrywise."""
    depth, weights = dw
    gs = data.draw(st.lists(graphs(dim, max_nodes=5, discrete=True), min_size=1, max_size=4))
    hs = data.draw(st.lists(graphs(dim, max_nodes=5), min_size=1, max_size=3))
    depth = min(depth, 3)
    if isinstance(weights, list):
        weights = weights[:depth - 1]
    want = np.array([[tmd_oracle(g, h, depth, weights) for h in hs] for g in gs])
    for path in ("tables", "pairs"):
        with engine_path(path):
            blk = tmd_block(gs, hs, depth, weights)
            sym = tmd_matrix(gs + hs, depth, weights)
        np.testing.assert_allclose(blk, want, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(sym[:len(gs), len(gs):], want, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(sym, sym.T, rtol=0, atol=0)
        assert np.all(np.diag(sym) == 0)


@SETTINGS
@given(data=st.data(), dim=st.integers(1, 3), dw=depth_and_weights())
def test_zero_on_permuted_copy(data, dim, dw):
    depth, weights = dw
    g = data.draw(graphs(dim, max_nodes=8))
    perm = np.array(data.draw(st.permutations(range(g.num_nodes))), dtype=np.int64)
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size)
    h = Graph(g.x[perm], inv[g.edge_index]) if g.num_nodes else g
    assert tmd(g, h, depth, weights) == pytest.approx(0.0, abs=1e-9)


@SETTINGS
@given(data=st.data(), dim=st.integers(1, 2), dw=depth_and_weights())
def test_triangle_inequality(data, dim, dw):
    depth, weights = dw
    gs = [data.draw(graphs(dim, max_nodes=7)) for _ in range(3)]
    with engine_path("tables"):
        m = tmd_matrix(gs, depth, weights)
    for a in range(3):
        for b in range(3):
            for c in range(3):
                assert m[a, c] <= m[a, b] + m[b, c] + 1e-9 * (1 + m[a, c])


@settings(max_examples=examples(25), deadline=None)
@given(data=st.data())
def test_large_degree_children_use_general_solver(data):
    """Stars and dense graphs (child problems above 4 trees) against the oracle at depth 2-3."""
    n = data.draw(st.integers(6, 9))
    dense = data.draw(st.booleans())
    if dense:
        edges = [(u, v) for u in range(n) for v in range(u + 1, n) if data.draw(st.booleans())]
    else:
        edges = [(0, v) for v in range(1, n)]
    src = [u for u, v in edges] + [v for u, v in edges]
    dst = [v for u, v in edges] + [u for u, v in edges]
    x = np.array(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), dtype=np.float64)[:, None]
    g = Graph(x, np.array([src, dst], dtype=np.int64).reshape(2, -1))
    h = data.draw(graphs(1, max_nodes=6))
    depth = data.draw(st.integers(2, 3))
    want = tmd_oracle(g, h, depth, 1.0)
    assert tmd(g, h, depth, 1.0) == pytest.approx(want, rel=1e-9, abs=1e-9)
    with engine_path("tables"):
        assert tmd_block([g, h], [h, g], depth, 1.0)[0, 0] == pytest.approx(want, rel=1e-9, abs=1e-9)


def test_pairs_equal_block():
    rng = np.random.default_rng(3)
    gs = []
    for _ in range(12):
        n = int(rng.integers(0, 7))
        a = np.triu(rng.random((n, n)) < 0.4, 1)
        u, v = np.nonzero(a)
        gs.append(Graph(rng.integers(0, 2, (n, 2)).astype(float), np.array([np.r_[u, v], np.r_[v, u]])))
    ds = GraphDataset.from_graphs(gs)
    with engine_path("tables"):
        full = tmd_matrix(ds, 3, 1.0)
    i, j = rng.integers(0, 12, 7), rng.integers(0, 12, 7)
    np.testing.assert_allclose(tmd_pairs(ds, i, j, 3, 1.0), full[i, j], rtol=1e-12, atol=1e-12)
    i, j = rng.integers(0, 12, 200), rng.integers(0, 12, 200)
    np.testing.assert_allclose(tmd_pairs(ds, i, j, 3, 1.0), full[i, j], rtol=1e-12, atol=1e-12)
