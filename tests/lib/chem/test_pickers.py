"""The chemists' pickers of tmdlib.chem: hand-checked small cases, budgets, τ, determinism, refusals."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tmdlib.chem import (DETERMINISTIC, PICKERS, butina, ecfp4_bits, ecfp4_counts, fp_kmedoids, leader, maxmin,
                         memory_bytes, murcko_scaffolds, pick, scaffold, tanimoto_distance_matrix)
from tmdlib import InputError

ROOT = Path(__file__).resolve().parents[3]

# three alcohols, benzene and two alkylbenzenes, two amines, cyclohexane and methylcyclohexane
POOL = ["CCO", "CCCO", "CCCCO", "c1ccccc1", "Cc1ccccc1", "CCc1ccccc1", "CCN", "CCCN", "C1CCCCC1", "CC1CCCCC1"]
N = len(POOL)


def hand_tanimoto(smiles):
    """Tanimoto distances from the on-bit sets, |A & B| / |A | B|, without RDKit's bulk routine."""
    bits = [set(fp.GetOnBits()) for fp in ecfp4_bits(smiles)]
    return np.array([[1.0 - len(a & b) / len(a | b) for b in bits] for a in bits])


@pytest.fixture(scope="module")
def D():
    return hand_tanimoto(POOL)


def check_result(res, n, k):
    """Exactly k distinct sorted int64 picks; τ = the sizes of the assignment's groups, summing to n."""
    assert res.positions.dtype == np.int64 and res.positions.shape == (k,)
    assert np.all(np.diff(res.positions) > 0) and res.positions[0] >= 0 and res.positions[-1] < n
    assert sorted(res.order.tolist()) == res.positions.tolist()
    assert res.info["n"] == n and res.info["k"] == k and res.k == k and res.n == n
    if res.tau is not None:
        assert res.tau.dtype == np.float64 and np.array_equal(res.tau, np.round(res.tau)) and res.assignment.shape == (n,)
        assert int(res.tau.sum()) == n and (res.tau >= 1).all()
        assert np.isin(res.assignment, res.positions).all()
        assert np.array_equal(res.assignment[res.positions], res.positions)
        counts = np.array([(res.assignment == p).sum() for p in res.positions])
        assert np.array_equal(counts, res.tau)
        assert res.weights.sum() == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------- distances

def test_tanimoto_matrix_matches_bit_sets(D):
    fps = ecfp4_bits(POOL)
    for block in (3, 256):  # blocks smaller than n exercise the mirroring
        M = tanimoto_distance_matrix(fps, block=block)
        assert np.allclose(M, D, atol=1e-12) and np.array_equal(M, M.T) and (np.diag(M) == 0).all()


def test_counts_agree_with_bits_and_saturate():
    bits = ecfp4_bits(POOL)
    counts = ecfp4_counts(POOL)
    assert counts.shape == (N, 2048) and counts.dtype == np.float32
    for fp, row in zip(bits, counts):
        assert set(fp.GetOnBits()) == set(np.flatnonzero(row).tolist())
    chain = "C" * 300
    assert ecfp4_counts([chain], dtype=np.uint8).max() == 255
    assert ecfp4_counts([chain]).max() > 255


# ---------------------------------------------------------------------------------------------- MaxMin

@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_maxmin_is_greedy_max_min(D, seed):
    """After the (seeded) first pick, each pick maximises the distance to the picks before it."""
    order = maxmin(POOL, N, seed=seed).order
    for j in range(1, N):
        done, rest = order[:j], np.setdiff1d(np.arange(N), order[:j])
        gap = D[np.ix_(rest, done)].min(axis=1)
        assert D[order[j], done].min() == pytest.approx(gap.max(), abs=1e-12)
    assert maxmin(POOL, 3, seed=seed).order.tolist() == order[:3].tolist()  # a prefix of the full order


def test_maxmin_seeds_and_assignment(D):
    assert np.array_equal(maxmin(POOL, 3, seed=5).positions, maxmin(POOL, 3, seed=5).positions)
    assert len({tuple(maxmin(POOL, 3, seed=s).positions) for s in range(8)}) > 1  # first pick is seeded
    plain = maxmin(POOL, 4, seed=1)
    assert plain.tau is None and plain.assignment is None
    res = maxmin(POOL, 4, seed=1, assign=True)
    check_result(res, N, 4)
    assert np.array_equal(res.positions, plain.positions)
    near = D[:, res.positions].min(axis=1)
    assert np.allclose(D[np.arange(N), res.assignment], near)


