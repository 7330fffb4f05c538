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


def test_the_curve_of_the_top_found_against_labels_spent():
    def row(s, d, trial, b, top5, k, n=100, a=10):
        return {"dataset": d, "family": "toy", "strategy": s, "trial": trial, "budget": str(b), "k": str(k),
                "n_pool": str(n), "n_audit": str(a), "top5": str(top5), "top1": "0"}

    rows = [row(H.RANDOM, "p", 0, 0.05, 0.0, 5), row(H.RANDOM, "p", 0, 0.1, 0.2, 10),
            row(H.RANDOM, "p", 1, 0.05, 0.2, 5), row(H.RANDOM, "p", 1, 0.1, 0.2, 10),
            row(H.RANDOM, "q", 0, 0.05, 0.4, 5), row(H.RANDOM, "q", 0, 0.1, 0.6, 10),
            row(H.GREEDY, "p", 0, 0.05, 0.2, 5), row(H.GREEDY, "p", 0, 0.1, 0.8, 10),
            row(H.GREEDY, "q", 0, 0.05, 0.2, 5)]  # q's second round missing: greedy's row covers p only
    lines = H.curve_lines(rows, "toy")
    assert lines[0] == "### toy: share of the top 5 % found against labels spent"
    assert "| strategy | pools | 0 % | 5.0 % (13.6 %) | 10.0 % (18.2 %) |" in lines  # (k + |A|) / (|P| + |A|)
    # per pool the mean over its trials, then the mean over pools: p (0.1, 0.2), q (0.4, 0.6)
    rnd, greedy = f"| `{H.RANDOM}` | 2 | 0 | 0.250 | 0.400 |", f"| `{H.GREEDY}` | 1 | 0 | 0.200 | 0.800 |"
    assert rnd in lines and greedy in lines and lines.index(rnd) < lines.index(greedy)
    assert H.curve_lines(rows, "other") == []
