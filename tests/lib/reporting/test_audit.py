"""Audit report: the facts and their rendering (tmdlib.reporting.audit).  The audit flow, the CLI's error path and the
page in a real headless Chromium: pipeline/test_audit_flows.py."""
from __future__ import annotations

import html
import re

import pytest
import yaml

from helpers import RAW
from tmdlib import InputError
from tmdlib.reporting import audit
from tmdlib.datasets import to_dataset  # noqa: E402

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

    from tmdlib.datasets import content_hash, graph_hashes
    from tmdlib.datasets import read_graph_parquet, read_tu, write_graph_parquet

    def content(table):
        ds = to_dataset(table)
        return content_hash(ds.graph_ids, graph_hashes(ds))

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


def test_a_production_report_names_the_trained_loss_and_says_once_what_it_cannot_measure():
    """A regression pool without labels: the bound section names the loss that was trained (Huber, from the task head;
    never the binary default), lists no n/a row for what a pool without labels cannot give, and says so once."""
    facts = {**FACTS, "mode": "production", "task": {"type": "regression"}, "task_head": {"loss": "huber"},
             "bound": {"epsilon": 56.853, "c": None, "c_epsilon": None, "certified": False},
             "test": {}, "node_bound": {},
             "pool_estimate": {"metric": "rmse", "value": 0.8, "ci_low": 0.7, "ci_high": 0.9, "confidence": 0.9,
                               "n_audit": 50, "method": "percentile bootstrap"}}
    bound = next(s for s in audit.report_sections(facts) if s["title"] == "ε and the bound")
    names = [r[0] for r in bound["rows"]]
    values = dict(bound["rows"])
    assert values["training loss"] == "huber" and "n/a" not in [audit._fmt(v) for v in values.values()]
    assert "observed gap" not in names and names.count("not measurable in production") == 1
    verdict = next(s for s in audit.report_sections(facts) if s["title"] == "Verdict")
    assert any(r[0] == "loss scale (huber loss)" for r in verdict["rows"])
    assert not any("bce" in str(r[0]) for s in audit.report_sections(facts) for r in s.get("rows") or [])
