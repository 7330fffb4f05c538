r"""Predictions with intervals: split-conformal prediction on held-out labelled members (the audit sample).

The model is trained on the coreset; the calibration set :math:`\mathcal C` is labelled and was never trained on (in
production the audit sample, :mod:`tmdlib.select.audit`; in benchmark mode the test split).  With the maintained
library ``crepes`` (Boström et al.):

* **regression** (per target): the absolute residuals :math:`|y_j - \hat y_j|` on :math:`\mathcal C` calibrate a
  ``crepes.ConformalRegressor``; the interval of a member is :math:`\hat y \pm q`, :math:`q` the
  :math:`\lceil(|\mathcal C|+1)\gamma\rceil`-th smallest residual — it covers the true value with probability at
  least :math:`\gamma` (``confidence``) for a member exchangeable with :math:`\mathcal C` (any pool member outside the
  coreset, as the audit sample is uniform over them);
* **classification** (binary, multi-class): the non-conformity :math:`1 - \hat p_{y}` of the true class on
  :math:`\mathcal C` calibrates a ``crepes.ConformalClassifier``; a member's prediction set holds every class whose
  conformal p-value exceeds :math:`1-\gamma` (it contains the true class with probability at least :math:`\gamma`),
  and its class probabilities are the model's (sigmoid / softmax of its outputs).

**Normalised** regression (``sigmas``, :mod:`tmdlib.chem.domain`): with a difficulty :math:`\sigma(x) > 0` per
member (the Tanimoto distance to the trained molecules), the scores are :math:`|y_j - \hat y_j| / \sigma_j` and the
interval :math:`\hat y \pm q\,\sigma(x)` (crepes' ``sigmas``): the same coverage, wider far from the training set.

**Fitted power** (``power=True``): the difficulty enters as :math:`\sigma(x)^{p}`, one exponent :math:`p \in [1,`
:data:`MAX_POWER`:math:`]` per target, the least-squares slope of :math:`\log|y_j - \hat y_j|` on :math:`\log\sigma_j`
over the calibration members: how fast the errors grow with the difficulty on this pool (on MOSES the Tanimoto
distances are squeezed into a narrow range and :math:`p` is 1–5, mostly 1.5–4).  Never below 1 (:data:`MIN_POWER`,
the plain normalisation): within a Mondrian bin the exponent only moves width between its members, and a flatter
fit (0.29–0.99 on 13 of 18 MoleculeACE draws) left the bin's least similar members under-covered (CHEMBL204_Ki out of
domain: 0.81 and 0.79 with the fit, 0.93 and 0.89 with the floor; BENCHMARKS.md).  Nor above :data:`MAX_POWER`: a
too steep p under-covers the similar end of each bin (LightGBM on MOSES, p at the cap: a decile at 0.81).

**Mondrian** (``bins``, crepes' Mondrian conformal regressor): each calibration member carries an ordered category
(:mod:`tmdlib.chem.domain`: its bin of similarity to the trained molecules) and each category is calibrated on its
own members, so the interval covers at :math:`\gamma` *within each bin*, not only over the pool.  A category with
fewer than :func:`min_bin` labelled members for a target is merged into its neighbour (the next higher one; the
highest into the one below) and :meth:`Calibrated.describe` says so: no bin pretends to a coverage its few members
cannot give.

*Validity.*  Split-conformal coverage needs the scores of the calibration members and of a new member to be
exchangeable.  A member of the pool outside the coreset is exchangeable with the audit sample (a uniform draw of
them); within a bin, so are the members of that bin, since a bin is read from the member's features (its
similarity), never its label — coverage :math:`\ge \gamma` holds per bin.  Two choices are read from the
calibration members themselves and are symmetric in them (any order of the members gives the same): the bins'
edges (their similarities, no labels; crepes' own practice with ``binning``) and the exponent :math:`p` (one number
from their residuals).  The new member takes no part in either, a departure from exact exchangeability of order
:math:`1/|\mathcal C|` (bins) and of one fitted parameter (:math:`p`), which the benchmarks measure
(BENCHMARKS.md, "Intervals per decile of similarity").

With fewer than 2 calibration members no interval is given (``lower`` / ``upper`` null) and the result says why.
"""
from __future__ import annotations

