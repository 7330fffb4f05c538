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

from tasks.molecules import (MoleculeResults, prepare, record_seconds, run_molecule_cell, select_method,
                             write_molecule_reports)
from tmdlib import InputError


def resolve(datasets: str | None, trials: int | None, methods: str | None, models: str | None,
            fractions: str | None, gin_datasets: int | None) -> dict:
    """The profile with command-line overrides, checked (InputError on bad input)."""
    from tmdlib.experiment.molecules import PROFILE, dataset_sizes
    from tmdlib.models import model_names
    from tmdlib.select import method_names

    def _list(text, allowed, what):
        items = [s.strip() for s in text.split(",") if s.strip()]
        bad = [s for s in items if allowed is not None and s not in allowed]
        if not items or bad:
            raise InputError(None, f"--{what}: unknown {bad or text!r}; choose from {', '.join(allowed)}")
        return list(dict.fromkeys(items))

    p = {k: (list(v) if isinstance(v, list) else v) for k, v in PROFILE.items()}
    sizes = dataset_sizes()
    p["datasets"] = _list(datasets, None, "datasets") if datasets else list(sizes)
    p["gin_sets"] = p["datasets"][:int(p["gin_datasets"] if gin_datasets is None else gin_datasets)]
    if methods:
        p["methods"] = _list(methods, method_names(), "methods")
    if models:
        p["models"] = _list(models, model_names(), "models")
    if fractions:
        try:
            p["fractions"] = sorted({float(f) for f in fractions.split(",") if f.strip()})
        except ValueError:
            raise InputError(None, f"--fractions: {fractions!r} is not a comma list of numbers") from None
        if not p["fractions"] or not all(0 < f <= 1 for f in p["fractions"]):
            raise InputError(None, f"--fractions must lie in (0, 1], got {fractions!r}")
    if trials is not None:
        if trials < 1:
            raise InputError(None, f"--trials must be >= 1, got {trials}")
        p["trials"] = int(trials)
    return p


@flow(name="molecules")
def molecules_flow(datasets: str | None = None, out_dir: str = "reports", raw_root: str = "data/raw",
                   cache_dir: str | None = None, trials: int | None = None, methods: str | None = None,
                   models: str | None = None, fractions: str | None = None, gin_datasets: int | None = None,
                   device: str = "cpu", torch_threads: int = 1, threads: int | None = None, report: bool = True,
                   report_only: bool = False) -> dict:
    """Run (or resume) the molecules benchmark, then write the reports (``report_only``: only the reports).

    ``threads``: numba threads of each set's TMD matrix (default: the cores this process may use).
    """
    from tasks.cpus import usable_cores
    from tasks.experiment import collect_cells

    p = resolve(datasets, trials, methods, models, fractions, gin_datasets)
    cache = cache_dir or str(Path(out_dir) / "cache")
    results_dir = Path(out_dir) / "results" / "molecules"
    summary, seconds = {"profile": "molecules", "datasets": {}}, {}
    for name in [] if report_only else p["datasets"]:
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
    seconds = record_seconds(str(results_dir), seconds)
    if report or report_only:
        summary["reports"] = write_molecule_reports(str(results_dir), str(Path(out_dir) / "molecules"), seconds)
    return summary
