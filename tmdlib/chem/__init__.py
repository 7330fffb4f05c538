r"""Chemists' selection methods and a random forest on ECFP4 fingerprints (RDKit, scikit-learn).

Label-free pickers of ``k`` molecules from an unlabelled pool of SMILES, the way medicinal chemists
choose what to send for measurement, beside the graph coresets of :mod:`tmdlib.select`; and a
second model family (a random forest on ECFP4 counts) beside the GIN.  Imported explicitly
(``import tmdlib.chem``): ``import tmdlib`` never loads RDKit.

================================  ==============================================================
:mod:`tmdlib.chem._fingerprints`   ECFP4 (Morgan radius 2, 2048 bits) bit vectors and count
                                  vectors; Tanimoto distances :math:`d = 1 - T`, by rows
:mod:`tmdlib.chem._pickers`        ``maxmin``, ``leader``, ``butina``, ``fp_kmedoids``,
                                  ``scaffold``: ``f(smiles, k, seed=0, **opts) -> PickResult``;
                                  :func:`memory_bytes` and refusal before allocating
:mod:`tmdlib.chem._forest`         :func:`fit_forest` / :func:`predict`: scikit-learn random forest
                                  (regression or classification), τ as ``sample_weight``
:mod:`tmdlib.chem.models`         the registered fingerprint models ``svm``, ``rf``, ``gbm`` (estimators
                                  with plain-array state); :mod:`tmdlib.chem.lgbm`: ``lgbm`` (LightGBM)
:mod:`tmdlib.chem.estimator`      :class:`EstimatorModel`: an estimator on ECFP4 counts as a model
:mod:`tmdlib.chem._depict`         :func:`mol_2d` / :func:`depict_svg`: deterministic 2D coordinates and
                                  SVG pictures (the audit report's depictions)
:mod:`tmdlib.chem._sdf`            :func:`requests_sdf`: the label requests as an SD file (graph id,
                                  τ, rank, SMILES as properties), the same bytes on every run
================================  ==============================================================

Shapes: a pool of n SMILES; ``PickResult.positions`` (k,) int64 sorted, ``tau`` (k,) float64 (integer-valued) with
:math:`\sum_j \tau_j = n`, ``assignment`` (n,) int64 (the pick of each molecule); count matrices
(n, 2048).

Examples
--------
>>> from tmdlib.chem import pick, fit_forest, predict
>>> from tmdlib.select._coreset import budget_to_k
>>> pool = ["CCO", "CCCO", "c1ccccc1", "Cc1ccccc1", "Oc1ccccc1", "C1CCCCC1", "c1ccncc1", "Cc1ccncc1"]
>>> res = pick("butina", pool, budget_to_k(len(pool), fraction=0.5))
>>> res.k, int(res.tau.sum()), res.positions.dtype.name
(4, 8, 'int64')
>>> model = fit_forest([pool[i] for i in res.positions], [0.1, 0.2, 0.3, 0.4], sample_weight=res.tau,
...                    n_estimators=10)
>>> predict(model, pool).shape
(8,)
"""
from ._fingerprints import (BYTES_PER_FINGERPRINT, ECFP_BITS, ECFP_RADIUS, ecfp4_bits, ecfp4_counts, nearest_pick,
                           parse_smiles, tanimoto_distance_matrix, tanimoto_distances)
from ._depict import DEPICTION_SIZE, depict_svg, mol_2d
from ._forest import TASKS, featurize, fit_forest, predict, predict_proba
from ._pickers import (DETERMINISTIC, PICKER_OPTIONS, PICKERS, PickResult, butina, fp_kmedoids, leader, maxmin,
                      memory_bytes, murcko_scaffolds, pick, scaffold)
from ._sdf import SDF_PROPERTIES, requests_sdf

__all__ = [
    "BYTES_PER_FINGERPRINT",
    "DEPICTION_SIZE",
    "DETERMINISTIC",
    "ECFP_BITS",
    "ECFP_RADIUS",
    "PICKERS",
    "PICKER_OPTIONS",
    "PickResult",
    "SDF_PROPERTIES",
    "TASKS",
    "butina",
    "depict_svg",
    "ecfp4_bits",
    "ecfp4_counts",
    "featurize",
    "fit_forest",
    "fp_kmedoids",
    "leader",
    "maxmin",
    "memory_bytes",
    "mol_2d",
    "murcko_scaffolds",
    "nearest_pick",
    "parse_smiles",
    "pick",
    "predict",
    "predict_proba",
    "requests_sdf",
    "scaffold",
    "tanimoto_distance_matrix",
    "tanimoto_distances",
]
