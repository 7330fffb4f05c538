r"""Families of pools for the pool benchmark: where a team's pool usually is, built from shipped data.

The 30 MoleculeACE target sets each mix several chemical series measured on one target.  A lead-optimisation team's
pool is more often **one series**, and many teams label a **physical property**, not a bioactivity.  A picker chosen
on one family need not carry to the others, so the benchmark measures each family on its own line
(:func:`family_of`):

* ``target sets``: the 30 MoleculeACE sets whole (bioactivity, :math:`-\log_{10}` Ki / EC50);
* ``series``: per target set, its **largest cluster at a stated similarity** (:func:`series_members`): RDKit's
  Taylor--Butina clustering (``rdkit.ML.Cluster.Butina``) on ECFP4 bit vectors at Tanimoto distance
  :data:`SERIES_DISTANCE` (every member within Tanimoto similarity :math:`1 - 0.6 = 0.4` of the cluster's
  centroid), kept when it holds at least :data:`SERIES_MIN` molecules: one series measured on one target;
* ``property``: uniform subsets of MOSES (:data:`PROPERTY_SIZE` molecules each, a different seed per pool) labelled
  with an **RDKit-computed** property (:data:`PROPERTIES`) that plays the lab -- flagged as computed wherever it
  is reported: a physical property of small drug-like molecules, not a measurement;
* ``classification``: the shipped OGB molecule sets (ogbg-molbace, ogbg-molbbbp), binary.

Imports RDKit when used, not when imported.
"""
from __future__ import annotations

import numpy as np

__all__ = ["FAMILIES", "family_of", "series_members", "PROPERTIES", "property_values", "property_pool_members",
           "SERIES_DISTANCE", "SERIES_MIN", "PROPERTY_SIZE", "SERIES_PREFIX", "PROPERTY_PREFIX"]

#: The families in report order.
FAMILIES = ("target sets", "series", "property", "classification")
#: Butina's Tanimoto distance threshold (ECFP4 bits) that cuts a series.
SERIES_DISTANCE = 0.6
#: The smallest series kept as a pool.
SERIES_MIN = 250
#: Molecules per property pool.
PROPERTY_SIZE = 2000
SERIES_PREFIX = "series-"
PROPERTY_PREFIX = "moses-"
#: RDKit-computed properties that play the lab on the property pools (name -> what it is).
PROPERTIES = {
    "logp": "Crippen logP (Wildman & Crippen 1999), RDKit Crippen.MolLogP",
    "tpsa": "topological polar surface area (Ertl et al. 2000), RDKit rdMolDescriptors.CalcTPSA",
    "qed": "quantitative estimate of drug-likeness (Bickerton et al. 2012), RDKit QED.qed",
    "fsp3": "fraction of sp3 carbons, RDKit rdMolDescriptors.CalcFractionCSP3",
}


def family_of(name: str) -> str:
    """The family of a benchmark pool by its name (module doc)."""
    if name.startswith(SERIES_PREFIX):
        return "series"
    if name.startswith(PROPERTY_PREFIX):
        return "property"
    if name.startswith("ogbg-"):
        return "classification"
    return "target sets"


def series_members(smiles, distance: float = SERIES_DISTANCE) -> np.ndarray:
    r"""The largest Butina cluster of a set: positions of its members, sorted.

    Taylor--Butina (RDKit ``Butina.ClusterData`` on the dense Tanimoto-distance matrix of ECFP4 bit vectors): the
    molecule with the most neighbours within ``distance`` becomes a centroid and takes them, repeatedly.  The first
    cluster returned is the largest.

    Parameters
    ----------
    smiles : sequence of str, length n
    distance : float
        Tanimoto distance threshold :math:`t`: a member's similarity to its centroid is at least :math:`1 - t`.

    Returns
    -------
    ndarray of int64, shape (m,)
    """
    from rdkit import DataStructs
    from rdkit.ML.Cluster import Butina

    from ..chem._fingerprints import ecfp4_bits

    fps = ecfp4_bits(list(smiles))
    n = len(fps)
    D = np.zeros((n, n))
    for i in range(1, n):
        D[i, :i] = 1.0 - np.asarray(DataStructs.BulkTanimotoSimilarity(fps[i], fps[:i]))
    D = D + D.T
    clusters = Butina.ClusterData(D, n, float(distance), isDistData=True)
    best = max(clusters, key=len)
    return np.sort(np.asarray(best, dtype=np.int64))


def property_values(smiles, prop: str) -> np.ndarray:
    """An RDKit-computed property (:data:`PROPERTIES`) per SMILES; NaN where RDKit cannot parse it.

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    from rdkit import Chem, RDLogger
    from rdkit.Chem import QED, Crippen, rdMolDescriptors

    if prop not in PROPERTIES:
        raise ValueError(f"unknown property {prop!r}: {', '.join(PROPERTIES)}")
    fn = {"logp": Crippen.MolLogP, "tpsa": rdMolDescriptors.CalcTPSA, "qed": QED.qed,
          "fsp3": rdMolDescriptors.CalcFractionCSP3}[prop]
    RDLogger.DisableLog("rdApp.*")
    out = np.full(len(smiles), np.nan)
    for i, s in enumerate(smiles):
        m = Chem.MolFromSmiles(s)
        if m is not None:
            out[i] = float(fn(m))
    return out


def property_pool_members(n_source: int, index: int, size: int = PROPERTY_SIZE, seed: int = 0) -> np.ndarray:
    """Positions of the ``index``-th property pool in a source of ``n_source`` molecules: a uniform draw of ``size``,
    disjoint from the pools before it (one permutation, consecutive slices), sorted.

    Returns
    -------
    ndarray of int64, shape (size,)
    """
    if (int(index) + 1) * int(size) > int(n_source):
        raise ValueError(f"{n_source} molecules cannot give pool {index} of {size}")
    perm = np.random.default_rng([int(seed), 0x9A7]).permutation(int(n_source))
    return np.sort(perm[int(index) * int(size):(int(index) + 1) * int(size)]).astype(np.int64)
