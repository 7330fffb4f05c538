"""The scalable engine's pair budget chosen from the pool (``max_pairs="auto"``): the rule, what it leaves alone
(pools of small graphs never reach it: the same coreset as without a budget), what it holds back (large graphs),
and a certificate that stays exact either way."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tmdlib.select._plan as plan
from tmdlib.select import verify_certificate
from tmdlib.select.scalable import AUTO_PAIR_WORK, auto_pair_budget, resolve_max_pairs, scalable_coreset


def test_the_rule_scales_with_the_pool_and_the_work_of_a_pair():
    dd = np.full(942, 284)  # DD's training pool: ~0.14 CPU s per exact pair, ~10 min on 2 cores for its budget
    assert auto_pair_budget(dd) == math.ceil(AUTO_PAIR_WORK * 942 / 284 ** 2)
    assert 6_000 <= auto_pair_budget(dd) <= 10_000
    moses = np.full(1_267_730, 21.6)  # MOSES at 1 % spends ~35 pairs per graph: far below its budget
    assert auto_pair_budget(moses) > 35 * 1_267_730 * 10
    assert auto_pair_budget(np.full(10, 5000)) == 10  # never below one pair per graph
    assert auto_pair_budget(np.array([], dtype=int)) == 0
    mixed = np.array([10, 30, 500])
    assert auto_pair_budget(mixed) == math.ceil(AUTO_PAIR_WORK * 3 / mixed.mean() ** 2)


@pytest.mark.parametrize("given, expected", [("auto", float(auto_pair_budget(np.full(942, 284)))), (None, None),
                                             (0, None), (5000, 5000.0), (2.5e3, 2500.0)])
def test_resolve_max_pairs(given, expected):
    assert resolve_max_pairs(given, np.full(942, 284)) == expected


@pytest.mark.parametrize("bad", ["lots", "Auto ", -1, float("nan")])
def test_resolve_max_pairs_refuses_nonsense(bad):
    with pytest.raises(ValueError, match="max_pairs"):
        resolve_max_pairs(bad, np.full(5, 10))


def test_pools_of_small_graphs_get_the_same_coreset_as_without_a_budget(mutag):
    auto = scalable_coreset(mutag, 12, max_pairs="auto")
    free = scalable_coreset(mutag, 12, max_pairs=None)
    assert auto.info.max_pairs == auto_pair_budget(mutag.nodes_per_graph) and free.info.max_pairs is None
    assert auto.pairs_computed < auto.info.max_pairs
    np.testing.assert_array_equal(auto.medoids, free.medoids)
    np.testing.assert_array_equal(auto.assignment, free.assignment)
    assert auto.pairs_computed == free.pairs_computed


def test_a_binding_budget_holds_the_search_back_and_the_certificate_stays_exact(mutag, monkeypatch):
    free = scalable_coreset(mutag, 12, max_pairs=0)
    monkeypatch.setattr(plan, "AUTO_PAIR_WORK", 4.0 * mutag.nodes_per_graph.mean() ** 2)  # ~4 pairs per graph
    held = scalable_coreset(mutag, 12)  # the library's default is "auto"
    assert held.info.max_pairs == 4 * len(mutag)
    assert held.pairs_computed < free.pairs_computed
    cert = held.certificate()
    verify_certificate(mutag, cert)
