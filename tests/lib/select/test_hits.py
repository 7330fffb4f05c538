"""Hit hunting (tmdlib.select.hits): the goal's checks, the acquisitions, the batch, MolPAL's metrics."""
import numpy as np
import pytest

from tmdlib import InputError
from tmdlib.select import hits


def test_goal_checks_name_the_setting():
    assert hits.check_goal("model", classification=True, targets=3) == "model"
    assert hits.check_goal("maximize", classification=False) == "maximize"
    assert hits.check_goal("minimize", classification=False, targets=2, target="pKi") == "minimize"
    with pytest.raises(InputError, match="select.goal: positive"):
        hits.check_goal("maximize", classification=True)
    with pytest.raises(InputError, match="select.target"):
        hits.check_goal("maximize", classification=False, targets=2)
    with pytest.raises(InputError, match="select.goal: maximize or minimize"):
        hits.check_goal("positive", classification=False)
    with pytest.raises(InputError, match="one of"):
        hits.check_goal("best", classification=False)
    assert hits.goal_sign("minimize") == -1.0 and hits.goal_sign("maximize") == 1.0 and hits.goal_sign("model") == 0


def test_acquisitions():
    mu = np.array([0.0, 1.0, 2.0, 0.5])
    sigma = np.array([3.0, 0.0, 0.1, 0.0])
    assert np.argmax(hits.acquisition(mu, sigma, "greedy")) == 2
    assert np.argmax(hits.acquisition(mu, sigma, "ucb", beta=2.0)) == 0
    ei = hits.acquisition(mu, sigma, "ei", best=2.0)
    assert ei[1] == 0.0 and ei[3] == 0.0 and ei[0] > ei[2] > 0  # only the spread can beat the best
    t1 = hits.acquisition(mu, sigma, "thompson", seed=1)
    assert t1[1] == 1.0 and np.array_equal(t1, hits.acquisition(mu, sigma, "thompson", seed=1))
    assert hits.acquisition(mu, sigma, "random").shape == (4,)
    with pytest.raises(ValueError):
        hits.acquisition(mu, sigma, "pi")


def test_hit_batch_top_and_diverse():
    rng = np.random.default_rng(0)
    n = 60
    scores = rng.random(n)
    audit = np.arange(5)
    scores[audit] = 10.0  # the best-scored members are never candidates
    cand = np.setdiff1d(np.arange(n), audit)
    got = hits.hit_batch(scores, 6, labelled=[10, 11], candidates=cand)
    assert got.size == 6 and not np.isin(got, audit).any() and not np.isin(got, [10, 11]).any()
    free = np.setdiff1d(cand, [10, 11])
    assert set(got) == set(free[np.argsort(-scores[free])[:6]])
    # two tight clusters of analogues: the diverse batch takes from both
    x = np.concatenate([np.zeros(30), np.ones(30) * 10]) + rng.random(n) * 0.01
    D = np.abs(x[:, None] - x[None, :])
    s = np.where(x < 5, 2.0, 1.0) + rng.random(n) * 0.01
    plain = hits.hit_batch(s, 2, candidates=cand)
    div = hits.hit_batch(s, 2, candidates=cand, D=D, factor=30)
    assert (x[plain] < 5).all() and (x[div] < 5).sum() == 1
    assert not np.isin(div, audit).any()


def test_surrogate_spread():
    rng = np.random.default_rng(1)
    X = rng.random((80, 4))
    y = X[:, 0] * 3
    mu, sigma = hits.surrogate(X[:40], y[:40], X, trees=20)
    assert mu.shape == sigma.shape == (80,) and (sigma >= 0).all()
    assert np.corrcoef(mu, y)[0, 1] > 0.8
    mu2, _ = hits.surrogate(X[:40], y[:40], X, trees=20, mean=y)
    assert np.array_equal(mu2, y)


