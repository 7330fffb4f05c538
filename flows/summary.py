"""``tmdsub summary``: where the pipeline's artifacts and MLflow runs are (read-only).

The artifact list comes from DVC's own view of ``dvc.yaml`` (no paths are hard-coded here),
the runs from MLflow.  This is not a stage: it never runs or changes anything.
"""
from __future__ import annotations

import json
from pathlib import Path


def stage_outputs(root: str = ".") -> list[tuple[str, list[str]]]:
    """``[(stage, [outs...]), ...]`` in DAG order, as DVC resolves them from dvc.yaml and params.yaml."""
    from dvc.repo import Repo

    with Repo(root) as repo:
        return [(s.addressing, [o.def_path for o in s.outs]) for s in repo.index.stages]


def latest_runs(experiment: str = "tmdsub", limit: int = 6) -> list[dict]:
    """The newest MLflow runs of ``experiment`` (id, stage tag, run name ``<stage>@<DATASET>``, status), newest first."""
    from mlflow import MlflowClient

    from tasks.tracking import tracking_uri

    client = MlflowClient(tracking_uri=tracking_uri())
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"], max_results=limit)
    return [{"run_id": r.info.run_id, "stage": r.data.tags.get("tmdsub.stage", "?"), "name": r.info.run_name,
             "status": r.info.status} for r in runs]


LABELS = {"select": "coreset (selection)", "label_requests": "label requests", "labels": "labels",
          "train": "model", "evaluate": "metrics", "nodes": "node subsets", "tmd": "TMD matrix",
          "ingest": "graph store", "train_nodes": "model (node-subsampled)", "evaluate_nodes": "metrics (nodes)",
          "audit": "audit report"}


def metrics_lines(path: str, m: dict) -> tuple[list[str], list[str]]:
    """``(verdict lines, headline line)`` of one metrics file (``metrics.json`` or ``metrics_nodes.json``).

    The verdict (:func:`tmdlib.reporting.verdict.verdict_lines`) says whether each bound is informative or
    vacuous, with c·ε and the loss scale; the headline line has the test metric and the raw numbers.  A stage
    that was skipped (node subsampling off) gives its one line.
    """
    from tmdlib.datasets._task import BINARY
    from tmdlib.reporting.verdict import verdict_lines

    if m.get("skipped"):  # node subsampling off (nodes.method): one line, no numbers
        return [f"  {path}: {m.get('line') or 'skipped'}"], []
    test, bound = m.get("test") or {}, m.get("bound") or {}
    if not test and not bound:
        return [], []
    verdict = [f"  {path}:"] + [f"    {line}" for line in verdict_lines(m)]
    if not test:
        return verdict, []

    def num(v, fmt):
        return "n/a" if v is None else format(v, fmt)

    task = (m.get("task") or {}).get("type")
    if m.get("mode") == "production":  # no test set: the audit sample's estimate is the headline
        e = m.get("pool_estimate") or {}
        ci = "" if e.get("ci_low") is None else f" [{num(e['ci_low'], '.3f')}, {num(e['ci_high'], '.3f')}]"
        return verdict, [f"  {path}: {task} pool {e.get('metric')} {num(e.get('value'), '.3f')}{ci} (audit sample, "
                         f"{e.get('n_audit')} graphs); test metric, observed gap: not measurable without the pool's "
                         f"labels; c*eps {num(bound.get('c_epsilon'), '.4g')}"]
    label = f"{task} " if task and task != BINARY.type else ""  # the default type (older stores) goes unnamed
    return verdict, [f"  {path}: {label}test {test.get('metric')} {num(test.get('coreset_model'), '.3f')} "
                     f"(full-data model {num(test.get('full_model'), '.3f')}); eps {num(bound.get('epsilon'), '.4g')}, "
                     f"c*eps {num(bound.get('c_epsilon'), '.4g')}, observed gap {num(bound.get('gap_observed'), '.4g')}"]


def request_line(path: str, manifest: dict) -> str | None:
    """What a round asks the lab for: the coreset's new molecules plus the audit sample, and the total."""
    if "requested_coreset" not in manifest:
        return None
    core, audit = manifest["requested_coreset"], manifest.get("requested_audit", 0)
    return (f"  {path}: requests {core} coreset + {audit} audit = {core + audit} molecules to measure "
            f"(budget {manifest.get('k')} coreset molecules in total, {manifest.get('reused', 0)} already labelled)")


