"""Audit report: the facts and their rendering (tmdlib.reporting.audit), the audit flow on a small real MUTAG run linked
from its MLflow train run, the CLI's error path, and the HTML page in a real headless Chromium."""
from __future__ import annotations

import hashlib
import html
import json
import os
import re
from pathlib import Path

import pytest
import yaml

from conftest import RAW, run_cli
from tmdlib import InputError
from tmdlib.reporting import audit

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
EVIL = "<script>alert('x')</script> a|b & c"


# ------------------------------------------------------------------------------------------------ pure figures
def test_labelling_cost_and_kept_dropped():
    cost = audit.labelling_cost(requested=12, pool=150, reused=3)
    assert cost == {"requested": 12, "reused": 3, "used": 15, "pool": 150, "not_needed": 135,
                    "fraction_saved": pytest.approx(1 - 12 / 150), "fraction_saved_by_coreset": pytest.approx(0.9)}
    assert audit.labelling_cost(0, 0)["fraction_saved"] is None
    assert audit.kept_dropped(15, 150) == {"kept": 15, "dropped": 135, "total": 150, "fraction_kept": 0.1}


def test_content_hash_ignores_the_parquet_encoding(tmp_path):
    import pyarrow.parquet as pq

    from tasks.tmd import graph_hashes
    from tmdlib import GraphDataset
    from tmdlib.datasets import read_graph_parquet, read_tu, write_graph_parquet

    def content(table):
        ds = GraphDataset.from_arrow(table)
        return audit.content_hash(ds.graph_ids, graph_hashes(ds))

    table = read_tu(RAW / "MUTAG", "MUTAG").slice(0, 12)
    write_graph_parquet(table, tmp_path / "a.parquet")
    pq.write_table(table, tmp_path / "b.parquet", compression="gzip", row_group_size=5)
    a, b = (read_graph_parquet(tmp_path / f"{x}.parquet") for x in "ab")
    assert (tmp_path / "a.parquet").read_bytes() != (tmp_path / "b.parquet").read_bytes()
    assert content(a) == content(b) == content(table)
    assert content(table.slice(0, 11)) != content(table) != content(table.slice(1, 12))


def test_lock_entries_of_one_dataset(tmp_path):
    from tasks.tracking import lock_entries

    lock = {"schema": "2.0", "stages": {
        "select@MUTAG": {"cmd": "x", "deps": [{"path": "data/graphs/MUTAG.parquet", "md5": "d" * 32}],
                         "outs": [{"path": "data/selection/MUTAG/selection.json", "md5": "s" * 32}]},
        "select@COX2": {"cmd": "x", "outs": [{"path": "data/selection/COX2/selection.json", "md5": "c" * 32}]}}}
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    assert lock_entries("MUTAG", tmp_path / "dvc.lock") == {
        "select@MUTAG": {"deps": {"data/graphs/MUTAG.parquet": "d" * 32},
                         "outs": {"data/selection/MUTAG/selection.json": "s" * 32}}}
    assert lock_entries("MUTAG", tmp_path / "missing.lock") == {}
    (tmp_path / "bad.lock").write_text("stages: [unclosed")
    with pytest.raises(InputError, match="bad.lock: not valid YAML"):
        lock_entries("MUTAG", tmp_path / "bad.lock")


