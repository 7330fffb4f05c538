"""The full-data reference of Corollary 3.3 is checked: one that learned nothing is flagged and not compared against."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers import RAW


@pytest.fixture(scope="module")
def small():
    from tmdlib.datasets import read_tu, to_dataset
    from tmdlib.torch.fit import task_head
    from tmdlib.torch.gin import GIN
    from tmdlib.torch.pyg import dataset_to_pyg
    from tmdlib.datasets import TaskSpec

    ds = to_dataset(read_tu(RAW / "MUTAG", "MUTAG")).take(np.arange(40))
    return ds, dataset_to_pyg(ds), ds.y, task_head(TaskSpec("binary")), GIN(ds.num_features, 8, 2)


def test_a_constant_model_is_degenerate(small):
    from tmdlib.torch.measure import constant_loss, reference_health

    ds, data, y, head, net = small
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        net.out.bias.fill_(0.3)  # predicts the same logit for every graph
    trivial = constant_loss(y, head)
    h = reference_health(net, data, y, head, loss=0.7, trivial=trivial, alive=[0, 0])
    assert h["degenerate"] and any("collapsed" in w for w in h["why"]) and any("constant" in w for w in h["why"])
    assert trivial == pytest.approx(-(y.mean() * np.log(y.mean()) + (1 - y.mean()) * np.log(1 - y.mean())))


def test_a_majority_class_model_with_a_low_loss_is_noted_not_flagged(small):
    from tmdlib.torch.measure import reference_health

    ds, data, y, head, net = small
    torch.manual_seed(0)
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0, 0.01)
        net.out.bias.fill_(5.0)  # every logit positive: one class, outputs still spread
    h = reference_health(net, data, y, head, loss=0.4, trivial=0.64, alive=[8, 8])
    assert not h["degenerate"] and h["predicted_classes"] == 1 and "same class" in h["notes"][0]


def test_not_below_the_constant_predictor_is_degenerate(small):
    from tmdlib.torch.measure import reference_health

    ds, data, y, head, net = small
    h = reference_health(net, data, y, head, loss=0.70, trivial=0.64, alive=[8, 8])
    assert h["degenerate"] and "not below the best constant predictor" in h["why"][-1]
