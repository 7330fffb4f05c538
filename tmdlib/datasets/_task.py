r"""What the labels are: the task type of a dataset, decided once at ingest and stored with the graphs.

Selection never reads labels; everything after it does, and needs to know what they mean:

============  ===========================================  ==============  =======================================
type          labels of a graph                            model outputs   loss / metrics
============  ===========================================  ==============  =======================================
binary        one value in {0, 1}                          1 logit         BCE; accuracy, ROC-AUC
multiclass    one class out of C (stored as 0..C-1)        C logits        cross-entropy; accuracy, macro-F1
multitask     T values in {0, 1}, any of them missing      T logits        masked BCE; mean ROC-AUC over tasks
regression    T real values, any of them missing           T values        MSE / L1 / Huber; RMSE, MAE, R², ρ
============  ===========================================  ==============  =======================================

A label matrix :math:`Y \in (\mathbb R \cup \{\mathrm{NaN}\})^{G \times T}` (NaN = not measured) is
classified by :func:`infer_task`: integers in {0, 1} are binary (one column) or multi-task (several); a small
set of integers (at most :data:`MAX_CLASSES`) in one column is multi-class -- unless they read as concentrations (a
dilution series, a range wider than :data:`MAX_CLASSES`); anything else is regression.  A user
can force the type (``tmdsub ingest --task``); :func:`validate_labels` then checks every value against it.

The spec travels in the graph store's schema metadata under :data:`META_TASK` (JSON), so every later stage
reads the same decision (:func:`task_of_metadata`); stores written before it existed are binary.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from .._errors import InputError

__all__ = ["TASK_TYPES", "LOSSES", "ESTIMATOR_KIND", "CONFORMAL", "CONSTANT_PREDICTOR", "CONTROL_ERROR", "TaskSpec", "infer_task", "task_reason", "validate_labels", "META_TASK", "MAX_CLASSES",
           "task_of_metadata", "BINARY", "label_matrix", "task_and_labels", "label_array", "table_labels",
           "table_task", "with_task", "source_labels", "store_task", "UNLABELLED", "decide_task"]

#: The task types, in the order of the table above.
TASK_TYPES = ("binary", "multiclass", "multitask", "regression")
#: Loss names by task type (the first is the default; :attr:`TaskSpec.losses`); what each loss computes -- its
#: Lipschitz constant M, the trivial predictor's loss -- is :mod:`tmdlib.guarantees.losses`, which reads this table.
LOSSES = {"binary": ("bce",), "multitask": ("bce",), "multiclass": ("ce",),
          "regression": ("huber", "l1", "mse")}
#: What each task type does, one table per question (:class:`TaskSpec` reads them; a new type is one entry in each,
#: and a missing entry is a KeyError, never a silent side of an ``if`` elsewhere).
#: The kind of estimator that fits it (scikit-learn's words).
ESTIMATOR_KIND = {"binary": "classification", "multiclass": "classification", "multitask": "classification",
                  "regression": "regression"}
#: What its conformal predictions are: an interval per target, a set of classes, or none (multi-task).
CONFORMAL = {"binary": "sets", "multiclass": "sets", "multitask": None, "regression": "intervals"}
#: What the constant predictor it is compared with predicts.
CONSTANT_PREDICTOR = {"binary": "the majority class", "multiclass": "the majority class",
                      "multitask": "the majority class", "regression": "the mean"}
#: The error the control arms are compared on, per member (None: the arms are not compared for the type).
CONTROL_ERROR = {"binary": "root Brier score", "multiclass": None, "multitask": None, "regression": "rmse"}
#: Schema-metadata key of the task spec (JSON of :meth:`TaskSpec.to_dict`).
META_TASK = "tmdlib.task"
#: At most this many distinct integer values in one label column read as classes (more: regression).
MAX_CLASSES = 20
#: :attr:`TaskSpec.source` of a pool stored without any label: its type is a placeholder until the first label
#: import decides it (:func:`decide_task`).
UNLABELLED = "unlabelled"


@dataclass(frozen=True)
class TaskSpec:
    r"""The task type of a dataset.

    Attributes
    ----------
    type : {"binary", "multiclass", "multitask", "regression"}
    targets : tuple of str
        Names of the label columns, :math:`T \ge 1` (``("y",)`` for one unnamed label).
    classes : tuple of float
        Multi-class: the class values as they appear in the source (sorted); the stored label of a graph is
        the index of its class, ``0..C-1``.  Empty otherwise.
    source : str
        ``"inferred"`` (from the values), ``"user"`` (``--task``), ``"builtin"`` (a built-in dataset's own,
        :attr:`tmdlib.datasets._registry.DatasetInfo.task`), ``"import"`` (decided by the first label import) or
        :data:`UNLABELLED` (a pool without labels: ``type`` is a placeholder, :attr:`decided` is False).
    """

    type: str = "binary"
    targets: tuple = ("y",)
    classes: tuple = ()
    source: str = field(default="inferred", compare=False)

    def __post_init__(self):
        if self.type not in TASK_TYPES:
            raise ValueError(f"task type must be one of {', '.join(TASK_TYPES)}; got {self.type!r}")
        object.__setattr__(self, "targets", tuple(str(t) for t in self.targets))
        # classes only where the labels are class indices (multi-class): every other type stores the values
        object.__setattr__(self, "classes", tuple(float(c) for c in self.classes) if self.type == "multiclass" else ())
        if not self.targets:
            raise ValueError("a task has at least one target")
        if self.type in ("binary", "multiclass") and len(self.targets) != 1:
            raise ValueError(f"a {self.type} task has one label column, got {len(self.targets)}")
        if self.type == "multiclass" and len(self.classes) < 2:
            raise ValueError("a multiclass task needs at least 2 classes")

    @property
    def decided(self) -> bool:
        """False for a pool stored without labels (:data:`UNLABELLED`): the first label import decides the task."""
        return self.source != UNLABELLED

    @property
    def num_targets(self) -> int:
        """:math:`T`, the number of label columns."""
        return len(self.targets)

    @property
    def num_classes(self) -> int:
        """:math:`C` (multi-class), else 0."""
        return len(self.classes)

    @property
    def output_dim(self) -> int:
        """Width of the model's output: 1 (binary), C (multi-class), T (multi-task, regression)."""
        return self.num_classes if self.type == "multiclass" else (1 if self.type == "binary" else self.num_targets)

    @property
    def allows_missing(self) -> bool:
        """Multi-task and regression labels may be missing (masked out of losses and metrics)."""
        return self.type in ("multitask", "regression")

    @property
    def is_classification(self) -> bool:
        """Binary, multi-class or multi-task: labels are classes, outputs are logits."""
        return self.type != "regression"

    @property
    def is_regression(self) -> bool:
        """Real-valued targets, outputs in the targets' units (after :attr:`standardises_targets`)."""
        return self.type == "regression"

    @property
    def is_binary(self) -> bool:
        """One label of two classes (the paper's own experiments' setting; outputs: one logit)."""
        return self.type == "binary"

    @property
    def single_label(self) -> bool:
        """One label per graph and one prediction (a class): binary and multi-class."""
        return self.type in ("binary", "multiclass")

    @property
    def class_indices(self) -> bool:
        """Label encoding: the store holds class indices ``0..C-1`` (multi-class; :meth:`decode_labels` gives the
        source's values back); every other type stores the values themselves."""
        return self.type == "multiclass"

    @property
    def standardises_targets(self) -> bool:
        """Targets are standardised on the labelled coreset for training (regression; :mod:`tmdlib.guarantees.losses`),
        so predictions are de-standardised before they are reported."""
        return self.type == "regression"

    @property
    def logits(self) -> str | None:
        """How the model's outputs read as classes: ``"sigmoid"`` (binary, multi-task: one logit per label, > 0 is
        class 1), ``"softmax"`` (multi-class: arg-max) or None (regression: values)."""
        return {"binary": "sigmoid", "multitask": "sigmoid", "multiclass": "softmax"}.get(self.type)

    @property
    def losses(self) -> tuple[str, ...]:
        """The losses that fit the task, the default first (:data:`LOSSES`)."""
        return LOSSES[self.type]

    @property
    def default_loss(self) -> str:
        """``bce`` (binary, multi-task), ``ce`` (multi-class) or ``huber`` (regression)."""
        return self.losses[0]

    @property
    def metrics(self) -> tuple[str, ...]:
        """The test metrics of the task, the default headline first (:data:`tmdlib.metrics.METRICS`)."""
        from ..metrics import METRICS

        return METRICS[self.type]

    def headline_metric(self, dataset: str = "") -> str:
        """The metric reports lead with (:func:`tmdlib.metrics.headline`: ROC-AUC on OGB binary sets)."""
        from ..metrics import headline

        return headline(self.type, dataset)

    @property
    def estimator_kind(self) -> str:
        """``"classification"`` or ``"regression"``: the kind of scikit-learn estimator that fits the task
        (:data:`ESTIMATOR_KIND`)."""
        return ESTIMATOR_KIND[self.type]

    @property
    def conformal(self) -> str | None:
        """What its conformal predictions are (:data:`CONFORMAL`): ``"intervals"`` (regression, one per target),
        ``"sets"`` (binary, multi-class: prediction sets of classes) or None (multi-task: not supported)."""
        return CONFORMAL[self.type]

    @property
    def constant_predictor(self) -> str:
        """What the constant predictor predicts (:data:`CONSTANT_PREDICTOR`): ``the mean`` or ``the majority class``."""
        return CONSTANT_PREDICTOR[self.type]

    @property
    def control_error(self) -> str | None:
        """The error the control arms are compared on (:data:`CONTROL_ERROR`): ``rmse`` on one regression target,
        the ``root Brier score`` on one binary label, None where the arms are not compared (multi-class, multi-task,
        several regression targets)."""
        return CONTROL_ERROR[self.type] if self.num_targets == 1 else None

    @property
    def prediction_names(self) -> tuple[str, ...]:
        """What a prediction is named by: each target (regression: a value per target) or ``("class",)``."""
        return self.targets if self.conformal == "intervals" else ("class",)

    def column_suffix(self, j: int = 0) -> str:
        """The suffix of the ``j``-th prediction's columns in a predictions file (``prediction``, ``lower``, ...):
        none for one prediction per member, ``_<target>`` for each of several regression targets."""
        names = self.prediction_names
        return "" if len(names) == 1 else f"_{names[j]}"

    @property
    def ranks_values(self) -> bool:
        """One real value per member (one regression target): what hit lists rank."""
        return self.conformal == "intervals" and self.num_targets == 1

    @property
    def class_values(self) -> np.ndarray:
        """The classes a prediction takes, in the labels' values: the classes (multi-class), 0 and 1 (binary,
        multi-task), none (regression)."""
        return {"multiclass": np.asarray(self.classes, dtype=np.float64),
                "regression": np.zeros(0)}.get(self.type, np.array([0.0, 1.0]))

    def probabilities(self, outputs) -> np.ndarray:
        """Class probabilities ``(m, C)`` from outputs in task units: a sigmoid of the one logit (binary,
        ``(m, 2)``, columns 0 and 1) or a softmax of the logits (multi-class)."""
        Z = np.asarray(outputs, dtype=np.float64).reshape(len(outputs), -1)
        if self.logits == "softmax":
            Z = Z - Z.max(axis=1, keepdims=True)
            E = np.exp(Z)
            return E / E.sum(axis=1, keepdims=True)
        p = 1.0 / (1.0 + np.exp(-Z[:, 0]))
        return np.column_stack([1 - p, p])

    def probability_logits(self, P) -> np.ndarray:
        """Class probabilities ``(m, C)`` as outputs, clipped to :math:`[10^{-6}, 1 - 10^{-6}]`: the positive
        class's logit (binary, one column) or log probabilities (multi-class; the softmax gives them back)."""
        P = np.clip(np.asarray(P, dtype=np.float64), 1e-6, 1 - 1e-6)
        if self.logits == "softmax":
            return np.log(P)
        p = P[:, -1]
        return np.log(p / (1 - p))[:, None]

    def predicted_classes(self, outputs) -> np.ndarray | None:
        """The class index each member's outputs predict (binary: a logit above 0 is class 1; multi-class: the
        arg-max), or None where a member has no one class (regression, multi-task)."""
        Z = np.asarray(outputs, dtype=np.float64).reshape(len(outputs), -1)
        return {"sigmoid": (Z[:, 0] > 0).astype(np.int64), "softmax": Z.argmax(axis=1)}.get(self.logits) \
            if self.single_label else None

    def point_scores(self, outputs) -> np.ndarray:
        """One number per member, the one the control arms' errors are measured on: the value (regression, the
        first target) or the probability of the positive class, 1 (binary)."""
        if self.estimator_kind == "regression":
            return np.asarray(outputs, dtype=np.float64).reshape(len(outputs), -1)[:, 0]
        return self.probabilities(outputs)[:, 1]

    def training_labels(self, Y) -> np.ndarray:
        """Labels ``(k, T)`` as models train on them: one column kept as a vector ``(k,)`` for binary and multi-class
        tasks (class indices / 0-1), ``(k, T)`` for regression and multi-task (``T`` may be 1)."""
        Y = label_matrix(Y)
        return Y[:, 0] if self.single_label else Y

    def target_moments(self, y=None, weights=None) -> tuple[np.ndarray, np.ndarray]:
        r"""The per-target :math:`(\mu, \sigma)` a model's targets are standardised with: τ-weighted (``weights``)
        over the labelled members ``y`` (NaN missing; :math:`\sigma = 1` without spread) for regression; ``(0, 1)``
        (no standardisation) for every other type, or without ``y``."""
        if y is None or not self.standardises_targets:
            return np.zeros(self.num_targets), np.ones(self.num_targets)
        return weighted_moments(y, weights)

    def constant_outputs(self, y_train, weights, m: int) -> tuple[np.ndarray, str]:
        """The constant predictor's outputs ``(m, D)`` in task units, fitted on the training labels (as stored, NaN
        missing) with weights ``weights``, and what it is: regression the weighted mean per target; binary and
        multi-task the logit of the weighted positive rate; multi-class the log class frequencies (its prediction
        is the majority class)."""
        Y = np.asarray(y_train, dtype=np.float64)
        Y = Y.reshape(len(Y), -1) if Y.size else np.zeros((0, 1))
        w = np.ones(len(Y)) if weights is None else np.asarray(weights, dtype=np.float64).ravel()
        obs = ~np.isnan(Y)
        if self.logits == "softmax":
            k = obs[:, 0]
            freq = np.bincount(Y[k, 0].astype(np.int64), weights=w[k], minlength=self.num_classes) + 1e-6
            return np.tile(np.log(freq / freq.sum()), (m, 1)), "the coreset's class frequencies (the majority class)"
        empty = {"sigmoid": 0.5}.get(self.logits, 0.0)
        c = np.array([np.average(Y[obs[:, t], t], weights=w[obs[:, t]]) if obs[:, t].any() else empty
                      for t in range(Y.shape[1])])
        if self.logits is None:
            return np.tile(c, (m, 1)), "the τ-weighted mean of the coreset's labels"
        p = np.clip(c, 1e-6, 1 - 1e-6)
        return np.tile(np.log(p / (1 - p)), (m, 1)), "the coreset's positive rate (the majority class)"

    def decode_labels(self, Y) -> np.ndarray:
        """Stored labels (float64, NaN missing) as the source's values: class indices mapped back to the classes
        (multi-class), every other type as it is."""
        Y = np.asarray(Y, dtype=np.float64)
        if not self.class_indices:
            return Y
        return np.where(np.isfinite(Y), np.asarray(self.classes)[np.nan_to_num(Y).astype(np.int64)], np.nan)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["targets"], d["classes"] = list(self.targets), list(self.classes)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> "TaskSpec":
        return cls(type=d.get("type", "binary"), targets=tuple(d.get("targets") or ("y",)),
                   classes=tuple(d.get("classes") or ()), source=d.get("source", "inferred"))

    def describe(self) -> str:
        """One line for the CLI: ``regression (1 target: y)``, ``multiclass (3 classes: 0, 1, 2)``."""
        if not self.decided:
            return "none yet: unlabelled pool (the first label import decides the task)"
        if self.type == "multiclass":
            shown = ", ".join(f"{c:g}" for c in self.classes[:10]) + (" ..." if self.num_classes > 10 else "")
            return f"multiclass ({self.num_classes} classes: {shown})"
        if self.type == "binary":
            return f"binary (label {self.targets[0]})"
        shown = ", ".join(self.targets[:8]) + (" ..." if self.num_targets > 8 else "")
        noun = "task" if self.type == "multitask" else "target"
        return f"{self.type} ({self.num_targets} {noun}{'s' if self.num_targets != 1 else ''}: {shown})"


