"""A model added in one file with one register call runs through the train and evaluate stages (issue 51)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import make_inputs
from tmdlib.models import MODELS, Inputs, Model, ModelSpec, register, task_head


class NearestMeanModel(Model):
    """A toy graph model: predicts from the number of nodes (the logit of the labelled mean per size bucket)."""

    name, inputs, tasks = "toy-size", "graphs", ("binary",)

    def fit(self, X, y, sample_weight=None, task=None):
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        self.head = task_head(task, y=y, weights=w)
        n = X.dataset.nodes_per_graph[X.positions]
        big = n > np.median(n)
        p = [np.clip(np.average(np.asarray(y)[m], weights=w[m]) if m.any() else 0.5, 0.05, 0.95) for m in (~big, big)]
        self.split, self.logits = float(np.median(n)), np.log(np.array(p) / (1 - np.array(p)))
        return self

    def outputs(self, X):
        n = X.dataset.nodes_per_graph[X.positions]
        return self.logits[(n > self.split).astype(int)][:, None]

    def state(self):
        return ({"name": self.name, "split": self.split, **self._head_config()}, {"logits": self.logits})

    @classmethod
    def from_state(cls, config, arrays):
        m = cls()
        m.split, m.logits = float(config["split"]), np.asarray(arrays["logits"])
        m._restore_head(config)
        return m


@pytest.fixture()
def toy():
    register(ModelSpec("toy-size", make=lambda options: NearestMeanModel(), restore=NearestMeanModel.from_state,
                       inputs="graphs", tasks=("binary",), summary="toy"))
    yield
    MODELS.pop("toy-size")


def test_a_registered_toy_model_runs_the_train_and_evaluate_stages(tmp_path, toy):
    from flows.evaluate import evaluate_flow
    from flows.train import train_flow
    from flows.config.evaluate import EvaluateStageConfig
    from flows.config.train import TrainStageConfig

    inp = make_inputs(tmp_path / "in", n_train=60, n_test=40)
    out = tmp_path / "out"
    info = train_flow(inp["graphs"], inp["selection"], inp["labels"], str(out / "model.pt"), str(out / "train.json"),
                      cfg=TrainStageConfig(model="toy-size", log_mlflow=False))
    assert info["model_name"] == "toy-size" and info["lipschitz"]["c"] is None
    saved = json.loads((out / "train.json").read_text())
    assert saved["model_state"]["name"] == "toy-size"
    m = evaluate_flow(inp["graphs"], inp["selection"], str(out / "model.pt"), str(out / "train.json"),
                      str(out / "m.json"), str(out / "p.png"), matrix=inp["matrix"],
                      cfg=EvaluateStageConfig(log_mlflow=False))
    assert m["test"]["metric"] == "accuracy" and 0 <= m["test"]["coreset_model"] <= 1 and m["test"]["n"] == 40
    assert m["bound"]["gap_observed"] >= 0 and m["bound"]["c_epsilon"] is None  # measured, nothing certified
    assert "no Lipschitz constant" in m["bound"]["lipschitz_note"]


def test_an_unknown_model_is_refused_before_any_file_is_read(tmp_path):
    from flows.train import train_flow
    from tmdlib import InputError
    from flows.config.train import TrainStageConfig

    with pytest.raises(InputError, match="unknown model 'nope'"):
        train_flow(str(tmp_path / "missing.parquet"), "s.json", "l.csv", str(tmp_path / "m.pt"),
                   str(tmp_path / "t.json"), cfg=TrainStageConfig(model="nope", log_mlflow=False))


def test_tmdsub_models_lists_every_registered_model():
    """`tmdsub models` prints the registry: one line per model (lgbm included), name first."""
    from helpers import run_cli
    from tmdlib.models import model_names

    res = run_cli("models")
    assert res.returncode == 0, res.stdout + res.stderr
    listed = [line.split()[0] for line in res.stdout.splitlines() if line.strip()]
    assert listed == list(model_names()) and "lgbm" in listed
