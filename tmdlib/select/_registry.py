r"""The registry of graph-selection methods: every method is declared here once.

A method is a function of a :class:`Problem` (the pool, the budget, the seed, the reuse constraints and
whatever the method needs: the pool's graphs, a distance matrix, its molecules' SMILES) returning a
:class:`Picked` (positions into the pool and training weights).  :func:`tmdlib.select.select_graphs` is
the one caller: it checks what the method needs, refuses what would not fit in memory before anything is
allocated, runs the method and attaches the exact TMD certificate of Lemma 3.2 to whatever was picked.
The CLI, the pipeline, the experiment runner and the PyG one-call API list and call methods only through
here.

Registering a method::

    register(MethodSpec("mine", run=my_function, needs=("graphs",),
                        summary="one line for --help", memory=lambda p: 8 * p.n * p.n))

``needs`` names what :class:`Problem` must carry: ``"graphs"`` (a :class:`~tmdlib._graph.GraphDataset`),
``"tmd"`` (the TMD matrix or the graphs to compute TMD from), ``"smiles"`` (one SMILES per pool member).
A method that reads labels would set ``label_free=False``; none here does.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

__all__ = ["MethodSpec", "Problem", "Picked", "register", "get_method", "method_names", "METHODS", "NEEDS"]

#: What a method may need from :class:`Problem`.
NEEDS = ("graphs", "tmd", "smiles")


@dataclass
class Problem:
    r"""One selection problem: choose ``k`` of the ``n`` pool members.

    Attributes
    ----------
    n, k : int
        Pool size and budget, :math:`1 \le k \le n`.
    seed : int
    dataset : GraphDataset or None
        The pool's graphs (``None`` when only a matrix was given).
    matrix : ndarray, shape (n, n), or None
        The exact TMD matrix of the pool, when known.
    distance : ndarray, shape (n, n), or None
        A precomputed matrix of the method's own distance (Feature, WL, Tanimoto), when the caller has one.
    smiles : list of str or None
        One SMILES per pool member (chemistry methods).
    candidates, fixed : ndarray of bool, shape (n,), or None
        Label reuse (:func:`tmdlib.select._coreset.reuse_labelled`): only ``candidates`` may be picked; every
        ``fixed`` member must be picked.
    depth : int
    weights
        TMD depth and level weights.
    engine : str
        ``"exact"`` or ``"scalable"`` (resolved), the TMD engine.
    options : dict
        Method options (``restarts``, ``backend``, ``map_parts``, ``progress``, ``num_threads``,
        ``memory_limit``, ``scratch_dir``, ...).
    plan : SelectionPlan or None
        What :func:`~tmdlib.select.select_graphs` decided (:func:`tmdlib.select._plan.plan_selection`): ``k``,
        ``engine`` and the scalable search's ``part_size`` and ``max_pairs``.
    """

    n: int
    k: int
    seed: int = 0
    dataset: object = None
    matrix: np.ndarray | None = None
    distance: np.ndarray | None = None
    smiles: list | None = None
    candidates: np.ndarray | None = None
    fixed: np.ndarray | None = None
    depth: int = 4
    weights: object = "pascal"
    engine: str = "exact"
    options: dict = field(default_factory=dict)
    plan: object = None


@dataclass
class Picked:
    r"""What a method returns.

    Attributes
    ----------
    positions : ndarray of int64, shape (k,)
        Picked pool members, sorted ascending.
    tau : ndarray of float64, shape (k,)
        Training weights aligned with ``positions`` (cluster sizes for clustering methods; ones for Random).
    objective : float or None
        The method's own objective (e.g. the k-medoids objective in its own distance), as a mean over the pool.
    certificate : CoresetCertificate or None
        The exact TMD certificate when the method already has it (TMD k-medoids); otherwise
        :func:`~tmdlib.select.select_graphs` computes it.
    info : dict
        JSON-ready facts (restarts, thresholds, ...).
    """

    positions: np.ndarray
    tau: np.ndarray
    objective: float | None = None
    certificate: object = None
    info: dict = field(default_factory=dict)


@dataclass(frozen=True)
class MethodSpec:
    """A selection method as registered.

    Attributes
    ----------
    name : str
        What users type (``--method``), lower case.
    run : callable
        ``run(problem: Problem) -> Picked``.
    needs : tuple of str
        Subset of :data:`NEEDS`.
    label_free : bool
        Never reads labels (every registered method is).
    weighted : bool
        Gives cluster-size weights τ (False: unit weights).
    reuses_labels : bool
        Honours ``Problem.candidates`` / ``Problem.fixed`` (already-labelled graphs kept first).
    summary : str
        One line for ``--help`` and the docs.
    memory : callable or None
        ``memory(problem) -> bytes`` the method allocates beyond the pool itself, estimated before anything
        is allocated (:func:`~tmdlib.select.select_graphs` refuses what does not fit).
    max_pool_hint : str
        What to use instead when the memory estimate does not fit.
    uses : tuple of str
        What the method reads when the pool has it, without needing it (``"smiles"``: ``tmd-rounds`` picks on the
        fingerprint distance of a molecule pool, on TMD otherwise).
    """

    name: str
    run: Callable[[Problem], Picked]
    needs: tuple = ()
    label_free: bool = True
    weighted: bool = True
    reuses_labels: bool = True
    summary: str = ""
    memory: Callable[[Problem], float] | None = None
    max_pool_hint: str = ""
    uses: tuple = ()


METHODS: dict[str, MethodSpec] = {}


def register(spec: MethodSpec) -> MethodSpec:
    """Add a method (its name must be new and its ``needs`` known); returns it."""
    if spec.name in METHODS:
        raise ValueError(f"selection method {spec.name!r} is already registered")
    unknown = set(spec.needs) - set(NEEDS)
    if unknown:
        raise ValueError(f"method {spec.name!r}: unknown needs {sorted(unknown)} (known: {NEEDS})")
    METHODS[spec.name] = spec
    return spec


def method_names() -> tuple[str, ...]:
    """Registered method names, in registration order (the built-in ones are registered when
    :mod:`tmdlib.select` is imported, by :mod:`tmdlib.select._methods`)."""
    return tuple(METHODS)


def get_method(name: str) -> MethodSpec:
    """The registered method ``name``; ``ValueError`` listing the known ones otherwise."""
    names = method_names()
    if name not in METHODS:
        raise ValueError(f"unknown selection method {name!r}: {', '.join(names)}")
    return METHODS[name]