import numpy as np

__all__ = ["Calibrated", "calibrate", "probabilities", "min_bin", "fit_power", "MIN_BIN", "MIN_POWER", "MAX_POWER",
           "trained_ids", "prediction_columns", "smiles_outputs", "rows_columns", "calibration_members",
           "pool_chunk", "smiles_table"]

#: The fewest labelled calibration members a Mondrian bin is calibrated on (at 90 %: its expected coverage
#: :math:`\lceil 0.9(n+1)\rceil/(n+1)` is 0.902 and the spread of its realised coverage about 0.04).
MIN_BIN = 50
#: The smallest and the largest exponent of the difficulty (:func:`calibrate` with ``power``).
MIN_POWER, MAX_POWER = 1.0, 5.0


def min_bin(confidence: float) -> int:
    r"""The fewest calibration members of a Mondrian bin at ``confidence``: :data:`MIN_BIN`, or more where a bin of
    that size could only give an infinite interval (:math:`n < \gamma/(1-\gamma)`, e.g. 99 members at 99 %)."""
    return max(MIN_BIN, int(np.ceil(confidence / (1.0 - confidence) - 1e-9)) + 1)


def fit_power(residuals, sigmas) -> float:
    r"""The exponent :math:`p` of the difficulty: the least-squares slope of :math:`\log(|r| + \epsilon)` on
    :math:`\log\sigma` (:math:`\epsilon` = 1e-6 of the residuals' scale), clipped to :math:`[`:data:`MIN_POWER`,
    :data:`MAX_POWER`:math:`]`; 1 when the difficulties do not vary."""
    r = np.abs(np.asarray(residuals, dtype=np.float64))
    ls = np.log(np.asarray(sigmas, dtype=np.float64))
    if len(r) < 3 or np.ptp(ls) <= 0:
        return 1.0
    lr = np.log(r + 1e-6 * max(float(r.mean()), 1e-12))
    slope = np.polyfit(ls, lr, 1)[0]
    return float(np.clip(slope, MIN_POWER, MAX_POWER))


def merge_bins(bins, observed: np.ndarray, smallest: int) -> tuple[np.ndarray, list]:
    """``(map, notes)``: ``map[b]`` the bin category ``b`` is calibrated in, after merging every category with fewer
    than ``smallest`` ``observed`` members into the next higher (the highest into the one below), repeated until
    each has enough or one is left; ``notes`` says which merged and why."""
    b = np.asarray(bins, dtype=np.int64)
    k = int(b.max()) + 1 if len(b) else 1
    groups = [[c] for c in range(k)]
    count = lambda g: int(np.isin(b[observed], g).sum())  # noqa: E731
    notes = []
    i = 0
    while len(groups) > 1 and i < len(groups):
        n = count(groups[i])
        if n >= smallest:
            i += 1
            continue
        j = i + 1 if i + 1 < len(groups) else i - 1
        notes.append(f"similarity bin {groups[i][0]}" + (f"-{groups[i][-1]}" if len(groups[i]) > 1 else "") +
                     f" had {n} labelled calibration members (< {smallest}): merged into bin {groups[j][0]}")
        lo, hi = sorted((i, j))
        groups[lo:hi + 1] = [groups[lo] + groups[hi]]
        i = min(i, lo)
    mapping = np.zeros(k, dtype=np.int64)
    for g, members in enumerate(groups):
        mapping[members] = g
    return mapping, notes


def probabilities(outputs, task) -> np.ndarray:
    """Class probabilities ``(m, C)`` from outputs in task units (binary: ``(m, 2)``, columns 0 and 1)."""
    return task.probabilities(outputs)


