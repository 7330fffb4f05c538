r"""One entry point for graph selection: :func:`select_graphs` (the graph-level twin of
:func:`tmdlib.select.select_nodes`).

Whatever the method (:mod:`tmdlib.select._methods`: the paper's TMD coreset, its baselines, the chemists'
pickers), the result is one :class:`Selection`: the picked pool members with their training weights, and the
exact TMD certificate of Lemma 3.2 for them.  Lemma 3.2 holds for *any* assignment :math:`a` of the pool to
the picks, with :math:`\tau_j = |a^{-1}(j)|` and :math:`\varepsilon = \frac1n \sum_i \mathrm{TMD}(G_i,
G_{a(i)})`; the certificate uses the nearest-pick assignment, so ``n`` exact distances prove the bound of any
selection, read off the TMD matrix when one is given, otherwise found by the lower-bound-pruned exact search of
:mod:`tmdlib.select.scalable` (no :math:`n \times n` matrix).

The CLI (``tmdsub select``), the pipeline's select stage, the experiment runner and the PyG one-call API
(:func:`tmdlib.torch.pyg.select_coreset`) all call :func:`select_graphs` and nothing else.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .._errors import InputError
from .._graph import GraphDataset
from ._coreset import reuse_labelled
from ._plan import SelectionPlan, check_engine, plan_selection
from ._registry import Problem, get_method

__all__ = ["Selection", "select_graphs", "check_engine"]


#: What the pool setting's methods (``tmd-mix``, ``tmd-rounds``) say of a round, kept in :meth:`Selection.to_json`.
ROUND_KEYS = ("first", "space", "share", "strategy", "difficulty_from", "round_new", "fallback", "control",
              "strategy_new", "goal", "target", "acquisition")


@dataclass(frozen=True, eq=False)
class Selection:
    r"""A selection of ``k`` of the ``n`` pool members and the evidence for its bound.

    Attributes
    ----------
    method : str
        The registered method that picked.
    k, n, seed : int
    positions : ndarray of int64, shape (k,)
        Picked members (positions into the pool), sorted ascending.
    ids : ndarray of int64, shape (k,)
        Their graph ids (``dataset.graph_ids[positions]``; the positions when the pool was a matrix).
    tau : ndarray of float64, shape (k,)
        Training weights aligned with ``positions`` (:mod:`tmdlib.select._methods`: cluster sizes of the
        method's own assignment; ones for Random / MaxMin).
    certificate : CoresetCertificate or None
        The exact TMD certificate of the picks (nearest-pick assignment, distances, its τ and ε), None when
        ``certify=False``.
    objective : float or None
        The method's own objective (mean over the pool, in the method's distance), where it has one.
    engine : str
        How the certificate was obtained: ``"exact"`` (the TMD matrix), ``"scalable"`` (lower-bound-pruned
        exact search; also the scalable TMD engine) or ``"none"``.
    labelled_in_pool, reused_labels : int
        Pool members that already had a label, and how many of them were picked.
    seconds : dict
        CPU seconds: ``select`` (the method) and ``certificate``.
    info : dict
        Method / engine facts, JSON-ready.
    plan : SelectionPlan or None
        What was decided before the run: budget, TMD engine, part size and pair budget
        (:func:`tmdlib.select._plan.plan_selection`).  Not in :meth:`to_json`: ``k``, ``engine`` and, for the
        scalable search, ``engine_info`` (``part_size``, ``max_pairs``) already say it.
    """

    method: str
    k: int
    n: int
    seed: int
    positions: np.ndarray
    ids: np.ndarray
    tau: np.ndarray
    certificate: object = None
    objective: float | None = None
    engine: str = "none"
    labelled_in_pool: int = 0
    reused_labels: int = 0
    seconds: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    plan: SelectionPlan | None = None

    @property
    def epsilon(self) -> float | None:
        r""":math:`\varepsilon_\Sigma = \sum_i \mathrm{TMD}(G_i, G_{a(i)})` (None without a certificate)."""
        return None if self.certificate is None else float(self.certificate.epsilon)

    @property
    def epsilon_mean(self) -> float | None:
        r""":math:`\varepsilon = \varepsilon_\Sigma / n`, Lemma 3.2's medoid objective (None without a certificate)."""
        return None if self.certificate is None else float(self.certificate.epsilon_mean)

    @property
    def pairs_computed(self) -> int:
        """Exact TMD evaluations made by the selection and its certificate."""
        return 0 if self.certificate is None else int(self.certificate.pairs_computed)

    def to_json(self, graph_ids=None, arrays: bool = False) -> dict:
        """The selection as the pipeline's ``selection.json`` fields (ids are graph ids).

        Parameters
        ----------
        graph_ids : array_like of int, shape (n,), optional
            Graph id of each pool member (default: the pool dataset's, as in ``ids``).
        arrays : bool
            Keep the per-graph fields (``assignment``: int64, ``distance``: float64, shape (n,)) as numpy arrays
            instead of lists, for a writer that streams them: as lists of Python numbers they take ~36 bytes a
            graph each (0.6 GB for 8 M graphs).  Default False: every value a JSON type.
        """
        gids = np.asarray(graph_ids) if graph_ids is not None else None
        ids = self.ids if gids is None else gids[self.positions]
        cert = self.certificate
        assignment = distance = None
        if cert is not None:
            assignment = gids[cert.assignment] if gids is not None else self._id_of(cert.assignment)
            distance = np.asarray(cert.distance, dtype=np.float64)
            if not arrays:
                assignment, distance = assignment.tolist(), distance.tolist()
        return {"method": self.method, "engine": self.engine, "k": int(self.k), "n_train": int(self.n),
                "seed": int(self.seed), "medoids": np.asarray(ids).tolist(),
                "tau": np.asarray(self.tau, dtype=float).tolist(),
                "assignment": assignment, "distance": distance,
                "epsilon": self.epsilon, "epsilon_mean": self.epsilon_mean, "pairs_computed": self.pairs_computed,
                "epsilon_method": self.objective,
                "certificate_tau": cert.tau.tolist() if cert is not None else None,
                "engine_info": dict(cert.info) if cert is not None else {},
                "labelled_in_pool": int(self.labelled_in_pool), "reused_labels": int(self.reused_labels),
                **({"rounds": self._rounds()} if any(key in self.info for key in ROUND_KEYS) else {})}

    def _rounds(self) -> dict:
        """What the pool setting's methods said of the round, the control arm and the strategy's new picks as ids."""
        out = {key: self.info[key] for key in ROUND_KEYS if key in self.info}
        for key, name in (("control", "control_ids"), ("strategy_new", "strategy_new_ids")):
            if key in out:
                out[name] = self._id_of(np.asarray(out.pop(key), dtype=np.int64)).tolist()
        return out

    def _id_of(self, positions: np.ndarray) -> np.ndarray:
        """Graph ids of pool positions that are picks (via ``positions`` → ``ids``); int64, shaped like ``positions``."""
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size == 0:
            return np.empty(positions.shape, np.int64)
        order = np.argsort(self.positions, kind="stable")
        picks, ids = np.asarray(self.positions)[order], np.asarray(self.ids, dtype=np.int64)[order]
        at = np.minimum(np.searchsorted(picks, positions), max(len(picks) - 1, 0))
        if len(picks) == 0 or not np.array_equal(picks[at], positions):
            raise KeyError("assignment names a pool position that is not a pick")
        return ids[at]