# ------------------------------------------------------------------------------------------------ rendering
FACTS = {
    "dataset": "MUTAG", "generated_utc": "2026-01-02 03:04:05",
    "provenance": {"git_sha": "a" * 40, "git_dirty": "true", "mlflow_run_id": "r" * 32, "mlflow_experiment_id": "7",
                   "tracking_uri": "sqlite:///tmp/mlflow.db"},
    "data": {"graph_store": "data/graphs/MUTAG.parquet", "store_sha256": "5" * 64, "content_sha256": "c" * 64,
             "graphs": 188, "nodes": 3371, "matrix_sha256": "m" * 64, "depth": 4, "weights": [1 / 3, 1.0, 3.0]},
    "graphs": {**audit.kept_dropped(15, 150), "dataset": 188, "test": 38, "method": "tmd", "fraction": 0.1,
               "seed": 0},
    "nodes": audit.kept_dropped(1738, 3371), "nodes_selected": audit.kept_dropped(148, 287),
    "bound": {"epsilon": 56.853, "c": 2065.7, "c_epsilon": 117444.7, "gap_observed": 2.1825, "lemma_holds": True,
              "erm_bound": 2157798.0, "excess_loss": 1.99955, "corollary_holds": True, "certified": False},
    "test": {"metric": "accuracy", "coreset_model": 0.7631, "full_model": 0.7895},
    "node_bound": {"epsilon_mean": 356.58, "bound": 855498.4, "gap_observed": 4.6489, "lemma_holds": True},
    "labels": {**audit.labelling_cost(12, 150, 3), "source": "benchmark-standin", "benchmark_mode": True},
    "manifest": {"requested": 12, "reused": 3, "note": EVIL},
    "checks": [("label manifest names this graph store (sha256)", True, None), ("rows", False, "11 rows")],
    "params": {"select.fraction": 0.1, "base.seed": 0},
    "inputs": {"data/selection/MUTAG/selection.json": "1" * 32},
    "lock": {"select@MUTAG": {"deps": {"data/graphs/MUTAG.parquet": "2" * 32},
                              "outs": {"data/selection/MUTAG/selection.json": "3" * 32}}},
    "files": {"markdown": "data/audit/MUTAG/report.md", "html": "data/audit/MUTAG/report.html"},
}
# what an auditor must find on the page, as rendered
REQUIRED = ["MUTAG", "a" * 40, "r" * 32, "sqlite:///tmp/mlflow.db", "5" * 64, "c" * 64, "m" * 64,
            "188", "3371", "150", "135", "38", "1738", "1633", "56.85", "2066", "1.174e+05", "2.183", "2.158e+06",
            "356.6", "12", "92.0 %", "90.0 %", "benchmark-standin", "1" * 32, "2" * 32, "3" * 32, "select@MUTAG",
            "MISMATCH (11 rows)", "uncommitted changes", f"git checkout {'a' * 40}", "dvc pull",
            "dvc repro audit@MUTAG"]


def test_markdown_names_every_fact_and_escapes_tables():
    md = audit.render_markdown(FACTS, [("counts.png", "Kept | dropped", b"")])
    for fact in REQUIRED:
        assert fact in md, fact
    assert "a\\|b" in md and "| note |" in md  # a '|' in a value cannot break the table
    assert "![Kept \\| dropped](counts.png)" in md
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    assert rows and all(len(re.split(r"(?<!\\)\|", line)) == 4 for line in rows)  # two cells per row


def test_html_is_static_escaped_and_names_every_fact():
    png = audit.counts_png([("graphs", [("kept", 15), ("dropped", 135)]),
                            ("labels", [("requested", 12), ("reused", 3), ("not needed", 135)])], title="t")
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    page = audit.render_html(FACTS, [("counts.png", "Kept <and> dropped", png)])
    for fact in REQUIRED:
        assert html.escape(fact) in page, fact
    assert "<script" not in page and html.escape(EVIL) in page and "&lt;and&gt;" in page
    assert re.findall(r'<img src="([^"]{0,22})', page) == ["data:image/png;base64,"]  # embedded, no file or URL
    assert html.escape("default-src 'none'") in page and "http://" not in page and "https://" not in page


BARE_HOLDS = re.compile(r"holds\s*(?:\||:|</th>\s*<td>)\s*yes", re.I)  # "holds | yes", "holds: yes", HTML cells


def _opening(md: str) -> str:
    """The first paragraph after the title and the first heading."""
    return [block for block in md.split("\n\n")[1:] if not block.startswith("#")][0]


