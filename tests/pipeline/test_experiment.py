"""`tmdsub experiment`: the quick profile end to end, resume after interruption, and the aggregation."""
from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT
from tmdlib.reporting import tables as report


def run_experiment(*args: str) -> subprocess.CompletedProcess:
    """``python -m flows.experiment ARGS`` (the same command as ``tmdsub experiment``)."""
    return subprocess.run([sys.executable, "-m", "flows.experiment", *args], cwd=ROOT, env=dict(os.environ),
                          capture_output=True, text=True, timeout=600)


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


# ----------------------------------------------------------------------------------------------
# Aggregation (pure)
# ----------------------------------------------------------------------------------------------
def test_mean_ci_student_t_by_hand():
    # x = 1, 2, 3, 4: mean 2.5, s = sqrt(5/3) = 1.290994, t_{0.975, 3} = 3.182446 -> 3.182446 * s / 2
    mean, half, n = report.mean_ci([1.0, 2.0, 3.0, 4.0])
    assert n == 4 and mean == pytest.approx(2.5)
    assert half == pytest.approx(3.182446 * 1.290994 / 2, rel=1e-5)
    # t_{0.975, 1} = 12.706205: x = 0.6, 0.8 -> s = 0.141421, half = 12.706205 * 0.141421 / sqrt(2) = 1.2706205
    assert report.mean_ci([0.6, 0.8])[1] == pytest.approx(1.2706205, rel=1e-6)
    # constant values: zero width; one value: no interval; NaN (one-class ROC-AUC) dropped
    assert report.mean_ci([0.7] * 5)[1] == pytest.approx(0.0)
    m1, h1, n1 = report.mean_ci([0.7])
    assert (m1, n1) == (0.7, 1) and math.isnan(h1)
    assert report.mean_ci([0.5, float("nan"), 0.7])[2] == 2
    assert report.mean_ci([])[2] == 0


def test_aggregate_groups_rows():
    rows = [{"method": "tmd", "fraction": 0.1, "value": v} for v in (0.5, 0.7)]
    rows += [{"method": "random", "fraction": 0.1, "value": 0.4}]
    agg = report.aggregate(rows, by=("method", "fraction"))
    assert agg[("tmd", 0.1)][0] == pytest.approx(0.6) and agg[("tmd", 0.1)][2] == 2
    assert agg[("random", 0.1)][2] == 1


def test_marks_compare_printed_values_and_share_ties():
    marks = report.column_marks({"tmd": 0.621, "random": 0.618, "wl": 0.60, "feature": 0.57})
    # 0.621 and 0.618 both print as 0.62: both best (the paper's COX2 1 % column); 0.60 is second
    assert marks == {"tmd": "best", "random": "best", "wl": "second", "feature": None}
    assert report.column_marks({"a": float("nan"), "b": 0.5}) == {"a": None, "b": "best"}


def test_wins_and_fails_counting():
    table = {"tmd": {0.01: 0.70, 0.02: 0.45, 0.03: 0.80},
             "random": {0.01: 0.70, 0.02: 0.60, 0.03: 0.49},
             "wl": {0.01: 0.40, 0.02: 0.61, 0.03: 0.30}}
    wf = report.wins_fails(table)
    assert wf == {"tmd": (2, 1), "random": (1, 1), "wl": (1, 2)}