def test_top_share():
    y = np.arange(100, dtype=float)
    assert hits.top_share(y, np.arange(95, 100), 0.05) == (1.0, 1.0)
    found, score = hits.top_share(y, np.arange(0, 10), 0.05)
    assert found == 0.0 and score < 0
    found, _ = hits.top_share(y, np.arange(0, 5), 0.05, sign=-1.0)  # minimize: the smallest are the top
    assert found == 1.0


def test_kernel_gp_interpolates_and_shrinks_spread():
    rng = np.random.default_rng(2)
    x = rng.random((50, 3))
    K = np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / 0.1)
    y = np.sin(3 * x[:, 0])
    lab = np.arange(25)
    mu, sigma = hits.kernel_gp(K[np.ix_(lab, lab)], K[:, lab], y[lab], noise=1e-4)
    assert mu.shape == sigma.shape == (50,)
    assert np.allclose(mu[lab], y[lab], atol=1e-2) and sigma[lab].max() < sigma[25:].mean()


def test_tmd_rounds_under_a_goal_picks_by_score_never_the_excluded(mutag):
    """tmd-rounds' later round with ``goal`` and ``scores``: the labelled kept, the best-scored free members picked,
    an excluded member (an audit sample inside the pool) never, the certificate the exact ε of the union."""
    import tmdlib
    from tmdlib.select.rounds import DEFAULT_FIRST

    D = tmdlib.tmd_matrix(mutag, 4, "pascal")
    n = len(mutag)
    first = tmdlib.select_graphs(mutag, "tmd-rounds", k=10, seed=0, matrix=D, goal="maximize")
    assert first.info["first"] == hits.HIT_FIRST  # no SMILES: k-medoids on TMD
    assert tmdlib.select_graphs(mutag, "tmd-rounds", k=10, seed=0, matrix=D).info["first"] == DEFAULT_FIRST
    scores = np.arange(n, dtype=float)
    exclude = np.zeros(n, dtype=bool)
    exclude[-5:] = True  # the five best scored
    second = tmdlib.select_graphs(mutag, "tmd-rounds", k=20, seed=0, matrix=D, labelled=first.positions,
                                  goal="maximize", scores=scores, exclude=exclude, acquisition="greedy")
    new = np.setdiff1d(second.positions, first.positions)
    free = np.setdiff1d(np.flatnonzero(~exclude), first.positions)
    assert set(first.positions) <= set(second.positions) and second.k == 20
    assert set(new) == set(free[np.argsort(-scores[free])[:new.size]]) and not exclude[new].any()
    assert second.info["goal"] == "maximize" and second.info["strategy"] == "hits"
    assert second.epsilon_mean == pytest.approx(D[:, second.positions].min(axis=1).mean(), rel=1e-12)


def test_select_target_forms_and_checks():
    want = {"pKi": 1.0, "logS": -0.5}
    for form in (want, "pKi=1,logS=-0.5", "--pKi 1 --logS -0.5"):  # params.yaml / the CLI / what dvc.yaml passes
        assert hits.parse_target(form) == want
    assert [hits.parse_target(v) for v in (None, "", "none", " pKi ")] == [None, None, None, "pKi"]
    with pytest.raises(InputError, match="select.target: the weight of 'logS' must be a number"):
        hits.parse_target({"pKi": 1, "logS": "high"})
    with pytest.raises(InputError, match="non-zero weight"):
        hits.parse_target("pKi=0")
    names = ("pKi", "logS")
    assert hits.check_target("logS", names) == "logS" and hits.check_target(want, names) == want
    with pytest.raises(InputError, match="'pIC50' is not a target of this pool; its targets are pKi, logS"):
        hits.check_target("pIC50", names)
    with pytest.raises(InputError, match="'pIC50' is not a target"):
        hits.check_target({"pKi": 1, "pIC50": 1}, names)
    assert hits.check_target("y", ("y",)) is None  # one target: nothing to choose
    with pytest.raises(InputError, match="a desirability needs several targets"):
        hits.check_target({"y": 1}, ("y",))
    assert hits.check_goal("maximize", classification=False, targets=2, target=want) == "maximize"
    with pytest.raises(InputError, match="select.target"):
        hits.check_goal("maximize", classification=False, targets=2, target="none")