def _labelled_mask(labelled, n: int) -> np.ndarray:
    if labelled is None:
        return np.zeros(n, dtype=bool)
    arr = np.asarray(labelled)
    if arr.dtype == bool:
        if arr.shape != (n,):
            raise ValueError(f"labelled mask must have shape ({n},), got {arr.shape}")
        return arr.copy()
    mask = np.zeros(n, dtype=bool)
    idx = arr.astype(np.int64).ravel()
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ValueError(f"labelled positions must lie in [0, {n})")
    mask[idx] = True
    return mask


def _auto(value):
    """A ``part_size`` / ``max_pairs`` option left out or None: ``"auto"`` (what the scalable engine takes then)."""
    return "auto" if value is None else value


def _check_plan(plan: SelectionPlan, method: str, n: int, exact_only: bool, *, k, fraction, engine: str,
                options: dict) -> None:
    """Refuse a plan made for another pool or method, or one given beside what it decides (``ValueError``)."""
    if plan.method != method or plan.n != n:
        raise ValueError(f"the plan is for method {plan.method!r} on {plan.n} graphs; this selection is {method!r} "
                         f"on {n}")
    given = [name for name, value in (("k", k), ("fraction", fraction), ("part_size", options.get("part_size")),
                                      ("max_pairs", options.get("max_pairs"))) if value is not None]
    if engine != "auto":
        given.append("engine")
    if given:
        raise ValueError(f"give {', '.join(given)} to plan_selection, not beside a plan (the plan decides them)")
    if exact_only and plan.engine != "exact":
        raise ValueError("the plan takes the scalable engine, but only a TMD matrix describes this pool (or one is "
                         "given): plan it with has_matrix=True")