#: The task of stores written before task types existed (every one of them had a binary label).
BINARY = TaskSpec()


def label_matrix(y) -> np.ndarray:
    """Labels as a float64 matrix ``(G, T)`` (a vector ``(G,)`` becomes one column)."""
    a = np.asarray(y, dtype=np.float64)
    return a.reshape(-1, 1) if a.ndim == 1 else a


def weighted_moments(y, weights=None) -> tuple[np.ndarray, np.ndarray]:
    r"""Per column of ``y`` ``(n, T)`` (NaN missing): the ``weights``-weighted mean :math:`\mu` and standard deviation
    :math:`\sigma` over its values (:math:`\mu = 0, \sigma = 1` for a column without any; :math:`\sigma = 1` where
    it has no spread)."""
    Y = label_matrix(y)
    w = np.ones(len(Y)) if weights is None else np.asarray(weights, dtype=np.float64)
    mean, std = np.zeros(Y.shape[1]), np.ones(Y.shape[1])
    for t in range(Y.shape[1]):
        o = ~np.isnan(Y[:, t])
        if o.any() and w[o].sum() > 0:
            mean[t] = np.average(Y[o, t], weights=w[o])
            s = math.sqrt(np.average((Y[o, t] - mean[t]) ** 2, weights=w[o]))
            std[t] = s if s > 1e-12 else 1.0
    return mean, std