def test_desirability_is_the_weighted_sum_of_standardised_values():
    Y = np.array([[1.0, 10.0], [3.0, 30.0], [5.0, np.nan]])
    mean, scale = hits.target_stats(Y)
    assert np.allclose(mean, [3.0, 20.0]) and np.allclose(scale, [np.sqrt(8 / 3), 10.0])
    d = hits.desirability(Y, [1.0, -2.0], mean, scale)
    assert np.isclose(d[0], (1 - 3) / np.sqrt(8 / 3) - 2 * (10 - 20) / 10) and np.isnan(d[2])
    s = hits.desirability_spread(np.array([[1.0, 10.0]]), [1.0, -2.0], scale)
    assert np.isclose(s[0], np.sqrt(3 / 8 + 4))
    assert np.array_equal(hits.target_stats(np.array([[2.0], [np.nan]]))[1], [1.0])  # one value: no spread


def _counts(n, seed=3):
    return np.random.default_rng(seed).integers(0, 4, size=(n, 24)).astype(np.float64)


def test_hit_scores_follow_the_named_target_or_the_desirability():
    from scipy.stats import spearmanr

    X = _counts(160)
    a, b = X[:, :8].sum(axis=1), X[:, 8:16].sum(axis=1)
    lab = np.arange(60)
    Y = np.column_stack([a[lab], b[lab]])
    Y[::4, 1] = np.nan  # not every member measured for every target
    names = ("a", "b")
    rest = np.arange(60, 160)
    on_b = hits.hit_scores(X[lab], Y, X, "maximize", "greedy", names=names, target="b")["scores"]
    assert spearmanr(on_b[rest], b[rest])[0] > 0.7 and spearmanr(on_b[rest], b[rest])[0] > \
        abs(spearmanr(on_b[rest], a[rest])[0]) + 0.3
    low_b = hits.hit_scores(X[lab], Y, X, "minimize", "greedy", names=names, target="b")["scores"]
    assert spearmanr(low_b[rest], -b[rest])[0] > 0.7
    want = {"a": 1.0, "b": -1.0}
    mean, scale = hits.target_stats(Y)
    d_true = hits.desirability(np.column_stack([a, b]), [1.0, -1.0], mean, scale)
    for kind in ("greedy", "ucb", "ei"):
        got = hits.hit_scores(X[lab], Y, X, "maximize", kind, names=names, target=want)
        assert got["acquisition"] == kind and spearmanr(got["scores"][rest], d_true[rest])[0] > 0.6
    with pytest.raises(ValueError, match="no target named"):
        hits.hit_scores(X[lab], Y, X, "maximize", names=names)


def test_positive_goal_scores_are_the_positive_class_probability_and_skip_the_audit():
    X = _counts(200, seed=5)
    p_true = 1 / (1 + np.exp(-(X[:, :6].sum(axis=1) - 9.0)))
    y = (np.random.default_rng(6).random(200) < p_true).astype(float)
    lab = np.arange(80)
    got = hits.hit_scores(X[lab], y[lab], X, "positive", "greedy", seed=2)
    mu, _ = hits.surrogate(X[lab], y[lab], X, classes=True, seed=2)
    assert got["acquisition"] == "greedy" and np.allclose(got["scores"], mu) and ((mu >= 0) & (mu <= 1)).all()
    audit = np.argsort(-mu)[:5]  # the five most likely positives are the audit sample: never picked
    cand = np.setdiff1d(np.arange(200), audit)
    picks = hits.hit_batch(got["scores"], 20, labelled=lab, candidates=cand)
    free = np.setdiff1d(cand, lab)
    assert not np.isin(picks, audit).any() and set(picks) == set(free[np.argsort(-mu[free], kind="stable")[:20]])
    assert y[picks].mean() > y[free].mean()  # the picks follow the positive class
