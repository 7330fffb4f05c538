r"""Label-free selection of ``k`` molecules with the pickers chemists use (RDKit).

Every picker has the signature ``f(smiles, k, seed=0, **opts) -> PickResult`` and returns exactly
``k`` distinct positions into the pool (``k = budget_to_k(n, fraction=...)`` or a count, as for
:func:`tmdlib.select._coreset.kmedoids_coreset`).  Labels never enter.  All distances are Tanimoto
distances :math:`d = 1 - T` of ECFP4 bit vectors (:mod:`tmdlib.chem._fingerprints`).

* ``maxmin`` -- ``MaxMinPicker().LazyBitVectorPick``: after a seeded first pick, greedily
  :math:`p_{j+1} = \arg\max_i \min_{l \le j} d(i, p_l)`.  No τ unless ``assign=True``.
  Seed-dependent (the first pick).
* ``leader`` -- ``LeaderPicker().LazyBitVectorPick`` (sphere exclusion) at a bisected distance
  threshold; τ from the nearest-pick assignment.  Seed-independent.
* ``butina`` -- ``Butina.ClusterData`` at a bisected threshold, the centroids of the ``k`` largest
  clusters; τ from the nearest-pick assignment.  Seed-independent.
* ``fp_kmedoids`` -- ``kmedoids.fasterpam`` on the :math:`n \times n` Tanimoto matrix; τ the cluster
  sizes.  Seed-dependent (random init, restarts).
* ``scaffold`` -- Bemis–Murcko scaffold groups (``MurckoScaffold``), one Tanimoto medoid per scaffold,
  largest scaffolds first; τ the scaffold groups.  Seed-independent.

Seed-independent methods (:data:`DETERMINISTIC`) still depend on the pool *order*; every method gives
the same picks for the same pool, ``k``, options and seed.

τ and the assignment
--------------------
Where a method defines clusters, ``assignment[i]`` is the position of the pick molecule ``i`` is
assigned to and :math:`\tau_j = |\{i : \mathrm{assignment}_i = p_j\}|`, so :math:`\sum_j \tau_j = n`
and every pick is assigned to itself (:math:`\tau_j \ge 1`).  The *nearest-pick assignment*
(:func:`tmdlib.chem._fingerprints.nearest_pick`) sends :math:`i` to
:math:`\arg\min_j d(i, p_j)`, ties to the lowest position; it minimises
:math:`\sum_i d(i, \mathrm{assignment}_i)` for the picks, the quantity Lemma 3.2 bounds by.

Thresholds
----------
``leader`` and ``butina`` take a Tanimoto *distance* threshold :math:`t \in [0, 1]` (RDKit: pairs
with :math:`d \le t` are neighbours).  Unless ``threshold=`` is given, :math:`t` is found by
bisection on :math:`[0, 1]` to tolerance ``tol``: the largest :math:`t` found at which the method
still yields at least ``k`` picks (leader, stopped at ``k``) or clusters (butina); ``leader``
keeps its first ``k`` picks in pick order, ``butina`` the centroids of the ``k`` largest clusters.

Filling a shortfall
-------------------
``leader`` and ``butina`` yield fewer than ``k`` only when fewer than ``k`` distinct fingerprints
exist at :math:`t = 0` (duplicates), ``scaffold`` when there are fewer than ``k`` scaffolds.  The
rest is filled *round-robin over the groups* (Butina clusters, nearest-pick groups of the leader
picks, scaffold groups), largest group first (ties: the group whose pick comes first), one molecule
per group per round; within a group the next molecule is the one farthest (Tanimoto) from the
group's picks so far, ties to the lowest position.  ``info["filled"]`` counts them.

Memory
------
:func:`memory_bytes` estimates each method's peak, and every picker refuses with an
:class:`~tmdlib._errors.InputError` *before* allocating when it exceeds
:func:`tmdlib.datasets.limits.memory_budget` (for ``butina`` and ``fp_kmedoids`` the message points to
``maxmin`` / ``leader``).  ``butina`` and ``fp_kmedoids`` hold the
:math:`n \times n` float64 Tanimoto matrix (:math:`8 n^2` bytes: 12.9 TB at n = 1.27 M);
``maxmin``, ``leader`` and ``scaffold`` are :math:`O(n)` (about 0.6 KB per molecule).
``butina`` passes the dense matrix to ``ClusterData`` (RDKit >= 2025.03 accepts it): the classic
condensed list of :math:`n(n-1)/2` Python floats costs about 40 bytes per pair, and today's
``ClusterData`` turns it into the dense matrix anyway (measured peak 88 bytes per pair, against 16.7
for the dense matrix, i.e. :math:`8 n^2` bytes).  Its neighbour
lists, Python ints of about 36 bytes per pair within the threshold, are counted exactly for each
threshold tried before ``ClusterData`` runs: a threshold whose lists do not fit counts as
yielding too few clusters (the search moves down).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..datasets.limits import format_size, memory_budget
from .._errors import InputError
from . import _fingerprints as _fp

__all__ = [
    "PickResult",
    "PICKERS",
    "PICKER_OPTIONS",
    "DETERMINISTIC",
    "pick",
    "maxmin",
    "leader",
    "butina",
    "fp_kmedoids",
    "scaffold",
    "murcko_scaffolds",
    "memory_bytes",
]

#: Methods whose picks do not depend on ``seed`` (they depend on the pool order).
DETERMINISTIC = ("leader", "butina", "scaffold")

#: Bytes per entry of a Python list of ints made by ``ndarray.tolist()`` (8-byte pointer plus a
#: 28-byte int object), the neighbour lists of ``Butina.ClusterData``.
_BYTES_PER_NEIGHBOUR = 36
#: Per-molecule bookkeeping besides the fingerprint (one returned list of n Python floats from
#: ``BulkTanimotoSimilarity`` (~33 bytes each), its float64 copy, the assignment arrays).
_BYTES_PER_MOLECULE = 96


@dataclass(frozen=True, eq=False)
class PickResult:
    r"""Outcome of a picker.

    Attributes
    ----------
    positions : ndarray of int64, shape (k,)
        The picks, positions into the pool, sorted ascending.
    tau : ndarray of float64, shape (k,), or None
        :math:`\tau_j`, the number of pool molecules assigned to ``positions[j]`` (integer-valued, float64
        so that it goes straight into ``sample_weight``); sums to n.
        None when the method defines no clusters (``maxmin`` without ``assign=True``).
    assignment : ndarray of int64, shape (n,), or None
        Position of each pool molecule's pick (None with ``tau``).
    info : dict
        JSON-ready: ``method``, ``n``, ``k``, ``seed``, ``seconds`` (wall), ``cpu_seconds``, and per
        method the ``threshold`` used, ``clusters``/``scaffolds``, ``filled``, ...
    order : ndarray of int64, shape (k,)
        The same picks in the method's own order (MaxMin / leader pick order, clusters or scaffolds
        largest first, then the fill).
    """

    positions: np.ndarray
    tau: np.ndarray | None
    assignment: np.ndarray | None
    info: dict = field(default_factory=dict)
    order: np.ndarray | None = None

    @property
    def k(self) -> int:
        """Number of picks."""
        return int(self.positions.size)

    @property
    def n(self) -> int:
        """Pool size."""
        return int(self.info["n"])

    @property
    def weights(self) -> np.ndarray | None:
        r"""Shape ``(k,)``: :math:`\tau_j / n` (None without τ)."""
        return None if self.tau is None else self.tau / self.n


# ----------------------------------------------------------------------------------------------
# memory


def memory_bytes(method: str, n: int, k: int) -> int:
    r"""Estimated peak memory (bytes) of a picker on ``n`` molecules picking ``k``.

    * ``maxmin``, ``leader``: :math:`n (b_{fp} + 96) + 32 k` with :math:`b_{fp} = 512` bytes per
      ECFP4 ``ExplicitBitVect`` (measured 477);
    * ``scaffold``: that plus 200 bytes per scaffold string and the medoid matrix of the largest
      scaffold group, at most :math:`8 \min(n, 2000)^2`;
    * ``fp_kmedoids``: that of ``maxmin`` plus the :math:`8 n^2` float64 Tanimoto matrix and
      FasterPAM's :math:`O(n)` work arrays;
    * ``butina``: that of ``maxmin`` plus :math:`8 n^2` plus the neighbour lists at their smallest
      (every molecule its own neighbour: :math:`36 n` plus list headers); the lists at each
      threshold tried are counted exactly before ``ClusterData`` runs.

    Parameters
    ----------
    method : {"maxmin", "leader", "butina", "fp_kmedoids", "scaffold"}
        ``"fp-kmedoids"`` is accepted too.
    n, k : int

    Returns
    -------
    int
    """
    method = _canonical(method)
    n, k = int(n), int(k)
    base = n * (_fp.BYTES_PER_FINGERPRINT + _BYTES_PER_MOLECULE) + 32 * k
    if method in ("maxmin", "leader"):
        return base
    if method == "scaffold":
        g = min(n, _MAX_GROUP)
        return base + 200 * n + 8 * g * g
    matrix = 8 * n * n
    if method == "fp_kmedoids":
        return base + matrix + 48 * n
    return base + matrix + n * (_BYTES_PER_NEIGHBOUR + 64 + 120)  # butina: lists, headers, sort tuples


def _check_memory(method: str, n: int, k: int) -> None:
    need, budget = memory_bytes(method, n, k), memory_budget()
    if need <= budget:
        return
    if method in ("butina", "fp_kmedoids"):
        light = memory_bytes("maxmin", n, k)
        raise InputError(None, f"{method} on {n:,} molecules needs an n x n Tanimoto matrix: about "
                               f"{format_size(need)} of memory, more than the {format_size(budget)} available; "
                               f"use maxmin or leader (O(n) memory, about {format_size(light)})")
    raise InputError(None, f"{method} on {n:,} molecules needs about {format_size(need)} of memory, more than "
                           f"the {format_size(budget)} available; pick from a smaller pool")


# ----------------------------------------------------------------------------------------------
# shared pieces


def _check_k(n: int, k) -> int:
    if n < 1:
        raise InputError(None, "the pool is empty (no SMILES)")
    if isinstance(k, bool) or int(k) != k or not 1 <= k <= n:
        raise ValueError(f"k must be an integer in [1, {n}], got {k!r}")
    return int(k)


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or int(seed) != seed or not 0 <= seed < 2**31:
        raise ValueError(f"seed must be an integer in [0, 2**31), got {seed!r}")
    return int(seed)


def _groups_of(assignment: np.ndarray, picks: Sequence[int]) -> list[np.ndarray]:
    """Members (ascending) of each pick's group, in the order of ``picks``."""
    order = np.argsort(assignment, kind="stable")
    keys = assignment[order]
    out = []
    for p in picks:
        lo, hi = np.searchsorted(keys, p, "left"), np.searchsorted(keys, p, "right")
        out.append(order[lo:hi])
    return out


