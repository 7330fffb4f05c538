"""``select.method: auto`` where the select stage plans (tmdlib.select.round_policy.method_plan): the pool setting's
rounds where the TMD matrix is at hand in production, the paper's coreset in benchmark mode and on the scalable engine."""
from __future__ import annotations


def test_the_plan_follows_the_method_auto_picks(mutag):
    from tmdlib.select.round_policy import method_plan as resolve_plan

    method, plan = resolve_plan(mutag, "auto", True, fraction=0.1, engine="exact", has_matrix=True)
    assert (method, plan.method, plan.engine) == ("tmd-rounds", "tmd-rounds", "exact")
    method, plan = resolve_plan(mutag, "auto", True, fraction=0.1, engine="scalable", has_matrix=False)
    assert (method, plan.method, plan.engine) == ("tmd", "tmd", "scalable") and plan.scalable
    method, plan = resolve_plan(mutag, "auto", False, fraction=0.1, engine="exact", has_matrix=True)
    assert method == "tmd"
