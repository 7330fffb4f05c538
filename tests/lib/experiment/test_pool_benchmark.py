"""The pool benchmark (tmdlib.experiment.pool, tmdlib.reporting.pool): the whole set as the pool, the audit sample
never picked, the registered SVR on a precomputed kernel, rounds that only grow, resumable rows, the reading."""
from __future__ import annotations

import numpy as np
import pytest

import tmdlib
from helpers import RAW
from tmdlib.experiment import pool as P
from tmdlib.reporting import pool as R

pytestmark = pytest.mark.skipif(not (RAW / "MoleculeACE").is_dir(), reason="data/raw not present")
N = 140


@pytest.fixture(scope="module")
def data():
    from tmdlib.chem import ecfp4_counts

    p = P.load_pool("ACE-CHEMBL2835_Ki", str(RAW))
    keep = np.arange(N)
    ds = p["ds"].take(keep)
    smiles = [p["smiles"][i] for i in keep]
    return {"name": "ACE-CHEMBL2835_Ki", "y": p["y"][keep], "graph_ids": p["graph_ids"][keep], "smiles": smiles,
            "counts": ecfp4_counts(smiles), "tmd": tmdlib.tmd_matrix(ds, 4, "pascal"), "task": p["task"]}


def test_the_svr_on_the_kernel_is_the_registered_svm(data):
    from tmdlib.chem.models import TanimotoSVR

    case = P.PoolCase(**{k: data[k] for k in ("name", "y", "counts", "tmd", "smiles", "graph_ids", "task")})
    train, rest = np.arange(0, case.P, 3), np.setdiff1d(np.arange(case.P), np.arange(0, case.P, 3))
    y = case.y[case.pool[train]]
    ours = P.svr_on_kernel(case.kernel, train, y, None, rest)
    ref = TanimotoSVR().fit(case.counts[case.pool[train]], y).predict(case.counts[case.pool[rest]])
    assert ours == pytest.approx(ref, rel=1e-6, abs=1e-6)


def test_rows_audit_rounds_and_resume(data):
    rows = [r for rs in P.run_set(data, ["svm"], ["random", "tmd", "tmd-mix>tmd-unc/forest"], random_seeds=2,
                                  trials=1) for r in rs]
    case = P.PoolCase(**{k: data[k] for k in ("name", "y", "counts", "tmd", "smiles", "graph_ids", "task")})
    assert {r["n_audit"] for r in rows} == {case.audit.size} and {r["n_pool"] for r in rows} == {case.P}
    assert all(r["n_eval"] == case.P - r["k"] and r["metric"] == "rmse" and r["value"] > 0 for r in rows)
    assert len([r for r in rows if r["strategy"] == "random"]) == 2 * len(P.BUDGETS)
    assert len([r for r in rows if r["strategy"] == "tmd"]) == 2 * len(P.BUDGETS)  # unit weights and τ
    rounds = sorted((r for r in rows if r["mode"] == "rounds"), key=lambda r: r["budget"])
    assert [r["k"] for r in rounds] == [case.k(b) for b in P.BUDGETS]
    assert rounds[0]["epsilon"] >= rounds[1]["epsilon"] >= rounds[2]["epsilon"]  # the labelled set only grows
    again = [r for rs in P.run_set(data, ["svm"], ["random", "tmd", "tmd-mix>tmd-unc/forest"], random_seeds=2,
                                   trials=1, skip={P.row_key(r) for r in rows}) for r in rs]
    assert again == []


def test_rows_round_trip_through_the_csv(data, tmp_path):
    rows = [r for rs in P.run_set(data, ["svm"], ["random"], random_seeds=2, trials=1) for r in rs]
    P.append_rows(tmp_path / "s.csv", rows[:3])
    P.append_rows(tmp_path / "s.csv", rows[3:])
    back = P.read_rows(tmp_path / "s.csv")
    assert [P.row_key(r) for r in back] == [P.row_key(r) for r in rows]
    assert [r["value"] for r in back] == [r["value"] for r in rows]


def test_the_control_replay_gives_a_verdict(data):
    out = P.run_control(data, "tmd-mix>tmd-unc/forest", "svm", 0.2, trials=1)
    r = out[0]
    assert len(out) == 1 and r["verdict"] in ("strategy better", "Random better", "undecided")
    assert r["n_control"] >= 1 and r["value"] > 0 and r["round_ratio"] > 0
    # the production rule's numbers: every uniform label (audit + arm), cross-fitted; the old rule's beside them
    assert r["n"] == r["n_audit"] + r["n_control"] and r["folds"] == 5 and r["n_arm"] >= r["n_control"]
    assert r["old_verdict"] in ("strategy better", "Random better", "undecided") and set(r) == set(P.CONTROL_COLUMNS)