def _concentrations(finite: np.ndarray) -> str | None:
    """Why integer values are concentrations (a dilution series, a wide range), not class labels; None: classes."""
    u = np.unique(finite)
    if u.size >= 2 and u.max() - u.min() >= MAX_CLASSES:
        return f"integers from {_fmt(u.min())} to {_fmt(u.max())}, wider than {MAX_CLASSES} classes"
    if u.size >= 3 and u.min() > 0 and np.all(u[1:] / u[:-1] >= 2) and u.max() / u.min() >= 10:
        return f"a dilution series ({', '.join(_fmt(x) for x in u[:6])}{', ...' if u.size > 6 else ''})"
    return None


def task_reason(y, spec: "TaskSpec") -> str:
    """One line saying why the labels ``y`` gave the task ``spec`` (the import prints it)."""
    Y = label_matrix(y)
    finite = Y[np.isfinite(Y)]
    if spec.source == "user":
        return f"{spec.type}, as set (base.task / --task)"
    n = int(finite.size)
    if spec.type in ("binary", "multitask"):
        return f"{spec.type}: every one of the {n} values is 0 or 1"
    if spec.type == "multiclass":
        return f"multiclass: {n} values, {spec.num_classes} distinct integers (at most {MAX_CLASSES} classes)"
    if finite.size and np.all(_is_int(finite)):
        why = _concentrations(finite) if np.unique(finite).size <= MAX_CLASSES else None
        return (f"regression: {n} integer values, " + (f"{why}: concentrations, not classes" if why else
                f"more than {MAX_CLASSES} distinct"))
    return f"regression: {n} values, not all integers"