def recorded_version(root: str, outs: list[str]) -> tuple[bool, str | None]:
    """``(has a record, version)`` of a stage: the tmdsub version its JSON outputs record (a folder's ``meta.json``
    counts; :data:`tasks.io.VERSION_FIELD`).  ``(False, None)``: no JSON output present (nothing to judge);
    ``(True, None)``: written before tmdsub recorded its version."""
    from tasks.io import VERSION_FIELD

    found = False
    for o in outs:
        p = Path(root) / o
        p = p / "meta.json" if p.is_dir() else p
        if p.suffix != ".json" or not p.is_file():
            continue
        found = True
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get(VERSION_FIELD):
            return True, str(doc[VERSION_FIELD])
    return found, None


def pinned_version(root: str = ".") -> str | None:
    """``tool.version`` of ``params.yaml`` (a team's project records it; the checkout has none)."""
    import yaml

    try:
        params = yaml.safe_load((Path(root) / "params.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return None
    tool = params.get("tool") if isinstance(params, dict) else None
    return str(tool["version"]) if isinstance(tool, dict) and tool.get("version") is not None else None


def version_lines(stages: list[tuple[str, list[str]]], root: str = ".") -> list[str]:
    """Which stages an installed tmdsub of another version made, and the command that reruns them.

    In a team's project the stages depend on ``tool.version`` of ``params.yaml`` (not on the tool's source), so
    ``dvc repro`` reruns them only once it names the installed version (``tmdsub upgrade`` sets it); in the
    checkout they depend on the source files and ``dvc repro`` reruns what changed.
    """
    from tasks.io import tool_version

    installed, pinned = tool_version(), pinned_version(root)
    stale = []
    for stage, outs in stages:
        has, made = recorded_version(root, outs)
        if has and made != installed:
            stale.append(f"{stage} ({'tmdsub ' + made if made else 'no version recorded: made before tmdsub recorded it'})")
    head = f"tmdsub {installed}" + (f"; params.yaml tool.version {pinned}" if pinned else "")
    if not stale and (pinned is None or pinned == installed):
        return [f"Tool version: {head}; every stage's output was made by it"]
    lines = [f"Tool version: {head}"]
    if stale:
        lines.append(f"  stale, made by another version: {', '.join(stale)}")
    if pinned is not None and pinned != installed:
        lines.append(f"  to run the stages with tmdsub {installed}: `tmdsub upgrade` (sets tool.version: {installed} in "
                     "params.yaml), then `dvc repro`")
    elif stale:
        lines.append("  to rerun them: `dvc repro`" + (" (tool.version is the installed one: DVC reruns every stage)"
                                                         if pinned else " (`dvc repro -f STAGE` for one DVC skips)"))
    return lines


def summary_text(root: str = ".") -> str:
    """Human-readable summary: the verdict on the bounds first, then artifacts, headline metrics and MLflow runs."""
    from tasks.tracking import tracking_uri
    from tmdlib.reporting.provenance import redact_uri

    artifacts = ["Artifacts (from dvc.yaml):"]
    metrics_files, requests = [], []
    stages = stage_outputs(root)
    for stage, outs in stages:
        present = [o for o in outs if (Path(root) / o).exists()]
        name, _, dataset = stage.partition("@")
        label = f"{LABELS.get(name, name)}" + (f" [{dataset}]" if dataset else "")
        artifacts.append(f"  {label:34s} {', '.join(present) if present else '(not produced yet)'}")
        metrics_files += [o for o in present if o.endswith(".json") and "metrics" in Path(o).name]
        requests += [request_line(o, json.loads((Path(root) / o).read_text())) for o in present
                     if name == "label_requests" and Path(o).name == "manifest.json"]
    verdicts, headlines = [], []
    for mf in metrics_files:
        v, h = metrics_lines(mf, json.loads((Path(root) / mf).read_text()))
        verdicts += v
        headlines += h
    lines = ["Verdict on the loss bounds (informative: below the loss scale; vacuous: true but says nothing):"]
    lines += verdicts or ["  (no metrics yet: run the pipeline up to evaluate, dvc repro)"]
    lines += (artifacts + headlines + [line for line in requests if line] + hit_report(root)
              + version_lines(stages, root))
    runs = latest_runs()
    lines.append(f"MLflow ({redact_uri(tracking_uri())}):")
    lines += [f"  {r['run_id']}  {r['name'] or r['stage']:22s} {r['status']}" for r in runs] or ["  (no runs yet)"]
    models = registered_models()
    lines += [f"  registered model {m['name']}: latest v{m['latest']}, champion "
              f"{'v' + m['champion'] if m['champion'] else '(none yet: the scheduled retraining sets it)'}"
              for m in models]
    lines += ui_links(models)
    return "\n".join(lines)


def hit_report(root: str = ".") -> list[str]:
    """Under ``select.goal`` maximize / minimize: per dataset with predictions, the best measured so far and the
    predicted best not yet measured (:func:`tasks.audit.hit_summary`; of ``select.target`` on a multi-target pool)."""
    import yaml

    from tasks.audit import hit_summary

    params = Path(root) / "params.yaml"
    select = ((yaml.safe_load(params.read_text()) or {}).get("select") or {}) if params.is_file() else {}
    goal, hunt = select.get("goal"), select.get("target")  # hunt: a multi-target pool's target (select.target)
    if goal not in ("maximize", "minimize"):
        return []
    stages = stage_outputs(root)
    labels = {stage.partition("@")[2]: o for stage, outs in stages for o in outs
              if stage.startswith("labels@") and o.endswith("labels.csv")}
    out = []
    for stage, outs in stages:
        name, _, dataset = stage.partition("@")
        for o in outs:
            if name == "predict" and o.endswith(".parquet") and (Path(root) / o).is_file() and dataset in labels:
                out += [f"[{dataset}] " + ln if not ln.startswith("  ") else ln
                        for ln in hit_summary(str(Path(root) / o), str(Path(root) / labels[dataset]), goal,
                                              hunt=hunt)]
    return out


#: Where ``mlflow ui`` serves by default (``MLFLOW_UI_URL`` overrides; a tracking server is its own UI).
DEFAULT_UI = "http://127.0.0.1:5000"


def ui_url() -> str:
    """The MLflow UI's base URL: ``MLFLOW_UI_URL``, the tracking server when the tracking URI is one (http/https,
    credentials removed), else :data:`DEFAULT_UI` (``mlflow ui --backend-store-uri sqlite:///mlflow.db``)."""
    import os
    from urllib.parse import urlsplit, urlunsplit

    from tasks.tracking import tracking_uri

    if os.environ.get("MLFLOW_UI_URL"):
        return os.environ["MLFLOW_UI_URL"].rstrip("/")
    uri = tracking_uri()
    if uri.startswith(("http://", "https://")):
        parts = urlsplit(uri)
        host = parts.hostname or ""
        netloc = host + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    return DEFAULT_UI


def ui_links(models: list[dict], experiment: str = "tmdsub") -> list[str]:
    """Full URLs of the runs page and of each registered model: what to open in the MLflow UI.

    The runs page (``#/experiments/<id>/runs``) rather than the UI's home or the experiment's own link: MLflow 3's
    sidebar keeps a GenAI / model-training toggle in the browser's localStorage that starts on GenAI, so those open
    on the GenAI overview in a fresh browser (mlflow/mlflow#24498); the runs page always shows the runs.
    """
    from mlflow import MlflowClient

    from tasks.tracking import tracking_uri

    exp = MlflowClient(tracking_uri=tracking_uri()).get_experiment_by_name(experiment)
    if exp is None:
        return []
    base = ui_url()
    return ([f"  MLflow runs: {base}/#/experiments/{exp.experiment_id}/runs"]
            + [f"  registered model: {base}/#/models/{m['name']}" for m in models])


def registered_models(prefix: str = "tmdsub-") -> list[dict]:
    """The registered models named ``<prefix>...``: latest version and the version holding alias ``champion``."""
    from mlflow import MlflowClient

    from tasks.tracking import tracking_uri

    out = []
    for m in MlflowClient(tracking_uri=tracking_uri()).search_registered_models(f"name LIKE '{prefix}%'"):
        versions = [int(v.version) for v in m.latest_versions or []]
        out.append({"name": m.name, "latest": str(max(versions)) if versions else "-",
                    "champion": (m.aliases or {}).get("champion")})
    return sorted(out, key=lambda m: m["name"])
