r"""Train a GIN on a labelled selection, for any task type, and describe what was trained.

What the pipeline's train stage computes, without files, Prefect or MLflow: the task's loss and output width
(:mod:`tmdlib.datasets.task`, :mod:`tmdlib.guarantees.losses`), regression targets standardised on the labelled
coreset (τ-weighted) and de-standardised for predictions, the τ-weighted training
(:func:`tmdlib.torch.certified.train_from_config`: the paper's GIN or its certified variants), the stability
constant :math:`c = M\,\kappa\,\lVert W_{out}\rVert_2\prod_\ell\Phi_\ell` with the loss's :math:`M`, and the hidden
units left alive (a collapsed network predicts a constant).

>>> # fit(ds, positions, y, tau, cfg, task)  ->  FitResult(model, losses, head, lipschitz, alive_units, ...)
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..datasets.task import BINARY, TaskSpec, label_matrix
from ..guarantees.losses import Standardizer, check_loss, loss_lipschitz, per_graph_losses

__all__ = ["TaskHead", "FitResult", "task_head", "fit", "predict", "losses_on", "train_config"]


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
        """Labels as the model is trained on them: standardised for regression, shape ``(n, T)``."""
        Y = label_matrix(y)
        return self.standardizer.transform(Y) if self.task.type == "regression" else Y

    def to_dict(self) -> dict:
        return {"task": self.task.to_dict(), "loss": self.loss, "huber_delta": self.delta,
                "targets": self.standardizer.to_dict() if self.task.type == "regression" else None,
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
    if task.type == "regression":
        if standardizer is None:
            standardizer = (Standardizer.identity(task.num_targets) if y is None
                            else Standardizer.fit(label_matrix(y), weights))
    else:
        standardizer = Standardizer.identity(task.num_targets)
    return TaskHead(task, loss, float(delta), standardizer, M, why)


def train_config(cfg: dict, head: TaskHead) -> dict:
    """The training config with the task's output width and loss (``out_dim``, ``loss``, ``huber_delta``)."""
    out = dict(cfg)
    out.update(out_dim=head.task.output_dim, loss=head.loss, huber_delta=head.delta)
    return out


@dataclass
class FitResult:
    """A trained model and what the train stage records about it.

    Attributes
    ----------
    model : GIN
    losses : list of float
        τ-weighted mean training loss per epoch (standardised units for regression).
    device : str
    head : TaskHead
    lipschitz : dict
        :func:`tmdlib.torch.certified.stability_constant` with the loss's :math:`M` (``M = 1`` when the loss has
        none: then ``c`` bounds the outputs, not the loss).
    alive_units : list of int
        Hidden units non-zero on some training node, per layer (a 0: collapsed).
    seconds : float
        Wall time of the training.
    data : list of Data
        The training graphs as trained on (labels encoded).
    """

    model: object
    losses: list
    device: str
    head: TaskHead
    lipschitz: dict
    alive_units: list
    seconds: float
    data: list = field(repr=False, default_factory=list)

    @property
    def collapsed(self) -> bool:
        return bool(self.alive_units) and min(self.alive_units) == 0


def fit(ds, positions, y, tau, cfg: dict, task: TaskSpec = BINARY, *, loss: str | None = None, delta: float = 1.0,
        node_subsets=None, weights="pascal", head: TaskHead | None = None, on_loss=None, on_epoch=None) -> FitResult:
    r"""Train a GIN on the graphs ``positions`` of ``ds`` with labels ``y`` and weights ``tau``.

    Parameters
    ----------
    ds : GraphDataset
    positions : array_like of int, shape (k,)
    y : array_like, shape (k,) or (k, T)
        Their labels as stored (multi-class: class indices; NaN = missing where the task allows it).
    tau : array_like, shape (k,)
        Training weights (:class:`tmdlib.select.Selection` ``tau``).
    cfg : dict
        :class:`tmdlib.torch.gin.TrainConfig` fields, optional ``lipschitz_budget`` / ``lipschitz_mode``.
    task : TaskSpec
    loss : str, optional
        Default: the task's (:func:`tmdlib.guarantees.losses.default_loss`).
    delta : float
        Huber's δ.
    node_subsets : sequence of ndarray, optional
        Train on these induced subgraphs (node subsampling).
    weights
        TMD level weights the stability constant is stated for.
    head : TaskHead, optional
        Reuse a head (its standardiser) instead of fitting one on ``y``.
    on_loss, on_epoch : callable, optional
        As :func:`tmdlib.torch.gin.train_gin`.

    Returns
    -------
    FitResult
    """
    from .certified import stability_constant, train_from_config
    from .gin import alive_units
    from .pyg import dataset_to_pyg

    head = head or task_head(task, loss, delta, y, tau)
    Y = head.encode(y)
    labels = Y[:, 0] if Y.shape[1] == 1 and task.type in ("binary", "multiclass") else Y
    data = dataset_to_pyg(ds, positions=positions, y=labels, weights=tau, node_subsets=node_subsets)
    tc = train_config(cfg, head)
    t0 = time.perf_counter()
    if on_epoch is None:
        res = train_from_config(data, tc, in_dim=ds.num_features, on_loss=on_loss)
    else:
        from .gin import TrainConfig, train_gin

        plain = {k: v for k, v in tc.items() if k not in ("lipschitz_budget", "lipschitz_mode")}
        res = train_gin(data, TrainConfig(**plain), in_dim=ds.num_features, on_epoch=on_epoch, on_loss=on_loss)
    seconds = time.perf_counter() - t0
    lip = stability_constant(res.model, tc.get("lipschitz_budget"), M=head.M if head.M is not None else 1.0,
                             weights=weights, mode=tc.get("lipschitz_mode", "ball"))
    lip = {**lip, "loss": head.loss, "loss_certified": head.certified_loss, "loss_lipschitz": head.why}
    return FitResult(res.model, res.losses, res.device, head, lip, alive_units(res.model, data), seconds, data)


def predict(model, data, head: TaskHead, device: str = "cpu") -> np.ndarray:
    """Outputs in the task's own units, shape ``(n, D)``: logits (classification) or de-standardised predictions."""
    from .gin import predict_outputs

    z = predict_outputs(model, data, device=device)
    return head.standardizer.inverse(z) if head.task.type == "regression" else z


def losses_on(model, data, y, head: TaskHead, device: str = "cpu", outputs=None) -> np.ndarray:
    """Per-graph losses (the training loss, standardised for regression) of ``model`` on ``data`` with labels
    ``y`` as stored, shape ``(n,)``; ``outputs`` (raw model outputs) when already computed."""
    from .gin import predict_outputs

    z = predict_outputs(model, data, device=device) if outputs is None else outputs
    return per_graph_losses(z, head.encode(y), head.loss, head.delta)