def select_graphs(data, method: str = "tmd", *, k: int | None = None, fraction: float | None = None,
                  engine: str = "auto", seed: int = 0, depth: int = 4, weights="pascal",
                  matrix: np.ndarray | None = None, distance: np.ndarray | None = None, smiles=None,
                  labelled=None, map_parts=None, certify: bool = True, num_threads: int | None = None,
                  progress=None, plan: SelectionPlan | None = None, **options) -> Selection:
    r"""Choose the graphs worth labelling, with the exact TMD certificate of the choice.

    Parameters
    ----------
    data : GraphDataset, StoredGraphs or ndarray, shape (n, n)
        The pool: its graphs, or only its exact TMD matrix (then methods that need graphs or SMILES cannot run).
        A :class:`~tmdlib.datasets._stored.StoredGraphs` (a pool read from its graph store a chunk at a time) is
        read part by part by the scalable TMD engine, never held whole; other methods and engines load it.
    method : str
        A registered method (:func:`tmdlib.select._registry.method_names`; see :mod:`tmdlib.select._methods`).
    k, fraction : int or float
        The budget, exactly one: ``k`` picks, or :math:`k = \min(n, \max(1, \lceil \mathrm{fraction}\cdot
        n\rceil))` (:func:`tmdlib.select._coreset.budget_to_k`).
    engine : {"auto", "exact", "scalable"}
        The TMD engine (method ``tmd``, and the certificate): ``exact`` k-medoids on the full TMD matrix (made
        when not given), ``scalable`` never builds it, ``auto`` exact while the matrix is cheap
        (:func:`tmdlib.select._certificate.resolve_engine`).  ``scalable`` with a ``matrix`` is refused.
    seed : int
    depth, weights
        TMD depth :math:`L` and level weights (the certificate's, and the method's for ``tmd``).
    matrix : ndarray, shape (n, n), optional
        The pool's exact TMD matrix (``data`` a dataset): the exact engine and the certificate read it.
    distance : ndarray, shape (n, n), optional
        A precomputed matrix of the method's own distance (Feature, WL) to skip recomputing it.
    smiles : sequence of str, length n, optional
        The pool's molecules (chemistry methods need them).
    labelled : array_like of bool, shape (n,), or of int, optional
        Members that already have a label: they are kept first (all when they fit in ``k``, else ``k`` picked
        among them) so that only the others need labelling (:func:`tmdlib.select._coreset.reuse_labelled`).
    map_parts : callable, optional
        The scalable engine's map over parts (run them on a cluster, cache finished parts; see
        :func:`tmdlib.select.scalable.scalable_coreset`).
    certify : bool, default True
        Compute the TMD certificate of the picks.
    num_threads : int, optional
        numba threads of the TMD engine.
    progress : callable, optional
        ``progress(line)`` for long runs (the scalable engine).
    plan : SelectionPlan, optional
        What to run, decided beforehand (:func:`tmdlib.select._plan.plan_selection`, e.g. to print its lines
        first): its budget, engine, part size and pair budget are used, so ``k`` / ``fraction``, an ``engine``
        other than ``auto``, ``part_size`` and ``max_pairs`` are then refused.  Default: made here from those
        arguments (``part_size`` and ``max_pairs`` left out or None: ``"auto"``).
    **options
        Method options: ``restarts`` (5), ``backend`` (``"fasterpam"``), ``part_size``, ``max_pairs``,
        ``scratch_dir`` (where the scalable engine groups a stored pool by part), ``memory_limit``, and the chemistry
        pickers' own.

    Returns
    -------
    Selection
        With the :class:`~tmdlib.select._plan.SelectionPlan` it ran (``plan``).

    Raises
    ------
    InputError
        The method needs what was not given (graphs, SMILES), a matrix with the scalable engine, or the method
        would need more memory than is available (with the estimate and what fits instead).
    ValueError
        Unknown method or engine, bad budget, a ``plan`` made for another pool or method or given with what it
        decides.
    """
    from ..datasets.limits import check_fits, format_size, memory_budget
    from ..datasets._stored import StoredGraphs
    from ._certificate import certificate_from_matrix, certify_medoids, engine_memory_bytes

    spec = get_method(method)
    if isinstance(data, (GraphDataset, StoredGraphs)):
        ds, n = data, len(data)
    else:
        if matrix is not None:
            raise ValueError("give the TMD matrix either as data or as matrix=, not both")
        matrix = np.asarray(data, dtype=np.float64)
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
            raise ValueError(f"data must be a GraphDataset or a square TMD matrix, got shape {matrix.shape}")
        ds, n = None, matrix.shape[0]
    if matrix is not None and matrix.shape != (n, n):
        raise ValueError(f"matrix has shape {matrix.shape}, the pool has {n} graphs")
    if plan is None:
        plan = plan_selection(n if ds is None else ds, method, k=k, fraction=fraction, engine=engine,
                              has_matrix=matrix is not None,
                              part_size=_auto(options.pop("part_size", None)),
                              max_pairs=_auto(options.pop("max_pairs", None)))
    else:
        _check_plan(plan, method, n, ds is None or matrix is not None, k=k, fraction=fraction, engine=engine,
                    options=options)
    kk = plan.k
    if kk < 1:
        raise ValueError("the pool is empty")
    lab = _labelled_mask(labelled, n)
    candidates, fixed = reuse_labelled(lab, n, kk)
    if lab.any() and not spec.reuses_labels:
        raise InputError(None, f"method {method!r} cannot keep already-labelled graphs first ({int(lab.sum())} in "
                               "the pool); use tmd, random, feature or wl, or select without a label ledger")
    if "graphs" in spec.needs and ds is None:
        raise InputError(None, f"method {method!r} needs the pool's graphs, not only a TMD matrix")
    if "smiles" in spec.needs and smiles is None:
        raise InputError(None, f"method {method!r} needs SMILES, and this dataset has none (it works on "
                               "molecule datasets ingested from SMILES or OGB)")
    if smiles is not None and ("smiles" in spec.needs or "smiles" in spec.uses):
        smiles = [str(s) for s in smiles]
        if len(smiles) != n:
            raise ValueError(f"smiles has {len(smiles)} entries, the pool has {n}")
    resolved = plan.engine
    if isinstance(ds, StoredGraphs) and not plan.scalable:
        ds = ds.load()  # only the scalable TMD engine reads a pool part by part
    opts = {**options, "map_parts": map_parts, "progress": progress, "num_threads": num_threads}
    problem = Problem(n=n, k=kk, seed=int(seed), dataset=ds, matrix=matrix, distance=distance, smiles=smiles,
                      candidates=candidates, fixed=fixed, depth=int(depth), weights=weights, engine=resolved,
                      options=opts, plan=plan)

    # refuse before allocating: the method's own memory, and the pruned search of the certificate
    need = float(spec.memory(problem)) if spec.memory is not None else 0.0
    if certify and matrix is None and ds is not None and not (method == "tmd"):
        need = max(need, float(engine_memory_bytes("scalable", ds.nodes_per_graph, kk, ds.num_features,
                                                   ds.features.shape[0], depth)))
    if need > memory_budget():
        hint = f"; {spec.max_pool_hint}" if spec.max_pool_hint else ""
        check_fits(int(need), None, f"selection method {method!r}"
                                    f"{' (' + resolved + ' engine)' if method == 'tmd' else ''} on {n} graphs "
                                    f"(estimate {format_size(int(need))}){hint}")

    t0 = time.process_time()
    picked = spec.run(problem)
    t1 = time.process_time()
    pos = np.asarray(picked.positions, dtype=np.int64)
    if pos.shape != (kk,) or np.unique(pos).size != kk or (kk and (pos.min() < 0 or pos.max() >= n)):
        raise RuntimeError(f"method {method!r} returned {pos.size} picks for a budget of {kk}")
    cert, how = picked.certificate, "none"
    if cert is not None:
        how = cert.engine
    elif certify and problem.matrix is not None:
        cert, how = certificate_from_matrix(problem.matrix, pos), "exact"
    elif certify and ds is not None:
        cert = certify_medoids(ds, pos, depth, weights, num_threads=num_threads)
        how = cert.engine
    t2 = time.process_time()
    ids = ds.graph_ids[pos] if ds is not None else pos.copy()
    return Selection(method=method, k=kk, n=n, seed=int(seed), positions=pos, ids=np.asarray(ids),
                     tau=np.asarray(picked.tau, dtype=np.float64), certificate=cert, objective=picked.objective,
                     engine=how, labelled_in_pool=int(lab.sum()), reused_labels=int(lab[pos].sum()),
                     seconds={"select": t1 - t0, "certificate": t2 - t1}, info=dict(picked.info), plan=plan)
