r"""ECFP4 fingerprints of SMILES and Tanimoto distances between them (RDKit).

ECFP4 here is RDKit's Morgan fingerprint of radius 2 folded to 2048 bits
(``rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=2048)``, default
connectivity invariants, no chirality):

* **bits** (:func:`ecfp4_bits`): one ``ExplicitBitVect`` per molecule, what RDKit's
  pickers and ``BulkTanimotoSimilarity`` take;
* **counts** (:func:`ecfp4_counts`): an ``(n, 2048)`` array of environment counts, what the
  random forest (:mod:`tmdlib.chem._forest`) takes.

For bit sets :math:`A, B` the Tanimoto similarity is

.. math:: T(A, B) = \frac{|A \cap B|}{|A \cup B|} = \frac{|A \cap B|}{|A| + |B| - |A \cap B|}

and the *Tanimoto distance* :math:`d(A, B) = 1 - T(A, B) \in [0, 1]` (a metric on bit sets).
Every distance here is computed by RDKit's ``DataStructs.BulkTanimotoSimilarity(...,
returnDistance=True)``, one fingerprint against a list at a time, so the memory of a call is
its output plus one row.

A SMILES that RDKit cannot parse, or that has no atoms, raises one
:class:`~tmdlib._errors.InputError` naming its position; RDKit's own error log is silenced.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np

from .._errors import InputError

__all__ = [
    "ECFP_RADIUS",
    "ECFP_BITS",
    "BYTES_PER_FINGERPRINT",
    "parse_smiles",
    "ecfp4_bits",
    "ecfp4_counts",
    "tanimoto_distances",
    "tanimoto_distance_matrix",
    "nearest_pick",
]

#: Morgan radius of ECFP4 (diameter 4 = 2 x radius).
ECFP_RADIUS = 2
#: Folded length of the ECFP4 bit / count vectors.
ECFP_BITS = 2048
#: Resident bytes of one 2048-bit ``ExplicitBitVect`` held in a Python list (measured: about 477
#: with RDKit 2026.09; rounded up), used by the memory estimates of :mod:`tmdlib.chem._pickers`.
BYTES_PER_FINGERPRINT = 512


@lru_cache(maxsize=1)
def _generator():
    from rdkit.Chem import rdFingerprintGenerator

    return rdFingerprintGenerator.GetMorganGenerator(radius=ECFP_RADIUS, fpSize=ECFP_BITS)


def _mols(smiles: Sequence[str]):
    """Yield ``(position, Mol)`` for every SMILES; InputError at the first one RDKit rejects."""
    from rdkit import Chem, rdBase

    if isinstance(smiles, (str, bytes)):
        raise InputError(None, "expected a sequence of SMILES strings, got a single string")
    with rdBase.BlockLogs():
        for i, smi in enumerate(smiles):
            mol = Chem.MolFromSmiles(smi) if isinstance(smi, str) and smi.strip() else None
            if mol is None or mol.GetNumAtoms() == 0:
                raise InputError(None, f"invalid SMILES {smi!r} at position {i} (0-based; row {i + 1}): "
                                       "rdkit cannot parse it, or it has no atoms", line=i + 1)
            yield i, mol


def parse_smiles(smiles: Sequence[str]) -> list:
    """RDKit molecules of a list of SMILES.

    Parameters
    ----------
    smiles : sequence of str, length n

    Returns
    -------
    list of rdkit.Chem.Mol, length n

    Raises
    ------
    InputError
        At the first SMILES that RDKit cannot parse or that has no atoms (an empty string,
        ``None``, ``NaN``); the message names its 0-based position and the string, and
        ``error.line`` is the 1-based row.
    """
    return [mol for _, mol in _mols(smiles)]


def ecfp4_bits(smiles: Sequence[str]) -> list:
    """ECFP4 bit vectors (Morgan radius 2, 2048 bits) of a list of SMILES.

    Molecules are parsed one at a time and not kept (about 0.5 KB per fingerprint).

    Parameters
    ----------
    smiles : sequence of str, length n

    Returns
    -------
    list of rdkit.DataStructs.ExplicitBitVect, length n

    Raises
    ------
    InputError
        As :func:`parse_smiles`.
    """
    gen = _generator()
    return [gen.GetFingerprint(mol) for _, mol in _mols(smiles)]


def ecfp4_counts(smiles: Sequence[str], dtype=np.float32) -> np.ndarray:
    """ECFP4 count vectors (Morgan radius 2, 2048 folded positions) of a list of SMILES.

    Entry :math:`(i, b)` counts the atom environments (radius 0, 1, 2) of molecule :math:`i`
    hashed to position :math:`b`.

    Parameters
    ----------
    smiles : sequence of str, length n
    dtype : numpy dtype, default float32
        ``float32`` is what scikit-learn's trees work in (no copy when fitting);
        ``uint8`` takes a quarter of the memory, counts above 255 saturate at 255.

    Returns
    -------
    ndarray of ``dtype``, shape (n, 2048)

    Raises
    ------
    InputError
        As :func:`parse_smiles`.
    """
    dtype = np.dtype(dtype)
    gen = _generator()
    if isinstance(smiles, (str, bytes)):
        raise InputError(None, "expected a sequence of SMILES strings, got a single string")
    out = np.zeros((len(smiles), ECFP_BITS), dtype=dtype)  # filled row by row: no second copy of the counts
    top = np.iinfo(dtype).max if dtype.kind in "ui" else None
    for i, mol in _mols(smiles):
        row = gen.GetCountFingerprintAsNumPy(mol)
        out[i] = row if top is None else np.minimum(row, top)
    return out


def _bulk_distance(fp, fps) -> np.ndarray:
    from rdkit import DataStructs

    return np.asarray(DataStructs.BulkTanimotoSimilarity(fp, fps, returnDistance=True), dtype=np.float64)


def tanimoto_distances(queries: Sequence, fps: Sequence) -> np.ndarray:
    r"""Tanimoto distances :math:`1 - T(q_a, f_b)` between two lists of bit vectors.

    Parameters
    ----------
    queries : sequence of ExplicitBitVect, length m
    fps : sequence of ExplicitBitVect, length n

    Returns
    -------
    ndarray of float64, shape (m, n)
    """
    fps = list(fps)
    out = np.empty((len(queries), len(fps)), dtype=np.float64)
    for a, q in enumerate(queries):
        out[a] = _bulk_distance(q, fps)
    return out


def tanimoto_distance_matrix(fps: Sequence, dtype=np.float64, block: int = 256) -> np.ndarray:
    r"""The symmetric :math:`n \times n` Tanimoto distance matrix of a list of bit vectors.

    Computed by blocks of ``block`` rows: row :math:`i` of a block gets :math:`d(f_i, f_j)` for
    :math:`j \ge i` (one ``BulkTanimotoSimilarity`` call), then the block is mirrored below the
    diagonal, so each pair is computed once and the memory is the output (:math:`8 n^2` bytes in
    float64) plus one row.

    Parameters
    ----------
    fps : sequence of ExplicitBitVect, length n
    dtype : numpy dtype, default float64
    block : int, default 256
        Rows per block.

    Returns
    -------
    ndarray of ``dtype``, shape (n, n)
        Zero diagonal, symmetric, entries in :math:`[0, 1]`.
    """
    fps = list(fps)
    n = len(fps)
    D = np.empty((n, n), dtype=dtype)
    for a in range(0, n, block):
        b = min(n, a + block)
        for i in range(a, b):
            D[i, i:] = _bulk_distance(fps[i], fps[i:])
        sq = D[a:b, a:b]
        low = np.tril_indices(b - a, -1)
        sq[low] = sq.T[low]
        D[b:, a:b] = D[a:b, b:].T
    if n:
        np.fill_diagonal(D, 0)
    return D


def nearest_pick(fps: Sequence, picks, members=None) -> tuple[np.ndarray, np.ndarray]:
    r"""Assign molecules to their nearest pick by Tanimoto distance.

    Molecule :math:`i` goes to :math:`\arg\min_{p \in P} d(f_i, f_p)`, ties to the lowest pick
    position; a pick is always assigned to itself (even when another pick has the identical
    fingerprint).  Cost: :math:`|P|` calls of ``BulkTanimotoSimilarity`` over the members, memory
    :math:`O(n)`.

    Parameters
    ----------
    fps : sequence of ExplicitBitVect, length n
        The pool.
    picks : array_like of int, shape (k,)
        Distinct positions into the pool.
    members : array_like of int, shape (m,), optional
        Only assign these positions (default: all n).

    Returns
    -------
    assignment : ndarray of int64, shape (m,)
        The position (into the pool) of each member's nearest pick.
    distance : ndarray of float64, shape (m,)
        Its Tanimoto distance (0 for a pick).
    """
    picks = np.unique(np.asarray(picks, dtype=np.int64))
    members = np.arange(len(fps), dtype=np.int64) if members is None else np.asarray(members, dtype=np.int64)
    sub = [fps[i] for i in members]
    best = np.full(members.size, np.inf)
    arg = np.zeros(members.size, dtype=np.int64)
    for p in picks:  # ascending: a strict improvement is needed, so ties stay with the lower pick
        d = _bulk_distance(fps[p], sub)
        better = d < best
        best[better] = d[better]
        arg[better] = p
    own = np.isin(members, picks)
    arg[own] = members[own]
    best[own] = 0.0
    return arg, best