def _is_int(v: np.ndarray) -> np.ndarray:
    return np.isfinite(v) & (v == np.round(v))


def infer_task(y, targets=None, override: str | None = None, path: str | os.PathLike | None = None) -> TaskSpec:
    r"""The task type of a label matrix (or the one the user asks for, checked).

    Rules (NaN = missing; a column all missing is ignored by the rules):

    * every value an integer in {0, 1}: **binary** (one column) or **multitask** (several);
    * one column of integers with at most :data:`MAX_CLASSES` distinct values: **multiclass** (two values other
      than 0 / 1, e.g. -1 / 1, are two classes) -- unless they read as concentrations (:func:`_concentrations`:
      spread wider than :data:`MAX_CLASSES`, or a dilution series: each value at least twice the one before,
      spanning a factor 10 or more);
    * anything else: **regression**;
    * no value at all (an unlabelled pool): undecided, :data:`UNLABELLED` (the type a placeholder: binary, or
      multi-task for several columns), decided by the first label import (:func:`decide_task`).

    Parameters
    ----------
    y : array_like, shape (G,) or (G, T)
    targets : sequence of str, optional
        Column names (default ``y`` / ``y0..``).
    override : {"auto", "binary", "multiclass", "multitask", "regression"}, optional
        Force the type; the values must fit it (:func:`validate_labels`).
    path : path, optional
        Named in errors.

    Returns
    -------
    TaskSpec
        For ``multiclass``, ``classes`` are the sorted distinct values.

    Raises
    ------
    InputError
        A forced type that the values do not fit, or no label at all.
    """
    Y = label_matrix(y)
    T = Y.shape[1]
    names = tuple(targets) if targets is not None else (("y",) if T == 1 else tuple(f"y{i}" for i in range(T)))
    if len(names) != T:
        raise ValueError(f"{len(names)} target names for {T} label columns")
    finite = Y[np.isfinite(Y)]
    if override in (None, "", "auto"):
        if finite.size == 0:  # a pool without labels: the first label import decides
            return TaskSpec("binary" if T == 1 else "multitask", names, source=UNLABELLED)
        if np.all(_is_int(finite)) and np.all((finite == 0) | (finite == 1)):
            kind = "binary" if T == 1 else "multitask"
        elif T == 1 and np.all(_is_int(finite)) and 2 <= np.unique(finite).size <= MAX_CLASSES \
                and _concentrations(finite) is None:
            kind = "multiclass"
        else:
            kind = "regression"
        source = "inferred"
    else:
        if override not in TASK_TYPES:
            raise InputError(path, f"--task must be auto or one of {', '.join(TASK_TYPES)}; got {override!r}")
        kind, source = override, "user"
        if kind in ("binary", "multiclass") and T != 1:
            raise InputError(path, f"a {kind} task has one label column; {T} were given ({', '.join(names)})")
        if kind == "multiclass" and not np.all(_is_int(finite)):
            bad = finite[~_is_int(finite)][0]
            raise InputError(path, f"a multiclass task has integer class labels; {_fmt(bad)} is not one")
    classes = tuple(np.unique(finite).tolist()) if kind == "multiclass" else ()
    if kind == "multiclass" and len(classes) < 2:
        raise InputError(path, f"a multiclass task needs at least 2 classes; the labels hold {len(classes)}")
    spec = TaskSpec(kind, names, classes, source)
    validate_labels(Y, spec, path=path, encoded=False)
    return spec


