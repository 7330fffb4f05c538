r"""The scalable engine's entry point: :func:`scalable_coreset` plans the parts, maps :func:`solve_part` over them and
combines their results (:func:`combine_parts`) into a :class:`ScalableCoreset`."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable, Sequence

import numpy as np

from .._plan import resolve_max_pairs, resolve_part_size
from ._pairs import ProgressFn
from ._parts import PartSpec, plan_parts, solve_in_order
from ._swaps import PartResult

__all__ = ["EngineInfo", "ScalableCoreset", "combine_parts", "scalable_coreset"]


@dataclass(frozen=True)
class EngineInfo:
    """What the scalable engine reports in a certificate's ``info``.

    Attributes
    ----------
    parts : int
    part_size : int
    swaps : int
        Swaps made over all parts.
    max_pairs : float, optional
        The budget of exact pairs (as given).
    per_cluster : int, optional
        Swap candidates per cluster and round (None: the search's default;
        :func:`~tmdlib.select._plan.auto_per_cluster`).
    """

    parts: int
    part_size: int
    swaps: int
    max_pairs: float | None
    per_cluster: int | None = None

    def to_json(self) -> dict:
        """``{"parts", "part_size", "swaps", "max_pairs", "per_cluster"}``, JSON-ready."""
        return asdict(self)


@dataclass(frozen=True, eq=False)
class ScalableCoreset:
    r"""The pool's coreset from its parts: medoids, the nearest-in-part assignment, exact distances.

    Attributes
    ----------
    medoids : ndarray of int64, shape (k,)
        Sorted positions into the pool.
    assignment : ndarray of int64, shape (n,)
        Medoid (a position) of each graph.
    distance : ndarray of float64, shape (n,)
        Exact :math:`\mathrm{TMD}(G_i, G_{\text{assignment}[i]})`.
    pairs_computed : int
        Exact TMD evaluations over all parts.
    info : EngineInfo
    """

    medoids: np.ndarray
    assignment: np.ndarray
    distance: np.ndarray
    pairs_computed: int
    info: EngineInfo

    def certificate(self):
        """The :class:`~tmdlib.select._certificate.CoresetCertificate` of this coreset (engine ``"scalable"``)."""
        from ..evidence import certificate_from_assignment

        return certificate_from_assignment(self.medoids, self.assignment, self.distance, self.pairs_computed,
                                           "scalable", self.info.to_json())


def combine_parts(n: int, parts: Sequence[np.ndarray], results: Sequence, part_size: int = 0,
                  max_pairs: float | None = None, per_cluster: int | None = None) -> ScalableCoreset:
    """The pool's coreset from its parts' results (positions mapped back; medoids sorted).

    Parameters
    ----------
    n : int
        Pool size.
    parts : sequence of ndarray of int64
        Positions of each part's graphs in the pool.
    results : sequence of PartResult
        Aligned with ``parts`` (mappings with :data:`PartResult.ARRAYS` keys are accepted too).
    part_size, max_pairs, per_cluster
        Reported in :class:`EngineInfo`.
    """
    results = [r if isinstance(r, PartResult) else PartResult.from_arrays(r) for r in results]
    medoids, assignment, distance = [], np.empty(n, np.int64), np.empty(n)
    for p, r in zip(parts, results):
        medoids.append(p[np.asarray(r.medoids, np.int64)])
        assignment[p] = p[np.asarray(r.assignment, np.int64)]
        distance[p] = np.asarray(r.distance, np.float64)
    info = EngineInfo(len(parts), int(part_size), int(sum(int(r.swaps) for r in results)), max_pairs, per_cluster)
    return ScalableCoreset(np.sort(np.concatenate(medoids)), assignment, distance,
                           int(sum(int(r.pairs_computed) for r in results)), info)


def scalable_coreset(ds, k: int, depth: int = 4, weights="pascal", *, seed: int = 0, candidates=None,
                     fixed=None, part_size: int | str = "auto", max_pairs: float | str | None = "auto",
                     num_threads: int | None = None,
                     map_parts: Callable[[Sequence[PartSpec]], Sequence[PartResult]] | None = None,
                     progress: ProgressFn | None = None, scratch_dir=None) -> ScalableCoreset:
    r"""TMD k-medoids coreset of ``ds`` without the :math:`n \times n` matrix, with its exact certificate.

    The one implementation of plan → solve parts → combine: :func:`plan_parts`, then
    ``map_parts(specs)`` (default :func:`solve_in_order`), then :func:`combine_parts`.

    Parameters
    ----------
    ds : GraphDataset or StoredGraphs
        The ``n`` graphs to cover: in memory, or a pool on disk read a chunk at a time
        (:class:`~tmdlib.datasets._stored.StoredGraphs`; memory then holds a chunk or the parts in flight,
        never the pool).
    k : int
        Number of medoids.
    depth, weights
        TMD parameters.
    seed : int
    candidates, fixed : array_like of bool, shape (n,), optional
        Graphs allowed to / required to be medoids.
    part_size : int or "auto"
        Largest part solved as one k-medoids problem (larger pools are partitioned, see :func:`partition`);
        ``"auto"`` (default): chosen from the pool size (:func:`auto_part_size`: 4000, 1000 past 10⁵ graphs).
    max_pairs : int or "auto", optional
        Budget of exact TMD evaluations of the search over all parts (split in proportion to part sizes);
        ``"auto"`` (default): chosen from the pool (:func:`auto_pair_budget`); None or 0: none.  The
        certificate is exact whatever the budget.
    num_threads : int, optional
        numba threads of the exact TMD computations.
    map_parts : callable, optional
        ``map_parts(specs) -> results``: a :class:`PartResult` per :class:`PartSpec` of the sequence ``specs``
        (a :class:`PartPlan`: ``specs[p]`` reads part ``p``'s graphs, ``specs.stub(p)`` does not), in the same
        order, however obtained -- :func:`solve_part` on process or Dask workers, a cache of finished parts,
        persisted exact pairs (``solve_part(spec, exact=...)``).  The pipeline's:
        :func:`tasks.coreset.part_mapper`.  Default: :func:`solve_in_order` here.
    progress : callable, optional
        Status lines of the plan's passes over the pool (:func:`plan_parts`) and of the default mapper (a
        ``map_parts`` reports its own).
    scratch_dir : path, optional
        Where a :class:`~tmdlib.datasets._stored.StoredGraphs` pool's graphs are grouped by part (default: the
        system's temporary folder); removed at the end.

    Returns
    -------
    ScalableCoreset
        Medoids, assignment, exact distances, pairs computed and :class:`EngineInfo`;
        :meth:`ScalableCoreset.certificate` (what :func:`tmdlib.select._certificate.tmd_coreset` returns)
        turns it into a certificate.
    """
    max_pairs = resolve_max_pairs(max_pairs, ds.nodes_per_graph)
    part_size = resolve_part_size(part_size, len(ds), k if 1 <= k <= len(ds) else None)  # plan_parts checks k
    parts, specs = plan_parts(ds, k, depth, weights, seed=seed, candidates=candidates, fixed=fixed,
                              part_size=part_size, max_pairs=max_pairs, num_threads=num_threads,
                              scratch_dir=scratch_dir, progress=progress)
    try:
        results = solve_in_order(specs, progress) if map_parts is None else list(map_parts(specs))
    finally:
        specs.close()
    if len(results) != len(specs):
        raise ValueError(f"map_parts returned {len(results)} results for {len(specs)} parts")
    return combine_parts(len(ds), parts, results, part_size, max_pairs, specs.stub(0).per_cluster)
