"""The tmd stage's typed config: :class:`TmdPaths` and :class:`TmdStageConfig` (``params.yaml``'s ``tmd:`` group
with ``base.depth`` and ``base.weights``; ``tmdsub tmd-matrix``'s options)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tmdlib import InputError

from . import _paths, _pick, one_of
from .weights import checked_weights

#: The selection's engines, as the tmd stage reads them (the matrix is computed for ``exact`` only).
ENGINES = ("exact", "scalable", "auto")
#: How the blocks fan out (``--runner``; ``--dask-address`` implies dask).
RUNNERS = ("local", "threads", "dask")


@dataclass(frozen=True)
class TmdPaths:
    """The tmd stage's files: the graph store, the matrix and its ``meta.json`` (both in the command's
    ``--out-dir``), and the folder of finished blocks."""

    #: Each option's help (``tmdsub tmd-matrix --help`` and ``tmdsub params`` show it).
    HELP = {
        "graphs": "Graph-store Parquet (default data/graphs/<DATASET>.parquet).",
        "matrix_out": "matrix.npy (symmetric, zero diagonal), in --out-dir.",
        "meta_out": "meta.json (the store, depth, weights and engine the matrix is for), in --out-dir.",
        "cache_dir": "Finished blocks, named by content hash (reused across runs).",
    }

    graphs: str
    matrix_out: str
    meta_out: str
    cache_dir: str

    @classmethod
    def from_options(cls, options: dict) -> TmdPaths:
        """The paths of ``tmdsub tmd-matrix``'s options: ``out_dir`` names the matrix and its meta."""
        from pathlib import Path

        out = {**options}
        if out.get("out_dir") is not None:
            out.update(matrix_out=Path(out["out_dir"]) / "matrix.npy", meta_out=Path(out["out_dir"]) / "meta.json")
        return _paths(cls, out)


@dataclass(frozen=True)
class TmdStageConfig:
    """The tmd stage's options, checked on construction: the weights against the depth (parsed from text), the block
    size, the engine, the runner.  ``runner`` and ``workers`` are how the command fans the blocks out (the flow runs
    on the task runner it is given)."""

    #: Each option's help (``tmdsub tmd-matrix --help`` and ``tmdsub params`` show it).
    HELP = {
        "depth": "Computation-tree depth L >= 1.",
        "weights": "pascal | a number | comma list of L-1 numbers.",
        "block_size": "Graphs per block side.",
        "threads_per_block": ("numba threads inside one block (default: 1 with several workers; with one, the cores "
                              "this process may use)."),
        "runner": "local (processes) | threads | dask.",
        "workers": ("Parallel blocks (local/threads/dask local cluster): auto (the cores this process may use; "
                    "printed) or a number."),
        "engine": ("The selection's engine: exact (compute the matrix) | scalable (no matrix: only meta.json) | auto "
                   "(the matrix only while it is cheap)."),
    }

    depth: int = 4
    weights: Any = "pascal"
    block_size: int = 256
    threads_per_block: int | None = None
    engine: str = "exact"
    runner: str = "local"
    workers: int | str = "auto"

    def __post_init__(self):
        object.__setattr__(self, "weights", checked_weights(self.depth, self.weights))
        one_of("--engine", self.engine, ENGINES)
        one_of("--runner", self.runner, RUNNERS)
        if int(self.block_size) < 1:
            raise InputError(None, f"--block-size must be at least 1, got {self.block_size}")

    @classmethod
    def from_options(cls, options: dict) -> TmdStageConfig:
        return cls(**_pick(cls, options))

    @classmethod
    def from_params(cls, params: dict) -> TmdStageConfig:
        """The config ``params.yaml`` states: ``tmd:`` with ``base.depth`` / ``weights`` and the engine of
        ``select.engine`` (as dvc.yaml's ``tmd`` command passes them)."""
        base, select = params.get("base") or {}, params.get("select") or {}
        return cls.from_options({**(params.get("tmd") or {}), **{k: base[k] for k in ("depth", "weights") if k in base},
                                 **({"engine": select["engine"]} if "engine" in select else {})})
