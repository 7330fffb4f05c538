r"""How a model's outputs meet a task's labels: the loss, its Lipschitz constant :math:`M`, target standardisation.

Every registered model (:mod:`tmdlib.models._registry`) is trained and scored through a :class:`TaskHead`: outputs are
logits (classification) or standardised values (regression) while training, and
:meth:`TaskHead.to_task_units` turns them into the task's own units (logits, or de-standardised predictions), the
form :func:`tmdlib.metrics.score` and the predictions file take.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..datasets._task import BINARY, TaskSpec, label_matrix
from ..guarantees.losses import Standardizer, check_loss, loss_lipschitz, per_graph_losses

__all__ = ["TaskHead", "task_head", "training_labels"]


@dataclass
class TaskHead:
    r"""How a model's outputs meet a task's labels.

    Attributes
    ----------
    task : TaskSpec
    loss : str
        ``bce``, ``ce``, ``huber``, ``l1`` or ``mse``.
    delta : float
        Huber's δ (standardised units).
    standardizer : Standardizer
        Regression: :math:`(y - \mu)/\sigma` of each target, fitted on the labelled coreset; identity otherwise.
    M : float or None
        The loss's Lipschitz constant in the output (None: uncertified, MSE).
    why : str
        Where ``M`` comes from (one sentence).
    """

    task: TaskSpec = field(default_factory=lambda: BINARY)
    loss: str = "bce"
    delta: float = 1.0
    standardizer: Standardizer = field(default_factory=Standardizer.identity)
    M: float | None = 1.0
    why: str = ""

    @property
    def certified_loss(self) -> bool:
        """Whether the loss has a Lipschitz constant (every loss but MSE)."""
        return self.M is not None

    def encode(self, y) -> np.ndarray:
        """Labels as the model is trained on them: standardised for regression (every other task's standardiser is
        the identity), shape ``(n, T)``."""
        return self.standardizer.transform(label_matrix(y))

    def to_task_units(self, z) -> np.ndarray:
        """Raw model outputs ``(n, D)`` (logits; standardised regression values) in the task's own units."""
        return self.standardizer.inverse(np.asarray(z, dtype=np.float64).reshape(len(z), -1))

    def from_task_units(self, outputs) -> np.ndarray:
        """The inverse of :meth:`to_task_units` (outputs in task units back to the trained scale)."""
        return self.standardizer.transform(np.asarray(outputs, dtype=np.float64).reshape(len(outputs), -1))

    def losses(self, outputs, y) -> np.ndarray:
        """Per-graph training losses, shape ``(n,)``, of outputs in task units against labels as stored."""
        return per_graph_losses(self.from_task_units(outputs), self.encode(y), self.loss, self.delta)

    def to_dict(self) -> dict:
        return {"task": self.task.to_dict(), "loss": self.loss, "huber_delta": self.delta,
                "targets": self.standardizer.to_dict() if self.standardizer.scales else None,
                "M": self.M, "loss_lipschitz": self.why}

    @classmethod
    def from_dict(cls, d: dict | None) -> "TaskHead":
        """From :meth:`to_dict` (``train.json``'s ``task_head``); a missing entry is the binary BCE head."""
        if not d:
            return task_head(BINARY)
        task = TaskSpec.from_dict(d.get("task") or {})
        return task_head(task, d.get("loss"), float(d.get("huber_delta", 1.0)),
                         standardizer=Standardizer.from_dict(d.get("targets"), task.num_targets))


def task_head(task: TaskSpec, loss: str | None = None, delta: float = 1.0, y=None, weights=None,
              standardizer: Standardizer | None = None) -> TaskHead:
    """The :class:`TaskHead` of a task: its loss (checked), :math:`M`, and for regression the standardiser fitted on
    the labelled coreset ``y`` (τ-weighted by ``weights``) unless given."""
    loss = check_loss(task.type, loss)
    M, why = loss_lipschitz(loss, delta)
    if standardizer is None:
        standardizer = Standardizer(*task.target_moments(y, weights))
    return TaskHead(task, loss, float(delta), standardizer, M, why)



def training_labels(head: TaskHead, y) -> np.ndarray:
    """Labels as every model is trained on them (the one convention of the training recipe): :meth:`TaskHead.encode`,
    one column kept as a vector ``(k,)`` for binary and multi-class tasks (class indices / 0-1), ``(k, T)`` for
    regression and multi-task (``T`` may be 1)."""
    return head.task.training_labels(head.encode(y))