def _fill_round_robin(fps, picks: list[int], groups: list[np.ndarray], k: int) -> list[int]:
    """Top ``picks`` up to ``k``: round-robin over ``groups`` (largest first, stable), in each the member
    farthest from the group's picks so far (ties to the lowest position).  Groups partition the pool and each
    holds at least one pick."""
    sizes = np.array([g.size for g in groups])
    rank = np.argsort(-sizes, kind="stable")
    picked = np.zeros(len(fps), dtype=bool)
    picked[picks] = True
    dmin = []
    for g in groups:
        own = [int(p) for p in g if picked[p]]
        d = np.full(g.size, np.inf)
        for p in own:
            np.minimum(d, _fp._bulk_distance(fps[p], [fps[i] for i in g]), out=d)
        dmin.append(d)
    picks = list(picks)
    while len(picks) < k:
        progressed = False
        for gi in rank:
            if len(picks) == k:
                break
            g, d = groups[gi], dmin[gi]
            free = ~picked[g]
            if not free.any():
                continue
            cand = np.where(free, d, -np.inf)
            j = int(np.argmax(cand))
            p = int(g[j])
            picks.append(p)
            picked[p] = True
            np.minimum(d, _fp._bulk_distance(fps[p], [fps[i] for i in g]), out=d)
            progressed = True
        if not progressed:  # pragma: no cover - groups partition the pool and k <= n
            raise RuntimeError("fill ran out of molecules")
    return picks


