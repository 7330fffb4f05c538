"""The sharded TMD stage on a real Dask cluster with a real Prefect server (blocks and resume: pipeline/test_tmd_stage.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from helpers import RAW, free_port, run_cli, stop_process


N_GRAPHS = 40


BLOCK = 8  # 5 row blocks -> 15 upper-triangular blocks


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> Path:
    """The first 40 MUTAG graphs as a graph store."""
    from tmdlib.datasets import read_tu

    path = tmp_path_factory.mktemp("store") / "MUTAG40.parquet"
    pq.write_table(read_tu(RAW / "MUTAG", "MUTAG").slice(0, N_GRAPHS), path)
    return path


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
