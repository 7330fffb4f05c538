"""Molecules-benchmark tasks: prepare a set (pool, split, cliff flags, features, distance matrices), run cells, keep
the results file, write the reports.  The protocol is :mod:`tmdlib.experiment.molecules`; the pages
:mod:`tmdlib.reporting.molecules`.

* :func:`prepare` -- once per set: the pool's TMD, Feature and WL matrices and every molecule's ECFP4 counts, cached
  under ``<cache_dir>/molecules/<set>/`` (ignored by git) with what computing each took.
* :func:`run_molecule_cell` -- one Prefect task = one (set, method, trial) and its rows; workers load a set once.
* :class:`MoleculeResults` -- ``<results>/<set>.csv``, rewritten atomically after each cell; a rerun skips done rows.
"""
from __future__ import annotations

import functools
import json
import time
from pathlib import Path

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from tmdlib import InputError

from . import io
from .experiment import ResultStore


def load_set(name: str, raw_root: str, graphs_dir: str = "data/graphs") -> dict:
    """A molecule regression set: a built-in MoleculeACE set (``ACE-*``), or a user's store
    ``<graphs_dir>/<name>.parquet`` made from a CSV with SMILES and a regression label, read and made the benchmark's
    pool and test split (:func:`tmdlib.experiment.molecules.molecule_set`).

    Returns ``{"ds", "smiles", "y", "train", "test", "cliff"}`` (``cliff`` aligned with ``test``).
    """
    from tmdlib.datasets import DATASETS, load_builtin, read_graph_parquet
    from tmdlib.experiment.molecules import molecule_set

    if name in DATASETS:
        table, where = load_builtin(name, raw_root), f"built-in set {name}"
    else:
        path = Path(graphs_dir) / f"{name}.parquet"
        if not path.is_file():
            raise InputError(str(path), f"{name!r} is neither a built-in set nor an ingested store")
        table, where = read_graph_parquet(path), str(path)
    return molecule_set(table, where)


def _paths(cache_dir: str, name: str) -> dict:
    from tmdlib.experiment.molecules import SET_ARRAYS

    d = Path(cache_dir) / "molecules" / name
    return {m: str(d / f"{m}.npy") for m in SET_ARRAYS} | {"meta": str(d / "meta.json")}


@task(name="prepare-molecules", persist_result=False, cache_policy=NO_CACHE)
def prepare(name: str, raw_root: str, cache_dir: str, threads: int = 2) -> dict:
    """The pool's TMD / Feature / WL matrices and the ECFP4 counts of every molecule, computed once and cached.

    Returns ``{"paths", "pool", "test", "seconds"}`` (``seconds``: what computing each took when it was computed).
    """
    from tmdlib.experiment.molecules import set_arrays, set_key

    s = load_set(name, raw_root)
    paths = _paths(cache_dir, name)
    meta = io.cached_json(paths["meta"])
    key = set_key(s)
    seconds = dict(meta.get("seconds") or {}) if meta.get("key") == key else {}
    for m, fn in set_arrays(s, threads).items():
        if m in seconds and Path(paths[m]).is_file():
            continue
        t0 = time.perf_counter()
        io.write_npy(paths[m], np.asarray(fn()))
        seconds[m] = round(time.perf_counter() - t0, 2)
    io.write_json(paths["meta"], {"set": name, "key": key, "seconds": seconds, "pool": int(len(s["train"])),
                                  "test": int(len(s["test"]))})
    return {"paths": paths, "pool": int(len(s["train"])), "test": int(len(s["test"])), "seconds": seconds}


@functools.lru_cache(maxsize=2)
def _loaded(name: str, raw_root: str, paths_json: str) -> tuple:
    """(set, matrices, counts) -- once per worker process."""
    paths = json.loads(paths_json)
    s = load_set(name, raw_root)
    mats = {m: np.load(paths[m], allow_pickle=False) for m in ("tmd", "feature", "wl")}
    return s, mats, np.load(paths["counts"], allow_pickle=False)


def picks_path(paths: dict, method: str) -> Path:
    return Path(paths["meta"]).with_name(f"picks-{method}.json")


@task(name="molecule-picks", persist_result=False, cache_policy=NO_CACHE)
def select_method(name: str, raw_root: str, paths: dict, method: str, fractions: list, trials: int) -> int:
    """Every pick of one (set, method) (:func:`tmdlib.experiment.molecules.select_all`), cached in
    ``picks-<method>.json`` beside the matrices; picks already there for the same budgets and at least as many trials
    are kept.  Returns how many selections were made now."""
    from tmdlib.experiment.molecules import picks_cover, select_all

    path = picks_path(paths, method)
    grid = {"fractions": [float(f) for f in fractions], "trials": int(trials)}
    if picks_cover(io.cached_json(path), fractions, trials):
        return 0  # the cached picks include this grid's
    s, mats, _ = _loaded(name, raw_root, json.dumps(paths, sort_keys=True))
    pool = s["ds"].take(s["train"])
    picks = select_all(pool, [s["smiles"][int(p)] for p in s["train"]], mats, [method], fractions, trials)
    io.write_json(path, {**grid, "method": method, "picks": picks})
    return len(picks)


def load_picks(paths: dict, methods) -> dict:
    """``{(method, fraction, trial): pick}`` of the cached picks."""
    from tmdlib.experiment.molecules import picks_index

    return picks_index(json.loads(picks_path(paths, method).read_text()) for method in methods)


@task(name="molecule-cell", persist_result=False, cache_policy=NO_CACHE)
def run_molecule_cell(spec: dict, raw_root: str, paths: dict, device: str = "cpu", torch_threads: int = 1) -> list:
    """One (set, method, trial): :func:`tmdlib.experiment.molecules.run_cell` on the cached picks."""
    import torch

    from tmdlib.experiment.molecules import run_cell

    torch.set_num_threads(int(torch_threads))
    s, _, counts = _loaded(spec["dataset"], raw_root, json.dumps(paths, sort_keys=True))
    return run_cell(spec, s["ds"], s["y"], s["train"], s["test"], s["cliff"], counts,
                    load_picks(paths, [spec["method"]]), device, smiles=s["smiles"])


class MoleculeResults(ResultStore):
    """``<directory>/<set>.csv`` (columns :data:`tmdlib.experiment.molecules.COLUMNS`), a :class:`ResultStore`
    without a lock file: each :meth:`append` rewrites it atomically, a rerun skips the finished rows."""

    def __init__(self, directory: str, name: str):
        from tmdlib.experiment.molecules import read_rows, row_key, rows_csv

        super().__init__(directory, name, (read_rows, row_key, rows_csv), lock=False)


@task(name="write-molecule-reports", persist_result=False)
def write_molecule_reports(results_dir: str, report_dir: str, seconds: dict) -> dict:
    """Per-set tables and plots and the summary (:mod:`tmdlib.reporting.molecules`) from the results CSVs."""
    from tmdlib.experiment.molecules import is_results_header, read_rows
    from tmdlib.reporting.molecules import molecule_pages

    per_set = {}
    for csv_path in sorted(Path(results_dir).glob("*.csv")):
        with open(csv_path, encoding="utf-8") as fh:
            header = fh.readline().strip().split(",")
        rows = read_rows(str(csv_path)) if is_results_header(header) else []  # else: another table kept beside
        if rows:
            per_set[csv_path.stem] = rows
    return {"files": io.write_pages(report_dir, molecule_pages(per_set, seconds)), "sets": len(per_set)}
