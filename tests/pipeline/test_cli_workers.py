"""``--workers auto``, the default of every command that fans out: printed first, a number overrides it, bad values
refused (the resolver itself: lib/tasks/test_cpus.py)."""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from helpers import RAW, run_cli
from tasks.cpus import workers_line

SMILES = ["CCO", "c1ccccc1", "CCN", "CC(=O)O", "CCCC", "c1ccncc1", "CC(C)O", "OCCO"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A small SMILES source ingested with the defaults: the first line says what auto resolved to."""
    tmp = tmp_path_factory.mktemp("workers")
    src = tmp / "tiny.csv"
    src.write_text("smiles,y\n" + "".join(f"{s},{i % 2}\n" for i, s in enumerate(SMILES)))
    out = tmp / "TINY.parquet"
    res = run_cli("ingest", "--smiles-csv", str(src), "--name", "TINY", "--out", str(out))
    assert res.returncode == 0, res.stderr
    return tmp, out, res.stdout


def test_ingest_defaults_to_auto_and_says_so_first(store):
    _, out, stdout = store
    n, line = workers_line("auto")
    assert stdout.splitlines()[0] == line and line.startswith(f"workers: {n} (auto: affinity ")
    assert pq.read_metadata(out).num_rows == len(SMILES)


def test_tmd_matrix_takes_the_string_auto_as_dvc_passes_it(store):
    tmp, out, _ = store
    res = run_cli("tmd-matrix", "TINY", "--graphs", str(out), "--out-dir", str(tmp / "tmd"),
                  "--cache-dir", str(tmp / "cache"), "--runner", "threads", "--workers", "auto")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == workers_line("auto")[1] and "8x8 TMD matrix" in lines[-1]


def test_select_a_number_overrides_auto(store):
    tmp, out, _ = store
    res = run_cli("select", "TINY", "--graphs", str(out), "--method", "random", "--count", "2", "--workers", "3",
                  "--runner", "threads", "--labelled", str(tmp / "none.csv"), "--out", str(tmp / "sel.json"))
    assert res.returncode == 0, res.stderr
    first = res.stdout.splitlines()[0]
    assert first == workers_line(3)[1] and first.startswith("workers: 3 (given; auto: ")


@pytest.mark.parametrize("command, value", [("ingest", "0"), ("tmd-matrix", "two"), ("select", "-1"),
                                            ("ingest", "1.5")])
def test_bad_workers_is_one_error_line_and_nothing_written(tmp_path, command, value):
    args = {"ingest": ["ingest", "MUTAG", "--out", str(tmp_path / "out.parquet")],
            "tmd-matrix": ["tmd-matrix", "MUTAG", "--out-dir", str(tmp_path / "out")],
            "select": ["select", "MUTAG", "--fraction", "0.1", "--out", str(tmp_path / "out")]}[command]
    res = run_cli(*args, "--workers", value)
    assert res.returncode == 2, (res.stdout, res.stderr)
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert errors == [f"error: --workers must be auto (the cores this process may use) or a whole number >= 1; "
                      f"got {value!r}"], res.stderr
    assert not list(tmp_path.iterdir())


def test_experiment_quick_profile_stays_in_process_and_says_so(tmp_path):
    """quick: one in-process worker unless asked (its models are too small for processes), with what auto would be."""
    res = run_cli("experiment", "--profile", "quick", "--report-only", "--out-dir", str(tmp_path),
                  "--raw-root", str(RAW))
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.splitlines()[0] == f"workers: 1 (quick profile: in-process; --workers auto: {workers_line()[0]})"