def validate_labels(y, spec: TaskSpec, *, path: str | os.PathLike | None = None, lines=None,
                    encoded: bool = True, require_all: bool = False, limit: int = 20) -> np.ndarray:
    r"""Check a label matrix against a task; return it encoded as stored.

    Parameters
    ----------
    y : array_like, shape (G,) or (G, T)
        Labels (NaN = missing).
    spec : TaskSpec
    path : path, optional
        The file, named in the error.
    lines : array_like of int, shape (G,), optional
        The file line of each row (default: row + 2, a header on line 1).
    encoded : bool, default True
        Multi-class labels are class indices ``0..C-1`` (as stored); False: the source's class values.
    require_all : bool
        Refuse any missing label (a label *file* of a binary or multi-class task: every row needs its label).
        By default a missing label is allowed whatever the task: a graph store may hold unlabelled graphs (the pool
        labels are bought for).
    limit : int
        At most this many offending lines are listed.

    Returns
    -------
    ndarray of float64, shape (G, T)
        Multi-class labels as class indices; everything else as given.

    Raises
    ------
    InputError
        Listing every offending line (up to ``limit``) and what is wrong: a value outside {0, 1} (binary,
        multitask), not one of the classes (multiclass), not finite, a wrong number of columns, or a missing
        label where the task allows none.
    """
    Y = label_matrix(y)
    if Y.shape[1] != spec.num_targets:
        raise InputError(path, f"{Y.shape[1]} label column(s) for a {spec.type} task with {spec.num_targets} "
                               f"target(s) ({', '.join(spec.targets)})")
    G = Y.shape[0]
    ln = np.arange(2, G + 2) if lines is None else np.asarray(lines, dtype=np.int64)
    missing = np.isnan(Y)
    bad_missing = missing.any(axis=1) if require_all else np.zeros(G, dtype=bool)
    vals = np.where(missing, 0.0, Y)
    problems: list[tuple[int, str]] = []
    inf = ~missing & ~np.isfinite(Y)
    for r in np.flatnonzero(inf.any(axis=1))[:limit]:
        problems.append((int(ln[r]), f"label {Y[r][inf[r]][0]!r} is not a finite number"))
    for r in np.flatnonzero(bad_missing)[:limit]:
        col = spec.targets[int(np.flatnonzero(missing[r])[0])]
        problems.append((int(ln[r]), f"missing label ({col}) where a {spec.type} task needs one"))
    out = Y.copy()
    if spec.type in ("binary", "multitask"):
        bad = ~missing & np.isfinite(Y) & (vals != 0) & (vals != 1)
        for r in np.flatnonzero(bad.any(axis=1))[:limit]:
            v = Y[r][bad[r]][0]
            problems.append((int(ln[r]), f"label {_fmt(v)} is not a binary label (0 or 1)"))
    elif spec.type == "multiclass":
        classes = np.asarray(spec.classes)
        if encoded:
            ok = ~missing & np.isfinite(Y) & _is_int(vals) & (vals >= 0) & (vals < classes.size)
        else:
            ok = ~missing & np.isin(vals, classes)
        bad = ~missing & np.isfinite(Y) & ~ok
        for r in np.flatnonzero(bad.any(axis=1))[:limit]:
            allowed = (f"a class index 0..{classes.size - 1}" if encoded
                       else "one of the classes " + ", ".join(f"{c:g}" for c in classes[:10]))
            problems.append((int(ln[r]), f"label {_fmt(Y[r][0])} is not {allowed}"))
        if not encoded and not problems:
            idx = np.searchsorted(classes, vals[:, 0])
            out = np.where(missing, np.nan, idx.reshape(-1, 1).astype(np.float64))
    if problems:
        problems.sort()
        if len(problems) == 1:  # one problem: "file:line: problem"
            raise InputError(path, f"{problems[0][1]}; the dataset's task is {spec.describe()}", line=problems[0][0])
        more = "" if len(problems) <= limit else "\n  ... and more"
        body = "\n".join(f"  line {n}: {text}" for n, text in problems[:limit]) + more
        raise InputError(path, f"{len(problems)} label problem(s) for the dataset's {spec.describe()} task:\n{body}")
    return out


