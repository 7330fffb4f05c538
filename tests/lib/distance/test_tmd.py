"""Exact TMD engine: reference values of the original implementation, API, validation, Theorem 4.2."""
from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest

from helpers import DATA, ROOT
from tmdlib import Graph, GraphDataset
from tmdlib.distance import tmd, tmd_block, tmd_matrix, tmd_pairs
from tmdlib.distance import tree_norm
from tmdlib.distance import resolve_weights

REFERENCE = DATA / "mutag_tmd_reference.json"
SHARED_REFERENCE = ROOT.parent / "shared" / "reference" / "mutag_tmd_reference.json"
RTOL = 1e-6


@pytest.fixture(scope="module")
def reference() -> dict:
    """Reference values computed by chingyaoc/TMD ``tmd.py`` (see the file's ``meta``)."""
    return json.loads(REFERENCE.read_text())


def _key(entry: dict) -> tuple:
    return entry["L"], tuple(entry["weights"])


def test_reference_copy_matches_shared():
    """The vendored copy is the shared reference file, when ``../shared`` is present."""
    if not SHARED_REFERENCE.exists():
        pytest.skip("../shared/reference not present")
    assert json.loads(SHARED_REFERENCE.read_text()) == json.loads(REFERENCE.read_text())


def test_reference_pairs(mutag, reference):
    """All 102 MUTAG pair values of the original implementation, to rtol 1e-6."""
    pairs = reference["pairs"]
    assert len(pairs) == 102
    got = np.array([tmd(mutag[p["i"]], mutag[p["j"]], p["L"], p["weights"]) for p in pairs])
    want = np.array([p["tmd"] for p in pairs])
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-9)
    # the weights as passed to the original code (scalar or list) resolve the same way
    for p in pairs:
        assert resolve_weights(p["L"], p["w_arg"]).tolist() == pytest.approx(p["weights"])


def test_reference_tree_norms(mutag, reference):
    """All 30 tree norms: TMD to the empty graph, and Algorithm 1, equal the reference."""
    norms = reference["tree_norms"]
    assert len(norms) == 30
    empty = Graph.empty(mutag.num_features)
    for e in norms:
        g = mutag[e["i"]]
        assert g.num_nodes == e["n_i"]
        assert tmd(g, empty, e["L"], e["weights"]) == pytest.approx(e["tmd_to_empty"], rel=RTOL)
        assert tmd(empty, g, e["L"], e["weights"]) == pytest.approx(e["tmd_to_empty"], rel=RTOL)
        assert tree_norm(g, e["L"], e["weights"]) == pytest.approx(e["tmd_to_empty"], rel=RTOL)


def test_reference_pairs_by_matrix_block_and_pairs(mutag, reference):
    """The id-table engine (matrix, blocks) and the pair-list kernel reproduce the reference pairs."""
    groups = defaultdict(list)
    for p in reference["pairs"]:
        groups[_key(p)].append(p)
    for (depth, weights), pairs in groups.items():
        i = np.array([p["i"] for p in pairs])
        j = np.array([p["j"] for p in pairs])
        want = np.array([p["tmd"] for p in pairs])
        np.testing.assert_allclose(tmd_pairs(mutag, i, j, depth, list(weights)), want, rtol=RTOL, atol=1e-9)
        full = tmd_matrix(mutag, depth, list(weights))
        np.testing.assert_allclose(full[i, j], want, rtol=RTOL, atol=1e-9)
        assert np.array_equal(full, full.T)
        assert np.all(np.diag(full) == 0.0)
        assert full.min() >= 0.0
        blk = tmd_block(mutag.take(i), mutag.take(j), depth, list(weights))
        np.testing.assert_allclose(np.diag(blk), want, rtol=RTOL, atol=1e-9)