def _result(method: str, n: int, k: int, seed: int, order, assignment, t0: tuple[float, float],
            **info) -> PickResult:
    order = np.asarray(order, dtype=np.int64)
    positions = np.sort(order)
    if positions.size != k or np.unique(positions).size != k:  # pragma: no cover - internal invariant
        raise RuntimeError(f"{method} produced {np.unique(positions).size} distinct picks, expected {k}")
    tau = None
    if assignment is not None:
        assignment = np.asarray(assignment, dtype=np.int64)
        tau = np.bincount(np.searchsorted(positions, assignment), minlength=k).astype(np.float64)
    meta = {"method": method, "n": int(n), "k": int(k), "seed": int(seed),
            "seconds": round(time.perf_counter() - t0[0], 6), "cpu_seconds": round(time.process_time() - t0[1], 6)}
    meta.update(info)
    return PickResult(positions=positions, tau=tau, assignment=assignment, info=meta, order=order)


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _bisect(ok: Callable[[float], bool], tol: float) -> tuple[float, bool]:
    """Largest ``t`` in [0, 1) found by bisection on ``ok``; returns ``(t, ok(0))`` (``t = 0`` when ``ok(0)``
    is false).  ``ok(1)`` is never tried: at ``t = 1`` every pair is within the threshold (one pick, one
    cluster), and its neighbour lists would be n^2 Python ints."""
    if not ok(0.0):
        return 0.0, False
    lo, hi = 0.0, 1.0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo, True


