"""Scheduled runs: a Prefect deployment that takes in new data, reruns the pipeline through DVC and records it.

One run (``tmdsub retrain`` now, or ``tmdsub schedule --cron ...`` on a schedule) holds the workspace
lock throughout and

1. appends the labels the previous run used (``data/labels/<DATASET>/labels.csv``) to the label
   ledgers (``tmdsub labels commit <DATASET>``), so this run requests only new labels.  Doing it
   before ``dvc repro`` rather than after keeps each commit consistent: the ledger is a dependency of
   select/label_requests/labels, so a ledger grown after the repro would leave ``dvc.lock`` stale;
2. moves every new batch from ``data/incoming/<DATASET>/`` (a TU folder, a SMILES ``.csv`` or a
   graph-store ``.parquet``) to ``data/append/<DATASET>/<UTC stamp>-<name>``, after checking that each
   one parses and fits the dataset (one bad batch: the run fails naming it, and nothing moves);
3. runs ``dvc repro`` (DVC reruns only the stages whose inputs changed; the TMD stage computes only
   the rows and columns of new graphs, and says how many pairs in the record's ``tmd``), then gives the
   MLflow alias ``champion`` of ``tmdsub-<DATASET>`` to the newly registered model version when its test
   metric is not worse than the current champion's (:func:`tasks.registry.promote_champions`; the record's
   ``champion`` and the version's tags say why);
4. commits ``dvc.lock``, the appended batches and the ledgers to git (``schedule.commit``);
5. pushes the artifacts to the default DVC remote (``schedule.push``; ``tmdsub remote`` sets it up);
6. records the run, finished or failed: an MLflow run in experiment ``tmdsub-schedule`` and
   ``data/runs/<stamp>.json`` (git sha before/after, batches, stages run, push, audit reports).

The DVC stages run ``tmdsub`` commands, which inherit the lock from this flow (:mod:`tasks.locking`).
"""
from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from prefect import flow

from tasks import dvcops
from tasks.locking import workspace_lock
from tasks.registry import promote_champions
from tasks.schedule import commit_labels, commit_run, intake_batches, push, record_run, repro
from tasks.tracking import git_info
from tmdlib import InputError
from tmdlib.reporting.provenance import redact_uri

INCOMING = "data/incoming"
APPEND = "data/append"
LEDGERS = "data/labelled"
RUNS = "data/runs"
EXPERIMENT = "tmdsub-schedule"
DEFAULTS = {"cron": "0 3 * * *", "commit": True, "push": True, "commit_labels": True, "lock_wait": 3600}


def schedule_settings(params_path: str | Path = "params.yaml") -> dict:
    """The ``schedule:`` group over :data:`DEFAULTS`, plus ``datasets`` and the batch read options."""
    group = {**DEFAULTS, **dvcops.read_group(params_path, "schedule")}
    for key in ("commit", "push", "commit_labels"):
        if not isinstance(group[key], bool):
            raise InputError(params_path, f"schedule.{key} must be true or false, got {group[key]!r}")
    if not isinstance(group["lock_wait"], (int, float)) or group["lock_wait"] < 0:
        raise InputError(params_path, f"schedule.lock_wait must be seconds >= 0, got {group['lock_wait']!r}")
    datasets = dvcops.read_group(params_path, "base").get("datasets")
    if not isinstance(datasets, dict) or not datasets:
        raise InputError(params_path, "base.datasets must map at least one dataset name to its raw folder")
    features = dvcops.read_group(params_path, "ingest").get("features", "onehot")
    return {**group, "datasets": sorted(datasets),
            "read_options": {"node_attributes": features == "onehot+attributes"}}


def check_cron(cron: str) -> str:
    """``cron`` if Prefect accepts it as a cron schedule, else an InputError."""
    from prefect.client.schemas.schedules import CronSchedule

    try:
        CronSchedule(cron=cron)
    except ValueError as err:
        raise InputError(None, f"--cron: not a valid cron expression {cron!r} ({err.__class__.__name__})") from None
    return cron


def _workspace(path: str | Path) -> Path:
    """``path`` as an absolute workspace (a folder with ``dvc.yaml``), else an InputError."""
    ws = Path(path).resolve()
    if not (ws / "dvc.yaml").is_file():
        raise InputError(ws, "not a tmdsub workspace (no dvc.yaml)")
    return ws