class Calibrated:
    """A split-conformal predictor for one trained model (module doc); :meth:`predict` gives the columns of the
    predictions file.

    Attributes
    ----------
    task : TaskSpec
    confidence : float
    n_calibration : int
    note : str or None
        Why there are no intervals, when there are none.
    """

    def __init__(self, task, confidence: float, predictors: list, n_calibration: int, note: str | None = None,
                 normalised: bool = False, powers: list | None = None, bin_maps: list | None = None,
                 bin_table: list | None = None, bin_notes: list | None = None):
        self.task, self.confidence, self.predictors = task, float(confidence), predictors
        self.n_calibration, self.note, self.normalised = int(n_calibration), note, bool(normalised)
        self.powers = powers  # per target: the exponent of the difficulty (None: 1)
        self.bin_maps = bin_maps  # per target: category -> calibrated bin (None: no Mondrian bins)
        self.bin_table = bin_table or []  # per target: [{"bins": [categories], "n_calibration", "q"}]
        self.bin_notes = bin_notes or []
        self.intervals: str | None = None  # the rule's name, where a caller chose one (tmdlib.chem.domain.INTERVALS)

    @property
    def mondrian(self) -> bool:
        """Calibrated per bin (``bins`` given to :func:`calibrate`)."""
        return self.bin_maps is not None

    def describe(self, edges=None) -> dict:
        """What predictions.json states about the intervals: the score, the exponent, and per bin (``edges``: the
        categories' lower similarity bounds, :meth:`tmdlib.chem.domain.Domain.describe`) its calibration members and
        its quantile :math:`q` of the scores (the interval is prediction ± q · difficulty^p), any merged bin said."""
        out = {"rule": self.intervals, "normalised": self.normalised, "mondrian": self.mondrian,
               "confidence": self.confidence, "n_calibration": self.n_calibration}
        if self.powers is not None:
            out["difficulty_power"] = [round(float(p), 4) for p in self.powers]
        if self.mondrian:
            lows = None if edges is None else [0.0] + [float(e) for e in edges]
            targets = list(self.task.prediction_names)
            out["bins"] = {t: [{"similarity_from": None if lows is None else lows[r["bins"][0]],
                                "similarity_to": None if lows is None else (
                                    lows[r["bins"][-1] + 1] if r["bins"][-1] + 1 < len(lows) else 1.0),
                                **r} for r in rows] for t, rows in zip(targets, self.bin_table)}
            out["min_bin"] = min_bin(self.confidence)
            out["bin_notes"] = list(self.bin_notes)
        return out

    def predict(self, outputs, sigmas=None, bins=None) -> dict:
        """Columns for the members whose outputs (task units) are ``outputs`` ``(m, D)``.

        ``sigmas`` ``(m,)``: the members' difficulties, needed when calibrated with them (:func:`calibrate`);
        ``bins`` ``(m,)``: their categories, needed when calibrated per bin.

        Returns
        -------
        dict
            Regression: ``prediction`` ``(m, T)``, ``lower`` / ``upper`` ``(m, T)`` (NaN without calibration).
            Classification: ``prediction`` ``(m,)`` (the most probable class, in the labels' values),
            ``probabilities`` ``(m, C)``, ``prediction_set`` (list of lists of class values; None without
            calibration).
        """
        Z = np.asarray(outputs, dtype=np.float64).reshape(len(outputs), -1)
        m = len(Z)
        if self.task.conformal == "intervals":
            if self.normalised and sigmas is None:
                raise ValueError("calibrated with difficulties (sigmas): predict needs the members' sigmas")
            if self.mondrian and bins is None:
                raise ValueError("calibrated per bin: predict needs the members' bins")
            sig = np.asarray(sigmas, dtype=np.float64) if self.normalised else None
            lower = np.full_like(Z, np.nan)
            upper = np.full_like(Z, np.nan)
            for j, cr in enumerate(self.predictors):
                if cr is not None and m:
                    s_j = sig if sig is None or self.powers is None else sig ** self.powers[j]
                    b_j = None
                    if self.mondrian:
                        cat = np.clip(np.asarray(bins, dtype=np.int64), 0, len(self.bin_maps[j]) - 1)
                        b_j = self.bin_maps[j][cat]
                    iv = cr.predict_int(Z[:, j], sigmas=s_j, bins=b_j, confidence=self.confidence)
                    lower[:, j], upper[:, j] = iv[:, 0], iv[:, 1]
            return {"prediction": Z, "lower": lower, "upper": upper}
        P = probabilities(Z, self.task)
        values = self.class_values()
        out = {"prediction": values[P.argmax(axis=1)], "probabilities": P, "prediction_set": None}
        cc = self.predictors[0] if self.predictors else None
        if cc is not None and m:
            sets = cc.predict_set(1.0 - P, confidence=self.confidence, smoothing=False)
            out["prediction_set"] = [[float(values[c]) for c in np.flatnonzero(row)] for row in sets]
        return out

    def class_values(self) -> np.ndarray:
        return self.task.class_values


