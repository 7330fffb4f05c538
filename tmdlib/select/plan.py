r"""Selection's policy, decided once: the budget :math:`k`, the TMD engine, the scalable engine's part size and
its budget of exact pairs (:func:`plan_selection` → :class:`SelectionPlan`).

:func:`tmdlib.select.select_graphs` runs what a plan says (it makes one from its arguments when not given one);
a caller that wants to tell its user what was chosen *before* the long search -- the pipeline's select stage --
makes the plan first, prints :attr:`SelectionPlan.lines` and hands the same plan to ``select_graphs``.  The rules
themselves live with the engines: :func:`tmdlib.select.coreset.budget_to_k` (the budget),
:func:`tmdlib.select.certificate.resolve_engine` (exact while the matrix is cheap),
:func:`tmdlib.select.scalable.resolve_part_size` (4000 graphs, 1000 past 10⁵, raised until every part gets a
medoid) and :func:`tmdlib.select.scalable.auto_pair_budget` (the pair budget from the graphs' sizes).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .certificate import ENGINES, resolve_engine
from .coreset import budget_to_k
from .scalable import (AUTO_PAIR_WORK, AUTO_PART_SIZE_LARGE, AUTO_PART_SWITCH, auto_pair_budget, count_parts,
                       resolve_max_pairs, resolve_part_size)

__all__ = ["SelectionPlan", "plan_selection", "check_engine"]


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
    one (:class:`~tmdlib.errors.InputError`): the checks :func:`plan_selection` makes first, for callers that would
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
        The budget, exactly one (:func:`tmdlib.select.coreset.budget_to_k`).
    engine : {"auto", "exact", "scalable"}
        As asked; ``auto`` is exact while the full matrix is cheap
        (:func:`tmdlib.select.certificate.resolve_engine`).
    has_matrix : bool
        The pool's exact TMD matrix is given (the exact engine reads it; ``scalable`` is then refused).
    part_size : int, "auto" or None
        Largest part of the scalable search; ``"auto"`` / None: chosen from the pool size
        (:func:`tmdlib.select.scalable.auto_part_size`), raised where ``k`` is fewer than the parts.
    max_pairs : int, "auto" or None
        Budget of exact pairs of the scalable search: ``"auto"`` chosen from the pool
        (:func:`tmdlib.select.scalable.auto_pair_budget`), 0 or None: none.

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
