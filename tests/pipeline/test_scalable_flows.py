"""The scalable TMD coreset through the CLI and the TMD stage: certificates, bad input, memory, resume after a kill (the
library side: lib/select/test_scalable.py, on Dask: servers/test_scalable_servers.py)."""
from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import RAW, kill_when, run_cli

import tmdlib
from tmdlib.datasets import load_builtin


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    res = run_cli("ingest", "MUTAG", "--raw-root", str(RAW), "--out", "data/graphs/MUTAG.parquet", cwd=ws)
    assert res.returncode == 0, res.stderr
    return ws


def test_cli_select_engines_write_the_certificate(tmp_path):
    ws = _ws(tmp_path)
    res = run_cli("select", "MUTAG", "--fraction", "0.1", "--engine", "scalable", cwd=ws)
    assert res.returncode == 0, res.stderr
    assert "scalable engine" in res.stdout and "exact pairs computed" in res.stdout
    from tmdlib.select.scalable import auto_pair_budget

    budget = auto_pair_budget(np.full(150, 17.93))  # MUTAG's training pool, about
    line = re.search(r"pair budget for the search, chosen from the pool: ([\d,]+) exact pairs", res.stdout)
    assert line and abs(int(line[1].replace(",", "")) - budget) < 0.1 * budget, res.stdout
    assert "part size chosen from the pool: 4,000 (150 training graphs: one part" in res.stdout, res.stdout
    sel = json.loads((ws / "data/selection/MUTAG/selection.json").read_text())
    for key in ("train_ids", "medoids", "assignment", "distance", "tau", "epsilon", "epsilon_mean",
                "pairs_computed", "engine"):
        assert key in sel, key
    assert len(sel["assignment"]) == len(sel["distance"]) == len(sel["train_ids"]) == sel["n_train"]
    assert sel["epsilon"] == pytest.approx(sum(sel["distance"]))
    assert set(sel["assignment"]) == set(sel["medoids"]) and sum(sel["tau"]) == sel["n_train"]
    # the certificate's distances are the exact TMDs of the graphs to their medoids
    ds = tmdlib.datasets.to_dataset(load_builtin("MUTAG", RAW))
    d = tmdlib.tmd_pairs(ds, sel["train_ids"], sel["assignment"])
    assert np.allclose(d, sel["distance"], rtol=1e-9)
    # auto without a matrix: the matrix is cheap here, so the exact engine runs (no tmd stage needed)
    res = run_cli("select", "MUTAG", "--fraction", "0.1", "--out", "exact.json", cwd=ws)
    assert res.returncode == 0, res.stderr
    assert "pair budget" not in res.stdout and "part size" not in res.stdout  # the exact engine has neither
    ex = json.loads((ws / "exact.json").read_text())
    assert ex["engine"] == "exact" and ex["epsilon"] <= sel["epsilon"] * (1 + 1e-12)


def test_a_coreset_smaller_than_the_parts_takes_larger_parts_and_says_so(tmp_path):
    from tmdlib.select.scalable import count_parts, fit_part_size

    ws = _ws(tmp_path)
    res = run_cli("select", "MUTAG", "--fraction", "0.02", "--engine", "scalable", "--part-size", "20", cwd=ws)
    assert res.returncode == 0, res.stderr
    fit = fit_part_size(20, 150, 3)  # 150 training graphs, k = ceil(0.02 * 150) = 3; 8 parts of at most 20
    assert fit > 20 and count_parts(150, 20) == 8
    assert (f"part size raised from 20 to {fit} graphs: k = 3 medoids and every part needs one (8 parts of at most "
            f"20 graphs, {count_parts(150, fit)} of at most {fit})") in res.stdout, res.stdout
    sel = json.loads((ws / "data/selection/MUTAG/selection.json").read_text())
    assert sel["k"] == 3 and sel["engine_info"]["part_size"] == fit
    assert sel["engine_info"]["parts"] == count_parts(150, fit) <= 3


@pytest.mark.parametrize("args, message", [
    (["--engine", "fast"], "--engine must be one of exact, scalable, auto"),
    (["--engine", "scalable", "--matrix", "m.npy"], "the scalable engine never reads a TMD matrix"),
    (["--engine", "scalable", "--max-pairs", "lots"], "--max-pairs must be auto, 0 (no budget) or a whole number"),
    (["--engine", "scalable", "--part-size", "1"], "--part-size must be auto or a whole number of graphs"),
])
def test_cli_bad_engine_input_is_one_clear_error(tmp_path, args, message):
    ws = _ws(tmp_path)
    res = run_cli("select", "MUTAG", "--fraction", "0.1", *args, cwd=ws)
    assert res.returncode == 2 and message in res.stderr
    assert res.stderr.strip().count("\n") == 0 or res.stderr.count("error:") == 1
    assert not (ws / "data/selection").exists()


