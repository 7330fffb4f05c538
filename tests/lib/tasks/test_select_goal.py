"""select.goal checked where the flow meets the pool's task (tasks.select.learn_options): one clear error naming what
to set; ``goal: model`` leaves a label-free method's options empty."""
import numpy as np
import pyarrow as pa
import pytest

from flows.config.select import SelectStageConfig
from tasks.select import learn_options
from tmdlib.datasets import TaskSpec
from tmdlib import InputError

EMPTY = pa.table({"graph_id": pa.array([], pa.int64()), "label": pa.array([], pa.float64())})


def _opts(goal, task, ledger=EMPTY, method="tmd-rounds"):
    return learn_options(SelectStageConfig(goal=goal), method, "none.parquet", np.arange(3), np.arange(3), ledger, True,
                         task)


def test_maximize_on_a_classification_pool_names_goal_positive():
    with pytest.raises(InputError, match="select.goal: positive"):
        _opts("maximize", TaskSpec("binary"))


def test_maximize_on_a_multi_target_pool_names_select_target():
    with pytest.raises(InputError, match="select.target"):
        _opts("maximize", TaskSpec("regression", targets=("a", "b")))
    ledger = pa.table({"graph_id": pa.array([1], pa.int64()), "a": pa.array([0.3]), "b": pa.array([2.0])})
    with pytest.raises(InputError, match="select.target"):  # a pool stored without labels: the ledger says
        _opts("maximize", None, ledger)


def test_goal_needs_tmd_rounds_and_model_is_unchanged():
    with pytest.raises(InputError, match="tmd-rounds"):
        _opts("maximize", TaskSpec("regression"), method="tmd")
    assert _opts("model", TaskSpec("binary"), method="tmd") == {}
