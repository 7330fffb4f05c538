"""Audit flow: one report per run (Markdown + static HTML with plots) that names everything needed to reproduce it.

Run as ``tmdsub audit DATASET ...`` (:func:`audit_command`; the ``audit`` stage of dvc.yaml).  Every input is
read and checked before the first file is written; the report is then linked from the MLflow train run
named in ``train.json`` (artifacts under ``audit/``, tag ``tmdsub.audit_report``).
"""
from __future__ import annotations

from pathlib import Path

import typer
from prefect import flow

from tasks.audit import gather_facts, link_report, prediction_report, read_plot, write_report
from flows.config.audit import AuditPaths, AuditStageConfig
from tmdlib.reporting.verdict import coreset_verdicts


@flow(name="audit", log_prints=True)
def audit_flow(paths: AuditPaths, cfg: AuditStageConfig | None = None) -> dict:
    """Write ``report.md``, ``report.html`` and the plots into ``paths.out_dir`` and link them from the train run.

    ``paths`` (:class:`flows.config.audit.AuditPaths`) names the upstream outputs; ``cfg``
    (:class:`flows.config.audit.AuditStageConfig`; None: the defaults) whether the report is linked from MLflow.  In
    production (a pool without labels) with ``paths.predictions`` (``predictions.parquet``, its ``.json`` beside
    it) the report also shows the audit sample's parity plot against ``paths.labels`` (default: the
    ``labels.csv`` that ``train.json`` names), the distribution of the pool's predictions and its in-domain share.

    Returns
    -------
    dict
        ``{"files": {"markdown", "html", "plots"}, "facts": ..., "mlflow_tags": ... (when linked)}``.
    """
    cfg = cfg if cfg is not None else AuditStageConfig()
    dataset = paths.dataset
    facts = gather_facts(dataset, paths.inputs, paths.lock, check_mlflow=cfg.log_mlflow)
    bound_plot = read_plot(paths.plot)
    extra = []
    if paths.predictions and facts.get("mode") == "production":
        from tasks.io import read_json

        labels = paths.labels or read_json(paths.train_info, "train info").get("labels")
        given = facts.get("params") or {}
        facts["predictions"], extra = prediction_report(paths.predictions, labels, paths.selection, facts.get("task"),
                                                        given.get("select.goal", "model"), given.get("select.target"))
    files = write_report(paths.out_dir, facts, bound_plot, extra)
    result = {"files": files, "facts": facts}
    run_id = facts["provenance"].get("mlflow_run_id")
    if cfg.log_mlflow and run_id:
        result["mlflow_tags"] = link_report(run_id, files)
    print(f"{dataset}: {coreset_verdicts(facts.get('bound'))['lemma']['sentence']}")
    print(f"{dataset}: audit report -> {files['html']} (MLflow train run {run_id or 'not logged'})")
    return result


def audit_command(
    dataset: str = typer.Argument(..., help=AuditPaths.HELP["dataset"]),
    graphs: Path = typer.Option(..., "--graphs", help=AuditPaths.HELP["graphs"]),
    tmd_meta: Path = typer.Option(..., "--tmd-meta", help=AuditPaths.HELP["tmd_meta"]),
    selection: Path = typer.Option(..., "--selection", help=AuditPaths.HELP["selection"]),
    nodes: Path = typer.Option(..., "--nodes", help=AuditPaths.HELP["nodes"]),
    requests: Path = typer.Option(..., "--requests", help=AuditPaths.HELP["requests"]),
    manifest: Path = typer.Option(..., "--manifest", help=AuditPaths.HELP["manifest"]),
    labels_meta: Path = typer.Option(..., "--labels-meta", help=AuditPaths.HELP["labels_meta"]),
    train_info: Path = typer.Option(..., "--train-info", help=AuditPaths.HELP["train_info"]),
    metrics: Path = typer.Option(..., "--metrics", help=AuditPaths.HELP["metrics"]),
    metrics_nodes: Path = typer.Option(..., "--metrics-nodes", help=AuditPaths.HELP["metrics_nodes"]),
    plot: Path = typer.Option(..., "--plot", help=AuditPaths.HELP["plot"]),
    out_dir: Path = typer.Option(..., "--out-dir", help=AuditPaths.HELP["out_dir"]),
    params: Path = typer.Option(Path("params.yaml"), "--params", help=AuditPaths.HELP["params"]),
    lock: Path = typer.Option(Path("dvc.lock"), "--lock", help=AuditPaths.HELP["lock"]),
    mlflow: bool = typer.Option(True, "--mlflow/--no-mlflow", help=AuditStageConfig.HELP["log_mlflow"]),
    predictions: Path = typer.Option(None, "--predictions", help=AuditPaths.HELP["predictions"]),
    labels: Path = typer.Option(None, "--labels", help=AuditPaths.HELP["labels"]),
) -> None:
    """Audit report of a run (Markdown + static HTML with plots), linked from its MLflow train run."""
    options = dict(locals())  # the command's options, as typer filled them
    paths = AuditPaths.from_options(options)
    paths.check()  # before Prefect starts: a missing upstream output fails in a second
    res = audit_flow(paths, AuditStageConfig.from_options(options))
    files = res["files"]
    typer.echo(f"report -> {files['markdown']}, {files['html']} (plots {', '.join(files['plots'])})")
    if "mlflow_tags" in res:
        typer.echo(f"linked from MLflow run {res['facts']['provenance']['mlflow_run_id']} "
                   f"(tag tmdsub.audit_report, artifacts audit/)")
