"""Every registered model keeps the model contract (tmdlib.models._base.Model), read off the registry (no list of names
here): fit with sample weights, outputs in the task's units, a state that round-trips without pickle, a clear refusal
of a task type it does not take, and one output per input for 1, 2 and 257 molecules.  Each model is built with its
registered ``quick`` options (a few epochs, few trees)."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest

from helpers import RAW
from tmdlib.datasets import TaskSpec
from tmdlib import InputError
from tmdlib.models import get_model, model_names, restore_model
from tmdlib.models._registry import ALL_TASKS

REG = TaskSpec("regression", targets=("y",))
BIN = TaskSpec("binary")
N_POOL, N_TRAIN = 300, 40
#: A task of each type and labels of that type for n members (the refusal check fits them).
OTHER_TASKS = {"binary": (BIN, lambda n: np.arange(n) % 2),
               "multiclass": (TaskSpec("multiclass", classes=(0, 1, 2)), lambda n: np.arange(n) % 3),
               "multitask": (TaskSpec("multitask", targets=("t1", "t2")),
                             lambda n: np.stack([np.arange(n) % 2] * 2, 1)),
               "regression": (REG, lambda n: np.linspace(4.0, 8.0, n))}


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """300 MoleculeACE molecules (CHEMBL204, pKi) as graphs and SMILES, and their labels."""
    from tmdlib.datasets import read_smiles_csv, to_dataset

    src = (RAW / "MoleculeACE" / "CHEMBL204_Ki.csv").read_text().splitlines()
    path = tmp_path_factory.mktemp("pool") / "pool.csv"
    path.write_text("\n".join(src[:N_POOL + 1]) + "\n")
    table = read_smiles_csv(path, label_column="y")
    ds = to_dataset(table)
    return ds, table.column("smiles").to_pylist(), np.asarray(ds.y, dtype=np.float64).reshape(len(ds))


def _inputs(pool, positions):
    from tmdlib.models import Inputs

    ds, smiles, _ = pool
    return Inputs(ds, smiles, np.asarray(positions, dtype=np.int64))


def _fit(name, pool, weights=None, task=REG, y=None):
    spec = get_model(name)
    train = np.arange(N_TRAIN)
    y = pool[2][train] if y is None else y
    return spec.build({**spec.quick, **({"seed": 0} if spec.seeded else {})}).fit(_inputs(pool, train), y, weights,
                                                                                  task)


@pytest.fixture(scope="module")
def fitted(pool):
    """Each model fitted once on the first 40 molecules, τ-like weights (1, 2, 3, 0 in turn)."""
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = _fit(name, pool, np.tile([1.0, 2.0, 3.0, 0.0], N_TRAIN // 4))
        return cache[name]

    return get


def _available(name):
    """Skip a model whose optional package is missing (chemprop, lightgbm, torch)."""
    from tmdlib.models import ENTRY_POINTS

    module = ENTRY_POINTS.get(name, "").split(":")[0]
    needs = {"tmdlib.torch.chemprop": "chemprop", "tmdlib.chem.lgbm": "lightgbm"}.get(module)
    if module.startswith("tmdlib.torch"):
        pytest.importorskip("torch")
    if needs:
        pytest.importorskip(needs)


@pytest.fixture(params=model_names())
def name(request):
    _available(request.param)
    return request.param


def test_regression_outputs_are_in_the_labels_units_and_weights_reach_the_model(name, pool, fitted):
    if "regression" not in get_model(name).tasks:
        pytest.skip(f"{name} takes no regression task")
    y = pool[2]
    test = np.arange(N_TRAIN, N_TRAIN + 60)
    out = fitted(name).outputs(_inputs(pool, test))
    assert out.shape == (60, 1) and out.dtype.kind == "f" and np.isfinite(out).all()
    lo, hi, sd = y[:N_TRAIN].min(), y[:N_TRAIN].max(), y[:N_TRAIN].std()
    assert lo - 2 * sd <= out.min() and out.max() <= hi + 2 * sd, "outputs not in the labels' units"
    assert abs(out.mean() - y[:N_TRAIN].mean()) < 1.5 * sd
    plain = _fit(name, pool).outputs(_inputs(pool, test))
    assert not np.allclose(plain, out, rtol=0, atol=1e-9), "the sample weights changed nothing"


def test_state_round_trips_without_pickle(name, pool, fitted):
    model = fitted(name)
    config, arrays = model.state()
    config = json.loads(json.dumps(config))  # plain JSON
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    buf.seek(0)
    with np.load(buf, allow_pickle=False) as z:  # plain arrays: no Python object inside
        arrays = {k: z[k] for k in z.files}
    back = restore_model(config, arrays)
    X = _inputs(pool, np.arange(N_TRAIN, N_POOL))
    assert back.outputs(X) == pytest.approx(model.outputs(X), rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("k", [1, 2, 257])
def test_as_many_outputs_as_inputs(name, pool, fitted, k):
    out = fitted(name).outputs(_inputs(pool, np.arange(N_POOL - k, N_POOL)))
    assert out.shape == (k, 1) and np.isfinite(out).all()


def test_binary_outputs_are_one_logit_per_member(name, pool):
    if "binary" not in get_model(name).tasks:
        pytest.skip(f"{name} takes no binary task")
    y = (pool[2][:N_TRAIN] > np.median(pool[2][:N_TRAIN])).astype(np.float64)
    out = _fit(name, pool, task=BIN, y=y).outputs(_inputs(pool, np.arange(N_TRAIN, N_TRAIN + 20)))
    assert out.shape == (20, 1) and np.isfinite(out).all()


def test_a_task_type_it_does_not_take_is_refused_clearly(name, pool):
    spec = get_model(name)
    refused = [t for t in ALL_TASKS if t not in spec.tasks]
    if not refused:
        pytest.skip(f"{name} takes every task type")
    for kind in refused:
        task, labels = OTHER_TASKS[kind]
        with pytest.raises(InputError, match=name):
            _fit(name, pool, task=task, y=labels(N_TRAIN))
        with pytest.raises(InputError, match=f"{name}.*{kind}"):
            spec.check_task(kind)