def test_report_opens_with_the_verdict_and_never_a_bare_holds():
    """A vacuous bound (c·ε = 1.2·10⁵ against a loss of 0.45) is called vacuous first, and "holds" comes with it."""
    facts = {**FACTS, "bound": {**FACTS["bound"], "full_model_train_loss": 0.452}}
    md = audit.render_markdown(facts)
    assert md.splitlines()[2] == "## Verdict"
    assert _opening(md).startswith("Bound vacuous: c·ε = 1.174e+05 ≥ loss scale 0.452")
    assert "| Lemma 3.2 (observed gap ≤ c·ε) | holds (vacuous: c·ε = 1.174e+05 vs loss scale 0.452) |" in md
    assert "holds (vacuous: c·mean ε_i = 8.555e+05 vs loss scale 0.452)" in md  # node bound, same scale
    assert not BARE_HOLDS.search(md) and "| yes |" not in md.split("## Labels")[0]
    page = audit.render_html(facts)
    first = re.search(r"<section><h2>([^<]*)</h2>\s*<p class=\"(\w+)\">([^<]*)</p>", page)
    assert first.groups()[:2] == ("Verdict", "warn") and first.group(3).startswith("Bound vacuous: c·ε = 1.174e+05")
    assert page.index("Verdict") < page.index("<h2>Run</h2>") and not BARE_HOLDS.search(page)

    # certified and informative: the verdict says so, in green; with a violated constraint it is no bound at all
    cert = {**facts, "bound": {**facts["bound"], "certified": True, "constraint_ok": True, "c": 0.004,
                               "c_epsilon": 0.227, "gap_observed": 0.02, "erm_bound": 0.45, "excess_loss": 0.01}}
    md = audit.render_markdown(cert)
    assert _opening(md).startswith("Bound informative: c·ε (certified c) = 0.227 < loss scale 0.452")
    assert '<p class="ok">Bound informative' in audit.render_html(cert)
    bad = {**cert, "bound": {**cert["bound"], "constraint_ok": False}}
    assert _opening(audit.render_markdown(bad)).startswith("Bound invalid: c·ε = 0.227 is no proof")
    # no ε (a baseline selection without a TMD matrix): unknown, nothing certified
    none = {**FACTS, "bound": {"c": 2065.7, "gap_observed": 2.18, "full_model_train_loss": 0.452}}
    md = audit.render_markdown(none)
    assert _opening(md).startswith("Bound unknown: no ε was recorded") and not BARE_HOLDS.search(md)


def test_sections_tolerate_missing_facts():
    """A run without MLflow logging or metrics still renders (n/a), e.g. a first manifest without `reused`."""
    md = audit.render_markdown({"dataset": "X", "provenance": {"git_sha": "b" * 40}})
    assert "not logged" in md and "n/a" in md and "dvc repro audit@X" in md and "No dvc.lock entry" in md


# ------------------------------------------------------------------------------------------------ a real run
@pytest.fixture(scope="module")
def mutag_run(tmp_path_factory):
    """Every stage output the audit reads, made by the real flows on 40 MUTAG graphs (tiny models), with the
    train run logged to a private MLflow store; yields ``(paths, env)``."""
    from flows.evaluate import evaluate_flow
    from flows.labels import label_requests_flow, labels_import_flow
    from flows.select import nodes_flow, select_flow
    from flows.tmd import tmd_matrix_flow
    from flows.train import train_flow
    from tmdlib.datasets import read_tu, write_graph_parquet

    d = tmp_path_factory.mktemp("audit-run")
    env = {"MLFLOW_TRACKING_URI": f"sqlite:///{d / 'mlflow.db'}"}
    p = {"graphs": str(d / "MUTAG.parquet"), "matrix": str(d / "matrix.npy"), "tmd_meta": str(d / "meta.json"),
         "selection": str(d / "selection.json"), "nodes": str(d / "nodes.parquet"), "labels_dir": str(d / "labels"),
         "requests": str(d / "labels/label_requests.parquet"), "manifest": str(d / "labels/manifest.json"),
         "labels_meta": str(d / "labels/labels.json"), "model": str(d / "model.pt"),
         "train_info": str(d / "train.json"), "metrics": str(d / "metrics.json"),
         "metrics_nodes": str(d / "metrics_nodes.json"), "plot": str(d / "bound_vs_gap.png"),
         "params": str(Path(__file__).resolve().parents[1] / "params.yaml"), "lock": str(d / "dvc.lock"),
         "out_dir": str(d / "audit"), "mlflow_uri": env["MLFLOW_TRACKING_URI"]}
    write_graph_parquet(read_tu(RAW / "MUTAG", "MUTAG").slice(0, 40), p["graphs"])
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        tmd_matrix_flow(p["graphs"], p["matrix"], p["tmd_meta"], str(d / "cache"))
        select_flow(p["graphs"], p["selection"], fraction=0.2, matrix=p["matrix"], restarts=1)
        nodes_flow(p["graphs"], p["nodes"], fraction=0.5)
        label_requests_flow(p["graphs"], p["selection"], p["labels_dir"])
        labels_import_flow(p["graphs"], p["requests"], "benchmark-standin", p["labels_dir"])
        train_flow(p["graphs"], p["selection"], str(d / "labels/labels.csv"), p["model"], p["train_info"],
                   epochs=2, hidden=8, experiment="tmdsub-audit-test")
        common = dict(matrix=p["matrix"], tmd_meta=p["tmd_meta"], full_epochs=1, log_mlflow=False)
        evaluate_flow(p["graphs"], p["selection"], p["model"], p["train_info"], p["metrics"], p["plot"],
                      fractions="0.5", sweep_epochs=1, **common)
        evaluate_flow(p["graphs"], p["selection"], p["model"], p["train_info"], p["metrics_nodes"],
                      str(d / "bound_vs_gap_nodes.png"), nodes=p["nodes"], **common)
        # dvc.lock as `dvc repro` leaves it while the audit stage runs: upstream entries of two datasets
        sel_md5 = hashlib.md5(Path(p["selection"]).read_bytes()).hexdigest()
        Path(p["lock"]).write_text(yaml.safe_dump({"schema": "2.0", "stages": {
            "select@MUTAG": {"cmd": "tmdsub select", "outs": [{"path": p["selection"], "md5": sel_md5}]},
            "select@COX2": {"cmd": "tmdsub select", "outs": [{"path": "cox2.json", "md5": "f" * 32}]},
            "audit@MUTAG": {"cmd": "tmdsub audit", "outs": [{"path": "old.md", "md5": "e" * 32}]}}}))
        yield p, env


