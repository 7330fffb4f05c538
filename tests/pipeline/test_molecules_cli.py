"""`tmdsub experiment --profile molecules` on a user's own ingested regression set (the README's "ask the question on
your own data"): picks of every method from one call each, a forest (and the GIN) on each, results resumable, the
report written; a set that is not a one-target regression is one clear error."""
from __future__ import annotations

import csv

import pytest

from helpers import RAW, run_cli

N = 60  # molecules of the toy set: 48 train (its own split column), 12 test


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A workspace with data/graphs/MINI.parquet: the first 60 molecules of MoleculeACE's CHEMBL2835_Ki as a user's
    CSV (smiles, y, split, cliff_mol), ingested with the CLI."""
    ws = tmp_path_factory.mktemp("mol")
    with open(RAW / "MoleculeACE" / "CHEMBL2835_Ki.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))[:N]
    for i, r in enumerate(rows):  # a split of our own, so the test set is not empty whatever the file's order
        r["split"] = "test" if i % 5 == 0 else "train"
    with open(ws / "mini.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["smiles", "y", "split", "cliff_mol"])
        w.writerows([r["smiles"], r["y"], r["split"], r["cliff_mol"]] for r in rows)
    (ws / "data" / "graphs").mkdir(parents=True)
    res = run_cli("ingest", "--smiles-csv", str(ws / "mini.csv"), "--name", "MINI", "--keep-column", "cliff_mol",
                  "--out", str(ws / "data" / "graphs" / "MINI.parquet"), cwd=ws)
    assert res.returncode == 0 and "task: regression" in res.stdout, res.stderr
    return ws


def _results(ws):
    with open(ws / "reports" / "results" / "molecules" / "MINI.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def test_own_regression_set_runs_resumes_and_reports(workspace):
    ws = workspace
    args = ["experiment", "--profile", "molecules", "--datasets", "MINI", "--methods", "tmd,random,maxmin,butina",
            "--models", "rf", "--fractions", "0.25,0.5", "--trials", "2", "--workers", "1"]
    res = run_cli(*args, cwd=ws)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = _results(ws)
    # rows: tmd and butina give tau (forest weighted and unweighted), random and maxmin do not -> 6 per budget, trial
    assert len(rows) == 6 * 2 * 2 and "MINI: 24 result rows (24 trained now" in res.stdout
    assert {(r["method"], r["weighted"]) for r in rows} == {("tmd", "true"), ("tmd", "false"), ("random", "false"),
                                                            ("maxmin", "false"), ("butina", "true"),
                                                            ("butina", "false")}
    assert all(r["n_train"] == "48" and r["n_test"] == "12" for r in rows)
    assert all(float(r["rmse"]) > 0 and float(r["epsilon"]) > 0 for r in rows)
    assert {r["k"] for r in rows if r["fraction"] == "0.25"} == {"12"}  # ceil(0.25 * 48): the budget is exact
    # deterministic pickers keep their molecules across trials (the model seed varies); tmd's seed changes k-medoids
    summary = (ws / "reports" / "molecules" / "summary.md").read_text()
    assert "random forest (ECFP4 counts) (1 sets, 2 trials)" in summary and "**tmd** beats Random in" in summary
    assert (ws / "reports" / "molecules" / "MINI.png").stat().st_size > 1000

    again = run_cli(*args, cwd=ws)  # finished rows are skipped
    assert again.returncode == 0 and "(0 trained now" in again.stdout, again.stdout + again.stderr
    assert len(_results(ws)) == 24

    gin = run_cli("experiment", "--profile", "molecules", "--datasets", "MINI", "--methods", "tmd,random",
                  "--models", "gin", "--fractions", "0.5", "--trials", "1", "--workers", "1", cwd=ws)
    assert gin.returncode == 0, gin.stdout + gin.stderr
    gin_rows = [r for r in _results(ws) if r["model"] == "gin"]
    # the GIN: tmd tau-weighted (the paper's) and unweighted, random -> 3 models, on the picks the forest used
    assert sorted((r["method"], r["weighted"]) for r in gin_rows) == [("random", "false"), ("tmd", "false"),
                                                                      ("tmd", "true")]
    assert all(r["epochs"] == "100" and float(r["rmse"]) > 0 for r in gin_rows)


def test_a_set_that_is_not_one_regression_target_is_one_clear_error(workspace, tmp_path):
    ws = workspace
    (tmp_path / "data" / "graphs").mkdir(parents=True)
    lines = (ws / "mini.csv").read_text().splitlines()
    (tmp_path / "bin.csv").write_text("smiles,y\n" + "".join(f"{line.split(',')[0]},{i % 2}\n"
                                                              for i, line in enumerate(lines[1:])))
    res = run_cli("ingest", "--smiles-csv", str(tmp_path / "bin.csv"), "--name", "BIN",
                  "--out", str(tmp_path / "data" / "graphs" / "BIN.parquet"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    res = run_cli("experiment", "--profile", "molecules", "--datasets", "BIN", "--models", "rf", "--trials", "1",
                  "--workers", "1", cwd=tmp_path)
    assert res.returncode == 2 and "needs one regression target" in res.stderr and "binary" in res.stderr, \
        res.stdout + res.stderr
    res = run_cli("experiment", "--profile", "molecules", "--datasets", "NOPE", "--models", "rf", cwd=ws)
    assert res.returncode == 2 and "neither a built-in set nor an ingested store" in res.stderr, res.stderr
