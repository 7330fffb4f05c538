"""Molecules benchmark flow (``tmdsub experiment --profile molecules``): TMD coresets against the chemists' pickers
on the 30 MoleculeACE sets (or a user's ingested regression set), a random forest and a GIN on each pick.

Wiring only: the protocol is :mod:`tmdlib.experiment.molecules`, the tasks :mod:`tasks.molecules`.  Outputs under
``--out-dir`` (default ``reports/``): ``results/molecules/<SET>.csv`` (one row per trained model; a rerun skips
finished rows), ``molecules/<SET>.md`` / ``.png`` and ``molecules/summary.md``.
"""
from __future__ import annotations

import time
from pathlib import Path

from prefect import flow

from tasks.molecules import MoleculeResults, prepare, run_molecule_cell, select_method, write_molecule_reports
from flows.config.molecules import MoleculesPaths, MoleculesStageConfig


def resolve(datasets: str | None, trials: int | None, methods: str | None, models: str | None,
            fractions: str | None, gin_datasets: int | None) -> dict:
    """The profile with command-line overrides, checked (InputError on bad input):
    :func:`tmdlib.experiment.molecules.molecules_profile`."""
    from tmdlib.experiment.molecules import molecules_profile

    return molecules_profile(datasets, trials, methods, models, fractions, gin_datasets)


@flow(name="molecules")
def molecules_flow(out_dir: str = "reports", raw_root: str = "data/raw", cache_dir: str | None = None,
                   cfg: MoleculesStageConfig | None = None) -> dict:
    """Run (or resume) the molecules benchmark, then write the reports (``cfg.report_only``: only the reports) under
    ``out_dir``; the raw sets under ``raw_root``, the matrices cached under ``cache_dir`` (None:
    ``<out_dir>/cache``).  ``cfg`` (:class:`flows.config.molecules.MoleculesStageConfig`, checked when built; None: the
    defaults) holds the options; ``cfg.threads``: numba threads of each set's TMD matrix (default: the cores this
    process may use).
    """
    from tasks.cpus import usable_cores
    from tasks.experiment import collect_cells, record_matrix_seconds

    c = cfg if cfg is not None else MoleculesStageConfig()
    paths = MoleculesPaths(out_dir, raw_root, cache_dir)
    p, threads, device, torch_threads = resolve(*c.overrides), c.threads, c.device, c.torch_threads
    cache = paths.cache
    results_dir = Path(out_dir) / "results" / "molecules"
    summary, seconds = {"profile": "molecules", "datasets": {}}, {}
    for name in [] if c.report_only else p["datasets"]:
        t0 = time.perf_counter()
        prep = prepare(name, raw_root, cache, threads or usable_cores().count)
        seconds[name] = prep["seconds"]
        for fut in [select_method.submit(name, raw_root, prep["paths"], m, p["fractions"], p["trials"])
                    for m in p["methods"]]:
            fut.result()  # every pick made once (cached), shared by the models
        store = MoleculeResults(str(results_dir), name)
        from tmdlib.experiment.molecules import models_of, plan_cells

        specs = plan_cells(p, name, store.done, models_of(p, name))
        total = sum(len(s["rows"]) for s in specs)
        print(f"{name}: pool {prep['pool']}, test {prep['test']}; {len(store.rows)} rows done, {total} models to "
              f"train in {len(specs)} cells", flush=True)
        done = collect_cells([run_molecule_cell.submit(s, raw_root, prep["paths"], device, torch_threads)
                              for s in specs], store, name, total, t0)
        summary["datasets"][name] = {"rows": len(store.rows), "trained": done,
                                     "seconds": round(time.perf_counter() - t0, 1)}
    seconds = record_matrix_seconds(str(results_dir), seconds)
    if c.report or c.report_only:
        summary["reports"] = write_molecule_reports(str(results_dir), str(Path(out_dir) / "molecules"), seconds)
    return summary
