"""Experiment flow: regenerate the paper's result tables (``tmdsub experiment --profile quick|full``).

Datasets x methods x fractions x trials x architectures (Jain et al., Section 5 and the appendix on the
alternative architecture).  Wiring only: the work is in :mod:`tasks.experiment` (cells, results store) and
:mod:`tmdlib.experiment` / :mod:`tmdlib.reporting` (the protocol, aggregation, tables, plots).

Outputs under ``--out-dir`` (default ``reports/``):

* ``results/<profile>/<DATASET>.csv`` -- one row per trained model (raw results; a rerun skips finished rows);
* ``<profile>/<DATASET>.md`` and ``<profile>/<DATASET>.png`` -- tables in the paper's form and plots;
* ``<profile>/summary.md`` -- wins / fails per method and against the paper's numbers (``<out-dir>/paper_results.csv``,
  else the repository's ``reports/paper_results.csv``).

The distance matrices are cached in ``--cache-dir`` (default ``reports/cache/``, ignored by git).
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import typer
from prefect import flow

from tasks.cpus import usable_cores, workers_line
from tasks.experiment import ResultStore, collect_cells, prepare_dataset, run_cell
from flows.config.experiment import ExperimentPaths, ExperimentStageConfig
from tmdlib import InputError
from tmdlib.experiment import needed_matrices, plan_cells

#: The paper's transcribed numbers (``reports/paper_tables.py``), used when ``--out-dir`` has no copy.
PAPER_CSV = Path(__file__).resolve().parents[1] / "reports" / "paper_results.csv"


@flow(name="experiment")
def experiment_flow(out_dir: str = "reports", raw_root: str = "data/raw", cache_dir: str | None = None,
                    cfg: ExperimentStageConfig | None = None) -> dict:
    """Run (or resume) the grid of ``cfg.profile`` (:class:`flows.config.experiment.ExperimentStageConfig`, checked
    when built; None: the defaults); append rows as cells finish; then write the reports.

    ``cfg.report_only``: train and compute nothing; write the reports from the results files as they are
    (matrix times from ``results/<profile>/matrices.json``, updated from the cache's meta files where the
    cache has them).
    """
    from tasks.experiment import record_matrix_seconds, write_reports

    cfg = cfg if cfg is not None else ExperimentStageConfig()
    paths = ExperimentPaths(out_dir, raw_root, cache_dir)
    grid, profile, cache = cfg.grid, cfg.profile, paths.cache
    results_dir = paths.results(profile)
    summary = {"profile": profile, "datasets": {}}
    matrix_seconds = {}
    if cfg.report_only:
        matrix_seconds = cached_matrix_seconds(cache)
    for name in [] if cfg.report_only else grid["datasets"]:
        t0 = time.perf_counter()
        prep = prepare_dataset(name, raw_root, cache, cfg.prepare_threads or usable_cores().count,
                               needed_matrices(grid))
        matrix_seconds[name] = {m: s for m, s in prep["compute_seconds"].items() if s is not None}
        store = ResultStore(str(results_dir), name)
        try:
            specs = plan_cells(grid, name, store.done, raw_root=raw_root, paths=prep["paths"],
                               torch_threads=cfg.torch_threads, device=cfg.device)
            total = sum(len(s["fractions"]) for s in specs)
            print(f"{name}: {prep['graphs']} graphs, matrices {prep['seconds']} s; {len(store.rows)} rows done, "
                  f"{total} models to train in {len(specs)} cells")
            done = collect_cells([run_cell.submit(s) for s in specs], store, name, total, t0)
        finally:
            store.close()
        summary["datasets"][name] = {"rows": len(store.rows), "trained": done,
                                     "seconds": round(time.perf_counter() - t0, 1)}
    # what each matrix took is a result too: kept beside the CSVs (the cache is not versioned)
    matrix_seconds = record_matrix_seconds(str(results_dir), matrix_seconds)
    if cfg.report or cfg.report_only:
        paper_csv = Path(out_dir) / "paper_results.csv"
        summary["reports"] = write_reports(str(results_dir), str(Path(out_dir) / profile), profile,
                                           str(paper_csv if paper_csv.is_file() else PAPER_CSV), matrix_seconds)
    return summary


def cached_matrix_seconds(cache_dir: str) -> dict:
    """``{dataset: {matrix: seconds}}`` from the newest meta file per dataset of a matrix cache (may be empty)."""
    out = {}
    for folder in sorted(p for p in Path(cache_dir).glob("*") if p.is_dir()):
        metas = sorted(folder.glob("meta-*.json"), key=lambda p: p.stat().st_mtime)
        known = {}
        if metas:
            try:
                known = json.loads(metas[-1].read_text()).get("compute_seconds") or {}
            except (OSError, ValueError):
                pass
        if known:
            out[folder.name] = {m: v for m, v in known.items() if v is not None}
    return out


def experiment_command(
    profile: str = typer.Option("quick", "--profile", help=ExperimentStageConfig.HELP["profile"]),
    datasets: Optional[str] = typer.Option(None, "--datasets", help=ExperimentStageConfig.HELP["datasets"]),
    trials: Optional[int] = typer.Option(None, "--trials", help=ExperimentStageConfig.HELP["trials"]),
    epochs: Optional[int] = typer.Option(None, "--epochs", help=ExperimentStageConfig.HELP["epochs"]),
    kinds: Optional[str] = typer.Option(None, "--kinds", help=ExperimentStageConfig.HELP["kinds"]),
    archs: Optional[str] = typer.Option(None, "--archs", help=ExperimentStageConfig.HELP["archs"]),
    methods: Optional[str] = typer.Option(None, "--methods", help=ExperimentStageConfig.HELP["methods"]),
    workers: Optional[str] = typer.Option(None, "--workers", help=ExperimentStageConfig.HELP["workers"]),
    out_dir: Path = typer.Option(Path("reports"), "--out-dir", help=ExperimentPaths.HELP["out_dir"]),
    raw_root: Path = typer.Option(Path("data/raw"), "--raw-root", help=ExperimentPaths.HELP["raw_root"]),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help=ExperimentPaths.HELP["cache_dir"]),
    torch_threads: int = typer.Option(1, "--torch-threads", help=ExperimentStageConfig.HELP["torch_threads"]),
    device: str = typer.Option("cpu", "--device", help=ExperimentStageConfig.HELP["device"]),
    report: bool = typer.Option(True, "--report/--no-report", help=ExperimentStageConfig.HELP["report"]),
    report_only: bool = typer.Option(False, "--report-only", help=ExperimentStageConfig.HELP["report_only"]),
    models: Optional[str] = typer.Option(None, "--models", help=ExperimentStageConfig.HELP["models"]),
    gin_datasets: Optional[int] = typer.Option(None, "--gin-datasets", help=ExperimentStageConfig.HELP["gin_datasets"]),
    fractions: Optional[str] = typer.Option(None, "--fractions", help=ExperimentStageConfig.HELP["fractions"]),
) -> None:
    """Re-measure the paper's tables (quick / full), or run the molecules benchmark against the chemists' pickers."""
    from prefect.task_runners import ProcessPoolTaskRunner, ThreadPoolTaskRunner

    from flows._env import exit_with_parent

    options = dict(locals())  # the command's options, as typer filled them

    if profile == "molecules":
        from flows.molecules import molecules_flow, resolve

        try:
            resolve(datasets, trials, methods, models, fractions, gin_datasets)
            if torch_threads < 1:
                raise InputError(None, f"--torch-threads must be >= 1, got {torch_threads}")
            n, line = workers_line(workers, per_worker=torch_threads)
            typer.echo(line)
            runner = ProcessPoolTaskRunner(max_workers=n, initializer=exit_with_parent) if n > 1 else ThreadPoolTaskRunner(max_workers=1)
            from flows.config.molecules import MoleculesPaths, MoleculesStageConfig

            options = {"datasets": datasets, "trials": trials, "methods": methods, "models": models,
                       "fractions": fractions, "gin_datasets": gin_datasets, "device": device,
                       "torch_threads": torch_threads, "report": report, "report_only": report_only}
            summary = molecules_flow.with_options(task_runner=runner)(
                **vars(MoleculesPaths.from_options({"out_dir": out_dir, "raw_root": raw_root, "cache_dir": cache_dir})),
                cfg=MoleculesStageConfig.from_options(options))
        except InputError as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(2)
        for name, d in summary["datasets"].items():
            typer.echo(f"{name}: {d['rows']} result rows ({d['trained']} trained now, {d['seconds']} s)")
        for path in summary.get("reports", {}).get("files", []):
            typer.echo(f"report -> {path}")
        return
    try:
        cfg = ExperimentStageConfig.from_options(options)
        n, line = workers_line(workers, per_worker=torch_threads)
        if workers is None and profile == "quick":
            # quick: one in-process worker (starting worker processes costs more than its few small models)
            n, line = 1, f"workers: 1 (quick profile: in-process; --workers auto: {n})"
        paths = ExperimentPaths.from_options(options)
        paths.check()
        typer.echo(line)
        runner = ProcessPoolTaskRunner(max_workers=n, initializer=exit_with_parent) if n > 1 else ThreadPoolTaskRunner(max_workers=1)
        summary = experiment_flow.with_options(task_runner=runner)(**asdict(paths), cfg=cfg)
    except InputError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2)
    for name, d in summary["datasets"].items():
        typer.echo(f"{name}: {d['rows']} result rows ({d['trained']} trained now, {d['seconds']} s)")
    for path in summary.get("reports", {}).get("files", []):
        typer.echo(f"report -> {path}")


if __name__ == "__main__":  # ``python -m flows.experiment --profile quick`` (same as ``tmdsub experiment``)
    _app = typer.Typer(add_completion=False)
    _app.command()(experiment_command)
    _app()
