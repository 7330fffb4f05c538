r"""k-medoids under TMD without the :math:`n \times n` matrix, with an exact certificate.

The engine behind ``tmd_coreset(..., engine="scalable")`` (:mod:`tmdlib.select._certificate`).

Ingredients
-----------
* **Lower bounds** :math:`\mathrm{LB}(i, j) \le \mathrm{TMD}(G_i, G_j)` from level histograms, level
  means and tree norms (:class:`tmdlib.distance._lower.LowerBound`): ``O(L |E|)`` to build, ``O(L F)``
  per pair, ~0.8 of TMD (median) on molecules.
* **Exact distances on demand**: a :class:`PairCache` in front of a batched exact TMD function
  (local threads, processes or a Dask cluster); every pair is computed at most once and counted.

Algorithm (one part of at most ``part_size`` graphs: :func:`refine_kmedoids`)
-----------------------------------------------------------------------------
1. *Proxy*: FasterPAM on a fitted estimate of TMD (least squares on the three lower bounds, from a few
   hundred exact pairs of the part: :func:`fit_proxy`) gives ``k`` starting medoids.
2. *Exact nearest and second-nearest medoid* of every graph (:func:`nearest_two`): medoids are tried
   in increasing LB order and the search stops when the next LB is at least the second-best exact
   distance found -- so the result is the exact nearest (and second-nearest) medoid, with far fewer
   than ``n k`` exact distances.  :class:`SwapState` holds the medoids and these two per graph.
3. *Restricted eager swaps* (FasterPAM's swap rule on exact distances, :meth:`SwapState.try_swap` /
   :meth:`SwapState.apply`): for a candidate non-medoid ``x`` only graphs with
   :math:`\mathrm{LB}(i, x) < d_2(i)` can change medoid, so only those exact distances are needed.
   Candidates: per cluster, the members most central under the proxy.  Rounds repeat until no swap improves
   the objective by more than ``tol``.
4. *Certificate*: each graph, its exact nearest medoid and that exact distance.

Larger pools are split into parts of graphs close under the lower bound (:func:`plan_parts`: recursive
bisection along the main axis of the level-mean embedding); each part gets ``k`` in proportion to its
size and is solved as above (:func:`solve_part` of a :class:`PartSpec`, giving a :class:`PartResult`),
so the cost grows linearly in ``n`` for a fixed part size, and every part can run on its own worker
(``map_parts`` of :func:`scalable_coreset`).  The union of the parts' medoids is the coreset
(:func:`combine_parts`); each graph is certified by its nearest medoid in its part (Lemma 3.2 holds for
any assignment).

Modules: :mod:`~tmdlib.select.scalable._pairs` (exact pairs on demand, nearest medoids),
:mod:`~tmdlib.select.scalable._swaps` (one part's swap search and its proxy), :mod:`~tmdlib.select.scalable._parts`
(parts solved, the pool partitioned and planned), :mod:`~tmdlib.select.scalable._api` (the entry point
:func:`scalable_coreset`), :mod:`~tmdlib.select.scalable.cache` (parts and pairs cached by content, so a killed run
resumes); part sizes and pair budgets are decided in :mod:`tmdlib.select._plan`, re-exported here.
"""
from ...distance._lower import LowerBound  # noqa: F401  (the bound every module here prunes with)
from .._plan import (AUTO_PAIR_WORK, AUTO_PART_SIZE, AUTO_PART_SIZE_LARGE, AUTO_PART_SWITCH, PER_CLUSTER_LARGE,
                    auto_pair_budget, auto_part_size, auto_per_cluster, count_parts, fit_part_size, part_budgets, resolve_max_pairs, resolve_part_size,
                    split_work)
from ._api import EngineInfo, ScalableCoreset, combine_parts, scalable_coreset
from ._pairs import (DENSE_CACHE_MAX, STATUS_SECONDS, Countdown, Exact, Nearest, PairCache, ProgressFn,  # noqa: F401
                    nearest_medoids, nearest_two)
from ._parts import (EXHAUSTIVE_PART, PartPlan, PartSpec, _principal_projection, part_engine,  # noqa: F401
                    partition, plan_parts, pool_embedding, solve_in_order, solve_part)
from ._swaps import (FIT_PAIRS, MAX_PIVOTS, MAX_TRIED, PartResult, SearchStats, SwapState, SwapTrial,  # noqa: F401
                    Verdict, _fit_sample_size, _swap_gain, fit_proxy, refine_kmedoids)

__all__ = ["PairCache", "Nearest", "nearest_two", "nearest_medoids", "SwapState", "SwapTrial", "Verdict", "SearchStats",
           "refine_kmedoids", "fit_proxy", "Countdown", "FIT_PAIRS", "PartSpec", "PartResult", "PartPlan", "part_engine",
           "solve_part", "partition", "split_work", "part_budgets", "plan_parts",
           "pool_embedding", "auto_part_size", "auto_per_cluster", "resolve_part_size", "count_parts", "fit_part_size", "auto_pair_budget",
           "resolve_max_pairs",
           "solve_in_order", "EngineInfo", "ScalableCoreset", "combine_parts", "scalable_coreset", "EXHAUSTIVE_PART"]