def calibrate(outputs_cal, y_cal, task, confidence: float = 0.9, sigmas=None, bins=None,
              power: bool = False) -> Calibrated:
    r"""Fit the conformal predictor on the calibration members' outputs (task units) and labels as stored.

    Parameters
    ----------
    outputs_cal : array_like, shape (c, D)
    y_cal : array_like, shape (c,) or (c, T)
        Labels (multi-class: class indices); NaN = missing (left out).
    task : TaskSpec
    confidence : float
        :math:`\gamma \in (0, 1)`.
    sigmas : array_like, shape (c,), optional
        The calibration members' difficulties (> 0): normalised conformal regression (ignored for classes).
    bins : array_like of int, shape (c,), optional
        The calibration members' ordered categories 0, 1, ...: Mondrian conformal regression, one calibration per
        category, a category with fewer than :func:`min_bin` labelled members merged into its neighbour
        (:func:`merge_bins`; ignored for classes).
    power : bool, default False
        With ``sigmas``: the score is :math:`|r| / \sigma^{p}`, :math:`p` fitted per target (:func:`fit_power`).

    Returns
    -------
    Calibrated
    """
    from crepes import ConformalClassifier, ConformalRegressor

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if task.conformal is None:
        raise ValueError("prediction sets for multi-task labels are not supported (one binary task at a time)")
    Z = np.asarray(outputs_cal, dtype=np.float64)
    Z = Z.reshape(len(Z), -1) if Z.size else np.zeros((0, task.output_dim))
    Y = np.asarray(y_cal, dtype=np.float64)
    Y = Y.reshape(len(Y), -1) if Y.size else np.zeros((0, len(task.prediction_names)))
    few = "fewer than 2 labelled calibration (audit) members: no intervals"
    if task.conformal == "intervals":
        sig = None if sigmas is None else np.asarray(sigmas, dtype=np.float64).reshape(-1)
        cat = None if bins is None else np.asarray(bins, dtype=np.int64).reshape(-1)
        preds, sizes, powers, maps, table, notes = [], [], [], [], [], []
        for j in range(Y.shape[1]):
            obs = ~np.isnan(Y[:, j])
            sizes.append(int(obs.sum()))
            powers.append(fit_power(Y[obs, j] - Z[obs, j], sig[obs]) if power and sig is not None else 1.0)
            if cat is not None:
                mapping, said = merge_bins(cat, obs, min_bin(confidence))
                maps.append(mapping)
                notes += [f"{task.targets[j]}: {n}" if Y.shape[1] > 1 else n for n in said]
            if obs.sum() < 2:
                preds.append(None)
                table.append([])
                continue
            s_j = None if sig is None else sig[obs] ** powers[j]
            b_j = None if cat is None else maps[j][cat[obs]]
            cr = ConformalRegressor()
            cr.fit(residuals=Y[obs, j] - Z[obs, j], sigmas=s_j, bins=b_j)
            preds.append(cr)
            table.append(_bin_rows(cr, maps[j] if cat is not None else None, confidence))
        n = min(sizes) if sizes else 0
        return Calibrated(task, confidence, preds, n, None if all(p is not None for p in preds) else few,
                          normalised=sig is not None, powers=powers if power and sig is not None else None,
                          bin_maps=maps if cat is not None else None, bin_table=table, bin_notes=notes)
    obs = ~np.isnan(Y[:, 0])
    if obs.sum() < 2:
        return Calibrated(task, confidence, [], int(obs.sum()), few)
    P = probabilities(Z[obs], task)
    y = Y[obs, 0].astype(np.int64)
    cc = ConformalClassifier()
    cc.fit(alphas=1.0 - P[np.arange(len(y)), y])
    return Calibrated(task, confidence, [cc], int(obs.sum()))


