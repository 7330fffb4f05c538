r"""LightGBM on ECFP4 counts: the registered model ``lgbm`` (regression and classification).

:class:`ECFPLightGBM` is a scikit-learn style estimator (``fit(X, y, sample_weight=None)``, ``predict``,
``predict_proba``) on the ``(n, 2048)`` ECFP4 count matrix (a sequence of SMILES is turned into it first), trained by
LightGBM's gradient-boosted trees: leaf-wise growth, histogram splits, the squared error (regression) or the log loss
(binary; the softmax loss for more classes).  ``sample_weight`` (a coreset's :math:`\tau`) weights every row's
gradient and Hessian; rows of weight 0 and rows whose target is NaN are dropped first.

Its fitted state is LightGBM's own text model (``Booster.model_to_string``) held as a unicode array, plus the classes
and options: :meth:`ECFPLightGBM.to_arrays` / :meth:`ECFPLightGBM.from_arrays` need no pickle.

Defaults mirror the ``gbm`` model's (:class:`tmdlib.chem.models.ECFPBoosting`): learning rate 0.05, 500 trees of at
most 31 leaves, at least 10 rows per leaf, 30 % of the features tried per split; one thread, deterministic.
"""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from .._errors import InputError
from .estimator import estimator_spec
from .models import _array, _check_kind, _classes, _features, _plain, _rows, _scalar

__all__ = ["ECFPLightGBM", "LGBM"]

#: Per kind of task (scikit-learn's kinds): LightGBM's estimator and whether the targets are real numbers.
_KINDS = {"regression": ("LGBMRegressor", True), "classification": ("LGBMClassifier", False)}


