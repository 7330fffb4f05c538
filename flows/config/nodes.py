"""The nodes stage's typed config: :class:`NodesPaths` and :class:`NodesStageConfig` (``params.yaml``'s ``nodes:``
group with ``base.seed``, ``base.depth`` and ``base.weights``; ``tmdsub nodes``'s options)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tmdlib import InputError

from . import _paths, _pick, one_of
from .weights import checked_weights

#: How a k-BFS ball is grown (``--bfs-mode``).
BFS_MODES = ("fill", "paper")


def _method_help() -> str:
    """``--method``'s help: auto and off (:func:`tmdlib.select.nodes.node_method`), then the methods."""
    return (f"{' | '.join(node_methods())}; auto = off on a molecule pool without labels (production), else tmd.")


def node_methods() -> tuple[str, ...]:
    """What ``--method`` may be: auto, off, then the candidate-set methods (:data:`tmdlib.select.nodes.NODE_METHODS`)."""
    from tmdlib.select.nodes import NODE_AUTO, NODE_METHODS, NODE_OFF

    return (NODE_AUTO, NODE_OFF, *NODE_METHODS)


@dataclass(frozen=True)
class NodesPaths:
    """The nodes stage's files: the graph store and ``nodes.parquet``."""

    #: Each option's help (``tmdsub nodes --help`` and ``tmdsub params`` show it).
    HELP = {
        "graphs": "Graph store (default data/graphs/<DATASET>.parquet).",
        "out": "Output Parquet (default data/selection/<DATASET>/nodes.parquet).",
    }

    graphs: str
    out: str

    @classmethod
    def from_options(cls, options: dict) -> NodesPaths:
        return _paths(cls, options)


@dataclass(frozen=True)
class NodesStageConfig:
    """The nodes stage's options, checked on construction: the method, the fraction kept in (0, 1], the BFS mode,
    the weights against the depth (parsed from text)."""

    #: Each option's help (``tmdsub nodes --help`` and ``tmdsub params`` show it).
    HELP = {
        "method": _method_help(),
        "fraction": "Share of each graph's nodes kept, in (0, 1].",
        "depth": "Computation-tree depth L >= 1.",
        "weights": "pascal | a number | comma list of L-1 numbers.",
        "seed": "Seed of the random-walk candidates (base.seed).",
        "bfs_mode": "fill (top up to k in BFS order) | paper (exact k-BFS ball).",
    }

    method: str = "auto"
    fraction: float = 0.5
    depth: int = 4
    weights: Any = "pascal"
    seed: int = 0
    bfs_mode: str = "fill"

    def __post_init__(self):
        object.__setattr__(self, "weights", checked_weights(self.depth, self.weights))
        one_of("--method", self.method, node_methods())
        one_of("--bfs-mode", self.bfs_mode, BFS_MODES)
        if not 0.0 < float(self.fraction) <= 1.0:
            raise InputError(None, f"--fraction must be in (0, 1], got {self.fraction}")

    @classmethod
    def from_options(cls, options: dict) -> NodesStageConfig:
        return cls(**_pick(cls, options))

    @classmethod
    def from_params(cls, params: dict) -> NodesStageConfig:
        """The config ``params.yaml`` states: ``nodes:`` with ``base.seed`` / ``depth`` / ``weights``."""
        base = params.get("base") or {}
        return cls.from_options({**(params.get("nodes") or {}),
                                 **{k: base[k] for k in ("seed", "depth", "weights") if k in base}})
