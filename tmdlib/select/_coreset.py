r"""Graph subsampling by k-medoids on a precomputed distance matrix (Jain et al., Section 3).

Given graphs :math:`X = \{G_1, \dots, G_n\}` and a pseudometric :math:`D` (TMD, or a
baseline distance), a coreset :math:`\mathcal I \subset [n]` with :math:`|\mathcal I| = k`
is chosen to minimise the *medoids objective*

.. math:: f_D(\mathcal I; X) = \frac{1}{n} \sum_{i=1}^{n} \min_{j \in \mathcal I} D_{ij}.

Every graph is assigned to its nearest medoid; :math:`\tau_j` is the size of the
cluster of medoid :math:`j`.  Lemma 3.2 / Corollary 3.3 of the paper bound the extra
training loss of the :math:`\tau`-weighted coreset by
:math:`2 c\, f_{\mathrm{TMD}}(\mathcal I; X)`, which is why ``epsilon`` is reported.

Only the matrix is used: labels never enter, so the selection is label-agnostic.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..guarantees._bounds import medoids_objective

__all__ = [
    "CoresetResult",
    "budget_to_k",
    "validate_distance_matrix",
    "assign_to_medoids",
    "medoids_objective",
    "kmedoids_coreset",
    "reuse_labelled",
    "METHODS",
]

#: Accepted values of ``method`` in :func:`kmedoids_coreset`.
METHODS = ("fasterpam", "sklearn-extra", "sklearn-extra-alternate", "swap")


def budget_to_k(n: int, fraction: float | None = None, count: int | None = None) -> int:
    r"""Turn a budget into a number of items :math:`k`.

    .. math:: k = \min\big(n, \max(1, \lceil \mathrm{fraction} \cdot n \rceil)\big)
              \quad\text{or}\quad k = \min(n, \max(1, \mathrm{count})).

    The product is rounded to 9 decimals before the ceiling so that floating noise
    (``0.1 * 30 = 3.0000000000000004``) does not add an item.

    Parameters
    ----------
    n : int
        Number of items available (:math:`n \ge 0`); ``n = 0`` gives ``0``.
    fraction : float, optional
        In :math:`(0, 1]`.  Exactly one of ``fraction`` / ``count`` must be given.
    count : int, optional
        Absolute number of items, :math:`\ge 1`.

    Returns
    -------
    int
    """
    if (fraction is None) == (count is None):
        raise ValueError("give exactly one of fraction= or count=")
    n = int(n)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if fraction is not None:
        fraction = float(fraction)
        if not (0.0 < fraction <= 1.0):
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        k = math.ceil(round(fraction * n, 9))
    else:
        if int(count) != count or count < 1:
            raise ValueError(f"count must be an integer >= 1, got {count!r}")
        k = int(count)
    return min(n, max(1, k)) if n else 0


def validate_distance_matrix(D, rtol: float = 1e-8, atol: float = 1e-10) -> np.ndarray:
    r"""Check that ``D`` is a finite pseudometric matrix and return a clean copy.

    Conditions: 2-D and square with :math:`n \ge 1`; all finite; :math:`D_{ij} \ge -t`;
    :math:`|D_{ij} - D_{ji}| \le t`; :math:`|D_{ii}| \le t`, with
    :math:`t = \mathrm{atol} + \mathrm{rtol} \cdot \max_{ij} |D_{ij}|`.

    Parameters
    ----------
    D : array_like, shape (n, n)
    rtol, atol : float
        Tolerances of the symmetry / sign / diagonal checks.

    Returns
    -------
    ndarray of float64, shape (n, n)
        :math:`(D + D^\top)/2`, clipped at 0, with an exactly zero diagonal.

    Raises
    ------
    ValueError
        Naming the first violated condition and an offending entry.
    """
    D = np.asarray(D, dtype=np.float64)
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise ValueError(f"distance matrix must be square (n, n), got shape {D.shape}")
    if D.shape[0] == 0:
        raise ValueError("distance matrix is empty (n = 0)")
    bad = ~np.isfinite(D)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise ValueError(f"distance matrix has non-finite entries ({int(bad.sum())}), e.g. D[{i}, {j}] = {D[i, j]}")
    tol = atol + rtol * float(np.abs(D).max())
    if (D < -tol).any():
        i, j = np.argwhere(D < -tol)[0]
        raise ValueError(f"distance matrix has negative entries, e.g. D[{i}, {j}] = {D[i, j]}")
    asym = np.abs(D - D.T)
    if (asym > tol).any():
        i, j = np.unravel_index(int(np.argmax(asym)), asym.shape)
        raise ValueError(f"distance matrix is not symmetric: D[{i}, {j}] = {D[i, j]} but D[{j}, {i}] = {D[j, i]}")
    diag = np.abs(np.diagonal(D))
    if (diag > tol).any():
        i = int(np.argmax(diag))
        raise ValueError(f"distance matrix must have a zero diagonal, got D[{i}, {i}] = {D[i, i]}")
    out = np.maximum(0.5 * (D + D.T), 0.0)
    np.fill_diagonal(out, 0.0)
    return out


def assign_to_medoids(D: np.ndarray, medoids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Assign every point to its nearest medoid.

    Point :math:`i` goes to :math:`\arg\min_{j \in \mathcal I} D_{ij}`, ties to the
    lowest medoid index; a medoid is always assigned to itself (even when another
    medoid is at distance 0).

    Parameters
    ----------
    D : ndarray, shape (n, n)
        Validated distance matrix.
    medoids : array_like of int, shape (k,)
        Distinct point indices.

    Returns
    -------
    medoids : ndarray of int64, shape (k,)
        Sorted ascending.
    assignment : ndarray of int64, shape (n,)
        The medoid (a point index) each point is assigned to.
    tau : ndarray of int64, shape (k,)
        Cluster sizes aligned with ``medoids``; ``tau.sum() == n`` and ``tau >= 1``.
    """
    med = np.unique(np.asarray(medoids, dtype=np.int64))
    if med.size != np.asarray(medoids).size:
        raise ValueError("medoids must be distinct")
    n = D.shape[0]
    if med.size == 0 or med[0] < 0 or med[-1] >= n:
        raise ValueError(f"medoids must be a non-empty set of indices in [0, {n})")
    pos = np.argmin(D[:, med], axis=1)  # first minimum = lowest medoid index (med sorted)
    pos[med] = np.arange(med.size)
    tau = np.bincount(pos, minlength=med.size).astype(np.int64)
    return med, med[pos], tau


