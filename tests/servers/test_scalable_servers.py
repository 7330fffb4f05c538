"""The scalable TMD coreset on a real Dask scheduler and workers (the library side: lib/select/test_scalable.py, the CLI:
pipeline/test_scalable_flows.py)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from helpers import RAW, free_port, run_cli, stop_process

import tmdlib
from tmdlib.datasets import load_builtin


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    res = run_cli("ingest", "MUTAG", "--raw-root", str(RAW), "--out", "data/graphs/MUTAG.parquet", cwd=ws)
    assert res.returncode == 0, res.stderr
    return ws


def test_scalable_parts_and_matrix_blocks_on_dask_workers_in_another_directory(tmp_path):
    """Workers share no directory with the client: graphs travel with the tasks, results come back."""
    ws = _ws(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    bindir = Path(sys.executable).parent
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    logs = open(tmp_path / "dask.log", "w")
    procs = []
    try:
        procs.append(subprocess.Popen([str(bindir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                       "--no-dashboard"], cwd=elsewhere, stdout=logs, stderr=subprocess.STDOUT,
                                      start_new_session=True))
        for _ in range(2):
            procs.append(subprocess.Popen([str(bindir / "dask"), "worker", address, "--nthreads", "1", "--host",
                                           "127.0.0.1", "--no-dashboard"], cwd=elsewhere, stdout=logs,
                                          stderr=subprocess.STDOUT, start_new_session=True))
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
        # relative paths, resolved only in the client's workspace; parts two per task run (a runner must not
        # rebuild the batch it carries: Dask turned a list of specs into tuples)
        res = run_cli("select", "MUTAG", "--fraction", "0.1", "--engine", "scalable", "--part-size", "50",
                      "--dask-address", address, "--cache-dir", "cache-dask", "--out", "dask.json", cwd=ws,
                      env={"TMDSUB_PARTS_PER_TASK": "2"})
        assert res.returncode == 0, res.stderr
        assert "coreset parts: 4 to solve, 2 per task run" in res.stderr
        res2 = run_cli("tmd-matrix", "MUTAG", "--out-dir", "tmd-dask", "--cache-dir", "blocks-dask",
                       "--block-size", "64", "--dask-address", address, cwd=ws)
        assert res2.returncode == 0, res2.stderr
    finally:
        for p in reversed(procs):
            stop_process(p)
        logs.close()
    res = run_cli("select", "MUTAG", "--fraction", "0.1", "--engine", "scalable", "--part-size", "50",
                  "--runner", "threads", "--workers", "1", "--cache-dir", "cache-local", "--out", "local.json", cwd=ws)
    assert res.returncode == 0, res.stderr
    a, b = json.loads((ws / "dask.json").read_text()), json.loads((ws / "local.json").read_text())
    assert a["medoids"] == b["medoids"] and a["distance"] == b["distance"]
    assert len(list((ws / "cache-dask" / "parts").glob("*.npz"))) == 4  # the client wrote every part
    ds = tmdlib.datasets.to_dataset(load_builtin("MUTAG", RAW))
    assert np.allclose(np.load(ws / "tmd-dask" / "matrix.npy"), tmdlib.tmd_matrix(ds), rtol=1e-12)
    assert not list(elsewhere.rglob("*.npy"))  # workers wrote nothing of their own
