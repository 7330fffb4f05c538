r"""The stability inequality behind every guarantee: ‖h(G_a) − h(G_b)‖ ≤ c · TMD^{L}_w(G_a, G_b).

c = lipschitz_bound(model, M=1)["c"] bounds the pre-sigmoid logit; L = layers + 1; w = Pascal weights.
The constructed cases pin down the exact conditions (see tmdlib.torch.gin's module docstring):

* η = 1 (self weight 1, neighbour weight 1) ⇔ Pascal weights: the bound is attained (ratio exactly 1);
* η > 1 breaks the plain product of norms (the factor κ = η^{L-1} restores it);
* biases inside φ (φ(0) ≠ 0) break it at TMD = 0; so does mean pooling.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tmdlib import Graph
from tmdlib.torch.gin import GIN, lipschitz_bound, predict_logits
from tmdlib.torch.pyg import to_pyg
from tmdlib.distance import tmd

torch.set_num_threads(1)

LAYERS = 3
DEPTH = LAYERS + 1
RTOL = 1e-9  # float64 check
PATH3 = np.array([[0, 1, 1, 2], [1, 0, 2, 1]])


def logits64(model, graphs):
    return predict_logits(model, [to_pyg(g, dtype=torch.float64) for g in graphs])


@pytest.fixture(scope="module")
def mutag_pairs(mutag):
    """30 random MUTAG pairs (plus 2 self pairs) and their TMD (depth 4, Pascal weights)."""
    rng = np.random.default_rng(2024)
    pairs = rng.choice(len(mutag), size=(30, 2))
    pairs = np.vstack([pairs, [[5, 5], [17, 17]]])
    D = np.array([tmd(mutag[int(a)], mutag[int(b)], depth=DEPTH, weights="pascal") for a, b in pairs])
    return pairs, D


def check_pairs(model, mutag, pairs, D) -> np.ndarray:
    """Assert the inequality on every pair; return the slack c·TMD / ‖Δh‖ of pairs with Δh ≠ 0."""
    c = lipschitz_bound(model, M=1)["c"]
    z = logits64(model, [mutag[g] for g in range(len(mutag))])
    dh = np.abs(z[pairs[:, 0]] - z[pairs[:, 1]])
    bad = dh > c * D * (1 + RTOL) + 1e-12
    assert not bad.any(), f"violations at pairs {pairs[bad].tolist()}: dh {dh[bad]}, c*TMD {c * D[bad]}"
    nz = dh > 1e-12
    return c * D[nz] / dh[nz]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("hidden", [16, 128])
def test_random_gins_on_mutag(mutag, mutag_pairs, seed, hidden):
    pairs, D = mutag_pairs
    torch.manual_seed(seed)
    model = GIN(mutag.num_features, hidden=hidden, layers=LAYERS).double()
    slack = check_pairs(model, mutag, pairs, D)
    assert slack.size > 20 and slack.min() >= 1.0
    print(f"hidden {hidden} seed {seed}: slack c*TMD/|dh| min {slack.min():.3g} median {np.median(slack):.3g}")


@pytest.mark.parametrize("eta", [0.5, 1.0])
def test_random_gins_eta_at_most_one(mutag, mutag_pairs, eta):
    pairs, D = mutag_pairs
    torch.manual_seed(11)
    check_pairs(GIN(mutag.num_features, hidden=32, layers=LAYERS, eta=eta).double(), mutag, pairs, D)


def test_trained_gin_on_mutag(mutag, mutag_pairs):
    """A trained model (its weights are far from random) obeys the bound too, with less slack."""
    from tmdlib.torch.gin import TrainConfig, train_gin

    data = [to_pyg(mutag[g], mutag.y[g]) for g in range(60)]
    model = train_gin(data, TrainConfig(hidden=32, epochs=15, seed=0, device="cpu")).model.double()
    pairs, D = mutag_pairs
    slack = check_pairs(model, mutag, pairs, D)
    print(f"trained: slack min {slack.min():.3g} median {np.median(slack):.3g}")


def test_node_subsampled_pairs(mutag):
    """Corollary 4.1's per-graph step: ‖h(G) − h(G[S])‖ ≤ c · (TN(G) − TN(G[S]))."""
    from tmdlib.select.nodes import induced_subdataset, subsample_nodes

    sub_ds = mutag.take(np.arange(40))
    res = subsample_nodes(sub_ds, fraction=0.5, method="tmd", depth=DEPTH)
    sub = induced_subdataset(sub_ds, res.mask)
    for seed in range(3):
        torch.manual_seed(seed)
        model = GIN(mutag.num_features, hidden=32, layers=LAYERS).double()
        c = lipschitz_bound(model, M=1)["c"]
        dh = np.abs(logits64(model, list(sub_ds)) - logits64(model, list(sub)))
        assert np.all(dh <= c * res.epsilon * (1 + RTOL) + 1e-12)
    # epsilon is the TMD of the pair, as Theorem 4.2 says
    for g in range(3):
        assert res.epsilon[g] == pytest.approx(tmd(sub_ds[g], sub[g], depth=DEPTH), rel=1e-9)