# ---------------------------------------------------------------------------------------------- leader

def test_leader_at_a_fixed_threshold(D):
    """Walking the pool in order at t = 0.6 (hand): 1, 2 fall in 0's sphere, 7 in 6's; the rest are leaders."""
    assert D[0, 1] <= 0.6 and D[0, 2] <= 0.6 and D[6, 7] <= 0.6 and D[4, 5] > 0.6
    res = leader(POOL, 7, threshold=0.6)
    assert res.order.tolist() == [0, 3, 4, 5, 6, 8, 9]
    assert leader(POOL, 4, threshold=0.6).order.tolist() == [0, 3, 4, 5]
    check_result(res, N, 7)
    assert res.assignment[1] == 0 and res.assignment[2] == 0 and res.assignment[7] == 6


@pytest.mark.parametrize("k", [2, 3, 5, 8])
def test_leader_threshold_search(D, k):
    res = leader(POOL, k)
    t = res.info["threshold"]
    check_result(res, N, k)
    sub = D[np.ix_(res.order, res.order)]
    assert (sub[~np.eye(k, dtype=bool)] > t).all()  # sphere exclusion at the threshold found
    assert leader(POOL, k, threshold=min(1.0, t + 2e-3)).k == k  # the call does not fail near t...
    assert len(_leader_all(POOL, t + 2e-3)) < k or t + 2e-3 > 1  # ... but a larger threshold yields < k


def _leader_all(smiles, t):
    from rdkit.SimDivFilters import rdSimDivPickers

    fps = ecfp4_bits(smiles)
    return list(rdSimDivPickers.LeaderPicker().LazyBitVectorPick(fps, len(fps), float(t), len(fps)))


# ---------------------------------------------------------------------------------------------- Butina

def test_butina_clusters_at_a_fixed_threshold(D):
    """At t = 0.6 (hand): the alcohols {0, 1, 2} (3 neighbours each) and the amines {6, 7}; RDKit takes the
    highest index among equal neighbour counts as centroid; everything else is a singleton."""
    from rdkit.ML.Cluster import Butina

    within = [D[0, 1], D[0, 2], D[1, 2], D[6, 7]]
    assert max(within) <= 0.6
    others = D.copy()
    for i, j in [(0, 1), (0, 2), (1, 2), (6, 7)]:
        others[i, j] = others[j, i] = 1
    np.fill_diagonal(others, 1)
    assert others.min() > 0.6
    clusters = Butina.ClusterData(D, N, 0.6, isDistData=True)
    assert clusters == ((2, 0, 1), (7, 6), (9,), (8,), (5,), (4,), (3,))
    res = butina(POOL, 3, threshold=0.6)
    assert res.info["clusters"] == 7 and res.info["largest_cluster"] == 3
    assert res.order.tolist() == [2, 7, 9]  # the two real clusters, then RDKit's first singleton
    check_result(res, N, 3)
    assert np.allclose(D[np.arange(N), res.assignment], D[:, res.positions].min(axis=1))  # nearest centroid
    assert res.assignment[[0, 1, 6, 8]].tolist() == [2, 2, 7, 9]


@pytest.mark.parametrize("k", [2, 3, 6])
def test_butina_threshold_search(k):
    res = butina(POOL, k)
    check_result(res, N, k)
    assert res.info["clusters"] >= k
    assert butina(POOL, k, threshold=min(1.0, res.info["threshold"] + 2e-3)).info["clusters"] < k


# ---------------------------------------------------------------------------------------------- scaffolds

SCAFFOLD_POOL = ["c1ccccc1", "Cc1ccccc1", "Oc1ccccc1", "CCc1ccccc1",  # benzene
                 "c1ccncc1", "Cc1ccccn1", "Clc1cccnc1",  # pyridine
                 "C1CCCCC1", "CC1CCCCC1",  # cyclohexane
                 "CCO"]  # acyclic
GROUPS = {"c1ccccc1": [0, 1, 2, 3], "c1ccncc1": [4, 5, 6], "C1CCCCC1": [7, 8], "": [9]}


def test_murcko_grouping():
    scaf = murcko_scaffolds(SCAFFOLD_POOL)
    assert {s: [i for i, t in enumerate(scaf) if t == s] for s in set(scaf)} == GROUPS
    generic = murcko_scaffolds(SCAFFOLD_POOL, generic=True)
    assert len(set(generic[:9])) == 1 and generic[9] == ""


