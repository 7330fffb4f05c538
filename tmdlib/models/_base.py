r"""The one interface every model implements (the adapter for scikit-learn estimators on fingerprints is
:class:`tmdlib.chem.estimator.EstimatorModel`).

A :class:`Model` is fitted on a labelled, weighted selection of a pool and gives **outputs in the task's own
units**, shape ``(m, D)``: logits (binary: 1 column, multi-task: T, multi-class: C) or predictions in the target's
units (regression: T columns) — the form :func:`tmdlib.metrics.score` scores and the predictions file writes.  What
it reads of the pool is an :class:`Inputs`: the pool's graphs (``inputs = "graphs"``) or its molecules' SMILES
(``inputs = "molecules"``), and the positions of the members concerned.

Its fitted state is plain data — a JSON-able ``config`` and a dict of numpy arrays (:meth:`Model.state`) — so a
saved model loads without unpickling anything (:meth:`Model.from_state`).  A model that is Lipschitz in TMD reports
its constant (:meth:`Model.certificate`); the evaluate stage then states Lemma 3.2 / Corollary 3.3 with it.  For any
other model the τ-weighted coreset loss is still measured; Lemma 3.2 holds for every model with *some* constant
:math:`c`, but none is known, so no :math:`c\,\varepsilon` is claimed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..datasets._task import TASK_TYPES
from .._errors import InputError
from ._head import TaskHead

__all__ = ["Inputs", "Model", "ALL_TASKS"]

#: Every task type (:data:`tmdlib.datasets._task.TASK_TYPES`, the one list): what a model fits unless it says.
ALL_TASKS = TASK_TYPES


@dataclass
class Inputs:
    r"""Pool members a model fits on or predicts for.

    Attributes
    ----------
    dataset : GraphDataset or None
        The pool's graphs (whole pool; graph models).
    smiles : sequence of str or None
        One SMILES per pool member (whole pool; molecule models).
    positions : ndarray of int64, shape (m,) or None
        The members concerned (None: all of them).
    node_subsets : list of ndarray or None
        Per member, the node subset to keep (node subsampling; graph models).
    features : ndarray, shape (n, d) or None
        Precomputed fingerprints of the whole pool (molecule models; saves recomputing them).
    """

    dataset: object = None
    smiles: object = None
    positions: np.ndarray | None = None
    node_subsets: list | None = None
    features: np.ndarray | None = None

    def __post_init__(self):
        if self.positions is not None:
            self.positions = np.asarray(self.positions, dtype=np.int64)

    def __len__(self) -> int:
        if self.positions is not None:
            return int(len(self.positions))
        if self.dataset is not None:
            return len(self.dataset)
        return len(self.smiles) if self.smiles is not None else 0

    def smiles_at(self) -> list:
        if self.smiles is None:
            raise InputError(None, "this model reads molecules (SMILES) and the pool has none: use a graph model "
                                   "(gin, certified-gin)")
        if self.positions is None:
            return list(self.smiles)
        return [self.smiles[int(p)] for p in self.positions]

    def subset(self, which) -> "Inputs":
        """The members ``which`` (positions into this selection) of this selection."""
        which = np.asarray(which, dtype=np.int64)
        pos = which if self.positions is None else self.positions[which]
        subsets = None if self.node_subsets is None else [self.node_subsets[int(i)] for i in which]
        return Inputs(self.dataset, self.smiles, pos, subsets, self.features)


class Model:
    """The interface of a registered model (:class:`tmdlib.models._registry.ModelSpec`).

    Subclasses set ``name``, ``inputs`` (``"graphs"`` or ``"molecules"``) and ``tasks``, and implement
    :meth:`fit`, :meth:`outputs`, :meth:`state` and :meth:`from_state`.  After :meth:`fit`, ``head`` is the
    :class:`~tmdlib.models._head.TaskHead` (task, loss, standardiser) the model was trained with.
    """

    name = "model"
    inputs = "graphs"
    tasks = ALL_TASKS
    head: TaskHead | None = None

    def fit(self, X: Inputs, y, sample_weight=None, task=None) -> "Model":
        """Fit on the members of ``X`` with labels ``y`` as stored (``(m,)`` or ``(m, T)``; NaN = missing where
        the task allows it) and non-negative weights ``sample_weight`` (``(m,)``, e.g. the coreset's τ)."""
        raise NotImplementedError

    def outputs(self, X: Inputs) -> np.ndarray:
        """Outputs in the task's own units, shape ``(m, D)`` (see the module doc)."""
        raise NotImplementedError

    def losses(self, X: Inputs, y) -> np.ndarray:
        """Per-member training losses ``(m,)`` (the head's loss; standardised units for regression)."""
        return self.head.losses(self.outputs(X), y)

    def certificate(self) -> dict | None:
        """The TMD-Lipschitz constant ``{"c": ..., ...}`` when the model has one, else None."""
        return None

    def describe(self) -> dict:
        """JSON-able facts for ``train.json`` (options, sizes)."""
        return {}

    def state(self) -> tuple[dict, dict]:
        """``(config, arrays)``: JSON-able config and numpy arrays that :meth:`from_state` rebuilds the fitted
        model from, without unpickling."""
        raise NotImplementedError

    @classmethod
    def from_state(cls, config: dict, arrays: dict) -> "Model":
        raise NotImplementedError

    # helpers for subclasses
    def _head_config(self) -> dict:
        return {"head": self.head.to_dict() if self.head is not None else None}

    def _restore_head(self, config: dict) -> None:
        self.head = TaskHead.from_dict(config.get("head"))


def _check_fit_inputs(y, sample_weight, m: int) -> np.ndarray:
    if len(y) != m:
        raise InputError(None, f"{len(y)} labels for {m} training members")
    w = np.ones(m) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (m,) or not np.isfinite(w).all() or (w < 0).any():
        raise InputError(None, f"sample_weight must be {m} finite numbers >= 0")
    return w
