"""The sharded TMD stage: blocks, resume after an abrupt death.  On real Dask and Prefect servers:
servers/test_tmd_stage_servers.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from helpers import RAW, ROOT

N_GRAPHS = 40
BLOCK = 8  # 5 row blocks -> 15 upper-triangular blocks


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> Path:
    """The first 40 MUTAG graphs as a graph store."""
    from tmdlib.datasets import read_tu

    path = tmp_path_factory.mktemp("store") / "MUTAG40.parquet"
    pq.write_table(read_tu(RAW / "MUTAG", "MUTAG").slice(0, N_GRAPHS), path)
    return path


def _flow_script(store: Path, out: Path, cache: Path, die_after: int | None) -> str:
    """A process that runs the stage's flow, optionally dying abruptly (os._exit) once ``die_after``
    blocks are stored: the client process writes each block file as its task returns."""
    return f"""
import os, threading
import tasks.io as IO
calls = {{"n": 0}}
lock = threading.Lock()
def wrap(fn):
    def inner(*a, **k):
        with lock:
            calls["n"] += 1
            if {die_after!r} is not None and calls["n"] > {die_after!r}:
                os._exit(137)
        return fn(*a, **k)
    return inner
IO.write_npy = wrap(IO.write_npy)
import flows
from flows.config.tmd import TmdStageConfig
from flows.tmd import make_task_runner, tmd_matrix_flow
tmd_matrix_flow.with_options(task_runner=make_task_runner("threads", 1))(
    {str(store)!r}, {str(out / 'matrix.npy')!r}, {str(out / 'meta.json')!r}, {str(cache)!r}, cfg=TmdStageConfig(block_size={BLOCK}))
"""


def _run_script(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``code`` in its own process group; output goes to a file, since an abruptly killed
    process can leave children (Prefect's ephemeral API server) that would hold a pipe open."""
    log = tmp_path / "script.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT,
                                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=600)
        finally:
            try:  # reap anything the process left behind in its group
                os.killpg(proc.pid, 9)
            except ProcessLookupError:
                pass
    return subprocess.CompletedProcess(proc.args, rc, log.read_text(), log.read_text())


def test_killed_run_resumes_without_recomputing_and_matches(small_store, tmp_path, mutag):
    ref_out, cache_ref = tmp_path / "ref", tmp_path / "cache-ref"
    res = _run_script(_flow_script(small_store, ref_out, cache_ref, None), tmp_path)
    assert res.returncode == 0, res.stderr
    ref_meta = json.loads((ref_out / "meta.json").read_text())
    assert ref_meta["blocks"] == 15 and len(list(cache_ref.glob("*.npy"))) == 15

    out, cache = tmp_path / "run", tmp_path / "cache"
    res = _run_script(_flow_script(small_store, out, cache, die_after=6), tmp_path)
    assert res.returncode == 137
    assert not (out / "matrix.npy").exists()
    finished = sorted(p.name for p in cache.glob("*.npy"))
    assert len(finished) == 6
    # no torn temporary files left behind (chunks/ is the index of chunks the plan used, all .json)
    assert not [p for p in cache.iterdir() if p.suffix != ".npy" and p.name != "chunks"]
    assert all(p.suffix == ".json" for p in (cache / "chunks").iterdir())
    stamps = {p.name: p.stat().st_mtime_ns for p in cache.glob("*.npy")}

    res = _run_script(_flow_script(small_store, out, cache, None), tmp_path)
    assert res.returncode == 0, res.stderr
    assert all((cache / n).stat().st_mtime_ns == t for n, t in stamps.items())  # the 6 blocks were not recomputed
    assert len(list(cache.glob("*.npy"))) == 15
    assert (out / "meta.json").read_bytes() == (ref_out / "meta.json").read_bytes()
    assert (out / "matrix.npy").read_bytes() == (ref_out / "matrix.npy").read_bytes()

    mat = np.load(out / "matrix.npy")
    assert np.array_equal(mat, mat.T) and not mat.diagonal().any()
    from tmdlib.distance import tmd

    for i, j in [(0, 1), (3, 17), (25, 39)]:
        assert mat[i, j] == pytest.approx(tmd(mutag[i], mutag[j]), rel=1e-12)
