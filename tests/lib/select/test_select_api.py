"""The one selection entry point (tmdlib.select_graphs) and the method registry."""
from __future__ import annotations

import numpy as np
import pytest

import tmdlib
from helpers import RAW
from tmdlib import InputError
from tmdlib.select import get_method, method_names, register
from tmdlib.select import MethodSpec
from tmdlib.select._registry import Picked


@pytest.fixture(scope="module")
def mutag_pool():
    from tmdlib.datasets import read_tu, to_dataset

    ds = to_dataset(read_tu(RAW / "MUTAG", "MUTAG"))
    return ds.take(np.arange(60))


@pytest.fixture(scope="module")
def pool_matrix(mutag_pool):
    return tmdlib.tmd_matrix(mutag_pool, 4, "pascal")


def test_every_method_is_registered_once_with_what_it_needs():
    names = method_names()
    assert names[:4] == ("tmd", "random", "feature", "wl")
    assert {"maxmin", "leader", "butina", "fp-kmedoids", "scaffold"} <= set(names)
    assert len(names) == len(set(names))
    for n in names:
        spec = get_method(n)
        # the pool setting's rounds read the labels that came back (from round two); every other method never does
        assert spec.label_free == (n != "tmd-rounds")
        assert set(spec.needs) <= {"graphs", "tmd", "smiles"}
    with pytest.raises(ValueError, match="already registered"):
        register(MethodSpec("tmd", run=lambda p: None))
    with pytest.raises(ValueError, match="unknown selection method"):
        get_method("nope")


def test_one_select_graphs_definition():
    """The house rule: selection is implemented once (no second def select_graphs in the code base)."""
    from helpers import ROOT

    hits = [p for p in ROOT.rglob("*.py") if ".venv" not in p.parts and "tests" not in p.parts
            and "def select_graphs(" in p.read_text(encoding="utf-8")]
    assert [p.relative_to(ROOT).as_posix() for p in hits] == ["tmdlib/select/_api.py"]


@pytest.mark.parametrize("method", ["tmd", "random", "feature", "wl"])
def test_selection_carries_the_exact_certificate(mutag_pool, pool_matrix, method):
    n = len(mutag_pool)
    sel = tmdlib.select_graphs(mutag_pool, method, fraction=0.1, seed=3, matrix=pool_matrix)
    assert sel.k == 6 and sel.n == n and sel.positions.shape == (6,)
    assert np.all(np.diff(sel.positions) > 0)
    cert = sel.certificate
    # nearest-pick assignment read off the matrix: epsilon is the mean distance to the nearest pick
    nearest = pool_matrix[:, sel.positions].min(axis=1)
    assert cert.distance == pytest.approx(nearest, rel=1e-12, abs=1e-12)
    assert sel.epsilon_mean == pytest.approx(nearest.mean(), rel=1e-12)
    assert cert.tau.sum() == n
    if method == "random":
        assert np.all(sel.tau == 1.0)  # the documented convention: unit weights
    else:
        assert sel.tau.sum() == n
    if method == "tmd":  # k-medoids on TMD: the training weights are the certificate's cluster sizes
        assert np.array_equal(sel.tau, cert.tau)


def test_without_a_matrix_the_certificate_is_the_pruned_exact_search(mutag_pool, pool_matrix):
    a = tmdlib.select_graphs(mutag_pool, "feature", fraction=0.1, seed=1)
    b = tmdlib.select_graphs(mutag_pool, "feature", fraction=0.1, seed=1, matrix=pool_matrix)
    assert np.array_equal(a.positions, b.positions)
    assert a.epsilon == pytest.approx(b.epsilon, rel=1e-9)
    assert a.engine == "scalable" and b.engine == "exact"
    assert a.pairs_computed < len(mutag_pool) * (len(mutag_pool) - 1) // 2


def test_matrix_input_and_engine_rules(mutag_pool, pool_matrix):
    sel = tmdlib.select_graphs(pool_matrix, "tmd", k=5, seed=0)
    via_ds = tmdlib.select_graphs(mutag_pool, "tmd", k=5, seed=0, matrix=pool_matrix)
    assert np.array_equal(sel.positions, via_ds.positions)
    assert np.array_equal(sel.ids, sel.positions)  # no dataset: ids are positions
    with pytest.raises(InputError, match="scalable engine never reads a TMD matrix"):
        tmdlib.select_graphs(mutag_pool, "tmd", k=5, matrix=pool_matrix, engine="scalable")
    with pytest.raises(InputError, match="needs the pool's graphs"):
        tmdlib.select_graphs(pool_matrix, "wl", k=5)
    with pytest.raises(InputError, match="needs SMILES"):
        tmdlib.select_graphs(mutag_pool, "maxmin", k=5)


