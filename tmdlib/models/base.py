r"""The one interface every model implements, and the adapter for scikit-learn estimators on fingerprints.

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

from ..errors import InputError
from .head import TaskHead, task_head

__all__ = ["Inputs", "Model", "EstimatorModel", "fingerprints", "probability_logits"]

ALL_TASKS = ("binary", "multiclass", "multitask", "regression")


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


def fingerprints(X: Inputs) -> np.ndarray:
    """ECFP4 counts ``(m, 2048)`` of the members (RDKit; precomputed ``X.features`` when given)."""
    if X.features is not None:
        return X.features if X.positions is None else X.features[X.positions]
    from ..chem.fingerprints import ecfp4_counts

    return ecfp4_counts(X.smiles_at())


def probability_logits(P: np.ndarray, task) -> np.ndarray:
    """Class probabilities ``(m, C)`` as outputs: the positive class's logit (binary, one column) or log
    probabilities (multi-class; softmax gives them back), clipped to :math:`[10^{-6}, 1 - 10^{-6}]`."""
    P = np.clip(np.asarray(P, dtype=np.float64), 1e-6, 1 - 1e-6)
    if not task.class_indices:  # binary: one logit
        p = P[:, -1]
        return np.log(p / (1 - p))[:, None]
    return np.log(P)


class Model:
    """The interface of a registered model (:class:`tmdlib.models.registry.ModelSpec`).

    Subclasses set ``name``, ``inputs`` (``"graphs"`` or ``"molecules"``) and ``tasks``, and implement
    :meth:`fit`, :meth:`outputs`, :meth:`state` and :meth:`from_state`.  After :meth:`fit`, ``head`` is the
    :class:`~tmdlib.models.head.TaskHead` (task, loss, standardiser) the model was trained with.
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


def _skops_estimator(blob: bytes, name) -> object:
    """A user's estimator saved with skops, loaded with skops' default trusted types only (no code is executed)."""
    import skops.io as sio

    untrusted = sio.get_untrusted_types(data=blob)
    if untrusted:
        raise InputError(None, f"model {name!r}: the saved estimator holds types skops does not trust "
                               f"({', '.join(untrusted[:5])}): refused (loading them could run their code)")
    return sio.loads(blob)


class EstimatorModel(Model):
    r"""A scikit-learn style estimator trained on the molecules' ECFP4 counts.

    Regression: ``estimator.fit(X, y_std, sample_weight)`` on targets standardised with the τ-weighted mean and
    standard deviation of the labelled selection (:class:`~tmdlib.models.head.TaskHead`), one estimator per target;
    outputs de-standardised.  Classification (binary, multi-class): ``fit(X, y)`` on the class indices and
    ``predict_proba`` turned into logits (:func:`probability_logits`).  Rows whose label is missing are dropped.

    Persistence: an estimator with ``to_arrays()`` / ``from_arrays`` (the built-in ones of
    :mod:`tmdlib.chem.models`) is saved as plain arrays; any other (a user's own) in ``skops``' format, which loads
    only the types it trusts (scikit-learn's, numpy's): a user's estimator built from scikit-learn parts loads
    anywhere, one with a class of its own is refused at load time, never executed.
    """

    inputs = "molecules"
    tasks = ("binary", "multiclass", "regression")

    def __init__(self, estimator, name: str = "estimator"):
        #: an estimator, or ``build(task) -> estimator`` (a regressor or a classifier, chosen at fit time)
        self.estimator = estimator
        self.name = name
        self.fitted_: list = []

    def fit(self, X: Inputs, y, sample_weight=None, task=None):
        from copy import deepcopy

        from ..datasets.task import TaskSpec

        task = task or TaskSpec("regression")
        if task.type not in self.tasks:
            raise InputError(None, f"model {self.name!r} does not take {task.type} tasks")
        proto = self.estimator if hasattr(self.estimator, "fit") else self.estimator(task)
        F = fingerprints(X)
        w = _check_fit_inputs(y, sample_weight, len(F))
        self.head = task_head(task, y=y, weights=w)
        Y = self.head.encode(y)
        self.fitted_ = []
        for j in range(Y.shape[1] if task.is_regression else 1):
            keep = ~np.isnan(Y[:, j])
            if not keep.any():
                raise InputError(None, f"model {self.name!r}: no labelled member for target {j}")
            est = deepcopy(proto)
            est.fit(F[keep], Y[keep, j], sample_weight=w[keep])
            self.fitted_.append(est)
        return self

    def outputs(self, X: Inputs) -> np.ndarray:
        F = fingerprints(X)
        if self.head.task.is_regression:
            Z = np.column_stack([np.asarray(e.predict(F), dtype=np.float64) for e in self.fitted_])
            return self.head.to_task_units(Z)
        est = self.fitted_[0]
        P = np.zeros((len(F), max(2, self.head.task.num_classes)))
        P[:, np.asarray(est.classes_, dtype=np.int64)] = est.predict_proba(F)
        return probability_logits(P, self.head.task)

    def describe(self) -> dict:
        est = self.fitted_[0] if self.fitted_ else self.estimator
        params = est.get_params() if hasattr(est, "get_params") else {}
        return {"estimator": type(est).__name__,
                "params": {k: v for k, v in params.items() if isinstance(v, (int, float, str, bool, type(None)))}}

    def state(self) -> tuple[dict, dict]:
        arrays, kinds = {}, []
        for j, est in enumerate(self.fitted_):
            if hasattr(est, "to_arrays"):
                kinds.append(f"{type(est).__module__}:{type(est).__qualname__}")
                arrays.update({f"{j}.{k}": np.asarray(v) for k, v in est.to_arrays().items()})
            else:  # a user's own estimator: skops' format (loaded only for types it trusts)
                import skops.io as sio

                kinds.append("skops")
                arrays[f"{j}.skops"] = np.frombuffer(sio.dumps(est), dtype=np.uint8)
        return {"name": self.name, "kinds": kinds, **self._head_config(), **self.describe()}, arrays

    @classmethod
    def from_state(cls, config: dict, arrays: dict) -> "EstimatorModel":
        import importlib

        fitted = []
        for j, kind in enumerate(config["kinds"]):
            own = {k.split(".", 1)[1]: v for k, v in arrays.items() if k.split(".", 1)[0] == str(j)}
            if kind == "skops":
                fitted.append(_skops_estimator(own["skops"].tobytes(), config.get("name")))
                continue
            module, _, qual = kind.partition(":")
            if not module.startswith("tmdlib."):
                raise InputError(None, f"refusing to load estimator class {kind!r}: not part of tmdlib")
            fitted.append(getattr(importlib.import_module(module), qual).from_arrays(own))
        m = cls(fitted[0] if fitted else None, name=config.get("name", "estimator"))
        m.fitted_ = fitted
        m._restore_head(config)
        return m

