"""Every selection is label-agnostic: permuting, corrupting or dropping ``y`` changes nothing."""
from __future__ import annotations


import numpy as np
import pytest

from tmdlib.select import feature_distance_matrix, random_selection, wl_distance_matrix
from tmdlib.select import budget_to_k, kmedoids_coreset
from tmdlib.select.nodes import combined_subsample, subsample_nodes

try:  # the exact TMD engine lives in another module; include it when present
    from tmdlib.distance import tmd_matrix
except ImportError:
    tmd_matrix = None

N_GRAPHS = 40


@pytest.fixture(scope="module")
def base(mutag):
    ds = mutag.take(np.arange(N_GRAPHS))
    assert ds.y is not None and np.unique(ds.y).size == 2
    return ds


def variants(ds):
    rng = np.random.default_rng(0)
    y = ds.y
    out = {
        "original": y,
        "permuted": y[rng.permutation(y.size)],
        "flipped": 1.0 - y,
        "nan": np.full(y.size, np.nan),
        "random": rng.normal(size=y.size) * 1e6,
        "inf": np.where(rng.random(y.size) < 0.5, np.inf, -np.inf),
        "dropped": None,
    }
    return {name: ds.replace(y=v) for name, v in out.items()}


def selections(ds) -> dict[str, np.ndarray]:
    """Fingerprints of every selection procedure on ``ds``."""
    k = budget_to_k(len(ds), fraction=0.2)
    out = {}
    mats = {"feature": feature_distance_matrix(ds), "wl": wl_distance_matrix(ds, 3)}
    if tmd_matrix is not None:
        mats["tmd"] = tmd_matrix(ds)
    for name, d in mats.items():
        out[f"matrix-{name}"] = d
        for method in ("fasterpam", "swap"):
            cs = kmedoids_coreset(d, k, seed=1, method=method)
            out[f"coreset-{name}-{method}"] = np.concatenate([cs.medoids, cs.tau, cs.assignment, [cs.epsilon]])
    out["random"] = random_selection(len(ds), k, seed=1)
    for method in ("tmd", "random", "rw", "kcore"):
        for mode in ("fill", "paper"):
            ns = subsample_nodes(ds, 0.3, method, seed=4, bfs_mode=mode)
            out[f"nodes-{method}-{mode}"] = np.concatenate([ns.mask, ns.epsilon, ns.winner, ns.root])
    comb = combined_subsample(ds, feature_distance_matrix, k=k, node_fraction=0.5, order="graphs-first", seed=2)
    out["combined"] = np.concatenate([comb.coreset.medoids, comb.nodes.mask, [comb.epsilon_total]])
    return out


def test_selections_ignore_labels(base):
    ref = selections(base)
    assert {"coreset-feature-fasterpam", "coreset-wl-swap", "nodes-tmd-fill", "random"} <= set(ref)
    assert tmd_matrix is None or "coreset-tmd-fasterpam" in ref
    for name, ds in variants(base).items():
        got = selections(ds)
        assert got.keys() == ref.keys()
        for key in ref:
            assert np.array_equal(got[key], ref[key]), f"{key} changed when y is {name}"


def test_selections_do_depend_on_the_graphs(base):
    """Sanity check that the fingerprints are not trivially constant: other graphs give other results."""
    other = selections(base.take(np.arange(N_GRAPHS)[::-1]))
    ref = selections(base)
    assert not np.array_equal(other["coreset-wl-fasterpam"], ref["coreset-wl-fasterpam"])