def test_control_counts_per_family():
    rows = [_row(d, "random", 0.1, 1.0, t) for d in ("ACE-X", "series-X") for t in range(2)]
    rows += [_row("ACE-X", "s", 0.1, 0.9, mode="rounds"), _row("series-X", "s", 0.1, 1.1, mode="rounds")]
    cells = R.collect(rows)
    ctl = [{"dataset": "ACE-X", "model": "svm", "strategy": "s", "verdict": "strategy better",
            "old_verdict": "Random better", "round_ratio": "0.95", "labels_needed": "80", "n": "60", "folds": "5"},
           {"dataset": "series-X", "model": "svm", "strategy": "s", "verdict": "strategy better",
            "old_verdict": "undecided", "round_ratio": "0.97", "labels_needed": "300", "n": "53", "folds": "5"}]
    c = R.control_counts(ctl, cells)
    assert c["target sets"]["new"]["right"] == 1 and c["target sets"]["old"]["wrong"] == 1
    assert c["series"]["new"]["wrong"] == 1 and c["series"]["new_round"]["right"] == 1
    assert c["series"]["old"]["undecided"] == 1 and c["all"]["runs"] == 2 and c["all"]["labels_needed"] == [80, 300]
    lines = R.control_lines([{**r, "share": "0.2", "metric": "rmse", "value": "1.0"} for r in ctl], cells)
    assert any(line.startswith("| series | 1 | 1 | 0 / 1 / 0") for line in lines)


def _row(dataset, strategy, budget, value, trial=0, mode="oneshot"):
    return {"dataset": dataset, "model": "svm", "strategy": strategy, "mode": mode, "budget": budget,
            "trial": trial, "weighted": False, "metric": "rmse", "value": value}


def test_ratios_losses_and_labels_saved():
    rows = [_row("A", "random", b, v, t) for b, vs in ((0.05, (1.0, 1.2)), (0.1, (0.9, 1.1)), (0.2, (0.8, 0.8)))
            for t, v in enumerate(vs)]
    rows += [_row("A", "s", 0.05, 1.0), _row("A", "s", 0.1, 0.9), _row("A", "s", 0.2, 0.7)]
    cells = R.collect(rows)
    ratios = R.set_ratios(cells)
    assert ratios[("svm", "s", "oneshot", 0.1)]["A"][0] == pytest.approx(0.9)
    assert ratios[("svm", "s", "oneshot", 0.1)]["A"][1] is False  # not worse than Random + 1 sd
    # the strategy reaches Random's 10 % error (1.0) at 5 %: half the labels saved
    assert R.labels_saved(cells, "A", "svm", "s", "oneshot", 0.1) == pytest.approx(0.5)
    # Random's 20 % error 0.8 is reached between 10 % (0.9) and 20 % (0.7), at the geometric midpoint
    assert R.labels_saved(cells, "A", "svm", "s", "oneshot", 0.2) == pytest.approx(1 - np.sqrt(0.02) / 0.2)
    lines, records = R.summary_table(cells, "svm", "oneshot")
    assert records[0]["strategy"] == "s" and records[0]["worse_1sd"] == 0 and "s" in lines[2]


def test_families_are_named_and_cut_from_shipped_data():
    from tmdlib.experiment import families as F

    assert [F.family_of(n) for n in ("ACE-CHEMBL204_Ki", "series-CHEMBL204_Ki", "moses-logp", "ogbg-molbace")] == \
        ["target sets", "series", "property", "classification"]
    smiles = ["c1ccccc1C(=O)N" + "C" * i for i in range(8)] + ["OCCO", "CCCCCCCCCCCCCCCCCC(=O)O"]
    members = F.series_members(smiles, 0.6)
    assert set(members.tolist()) <= set(range(8)) and members.size >= 4  # the amides, not the odd two
    y = F.property_values(["CCO", "c1ccccc1", "not a smiles"], "logp")
    assert y[0] < y[1] and np.isnan(y[2])
    a, b = F.property_pool_members(100, 0, 30), F.property_pool_members(100, 1, 30)
    assert a.size == b.size == 30 and not set(a.tolist()) & set(b.tolist())


def test_full_data_reference_and_labels_to_target(data):
    rows = [r for rs in P.run_set(data, ["svm"], ["full"]) for r in rs]
    assert len(rows) == 1 and rows[0]["mode"] == "cv" and rows[0]["n_eval"] == rows[0]["n_pool"]
    cells = R.collect([_row("A", "full", 0.8, 1.0, mode="cv")] +
                      [_row("A", "s", b, v) for b, v in ((0.05, 1.5), (0.1, 1.2), (0.2, 1.0))] +
                      [_row("A", "t", b, v) for b, v in ((0.05, 1.5), (0.1, 1.3), (0.2, 1.2))])
    b, how = R.labels_to_target(cells, "A", "svm", "s", "oneshot", 1.1)
    assert how == "=" and b == pytest.approx(np.exp(np.log(0.1) + 0.5 * np.log(2)))  # 1.1 halfway in log b
    assert R.labels_to_target(cells, "A", "svm", "t", "oneshot", 1.1) == (0.2, ">")
    assert "(1/1)" in R.target_table(cells, [("s", "oneshot")])[2]