def decide_task(y, targets=None, override=None, *, current: TaskSpec | None = None,
                path: str | os.PathLike | None = None, lines=None) -> TaskSpec:
    r"""The task of a dataset once labels exist: the one it has, or the one the first labels fix.

    A dataset whose task is decided (``current.decided``) keeps it: the labels are checked against it, and an
    ``override`` naming another type is refused.  An unlabelled pool (``current`` None or :data:`UNLABELLED`) gets
    its task from these labels -- :func:`infer_task`'s rules under ``auto`` (regression for non-integer numbers,
    binary for 0 / 1, multi-class for a small set of integers), or the forced type (``base.task`` / ``--task``).

    Parameters
    ----------
    y : array_like, shape (G,) or (G, T)
        The labels as the lab wrote them (NaN = not measured; multi-class: the class values).
    targets : sequence of str, optional
        Column names (default: ``current``'s, else ``y`` / ``y0..``).
    override : {None, "auto", "binary", "multiclass", "multitask", "regression"}
    current : TaskSpec, optional
        The dataset's task so far.
    path : path, optional
        The label file, named in errors.
    lines : array_like of int, shape (G,), optional
        File line of each row, named in errors.

    Returns
    -------
    TaskSpec
        ``current`` when decided; else the new task, ``source`` ``"import"`` (inferred) or ``"user"`` (forced).

    Raises
    ------
    InputError
        No label to decide from, an override that contradicts a decided task, or labels that do not fit.
    """
    Y = label_matrix(y)
    auto = override in (None, "", "auto")
    if current is not None and current.decided:
        if not auto and override != current.type:
            raise InputError(path, f"--task {override} contradicts the dataset's task, {current.describe()} "
                                   f"(decided {'at ingest' if current.source != 'import' else 'by the first label import'})")
        validate_labels(Y, current, path=path, lines=lines, encoded=False)
        return current
    names = tuple(targets) if targets is not None else (current.targets if current is not None
                                                        and current.num_targets == Y.shape[1] else None)
    if not np.isfinite(Y).any():
        raise InputError(path, "no label value to decide the task from (the pool has no labels yet)")
    spec, _ = task_and_labels(Y, names, None if auto else override, path=path, lines=lines)
    return spec if not auto else replace(spec, source="import")


