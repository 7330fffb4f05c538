"""Nothing a stage starts outlives it: no Prefect server, no process-pool worker, no bound port -- after a
normal run, and after the stage was killed (SIGTERM, SIGKILL).

Stages run in ephemeral mode, as ``make run`` does: no PREFECT_API_URL, so the stage's first flow run
starts a temporary Prefect API server (``prefect.server.api.server:create_app`` under uvicorn).  The
processes a run started are found by a marker variable in its environment (inherited by every
descendant, reparented or not).  See :func:`flows._env.guard_ephemeral_server` and
:func:`flows._env.exit_with_parent`.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from helpers import RAW, git_workspace

# pipeline + server come from tests/servers/conftest.py
pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")

MARKER = "TMDSUB_ORPHAN_PROBE"
SERVER_APP = "prefect.server.api.server:create_app"


def _marked(token: str) -> dict[int, str]:
    """pid -> command line of the live processes whose environment holds ``MARKER=token``."""
    found, want = {}, f"{MARKER}={token}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if want not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            stat = (entry / "stat").read_text()
            if stat.rpartition(")")[2].split()[0] == "Z":  # a zombie is gone (only not yet reaped)
                continue
            found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or another user's
            continue
    return found


def _listening_ports() -> set[int]:
    """Local TCP ports in LISTEN state (IPv4 and IPv6)."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A":
                ports.add(int(fields[1].rpartition(":")[2], 16))
    return ports


class _Watch:
    """Samples a run's processes while it runs: the ports of its servers, the most servers at once."""

    def __init__(self, token: str):
        self.token, self.ports, self.most_servers, self.workers_seen = token, set(), 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            procs = _marked(self.token)
            servers = [cmd for cmd in procs.values() if SERVER_APP in cmd]
            self.most_servers = max(self.most_servers, len(servers))
            self.workers_seen = max(self.workers_seen, sum("--multiprocessing-fork" in c for c in procs.values()))
            for cmd in servers:
                m = re.search(r"--port (\d+)", cmd)
                if m:
                    self.ports.add(int(m.group(1)))
            self._stop.wait(0.3)

    def stop(self):
        self._stop.set()
        self._thread.join(10)


def _assert_nothing_left(token: str, ports: set[int], within: float) -> None:
    """Every process of the run ends within ``within`` seconds and none of its servers' ports listens."""
    deadline = time.monotonic() + within
    left = _marked(token)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _marked(token)
    try:
        assert not left, f"still running {within:.0f}s after the run ended: {left}"
        bound = ports & _listening_ports()
        assert not bound, f"ports still listening: {sorted(bound)}"
    finally:
        for pid in left:  # never leave them behind, even when the test fails
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _env(tmp: Path, token: str) -> dict:
    env = {**os.environ, MARKER: token, "PREFECT_HOME": str(tmp / "prefect-home"),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "TMDSUB_LOCK_WAIT": "600"}
    for key in ("PREFECT_API_URL", "PYTEST_XDIST_WORKER", "PYTEST_CURRENT_TEST"):
        env.pop(key, None)  # ephemeral mode, as `make run`
    return env


@pytest.fixture(scope="module")
def mutag_store(tmp_path_factory) -> Path:
    from tmdlib.datasets import read_tu, write_graph_parquet

    path = tmp_path_factory.mktemp("store") / "MUTAG.parquet"
    write_graph_parquet(read_tu(RAW / "MUTAG", "MUTAG"), path)
    return path


def _tmd_stage(store: Path, out: Path) -> list[str]:
    """The pipeline's tmd stage (process-pool task runner, two workers) on MUTAG."""
    return [str(Path(sys.executable).with_name("tmdsub")), "tmd-matrix", "MUTAG", "--graphs", str(store),
            "--out-dir", str(out / "tmd"), "--cache-dir", str(out / "cache"), "--block-size", "32",
            "--runner", "local", "--workers", "2"]


def test_stage_run_leaves_no_process_and_no_port(mutag_store, tmp_path):
    token = uuid.uuid4().hex
    watch = _Watch(token)
    try:
        res = subprocess.run(_tmd_stage(mutag_store, tmp_path), cwd=tmp_path, env=_env(tmp_path, token),
                             capture_output=True, text=True, timeout=900)
    finally:
        watch.stop()
    assert res.returncode == 0, res.stdout + res.stderr
    assert watch.ports, "the stage started no Prefect server (not in ephemeral mode?)"
    # one server for the stage: its process-pool workers use it instead of starting their own
    assert watch.most_servers == 1, watch.most_servers
    _assert_nothing_left(token, watch.ports, within=30)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killed_stage_leaves_no_process_and_no_port(mutag_store, tmp_path, sig):
    """Killed while its server and both pool workers run: they all end with it (the server and each
    worker watch the stage process), though no atexit hook of the stage ran."""
    token = uuid.uuid4().hex
    watch = _Watch(token)
    proc = subprocess.Popen(_tmd_stage(mutag_store, tmp_path), cwd=tmp_path, env=_env(tmp_path, token),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline, ready = time.monotonic() + 600, False
        while not ready and time.monotonic() < deadline and proc.poll() is None:
            procs = _marked(token).values()
            ready = any(SERVER_APP in c for c in procs) and sum("--multiprocessing-fork" in c for c in procs) >= 2
            time.sleep(0 if ready else 0.2)
        assert ready and proc.poll() is None, "the stage ended before its server and workers ran"
        os.kill(proc.pid, sig)  # the stage process only, as an OOM killer or `kill PID` would
        proc.wait(60)
    finally:
        watch.stop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert watch.ports
    _assert_nothing_left(token, watch.ports, within=60)


@pytest.mark.slow  # the whole MUTAG pipeline with an ephemeral server per stage (several minutes)
def test_dvc_repro_leaves_no_process_and_no_port(tmp_path):
    """`make run`'s `dvc repro` in a fresh workspace: afterwards nothing it started runs or listens."""
    token = uuid.uuid4().hex
    env = {**_env(tmp_path, token), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "DVC_NO_ANALYTICS": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    ws = tmp_path / "ws"
    ws.mkdir()
    git_workspace(ws, env)
    watch = _Watch(token)
    try:
        res = subprocess.run([str(Path(sys.executable).with_name("dvc")), "repro"], cwd=ws, env=env,
                             capture_output=True, text=True, timeout=3600)
    finally:
        watch.stop()
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert watch.ports and watch.most_servers == 1
    _assert_nothing_left(token, watch.ports, within=30)
