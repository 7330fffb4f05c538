"""The model registry: one interface, registered once; a user's factory; the built-in models' round trips."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import RAW
from tmdlib import InputError
from tmdlib.datasets import TaskSpec
from tmdlib.models import (ENTRY_POINTS, MODELS, Inputs, Model, ModelSpec, get_model, model_names, register,
                           resolve_model, restore_model)

REG = TaskSpec("regression", targets=("y",))


def _ace(n: int = 120):
    import csv

    with open(RAW / "MoleculeACE" / "CHEMBL204_Ki.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))[:n]
    return [r["smiles"] for r in rows], np.array([float(r["y"]) for r in rows])


class MeanModel(Model):
    """A toy model: the τ-weighted mean of the labels for every member."""

    name, inputs, tasks = "toy-mean", "graphs", ("regression",)

    def fit(self, X, y, sample_weight=None, task=None):
        from tmdlib.models import task_head

        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        self.head = task_head(task or REG, y=y, weights=w)
        self.mean = float(np.average(np.asarray(y, dtype=float), weights=w))
        return self

    def outputs(self, X):
        return np.full((len(X), 1), self.mean)

    def state(self):
        return {"name": self.name, **self._head_config()}, {"mean": np.array(self.mean)}

    @classmethod
    def from_state(cls, config, arrays):
        m = cls()
        m.mean = float(arrays["mean"])
        m._restore_head(config)
        return m


def test_builtins_are_registered_and_import_nothing_heavy():
    import subprocess
    import sys

    assert {"gin", "certified-gin", "rf", "svm", "gbm", "lgbm", "chemprop"} <= set(model_names())
    code = "import sys, tmdlib.models as m; m.model_names(); print('torch' in sys.modules, 'rdkit' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]  # the names are known before any model's module is imported
    assert get_model("gin").lipschitz and get_model("certified-gin").lipschitz and not get_model("rf").lipschitz
    assert get_model("svm").inputs == "molecules" and get_model("gin").inputs == "graphs"
    code = "import sys, tmdlib.models; print('torch' in sys.modules, 'rdkit' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_the_registry_answers_what_the_stages_ask_of_a_model():
    """The train stage asks the registry, not the name: the graph defaults take the GIN's options (a recipe), the
    certified one is certified with a Lipschitz budget in its defaults; no molecule model takes a recipe."""
    from tmdlib.models import all_models
    from tmdlib.models._registry import auto_recipe, graph_default

    plain, certified = get_model(graph_default(False)), get_model(graph_default(True))
    assert plain.takes_recipe and certified.takes_recipe and certified.certified and not plain.certified
    assert certified.defaults.get("lipschitz_budget") and auto_recipe(certified.name) == "paper-b2"
    assert auto_recipe(plain.name) == "default" and auto_recipe("svm") == "default"
    assert auto_recipe("package.module:factory") == "default"
    assert not any(s.takes_recipe or s.certified for s in all_models() if s.inputs == "molecules")


def test_register_refuses_duplicates_and_unknown_kinds_and_names_the_known_ones():
    spec = ModelSpec("toy-dup", make=lambda o: MeanModel(), restore=MeanModel.from_state, tasks=("regression",))
    register(spec)
    try:
        with pytest.raises(ValueError, match="already registered"):
            register(spec)
        with pytest.raises(ValueError, match="inputs"):
            register(ModelSpec("toy-bad", make=lambda o: None, restore=None, inputs="pixels"))
        with pytest.raises(InputError, match="unknown model 'nope'.*svm.*lgbm.*gin"):
            get_model("nope")
        with pytest.raises(ValueError, match="already registered"):  # a built-in name, before its first lookup
            register(ModelSpec(next(iter(ENTRY_POINTS)), make=lambda o: None, restore=None))
        with pytest.raises(InputError, match="takes regression tasks, not binary"):
            spec.check_task("binary")
    finally:
        MODELS.pop("toy-dup")


def test_a_registered_toy_model_round_trips_through_its_state():
    register(ModelSpec("toy-mean", make=lambda o: MeanModel(), restore=MeanModel.from_state, tasks=("regression",)))
    try:
        m = get_model("toy-mean").build().fit(Inputs(positions=np.arange(4)), np.array([1.0, 2, 3, 4]),
                                              np.array([1.0, 1, 1, 5]), REG)
        assert m.outputs(Inputs(positions=np.arange(3)))[:, 0] == pytest.approx([3.25] * 3)
        config, arrays = m.state()
        back = restore_model(config, arrays)
        assert back.mean == m.mean and back.head.to_dict() == m.head.to_dict()
    finally:
        MODELS.pop("toy-mean")


def test_a_users_factory_trains_on_fingerprints_and_reloads():
    smiles, y = _ace()
    spec = resolve_model("sklearn.linear_model:Ridge")
    assert spec.inputs == "molecules" and spec.tasks == ("regression",) and not spec.lipschitz
    X = Inputs(smiles=smiles, positions=np.arange(100))
    m = spec.build().fit(X, y[:100], np.ones(100), REG)
    test = Inputs(smiles=smiles, positions=np.arange(100, 120))
    pred = m.outputs(test)[:, 0]
    assert pred.shape == (20,) and np.isfinite(pred).all() and np.std(pred) > 0
    config, arrays = m.state()
    assert config["kinds"] == ["skops"]  # a user's estimator: skops' format, trusted types only
    assert restore_model(config, arrays).outputs(test)[:, 0] == pytest.approx(pred)
    with pytest.raises(InputError, match="cannot import"):
        resolve_model("no_such_module_xyz:make")
    with pytest.raises(InputError, match="scikit-learn estimator"):
        resolve_model("builtins:dict")


def test_weights_reach_the_estimator():
    smiles, y = _ace(60)
    spec = resolve_model("sklearn.linear_model:Ridge")
    X = Inputs(smiles=smiles, positions=np.arange(60))
    w = np.ones(60)
    w[:30] = 0.0
    a = spec.build().fit(X, y, w, REG).outputs(X)
    b = spec.build().fit(Inputs(smiles=smiles, positions=np.arange(30, 60)), y[30:], None, REG).outputs(X)
    assert a == pytest.approx(b, rel=1e-4, abs=1e-4)  # weight 0 = the row left out (solver tolerance)


def test_refuses_a_class_outside_tmdlib_in_a_saved_state():
    from tmdlib.chem.estimator import EstimatorModel

    with pytest.raises(InputError, match="not part of tmdlib"):
        EstimatorModel.from_state({"kinds": ["os:system"], "name": "x", "head": None}, {"0.a": np.zeros(1)})


def test_gin_model_trains_predicts_and_reloads_with_its_certificate():
    pytest.importorskip("torch")
    from tmdlib.datasets import read_tu, to_dataset

    ds = to_dataset(read_tu(RAW / "MUTAG", "MUTAG").slice(0, 40))
    task = TaskSpec("binary")
    pos = np.arange(20)
    m = get_model("certified-gin").build({"epochs": 2, "hidden": 8, "seed": 0}).fit(
        Inputs(ds, positions=pos), ds.y[pos], np.ones(20), task)
    cert = m.certificate()
    assert cert["certified"] and cert["c"] == pytest.approx(0.002)
    out = m.outputs(Inputs(ds, positions=np.arange(20, 40)))
    assert out.shape == (20, 1)
    config, arrays = m.state()
    back = restore_model(config, arrays)
    assert back.outputs(Inputs(ds, positions=np.arange(20, 40))) == pytest.approx(out)
    assert back.certificate()["c"] == cert["c"]


def test_a_users_estimator_with_a_class_of_its_own_is_refused_at_load_time():
    """skops refuses types it does not trust: a saved estimator cannot run a stranger's code when loaded."""
    import skops.io as sio
    from sklearn.linear_model import Ridge

    from tmdlib.chem.estimator import EstimatorModel

    class Sneaky(Ridge):
        pass

    blob = np.frombuffer(sio.dumps(Sneaky().fit(np.eye(3), np.arange(3.0))), dtype=np.uint8)
    with pytest.raises(InputError, match="does not trust"):
        EstimatorModel.from_state({"kinds": ["skops"], "name": "mine:make", "head": None}, {"0.skops": blob})