def _bin_rows(cr, mapping, confidence: float) -> list:
    """Per calibrated bin of a fitted ``crepes.ConformalRegressor``: its categories, members and the quantile q of
    its scores at ``confidence`` (None where too few members give an infinite interval)."""
    if mapping is None:
        groups, alphas = [list(range(1))], [cr.alphas]
    else:
        values, alphas = cr.binned_alphas
        groups = [[int(c) for c in np.flatnonzero(mapping == v)] for v in values]
    rows = []
    for g, a in zip(groups, alphas):
        k = int((1 - confidence) * (len(a) + 1)) - 1  # crepes' index into the descending scores
        rows.append({"bins": g, "n_calibration": int(len(a)), "q": float(a[k]) if k >= 0 else None})
    return rows


def trained_ids(info: dict, sel: dict) -> list:
    """The graph ids a model was trained on: the answered medoids (``train.json`` ``info``'s ``medoids_trained`` when
    part of the coreset was answered), else the selection ``sel``'s medoids."""
    for ids in (info.get("medoids_trained"), sel.get("medoids")):  # lists or arrays (as the readers give them)
        if ids is not None and len(ids):
            return [int(g) for g in ids]
    return []


def prediction_columns(cal: Calibrated, outputs, task, domain=None, smiles=None, dom: dict | None = None) -> dict:
    """The prediction columns of ``m`` members with ``outputs`` ``(m, D)`` (:meth:`Calibrated.predict`).

    Intervals (``task.conformal == "intervals"``): ``prediction``, ``lower``, ``upper`` per target (suffixed by
    :meth:`TaskSpec.column_suffix`); prediction sets: ``prediction``, ``p_<class value>`` per class and
    ``prediction_set`` (the class values, space separated).  With a ``domain`` and the members' ``smiles`` (or its
    columns ``dom`` already measured, :meth:`tmdlib.chem.domain.Domain.columns`): ``nn_similarity`` and
    ``in_domain``, the regression interval calibrated in the member's similarity bin and normalised by its
    difficulty.

    Returns
    -------
    dict
        Column name -> values, ``m`` each.
    """
    if dom is None:
        dom = domain.columns(smiles) if domain is not None else None
    p = cal.predict(outputs, sigmas=None if dom is None else dom["sigma"],
                    bins=None if dom is None else dom.get("bin"))
    cols = {}
    if task.conformal == "intervals":  # a value and its interval per target
        for j in range(len(task.prediction_names)):
            suffix = task.column_suffix(j)
            cols[f"prediction{suffix}"] = p["prediction"][:, j]
            cols[f"lower{suffix}"] = p["lower"][:, j]
            cols[f"upper{suffix}"] = p["upper"][:, j]
    else:
        cols["prediction"] = p["prediction"]
        for c, v in enumerate(cal.class_values()):
            cols[f"p_{v:g}"] = p["probabilities"][:, c]
        sets = p["prediction_set"]
        cols["prediction_set"] = [None if sets is None else " ".join(f"{v:g}" for v in s) for s in
                                  (sets if sets is not None else [None] * len(outputs))]
    if dom is not None:
        cols["nn_similarity"] = dom["nn_similarity"]
        cols["in_domain"] = [None] * len(outputs) if dom["in_domain"] is None else dom["in_domain"]
    return cols


def smiles_outputs(model, smiles: list) -> np.ndarray:
    """A model's outputs ``(m, D)`` for ``m`` valid SMILES: a molecule model reads them, a graph model their graphs
    (:func:`tmdlib.datasets.smiles_input.graphs_from_smiles`, the store's molecule features)."""
    from ..datasets.smiles_input import graphs_from_smiles
    from ._base import Inputs

    if not smiles:
        return np.zeros((0, model.head.task.output_dim))
    ds = graphs_from_smiles(smiles) if model.inputs == "graphs" else None
    return model.outputs(Inputs(dataset=ds, smiles=list(smiles)))