def test_too_large_for_the_engine_memory_is_refused_up_front(tmp_path):
    ws = _ws(tmp_path)
    env = {"TMDSUB_MAX_MEMORY": "100000"}  # 100 kB: neither a 150 x 150 matrix nor the bounds fit
    for engine in ("exact", "scalable"):
        res = run_cli("select", "MUTAG", "--fraction", "0.1", "--engine", engine, cwd=ws, env=env)
        assert res.returncode == 2 and "memory" in res.stderr, res.stderr
    assert not (ws / "data/selection").exists()


def test_tmd_stage_skips_the_matrix_under_the_scalable_engine(tmp_path):
    ws = _ws(tmp_path)
    res = run_cli("tmd-matrix", "MUTAG", "--out-dir", "data/tmd/MUTAG", "--engine", "scalable", cwd=ws)
    assert res.returncode == 0, res.stderr
    meta = json.loads((ws / "data/tmd/MUTAG/meta.json").read_text())
    assert meta["matrix"] is False and not (ws / "data/tmd/MUTAG/matrix.npy").exists()
    # the select stage, given the (absent) matrix path as dvc.yaml gives it, runs the scalable engine
    res = run_cli("select", "MUTAG", "--fraction", "0.1", "--engine", "auto", "--matrix", "data/tmd/MUTAG/matrix.npy",
                  "--part-size", "200", cwd=ws)
    assert res.returncode == 0, res.stderr
    assert json.loads((ws / "data/selection/MUTAG/selection.json").read_text())["engine"] in ("exact", "scalable")
    # ... and so does `select.engine: scalable` (the pipeline's MOSES setting): the absent matrix is no matrix
    res = run_cli("select", "MUTAG", "--fraction", "0.1", "--engine", "scalable", "--matrix",
                  "data/tmd/MUTAG/matrix.npy", "--out", "s.json", cwd=ws)
    assert res.returncode == 0, res.stderr
    assert json.loads((ws / "s.json").read_text())["engine"] == "scalable"


@pytest.mark.parametrize("part_size, folder", [(10_000, "pairs"), (40, "parts")])
def test_killed_scalable_selection_resumes_to_the_same_result(tmp_path, part_size, folder):
    """SIGKILL mid-run (one part: exact pairs persisted; several parts: finished parts cached); the rerun
    reuses them and writes the same selection as an uninterrupted run."""
    ws = _ws(tmp_path)
    base = ["select", "MUTAG", "--fraction", "0.2", "--engine", "scalable", "--part-size", str(part_size),
            "--runner", "threads", "--workers", "1"]
    res = run_cli(*base, "--cache-dir", "clean-cache", "--out", "clean.json", cwd=ws)
    assert res.returncode == 0, res.stderr
    exe = Path(sys.executable).with_name("tmdsub")
    env = {**os.environ, "TMDSUB_PAIR_FLUSH": "50"}
    proc = subprocess.Popen([str(exe), *base, "--cache-dir", "cache", "--out", "sel.json"], cwd=ws, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    # pairs: one shard per part under pairs/; parts: one file each under parts/.  Only finished files count: a
    # file being written sits in its own ".tmp" folder until it is renamed into place (killing the run then
    # leaves nothing to resume from)
    def finished():
        root = ws / "cache" / folder
        return root.exists() and any(not p.parent.name.endswith(".tmp") for p in root.rglob("*.npz"))

    killed = kill_when(proc, finished)
    assert killed, "the run finished before anything was cached: nothing to resume"
    # Parts of a few milliseconds: the kill can land after the last part, the selection written, while the process
    # still shuts down.  Then what it left must be the complete selection (written atomically, never half), and the
    # rerun below still has to resume from the cache it left.
    if (ws / "sel.json").exists():
        left = json.loads((ws / "sel.json").read_text())
        assert left["medoids"] == json.loads((ws / "clean.json").read_text())["medoids"]
        (ws / "sel.json").unlink()
    res = run_cli(*base, "--cache-dir", "cache", "--out", "sel.json", cwd=ws)
    assert res.returncode == 0, res.stderr
    a, b = json.loads((ws / "clean.json").read_text()), json.loads((ws / "sel.json").read_text())
    for key in ("medoids", "assignment", "distance", "tau", "epsilon"):
        assert a[key] == b[key], key
    assert "earlier run" in res.stderr or "read from the cache" in res.stderr