def test_block_shards_and_chunking_agree(mutag):
    """Shards, symmetric shards, tiny memory caps and Graph lists give the same numbers."""
    sub = mutag.take(np.arange(0, 188, 3))
    full = tmd_matrix(sub)
    rows, cols = np.arange(0, 40), np.arange(25, 63)
    blk = tmd_block(sub.take(rows), sub.take(cols))
    np.testing.assert_allclose(blk, full[np.ix_(rows, cols)], rtol=1e-12, atol=1e-9)
    sym = tmd_block(sub.take(rows), sub.take(rows))
    np.testing.assert_allclose(sym, full[np.ix_(rows, rows)], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(tmd_matrix(sub, rows=rows, cols=cols), blk, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(tmd_matrix(sub, rows=rows, cols=rows), sym, rtol=1e-12, atol=1e-9)
    tiny = tmd_matrix(sub, memory_limit=24 * 150 ** 2)  # forces many sub-blocks
    np.testing.assert_allclose(tiny, full, rtol=1e-12, atol=1e-9)
    tiny_blk = tmd_block(sub.take(rows), sub.take(cols), memory_limit=24 * 150 ** 2)
    np.testing.assert_allclose(tiny_blk, blk, rtol=1e-12, atol=1e-9)
    as_list = tmd_block([sub[int(r)] for r in rows[:5]], [sub[int(c)] for c in cols[:4]])
    np.testing.assert_allclose(as_list, blk[:5, :4], rtol=1e-12, atol=1e-9)
    assert tmd_matrix(sub, num_threads=1) == pytest.approx(full, rel=1e-12, abs=1e-9)


def test_table_and_pair_paths_agree(mutag):
    """The id-table engine and the per-pair kernel give the same matrix (continuous features too)."""
    import tmdlib.distance._engine as T

    sub = mutag.take(np.arange(0, 188, 2))
    rng = np.random.default_rng(1)
    noisy = GraphDataset(x=sub.x + rng.normal(0, 0.1, sub.x.shape), node_ptr=sub.node_ptr, edge_ptr=sub.edge_ptr,
                         src=sub.src, dst=sub.dst, graph_ids=sub.graph_ids)
    for ds in (sub, noisy):
        old = T.PAIR_PATH_SHARING
        try:
            T.PAIR_PATH_SHARING = np.inf
            tables = tmd_matrix(ds, 3, "pascal")
            blk_t = tmd_block(ds.take(np.arange(10)), ds.take(np.arange(5, 25)))
            T.PAIR_PATH_SHARING = -1.0
            pairs = tmd_matrix(ds, 3, "pascal")
            blk_p = tmd_block(ds.take(np.arange(10)), ds.take(np.arange(5, 25)))
        finally:
            T.PAIR_PATH_SHARING = old
        np.testing.assert_allclose(tables, pairs, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(blk_t, blk_p, rtol=1e-12, atol=1e-9)
    assert not T._prefer_pairs(T._Universe(sub, 4, np.ones(3)))      # one-hot labels share trees
    assert T._prefer_pairs(T._Universe(noisy, 4, np.ones(3)))        # continuous features do not


def test_tree_norm_and_theorem_4_2(mutag):
    """TN(G) = TMD(G, empty) and Theorem 4.2's identity TMD(G, G[S]) = TN(G) - TN(G[S])."""
    rng = np.random.default_rng(0)
    for gi in rng.choice(len(mutag), 12, replace=False):
        g = mutag[int(gi)]
        for depth, weights in [(4, "pascal"), (3, 0.5), (2, [2.0]), (1, [])]:
            tn = tree_norm(g, depth, weights)
            assert tmd(g, Graph.empty(g.num_features), depth, weights) == pytest.approx(tn, rel=1e-12)
            for size in (1, g.num_nodes // 2, g.num_nodes - 1):
                s = rng.choice(g.num_nodes, size, replace=False)
                sub = g.subgraph(s)
                want = tn - tree_norm(sub, depth, weights)
                assert tmd(g, sub, depth, weights) == pytest.approx(want, rel=1e-9, abs=1e-9)
                assert tmd_block([g], [sub], depth, weights)[0, 0] == pytest.approx(want, rel=1e-9, abs=1e-9)


def test_edge_cases():
    """Empty graphs, isolated nodes and identical graphs."""
    e = Graph.empty(2)
    assert tmd(e, e) == 0.0
    one = Graph(np.array([[3.0, 4.0]]), np.zeros((2, 0), dtype=np.int64))
    assert tmd(one, e, depth=3, weights=0.5) == pytest.approx(5.0)
    assert tmd(one, one) == 0.0
    ds = GraphDataset.from_graphs([e, one, e])
    m = tmd_matrix(ds)
    assert m.shape == (3, 3) and m[0, 2] == 0.0 and m[0, 1] == pytest.approx(5.0)
    assert tmd_block(ds, ds.take([])).shape == (3, 0)
    assert tmd_matrix(GraphDataset.from_graphs([])).shape == (0, 0)
    assert tmd_pairs(ds, [0, 1, 2], [1, 1, 0]).tolist() == pytest.approx([5.0, 0.0, 0.0])


@pytest.mark.parametrize("bad", [
    dict(depth=0), dict(depth=-1), dict(depth=2.5),
    dict(depth=4, weights=[1.0, 2.0]), dict(depth=2, weights=[1.0, 2.0]), dict(depth=3, weights="1,2,3"),
    dict(depth=3, weights=-1.0),
])
def test_validation_errors(bad):
    g = Graph(np.ones((2, 3)), np.array([[0, 1], [1, 0]]))
    with pytest.raises(ValueError):
        tmd(g, g, **bad)
    with pytest.raises(ValueError):
        tmd_matrix([g, g], **bad)
    with pytest.raises(ValueError):
        tmd_block([g], [g], **bad)


def test_feature_dimension_mismatch():
    g3 = Graph(np.ones((2, 3)), np.array([[0, 1], [1, 0]]))
    g2 = Graph(np.ones((2, 2)), np.array([[0, 1], [1, 0]]))
    with pytest.raises(ValueError, match="feature dimensions differ"):
        tmd(g3, g2)
    with pytest.raises(ValueError, match="feature dimensions differ"):
        tmd(g3, Graph.empty(2))
    with pytest.raises(ValueError, match="feature dimensions differ"):
        tmd_block([g3], [g2])
    with pytest.raises(ValueError, match="same length"):
        tmd_pairs([g3, g3], [0, 1], [0])
    with pytest.raises(TypeError):
        tmd_block(g3, [g3])


def test_concurrent_calls_from_python_threads(mutag):
    """Pipelines may call the engine from several threads (numba's workqueue layer is serialised)."""
    import threading

    sub = mutag.take(np.arange(60))
    want = tmd_matrix(sub)
    got, errors = [], []

    def work():
        try:
            got.append(tmd_matrix(sub))
            got.append(tmd_block(sub.take(np.arange(10)), sub)[:, :10])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for m in got:
        np.testing.assert_allclose(m, want[:m.shape[0], :m.shape[1]], rtol=1e-12, atol=1e-9)


def test_pair_list_feature_lookup_gives_the_same_bits(mutag):
    """The per-pair kernel from a table of feature-row distances (molecules: tens of rows of 174 columns) gives
    the very values of the kernel that computes them node pair by node pair, on one-hot molecules and on
    continuous features; the table is made only where it pays."""
    import tmdlib.distance._kernels as K
    from tmdlib.datasets import load_builtin, to_dataset

    mol = to_dataset(load_builtin("ogbg-molbace", ROOT / "data" / "raw")).take(np.arange(80))
    rng = np.random.default_rng(3)
    noisy = mutag.take(np.arange(40))
    noisy = GraphDataset(x=noisy.x + rng.normal(0, 0.1, noisy.x.shape), node_ptr=noisy.node_ptr,
                         edge_ptr=noisy.edge_ptr, src=noisy.src, dst=noisy.dst, graph_ids=noisy.graph_ids)
    none = (np.zeros((0, 0)), np.zeros(0))
    for ds in (mol, mutag, noisy):
        gi, gj = rng.integers(0, len(ds), 300), rng.integers(0, len(ds), 300)
        w = resolve_weights(4, "pascal")
        fd = K.feature_distances(np.ascontiguousarray(ds.features, dtype=np.float64))
        assert fd[0].shape == (ds.features.shape[0],) * 2
        args = (ds.features, ds.feature_index, ds.indptr, ds.indices, ds.node_ptr, gi, gj, w)
        np.testing.assert_array_equal(K.pair_list(*args, *fd), K.pair_list(*args, *none))
        np.testing.assert_array_equal(K.pair_values(*args), K.pair_list(*args, *none))
        np.testing.assert_array_equal(tmd_pairs(ds, gi, gj), K.pair_list(*args, *none))
    assert K.feature_lookup(mol.features)[0].shape[0] == mol.features.shape[0]
    assert K.feature_lookup(mol.features, pair_node_pairs=10.0)[0].size == 0  # one small pair: not worth a table
    assert K.feature_lookup(np.zeros((K.FEATURE_LOOKUP_ROWS + 1, 2)))[0].size == 0  # continuous features


def test_pairs_are_dealt_to_lanes_by_their_work():
    """Every pair once, heaviest first; no lane above the mean work plus the largest pair (the greedy bound)."""
    import tmdlib.distance._kernels as K

    rng = np.random.default_rng(0)
    for p, lanes in ((0, 2), (1, 2), (7, 3), (500, 2), (500, 8)):
        work = rng.pareto(1.5, p) * 1e4  # a few pairs of large proteins beside many small ones
        seq, ptr = K._deal_pairs(work, lanes)
        assert sorted(seq.tolist()) == list(range(p)) and ptr[0] == 0 and ptr[-1] == p
        loads = np.array([work[seq[ptr[q]:ptr[q + 1]]].sum() for q in range(lanes)])
        if p:
            assert loads.max() <= work.sum() / lanes + work.max() + 1e-9
            for q in range(lanes):
                mine = work[seq[ptr[q]:ptr[q + 1]]]
                assert np.all(np.diff(mine) <= 0)  # each lane runs its heaviest pairs first


def test_top_table_values_depend_on_the_graphs_contents_only(mutag):
    """Through the table of trees one level below the root, a pair's value is a function of the two graphs'
    contents, bit for bit: ``(i, j)`` and ``(j, i)`` agree, and so do copies of a graph with its nodes renumbered
    (a pair store keyed by content serves one for the other)."""
    import tmdlib.distance._engine as E

    rng = np.random.default_rng(11)
    copies = []
    for g in (5, 17, 40):
        graph = mutag[g]
        perm = rng.permutation(graph.num_nodes)
        inv = np.argsort(perm)  # new node t is old node perm[t]
        copies.append(Graph(graph.x[perm], inv[graph.edge_index]))
    ds = GraphDataset.from_graphs([mutag[g] for g in range(len(mutag))] + copies)
    eng = E.PairEngine(ds, 4, expected_pairs=10 ** 6)
    gi, gj = rng.integers(0, len(ds), 3000), rng.integers(0, len(ds), 3000)
    got = eng(gi, gj)
    assert eng._top is not None
    assert np.array_equal(got, eng(gj, gi))
    n = len(mutag)
    others = np.arange(n)
    for c, g in enumerate((5, 17, 40)):
        assert np.array_equal(eng(others, np.full(n, g)), eng(others, np.full(n, n + c)))
        assert np.array_equal(eng(np.full(n, n + c), others), eng(others, np.full(n, g)))
    np.testing.assert_allclose(got, tmd_pairs(ds, gi, gj, 4), rtol=1e-12, atol=1e-12)


def test_pair_engine_top_table_agrees_with_the_per_pair_recursion(mutag, reference):
    """Molecules' pairs through the table of every tree one level below the root (made once per engine), one by
    one and in groups sharing a graph, equal the node-level recursion to rounding, at depths 3-5, and the
    reference TMD values on MUTAG; the table is
    made only when the pairs asked for pay for it (or the caller says they will), never for depth 2."""
    import tmdlib.distance._engine as E
    from tmdlib.datasets import load_builtin, to_dataset

    mol = to_dataset(load_builtin("ogbg-molbace", ROOT / "data" / "raw")).take(np.arange(120))
    rng = np.random.default_rng(5)
    for ds in (mol, mutag):
        gi, gj = rng.integers(0, len(ds), 400), rng.integers(0, len(ds), 400)
        for depth in (3, 4, 5):
            eng = E.PairEngine(ds, depth, expected_pairs=10 ** 6)
            assert eng._top is None
            got = eng(gi, gj)
            assert eng._top is not None and eng._top.table.shape[0] == eng.uni.levels[depth - 2].feat.size
            want = tmd_pairs(ds, gi, gj, depth)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
            assert np.all(got[gi == gj] == 0)
            # groups sharing a graph: one root-level table between their distinct root trees
            rows = np.arange(min(len(ds), 70))
            for col in (0, 7):
                np.testing.assert_allclose(eng(rows, np.full(rows.size, col)),
                                           tmd_pairs(ds, rows, np.full(rows.size, col), depth), rtol=1e-12, atol=1e-12)
                np.testing.assert_allclose(eng(np.full(rows.size, col), rows), eng(rows, np.full(rows.size, col)),
                                           rtol=1e-12, atol=1e-12)
    groups = defaultdict(list)
    for p in reference["pairs"]:
        groups[_key(p)].append(p)
    for (depth, weights), pairs in groups.items():
        if depth < 3:
            continue
        eng = E.PairEngine(mutag, depth, list(weights), expected_pairs=10 ** 6)
        got = eng(np.array([p["i"] for p in pairs]), np.array([p["j"] for p in pairs]))
        assert eng._top is not None
        np.testing.assert_allclose(got, [p["tmd"] for p in pairs], rtol=RTOL, atol=1e-9)
    lazy = E.PairEngine(mol, 4)  # no hint: the table once the pairs asked for would have paid for it
    lazy([0], [1])
    assert lazy._top is None
    lazy(rng.integers(0, len(mol), 20_000), rng.integers(0, len(mol), 20_000))
    assert lazy._top is not None
    assert E.PairEngine(mol, 2, expected_pairs=10 ** 6)._top_ok is False
    small, E.TOP_TABLE_BYTES = E.TOP_TABLE_BYTES, 1000
    try:
        assert E.PairEngine(mol, 4, expected_pairs=10 ** 6)._top_ok is False  # too large a table: blocks as before
    finally:
        E.TOP_TABLE_BYTES = small


def test_lower_bound_matrix_is_its_block_bit_for_bit(mutag):
    """The all-pairs bounds from the upper triangle are the rectangular block's, bit for bit."""
    from tmdlib.distance._lower import LowerBound

    lb = LowerBound.of(mutag)
    idx = np.arange(len(lb))
    m = lb.matrix()
    np.testing.assert_array_equal(m, lb.block(idx, idx))
    np.testing.assert_array_equal(m, m.T)
    assert LowerBound.of(mutag.take(np.arange(1))).matrix().shape == (1, 1)
