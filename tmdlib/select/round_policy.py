"""What a label-reading selection (``tmd-rounds``) is told each round, decided from what the pool and its label ledger
say: the goal and target checked against the pool's task, the later-round strategy and the first round's picker,
and -- once at least two pool members are labelled -- a difficulty per member (or, hunting hits, an acquisition
score per member) on ECFP4 counts.  Pure functions: the select stage's task reads the ledger and the SMILES, calls
them, and passes what they return to :func:`tmdlib.select.select_graphs`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = ["method_plan", "RoundAsk", "check_pool_goal", "round_ask", "label_columns", "reads_labels", "steer_round"]


def method_plan(pool, method: str, production: bool, **plan_options):
    """``(method, plan)``: ``auto`` resolved (:func:`tmdlib.select.rounds.default_method`) once the engine is known --
    a pool the scalable engine takes keeps the paper's coreset -- and the plan of the method that runs
    (:func:`tmdlib.select._plan.plan_selection` with ``plan_options``)."""
    from ._plan import plan_selection
    from .rounds import default_method

    plan = plan_selection(pool, "tmd" if method == "auto" else method, **plan_options)
    chosen = default_method(method, production, plan.engine == "scalable")
    return chosen, (plan if chosen == plan.method else plan_selection(pool, chosen, **plan_options))


@dataclass(frozen=True)
class RoundAsk:
    """What the select stage asks of a label-reading round.

    Attributes
    ----------
    strategy : str
        The later-round strategy (``select.next``): a name of :data:`tmdlib.select.rounds.NEXT_STRATEGIES` or
        ``auto`` (:data:`tmdlib.select.rounds.DEFAULT_NEXT`).
    goal : str
        ``model`` or a hit-hunting goal (:data:`tmdlib.select.hits.GOALS`), checked (:func:`check_pool_goal`).
    target : None, str or dict of str to float
        The target the goal is about on a multi-target pool, or a desirability (checked).
    classes : bool
        The labels are known to be classes before any answer (the pool's task says so).
    seed : int
    exact : bool
        The exact engine runs (a matrix): the scalable engine gets no difficulty (the coreset grows).
    difficulty, acquisition : str
        The difficulty estimate (:data:`tmdlib.select.rounds.DIFFICULTIES`) and the hit-hunting acquisition
        (:data:`tmdlib.select.hits.ACQUISITIONS`); ``auto``: the measured defaults.
    """

    strategy: str = "auto"
    goal: str = "model"
    target: Any = None
    classes: bool = False
    seed: int = 0
    exact: bool = True
    difficulty: str = "auto"
    acquisition: str = "auto"


def check_pool_goal(goal: str, target, method: str, *, task=None, columns: Sequence[str] = (), answers=None):
    """``(goal, target)`` of ``select.goal`` / ``select.target`` checked against the pool: its ``task`` when it is
    decided, else (a pool stored without labels) the label ``columns`` of a non-empty ledger and, with one column,
    its ``answers`` (0/1 answers: a binary pool).  Nothing labelled yet: round one is label-free, no target.  A goal
    other than ``model`` needs ``method`` ``tmd-rounds``.

    Raises
    ------
    tmdlib._errors.InputError
        One line naming the setting to change (:func:`tmdlib.select.hits.check_goal`,
        :func:`tmdlib.select.hits.check_target`).
    """
    from .._errors import InputError
    from .hits import check_goal, check_target

    if task is not None and getattr(task, "decided", True):
        goal = check_goal(goal, classification=bool(task.is_classification), targets=int(task.num_targets),
                          target=target)
        target = check_target(target, task.targets)
    elif len(columns):  # a pool stored without labels: the ledger's columns and answers say
        cols = list(columns)
        y = np.asarray(answers) if len(cols) == 1 and answers is not None else np.zeros(0)
        goal = check_goal(goal, classification=bool(len(cols) == 1 and np.isin(y, (0.0, 1.0)).all()),
                          targets=len(cols), target=target)
        target = check_target(target, cols) if len(cols) > 1 else None
    else:
        goal = check_goal(goal, classification=False) if goal != "positive" else goal
        target = None  # nothing measured yet: round one is label-free
    if goal not in (None, "", "model") and method != "tmd-rounds":
        raise InputError(None, f"select.goal: {goal} needs select.method tmd-rounds (auto in production), "
                               f"not {method!r}")
    return goal, target


def round_ask(method: str, goal: str, target, next_strategy: str = "auto", *, task=None,
              columns: Sequence[str] = (), answers=None, seed: int = 0, exact: bool = True) -> RoundAsk | None:
    """What a label-reading ``method`` is asked this round (None: the method is label-free, it is asked nothing).
    The goal and target are checked first, whatever the method (:func:`check_pool_goal`); the labels are known to be
    classes when the pool's ``task`` says so (not a pool stored without labels)."""
    from . import get_method

    goal, target = check_pool_goal(goal, target, method, task=task, columns=columns, answers=answers)
    if get_method(method).label_free:
        return None
    classes = bool(task is not None and task.is_classification and getattr(task, "source", "") != "unlabelled")
    return RoundAsk(strategy=next_strategy, goal=goal, target=target, classes=classes, seed=int(seed),
                    exact=bool(exact))


def label_columns(columns: Sequence[str], goal: str, target) -> list[str]:
    """The ledger's columns a round reads: ``label`` (one target), or -- hunting hits on a multi-target ledger with
    a ``target`` -- every label column; none otherwise (a multi-target ledger gives no difficulty)."""
    from .hits import hunting

    if "label" in columns:
        return ["label"]
    return [c for c in columns if c != "graph_id"] if hunting(goal) and target is not None else []


def reads_labels(ask: RoundAsk, columns: Sequence[str], labelled: int) -> bool:
    """Whether the round steers by the labels: label ``columns`` to read, at least 2 ``labelled`` pool members and the
    exact engine (else the method grows the coreset, saying so in the selection's info)."""
    return bool(len(columns)) and int(labelled) >= 2 and bool(ask.exact)


def steer_round(ask: RoundAsk, smiles=None, labelled=None, Y=None, names: Sequence[str] = ()) -> dict:
    r"""The options :func:`tmdlib.select.select_graphs` gets for a label-reading method's round.

    Always the later-round ``strategy`` and the ``first`` round's picker (the measured default for the goal and the
    labels' kind: :data:`tmdlib.select.hits.HIT_FIRST` under a hit-hunting goal, else
    :func:`tmdlib.select.rounds.default_first`), and the ``goal`` when it hunts hits.  With the pool's ``smiles``,
    the ``labelled`` members and their labels ``Y`` (when :func:`reads_labels`): on ECFP4 counts :math:`X`, a
    ``difficulty`` per member (:func:`tmdlib.select.rounds.estimate_difficulty` on the first column; 0/1 answers are
    classes) or, hunting hits, an acquisition score per member (:func:`tmdlib.select.hits.hit_scores`: one column's
    or, on several, ``target``'s).

    Parameters
    ----------
    ask : RoundAsk
    smiles : sequence of str, length n, or None
        The training pool's molecules (None: a pool without SMILES, no difficulty).
    labelled : ndarray of int, shape (m,)
        Positions in the pool of the members with labels.
    Y : ndarray of float64, shape (m, t)
        Their labels, one column per name of ``names``.
    names : sequence of str, length t

    Returns
    -------
    dict
        ``strategy``, ``first`` and ``goal`` / ``target`` / the hit scores' keys, or ``difficulty`` (shape (n,)) and
        ``difficulty_from``.
    """
    from .hits import HIT_FIRST, hunting
    from .rounds import DEFAULT_NEXT, default_first, difficulty_name, estimate_difficulty

    strategy = DEFAULT_NEXT if ask.strategy in (None, "", "auto") else str(ask.strategy)
    goal, target = ask.goal, ask.target
    first = HIT_FIRST if hunting(goal) else default_first(ask.classes)
    base = {"strategy": strategy, "first": first, **({"goal": goal} if hunting(goal) else {})}
    if smiles is None or Y is None or labelled is None or not reads_labels(ask, names, len(labelled)):
        return base
    from ..chem._fingerprints import ecfp4_counts

    X = ecfp4_counts(smiles)
    lab = np.asarray(labelled)
    Y = np.asarray(Y, dtype=np.float64)
    y = Y[:, 0]
    how = difficulty_name(ask.difficulty)
    classes = ask.classes or bool(np.isin(y, (0.0, 1.0)).all())  # 0/1 answers: a binary task (the forest's spread)
    if hunting(goal):
        from .hits import hit_scores

        return {"strategy": strategy, "goal": goal, "first": first, **({"target": target} if target else {}),
                **hit_scores(X[lab], Y if len(names) > 1 else y, X, goal, ask.acquisition, seed=ask.seed,
                             names=list(names), target=target)}
    u = estimate_difficulty(how, X[lab], y, X, classes=classes, seed=ask.seed)
    return {"strategy": strategy, "first": default_first(classes), "difficulty": u, "difficulty_from": how}
