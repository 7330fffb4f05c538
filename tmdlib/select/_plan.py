r"""Selection's policy, decided once: the budget :math:`k`, the TMD engine, the scalable engine's part size and
its budget of exact pairs (:func:`plan_selection` → :class:`SelectionPlan`).

:func:`tmdlib.select.select_graphs` runs what a plan says (it makes one from its arguments when not given one);
a caller that wants to tell its user what was chosen *before* the long search -- the pipeline's select stage --
makes the plan first, prints :attr:`SelectionPlan.lines` and hands the same plan to ``select_graphs``.  The rules
live here, in one place: the engine (:func:`resolve_engine`: exact while the matrix is cheap), the scalable search's
part size (:func:`resolve_part_size`: 4000 graphs, 1000 past 10⁵, raised until every part gets a medoid;
:func:`count_parts`, :func:`fit_part_size`, :func:`part_budgets`) and its pair budget (:func:`auto_pair_budget`,
from the graphs' sizes); the budget :math:`k` is :func:`tmdlib.select._coreset.budget_to_k`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._errors import InputError
from ._coreset import budget_to_k

__all__ = ["SelectionPlan", "plan_selection", "check_engine", "ENGINES", "resolve_engine", "matrix_node_pairs",
           "auto_part_size", "resolve_part_size", "count_parts", "fit_part_size", "split_work", "part_budgets",
           "auto_pair_budget", "resolve_max_pairs", "AUTO_PAIR_WORK", "AUTO_PART_SIZE", "AUTO_PART_SIZE_LARGE",
           "AUTO_PART_SWITCH", "auto_per_cluster", "PER_CLUSTER_LARGE"]

#: ``engine`` values of :func:`~tmdlib.select._certificate.tmd_coreset`.
ENGINES = ("exact", "scalable", "auto")

#: ``auto`` uses the exact engine while the full matrix is cheap: at most this many graphs ...
AUTO_EXACT_MAX_GRAPHS = 20000
#: ... and at most this many node pairs :math:`\sum_{i<j} |V_i||V_j|` (NCI1: 7.5e9, ~3 CPU-min;
#: DD: 5.6e10, ~15 CPU-h since its trees hardly repeat; MOSES: 6e14).
AUTO_EXACT_MAX_NODE_PAIRS = 2e10


def matrix_node_pairs(nodes_per_graph) -> float:
    r""":math:`\sum_{i<j} |V_i||V_j|`, the size of the work of the full TMD matrix."""
    v = np.asarray(nodes_per_graph, dtype=np.float64)
    return float((v.sum() ** 2 - (v * v).sum()) / 2)


def resolve_engine(engine: str, nodes_per_graph) -> str:
    """``exact`` or ``scalable`` for ``engine`` in :data:`ENGINES` and the graphs' sizes.

    ``auto`` is exact while the full matrix is cheap: at most :data:`AUTO_EXACT_MAX_GRAPHS` graphs and
    :data:`AUTO_EXACT_MAX_NODE_PAIRS` node pairs; else scalable.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}; got {engine!r}")
    if engine != "auto":
        return engine
    n = len(nodes_per_graph)
    fits = n <= AUTO_EXACT_MAX_GRAPHS and matrix_node_pairs(nodes_per_graph) <= AUTO_EXACT_MAX_NODE_PAIRS
    return "exact" if fits else "scalable"


# ---------------------------------------------------------------------------------------------- the scalable search's parts and pairs

def split_work(n: int, part_size: int) -> int:
    """Rows :func:`~tmdlib.select.scalable.partition` projects to split ``n`` graphs into parts of at most ``part_size``: the sizes of
    every group it splits, summed (each costs a projection of its rows).  ``O(log n)``, like
    :func:`count_parts`."""
    return _bisection(n, part_size)[1]


def count_parts(n: int, part_size: int) -> int:
    """The number of parts :func:`~tmdlib.select.scalable.partition` makes of ``n`` graphs (one part when ``n <= part_size``).

    The bisection splits ``m`` graphs into ``m // 2`` and ``m - m // 2``, so the count depends on ``n`` and
    ``part_size`` only: ``O(log n)`` work, no embedding needed.
    """
    return _bisection(n, part_size)[0]


