"""Picks in rounds (tmdlib.select.rounds) and the two methods built on them (tmd-mix, tmd-rounds): sizes, who may be
picked, the exact certificate of the whole labelled set, seeds."""
from __future__ import annotations

import numpy as np
import pytest

import tmdlib
from tmdlib.select import rounds


@pytest.fixture(scope="module")
def mutag_D(mutag):
    return tmdlib.tmd_matrix(mutag, 4, "pascal")


def test_union_epsilon_is_the_mean_distance_to_the_nearest_labelled(mutag_D):
    lab = np.array([3, 17, 90])
    assert rounds.union_epsilon(mutag_D, lab) == pytest.approx(mutag_D[:, lab].min(axis=1).mean(), rel=1e-12)
    members = np.arange(50)
    assert rounds.union_epsilon(mutag_D, lab, members) == pytest.approx(mutag_D[:50][:, lab].min(axis=1).mean())
    with pytest.raises(ValueError, match="empty"):
        rounds.union_epsilon(mutag_D, [])


@pytest.mark.parametrize("share", [0.0, 0.5, 1.0])
def test_mixed_medoids_keeps_fixed_and_picks_k_distinct(mutag_D, share):
    fixed = np.array([0, 5])
    pos = rounds.mixed_medoids(mutag_D, 20, share, seed=1, fixed=fixed)
    assert pos.shape == (20,) and np.unique(pos).size == 20 and set(fixed) <= set(pos.tolist())
    assert np.array_equal(pos, rounds.mixed_medoids(mutag_D, 20, share, seed=1, fixed=fixed))  # seeded


def test_mixed_medoids_covers_better_than_its_uniform_half(mutag_D):
    """The k-medoids half lowers ε below what the uniform half alone gives, and at most as low as plain k-medoids."""
    from tmdlib.select import kmedoids_coreset

    k = 20
    mix = rounds.mixed_medoids(mutag_D, k, 0.5, seed=0)
    uni = rounds.mixed_medoids(mutag_D, k, 1.0, seed=0)
    full = kmedoids_coreset(mutag_D, k, seed=0).medoids
    e = [rounds.union_epsilon(mutag_D, p) for p in (full, mix, uni)]
    assert e[0] <= e[1] <= e[2]


def test_trimmed_medoids_avoid_the_most_isolated(mutag_D):
    iso = rounds.isolation(mutag_D, 5)
    pos = rounds.trimmed_medoids(mutag_D, 15, 0.2, seed=0)
    banned = np.argsort(-iso, kind="stable")[: int(0.2 * len(iso))]
    assert pos.size == 15 and not set(pos.tolist()) & set(banned.tolist())


@pytest.mark.parametrize("strategy", rounds.NEXT_STRATEGIES)
def test_next_batch_picks_new_candidates_only(mutag_D, strategy):
    n = mutag_D.shape[0]
    lab = np.arange(0, n, 10)
    audit = np.arange(5, n, 10)
    cand = np.ones(n, dtype=bool)
    cand[audit] = False
    u = np.random.default_rng(0).random(n)
    new = rounds.next_batch(mutag_D, lab, 12, u, strategy, seed=2, candidates=cand)
    assert new.shape == (12,) and np.unique(new).size == 12
    assert not set(new.tolist()) & set(lab.tolist()) and not set(new.tolist()) & set(audit.tolist())
    assert np.array_equal(new, rounds.next_batch(mutag_D, lab, 12, u, strategy, seed=2, candidates=cand))


def test_unc_cover_is_a_difficulty_weighted_k_center(mutag_D):
    """With equal difficulty the first pick is the member farthest from the labelled set; a difficulty of zero is
    never picked while another candidate has a positive score."""
    n = mutag_D.shape[0]
    lab = np.array([0, 1])
    d = mutag_D[:, lab].min(axis=1)
    first = rounds.next_batch(mutag_D, lab, 1, np.ones(n), "unc-cover")
    assert d[first[0]] == d.max()
    u = np.ones(n)
    u[np.argmax(d)] = 0.0
    assert rounds.next_batch(mutag_D, lab, 1, u, "unc-cover")[0] != np.argmax(d)