def _check_tol(tol: float) -> float:
    tol = float(tol)
    if not 0.0 < tol < 1.0:
        raise ValueError(f"tol must be in (0, 1), got {tol!r}")
    return tol


def _check_threshold(threshold) -> float | None:
    if threshold is None:
        return None
    t = float(threshold)
    if not 0.0 <= t <= 1.0:
        raise ValueError(f"threshold must be a Tanimoto distance in [0, 1], got {threshold!r}")
    return t


# ----------------------------------------------------------------------------------------------
# the pickers


def maxmin(smiles: Sequence[str], k: int, seed: int = 0, *, assign: bool = False) -> PickResult:
    r"""MaxMin diversity picking (Ashton et al. 2002) with RDKit's lazy bit-vector picker.

    ``MaxMinPicker().LazyBitVectorPick(fps, n, k, seed=seed)`` on ECFP4: the first pick is drawn
    from ``seed``, then greedily

    .. math:: p_{j+1} = \arg\max_{i \notin P_j} \min_{l \le j} d(f_i, f_{p_l}).

    MaxMin defines no clusters, so by default there is no τ.

    Parameters
    ----------
    smiles : sequence of str, length n
    k : int
        :math:`1 \le k \le n`.
    seed : int, default 0
        RDKit's seed (in :math:`[0, 2^{31})`): it chooses the first pick, so different seeds may
        give different picks; the same seed always gives the same.
    assign : bool, default False
        Also compute the nearest-pick Tanimoto assignment (:func:`~tmdlib.chem._fingerprints.nearest_pick`,
        :math:`O(nk)` more time) and τ, the number of molecules nearest to each pick.

    Returns
    -------
    PickResult
        ``order`` is MaxMin's pick order; ``tau``/``assignment`` only with ``assign=True``.
    """
    from rdkit.SimDivFilters import rdSimDivPickers

    t0 = _clock()
    n = len(smiles)
    k, seed = _check_k(n, k), _check_seed(seed)
    _check_memory("maxmin", n, k)
    fps = _fp.ecfp4_bits(smiles)
    order = list(rdSimDivPickers.MaxMinPicker().LazyBitVectorPick(fps, n, k, seed=seed))
    filled = 0
    if len(set(order)) < k:  # pragma: no cover - RDKit returns k distinct picks, duplicates included
        rest = [i for i in range(n) if i not in set(order)]
        filled = k - len(set(order))
        order = list(dict.fromkeys(order)) + rest[:filled]
    assignment = _fp.nearest_pick(fps, order)[0] if assign else None
    return _result("maxmin", n, k, seed, order, assignment, t0, assigned=bool(assign), filled=filled)


