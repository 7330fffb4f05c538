r"""The applicability domain of a model trained on molecules: how similar a molecule is to what was trained on.

For each molecule :math:`x` and the trained (labelled training) molecules :math:`t_1..t_k`, on ECFP4 counts
(:func:`tmdlib.chem._fingerprints.ecfp4_counts`) and the MinMax (Tanimoto) similarity
:math:`K` (:func:`tmdlib.chem.models.minmax_kernel`):

* ``nn_similarity`` :math:`= \max_i K(x, t_i)`, the similarity to the nearest trained molecule;
* the **difficulty** :math:`\sigma(x) = 1 - \tfrac1{n}\sum_{i \in N_n(x)} K(x, t_i) + \beta` (the mean Tanimoto
  distance to the :math:`n` = :data:`NEIGHBOURS` nearest trained molecules, :math:`\beta` = :data:`BETA`), which
  normalises the conformal regression (:mod:`tmdlib.models.predict`): the interval is :math:`\hat y \pm q\,\sigma(x)`
  with :math:`q` calibrated on :math:`|y - \hat y| / \sigma` of the audit sample, so it widens with the distance to
  the training set and keeps its coverage (the normalised scores are exchangeable like the plain ones);
* ``in_domain`` :math:`= [\text{nn\_similarity} \ge \theta]`, the **threshold** :math:`\theta` the
  :data:`QUANTILE` quantile of the nearest-neighbour similarities of the labelled audit sample (a uniform sample of
  the pool, never trained on): a molecule is out of domain when it is farther from the training set than all but
  the 5 % least covered of the pool itself.  With no audit sample there is no threshold and ``in_domain`` is null;
* the **similarity bins** (:meth:`Domain.set_bins`): the calibration members sorted by ``nn_similarity`` and cut into
  :math:`k = \min(` :data:`MAX_BINS`, :math:`\lfloor c / m \rfloor)` bins of equal count, :math:`m` =
  :func:`tmdlib.models.predict.min_bin` (50 at 90 %), so each bin holds at least :math:`m` calibration members
  (one bin, no split, below :math:`2m`); ``bin`` of a molecule is the bin its ``nn_similarity`` falls in.

**The intervals** (:data:`INTERVALS`, :func:`calibrate_with_domain`): by default Mondrian conformal regression per
similarity bin, normalised within a bin by :math:`\sigma(x)^p` with :math:`p` fitted on the calibration members
(:func:`tmdlib.models.predict.calibrate`, which states why the intervals stay valid: bins and :math:`p` read
symmetrically from the calibration members, the bins from their similarities only).  Why: the audit sample is
uniform, so its few members far from the training set barely move one pool-wide quantile; a quantile per bin holds
the coverage in the least similar bin too (MOSES, computed logP, out of domain: 0.82 → 0.90, BENCHMARKS.md
"Intervals per decile of similarity").  ``"normalised"`` is issue 61's rule (one quantile, :math:`p = 1`).

The Tanimoto kernel is the fingerprint models' own (the SVMs'); for a GIN on a molecule pool the same fingerprints
measure the distance, which is the chemists' notion of "like the training set", not the GIN's.  A pool without
SMILES (TU graphs) has no domain columns: the TMD to the nearest trained graph is not computed.

Imports RDKit when used, not when imported.
"""
from __future__ import annotations

import numpy as np

__all__ = ["Domain", "calibrate_with_domain", "outputs_with_domain", "NEIGHBOURS", "QUANTILE", "BETA", "RULE",
           "MAX_BINS", "INTERVALS", "intervals_meta", "domain_meta"]

#: Trained molecules the difficulty averages over.
NEIGHBOURS = 5
#: The audit sample's quantile of nearest-neighbour similarity that is the in-domain threshold.
QUANTILE = 0.05
#: Added to the mean Tanimoto distance so a training molecule's difficulty is not 0.
BETA = 0.05
#: The threshold rule, as predictions.json states it.
RULE = (f"in_domain: Tanimoto (MinMax on ECFP4 counts) similarity to the nearest trained molecule >= the "
        f"{QUANTILE:g} quantile of the labelled audit sample's (a uniform sample of the pool, never trained on)")
#: The most similarity bins the intervals are calibrated in (deciles).
MAX_BINS = 10
#: The interval rules of :func:`calibrate_with_domain`, the default first.
INTERVALS = {
    "similarity-bins": "Mondrian split-conformal (crepes) per bin of similarity to the nearest trained molecule "
                       "(equal-count bins of the calibration members, each >= min_bin of them), normalised within "
                       "a bin: |residual| / difficulty^p, p fitted on the calibration members",
    "normalised": "split-conformal (crepes), one quantile of |residual| / difficulty over all calibration members",
}
#: Molecules fingerprinted at a time.
BLOCK = 4096