@dataclass(frozen=True, eq=False)
class CoresetResult:
    r"""Outcome of :func:`kmedoids_coreset`.

    Attributes
    ----------
    medoids : ndarray of int64, shape (k,)
        Selected point indices :math:`\mathcal I`, sorted ascending.
    assignment : ndarray of int64, shape (n,)
        Medoid (point index) each point is assigned to (see :func:`assign_to_medoids`).
    tau : ndarray of int64, shape (k,)
        Cluster sizes :math:`\tau_j`, aligned with ``medoids``.
    epsilon : float
        :math:`f_D(\mathcal I; X)`, recomputed from ``D``.
    loss : float
        :math:`n \cdot \varepsilon = \sum_i \min_{j\in\mathcal I} D_{ij}`.
    method : str
        Algorithm actually used (``"fasterpam"``, ``"sklearn-extra-pam"``,
        ``"sklearn-extra-alternate"`` or ``"swap"``).
    seed : int
        Seed of the run.
    restart_losses : tuple of float
        Loss of every restart; the best (first on ties) was kept.
    """

    medoids: np.ndarray
    assignment: np.ndarray
    tau: np.ndarray
    epsilon: float
    loss: float
    method: str
    seed: int
    restart_losses: tuple = ()

    @property
    def k(self) -> int:
        """Number of medoids."""
        return int(self.medoids.size)

    @property
    def n(self) -> int:
        """Number of points."""
        return int(self.assignment.size)

    @property
    def weights(self) -> np.ndarray:
        r"""Shape ``(k,)``: :math:`\tau_j / n`, the per-medoid loss weights of Lemma 3.2."""
        return self.tau / self.n

    @property
    def labels(self) -> np.ndarray:
        """Shape ``(n,)``: position (0..k-1) in ``medoids`` of each point's medoid."""
        return np.searchsorted(self.medoids, self.assignment)