def test_markdown_table_has_marks_counts_and_paper_row():
    cells = {"tmd": {0.01: (0.70, 0.02, 20), 0.02: (0.76, 0.03, 20)},
             "random": {0.01: (0.65, 0.05, 20), 0.02: (0.80, 0.01, 20)},
             "wl": {0.01: (0.45, 0.10, 20), 0.02: (0.70, 0.04, 20)}}
    paper = {"tmd": {0.01: (0.64, 0.07), 0.02: (0.71, 0.04)}, "random": {0.01: (0.62, 0.05), 0.02: (0.65, 0.06)}}
    md = report.markdown_table(cells, ["tmd", "random", "wl"], [0.01, 0.02], paper)
    lines = md.splitlines()
    assert lines[0].startswith("| Method | 1% | 2% | W | F | trials | paper W | paper F |")
    tmd = next(ln for ln in lines if ln.startswith("| TMD |"))
    assert "**0.70±0.02**" in tmd and "<u>0.76±0.03</u>" in tmd and "| 1 | 0 | 20 | 2 | 0 |" in tmd
    wl = next(ln for ln in lines if ln.startswith("| WL |"))
    assert "| 0 | 1 | 20 |" in wl  # no win, one fail (0.45 < 0.5)
    assert any(ln.startswith("| *TMD (paper)* | 0.64±0.07 | 0.71±0.04 |") for ln in lines)


# ----------------------------------------------------------------------------------------------
# Results store and resume planning (no training)
# ----------------------------------------------------------------------------------------------
def test_store_skips_finished_keys_and_refuses_second_writer(tmp_path):
    from tasks.experiment import ResultStore
    from tmdlib import InputError
    from tmdlib.experiment import PROFILES, plan_cells

    grid = {**PROFILES["quick"], "kinds": ["graph"], "trials": 2}
    store = ResultStore(str(tmp_path), "MUTAG")
    try:
        specs = plan_cells(grid, "MUTAG", store.done, paths={}, raw_root="data/raw")
        assert len(specs) == 2 * 4 and all(s["fractions"] == grid["graph_fractions"] for s in specs)
        assert [s["trial"] for s in specs] == [0] * 4 + [1] * 4  # trial-major
        done = {"dataset": "MUTAG", "kind": "graph", "method": "tmd", "fraction": 0.05, "trial": 0, "arch": "gin",
                "epochs": grid["graph_epochs"], "metric": "accuracy", "value": 0.7}
        store.append([done])
        with pytest.raises(InputError, match="another experiment run"):
            ResultStore(str(tmp_path), "MUTAG")
    finally:
        store.close()
    store = ResultStore(str(tmp_path), "MUTAG")  # reopened: reads the file written above
    try:
        specs = plan_cells(grid, "MUTAG", store.done, paths={}, raw_root="data/raw")
        first = next(s for s in specs if s["trial"] == 0 and s["method"] == "tmd")
        assert first["fractions"] == [0.02, 0.1] and len(specs) == 8
    finally:
        store.close()


def test_bad_input_is_one_error_line(tmp_path):
    import typer
    from typer.testing import CliRunner

    from flows.experiment import experiment_command

    app = typer.Typer(add_completion=False)
    app.command()(experiment_command)
    for args, needle in ((["--profile", "nope"], "unknown profile"), (["--datasets", "NOPE"], "--datasets"),
                         (["--kinds", "edge"], "--kinds"), (["--archs", "gcn"], "--archs"),
                         (["--trials", "0"], "--trials"), (["--workers", "0"], "--workers"),
                         (["--methods", "mirage"], "--methods")):
        res = CliRunner().invoke(app, [*args, "--out-dir", str(tmp_path)])
        assert res.exit_code == 2, res.output
        errs = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
        assert len(errs) == 1 and needle in errs[0], res.output
    assert not (tmp_path / "results").exists()