def leader(smiles: Sequence[str], k: int, seed: int = 0, *, threshold: float | None = None,
           tol: float = 1e-3) -> PickResult:
    r"""Sphere exclusion (leader picking) with RDKit's ``LeaderPicker``.

    ``LeaderPicker().LazyBitVectorPick(fps, n, t, k)`` walks the pool in order and makes a molecule a
    pick unless it lies within Tanimoto distance :math:`t` (:math:`d \le t`) of an earlier pick,
    stopping at ``k`` picks.  The threshold is the largest :math:`t` (bisection on :math:`[0, 1]` to
    ``tol``) at which it still reaches ``k`` picks; the first ``k`` in pick order are kept.  At
    :math:`t = 0` only duplicates are excluded; if even then fewer than ``k`` come out (fewer than
    ``k`` distinct fingerprints), the rest is filled round-robin (module docstring).

    Deterministic: ``seed`` is unused (the first pick is always position 0; the pool order matters).

    Parameters
    ----------
    smiles : sequence of str, length n
    k : int
        :math:`1 \le k \le n`.
    seed : int, default 0
        Recorded only.
    threshold : float, optional
        Use this Tanimoto distance instead of searching; if it yields fewer than ``k`` picks the
        rest is filled round-robin.
    tol : float, default 1e-3
        Bisection tolerance on :math:`t`.

    Returns
    -------
    PickResult
        τ / assignment from the nearest-pick Tanimoto assignment; ``info["threshold"]``.
    """
    from rdkit.SimDivFilters import rdSimDivPickers

    t0 = _clock()
    n = len(smiles)
    k, seed = _check_k(n, k), _check_seed(seed)
    threshold, tol = _check_threshold(threshold), _check_tol(tol)
    _check_memory("leader", n, k)
    fps = _fp.ecfp4_bits(smiles)
    picker = rdSimDivPickers.LeaderPicker()
    calls = 0

    def run(t: float) -> list[int]:
        nonlocal calls
        calls += 1
        return list(picker.LazyBitVectorPick(fps, n, float(t), k))

    if threshold is None:
        threshold, _ = _bisect(lambda t: len(run(t)) >= k, tol)
    order = run(threshold)[:k]
    assignment = _fp.nearest_pick(fps, order)[0]
    filled = k - len(order)
    if filled:
        order = _fill_round_robin(fps, order, _groups_of(assignment, order), k)
        assignment = _fp.nearest_pick(fps, order)[0]
    return _result("leader", n, k, seed, order, assignment, t0, threshold=float(threshold), picker_calls=calls,
                   filled=filled)


def butina(smiles: Sequence[str], k: int, seed: int = 0, *, threshold: float | None = None,
           reordering: bool = False, tol: float = 1e-3) -> PickResult:
    r"""Butina (Taylor–Butina) clustering with RDKit's ``Butina.ClusterData``; centroids of the largest clusters.

    ``ClusterData(D, n, t, isDistData=True, reordering=reordering)`` on the dense :math:`n \times n`
    Tanimoto matrix: molecules with the most neighbours (:math:`d \le t`) become centroids and
    absorb their unassigned neighbours.  The threshold is the largest :math:`t` (bisection on
    :math:`[0, 1]` to ``tol``) giving at least ``k`` clusters; the picks are the centroids of the
    ``k`` largest clusters (sizes descending, ties in RDKit's cluster order).  Every molecule is then
    assigned to its nearest picked centroid (so the members of dropped clusters go to their nearest
    centroid), which gives τ.  If fewer than ``k`` clusters exist even at :math:`t = 0` (fewer than
    ``k`` distinct fingerprints), the rest is filled round-robin over the clusters.

    Deterministic: ``seed`` is unused.

    Parameters
    ----------
    smiles : sequence of str, length n
    k : int
        :math:`1 \le k \le n`.
    seed : int, default 0
        Recorded only.
    threshold : float, optional
        Use this Tanimoto distance instead of searching.
    reordering : bool, default False
        RDKit's option: update neighbour counts after each cluster (slower).
    tol : float, default 1e-3
        Bisection tolerance on :math:`t`.

    Returns
    -------
    PickResult
        ``info``: ``threshold``, ``clusters`` (number at that threshold), ``largest_cluster``, ``filled``,
        ``neighbour_list_bytes`` (the estimated neighbour lists of the largest threshold tried, which come on
        top of :func:`memory_bytes`).

    Raises
    ------
    InputError
        Before allocating, when :func:`memory_bytes` exceeds the memory available (the message
        points to ``maxmin`` / ``leader``), or when no threshold's neighbour lists fit.
    """
    from rdkit.ML.Cluster import Butina

    t0 = _clock()
    n = len(smiles)
    k, seed = _check_k(n, k), _check_seed(seed)
    threshold, tol = _check_threshold(threshold), _check_tol(tol)
    _check_memory("butina", n, k)
    fps = _fp.ecfp4_bits(smiles)
    D = _fp.tanimoto_distance_matrix(fps)
    cache: dict[float, tuple] = {}
    too_big: list[tuple[float, int]] = []
    lists_peak = 0

    def clusters_at(t: float):
        nonlocal lists_peak
        if t not in cache:
            pairs = sum(int(np.count_nonzero(D[a:a + 1024] <= t)) for a in range(0, n, 1024))
            need = _BYTES_PER_NEIGHBOUR * pairs + 200 * n
            if need > memory_budget():
                too_big.append((t, need))
                return None
            lists_peak = max(lists_peak, need)
            cache[t] = Butina.ClusterData(D, n, t, isDistData=True, reordering=reordering)
        return cache[t]

    def ok(t: float) -> bool:
        cl = clusters_at(t)
        return cl is not None and len(cl) >= k

    if threshold is None:
        threshold, _ = _bisect(ok, tol)
    clusters = clusters_at(threshold)
    if clusters is None:
        t, need = too_big[-1]
        raise InputError(None, f"butina's neighbour lists at threshold {t:g} need {format_size(need)}, more than "
                               f"the {format_size(memory_budget())} available; use maxmin or leader")
    size_order = sorted(range(len(clusters)), key=lambda c: -len(clusters[c]))  # stable: RDKit order on ties
    order = [int(clusters[c][0]) for c in size_order[:k]]
    filled = k - len(order)
    if filled:
        groups = [np.sort(np.asarray(clusters[c], dtype=np.int64)) for c in size_order]
        order = _fill_round_robin(fps, order, groups, k)
    assignment = _assign_from_matrix(D, order)
    return _result("butina", n, k, seed, order, assignment, t0, threshold=float(threshold),
                   clusters=len(clusters), largest_cluster=len(clusters[size_order[0]]), filled=filled,
                   reordering=bool(reordering), thresholds_tried=len(cache) + len(too_big),
                   neighbour_list_bytes=int(lists_peak))