def _audit_reports(datasets: list[str]) -> list[str]:
    """The audit reports present after the run (``data/audit/<DATASET>/report.html``)."""
    return [str(p) for ds in datasets if (p := Path("data/audit") / ds / "report.html").is_file()]


def _default_remote() -> str | None:
    """``NAME URL`` of the default DVC remote (credentials redacted), None if there is none."""
    name = dvcops.run_tool(["dvc", "remote", "default"], ".").strip()
    if not name:
        return None
    return f"{name} {redact_uri(dvcops.run_tool(['dvc', 'config', f'remote.{name}.url'], '.').strip())}"


def _steps(settings: dict, stamp: str, record: dict) -> None:
    """Steps 1-5 of the run, filling ``record`` as they finish."""
    datasets = settings["datasets"]
    if settings["commit_labels"]:
        record["labels_committed"] = commit_labels(datasets)
    record["batches"] = intake_batches(INCOMING, APPEND, datasets, stamp, settings["read_options"])
    print(f"intake: {len(record['batches'])} new batch(es) -> {APPEND}")
    ran = repro()
    record["stages_ran"], record["tmd"] = ran["stages"], ran["tmd"]
    print(f"dvc repro ran {len(record['stages_ran'])} stage(s): {', '.join(record['stages_ran']) or 'none'}")
    record["champion"] = promote_champions(datasets, f"scheduled run {stamp}")
    for c in record["champion"]:
        if not c.get("decided_before"):
            print(f"{c['dataset']}: {c.get('registered_model', 'model')} v{c.get('version', '?')} "
                  f"{'is the champion' if c['promoted'] else 'not promoted'}: {c['reason']}")
    if settings["commit"]:
        message = f"tmdsub scheduled run {stamp}: {len(record['batches'])} new batch(es)"
        record["committed"] = commit_run(["dvc.lock", APPEND, LEDGERS], message)
    if settings["push"]:
        push()
        record["pushed"], record["remote"] = True, _default_remote()
        print(f"pushed to {record['remote']}")


@flow(name="scheduled-run", log_prints=True)
def scheduled_run_flow(workspace: str) -> dict:
    """Commit the last run's labels, take in new batches, ``dvc repro``, git commit, ``dvc push``, record.

    Parameters
    ----------
    workspace : str
        The repository root; the run works there (its ``params.yaml``: ``schedule:``, ``base.datasets``).

    Returns
    -------
    dict
        The run record (also in ``data/runs/<stamp>.json`` and the MLflow experiment ``tmdsub-schedule``).
    """
    from prefect.runtime import flow_run

    ws = _workspace(workspace)
    with contextlib.chdir(ws):
        settings = schedule_settings()
        with workspace_lock(ws, wait=float(settings["lock_wait"]), command="tmdsub scheduled run"):
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            record = {"stamp": stamp, "workspace": str(ws), "prefect_flow_run_id": str(flow_run.id),
                      "datasets": settings["datasets"], "commit": settings["commit"], "push": settings["push"],
                      "git_sha_before": git_info()["git_sha"], "batches": [], "stages_ran": [], "tmd": [],
                      "champion": [],
                      "committed": False, "pushed": False, "status": "FAILED"}
            try:
                _steps(settings, stamp, record)
                record["status"] = "FINISHED"
            except Exception as err:
                record["error"] = str(err) or type(err).__name__
                raise
            finally:
                record.update(git_sha_after=git_info()["git_sha"], audit_reports=_audit_reports(record["datasets"]))
                record = record_run(record, f"{RUNS}/{stamp}.json",
                                    [f"data/graphs/{ds}.parquet" for ds in record["datasets"]], EXPERIMENT)
            return record


def serve_schedule(workspace: str | Path, cron: str | None, name: str) -> None:
    """Register the deployment ``scheduled-run/<name>`` with ``cron`` and serve it (blocks; Ctrl-C stops).

    ``cron`` defaults to params.yaml's ``schedule.cron``.  The served runs work in ``workspace``.
    """
    ws = _workspace(workspace)
    cron = check_cron(cron or str(schedule_settings(ws / "params.yaml")["cron"]))
    os.chdir(ws)  # served runs start in the serving process's folder
    scheduled_run_flow.serve(name=name, cron=cron, parameters={"workspace": str(ws)},
                             description="Ingest new batches, dvc repro, commit, dvc push, record the run.")