class ECFPLightGBM(BaseEstimator):
    r"""Gradient-boosted trees by LightGBM on ECFP4 counts.

    Parameters
    ----------
    task : {"regression", "classification"}
    learning_rate : float, default 0.05
    n_estimators : int, default 500
    num_leaves : int, default 31
    min_child_samples : int, default 10
    reg_lambda : float, default 0.0
        :math:`\ell_2` penalty on the leaf values.
    feature_fraction_bynode : float, default 0.3
        Fraction of the features tried at each split.
    seed : int, default 0
    n_jobs : int, default 1

    Attributes
    ----------
    booster_ : lightgbm.Booster
    classes_ : ndarray or None
        The class labels (classification), in the order of ``predict_proba``'s columns.
    n_features_in_, n_dropped_nan_ : int
    """

    def __init__(self, task: str = "regression", learning_rate: float = 0.05, n_estimators: int = 500,
                 num_leaves: int = 31, min_child_samples: int = 10, reg_lambda: float = 0.0,
                 feature_fraction_bynode: float = 0.3, seed: int = 0, n_jobs: int = 1):
        self.task = task
        self.learning_rate = learning_rate
        self.n_estimators = n_estimators
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.reg_lambda = reg_lambda
        self.feature_fraction_bynode = feature_fraction_bynode
        self.seed = seed
        self.n_jobs = n_jobs

    def _options(self) -> dict:
        return {"learning_rate": float(self.learning_rate), "n_estimators": int(self.n_estimators),
                "num_leaves": int(self.num_leaves), "min_child_samples": int(self.min_child_samples),
                "reg_lambda": float(self.reg_lambda), "feature_fraction_bynode": float(self.feature_fraction_bynode),
                "seed": int(self.seed)}

    def fit(self, X, y, sample_weight=None):
        """Fit on counts ``X`` (n, d) and targets ``y`` (n,), rows weighted by ``sample_weight``.

        Raises
        ------
        InputError
            Bad shapes or task, non-finite features or weights, infinite targets, fewer than two classes, nothing
            left to fit.
        """
        import lightgbm

        if self.task not in _KINDS:
            raise InputError(None, f"task must be one of {', '.join(_KINDS)}, got {self.task!r}")
        estimator, regression = _KINDS[self.task]
        X = _features(X)
        X, y, w, dropped = _rows(X, y, sample_weight, regression=regression)
        o = self._options()
        params = dict(learning_rate=o["learning_rate"], n_estimators=o["n_estimators"], num_leaves=o["num_leaves"],
                      min_child_samples=o["min_child_samples"], reg_lambda=o["reg_lambda"],
                      feature_fraction_bynode=o["feature_fraction_bynode"], random_state=o["seed"],
                      n_jobs=int(self.n_jobs), deterministic=True, force_col_wise=True, verbose=-1)
        self.classes_, codes = _classes(y) if not regression else (None, y)
        model = getattr(lightgbm, estimator)(**params).fit(X, codes, sample_weight=w)
        self.booster_ = model.booster_
        self.n_features_in_ = int(X.shape[1])
        self.n_dropped_nan_ = dropped
        return self

    def _predict(self, X) -> np.ndarray:
        if not hasattr(self, "booster_"):
            raise InputError(None, "the model is not fitted")
        X = _features(X, self.n_features_in_)
        return np.asarray(self.booster_.predict(X, num_threads=int(self.n_jobs)), dtype=np.float64)

    def predict(self, X) -> np.ndarray:
        """Real predictions (regression) or the most probable class, shape (m,)."""
        if self.classes_ is None:
            return self._predict(X)
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, shape (m, k), columns in the order of ``classes_``."""
        if self.classes_ is None:
            raise InputError(None, "predict_proba needs a classification model (task='classification')")
        p = self._predict(X)
        return np.column_stack([1.0 - p, p]) if p.ndim == 1 else p

    def to_arrays(self) -> dict[str, np.ndarray]:
        """LightGBM's text model as a unicode array, the classes and the options (no pickle)."""
        out = {"kind": np.array("lgbm"), "task": np.array(self.task),
               "model": np.array(self.booster_.model_to_string()),
               **{k: np.array(v) for k, v in self._options().items()},
               "n_features_in": np.array(self.n_features_in_), "n_dropped_nan": np.array(self.n_dropped_nan_)}
        if self.classes_ is not None:
            out["classes"] = _plain(self.classes_)
        return out

    @classmethod
    def from_arrays(cls, arrays: dict) -> "ECFPLightGBM":
        """The model :meth:`to_arrays` wrote.  InputError for missing keys, another kind or an unreadable model."""
        import lightgbm

        _check_kind(arrays, "lgbm")
        m = cls(task=str(_scalar(arrays, "task")), learning_rate=float(_scalar(arrays, "learning_rate")),
                n_estimators=int(_scalar(arrays, "n_estimators")), num_leaves=int(_scalar(arrays, "num_leaves")),
                min_child_samples=int(_scalar(arrays, "min_child_samples")),
                reg_lambda=float(_scalar(arrays, "reg_lambda")),
                feature_fraction_bynode=float(_scalar(arrays, "feature_fraction_bynode")),
                seed=int(_scalar(arrays, "seed")))
        try:
            m.booster_ = lightgbm.Booster(model_str=str(_scalar(arrays, "model")))
        except lightgbm.basic.LightGBMError as e:
            raise InputError(None, f"not a LightGBM model: {e}") from None
        m.classes_ = _array(arrays, "classes") if "classes" in arrays else None
        m.n_features_in_ = int(_scalar(arrays, "n_features_in"))
        m.n_dropped_nan_ = int(_scalar(arrays, "n_dropped_nan"))
        return m


def _build(task, options):
    return ECFPLightGBM(task=task.estimator_kind, **options)


#: The registered model (:data:`tmdlib.models._registry.ENTRY_POINTS`).
LGBM = estimator_spec("lgbm", _build, summary="LightGBM gradient boosting on ECFP4 counts",
                      title="LightGBM (ECFP4 counts)", seeded=True, quick={"n_estimators": 20})