def _assign_from_matrix(D: np.ndarray, picks, block: int = 1024) -> np.ndarray:
    """Nearest pick (ties to the lowest position) of every row of ``D``, by row blocks; picks to themselves."""
    med = np.sort(np.asarray(picks, dtype=np.int64))
    n = D.shape[0]
    out = np.empty(n, dtype=np.int64)
    for a in range(0, n, block):
        out[a:a + block] = med[np.argmin(D[a:a + block][:, med], axis=1)]
    out[med] = med
    return out


def _loss_from_matrix(D: np.ndarray, med: np.ndarray, block: int = 1024) -> float:
    return float(sum(D[a:a + block][:, med].min(axis=1).sum() for a in range(0, D.shape[0], block)))


def fp_kmedoids(smiles: Sequence[str], k: int, seed: int = 0, *, restarts: int = 5,
                max_iter: int = 100) -> PickResult:
    r"""k-medoids (FasterPAM) on the :math:`n \times n` Tanimoto distance matrix of ECFP4.

    Minimises :math:`\sum_i \min_{j} d(f_i, f_{p_j})` like :func:`tmdlib.select._coreset.kmedoids_coreset`
    does for TMD: ``kmedoids.fasterpam`` from a random init, single-threaded, ``restarts`` times
    (restart ``r`` seeded with the ``r``-th word of ``numpy.random.SeedSequence(seed)``); the lowest
    loss wins, ties to the earliest.

    Parameters
    ----------
    smiles : sequence of str, length n
    k : int
        :math:`1 \le k \le n`.
    seed : int, default 0
        Different seeds may give different medoids; the same seed always gives the same.
    restarts : int, default 5
    max_iter : int, default 100
        FasterPAM's swap passes.

    Returns
    -------
    PickResult
        ``tau`` the cluster sizes, ``assignment`` each molecule's nearest medoid (ties to the lowest
        position); ``info``: ``loss`` :math:`= \sum_i d(i, \mathrm{assignment}_i)`, ``epsilon`` = loss / n,
        ``restart_losses``.

    Raises
    ------
    InputError
        Before allocating the matrix, when :func:`memory_bytes` exceeds the memory available.
    """
    import kmedoids

    t0 = _clock()
    n = len(smiles)
    k, seed = _check_k(n, k), _check_seed(seed)
    if isinstance(restarts, bool) or int(restarts) != restarts or restarts < 1:
        raise ValueError(f"restarts must be an integer >= 1, got {restarts!r}")
    _check_memory("fp_kmedoids", n, k)
    fps = _fp.ecfp4_bits(smiles)
    D = _fp.tanimoto_distance_matrix(fps)
    runs = []
    for s in np.random.SeedSequence(seed).generate_state(int(restarts)):
        if k == n:
            med = np.arange(n, dtype=np.int64)
        else:
            res = kmedoids.fasterpam(D, k, max_iter=int(max_iter), init="random", random_state=int(s), n_cpu=1)
            med = np.unique(np.asarray(res.medoids, dtype=np.int64))
            while med.size < k:  # guard: top up with the molecule farthest from the medoids
                far = np.argmax(np.where(np.isin(np.arange(n), med), -1.0, D[:, med].min(axis=1)))
                med = np.sort(np.append(med, far))
        runs.append((_loss_from_matrix(D, med), med))
        if k == n:
            break
    losses = [r[0] for r in runs]
    med = runs[int(np.argmin(losses))][1]
    assignment = _assign_from_matrix(D, med)
    loss = float(D[np.arange(n), assignment].sum())
    return _result("fp_kmedoids", n, k, seed, med, assignment, t0, loss=loss, epsilon=loss / n,
                   restart_losses=[float(x) for x in losses])


