"""The rounds' policy (tmdlib.select.round_policy): what the select stage tells a label-reading round, as pure
functions of the pool's task, the ledger's columns and answers, and the labels."""
from __future__ import annotations

import numpy as np
import pytest

from tmdlib.datasets import TaskSpec
from tmdlib import InputError
from tmdlib.select.hits import HIT_FIRST
from tmdlib.select.round_policy import (RoundAsk, check_pool_goal, label_columns, reads_labels, round_ask,
                                        steer_round)
from tmdlib.select.rounds import DEFAULT_FIRST, DEFAULT_FIRST_CLASSES, DEFAULT_NEXT


def test_a_label_free_method_is_asked_nothing_and_a_goal_needs_tmd_rounds():
    assert round_ask("tmd", "model", None, task=TaskSpec("binary")) is None
    with pytest.raises(InputError, match="tmd-rounds"):
        round_ask("tmd", "maximize", None, task=TaskSpec("regression"))


def test_the_ledger_decides_the_goal_of_a_pool_stored_without_labels():
    """0/1 answers in one column: a binary pool (positive allowed, maximize refused); two columns need a target."""
    assert check_pool_goal("positive", None, "tmd-rounds", columns=["label"], answers=[0.0, 1.0, 1.0]) == (
        "positive", None)
    with pytest.raises(InputError, match="select.goal: positive"):
        check_pool_goal("maximize", None, "tmd-rounds", columns=["label"], answers=[0.0, 1.0])
    with pytest.raises(InputError, match="select.target"):
        check_pool_goal("maximize", None, "tmd-rounds", columns=["a", "b"], answers=None)
    assert check_pool_goal("maximize", "b", "tmd-rounds", columns=["a", "b"]) == ("maximize", "b")
    assert check_pool_goal("maximize", "b", "tmd-rounds") == ("maximize", None)  # nothing measured yet


def test_the_round_without_labels_is_the_strategy_and_the_first_picker():
    ask = round_ask("tmd-rounds", "model", None, task=TaskSpec("binary"))
    assert ask.classes and steer_round(ask) == {"strategy": DEFAULT_NEXT, "first": DEFAULT_FIRST_CLASSES}
    assert steer_round(RoundAsk(strategy="random")) == {"strategy": "random", "first": DEFAULT_FIRST}
    assert steer_round(RoundAsk(goal="maximize")) == {"strategy": DEFAULT_NEXT, "first": HIT_FIRST, "goal": "maximize"}


def test_which_labels_a_round_reads():
    assert label_columns(["graph_id", "label"], "model", None) == ["label"]
    assert label_columns(["graph_id", "a", "b"], "model", None) == []
    assert label_columns(["graph_id", "a", "b"], "maximize", "a") == ["a", "b"]
    assert reads_labels(RoundAsk(), ["label"], 2) and not reads_labels(RoundAsk(), ["label"], 1)
    assert not reads_labels(RoundAsk(exact=False), ["label"], 5) and not reads_labels(RoundAsk(), [], 5)


def test_labels_give_a_difficulty_per_member():
    smiles = ["CCO", "CCN", "CCC", "c1ccccc1", "CC(=O)O", "CCCl"]
    ask = RoundAsk()
    out = steer_round(ask, smiles, np.array([0, 2, 4]), np.array([[1.0], [2.5], [0.3]]), ["label"])
    assert out["difficulty"].shape == (len(smiles),) and out["difficulty_from"] == "forest"
    assert out["first"] == DEFAULT_FIRST  # real-valued answers: not classes
