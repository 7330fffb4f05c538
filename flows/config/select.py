"""The select stage's typed config: :class:`SelectPaths` and :class:`SelectStageConfig` (``params.yaml``'s
``select:`` group with ``base.seed``, ``base.depth``, ``base.weights`` and ``labels.audit``; ``tmdsub select``'s
options)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tmdlib import InputError

from . import _paths, _pick, one_of


#: The select stage's engines and k-medoids backends.
SELECT_ENGINES = ("exact", "scalable", "auto")
SELECT_BACKENDS = ("fasterpam", "sklearn-extra", "sklearn-extra-alternate")


def parse_max_pairs(text) -> int | str:
    """``--max-pairs``: ``auto`` or a whole number >= 0 (0: no budget)."""
    text = str(text).strip().lower()
    if text == "auto" or text.isdigit():
        return text if text == "auto" else int(text)
    raise InputError(None, f"--max-pairs must be auto, 0 (no budget) or a whole number of pairs; got {text!r}")


def parse_part_size(text) -> int | str:
    """``--part-size``: ``auto`` or a whole number >= 2."""
    text = str(text).strip().lower()
    if text == "auto":
        return text
    if text.isdigit() and int(text) >= 2:
        return int(text)
    raise InputError(None, f"--part-size must be auto or a whole number of graphs (at least 2); got {text!r}")


@dataclass(frozen=True)
class SelectPaths:
    """The select stage's files (dvc.yaml's ``select`` command names them): the graph store, ``selection.json``, the
    TMD matrix of the exact engine (None: none, the scalable engine), the label ledger (None: nothing labelled) and
    the scalable engine's cache (None: no cache)."""

    #: Each option's help (``tmdsub ... --help`` and ``tmdsub params`` show it).
    HELP = {
        "graphs": "Graph store (default data/graphs/<DATASET>.parquet).",
        "matrix": ("TMD matrix of the exact engine (default data/tmd/<DATASET>/matrix.npy when it exists; the "
                   "scalable engine never reads one)."),
        "out": "Output JSON (default data/selection/<DATASET>/selection.json).",
        "labelled": ("Label ledger (default data/labelled/<DATASET>.csv; absent = nothing labelled): graphs in it "
                     "are reused first."),
        "cache_dir": "Scalable engine: finished parts and exact pairs (a killed run resumes from them).",
    }

    graphs: str
    out: str
    matrix: str | None = None
    labelled: str | None = None
    cache_dir: str | None = None

    @classmethod
    def from_options(cls, options: dict) -> SelectPaths:
        return _paths(cls, options)


def _method_help() -> str:
    """``--method``'s help, read from the method registry (:func:`tmdlib.select.method_names`)."""
    from tmdlib.select import method_names

    return (f"auto | {' | '.join(method_names())} (molecules only: the chemists' pickers maxmin ... scaffold). auto: "
            "tmd-rounds on a pool without labels (production), the paper's tmd coreset in benchmark mode.")


def _next_help() -> str:
    """``--next``'s help, read from the table of later-round strategies
    (:data:`tmdlib.select.rounds.NEXT_STRATEGIES`)."""
    from tmdlib.select.rounds import NEXT_STRATEGIES, table_help

    return f"tmd-rounds' later rounds: auto (the measured default) | {table_help(NEXT_STRATEGIES)}."