_MAX_GROUP = 2000


def murcko_scaffolds(smiles: Sequence[str], generic: bool = False) -> list[str]:
    """Bemis–Murcko scaffold SMILES of each molecule (``rdkit.Chem.Scaffolds.MurckoScaffold``).

    The scaffold keeps the ring systems and the linkers between them, with their atom and bond
    types (``MurckoScaffoldSmiles``, canonical, no chirality); ``generic=True`` also makes every
    atom a carbon and every bond single (``MakeScaffoldGeneric``), so benzene, pyridine and
    cyclohexane share ``C1CCCCC1``.  An acyclic molecule has the empty scaffold ``''``.

    Parameters
    ----------
    smiles : sequence of str, length n
    generic : bool, default False

    Returns
    -------
    list of str, length n
    """
    return _scaffolds_and_bits(smiles, generic)[0]


def _scaffolds_and_bits(smiles, generic: bool):
    from rdkit import Chem
    from rdkit.Chem.Scaffolds import MurckoScaffold

    gen = _fp._generator()
    scaffolds, fps = [], []
    for _, mol in _fp._mols(smiles):
        if generic:
            core = MurckoScaffold.GetScaffoldForMol(mol)
            core = MurckoScaffold.MakeScaffoldGeneric(core) if core.GetNumAtoms() else core
            scaffolds.append(Chem.MolToSmiles(core, isomericSmiles=False) if core.GetNumAtoms() else "")
        else:
            scaffolds.append(MurckoScaffold.MurckoScaffoldSmiles(mol=mol, includeChirality=False))
        fps.append(gen.GetFingerprint(mol))
    return scaffolds, fps


def scaffold(smiles: Sequence[str], k: int, seed: int = 0, *, generic: bool = False,
             max_group: int = _MAX_GROUP) -> PickResult:
    r"""One representative per Bemis–Murcko scaffold, largest scaffolds first.

    Molecules are grouped by scaffold (:func:`murcko_scaffolds`; not generic by default: benzene,
    pyridine and cyclohexane are three scaffolds; acyclic molecules form the ``''`` group).  Groups
    are ranked by size, descending (ties: the group whose first member comes first in the pool), and
    the first ``k`` groups give one pick each: the group's Tanimoto medoid
    :math:`\arg\min_{i \in G} \sum_{j \in G} d(f_i, f_j)` (ties to the lowest position).  A group
    larger than ``max_group`` takes its medoid over ``max_group`` evenly spaced members (by pool
    position), so the method stays seed-independent at :math:`O(\mathrm{max\_group}^2)` memory.
    With fewer scaffolds than ``k``, the rest is filled round-robin over the scaffold groups
    (largest first; in each, the member farthest from the group's picks so far).

    τ / assignment: a molecule whose scaffold has a pick goes to its group's pick (the nearest by
    Tanimoto when the group has several); a molecule of an unpicked scaffold goes to the nearest pick
    by Tanimoto.

    Deterministic: ``seed`` is unused.

    Parameters
    ----------
    smiles : sequence of str, length n
    k : int
        :math:`1 \le k \le n`.
    seed : int, default 0
        Recorded only.
    generic : bool, default False
        Generic (all-carbon, single-bond) scaffolds instead.
    max_group : int, default 2000

    Returns
    -------
    PickResult
        ``info``: ``scaffolds`` (number of groups), ``largest_scaffold`` (its size), ``empty_scaffold``
        (number of acyclic molecules), ``generic``, ``filled``.
    """
    t0 = _clock()
    n = len(smiles)
    k, seed = _check_k(n, k), _check_seed(seed)
    if isinstance(max_group, bool) or int(max_group) != max_group or max_group < 1:
        raise ValueError(f"max_group must be an integer >= 1, got {max_group!r}")
    _check_memory("scaffold", n, k)
    scaffolds, fps = _scaffolds_and_bits(smiles, generic)
    index: dict[str, list[int]] = {}
    for i, s in enumerate(scaffolds):
        index.setdefault(s, []).append(i)
    groups = sorted((np.asarray(m, dtype=np.int64) for m in index.values()), key=lambda g: (-g.size, g[0]))
    order = [_medoid(fps, g, int(max_group)) for g in groups[:k]]
    filled = k - len(order)
    if filled:
        order = _fill_round_robin(fps, order, groups, k)
    group_of = np.empty(n, dtype=np.int64)
    for gi, g in enumerate(groups):
        group_of[g] = gi
    assignment = np.full(n, -1, dtype=np.int64)
    picks_by_group: dict[int, list[int]] = {}
    for p in order:
        picks_by_group.setdefault(int(group_of[p]), []).append(p)
    for gi, ps in picks_by_group.items():
        g = groups[gi]
        assignment[g] = ps[0] if len(ps) == 1 else _fp.nearest_pick(fps, ps, members=g)[0]
    rest = np.flatnonzero(assignment < 0)
    if rest.size:
        assignment[rest] = _fp.nearest_pick(fps, order, members=rest)[0]
    return _result("scaffold", n, k, seed, order, assignment, t0, scaffolds=len(groups),
                   largest_scaffold=int(groups[0].size), empty_scaffold=len(index.get("", [])),
                   generic=bool(generic), filled=filled)