def rows_columns(model, cal: Calibrated, domain, smiles: list, reasons: list) -> dict:
    """The prediction columns (:func:`prediction_columns`) of rows of SMILES as lists of plain values, one entry per
    row: a row with a ``reason`` (no molecule) has nulls, as has a NaN.  What ``tmdsub predict --smiles-csv`` writes
    and the registered model returns."""
    ok = np.array([r is None for r in reasons], dtype=bool)
    good = [s.strip() for s, k in zip(smiles, ok) if k]
    cols = prediction_columns(cal, smiles_outputs(model, good), model.head.task, domain, good)
    where = np.flatnonzero(ok)
    out = {}
    for k, v in cols.items():
        arr = [None] * len(ok)
        for i, val in zip(where, v):
            arr[i] = None if isinstance(val, float) and np.isnan(val) else (val.item() if hasattr(val, "item") else val)
        out[k] = arr
    return out


def calibration_members(graph_ids: np.ndarray, sel: dict, task, labels: dict | None = None, y: np.ndarray | None = None,
                        where: str | None = None) -> tuple[np.ndarray, np.ndarray, str]:
    """The held-out labelled members the intervals are calibrated on.

    Parameters
    ----------
    graph_ids : ndarray of int64, shape (n,)
        The graph store's ids, in store order.
    sel : dict
        ``selection.json`` (``audit_ids``, ``test_ids``).
    task : TaskSpec
        The dataset's task.
    labels : dict, optional
        Production: the lab's ``{graph_id: label}``; the labelled members of the audit sample are calibrated on.
    y : ndarray, optional
        Benchmark mode (no ``labels``): the store's labels, shape ``(n,)`` or ``(n, T)``; the test split is
        calibrated on.
    where : str, optional
        The labels' file, in messages.

    Returns
    -------
    tuple
        ``(positions in the store, labels as stored, what)``: labels of shape ``(m,)`` for one target.
    """
    from ..datasets.documents import positions
    from .policy import selection_labels

    if labels is not None:
        audit = [int(g) for g in sel.get("audit_ids") or [] if int(g) in labels]
        cal = selection_labels(labels, audit, task, where) if audit else np.zeros(0)
        return positions(np.asarray(audit, dtype=np.int64), graph_ids, where, "audit"), cal, \
            f"{len(audit)} labelled audit graphs (production)"
    test = positions(np.asarray(sel["test_ids"], dtype=np.int64), graph_ids, "selection.json", "test_ids")
    y = y[test]
    return test, (y[:, 0] if y.ndim == 2 and task.num_targets == 1 else y), \
        f"{len(test)} test-split graphs with the dataset's labels (benchmark mode)"


def pool_chunk(graph_ids: np.ndarray, cols: dict, labelled: np.ndarray, smiles=None, compound_ids=None):
    """One chunk of the pool's predictions table.

    Parameters
    ----------
    graph_ids : ndarray of int64, shape (m,)
        The chunk's graph ids.
    cols : dict
        Its prediction columns (:func:`prediction_columns`).
    labelled : ndarray of int64
        The graph ids already labelled.
    smiles, compound_ids : list of str, optional
        The chunk's SMILES and the user's compound ids (as ingested), when the pool has them.

    Returns
    -------
    pyarrow.Table
        ``graph_id``, ``smiles`` and ``compound_id`` when given, the prediction columns, ``labelled`` (bool).
    """
    import pyarrow as pa

    head = {"graph_id": pa.array(graph_ids, pa.int64())}
    if smiles is not None:
        head["smiles"] = pa.array(smiles, pa.string())
    if compound_ids is not None:
        head["compound_id"] = pa.array(compound_ids, pa.string())
    head.update({k: pa.array(v) for k, v in cols.items()})
    head["labelled"] = pa.array(np.isin(graph_ids, labelled))
    return pa.table(head)


def smiles_table(rows, cols: dict):
    """The predictions table of a user's SMILES file: ``line``, ``smiles``, the prediction columns ``cols``
    (:func:`rows_columns`) and ``reason`` (why a row gives no molecule; null predictions there).

    ``rows``: the file's rows (``line``, ``smiles``, ``reason``, :func:`tmdlib.datasets.smiles_input.read_prediction_smiles`).
    """
    import pyarrow as pa

    out = {"line": pa.array(rows.line, pa.int64()), "smiles": pa.array(rows.smiles, pa.string())}
    out.update({k: pa.array(v) for k, v in cols.items()})
    out["reason"] = pa.array(rows.reason, pa.string())
    return pa.table(out)