def test_scaffold_picks_medoids_of_largest_groups():
    D = hand_tanimoto(SCAFFOLD_POOL)
    res = scaffold(SCAFFOLD_POOL, 3)
    check_result(res, 10, 3)
    groups = list(GROUPS.values())[:3]
    medoids = [g[int(np.argmin(D[np.ix_(g, g)].sum(axis=1)))] for g in groups]
    assert res.order.tolist() == medoids  # largest scaffold first
    for g, m in zip(groups, medoids):
        assert (res.assignment[g] == m).all()
    assert res.assignment[9] == medoids[int(np.argmin(D[9, medoids]))]  # unpicked scaffold: nearest pick
    expected = [len(g) + int(res.assignment[9] == m) for g, m in zip(groups, medoids)]
    assert [int(res.tau[np.searchsorted(res.positions, m)]) for m in medoids] == expected
    four = scaffold(SCAFFOLD_POOL, 4)
    assert sorted(four.tau.tolist()) == [1, 2, 3, 4] and four.info["scaffolds"] == 4


def test_scaffold_fill_round_robin():
    res = scaffold(SCAFFOLD_POOL, 6)
    check_result(res, 10, 6)
    per = {s: int(np.isin(res.positions, g).sum()) for s, g in GROUPS.items()}
    assert per == {"c1ccccc1": 2, "c1ccncc1": 2, "C1CCCCC1": 1, "": 1} and res.info["filled"] == 2
    for g in GROUPS.values():  # members stay with a pick of their own scaffold
        assert np.isin(res.assignment[g], g).all()
    assert scaffold(SCAFFOLD_POOL, 10).tau.tolist() == [1] * 10


def test_scaffold_big_group_subsample():
    res = scaffold(SCAFFOLD_POOL, 2, max_group=2)
    check_result(res, 10, 2)
    assert res.order[0] in GROUPS["c1ccccc1"]


# ---------------------------------------------------------------------------------------------- all pickers

@pytest.mark.parametrize("method", list(PICKERS))
@pytest.mark.parametrize("k", [1, 2, 5, N])
def test_budget_is_exact(method, k):
    res = pick(method, POOL, k, seed=3, **({"assign": True} if method == "maxmin" else {}))
    check_result(res, N, k)
    assert res.info["method"] == method
    import json

    json.dumps(res.info)


@pytest.mark.parametrize("method", list(PICKERS))
def test_duplicates_are_filled(method):
    """Identical fingerprints: still exactly k distinct picks, up to k = n."""
    pool = ["CCO", "OCC", "CCO", "c1ccccc1", "c1ccccc1"]
    for k in (3, 5):
        res = pick(method, pool, k, **({"assign": True} if method == "maxmin" else {}))
        check_result(res, 5, k)


@pytest.mark.parametrize("method", list(PICKERS))
def test_determinism(method):
    a, b = pick(method, POOL, 4, seed=7), pick(method, POOL, 4, seed=7)
    assert np.array_equal(a.positions, b.positions) and np.array_equal(a.order, b.order)
    if method in DETERMINISTIC:
        assert np.array_equal(pick(method, POOL, 4, seed=1).order, a.order)


def test_fp_kmedoids_is_a_good_kmedoids(D):
    res = fp_kmedoids(POOL, 3, seed=0)
    check_result(res, N, 3)
    assert res.info["loss"] == pytest.approx(D[:, res.positions].min(axis=1).sum())
    import itertools

    best = min(D[:, list(c)].min(axis=1).sum() for c in itertools.combinations(range(N), 3))
    assert res.info["loss"] == pytest.approx(best)  # FasterPAM with restarts finds the optimum here


@pytest.mark.parametrize("method", list(PICKERS))
def test_unparsable_smiles_is_one_input_error(method):
    with pytest.raises(InputError, match=r"'C1CC'.*position 2") as err:
        pick(method, ["CCO", "CCN", "C1CC", "c1ccccc1"], 2)
    assert err.value.line == 3
    for bad in ("", None):
        with pytest.raises(InputError, match="position 1"):
            pick(method, ["CCO", bad, "CCN"], 2)