def _bisection(n: int, part_size: int) -> tuple[int, int]:
    """``(parts, rows projected)`` of :func:`~tmdlib.select.scalable.partition`'s bisection of ``n`` graphs into parts of at most
    ``part_size`` (:func:`count_parts`, :func:`split_work`): a walk over the distinct group sizes."""
    n, part_size = int(n), int(part_size)
    if part_size < 1:
        raise ValueError(f"part_size must be >= 1, got {part_size}")
    memo: dict[int, tuple[int, int]] = {}

    def walk(m: int) -> tuple[int, int]:
        if m <= part_size:
            return (1 if m > 0 else 0), 0
        if m not in memo:
            (a, ra), (b, rb) = walk(m // 2), walk(m - m // 2)
            memo[m] = a + b, m + ra + rb
        return memo[m]

    return walk(n)


def fit_part_size(part_size: int, n: int, k: int) -> int:
    r"""The smallest part size :math:`\ge` ``part_size`` whose partition of ``n`` graphs has at most ``k`` parts.

    Every part needs a medoid of its own (a graph is certified by the nearest medoid of its part), so a small
    coreset of a large pool -- 0.1 % of 160,000 graphs is k = 160, fewer than the 256 parts of at most 1,000
    graphs -- takes larger parts: here 128 parts of 1,250 graphs.  Deterministic in ``(part_size, n, k)``.

    Parameters
    ----------
    part_size : int
        The part size asked for (or chosen from the pool).
    n : int
        Pool size.
    k : int
        Medoids in all, :math:`1 \le k \le n`.

    Returns
    -------
    int
        ``part_size`` itself when its parts are at most ``k``.
    """
    part_size, n, k = int(part_size), int(n), int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if count_parts(n, part_size) <= k:
        return part_size
    lo, hi = part_size + 1, max(n, part_size + 1)  # count_parts(n, n) = 1 <= k; the count only falls as m grows
    while lo < hi:
        mid = (lo + hi) // 2
        if count_parts(n, mid) <= k:
            hi = mid
        else:
            lo = mid + 1
    return lo


def part_budgets(sizes, k: int) -> np.ndarray:
    """Medoids per part: proportional to size (largest remainders), at least 1 per non-empty part, summing to k."""
    sizes = np.asarray(sizes, dtype=np.int64)
    n = int(sizes.sum())
    if k > n:
        raise ValueError(f"k = {k} > n = {n}")
    if k < int((sizes > 0).sum()):
        raise ValueError(f"k = {k} medoids for {int((sizes > 0).sum())} parts: every part needs one (larger parts: "
                         "see fit_part_size)")
    raw = sizes * k / n
    out = np.maximum(np.floor(raw).astype(np.int64), (sizes > 0).astype(np.int64))
    out = np.minimum(out, sizes)
    while out.sum() > k:
        j = int(np.argmax(np.where(out > 1, out - raw, -np.inf)))
        out[j] -= 1
    while out.sum() < k:
        j = int(np.argmax(np.where(out < sizes, raw - out, -np.inf)))
        out[j] += 1
    return out


def _give_fixed_room(budgets: np.ndarray, need: np.ndarray) -> np.ndarray:
    """Raise each part's budget to its fixed medoids ``need``, taking from the parts with most to spare."""
    while (budgets < need).any():
        j = int(np.argmax(need - budgets))
        budgets[j] += 1
        donors = np.flatnonzero(budgets > np.maximum(need, 1))
        budgets[donors[np.argmax(budgets[donors] - need[donors])]] -= 1
    return budgets


#: Exact-TMD work per graph of the pool that the search may spend when its budget is chosen from the pool
#: (``max_pairs="auto"``), in node pairs: a pair of graphs of :math:`|V_i|` and :math:`|V_j|` nodes costs about
#: :math:`|V_i||V_j|` (its computation trees, level by level).  Pools of small graphs never reach it (MOSES at 1 %
#: spends ~35 pairs of ~470 node pairs per graph, under 1 % of it; NCI1 at 10 % ~11 %); pools of large, hardly
#: repeating graphs are held to it (DD, 942 training graphs of 288 nodes: 7,935 pairs, ~0.14 CPU s each, 10 min
#: on 2 cores for an epsilon 1.7 % below what 10,000 pairs gave before the budget went to the graphs first).
AUTO_PAIR_WORK = 7e5


def auto_pair_budget(nodes_per_graph) -> int:
    r"""The search's budget of exact pairs chosen from the pool (``max_pairs="auto"``).

    .. math:: B = \left\lceil \frac{W\,n}{\bar v^{2}} \right\rceil

    with :math:`W` = :data:`AUTO_PAIR_WORK` node pairs of work per graph, :math:`n` graphs and :math:`\bar v`
    their mean number of nodes (:math:`\bar v^2` the mean work of a pair).  Deterministic: the same pool gets
    the same budget, and so the same coreset, on every machine.  The certificate is exact whatever the budget.

    Parameters
    ----------
    nodes_per_graph : array_like of int, shape (n,)

    Returns
    -------
    int
        At least ``n`` (one exact pair per graph).
    """
    v = np.asarray(nodes_per_graph, dtype=np.float64)
    if v.size == 0:
        return 0
    mean = max(float(v.mean()), 1.0)
    return max(int(math.ceil(AUTO_PAIR_WORK * v.size / (mean * mean))), int(v.size))


def resolve_max_pairs(max_pairs, nodes_per_graph) -> float | None:
    """``max_pairs`` as a number of pairs: ``"auto"`` -> :func:`auto_pair_budget`; ``None`` or ``0`` -> None (no
    budget); a positive number as it is."""
    if isinstance(max_pairs, str):
        if max_pairs != "auto":
            raise ValueError(f"max_pairs must be a number of pairs, 0 / None (no budget) or 'auto'; got {max_pairs!r}")
        return float(auto_pair_budget(nodes_per_graph))
    if max_pairs is None or max_pairs == 0:
        return None
    if not max_pairs > 0:
        raise ValueError(f"max_pairs must be positive, 0 / None (no budget) or 'auto'; got {max_pairs!r}")
    return float(max_pairs)


#: Part size of pools up to :data:`AUTO_PART_SWITCH` graphs (``part_size="auto"``).
AUTO_PART_SIZE = 4000
#: Part size of larger pools (``part_size="auto"``).
AUTO_PART_SIZE_LARGE = 1000
#: Pool size above which ``part_size="auto"`` takes :data:`AUTO_PART_SIZE_LARGE`.
AUTO_PART_SWITCH = 100_000


def auto_part_size(n: int) -> int:
    r"""The part size chosen from the pool (``part_size="auto"``): :data:`AUTO_PART_SIZE` (4000) for pools of at
    most :data:`AUTO_PART_SWITCH` (100,000) graphs, :data:`AUTO_PART_SIZE_LARGE` (1000) above.

    Why (BENCHMARKS.md, "MOSES: part size vs time and ε"): the exact pairs a graph costs grow with the size of
    its part (MOSES at 1 %: ~32 per graph in parts of 1000, ~102 in parts of 4000), so the search costs
    :math:`O(n \cdot c(m))` and parts of 4000 took 3.1× the CPU of parts of 1000 for an ε 13 % smaller.  Up to
    10⁵ graphs that is minutes on two cores and the better ε is worth them; past it the pool is held to the
    cheaper parts (1.27 M MOSES graphs: ~2 CPU hours instead of ~6).  Deterministic in ``n``: the same pool gets
    the same parts (and coreset) on every machine.

    Parameters
    ----------
    n : int
        Pool size.

    Returns
    -------
    int
    """
    return AUTO_PART_SIZE if int(n) <= AUTO_PART_SWITCH else AUTO_PART_SIZE_LARGE


#: Swap candidates per cluster and round in the parts of pools past :data:`AUTO_PART_SWITCH` graphs.
PER_CLUSTER_LARGE = 2


def auto_per_cluster(n: int) -> int | None:
    r"""Swap candidates the parts of a pool of ``n`` graphs try per cluster and round: the search's own default
    (None: 4, :func:`~tmdlib.select.scalable.refine_kmedoids`) up to :data:`AUTO_PART_SWITCH` graphs,
    :data:`PER_CLUSTER_LARGE` (2) above, the same switch as :func:`auto_part_size`.

    Why (BENCHMARKS.md, "MOSES in an hour"): on MOSES parts the rejected candidates are about half the exact
    pairs; two per cluster cut a part's pairs by ~40 % and its time by ~20 % for an objective ~1.4 % larger.
    Pools up to :data:`AUTO_PART_SWITCH` graphs (the held-back checks, PROTEINS and ogbg-molbbbp at 10 %) keep
    the fuller search.  Every assignment stays exact, so the certificate is exact either way.
    """
    return None if int(n) <= AUTO_PART_SWITCH else PER_CLUSTER_LARGE


def resolve_part_size(part_size, n: int, k: int | None = None) -> int:
    """``part_size`` as a number of graphs: ``"auto"`` or None -> :func:`auto_part_size` of the pool; an integer
    of at least 2 as it is; with ``k`` given, raised where needed so that every part gets a medoid
    (:func:`fit_part_size`)."""
    if k is not None:
        return fit_part_size(resolve_part_size(part_size, n), n, k)
    if part_size is None or part_size == "auto":
        return auto_part_size(n)
    if isinstance(part_size, str):
        try:
            part_size = int(part_size)
        except ValueError:
            raise ValueError(f"part_size must be a number of graphs (>= 2) or 'auto'; got {part_size!r}") from None
    if isinstance(part_size, bool) or int(part_size) != part_size or part_size < 2:
        raise ValueError(f"part_size must be a number of graphs (>= 2) or 'auto'; got {part_size!r}")
    return int(part_size)


@dataclass(frozen=True)
class SelectionPlan:
    r"""What a selection will do, decided before it runs.

    Attributes
    ----------
    method : str
        The registered selection method.
    n : int
        Pool size.
    k : int
        The budget: :math:`k = \min(n, \max(1, \lceil \mathrm{fraction}\cdot n\rceil))` or the count given
        (0 for an empty pool).
    engine : {"exact", "scalable"}
        The TMD engine (method ``tmd``; the certificate's for the others): ``exact`` with a TMD matrix or while
        the matrix is cheap, else ``scalable``.
    part_size : int or None
        Scalable ``tmd`` only: the largest part, in graphs, after it was raised so that every part gets a medoid;
        None otherwise.
    asked_part_size : int or None
        Scalable ``tmd`` only: the part size before that raise (``"auto"`` resolved from the pool size).
    max_pairs : float or None
        Scalable ``tmd`` only: the search's budget of exact TMD evaluations (None: no budget, or not the
        scalable ``tmd`` search).
    lines : tuple of str
        What was chosen from the pool, one human-readable line each (the part size when chosen or raised, the
        pair budget when chosen), for the user to read before the search.
    """

    method: str
    n: int
    k: int
    engine: str
    part_size: int | None = None
    asked_part_size: int | None = None
    max_pairs: float | None = None
    lines: tuple = ()

    @property
    def scalable(self) -> bool:
        """The scalable TMD search runs (method ``tmd``, engine ``scalable``): it reads a pool on disk part by part
        and is the one user of :attr:`part_size` and :attr:`max_pairs`."""
        return self.method == "tmd" and self.engine == "scalable"

    @property
    def parts(self) -> int | None:
        """How many parts the scalable search splits the pool into (None when it does not run)."""
        return count_parts(self.n, self.part_size) if self.scalable and self.n else None

    def to_json(self) -> dict:
        """``{"method", "n", "k", "engine", "part_size", "max_pairs"}``, JSON-ready."""
        return {"method": self.method, "n": int(self.n), "k": int(self.k), "engine": self.engine,
                "part_size": self.part_size, "max_pairs": self.max_pairs}


def check_engine(engine: str, has_matrix: bool) -> None:
    """Refuse an unknown engine (``ValueError``) and a TMD matrix given to the scalable engine, which never reads
    one (:class:`~tmdlib._errors.InputError`): the checks :func:`plan_selection` makes first, for callers that would
    otherwise read a matrix before planning."""
    if has_matrix and engine == "scalable":
        raise InputError(None, "the scalable engine never reads a TMD matrix; drop the matrix or use the exact engine")
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}; got {engine!r}")


