"""The sharded TMD stage: blocks, resume after an abrupt death, Dask and Prefect servers."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import RAW, free_port, run_cli, stop_process, wait_http

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
from flows.tmd import make_task_runner, tmd_matrix_flow
tmd_matrix_flow.with_options(task_runner=make_task_runner("threads", 1))(
    {str(store)!r}, {str(out / 'matrix.npy')!r}, {str(out / 'meta.json')!r}, {str(cache)!r}, block_size={BLOCK})
"""


def _run_script(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``code`` in its own process group; output goes to a file, since an abruptly killed
    process can leave children (Prefect's ephemeral API server) that would hold a pipe open."""
    log = tmp_path / "script.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1],
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
    from tmdlib.distance.engine import tmd

    for i, j in [(0, 1), (3, 17), (25, 39)]:
        assert mat[i, j] == pytest.approx(tmd(mutag[i], mutag[j]), rel=1e-12)


@pytest.mark.server
def test_stage_on_real_dask_cluster_and_prefect_server(small_store, tmp_path, prefect_server):
    bindir = Path(sys.executable).parent
    port = free_port()
    env = {**os.environ, "PREFECT_API_URL": prefect_server}
    procs = []
    logs = open(tmp_path / "dask.log", "w")
    try:
        procs.append(subprocess.Popen([str(bindir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                       "--no-dashboard"], env=env, stdout=logs, stderr=subprocess.STDOUT,
                                      start_new_session=True))
        address = f"tcp://127.0.0.1:{port}"
        for _ in range(2):
            procs.append(subprocess.Popen([str(bindir / "dask"), "worker", address, "--nthreads", "1",
                                           "--host", "127.0.0.1", "--no-dashboard"], env=env, stdout=logs,
                                          stderr=subprocess.STDOUT, start_new_session=True))
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
        res = run_cli("tmd-matrix", "SMALL", "--graphs", str(small_store), "--out-dir", str(tmp_path / "dask"),
                      "--cache-dir", str(tmp_path / "cache-dask"), "--block-size", str(BLOCK),
                      "--dask-address", address, env=env)
        assert res.returncode == 0, res.stderr
        res = run_cli("tmd-matrix", "SMALL", "--graphs", str(small_store), "--out-dir", str(tmp_path / "local"),
                      "--cache-dir", str(tmp_path / "cache-local"), "--block-size", str(BLOCK),
                      "--runner", "threads", "--workers", "1", env=env)
        assert res.returncode == 0, res.stderr
    finally:
        for p in reversed(procs):
            stop_process(p)
        logs.close()
    assert (tmp_path / "dask" / "matrix.npy").read_bytes() == (tmp_path / "local" / "matrix.npy").read_bytes()
    # The flow runs were recorded by the real Prefect server.
    req = urllib.request.Request(f"{prefect_server}/flow_runs/filter", data=b"{}", method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        runs = json.loads(r.read())
    completed = [r for r in runs if r["state_type"] == "COMPLETED"]
    assert len(completed) >= 2
