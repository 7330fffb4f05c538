"""Selection's policy decided once (tmdlib.select.plan_selection): budget, engine, part size, pair budget, the lines
that say so, and select_graphs running what a plan says."""
from __future__ import annotations

import numpy as np
import pytest

import tmdlib
from helpers import RAW
from tmdlib import InputError
from tmdlib.select import SelectionPlan, plan_selection
from tmdlib.select.scalable import auto_pair_budget, count_parts, fit_part_size


@pytest.fixture(scope="module")
def pool():
    from tmdlib.datasets import read_tu, to_dataset

    return to_dataset(read_tu(RAW / "MUTAG", "MUTAG")).take(np.arange(60))


def test_exact_while_cheap_and_nothing_to_say(pool):
    plan = plan_selection(pool, "tmd", fraction=0.1)
    assert (plan.engine, plan.k, plan.n, plan.scalable) == ("exact", 6, 60, False)
    assert plan.part_size is None and plan.max_pairs is None and plan.lines == () and plan.parts is None
    assert plan_selection(60, "tmd", k=5).engine == "exact"  # only a matrix of the pool: exact
    assert plan_selection(pool, "random", k=5, engine="scalable").scalable is False  # the search is tmd's


def test_scalable_chooses_part_size_and_pair_budget_and_says_so(pool):
    plan = plan_selection(pool, "tmd", fraction=0.1, engine="scalable")
    assert plan.scalable and (plan.part_size, plan.asked_part_size, plan.parts) == (4000, 4000, 1)
    assert plan.max_pairs == float(auto_pair_budget(pool.nodes_per_graph))
    assert len(plan.lines) == 2
    assert plan.lines[0].startswith("part size chosen from the pool: 4,000 (60 training graphs: one part;")
    assert plan.lines[1].startswith(f"pair budget for the search, chosen from the pool: "
                                    f"{auto_pair_budget(pool.nodes_per_graph):,} exact pairs (7e+05 node pairs")
    assert plan.to_json() == {"method": "tmd", "n": 60, "k": 6, "engine": "scalable", "part_size": 4000,
                              "max_pairs": plan.max_pairs}


def test_part_size_raised_until_every_part_has_a_medoid(pool):
    plan = plan_selection(pool, "tmd", k=2, engine="scalable", part_size=10, max_pairs=0)
    fit = fit_part_size(10, 60, 2)
    assert fit > 10 and (plan.part_size, plan.asked_part_size, plan.max_pairs) == (fit, 10, None)
    assert plan.lines == (f"part size raised from 10 to {fit} graphs: k = 2 medoids and every part needs one "
                          f"({count_parts(60, 10)} parts of at most 10 graphs, {count_parts(60, fit)} of at most "
                          f"{fit})",)
    assert plan_selection(pool, "tmd", k=2, engine="scalable", part_size=40, max_pairs=500).lines == ()


def test_bad_requests_are_refused(pool):
    with pytest.raises(ValueError, match="exactly one"):
        plan_selection(pool, "tmd", k=3, fraction=0.1)
    with pytest.raises(ValueError, match="engine must be one of"):
        plan_selection(pool, "tmd", k=3, engine="fast")
    with pytest.raises(InputError, match="never reads a TMD matrix"):
        plan_selection(pool, "tmd", k=3, engine="scalable", has_matrix=True)
    with pytest.raises(ValueError, match="part_size"):
        plan_selection(pool, "tmd", k=3, engine="scalable", part_size=1)


def test_select_graphs_runs_the_plan_it_is_given(pool):
    plan = plan_selection(pool, "tmd", k=3, engine="scalable", part_size=20, max_pairs=400)
    sel = tmdlib.select_graphs(pool, "tmd", plan=plan, seed=1)
    same = tmdlib.select_graphs(pool, "tmd", k=3, engine="scalable", part_size=20, max_pairs=400, seed=1)
    assert sel.plan is plan and same.plan == plan
    assert np.array_equal(sel.positions, same.positions) and sel.epsilon == same.epsilon
    info = sel.to_json()["engine_info"]
    assert (sel.k, sel.engine, info["part_size"], info["max_pairs"]) == (3, "scalable", plan.part_size, 400.0)
    with pytest.raises(ValueError, match="not beside a plan"):
        tmdlib.select_graphs(pool, "tmd", plan=plan, k=3)
    with pytest.raises(ValueError, match="not beside a plan"):
        tmdlib.select_graphs(pool, "tmd", plan=plan, max_pairs=10)
    with pytest.raises(ValueError, match="the plan is for method 'tmd' on 60 graphs"):
        tmdlib.select_graphs(pool.take(np.arange(30)), "tmd", plan=plan)
    with pytest.raises(ValueError, match="the plan is for method"):
        tmdlib.select_graphs(pool, "random", plan=plan)


def test_without_a_plan_select_graphs_makes_the_same_one(pool):
    sel = tmdlib.select_graphs(pool, "tmd", fraction=0.1, engine="scalable", seed=0)
    assert sel.plan == plan_selection(pool, "tmd", fraction=0.1, engine="scalable")
    assert isinstance(sel.plan, SelectionPlan)
    # left out or None: auto, as the scalable engine takes them
    assert tmdlib.select_graphs(pool, "tmd", k=4, max_pairs=None, part_size=None,
                                engine="scalable").plan.max_pairs == float(auto_pair_budget(pool.nodes_per_graph))