def _medoid(fps, members: np.ndarray, max_group: int) -> int:
    """Tanimoto medoid of ``members`` (ascending positions), over an evenly spaced subsample if large."""
    if members.size == 1:
        return int(members[0])
    if members.size > max_group:
        members = members[np.unique(np.linspace(0, members.size - 1, max_group).round().astype(np.int64))]
    D = _fp.tanimoto_distance_matrix([fps[i] for i in members])
    return int(members[int(np.argmin(D.sum(axis=1)))])


class _Names(dict):
    """A dict of methods whose lookups also accept ``-`` for ``_`` (``"fp-kmedoids"``, the CLI spelling);
    iteration and ``in`` see the canonical names only."""

    def __missing__(self, key):
        alt = key.replace("-", "_") if isinstance(key, str) else key
        if alt != key and alt in self:
            return self[alt]
        raise KeyError(key)

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default


#: The pickers by name (``"fp-kmedoids"`` is also found, as ``"fp_kmedoids"``).
PICKERS: dict[str, Callable[..., PickResult]] = _Names({
    "maxmin": maxmin,
    "leader": leader,
    "butina": butina,
    "fp_kmedoids": fp_kmedoids,
    "scaffold": scaffold,
})

#: The keyword options of each picker (besides ``smiles``, ``k``, ``seed``).
PICKER_OPTIONS: dict[str, tuple[str, ...]] = _Names({
    "maxmin": ("assign",),
    "leader": ("threshold", "tol"),
    "butina": ("threshold", "reordering", "tol"),
    "fp_kmedoids": ("restarts", "max_iter"),
    "scaffold": ("generic", "max_group"),
})


def _canonical(method) -> str:
    if not isinstance(method, str) or PICKERS.get(method) is None:
        raise ValueError(f"unknown picker {method!r}; known: {', '.join(PICKERS)}")
    return method.replace("-", "_")


def pick(method: str, smiles: Sequence[str], k: int, seed: int = 0, **opts) -> PickResult:
    """Run the picker ``method`` (a key of :data:`PICKERS`; ``-`` may stand for ``_``) with its options
    (:data:`PICKER_OPTIONS`).

    Examples
    --------
    >>> from tmdlib.select._coreset import budget_to_k
    >>> pool = ["CCO", "CCN", "c1ccccc1", "Cc1ccccc1", "C1CCCCC1", "c1ccncc1"]
    >>> res = pick("scaffold", pool, budget_to_k(len(pool), fraction=0.5))
    >>> res.k, int(res.tau.sum())
    (3, 6)
    """
    return PICKERS[_canonical(method)](smiles, k, seed, **opts)
