"""What a TaskSpec answers for the pipeline: classification or not, output width, label encoding, loss and metric
defaults (the tables of tmdlib.guarantees.losses and tmdlib.metrics, asked through the task)."""
from __future__ import annotations

import numpy as np
import pytest

from tmdlib.datasets import TaskSpec
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
    from tmdlib.datasets import TASK_TYPES

    assert set(TRIVIAL_PREDICTOR) == set(METRICS) == set(LOSSES) == set(TASK_TYPES)
    assert trivial_loss("multitask", "bce")[0] == pytest.approx(np.log(2))
    assert trivial_loss("multiclass", "ce", num_classes=1)[0] == pytest.approx(np.log(2))  # at least 2 classes
    s = score(np.array([[2.0, -1, 0], [0, 3, 1], [0, 0, 5]]), np.array([0, 1, 1]), "multiclass", 3)
    assert s["accuracy"] == pytest.approx(2 / 3) and s["n"] == 3
    with pytest.raises(ValueError, match="unknown task type"):
        score(np.zeros(3), np.zeros(3), "ranking")


@pytest.mark.parametrize("kind, estimator, conformal, constant, control, names", [
    ("binary", "classification", "sets", "the majority class", "root Brier score", ("class",)),
    ("multiclass", "classification", "sets", "the majority class", None, ("class",)),
    ("multitask", "classification", None, "the majority class", None, ("class",)),
    ("regression", "regression", "intervals", "the mean", "rmse", ("pKi",)),
])
def test_each_type_says_what_it_does(kind, estimator, conformal, constant, control, names):
    """The behaviour callers ask of the spec instead of branching on its type (issue 69)."""
    from tmdlib.datasets import TASK_TYPES
    from tmdlib.datasets._task import CONFORMAL, CONSTANT_PREDICTOR, CONTROL_ERROR, ESTIMATOR_KIND

    assert all(set(table) == set(TASK_TYPES) for table in (CONFORMAL, CONSTANT_PREDICTOR, CONTROL_ERROR,
                                                            ESTIMATOR_KIND))
    t = SPECS[kind]
    assert (t.estimator_kind, t.conformal, t.constant_predictor, t.control_error) == (estimator, conformal, constant,
                                                                                      control)
    assert t.prediction_names == names and t.column_suffix(0) == ""
    assert TaskSpec("regression", ("a", "b")).control_error is None
    assert TaskSpec("regression", ("a", "b")).column_suffix(1) == "_b"


def test_outputs_read_as_classes_probabilities_and_scores():
    z = np.array([[2.0], [-1.0]])
    b = SPECS["binary"]
    assert b.predicted_classes(z).tolist() == [1, 0]
    assert np.allclose(b.probabilities(z)[:, 1], 1 / (1 + np.exp(-z[:, 0])))
    assert np.allclose(b.point_scores(z), b.probabilities(z)[:, 1])
    assert np.allclose(b.probability_logits(b.probabilities(z)), z)
    assert b.class_values.tolist() == [0.0, 1.0]
    m = SPECS["multiclass"]
    zm = np.array([[0.0, 3.0, 1.0]])
    assert m.predicted_classes(zm).tolist() == [1] and m.class_values.tolist() == [3.0, 5.0, 9.0]
    assert np.allclose(m.probability_logits(m.probabilities(zm)), np.log(m.probabilities(zm)))
    r = SPECS["regression"]
    assert r.predicted_classes(np.ones((2, 1))) is None and r.point_scores(np.array([[1.5], [2.0]])).tolist() == [1.5, 2.0]
    assert SPECS["multitask"].predicted_classes(np.ones((2, 2))) is None


def test_target_moments_and_trained_labels():
    y = np.array([1.0, 3.0, np.nan])
    mean, std = SPECS["regression"].target_moments(y, [1.0, 1.0, 5.0])
    assert mean.tolist() == [2.0] and std.tolist() == [1.0]
    assert [a.tolist() for a in SPECS["binary"].target_moments(y)] == [[0.0], [1.0]]
    assert SPECS["binary"].training_labels(np.array([[1.0], [0.0]])).shape == (2,)
    assert SPECS["regression"].training_labels(np.array([1.0, 2.0])).shape == (2, 1)
    assert TaskSpec("binary", classes=(0, 1)).classes == ()  # only multi-class labels are class indices


def test_constant_outputs_per_type():
    w = np.ones(4)
    z, what = SPECS["regression"].constant_outputs(np.array([1.0, 2.0, 3.0, np.nan]), w, 2)
    assert z.tolist() == [[2.0], [2.0]] and "mean" in what
    z, what = SPECS["binary"].constant_outputs(np.array([1.0, 1.0, 1.0, 0.0]), w, 1)
    assert z[0, 0] == pytest.approx(np.log(3)) and "positive rate" in what
    z, _ = SPECS["multiclass"].constant_outputs(np.array([0.0, 2.0, 2.0, 2.0]), w, 1)
    assert z.shape == (1, 3) and int(z.argmax()) == 2