def _audit_args(p: dict) -> list:
    return [p[k] for k in ("graphs", "tmd_meta", "selection", "nodes", "requests", "manifest", "labels_meta",
                           "train_info", "metrics", "metrics_nodes", "plot", "out_dir")]


@pytest.fixture(scope="module")
def audited(mutag_run):
    """The audit flow run on :func:`mutag_run`; yields ``(result, paths)``."""
    from flows.audit import audit_flow

    p, _ = mutag_run
    return audit_flow("MUTAG", *_audit_args(p), params=p["params"], lock=p["lock"]), p


def test_audit_flow_reports_the_run_and_links_it_from_mlflow(audited):
    from mlflow import MlflowClient

    res, p = audited
    out = Path(p["out_dir"])
    assert sorted(f.name for f in out.iterdir()) == ["bound_vs_gap.png", "counts.png", "report.html", "report.md"]
    assert (out / "bound_vs_gap.png").read_bytes() == Path(p["plot"]).read_bytes()
    info = json.loads(Path(p["train_info"]).read_text())
    run_id = info["mlflow"]["run_id"]  # train.json names its run (written before the run was finished)
    f = res["facts"]
    sel = json.loads(Path(p["selection"]).read_text())
    manifest = json.loads(Path(p["manifest"]).read_text())
    assert f["provenance"]["mlflow_run_id"] == run_id and len(f["provenance"]["git_sha"]) == 40
    assert f["graphs"]["kept"] == len(sel["medoids"]) and f["graphs"]["total"] == len(sel["train_ids"])
    assert f["graphs"]["dropped"] == len(sel["train_ids"]) - len(sel["medoids"])
    assert f["graphs"]["test"] == len(sel["test_ids"]) and f["data"]["graphs"] == 40
    assert f["data"]["store_sha256"] == manifest["dataset_sha256"]
    assert 0 < f["nodes"]["kept"] < f["nodes"]["total"] == f["data"]["nodes"]
    assert f["labels"]["requested"] == manifest["requested"] and f["labels"]["pool"] == len(sel["train_ids"])
    assert f["bound"]["epsilon"] == pytest.approx(sel["epsilon_mean"]) == pytest.approx(sel["epsilon"] / sel["n_train"])
    assert all(ok for _, ok, _ in f["checks"]), f["checks"]
    assert info["collapsed"] is False and min(info["alive_units"]) > 0  # train.json: the dead-network probe
    assert any(what.startswith("trained GIN is not collapsed") for what, _, _ in f["checks"])
    assert set(f["lock"]) == {"select@MUTAG"} and f["params"]["select.fraction"] is not None

    md = (out / "report.md").read_text()
    assert md.splitlines()[2] == "## Verdict" and re.match(r"Bound (informative|vacuous|invalid): c·ε", _opening(md))
    assert not BARE_HOLDS.search(md) and not BARE_HOLDS.search((out / "report.html").read_text())
    for fact in (run_id, f["provenance"]["git_sha"], f["data"]["store_sha256"], f["data"]["content_sha256"],
                 f["lock"]["select@MUTAG"]["outs"][p["selection"]], "![", "(counts.png)", "(bound_vs_gap.png)"):
        assert fact in md, fact

    client = MlflowClient(tracking_uri=p["mlflow_uri"])
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.params["train.epochs"] == "2"
    assert run.data.tags["tmdsub.audit_report"] == str(out / "report.html")
    assert "audit/report.html" in run.data.tags["mlflow.note.content"]
    logged = {a.path for a in client.list_artifacts(run_id, "audit")}
    assert logged == {f"audit/{n}" for n in ("report.md", "report.html", "counts.png", "bound_vs_gap.png")}
    assert {a.path for a in client.list_artifacts(run_id)} >= {"train.json", "audit"}