def plan_selection(pool, method: str = "tmd", *, k: int | None = None, fraction: float | None = None,
                   engine: str = "auto", has_matrix: bool = False, part_size: int | str | None = "auto",
                   max_pairs: float | str | None = "auto") -> SelectionPlan:
    r"""Decide a selection's budget, TMD engine, part size and pair budget, with the lines that say so.

    Parameters
    ----------
    pool : GraphDataset, StoredGraphs or int
        The pool (its ``nodes_per_graph`` decide the engine and the pair budget), or only its size when a TMD
        matrix is all there is of it (then the engine is ``exact``).
    method : str
        The selection method (part size and pair budget concern ``tmd`` on the scalable engine only).
    k, fraction
        The budget, exactly one (:func:`tmdlib.select._coreset.budget_to_k`).
    engine : {"auto", "exact", "scalable"}
        As asked; ``auto`` is exact while the full matrix is cheap
        (:func:`resolve_engine`).
    has_matrix : bool
        The pool's exact TMD matrix is given (the exact engine reads it; ``scalable`` is then refused).
    part_size : int, "auto" or None
        Largest part of the scalable search; ``"auto"`` / None: chosen from the pool size
        (:func:`auto_part_size`), raised where ``k`` is fewer than the parts.
    max_pairs : int, "auto" or None
        Budget of exact pairs of the scalable search: ``"auto"`` chosen from the pool
        (:func:`auto_pair_budget`), 0 or None: none.

    Returns
    -------
    SelectionPlan

    Raises
    ------
    ValueError
        A bad budget, engine, part size or pair budget.
    InputError
        ``engine="scalable"`` with a TMD matrix.
    """
    sizes = getattr(pool, "nodes_per_graph", None)
    n = int(pool) if sizes is None else len(sizes)
    kk = budget_to_k(n, fraction=fraction, count=k)
    check_engine(engine, has_matrix)
    resolved = "exact" if (has_matrix or sizes is None) else resolve_engine(engine, sizes)
    if not (method == "tmd" and resolved == "scalable"):
        return SelectionPlan(method, n, kk, resolved)
    asked = resolve_part_size(part_size, n)
    size = resolve_part_size(part_size, n, kk) if n else asked  # raised where k is fewer than the parts
    lines = []
    if part_size is None or part_size == "auto":
        parts = "one part" if n <= size else f"parts of at most {size:,} graphs"
        lines.append(f"part size chosen from the pool: {asked:,} ({n:,} training graphs: {parts}; pools over "
                     f"{AUTO_PART_SWITCH:,} graphs take {AUTO_PART_SIZE_LARGE:,}, ~3x faster for a larger epsilon); "
                     "--part-size N sets one")
    if size != asked:
        lines.append(f"part size raised from {asked:,} to {size:,} graphs: k = {kk:,} medoids and every part needs "
                     f"one ({count_parts(n, asked):,} parts of at most {asked:,} graphs, "
                     f"{count_parts(n, size):,} of at most {size:,})")
    if isinstance(max_pairs, str) and max_pairs == "auto":
        budget = auto_pair_budget(sizes)
        lines.append(f"pair budget for the search, chosen from the pool: {budget:,} exact pairs ({AUTO_PAIR_WORK:.3g} "
                     f"node pairs of TMD work per graph at {np.asarray(sizes).mean():.1f} nodes per graph); "
                     "--max-pairs N sets one, 0 none; the certificate is exact either way")
    return SelectionPlan(method, n, kk, resolved, size, asked, resolve_max_pairs(max_pairs, sizes), tuple(lines))