def test_bad_k_and_seed():
    with pytest.raises(ValueError, match="k must be"):
        maxmin(POOL, 0)
    with pytest.raises(ValueError, match="k must be"):
        leader(POOL, N + 1)
    with pytest.raises(ValueError, match="seed"):
        maxmin(POOL, 2, seed=-1)
    with pytest.raises(ValueError, match="unknown picker"):
        pick("kmeans", POOL, 2)


def test_names_and_options():
    """The CLI spelling ``fp-kmedoids`` finds ``fp_kmedoids``; every listed option is a keyword of its picker."""
    import inspect

    from tmdlib.chem import PICKER_OPTIONS

    assert list(PICKERS) == ["maxmin", "leader", "butina", "fp_kmedoids", "scaffold"]
    assert PICKERS["fp-kmedoids"] is fp_kmedoids and PICKER_OPTIONS.get("fp-kmedoids") == ("restarts", "max_iter")
    assert memory_bytes("fp-kmedoids", 100, 10) == memory_bytes("fp_kmedoids", 100, 10)
    assert pick("fp-kmedoids", POOL, 2).info["method"] == "fp_kmedoids"
    for name in PICKERS:
        params = inspect.signature(PICKERS[name]).parameters
        assert list(params)[:3] == ["smiles", "k", "seed"] and params["seed"].default == 0
        assert set(PICKER_OPTIONS[name]) == {p for p in params if params[p].kind is inspect.Parameter.KEYWORD_ONLY}


# ---------------------------------------------------------------------------------------------- memory

def test_memory_estimates():
    n = 1_270_000
    assert memory_bytes("butina", n, n // 10) > 8 * n * n > 12e12
    assert memory_bytes("fp_kmedoids", n, n // 10) > 8 * n * n
    assert memory_bytes("maxmin", n, n // 10) < 2e9 and memory_bytes("leader", n, n // 10) < 2e9
    assert memory_bytes("scaffold", n, n // 10) < 2e9


@pytest.mark.parametrize("method", ["butina", "fp_kmedoids"])
def test_refuses_before_allocating(method, monkeypatch):
    import tmdlib.chem._fingerprints as fpmod

    def boom(*a, **k):
        raise AssertionError("allocated before refusing")

    monkeypatch.setenv("TMDSUB_MAX_MEMORY", str(memory_bytes("maxmin", N, 3) + 1))
    monkeypatch.setattr(fpmod, "tanimoto_distance_matrix", boom)
    monkeypatch.setattr(fpmod, "ecfp4_bits", boom)
    with pytest.raises(InputError, match="maxmin or leader"):
        pick(method, POOL, 3)
    monkeypatch.undo()
    monkeypatch.setenv("TMDSUB_MAX_MEMORY", str(memory_bytes("maxmin", N, 3) + 1))
    assert maxmin(POOL, 3).k == 3 and leader(POOL, 3).k == 3  # the pointed-to methods fit


def test_butina_neighbour_lists_are_checked(monkeypatch):
    """The matrix fits but no threshold's neighbour lists do: an InputError, not a MemoryError."""
    import tmdlib.chem._pickers as pk

    calls = iter([1 << 40])
    monkeypatch.setattr(pk, "memory_budget", lambda: next(calls, 0))
    with pytest.raises(InputError, match="neighbour lists"):
        butina(POOL, 3)


def test_import_tmdlib_stays_light():
    """``import tmdlib`` never reaches tmdlib.chem, and tmdlib.chem imports RDKit / scikit-learn / kmedoids only
    inside functions (checked on the source: a subprocess import would cost seconds)."""
    import ast

    def top_level_imports(path):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        out = set()
        for node in tree.body:
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                out.add(("." * node.level) + (node.module or ""))
        return out

    assert not any("chem" in m for m in top_level_imports(ROOT / "tmdlib" / "__init__.py"))
    # the model files' estimators (models.py, lgbm.py) subclass scikit-learn's BaseEstimator, so they import sklearn
    # at the top; they are imported only when a model is looked up (the registry's entry points), never by
    # tmdlib.chem itself
    package = {m.lstrip(".") for m in top_level_imports(ROOT / "tmdlib" / "chem" / "__init__.py")}
    assert not {"models", "lgbm", "estimator"} & package
    for path in (ROOT / "tmdlib" / "chem").glob("*.py"):
        heavy = {m for m in top_level_imports(path) if m.split(".")[0] in ("rdkit", "sklearn", "kmedoids")}
        if path.stem not in package and path.name != "__init__.py":
            heavy -= {"sklearn.base"}
        assert not heavy, (path.name, heavy)
