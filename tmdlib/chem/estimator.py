r"""Scikit-learn style estimators on the molecules' ECFP4 counts as registered models (:mod:`tmdlib.models`).

:class:`EstimatorModel` adapts an estimator (``fit(X, y, sample_weight)`` / ``predict`` / ``predict_proba``) to the
:class:`~tmdlib.models._base.Model` interface: the built-in fingerprint models (``rf``, ``svm``, ``gbm`` in
:mod:`tmdlib.chem.models`, ``lgbm`` in :mod:`tmdlib.chem.lgbm`) and a user's own ``package.module:factory``.
"""
from __future__ import annotations

import numpy as np

from .._errors import InputError
from ..models._base import Inputs, Model, _check_fit_inputs
from ..models._head import task_head

__all__ = ["EstimatorModel", "fingerprints", "probability_logits", "estimator_spec"]


def fingerprints(X: Inputs) -> np.ndarray:
    """ECFP4 counts ``(m, 2048)`` of the members (RDKit; precomputed ``X.features`` when given)."""
    if X.features is not None:
        return X.features if X.positions is None else X.features[X.positions]
    from ._fingerprints import ecfp4_counts

    return ecfp4_counts(X.smiles_at())


def probability_logits(P: np.ndarray, task) -> np.ndarray:
    """Class probabilities ``(m, C)`` as outputs: the positive class's logit (binary, one column) or log
    probabilities (multi-class; softmax gives them back), clipped to :math:`[10^{-6}, 1 - 10^{-6}]`."""
    return task.probability_logits(P)


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
    standard deviation of the labelled selection (:class:`~tmdlib.models._head.TaskHead`), one estimator per target;
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

        from ..datasets._task import TaskSpec

        task = task or TaskSpec("regression")
        if task.type not in self.tasks:
            raise InputError(None, f"model {self.name!r} does not take {task.type} tasks")
        proto = self.estimator if hasattr(self.estimator, "fit") else self.estimator(task)
        F = fingerprints(X)
        w = _check_fit_inputs(y, sample_weight, len(F))
        self.head = task_head(task, y=y, weights=w)
        Y = self.head.encode(y)
        self.fitted_ = []
        for j in range(Y.shape[1]):  # one estimator per target (a classification task has one label column)
            keep = ~np.isnan(Y[:, j])
            if not keep.any():
                raise InputError(None, f"model {self.name!r}: no labelled member for target {j}")
            est = deepcopy(proto)
            est.fit(F[keep], Y[keep, j], sample_weight=w[keep])
            self.fitted_.append(est)
        return self

    def outputs(self, X: Inputs) -> np.ndarray:
        F = fingerprints(X)
        return {"regression": self._values, "classification": self._logits}[self.head.task.estimator_kind](F)

    def _values(self, F) -> np.ndarray:
        """A regressor per target: its predictions, de-standardised."""
        Z = np.column_stack([np.asarray(e.predict(F), dtype=np.float64) for e in self.fitted_])
        return self.head.to_task_units(Z)

    def _logits(self, F) -> np.ndarray:
        """The classifier's class probabilities as logits (:func:`probability_logits`)."""
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



def estimator_spec(name: str, build, *, summary: str, title: str = "", seeded: bool = False,
                   tasks: tuple = ("binary", "multiclass", "regression"), defaults: dict | None = None,
                   quick: dict | None = None):
    """The :class:`~tmdlib.models._registry.ModelSpec` of an estimator family on ECFP4 counts.

    ``build(task, options) -> estimator`` makes the regressor or the classifier for the task being fitted (a
    :class:`~tmdlib.datasets._task.TaskSpec`) from the model's options; the fitted model is an
    :class:`EstimatorModel`, saved as its estimators' plain arrays (``to_arrays`` / ``from_arrays``).
    """
    from ..models._registry import ModelSpec

    def make(options):
        return EstimatorModel(lambda task: build(task, dict(options)), name=name)

    return ModelSpec(name, make=make, restore=EstimatorModel.from_state, inputs="molecules", tasks=tuple(tasks),
                     summary=summary, title=title or summary, seeded=seeded, defaults=dict(defaults or {}),
                     quick=dict(quick or {}))
