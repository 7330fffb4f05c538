r"""Train a GIN on a labelled selection, for any task type, and describe what was trained.

What the pipeline's train stage computes, without files, Prefect or MLflow: the task's loss and output width
(:mod:`tmdlib.datasets._task`, :mod:`tmdlib.guarantees.losses`), regression targets standardised on the labelled
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

from ..datasets._task import BINARY, TaskSpec
from ..guarantees.losses import per_graph_losses
from ..models._head import TaskHead, task_head, training_labels

__all__ = ["TaskHead", "FitResult", "task_head", "fit", "train_on", "predict", "losses_on", "train_config"]


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
    from .certified import stability_constant
    from .gin import alive_units
    from .pyg import dataset_to_pyg

    head = head or task_head(task, loss, delta, y, tau)
    data = dataset_to_pyg(ds, positions=positions, y=training_labels(head, y), weights=tau, node_subsets=node_subsets)
    tc = train_config(cfg, head)
    t0 = time.perf_counter()
    res = train_on(data, tc, head, in_dim=ds.num_features, on_loss=on_loss, on_epoch=on_epoch)
    seconds = time.perf_counter() - t0
    lip = stability_constant(res.model, tc.get("lipschitz_budget"), M=head.M if head.M is not None else 1.0,
                             weights=weights, mode=tc.get("lipschitz_mode", "ball"))
    lip = {**lip, "loss": head.loss, "loss_certified": head.certified_loss, "loss_lipschitz": head.why}
    return FitResult(res.model, res.losses, res.device, head, lip, alive_units(res.model, data), seconds, data)


def train_on(data, cfg: dict, head: TaskHead, in_dim: int, *, on_loss=None, on_epoch=None):
    r"""The one training recipe: a GIN trained on PyG graphs ``data`` (labels already encoded by
    :func:`tmdlib.models._head.training_labels`, weights in ``data[i].weight``) with ``head``'s loss and width.

    The pipeline's train stage (:func:`fit`), both experiment profiles (:func:`tmdlib.experiment.protocol.run_cell`,
    including node subsampling and the condensation baselines' synthetic graphs), the molecules benchmark and the
    PyG example all train here.  ``cfg`` holds :class:`tmdlib.torch.gin.TrainConfig` fields (see
    :data:`RECIPES` for the named settings) and optionally ``lipschitz_budget`` / ``lipschitz_mode`` (certified
    training, :func:`tmdlib.torch.certified.train_from_config`); ``on_epoch(epoch, model)`` (model selection on a
    validation set) is available for the unconstrained GIN.

    Returns
    -------
    tmdlib.torch.gin.TrainResult
    """
    from .certified import train_from_config
    from .gin import TrainConfig, train_gin

    tc = train_config(cfg, head)
    if on_epoch is None:
        return train_from_config(data, tc, in_dim=in_dim, on_loss=on_loss)
    if tc.get("lipschitz_budget") is not None:
        raise ValueError("on_epoch (validation model selection) is for the unconstrained GIN only")
    plain = {k: v for k, v in tc.items() if k not in ("lipschitz_budget", "lipschitz_mode")}
    return train_gin(data, TrainConfig(**plain), in_dim=in_dim, on_epoch=on_epoch, on_loss=on_loss)


def predict(model, data, head: TaskHead, device: str = "cpu") -> np.ndarray:
    """Outputs in the task's own units, shape ``(n, D)``: logits (classification) or de-standardised predictions."""
    from .gin import predict_outputs

    return head.to_task_units(predict_outputs(model, data, device=device))


def losses_on(model, data, y, head: TaskHead, device: str = "cpu", outputs=None) -> np.ndarray:
    """Per-graph losses (the training loss, standardised for regression) of ``model`` on ``data`` with labels
    ``y`` as stored, shape ``(n,)``; ``outputs`` (raw model outputs) when already computed."""
    from .gin import predict_outputs

    z = predict_outputs(model, data, device=device) if outputs is None else outputs
    return per_graph_losses(z, head.encode(y), head.loss, head.delta)