@dataclass(frozen=True)
class SelectStageConfig:
    """The select stage's options (``params.yaml``: ``select:``, with ``base.seed``, ``base.depth``,
    ``base.weights`` and ``labels.audit``), checked and normalised on construction: ``count`` 0 is None (the
    fraction is the budget), a count makes ``fraction`` None (the count is the budget), one of them is needed;
    ``weights`` parsed (checked against ``depth``), ``target`` parsed (:func:`tmdlib.select.hits.parse_target`),
    ``part_size`` / ``max_pairs`` parsed.  ``threads`` (numba threads of the scalable parts) is no command-line
    option.  The defaults are the flow's (a direct call); ``tmdsub select`` passes its own."""

    #: Each option's help (``tmdsub ... --help`` and ``tmdsub params`` show it).
    HELP = {
        "method": _method_help(),
        "next": _next_help(),
        "seed": "Seed of the split and of the selection's random draws (base.seed).",
        "threads": "numba threads of the scalable engine's parts (no command-line option; None: the cores available).",
        "fraction": "Budget as a fraction of the training graphs (ceil).",
        "count": "Budget as a number of graphs (0 = none: --fraction); given with --fraction, the count is the budget.",
        "control": ("tmd-rounds: share of each round's new picks drawn uniformly (the Random control arm; evaluate"
                    " compares the two arms on the audit sample). 0 = none."),
        "goal": ("What later rounds are for: model (a model good on the whole pool) | maximize | minimize (a "
                 "regression label: hit hunting) | positive (a binary pool's positives). The audit sample stays "
                 "uniform."),
        "target": ("With --goal maximize | minimize on a pool with several targets: the target to optimise, or a "
                   "desirability NAME=WEIGHT,NAME=WEIGHT (score = sum of weight x the standardised prediction; a "
                   "params.yaml mapping arrives as --NAME WEIGHT pairs). none = a one-target pool."),
        "test_fraction": "Held-out share of the 80/20 split.",
        "engine": ("exact (k-medoids on the full TMD matrix) | scalable (no matrix: lower bounds + exact pairs on "
                   "demand) | auto (exact while the matrix is cheap)."),
        "depth": "TMD depth L (the certificate's and the scalable engine's).",
        "weights": "pascal | a number | comma list of L-1 numbers.",
        "restarts": "k-medoids restarts (best objective kept).",
        "backend": "fasterpam | sklearn-extra | sklearn-extra-alternate.",
        "part_size": ("Scalable engine: largest pool solved as one part; larger pools are split (one task per "
                      "part). auto: 4000, or 1000 past 100,000 training graphs (printed)."),
        "max_pairs": ("Scalable engine: budget of exact TMD evaluations for the search: auto (chosen from the "
                      "pool's graph sizes, printed), a number, or 0 for none; the certificate stays exact."),
        "trust_matrix": "Use a TMD matrix that has no meta.json beside it, unchecked (by default it is refused).",
        "audit": ("Unlabelled pools: the audit sample (the test set, never trained on): auto (5 %% of the pool, "
                  "50-200), a count, a fraction, or 0."),
    }

    method: str = "tmd"
    fraction: float | None = 0.1
    count: int | None = None
    seed: int = 0
    test_fraction: float = 0.2
    restarts: int = 5
    backend: str = "fasterpam"
    engine: str = "auto"
    depth: int = 4
    weights: Any = "pascal"
    part_size: int | str = "auto"
    max_pairs: int | str | None = "auto"
    threads: int | None = None
    trust_matrix: bool = False
    audit: Any = "auto"
    next: str = "auto"
    control: float = 0.0
    goal: str = "model"
    target: Any = None

    def __post_init__(self):
        from tmdlib.distance import parse_weights
        from tmdlib.select.hits import parse_target

        count = self.count or None  # 0: no count, the fraction is the budget
        set_ = object.__setattr__
        set_(self, "count", None if count is None else int(count))
        if count is not None:
            set_(self, "fraction", None)
        w = self.weights
        if isinstance(w, str):
            try:
                w = parse_weights(w)
            except ValueError as err:
                raise InputError(None, f"--depth/--weights: {err}") from None
        set_(self, "weights", w)
        set_(self, "target", parse_target(self.target))
        for name, parse in (("part_size", parse_part_size), ("max_pairs", parse_max_pairs)):
            if isinstance(getattr(self, name), str):  # the command line's text (a direct call may pass a number)
                set_(self, name, parse(getattr(self, name)))
        self.check()

    def check(self) -> None:
        """Every option checked before any file is read: the budget, the method, the later rounds' strategy, the
        goal, the engine and backend, the weights against the depth."""
        from tmdlib.distance import resolve_weights
        from tmdlib.select import method_names
        from tmdlib.select.hits import GOALS
        from tmdlib.select.rounds import NEXT_STRATEGIES

        if self.fraction is None and self.count is None:
            raise InputError(None, "give --fraction or --count")
        try:
            resolve_weights(int(self.depth), self.weights)
        except ValueError as err:
            raise InputError(None, f"--depth/--weights: {err}") from None
        one_of("--method", self.method, ("auto",) + tuple(method_names()))
        one_of("--next", self.next, ("auto", *NEXT_STRATEGIES))
        one_of("--goal", self.goal, GOALS)
        one_of("--engine", self.engine, SELECT_ENGINES)
        one_of("--backend", self.backend, SELECT_BACKENDS)

    @classmethod
    def from_options(cls, options: dict) -> SelectStageConfig:
        """The config of ``tmdsub select``'s options (``next_strategy`` is ``next``); the paths among them, the
        dataset and the task runner's options are the command's."""
        return cls(**_pick(cls, options))

    @classmethod
    def from_params(cls, params: dict) -> SelectStageConfig:
        """The config ``params.yaml`` states: ``select:`` with ``base.seed`` / ``depth`` / ``weights`` and
        ``labels.audit`` (as dvc.yaml's ``select`` command passes them), the command line's method default (auto)
        where the file says nothing."""
        base, labels = params.get("base") or {}, params.get("labels") or {}
        return cls.from_options({"method": "auto", **(params.get("select") or {}),
                                 **{k: base[k] for k in ("seed", "depth", "weights") if k in base},
                                 **({"audit": labels["audit"]} if "audit" in labels else {})})