def test_next_batch_refuses_what_it_cannot_do(mutag_D):
    n = mutag_D.shape[0]
    with pytest.raises(ValueError, match="difficulty"):
        rounds.next_batch(mutag_D, [0], 3, None, "unc-cover")
    with pytest.raises(ValueError, match="unknown strategy"):
        rounds.next_batch(mutag_D, [0], 3, np.ones(n), "top-k")
    with pytest.raises(ValueError, match="cannot pick"):
        rounds.next_batch(mutag_D, [0], n, np.ones(n), "tmd")
    with pytest.raises(ValueError, match="difficulty must be"):
        rounds.next_batch(mutag_D, [0], 3, -np.ones(n), "badge")


def test_tmd_rounds_certifies_the_union_of_the_rounds(mutag, mutag_D):
    """Round one (tmd-mix), then a round steered by a difficulty: the selection keeps round one, picks k in all, and
    its certificate is the exact ε of the whole labelled set, recomputed here from the matrix."""
    n = len(mutag)
    first = tmdlib.select_graphs(mutag, "tmd-rounds", k=10, seed=0, matrix=mutag_D)
    assert first.k == 10
    u = rounds.knn_difficulty(np.eye(n)[first.positions], np.arange(10.0), np.eye(n))
    second = tmdlib.select_graphs(mutag, "tmd-rounds", k=25, seed=0, matrix=mutag_D, labelled=first.positions,
                                  difficulty=u, strategy="unc-cover")
    assert second.k == 25 and set(first.positions.tolist()) <= set(second.positions.tolist())
    assert second.epsilon_mean == pytest.approx(mutag_D[:, second.positions].min(axis=1).mean(), rel=1e-12)
    assert second.epsilon_mean <= first.epsilon_mean
    again = tmdlib.select_graphs(mutag, "tmd-rounds", k=25, seed=0, matrix=mutag_D, labelled=first.positions,
                                 difficulty=u, strategy="unc-cover")
    assert np.array_equal(again.positions, second.positions)


def test_default_method_is_the_pool_settings_in_production_only():
    assert rounds.default_method("auto", True) == "tmd-rounds"
    assert rounds.default_method("auto", False) == "tmd"
    assert rounds.default_method("maxmin", True) == "maxmin"


def test_knn_difficulty_is_the_spread_of_the_nearest_labels():
    X_lab = np.array([[0.0], [0.1], [0.2], [10.0], [10.1], [10.2]])
    y = np.array([1.0, 1.0, 1.0, 0.0, 5.0, 10.0])
    u = rounds.knn_difficulty(X_lab, y, np.array([[0.05], [10.05]]), neighbours=3)
    assert u[0] == pytest.approx(0.01)  # crepes adds beta = 0.01, so no member has a difficulty of 0
    assert u[1] == pytest.approx(np.std([0.0, 5.0, 10.0]) + 0.01)


def test_tmd_rounds_spends_the_control_share_uniformly(mutag, mutag_D):
    """select.control: that share of the round's new picks is a uniform draw (kept by the strategy), recorded apart
    from the strategy's own new picks; only tmd-rounds takes it."""
    from tmdlib import InputError

    lab = np.arange(0, 40, 4)
    sel = tmdlib.select_graphs(mutag, "tmd-rounds", k=30, seed=1, matrix=mutag_D, labelled=lab,
                               difficulty=np.ones(len(mutag)), control=0.25)
    doc = sel.to_json()["rounds"]
    new = 30 - lab.size
    assert len(doc["control_ids"]) == int(np.ceil(0.25 * new)) and doc["round_new"] == new
    assert set(doc["control_ids"]) | set(doc["strategy_new_ids"]) == set(sel.ids.tolist()) - set(lab.tolist())
    assert not set(doc["control_ids"]) & set(doc["strategy_new_ids"])
    with pytest.raises(InputError, match="needs select.method tmd-rounds"):
        rounds.check_control("tmd", 0.2)
    with pytest.raises(InputError, match=r"share in \[0, 1\)"):
        rounds.check_control("tmd-rounds", 1.0)


