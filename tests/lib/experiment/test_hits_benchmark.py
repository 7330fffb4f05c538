"""The hit benchmark's protocol (tmdlib.experiment.hits) on a small synthetic pool: picks never touch the audit
sample, the budgets are met, MolPAL's metrics are shares, the summary is a table per family."""
import numpy as np
import pytest

from tmdlib.experiment import hits as H
from tmdlib.experiment.pool import PoolCase


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = 300
    counts = rng.poisson(0.6, size=(n, 64)).astype(np.uint8)
    y = counts[:, :8].sum(axis=1) + rng.normal(0, 0.3, n)
    return {"name": "toy", "y": y, "counts": counts, "tmd": None, "smiles": ["C"] * n,
            "graph_ids": np.arange(n, dtype=np.int64), "task": "regression"}


def test_picks_meet_the_budgets_inside_the_pool(data):
    case = PoolCase(data["name"], data["y"], data["counts"], None, data["smiles"], data["graph_ids"], "regression")
    for s in (H.RANDOM, H.GREEDY, "random>ucb/svm:div", "random>ei/gp", "random>greedy/knn"):
        got = H.hit_picks(case, s, 0)
        assert [g.size for g in got] == [case.k(b) for b in H.BUDGETS]
        assert set(got[0]) <= set(got[1]) and got[1].max() < case.P  # pool positions: the audit sample is not there


def test_rows_and_summary(data):
    rows = H.run_hits(data, "toy", (H.RANDOM, H.GREEDY), random_seeds=2, trials=1)
    assert len(rows) == 2 * 2 + 1 * 2
    for r in rows:
        assert 0 <= r["top5"] <= 1 and 0 <= r["top1"] <= 1 and r["rmse_audit"] > 0 and r["rmse_rest"] > 0
    greedy = np.mean([r["top5"] for r in rows if r["strategy"] == H.GREEDY and r["budget"] == 0.10])
    rnd = np.mean([r["top5"] for r in rows if r["strategy"] == H.RANDOM and r["budget"] == 0.10])
    assert greedy > rnd  # an easy label: the greedy picks find more of the top
    text = "\n".join(H.summary_lines(rows, "toy"))
    assert "`random>greedy/svm`" in text and "| strategy |" in text