def _fmt(v) -> str:
    v = float(v)
    return repr(int(v)) if math.isfinite(v) and v == int(v) and abs(v) < 1e15 else repr(v)


def task_of_metadata(meta: dict | None, y=None) -> TaskSpec:
    """The task stored in a graph table's ``tmdlib.*`` metadata (:data:`META_TASK`); binary when absent
    (stores written before task types)."""
    raw = (meta or {}).get(META_TASK)
    if raw is None:
        return BINARY
    if isinstance(raw, bytes):
        raw = raw.decode()
    try:
        return TaskSpec.from_dict(json.loads(raw))
    except (ValueError, TypeError, AttributeError) as err:
        raise InputError(None, f"unreadable task type in the graph store's metadata ({META_TASK}): {err}") from None


# --------------------------------------------------------------------------- sources and stores (ingest)


def _override_spec(override: str, names: tuple, finite: np.ndarray, path) -> TaskSpec:
    """The spec a forced type gives (``infer_task``'s override branch, without its check)."""
    if override not in TASK_TYPES:
        raise InputError(path, f"--task must be auto or one of {', '.join(TASK_TYPES)}; got {override!r}")
    if override in ("binary", "multiclass") and len(names) != 1:
        raise InputError(path, f"a {override} task has one label column; {len(names)} were given ({', '.join(names)})")
    classes = tuple(np.unique(finite).tolist()) if override == "multiclass" else ()
    if override == "multiclass" and len(classes) < 2:
        raise InputError(path, f"a multiclass task needs at least 2 classes; the labels hold {len(classes)}")
    return TaskSpec(override, names, classes, "user")


def task_and_labels(y, targets=None, task=None, *, path: str | os.PathLike | None = None,
                    lines=None) -> tuple[TaskSpec, np.ndarray]:
    r"""Decide the task of labels read from a source and encode them as stored, naming the source's lines.

    :func:`infer_task` then :func:`validate_labels` (``encoded=False``), with the file lines of the rows
    (``lines``), so that a value that does not fit is reported at its own line (blank lines, quoted line
    breaks), and every offending line in one :class:`~tmdlib._errors.InputError`.

    Parameters
    ----------
    y : array_like, shape (G,) or (G, T)
        Labels as read (NaN = missing; multi-class labels as the source's values).
    targets : sequence of str, optional
        Column names (default ``y`` / ``y0..``).
    task : None, "auto", a type of :data:`TASK_TYPES`, or TaskSpec
        ``None`` / ``"auto"``: :func:`infer_task`'s rules; a type: forced (the values must fit it); a
        :class:`TaskSpec`: an existing dataset's task (an appended batch), its classes and all.
    path : path, optional
        The source, named in errors.
    lines : array_like of int, shape (G,), optional
        The source line of each row (default: row + 2).

    Returns
    -------
    spec : TaskSpec
    labels : ndarray of float64, shape (G, T)
        As stored: multi-class labels as class indices ``0..C-1``.

    Notes
    -----
    Labels with no finite value at all are *unlabelled* data (a pool): the task is the one asked for
    (``auto``: binary, or multi-task for several columns) and nothing is checked, as :func:`infer_task`
    does; a forced multi-class task cannot be decided without labels.

    Raises
    ------
    InputError
        An unknown type, a type that needs one column given several, or labels that do not fit the task.
    """
    Y = label_matrix(y)
    T = Y.shape[1]
    names = tuple(targets) if targets is not None else (("y",) if T == 1 else tuple(f"y{i}" for i in range(T)))
    if len(names) != T:
        raise ValueError(f"{len(names)} target names for {T} label columns")
    finite = Y[np.isfinite(Y)]
    auto = task is None or (isinstance(task, str) and task in ("", "auto"))
    if isinstance(task, TaskSpec):
        if task.num_targets != T:
            raise InputError(path, f"{T} label column(s) ({', '.join(names)}) for the dataset's {task.describe()} "
                                   "task")
        spec = task
    elif auto and finite.size == 0:
        return infer_task(Y, names, None, path), Y.copy()
    elif auto:
        # the rules look at the finite values only: infer from the rows that cannot fail a check, then
        # check every row with its own line
        clean = np.where(np.isinf(Y), np.nan, Y)
        if T == 1:
            clean = clean[np.isfinite(clean[:, 0])]
        spec = infer_task(clean, names, None, path)
    else:
        spec = _override_spec(str(task), names, finite, path)
    if finite.size == 0 and not np.isinf(Y).any():
        return spec, Y.copy()
    return spec, validate_labels(Y, spec, path=path, lines=lines, encoded=False)