def test_the_stages_that_build_models_depend_on_every_models_code():
    """dvc.yaml's train, evaluate and predict stages rerun when any registered model's file changes (a folder dep
    covers the files it holds, a new model's file included)."""
    import yaml

    from helpers import ROOT

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    files = {"tmdlib/models/_registry.py", "tmdlib/models/_base.py"} | {
        ref.split(":")[0].replace(".", "/") + ".py" for ref in ENTRY_POINTS.values()}
    for stage in ("train", "train_nodes", "evaluate", "evaluate_nodes", "predict"):
        deps = [d.rstrip("/") for d in stages[stage]["do"]["deps"]]
        missing = [f for f in sorted(files) if not any(f == d or f.startswith(d + "/") for d in deps)]
        assert not missing, f"{stage} does not depend on {missing}"


def test_default_model_by_task_and_label_count():
    from tmdlib.datasets import TaskSpec
    from tmdlib.models import default_model
    from tmdlib.models._registry import SVM_MAX_TRAIN

    reg, binary = TaskSpec(type="regression"), TaskSpec(type="binary")
    assert default_model(True, reg) == "svm"
    assert default_model(True, reg, n_train=SVM_MAX_TRAIN) == "svm"
    assert default_model(True, reg, n_train=SVM_MAX_TRAIN + 1) == "lgbm"  # the kernel matrix would not fit
    assert default_model(True, binary, n_train=50_000) == "rf"
    assert default_model(False, reg, certified=False) == "gin"
    assert default_model(False, binary) == "certified-gin"
