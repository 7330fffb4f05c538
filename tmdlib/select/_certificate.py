r"""TMD coresets that carry their own certificate (Jain et al., Lemma 3.2 for any assignment).

Lemma 3.2 holds for *any* assignment :math:`a: [n] \to \mathcal I` of the graphs to the medoids, with
:math:`\tau_j = |a^{-1}(j)|` and

.. math:: \varepsilon_{\Sigma} = \sum_{i=1}^{n} \mathrm{TMD}(G_i, G_{a(i)}), \qquad
          \varepsilon = f_{\mathrm{TMD}} = \varepsilon_{\Sigma} / n ,

so a selection is certified by the :math:`n` exact distances of the graphs to their assigned medoids --
however the medoids were found.  :class:`CoresetCertificate` holds exactly that evidence
(:func:`certificate_from_assignment` builds it from any assignment, :func:`certificate_from_matrix` from a
full matrix), and :func:`verify_certificate` recomputes it.

:func:`tmd_coreset` is the one entry point: ``engine="exact"`` runs k-medoids on the full
:math:`n \times n` TMD matrix; ``"scalable"`` never builds it; ``"auto"`` picks exact while the matrix is cheap.
"""
from __future__ import annotations

import numpy as np

from ..distance._engine import DEFAULT_MEMORY_LIMIT, tmd_matrix, tmd_pairs
from .._graph import GraphDataset
from ._coreset import assign_to_medoids, kmedoids_coreset
from .evidence import CoresetCertificate, certificate_from_assignment
from ._plan import (AUTO_EXACT_MAX_GRAPHS, AUTO_EXACT_MAX_NODE_PAIRS, ENGINES, matrix_node_pairs,  # noqa: F401
                   resolve_engine, resolve_part_size)

__all__ = ["CoresetCertificate", "ENGINES", "tmd_coreset", "certificate_from_matrix", "certificate_from_assignment",
           "verify_certificate",
           "resolve_engine", "matrix_node_pairs", "certify_medoids", "engine_memory_bytes"]

def certificate_from_matrix(D: np.ndarray, medoids, engine: str = "exact", pairs_computed: int | None = None,
                            info: dict | None = None) -> CoresetCertificate:
    r"""The nearest-medoid certificate of ``medoids`` read off a full distance matrix.

    Parameters
    ----------
    D : ndarray, shape (n, n)
        Exact TMD matrix of the graphs.
    medoids : array_like of int, shape (k,)
    engine : str
    pairs_computed : int, optional
        Default :math:`n(n-1)/2` (the matrix).
    info : dict, optional

    Returns
    -------
    CoresetCertificate
    """
    med, assignment, _ = assign_to_medoids(D, medoids)
    n = D.shape[0]
    dist = D[np.arange(n), assignment]
    pairs = n * (n - 1) // 2 if pairs_computed is None else pairs_computed
    return certificate_from_assignment(med, assignment, dist, pairs, engine, info)


def verify_certificate(dataset: GraphDataset, cert: CoresetCertificate, depth: int = 4, weights="pascal",
                       rtol: float = 1e-9) -> None:
    r"""Recompute every distance of a certificate with exact TMD and check its arithmetic.

    Checks: ``distance[i] == TMD(G_i, G_assignment[i])`` (to ``rtol``), every assigned medoid is a medoid,
    medoids are assigned to themselves, ``tau`` counts the assignment, ``epsilon == distance.sum()``.

    Raises
    ------
    ValueError
        Naming the first check that fails.
    """
    n = len(dataset)
    if cert.assignment.shape != (n,) or cert.distance.shape != (n,):
        raise ValueError(f"certificate covers {cert.assignment.size} graphs, dataset has {n}")
    med = cert.medoids
    if not np.all(np.isin(cert.assignment, med)):
        raise ValueError("a graph is assigned to a graph that is not a medoid")
    if not np.array_equal(cert.assignment[med], med):
        raise ValueError("a medoid is not assigned to itself")
    tau = np.bincount(np.searchsorted(med, cert.assignment), minlength=med.size)
    if not np.array_equal(tau, cert.tau):
        raise ValueError("tau does not count the assignment")
    exact = tmd_pairs(dataset, np.arange(n), cert.assignment, depth, weights)
    if not np.allclose(exact, cert.distance, rtol=rtol, atol=1e-12):
        i = int(np.argmax(np.abs(exact - cert.distance)))
        raise ValueError(f"distance[{i}] = {cert.distance[i]} but TMD = {exact[i]}")
    if not np.isclose(cert.distance.sum(), cert.epsilon, rtol=1e-12, atol=1e-9):
        raise ValueError(f"epsilon {cert.epsilon} != sum of distances {cert.distance.sum()}")