# ----------------------------------------------------------------------------------------------
# End to end: the quick profile (what CI runs), then an interrupted run resumed
# ----------------------------------------------------------------------------------------------
def test_quick_profile_end_to_end_and_resume(tmp_path):
    from tmdlib.experiment import PROFILES

    q = PROFILES["quick"]
    out = tmp_path / "reports"
    res = run_experiment("--profile", "quick", "--out-dir", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    results = out / "results" / "quick" / "MUTAG.csv"
    rows = read_rows(results)
    expected = q["trials"] * (len(q["graph_methods"]) * len(q["graph_fractions"])
                              + len(q["node_methods"]) * len(q["node_fractions"]))
    assert len(rows) == expected
    assert {r["kind"] for r in rows} == {"graph", "node"}
    assert all(0.0 <= float(r["value"]) <= 1.0 for r in rows)
    assert all(float(r["select_seconds"]) >= 0 for r in rows)  # the cost of every selection
    md = (out / "quick" / "MUTAG.md").read_text()
    assert "**" in md and "<u>" in md and "TMD (paper)" in md and "| W | F |" in md
    assert "Selection cost" in md and "computed once per dataset" in md
    assert (out / "quick" / "MUTAG.png").read_bytes()[:4] == b"\x89PNG"
    assert "Summary" in (out / "quick" / "summary.md").read_text()
    assert list((out / "cache" / "MUTAG").glob("tmd-*.npy"))

    # interruption: only the first 10 rows made it to disk; the rerun trains exactly the missing ones
    lines = results.read_text().splitlines(keepends=True)
    results.write_text("".join(lines[:11]))
    res = run_experiment("--profile", "quick", "--out-dir", str(out), "--no-report")
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"({expected - 10} trained now" in res.stdout, res.stdout
    again = read_rows(results)
    key = lambda r: (r["kind"], r["method"], r["fraction"], r["trial"], r["arch"], r["epochs"])  # noqa: E731
    assert sorted(map(key, again)) == sorted(map(key, rows))
    assert again[:10] == rows[:10]
    # one torch thread per worker: a retrained model gives the same test metric as the first run's
    first = {key(r): r["value"] for r in rows}
    assert all(first[key(r)] == r["value"] for r in again)

    # --report-only: the reports regenerate from the results files; nothing is trained or computed, even
    # for a grid the files do not cover (a 20-trial request)
    for f in (out / "quick").glob("*"):
        f.unlink()
    before = results.read_bytes()
    res = run_experiment("--profile", "quick", "--out-dir", str(out), "--report-only", "--trials", "20",
                         "--cache-dir", str(tmp_path / "no-cache"))
    assert res.returncode == 0, res.stderr[-3000:]
    assert results.read_bytes() == before and not (tmp_path / "no-cache").exists()
    assert "MUTAG: " not in res.stdout  # no dataset was run
    assert "| W | F |" in (out / "quick" / "MUTAG.md").read_text()
    assert (out / "quick" / "MUTAG.png").is_file() and (out / "quick" / "summary.md").is_file()
    # the matrix times survive an empty cache: they are kept beside the results (results/quick/matrices.json)
    times = json.loads((out / "results" / "quick" / "matrices.json").read_text())
    assert times["MUTAG"]["tmd"] > 0
    assert "computed once per dataset" in (out / "quick" / "MUTAG.md").read_text()
    summary = (out / "quick" / "summary.md").read_text()
    assert summary.count("distance matrix of all graphs") == 1  # graph section only: node runs read no matrix
    (out / "results" / "quick" / "matrices.json").write_text('{"MUTAG": {"tmd": "fast"}}')
    res = run_experiment("--profile", "quick", "--out-dir", str(out), "--report-only")
    assert res.returncode != 0 and "matrices.json" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.slow
def test_condensation_methods_from_the_cli(tmp_path):
    """``--methods`` with the condensation baselines: rows for each, no distance matrix computed."""
    out = tmp_path / "reports"
    res = run_experiment("--profile", "quick", "--out-dir", str(out), "--kinds", "graph", "--trials", "1",
                         "--epochs", "3", "--methods", "doscond,kidd-nolabel")
    assert res.returncode == 0, res.stderr[-3000:]
    rows = read_rows(out / "results" / "quick" / "MUTAG.csv")
    assert sorted({r["method"] for r in rows}) == ["doscond", "kidd-nolabel"] and len(rows) == 2 * 3
    assert all(r["epsilon"] == "nan" and float(r["select_seconds"]) > 0 for r in rows)
    assert not list((out / "cache").glob("*/tmd-*.npy"))  # condensation reads no distance matrix
    md = (out / "quick" / "MUTAG.md").read_text()
    assert "DosCond (labels)" in md and "*DosCond (labels) (paper)*" in md and "KiDD (no labels)" in md