def source_labels(y, spec: TaskSpec) -> np.ndarray:
    """Stored labels back to the source's values: multi-class indices become the class values (anything else
    NaN: check stored labels with :func:`validate_labels` first); shape (G, T)."""
    Y = label_matrix(y)
    if spec.type != "multiclass":
        return Y.copy()
    classes = np.asarray(spec.classes, dtype=np.float64)
    idx = np.where(np.isfinite(Y), Y, -1).astype(np.int64)
    ok = (idx >= 0) & (idx < classes.size) & (idx == Y)
    return np.where(ok, classes[np.clip(idx, 0, classes.size - 1)], np.nan)


def label_array(y):
    """The store's ``y`` column for labels ``(G,)`` or ``(G, T)``: float64 for one target, ``list<double>`` of
    length ``T`` for several (NaN becomes null), as :func:`tmdlib.datasets._schema.build_graph_table` writes it."""
    import pyarrow as pa

    Y = label_matrix(y)
    g, t = Y.shape
    if t == 1:
        return pa.array(Y[:, 0], type=pa.float64(), mask=np.isnan(Y[:, 0]))
    flat = Y.reshape(-1)
    return pa.ListArray.from_arrays(pa.array(np.arange(g + 1, dtype=np.int32) * t), pa.array(flat, type=pa.float64(),
                                                                                            mask=np.isnan(flat)))


def table_labels(table) -> np.ndarray:
    """The ``y`` column of a graph table as float64 ``(G, T)`` (null = NaN)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = table.column("y").combine_chunks()
    if pa.types.is_list(col.type) or pa.types.is_fixed_size_list(col.type):
        lengths = pc.list_value_length(col).to_numpy(zero_copy_only=False)
        widths = {int(v) for v, valid in zip(lengths, np.asarray(col.is_valid())) if valid}
        if len(widths) > 1:
            raise InputError(None, "column 'y' holds lists of different lengths (T targets per graph)")
        t = widths.pop() if widths else 1
        out = np.full((len(col), t), np.nan)
        valid = np.asarray(col.is_valid())
        if valid.any():
            flat = pc.fill_null(col.filter(pa.array(valid)).flatten().cast(pa.float64()), float("nan"))
            out[valid] = flat.to_numpy(zero_copy_only=False).reshape(-1, t)
        return out
    return pc.fill_null(col.cast(pa.float64()), float("nan")).to_numpy(zero_copy_only=False).reshape(-1, 1)


def table_task(table) -> TaskSpec:
    """The task of a graph table (:data:`META_TASK`; binary for stores written before task types)."""
    from ._schema import graph_table_metadata

    return task_of_metadata(graph_table_metadata(table))


def with_task(table, spec: TaskSpec, y=None):
    """``table`` with its task spec in the schema metadata and, when ``y`` is given, its ``y`` column replaced
    by these (stored, encoded) labels."""
    import pyarrow as pa

    schema = table.schema
    if y is not None:
        arr = label_array(y)
        i = schema.get_field_index("y")
        table = table.set_column(i, pa.field("y", arr.type, nullable=True), arr)
    meta = dict(schema.metadata or {})
    meta[META_TASK.encode()] = spec.to_json().encode()
    return table.replace_schema_metadata(meta)


def store_task(table, task=None, path: str | os.PathLike | None = None):
    """A graph-store table read as a source (a Parquet file) with its task decided and its labels checked.

    A store with a task spec (:data:`META_TASK`) keeps it (its labels are checked against it) unless another
    type is asked for; a store without one (written elsewhere, or before task types) gets its task from its
    labels like a CSV (:func:`task_and_labels`).  Rows are named 1-based.

    Returns
    -------
    pyarrow.Table
        The table with the task spec in its metadata and ``y`` as that task stores it.
    """
    from ._schema import graph_table_metadata

    meta = graph_table_metadata(table)
    y = table_labels(table)
    rows = np.arange(1, y.shape[0] + 1)
    auto = task is None or (isinstance(task, str) and task in ("", "auto"))
    if META_TASK in meta:
        own = task_of_metadata(meta)
        if np.isfinite(y).any() or np.isinf(y).any():  # an unlabelled store is valid under any task
            validate_labels(y, own, path=path, lines=rows, encoded=True)
        if auto or (isinstance(task, TaskSpec) and task == own):
            return table
        y, targets = source_labels(y, own), own.targets
    else:
        targets = ("y",) if y.shape[1] == 1 else tuple(f"y{i}" for i in range(y.shape[1]))
    spec, enc = task_and_labels(y, targets, task, path=path, lines=rows)
    return with_task(table, spec, enc)