def engine_memory_bytes(engine: str, nodes_per_graph, k: int, num_features: int, feature_rows: int,
                        depth: int = 4, part_size: int | str = "auto") -> int:
    r"""Peak bytes a selection engine needs beyond the graphs themselves.

    exact: the :math:`n \times n` float64 matrix, :math:`8 n^2`.  scalable: what it keeps per graph of the pool --
    the structure embedding that partitions it (:math:`4 (8 L + 1)` bytes, float32), its content hash (64) and
    ids, sizes, assignment and distance (40; 236 bytes in all at L = 4) -- plus one part at a time: its
    lower-bound summaries, lower-bound matrix and point-medoid distances, :math:`8 (m L (F + d) + m^2 + m k_m)`
    for a part of :math:`m` graphs with :math:`k_m` medoids, ``F`` feature rows of width ``d``.  A part's
    summaries are those of its own graphs: nothing of size :math:`8 n L (F + d)` is held (8 M training graphs of
    the constructed 10⁷ store: an estimate of 1.8 GiB, where that term alone would be 128 GiB).
    """
    n = len(nodes_per_graph)
    if engine == "exact":
        return 8 * n * n
    m = min(n, resolve_part_size(part_size, n, k if 1 <= k <= n else None))  # parts raised to one medoid each
    km = max(1, int(round(k * m / max(n, 1))))
    per_graph = 4 * (8 * depth + 1) + 64 + 40  # embedding, content hash, ids / sizes / assignment / distance
    return n * per_graph + 8 * (m * depth * (feature_rows + num_features) + m * m + m * km)


def tmd_coreset(dataset, k: int, depth: int = 4, weights="pascal", *, engine: str = "auto",
                seed: int = 0, restarts: int = 5, candidates=None, fixed=None,
                memory_limit: float = DEFAULT_MEMORY_LIMIT, num_threads: int | None = None,
                **scalable_options) -> CoresetCertificate:
    r"""A TMD k-medoids coreset of ``dataset`` with its exact certificate.

    Parameters
    ----------
    dataset : GraphDataset or StoredGraphs
        The ``n`` graphs to cover (e.g. the training pool); a pool on disk
        (:class:`~tmdlib.datasets._stored.StoredGraphs`) is read part by part by the scalable engine.
    k : int
        Number of medoids, ``1 <= k <= n``.
    depth : int, default 4
    weights : "pascal", float or sequence of float
    engine : {"auto", "exact", "scalable"}
        ``exact``: FasterPAM on the full TMD matrix (:math:`n(n-1)/2` pairs); ``scalable``: never builds the
        matrix; ``auto``: exact up to :data:`AUTO_EXACT_MAX_GRAPHS` graphs.
    seed : int
    restarts : int
    candidates, fixed : array_like, optional
        As in :func:`tmdlib.select._coreset.kmedoids_coreset` (e.g. reuse already-labelled graphs).
    memory_limit : float
    num_threads : int, optional
    **scalable_options
        ``part_size``, ``max_pairs``, ``map_parts`` (``map_parts(specs) -> results``: where the parts are
        solved, e.g. :func:`tasks.coreset.part_mapper`), ``progress`` of
        :func:`tmdlib.select.scalable.scalable_coreset`.

    Returns
    -------
    CoresetCertificate
    """
    engine = resolve_engine(engine, dataset.nodes_per_graph)
    if engine == "scalable":
        from .scalable import scalable_coreset

        return scalable_coreset(dataset, k, depth, weights, seed=seed, candidates=candidates, fixed=fixed,
                                num_threads=num_threads, **scalable_options).certificate()
    if not isinstance(dataset, GraphDataset):  # a pool on disk (StoredGraphs): the matrix needs all of it
        dataset = dataset.load()
    D = tmd_matrix(dataset, depth, weights, memory_limit=memory_limit, num_threads=num_threads)
    res = kmedoids_coreset(D, k, seed=seed, restarts=restarts, candidates=candidates, fixed=fixed)
    return certificate_from_matrix(D, res.medoids, "exact",
                                   info={"method": res.method, "restarts": restarts,
                                         "restart_losses": [float(x) for x in res.restart_losses]})


def certify_medoids(dataset: GraphDataset, medoids, depth: int = 4, weights="pascal", *, D: np.ndarray | None = None,
                    exact=None, num_threads: int | None = None) -> CoresetCertificate:
    r"""The exact nearest-medoid certificate of given medoids (any selection method).

    With the full matrix ``D`` it is read off; otherwise each graph's nearest medoid is found by the
    lower-bound-pruned search of :mod:`tmdlib.select.scalable` (exact, far fewer than ``n k`` pairs).

    Parameters
    ----------
    dataset : GraphDataset
    medoids : array_like of int, shape (k,)
        Positions of the selected graphs.
    depth, weights
    D : ndarray, shape (n, n), optional
        The exact TMD matrix.
    exact : callable, optional
        ``exact(i, j) -> d`` (default: a :class:`~tmdlib.distance._engine.PairEngine` on ``dataset``).
    num_threads : int, optional

    Returns
    -------
    CoresetCertificate
    """
    if D is not None:
        return certificate_from_matrix(D, medoids, engine="exact", pairs_computed=0)
    from ..distance._engine import PairEngine
    from ..distance._lower import LowerBound
    from .scalable import PairCache, nearest_medoids

    med = np.unique(np.asarray(medoids, dtype=np.int64))
    cache = PairCache(exact or PairEngine(dataset, depth, weights, num_threads=num_threads), len(dataset))
    lb = LowerBound.of(dataset, depth, weights)
    assignment, distance = nearest_medoids(lb, cache, med)
    return certificate_from_assignment(med, assignment, distance, cache.computed, "scalable")