def test_auto_keeps_the_papers_coreset_where_the_scalable_engine_runs():
    """No TMD matrix (the scalable engine: MOSES-sized pools): auto stays the paper's coreset even in production."""
    assert rounds.default_method("auto", True, scalable=True) == "tmd"
    assert rounds.default_method("tmd-rounds", True, scalable=True) == "tmd-rounds"



def test_stratified_picks_give_every_member_the_same_chance():
    """Proportional allocation with systematic rounding: each member is picked with probability k/n exactly, a
    dense region and a small far one alike (Random's expectation), and no draw leaves the far cluster empty."""
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(0, 1, (90, 2)), rng.normal(9, 0.5, (30, 2))])
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    hits = np.zeros(len(X))
    for seed in range(300):
        p = rounds.stratified_picks(D, 12, seed, strata=4, restarts=1)
        assert p.shape == (12,) and np.unique(p).size == 12
        assert (p >= 90).sum() == 3  # the far cluster's share: 12 * 30/120, whatever the draw
        hits[p] += 1
    assert hits[:90].mean() / 300 == pytest.approx(0.1, abs=0.01)
    assert hits[90:].mean() / 300 == pytest.approx(0.1, abs=0.01)


def test_stratified_later_round_fills_the_deficits(mutag_D):
    n = mutag_D.shape[0]
    lab = np.arange(20)  # the first 20 members only: a lopsided labelled set
    new = rounds.next_batch(mutag_D, lab, 18, None, "strat", seed=1)
    assert new.shape == (18,) and not set(new.tolist()) & set(lab.tolist())
    assert (new >= 20).sum() == 18 and np.array_equal(new, rounds.next_batch(mutag_D, lab, 18, None, "strat", seed=1))
    u = np.ones(n)
    hard = np.arange(n) >= n // 2
    u[hard] = 10.0
    steered = rounds.next_batch(mutag_D, lab, 18, u, "strat-unc", seed=1)
    assert hard[steered].sum() > hard[new].sum()  # the difficult half gets a larger share


def test_tmd_rounds_picks_a_molecule_pool_in_the_fingerprint_space():
    """With SMILES, a first round on the fp space clusters on the Tanimoto distance of ECFP4 counts (the SVR's
    kernel), and the selection's certificate is still the exact TMD ε of the picks; without SMILES it falls back to
    TMD.  The later round keeps round one and picks on the same space."""
    import csv

    from helpers import RAW
    from tmdlib.datasets import read_smiles_csv

    path = RAW / "MoleculeACE" / "CHEMBL2835_Ki.csv"
    if not path.is_file():
        pytest.skip("data/raw not present")
    rows = list(csv.DictReader(open(path, newline="")))[:60]
    smiles = [r["smiles"] for r in rows]
    ds = tmdlib.datasets.to_dataset(read_smiles_csv(path, "smiles", "y", limit=60))
    D = tmdlib.tmd_matrix(ds, 4, "pascal")
    first = tmdlib.select_graphs(ds, "tmd-rounds", k=8, seed=0, matrix=D, smiles=smiles, first="strat-fp")
    assert first.k == 8 and first.info["space"] == "fp" and first.info["first"] == "strat-fp"
    assert first.epsilon_mean == pytest.approx(D[:, first.positions].min(axis=1).mean(), rel=1e-12)
    plain = tmdlib.select_graphs(ds, "tmd-rounds", k=8, seed=0, matrix=D, first="strat-fp")
    assert plain.info["space"] == "tmd"
    u = np.ones(len(ds))
    second = tmdlib.select_graphs(ds, "tmd-rounds", k=14, seed=0, matrix=D, smiles=smiles, first="strat-fp",
                                  labelled=first.positions, difficulty=u, strategy="strat-unc")
    assert second.info["space"] == "fp" and set(first.positions.tolist()) <= set(second.positions.tolist())