def test_bad_input_writes_no_report(mutag_run, tmp_path):
    """A corrupt input is one InputError naming the file, and nothing is written."""
    from flows.audit import audit_flow

    p, env = mutag_run
    bad = {**p, "manifest": str(tmp_path / "manifest.json"), "out_dir": str(tmp_path / "audit")}
    Path(bad["manifest"]).write_text("{not json")
    with pytest.raises(InputError, match="manifest.json: not valid JSON"):
        audit_flow("MUTAG", *_audit_args(bad), params=p["params"], lock=p["lock"])
    assert not Path(bad["out_dir"]).exists()


def test_cli_missing_input_is_one_error_line(mutag_run, tmp_path):
    p, env = mutag_run
    opts = ["--graphs", "--tmd-meta", "--selection", "--nodes", "--requests", "--manifest", "--labels-meta",
            "--train-info", "--metrics", "--metrics-nodes", "--plot", "--out-dir"]
    values = _audit_args({**p, "metrics": str(tmp_path / "missing.json"), "out_dir": str(tmp_path / "audit")})
    args = [x for pair in zip(opts, values) for x in pair]
    res = run_cli("audit", "MUTAG", *args, "--params", p["params"], "--lock", p["lock"], env=env)
    assert res.returncode == 2, res.stdout + res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {tmp_path / 'missing.json'}: not found (run the pipeline up to the stage that "
                      "writes it: dvc repro)"], res.stderr
    assert not (tmp_path / "audit").exists()


# ------------------------------------------------------------------------------------------------ real browser
@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                    reason=f"{CHROMIUM} not installed (CI installs Debian's chromium: apt-get install chromium)")
def test_report_renders_in_headless_chromium(audited):
    from playwright.sync_api import sync_playwright

    res, p = audited
    f = res["facts"]
    page_file = Path(p["out_dir"]) / "report.html"
    problems, requests = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.on("requestfailed", lambda r: problems.append(f"failed: {r.url}"))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_file.as_uri(), wait_until="load")
            text = page.inner_text("body")
            images = page.eval_on_selector_all("img", "els => els.map(i => [i.complete, i.naturalWidth, i.alt])")
        finally:
            browser.close()
    for fact in ("tmdsub audit report: MUTAG", f["provenance"]["mlflow_run_id"], f["provenance"]["git_sha"],
                 f["data"]["store_sha256"], f["data"]["content_sha256"], "Graphs kept and dropped",
                 "Nodes kept and dropped", "ε and the bound", "labelling cost saved",
                 "dvc repro audit@MUTAG", f"{f['bound']['epsilon']:.4g}", str(f["graphs"]["dropped"])):
        assert fact in text, fact
    assert len(images) == 2 and all(done and width > 0 for done, width, _ in images), images
    assert problems == [] and requests == [page_file.as_uri()], (problems, requests)
