"""What a TaskSpec answers for the pipeline: classification or not, output width, label encoding, loss and metric
defaults (the tables of tmdlib.guarantees.losses and tmdlib.metrics, asked through the task)."""
from __future__ import annotations

import numpy as np
import pytest

from tmdlib.datasets.task import TaskSpec
from tmdlib.guarantees.losses import LOSSES, TRIVIAL_PREDICTOR, trivial_loss
from tmdlib.metrics import METRICS, headline, score

SPECS = {"binary": TaskSpec("binary"), "multiclass": TaskSpec("multiclass", classes=(3, 5, 9)),
         "multitask": TaskSpec("multitask", ("a", "b")), "regression": TaskSpec("regression", ("pKi",))}


@pytest.mark.parametrize("kind, classification, width, single, indices, logits, loss, first", [
    ("binary", True, 1, True, False, "sigmoid", "bce", "accuracy"),
    ("multiclass", True, 3, True, True, "softmax", "ce", "accuracy"),
    ("multitask", True, 2, False, False, "sigmoid", "bce", "rocauc"),
    ("regression", False, 1, False, False, None, "huber", "rmse"),
])
def test_each_type_answers(kind, classification, width, single, indices, logits, loss, first):
    t = SPECS[kind]
    assert (t.is_classification, t.is_regression, t.standardises_targets) == (classification, not classification,
                                                                              not classification)
    assert (t.output_dim, t.single_label, t.class_indices, t.logits) == (width, single, indices, logits)
    assert (t.default_loss, t.losses, t.metrics) == (loss, LOSSES[kind], METRICS[kind])
    assert t.headline_metric() == first and t.allows_missing == (kind in ("multitask", "regression"))


def test_headline_on_ogb_sets():
    assert SPECS["binary"].headline_metric("ogbg-molbace") == "rocauc" == headline("binary", "OGBG-x")
    assert SPECS["regression"].headline_metric("ogbg-x") == "rmse"
    assert SPECS["multiclass"].headline_metric("ogbg-x") == "accuracy"


def test_decode_labels_maps_class_indices_back():
    y = np.array([[0.0], [np.nan], [2.0], [1.0]])
    assert np.array_equal(SPECS["multiclass"].decode_labels(y), [[3.0], [np.nan], [9.0], [5.0]], equal_nan=True)
    r = np.array([[1.5], [np.nan]])
    assert np.array_equal(SPECS["regression"].decode_labels(r), r, equal_nan=True)


def test_dispatch_tables_cover_every_type_and_keep_their_numbers():
    from tmdlib.datasets.task import TASK_TYPES

    assert set(TRIVIAL_PREDICTOR) == set(METRICS) == set(LOSSES) == set(TASK_TYPES)
    assert trivial_loss("multitask", "bce")[0] == pytest.approx(np.log(2))
    assert trivial_loss("multiclass", "ce", num_classes=1)[0] == pytest.approx(np.log(2))  # at least 2 classes
    s = score(np.array([[2.0, -1, 0], [0, 3, 1], [0, 0, 5]]), np.array([0, 1, 1]), "multiclass", 3)
    assert s["accuracy"] == pytest.approx(2 / 3) and s["n"] == 3
    with pytest.raises(ValueError, match="unknown task type"):
        score(np.zeros(3), np.zeros(3), "ranking")
