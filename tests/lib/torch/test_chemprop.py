"""tmdlib.torch.chemprop: chemprop's D-MPNN trains on a tiny set, honours weights, saves and loads a plain state
dict, rejects bad input (skipped when chemprop is not importable)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("chemprop")

from tmdlib import InputError  # noqa: E402
from tmdlib.torch.chemprop import ChempropRegressor  # noqa: E402

SMILES = ["CCO", "CCCO", "CCCCO", "c1ccccc1", "Cc1ccccc1", "CCc1ccccc1", "CCN", "CCCN", "C1CCCCC1", "CC1CCCCC1",
          "Oc1ccccc1", "c1ccncc1"]
Y = np.linspace(4.0, 9.0, len(SMILES))


@pytest.fixture(scope="module")
def fitted():
    return ChempropRegressor(epochs=2, hidden=32, seed=0, accelerator="cpu").fit(SMILES, Y)


def test_fit_predict_scaling_and_state_dict_round_trip(fitted, tmp_path):
    pred = fitted.predict(SMILES)
    assert pred.shape == (len(SMILES),) and np.isfinite(pred).all()
    assert fitted.y_mean_ == pytest.approx(Y.mean()) and fitted.y_scale_ == pytest.approx(Y.std())
    assert abs(pred.mean() - Y.mean()) < 2 * Y.std()  # unscaled back to the targets' units
    path = tmp_path / "chemprop.pt"
    fitted.save(path)
    import torch

    blob = torch.load(path, weights_only=True)  # plain tensors, numbers and strings only
    assert set(blob) == {"config", "y_mean", "y_scale", "n_dropped_nan", "state_dict"}
    back = ChempropRegressor.load(path, accelerator="cpu")
    assert np.allclose(back.predict(SMILES), pred, rtol=0, atol=1e-12)
    assert fitted.device_ == "cpu"  # where lightning trained it: the benchmark's `device` column


def test_cached_featurisation_trains_the_same_network():
    """The molecular graphs are featurised once (chemprop's dataset cache): the same seed gives the same network as
    chemprop featurising every batch anew."""
    from chemprop import data

    opts = dict(epochs=3, hidden=32, seed=3, accelerator="cpu")
    cached = ChempropRegressor(**opts).fit(SMILES, Y).predict(SMILES)
    setter = data.MoleculeDataset.cache.fset
    try:  # switch the cache off: every epoch featurises again
        data.MoleculeDataset.cache = property(data.MoleculeDataset.cache.fget, lambda self, v: setter(self, False))
        fresh = ChempropRegressor(**opts).fit(SMILES, Y).predict(SMILES)
    finally:
        data.MoleculeDataset.cache = property(data.MoleculeDataset.cache.fget, setter)
    assert np.array_equal(cached, fresh)


def test_weights_change_the_fit_and_nan_targets_are_dropped():
    opts = dict(epochs=2, hidden=32, seed=1, accelerator="cpu")
    w = np.ones(len(SMILES))
    w[:4] = 5.0
    plain = ChempropRegressor(**opts).fit(SMILES, Y).predict(SMILES)
    weighted = ChempropRegressor(**opts).fit(SMILES, Y, sample_weight=w).predict(SMILES)
    assert not np.allclose(plain, weighted, atol=1e-6)
    yy = Y.copy()
    yy[5] = np.nan
    model = ChempropRegressor(**opts).fit(SMILES, yy)
    assert model.n_dropped_nan_ == 1


def test_bad_input_is_one_clear_error(tmp_path):
    with pytest.raises(InputError, match="invalid SMILES"):
        ChempropRegressor(epochs=1).fit(["CCO", "xyz("], [1.0, 2.0])
    with pytest.raises(InputError, match="y must be"):
        ChempropRegressor(epochs=1).fit(["CCO", "CCN"], [1.0])
    with pytest.raises(InputError, match="sample_weight"):
        ChempropRegressor(epochs=1).fit(["CCO", "CCN"], [1.0, 2.0], sample_weight=[-1.0, 1.0])
    with pytest.raises(InputError, match="no row to fit"):
        ChempropRegressor(epochs=1).fit(["CCO", "CCN"], [np.nan, np.nan])
    with pytest.raises(InputError, match="not fitted"):
        ChempropRegressor().predict(["CCO"])
    bad = tmp_path / "bad.pt"
    import torch

    torch.save({"weights": torch.zeros(2)}, bad)
    with pytest.raises(InputError, match="not a chemprop state dict"):
        ChempropRegressor.load(bad)
