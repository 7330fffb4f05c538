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
    dataset: str = typer.Argument(..., help="Dataset name (the <DATASET> of the stage outputs)."),
    graphs: Path = typer.Option(..., "--graphs", help="Graph-store Parquet (data/graphs/<DATASET>.parquet)."),
    tmd_meta: Path = typer.Option(..., "--tmd-meta", help="The TMD matrix's meta.json."),
    selection: Path = typer.Option(..., "--selection", help="selection.json."),
    nodes: Path = typer.Option(..., "--nodes", help="nodes.parquet (node subsampling)."),
    requests: Path = typer.Option(..., "--requests", help="label_requests.parquet."),
    manifest: Path = typer.Option(..., "--manifest", help="The label requests' manifest.json."),
    labels_meta: Path = typer.Option(..., "--labels-meta", help="labels.json (label source)."),
    train_info: Path = typer.Option(..., "--train-info", help="train.json (names the MLflow train run)."),
    metrics: Path = typer.Option(..., "--metrics", help="metrics.json (epsilon, the bounds, test metric)."),
    metrics_nodes: Path = typer.Option(..., "--metrics-nodes", help="metrics_nodes.json (node-subsampling bound)."),
    plot: Path = typer.Option(..., "--plot", help="bound_vs_gap.png of the evaluate stage (copied into the report)."),
    out_dir: Path = typer.Option(..., "--out-dir", help="Report folder (data/audit/<DATASET>)."),
    params: Path = typer.Option(Path("params.yaml"), "--params", help="The pipeline's params.yaml."),
    lock: Path = typer.Option(Path("dvc.lock"), "--lock", help="dvc.lock, read at run time (may not exist yet)."),
    mlflow: bool = typer.Option(True, "--mlflow/--no-mlflow", help="Link the report from the MLflow train run."),
    predictions: Path = typer.Option(None, "--predictions", help="predictions.parquet of the predict stage "
                                     "(production: the parity plot, the pool's predictions, the in-domain share)."),
    labels: Path = typer.Option(None, "--labels", help="labels.csv, the lab's audit measurements (default: the one "
                                "train.json names)."),
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