class Domain:
    """The trained molecules' fingerprints and the in-domain threshold (module doc).

    Parameters
    ----------
    train_smiles : sequence of str
        The molecules the model was trained on (valid SMILES).
    """

    def __init__(self, train_smiles):
        from tmdlib.chem._fingerprints import ecfp4_counts
        from tmdlib.chem._minmax import MinMaxIndex

        if not len(train_smiles):
            raise ValueError("no trained molecules: no applicability domain")
        self.index = MinMaxIndex(ecfp4_counts(list(train_smiles)))  # sparse: a few MB for 16,000 molecules
        self.n_trained = int(self.index.n)
        self.threshold: float | None = None
        self.n_audit = 0
        self.edges = np.zeros(0)  # the similarity bins' interior lower bounds, ascending (none: one bin)
        self.bin_sizes: list = []  # calibration members per bin

    def measure(self, smiles) -> tuple[np.ndarray, np.ndarray]:
        """``(nn_similarity, sigma)`` of valid SMILES, each ``(m,)``."""
        from tmdlib.chem._fingerprints import ecfp4_counts

        m = len(smiles)
        sim, sigma = np.zeros(m), np.zeros(m)
        for a in range(0, m, BLOCK):
            sim[a:a + BLOCK], sigma[a:a + BLOCK] = self.measure_counts(ecfp4_counts(list(smiles[a:a + BLOCK])))
        return sim, sigma

    def measure_counts(self, counts) -> tuple[np.ndarray, np.ndarray]:
        """``(nn_similarity, sigma)`` of molecules given by their ECFP4 counts ``(m, 2048)`` (the model's own
        fingerprints, computed once per chunk of a pool), each ``(m,)``; exact (:class:`MinMaxIndex`)."""
        _, top = self.index.scan(counts, top=NEIGHBOURS)
        if top is None:
            return np.zeros(len(counts)), np.zeros(len(counts))
        return top[:, 0].copy(), 1.0 - top.mean(axis=1) + BETA

    def set_threshold(self, audit_similarity) -> None:
        """The threshold from the audit sample's nearest-neighbour similarities (none when it is empty)."""
        s = np.asarray(audit_similarity, dtype=np.float64)
        self.n_audit = int(len(s))
        self.threshold = float(np.quantile(s, QUANTILE, method="lower")) if len(s) else None

    def set_bins(self, calibration_similarity, smallest: int) -> None:
        r"""Equal-count bins of the calibration members' similarities (module doc): :math:`k` bins of
        :math:`\lfloor c/k \rfloor` members or more, an edge moved up past tied similarities (a tie never straddles
        an edge), a remainder too small for a bin of its own left in the bin below, so every bin holds at least
        ``smallest``."""
        s = np.sort(np.asarray(calibration_similarity, dtype=np.float64))
        n = len(s)
        k = min(MAX_BINS, n // max(int(smallest), 1))
        edges = []
        if k >= 2:
            size, start = n // k, 0
            while True:
                pos = start + size
                while pos < n and s[pos] == s[pos - 1]:
                    pos += 1
                if n - pos < size:
                    break
                edges.append(s[pos])
                start = pos
        self.edges = np.asarray(edges, dtype=np.float64)
        self.bin_sizes = np.bincount(self.bin_of(s), minlength=len(self.edges) + 1).tolist() if n else []

    def bin_of(self, similarity) -> np.ndarray:
        """The similarity bin ``(m,)`` of each similarity: the number of edges at or below it."""
        return np.searchsorted(self.edges, np.asarray(similarity, dtype=np.float64), side="right").astype(np.int64)

    def columns(self, smiles) -> dict:
        """``{"nn_similarity", "in_domain", "sigma", "bin"}`` of valid SMILES (``in_domain`` None without
        threshold)."""
        return self.flag(*self.measure(smiles))

    def columns_counts(self, counts) -> dict:
        """:meth:`columns` of molecules given by their ECFP4 counts ``(m, 2048)``."""
        return self.flag(*self.measure_counts(counts))

    def flag(self, sim: np.ndarray, sigma: np.ndarray) -> dict:
        """``{"nn_similarity", "in_domain", "sigma", "bin"}`` from measured similarities and difficulties."""
        inside = None if self.threshold is None else sim >= self.threshold
        return {"nn_similarity": sim, "in_domain": inside, "sigma": sigma, "bin": self.bin_of(sim)}

    def describe(self) -> dict:
        """What predictions.json states about the domain."""
        return {"similarity": "Tanimoto (MinMax) on ECFP4 counts to the nearest trained molecule",
                "threshold": self.threshold, "rule": RULE, "n_audit": self.n_audit, "n_trained": self.n_trained,
                "difficulty": f"1 - mean similarity to the {NEIGHBOURS} nearest trained molecules + {BETA:g} "
                              "(normalised conformal regression: the interval is prediction +- q * difficulty^p)",
                "similarity_bins": {"lower_edges": [float(e) for e in self.edges],
                                    "n_calibration": list(self.bin_sizes),
                                    "rule": f"equal-count bins of the calibration members' nn_similarity, at most "
                                            f"{MAX_BINS}, each >= min_bin members; one bin below 2 x min_bin"}}


def calibrate_with_domain(train_smiles, cal_outputs, cal_smiles, y_cal, task, confidence: float = 0.9,
                          intervals: str = "similarity-bins") -> tuple:
    """``(Calibrated, Domain or None)``: the applicability domain of the trained molecules (its threshold and
    similarity bins from the calibration members, the labelled audit sample) and the conformal predictor of rule
    ``intervals`` (:data:`INTERVALS`; module doc), :func:`tmdlib.models.predict.calibrate`.  No trained SMILES (a
    pool of graphs): no domain, plain split-conformal."""
    from tmdlib.models.predict import calibrate, min_bin

    if intervals not in INTERVALS:
        raise ValueError(f"intervals must be one of {sorted(INTERVALS)}, got {intervals!r}")
    domain = sigmas = bins = None
    if train_smiles is not None and len(train_smiles):
        domain = Domain(list(train_smiles))
        sim, sigmas = domain.measure([] if cal_smiles is None else list(cal_smiles))
        domain.set_threshold(sim)
        if intervals == "similarity-bins" and task.conformal == "intervals":  # prediction sets: one quantile
            domain.set_bins(sim, min_bin(confidence))
            bins = domain.bin_of(sim)
    cal = calibrate(cal_outputs if len(y_cal) else [], y_cal, task, confidence, sigmas=sigmas, bins=bins,
                    power=bins is not None)
    cal.intervals = intervals if domain is not None and task.conformal == "intervals" else None
    if bins is not None and len(domain.edges) == 0 and len(sim):
        m = min_bin(confidence)
        why = (f"fewer than 2 x {m}" if len(sim) < 2 * m else f"their similarities too tied to cut bins of {m}")
        cal.bin_notes.insert(0, f"{len(sim)} calibration members, {why}: one similarity bin (no split by "
                                "similarity; coverage is not calibrated per bin)")
    return cal, domain


def outputs_with_domain(model, domain, smiles, positions=None, dataset=None) -> tuple:
    """``(outputs (m, D), domain columns or None)`` of pool members: a molecule's ECFP4 counts are computed once and
    serve both the model (a fingerprint model, :class:`tmdlib.chem.estimator.EstimatorModel`, reads them as
    ``Inputs.features``; others ignore them) and the ``domain`` (:meth:`Domain.columns_counts`).  A graph model reads
    ``dataset`` at ``positions`` instead of the SMILES."""
    from tmdlib.chem.estimator import EstimatorModel
    from tmdlib.chem._fingerprints import ecfp4_counts
    from tmdlib.models import Inputs

    counts = None
    if smiles is not None and (domain is not None or isinstance(model, EstimatorModel)):
        counts = ecfp4_counts(smiles)
    if model.inputs == "molecules":
        outputs = model.outputs(Inputs(smiles=smiles, features=counts))
    else:
        outputs = model.outputs(Inputs(dataset, None, positions))
    return outputs, (domain.columns_counts(counts) if domain is not None and counts is not None else None)


def intervals_meta(cal, domain: Domain | None) -> dict:
    """``predictions.json``'s ``intervals``: the rule (:data:`INTERVALS`), the difficulty's exponent, and per
    similarity bin its range, calibration members and quantile, with any bin merged for too few members said
    (:meth:`tmdlib.models.predict.Calibrated.describe`)."""
    out = cal.describe(None if domain is None else domain.edges)
    out["method"] = INTERVALS.get(cal.intervals) if cal.intervals else (
        "split-conformal (crepes): absolute residuals (regression), 1 - p(true class) (classification)")
    return out


def domain_meta(domain: Domain | None, table=None) -> dict:
    """``predictions.json``'s ``domain``: the rule and threshold (:meth:`Domain.describe`) and how many of
    ``table``'s rows (a ``pyarrow.Table`` of predictions) are in and out of domain, or why there is none."""
    if domain is None:
        return {"computed": False, "why": "a pool without SMILES: the TMD to the nearest trained graph is not "
                                          "computed (no nn_similarity / in_domain columns)"}
    out = {"computed": True, **domain.describe()}
    if table is not None and "in_domain" in table.column_names:
        flags = table.column("in_domain").to_pylist()
        out["rows_in_domain"] = sum(f is True for f in flags)
        out["rows_out_of_domain"] = sum(f is False for f in flags)
    return out