def test_labelled_graphs_are_kept_first(mutag_pool, pool_matrix):
    lab = np.zeros(len(mutag_pool), dtype=bool)
    lab[[2, 9]] = True
    for method in ("tmd", "random", "feature"):
        sel = tmdlib.select_graphs(mutag_pool, method, k=6, seed=0, matrix=pool_matrix, labelled=lab)
        assert {2, 9} <= set(sel.positions.tolist())
        assert sel.reused_labels == 2 and sel.labelled_in_pool == 2


def test_memory_refusal_before_allocating(mutag_pool, monkeypatch):
    monkeypatch.setenv("TMDSUB_MAX_MEMORY", "1000")
    with pytest.raises(InputError, match="selection method 'wl' on 60 graphs"):
        tmdlib.select_graphs(mutag_pool, "wl", k=5)


def test_chemistry_pickers_through_the_entry_point():
    smiles = ["CCO", "CCCO", "c1ccccc1", "Cc1ccccc1", "Oc1ccccc1", "C1CCCCC1", "c1ccncc1", "CC(=O)O", "CCN", "CCCC"]
    D = np.abs(np.subtract.outer(np.arange(10.0), np.arange(10.0)))  # any metric stands in for TMD here
    # chemistry methods need the pool's graphs only for the certificate: with a matrix they run on SMILES alone
    for method in ("maxmin", "leader", "butina", "fp-kmedoids", "scaffold"):
        spec = get_method(method)
        assert spec.needs == ("smiles",) and not spec.reuses_labels
        sel = tmdlib.select_graphs(D, method, k=3, seed=0, smiles=smiles)
        assert sel.k == 3 and sel.certificate is not None and sel.certificate.tau.sum() == 10


def test_a_registered_method_plugs_in_everywhere(mutag_pool, pool_matrix):
    from tmdlib.select._registry import METHODS

    def first_k(problem):
        return Picked(np.arange(problem.k), np.full(problem.k, problem.n / problem.k))

    register(MethodSpec("first-k-test", first_k, needs=(), summary="test"))
    try:
        sel = tmdlib.select_graphs(mutag_pool, "first-k-test", k=4, matrix=pool_matrix)
        assert sel.positions.tolist() == [0, 1, 2, 3] and sel.tau.sum() == len(mutag_pool)
        from tmdlib.experiment import ALL_GRAPH_METHODS  # noqa: F401
        assert "first-k-test" in method_names()
    finally:
        METHODS.pop("first-k-test")


def test_selection_json_fields_as_arrays_are_the_lists(mutag_pool, pool_matrix, tmp_path):
    """``to_json(arrays=True)`` (the select flow's, streamed by ``write_json``) holds the per-graph fields as
    int64 / float64 arrays with the values of the lists, and the written files are the same bytes."""
    from tasks import io

    sel = tmdlib.select_graphs(mutag_pool, "tmd", fraction=0.1, seed=3, matrix=pool_matrix)
    for gids in (None, mutag_pool.graph_ids + 1000):
        lists, arrays = sel.to_json(gids), sel.to_json(gids, arrays=True)
        assert arrays["assignment"].dtype == np.int64 and arrays["distance"].dtype == np.float64
        assert arrays["assignment"].tolist() == lists["assignment"] and arrays["distance"].tolist() == lists["distance"]
        a = io.write_json(tmp_path / "lists.json", lists).read_bytes()
        assert io.write_json(tmp_path / "arrays.json", arrays).read_bytes() == a
    # the pool positions of the assignment map to the picks' ids (no graph ids given: the picks' own)
    assert set(sel.to_json()["assignment"]) == set(np.asarray(sel.ids).tolist())
    with pytest.raises(KeyError, match="not a pick"):
        sel._id_of(np.array([int(np.setdiff1d(np.arange(sel.n), sel.positions)[0])]))
    assert sel._id_of(np.empty(0, np.int64)).shape == (0,)