# ------------------------------------------------------------------------- constructed cases
def identity_gin(dim: int, eta: float = 1.0, pool: str = "add", bias: float | None = None) -> GIN:
    """W1 = W2 = I (ReLU acts as identity on non-negative inputs), W_out = e_1ᵀ: every Φ_ℓ = 1."""
    model = GIN(dim, hidden=dim, layers=LAYERS, eta=eta, pool=pool, bias=bias is not None).double()
    with torch.no_grad():
        for conv in model.convs:
            for m in conv.mlp:
                if isinstance(m, torch.nn.Linear):
                    m.weight.copy_(torch.eye(dim, dtype=torch.float64))
                    if m.bias is not None:
                        m.bias.fill_(bias)
        model.out.weight.zero_()
        model.out.weight[0, 0] = 1.0
        model.out.bias.zero_()
    return model


GA = Graph(np.array([[1.0], [1.0], [1.0]]), PATH3)
GB = Graph(np.array([[2.0], [1.0], [1.0]]), PATH3)


def test_bound_is_attained_for_eta_one_and_pascal_weights():
    """Δh = Σ_d binom(L-1, d) · (#walks of length d to the changed node) = TMD with Pascal weights."""
    model = identity_gin(1, eta=1.0)
    z = logits64(model, [GA, GB])
    d = tmd(GA, GB, depth=DEPTH, weights="pascal")
    lip = lipschitz_bound(model, M=1)
    assert lip["c"] == pytest.approx(1.0)
    assert abs(z[0] - z[1]) == pytest.approx(d, rel=1e-12)  # ratio exactly 1: c cannot be smaller
    assert d == pytest.approx(12.0)


def test_eta_above_one_needs_kappa():
    model = identity_gin(1, eta=2.0)
    z = logits64(model, [GA, GB])
    dh = abs(z[0] - z[1])
    d = tmd(GA, GB, depth=DEPTH, weights="pascal")
    lip = lipschitz_bound(model, M=1)
    prod = lip["c"] / lip["kappa"]
    assert dh > prod * d * 2  # the plain product of norms fails (47 vs 12)
    assert lip["kappa"] == pytest.approx(8.0) and dh <= lip["c"] * d
    # weights scaled by eta per level make kappa = 1 and the bound tight again
    w = [2.0 / 3.0, 2.0, 6.0]
    assert lipschitz_bound(model, M=1, weights=w)["kappa"] == pytest.approx(1.0)
    assert dh == pytest.approx(tmd(GA, GB, depth=DEPTH, weights=w), rel=1e-12)


def test_biases_break_the_bound_at_tmd_zero():
    """An isolated zero-feature node is a blank tree: TMD = 0, but φ(0) ≠ 0 changes a sum-pooled output."""
    gc = Graph(np.array([[1.0], [1.0], [1.0], [0.0]]), PATH3)
    assert tmd(GA, gc, depth=DEPTH) == 0.0
    biased = identity_gin(1, bias=0.1)
    z = logits64(biased, [GA, gc])
    assert abs(z[0] - z[1]) > 0.1
    assert not lipschitz_bound(biased)["valid"]
    unbiased = identity_gin(1)
    z = logits64(unbiased, [GA, gc])
    assert z[0] == z[1]


def test_mean_pooling_breaks_the_bound():
    gd = Graph(np.array([[1.0], [1.0], [1.0], [1e-3]]), PATH3)
    model = identity_gin(1, pool="mean")
    z = logits64(model, [GA, gd])
    d = tmd(GA, gd, depth=DEPTH)
    lip = lipschitz_bound(model, M=1)
    assert abs(z[0] - z[1]) > 100 * lip["c"] * d
    assert not lip["valid"]