def _index_set(spec, n: int, name: str) -> np.ndarray:
    """Boolean mask of shape (n,) from a mask or an index list."""
    arr = np.asarray(spec)
    if arr.dtype == bool:
        if arr.shape != (n,):
            raise ValueError(f"{name} mask must have shape ({n},), got {arr.shape}")
        return arr.copy()
    idx = arr.astype(np.int64).ravel()
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ValueError(f"{name} indices must lie in [0, {n})")
    mask = np.zeros(n, dtype=bool)
    mask[idx] = True
    return mask


def reuse_labelled(labelled, n: int, k: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    r"""``(candidates, fixed)`` for :func:`kmedoids_coreset` that reuse already-labelled points.

    With :math:`L` the labelled points: if :math:`|L| \le k` they are all kept as medoids
    (``fixed = L``) and the other :math:`k - |L|` medoids are chosen freely, so only those need a
    label; if :math:`|L| > k` the ``k`` medoids are chosen among them (``candidates = L``) and
    nothing new is labelled.  Either way :math:`\varepsilon` is the objective of the medoids
    actually chosen, so the bound of Lemma 3.2 holds as usual.

    Parameters
    ----------
    labelled : array_like of bool, shape (n,), or of int
        Points (positions ``0..n-1``) that already have a label.
    n, k : int
        Number of points and of medoids.

    Returns
    -------
    candidates, fixed : ndarray of bool, shape (n,), or None
        One of the two is None; both are None when nothing is labelled.
    """
    lab = _index_set(labelled, n, "labelled")
    if not lab.any():
        return None, None
    if lab.sum() <= k:
        return None, lab
    return lab, None


def kmedoids_coreset(D, k: int, seed: int = 0, method: str = "fasterpam", restarts: int = 5,
                     candidates=None, fixed=None, max_iter: int = 100) -> CoresetResult:
    r"""Select ``k`` medoids minimising :math:`f_D(\mathcal I; X)`.

    Parameters
    ----------
    D : array_like, shape (n, n)
        Pairwise distances (validated by :func:`validate_distance_matrix`).
    k : int
        Number of medoids, :math:`1 \le k \le n`.
    seed : int
        Seed; restart ``r`` uses the ``r``-th word of ``numpy.random.SeedSequence(seed)``.
    method : {"fasterpam", "sklearn-extra", "sklearn-extra-alternate", "swap"}
        ``"fasterpam"`` (default): FasterPAM of the ``kmedoids`` package (Schubert &
        Rousseeuw 2021) from a random init, single-threaded.  ``"sklearn-extra"``:
        ``sklearn_extra.cluster.KMedoids(method="pam", init="k-medoids++")``, the
        package the paper used (slow: minutes at n = 2000);
        ``"sklearn-extra-alternate"``: the same with ``method="alternate"`` (fast, worse).
        ``"swap"``: this module's own k-medoids++ init plus eager PAM swaps
        (FastPAM1 deltas), which also runs whenever ``candidates``/``fixed`` are given.
    restarts : int
        Independent seeded runs; the lowest loss (recomputed from ``D``) wins, ties
        to the earliest run.
    candidates : array_like of bool, shape (n,), or of int, optional
        Points allowed to be medoids (all points still count in the objective).  The
        ``kmedoids`` package cannot restrict medoids, so this uses ``method="swap"``.
    fixed : array_like of bool or int, optional
        Points that must be medoids (counted within ``k``), e.g. already-labelled graphs.
        Uses ``method="swap"``; fixed points are never swapped out.
    max_iter : int
        Maximum swap passes per restart.

    Returns
    -------
    CoresetResult
        ``medoids`` sorted, ``assignment``/``tau`` by :func:`assign_to_medoids`,
        ``epsilon`` :math:`= f_D(\mathcal I; X)` recomputed from ``D``.
    """
    D = validate_distance_matrix(D)
    n = D.shape[0]
    if int(k) != k or not 1 <= k <= n:
        raise ValueError(f"k must be an integer in [1, {n}], got {k!r}")
    k = int(k)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if int(restarts) != restarts or restarts < 1:
        raise ValueError(f"restarts must be an integer >= 1, got {restarts!r}")
    cand = np.ones(n, dtype=bool) if candidates is None else _index_set(candidates, n, "candidates")
    fix = np.zeros(n, dtype=bool) if fixed is None else _index_set(fixed, n, "fixed")
    cand |= fix
    if fix.sum() > k:
        raise ValueError(f"{int(fix.sum())} fixed medoids exceed k = {k}")
    if cand.sum() < k:
        raise ValueError(f"only {int(cand.sum())} candidate medoids for k = {k}")
    restricted = candidates is not None or fixed is not None
    if restricted and method.startswith("sklearn-extra"):
        raise ValueError("candidates/fixed are supported by method='fasterpam' or 'swap' only")
    if restricted:
        method = "swap"
    seeds = np.random.SeedSequence(int(seed)).generate_state(int(restarts))

    runs = []
    for s in seeds:
        if k == n:
            med = np.arange(n)
        elif method == "fasterpam":
            med = _run_fasterpam(D, k, int(s), max_iter)
        elif method == "swap":
            med = _run_swap(D, k, int(s), cand, fix, max_iter)
        else:
            med = _run_sklearn_extra(D, k, int(s), "alternate" if method.endswith("alternate") else "pam", max_iter)
        runs.append((float(D[:, med].min(axis=1).sum()), med))
        if k == n:
            break
    losses = tuple(r[0] for r in runs)
    best = int(np.argmin(losses))
    med, assignment, tau = assign_to_medoids(D, runs[best][1])
    loss = float(D[np.arange(n), assignment].sum())
    name = "sklearn-extra-pam" if method == "sklearn-extra" else method
    return CoresetResult(medoids=med, assignment=assignment, tau=tau, epsilon=loss / n, loss=loss,
                         method=name, seed=int(seed), restart_losses=losses)


def _run_fasterpam(D: np.ndarray, k: int, seed: int, max_iter: int) -> np.ndarray:
    import kmedoids

    res = kmedoids.fasterpam(D, k, max_iter=max_iter, init="random", random_state=seed, n_cpu=1)
    return _distinct(np.asarray(res.medoids, dtype=np.int64), D.shape[0], k)


def _distinct(med: np.ndarray, n: int, k: int) -> np.ndarray:
    """Guard against a library returning repeated medoids: top up with the smallest unused indices."""
    med = np.unique(med)
    if med.size < k:
        med = np.concatenate([med, np.setdiff1d(np.arange(n), med)[: k - med.size]])
    return med


def _run_sklearn_extra(D: np.ndarray, k: int, seed: int, how: str, max_iter: int) -> np.ndarray:
    from sklearn_extra.cluster import KMedoids

    km = KMedoids(n_clusters=k, metric="precomputed", method=how, init="k-medoids++",
                  random_state=seed, max_iter=max(max_iter, 300))
    with warnings.catch_warnings():  # sklearn-extra 0.3.0 calls the deprecated stable_cumsum
        warnings.filterwarnings("ignore", message=".*stable_cumsum.*", category=FutureWarning)
        warnings.filterwarnings("ignore", message="Cluster .* is empty", category=UserWarning)  # we re-assign
        km.fit(D)
    return _distinct(np.asarray(km.medoid_indices_, dtype=np.int64), D.shape[0], k)


def _kmedoids_pp_init(D: np.ndarray, k: int, rng: np.random.Generator, cand: np.ndarray,
                      fix: np.ndarray) -> np.ndarray:
    r"""k-medoids++ seeding restricted to ``cand`` (fixed points first).

    Next medoid drawn among candidates with probability :math:`\propto \min_{j} D_{ij}`;
    uniformly among the remaining candidates when all those distances are 0.
    """
    chosen = list(np.flatnonzero(fix))
    free = cand & ~fix
    if not chosen:
        c = int(rng.choice(np.flatnonzero(free)))
        chosen.append(c)
        free[c] = False
    dmin = D[:, chosen].min(axis=1)
    while len(chosen) < k:
        idx = np.flatnonzero(free)
        p = dmin[idx]
        tot = p.sum()
        c = int(rng.choice(idx, p=p / tot)) if tot > 0 else int(rng.choice(idx))
        chosen.append(c)
        free[c] = False
        np.minimum(dmin, D[:, c], out=dmin)
    return np.asarray(chosen, dtype=np.int64)


def _run_swap(D: np.ndarray, k: int, seed: int, cand: np.ndarray, fix: np.ndarray, max_iter: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    med = _kmedoids_pp_init(D, k, rng, cand, fix)
    order = rng.permutation(D.shape[0]).astype(np.int64)
    tol = 1e-12 * max(1.0, float(D.max()))
    return _swap_refine(D, med.copy(), cand, fix, order, int(max_iter), tol)


@njit(cache=True)
def _nearest_two(D, med, near, dn, ds):
    """Per point: position of nearest medoid, distance to nearest and second nearest."""
    n = D.shape[0]
    for o in range(n):
        b1 = np.inf
        b2 = np.inf
        p1 = 0
        for m in range(med.size):
            d = D[o, med[m]]
            if d < b1:
                b2 = b1
                b1 = d
                p1 = m
            elif d < b2:
                b2 = d
        near[o] = p1
        dn[o] = b1
        ds[o] = b2


@njit(cache=True)
def _swap_refine(D, med, cand, fix, order, max_iter, tol):
    r"""Eager PAM swaps restricted to candidate medoids.

    For a non-medoid candidate :math:`x` and medoid :math:`m`, the change of
    :math:`\sum_o \min_j D_{oj}` when :math:`m` is replaced by :math:`x` is
    (FastPAM1, Schubert & Rousseeuw 2021)

    .. math:: \Delta_m = \sum_o \min(D_{ox} - d^1_o, 0)
              + \sum_{o:\,n(o)=m,\ D_{ox} \ge d^1_o} \big(\min(D_{ox}, d^2_o) - d^1_o\big),

    with :math:`d^1_o, d^2_o` the distances to the nearest / second-nearest medoid and
    :math:`n(o)` the nearest one.  The best non-fixed :math:`m` is swapped at once if
    :math:`\Delta_m < -\mathrm{tol}`; passes repeat until none improves.
    """
    n = D.shape[0]
    k = med.size
    near = np.zeros(n, dtype=np.int64)
    dn = np.zeros(n)
    ds = np.zeros(n)
    is_med = np.zeros(n, dtype=np.bool_)
    for m in range(k):
        is_med[med[m]] = True
    _nearest_two(D, med, near, dn, ds)
    delta = np.zeros(k)
    for _ in range(max_iter):
        improved = False
        for t in range(n):
            x = order[t]
            if not cand[x] or is_med[x]:
                continue
            shared = 0.0
            delta[:] = 0.0
            for o in range(n):
                dox = D[o, x]
                if dox < dn[o]:
                    shared += dox - dn[o]
                else:
                    delta[near[o]] += min(dox, ds[o]) - dn[o]
            best = 0
            bval = np.inf
            for m in range(k):
                if not fix[med[m]] and delta[m] < bval:
                    bval = delta[m]
                    best = m
            if bval + shared < -tol:
                is_med[med[best]] = False
                med[best] = x
                is_med[x] = True
                _nearest_two(D, med, near, dn, ds)
                improved = True
        if not improved:
            break
    return med
