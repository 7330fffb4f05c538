"""Concurrency: one writing run per workspace (tasks.locking), results rows that never interleave.

* read-only commands (``tmd --pairs``, ``summary``, ``audit``, help) take no lock and run beside a
  writing stage; a writer beside a writer is refused with one ``error:`` line naming the holder;
* a second ``tmdsub`` run in a busy workspace is refused at once (exit 75) with a message naming the
  holder's pid and command, and the first run's artifacts are byte-identical to a lone run's;
  with ``--wait`` it queues instead and reuses the first run's blocks;
* the lock dies with its holder (SIGKILL included): a stale lock file never blocks;
* it is re-entrant in a process and inherited by the children a holder starts;
* concurrent appends to one results file never interleave or tear rows, and two experiment runs
  cannot write the same results file.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from helpers import RAW, ROOT

BLOCK = 8


def _python(code: str, log: Path, env: dict | None = None) -> subprocess.Popen:
    fh = open(log, "w")
    try:
        return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ, **(env or {})})
    finally:
        fh.close()


def _wait_for(cond, timeout: float = 120.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited early with {proc.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        time.sleep(0.05)


def _reap(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=60)


def _holder(ws: Path, seconds: float, command: str = "tmdsub tmd-matrix HELD") -> str:
    return f"""
import time
from tasks.locking import workspace_lock
with workspace_lock({str(ws)!r}, command={command!r}):
    time.sleep({seconds!r})
"""


def _held(ws: Path) -> bool:
    from tasks.locking import LOCK_NAME, read_holder

    return bool(read_holder(ws / LOCK_NAME))


# ------------------------------------------------------------------------------------- the lock


def test_second_run_refused_naming_holder_then_free_after_release(tmp_path):
    from tasks.locking import WorkspaceBusy, workspace_lock

    ws = tmp_path / "ws"
    t_spawn = time.monotonic()
    proc = _python(_holder(ws, 2.0), tmp_path / "holder.log")
    try:
        _wait_for(lambda: _held(ws), proc=proc)
        with pytest.raises(WorkspaceBusy) as info:
            with workspace_lock(ws):
                pass
        msg = str(info.value)
        assert f"pid {proc.pid}" in msg and "tmdsub tmd-matrix HELD" in msg and "--wait" in msg, msg
        with workspace_lock(ws, wait=60):  # queues behind the holder (which holds it for 2 s)
            assert time.monotonic() - t_spawn >= 2.0, "got the lock while the holder held it"
    finally:
        _reap(proc)


def test_lock_dies_with_a_sigkilled_holder(tmp_path):
    from tasks.locking import LOCK_NAME, workspace_lock

    ws = tmp_path / "ws"
    proc = _python(_holder(ws, 600.0), tmp_path / "holder.log")
    try:
        _wait_for(lambda: _held(ws), proc=proc)
    finally:
        _reap(proc)  # SIGKILL: no cleanup code runs
    assert (ws / LOCK_NAME).exists()  # the stale file is still there ...
    with workspace_lock(ws):  # ... and does not block
        pass


def test_lock_is_reentrant_and_inherited_by_children(tmp_path):
    from tasks.locking import WorkspaceBusy, workspace_lock

    ws = tmp_path / "ws"
    child = f"""
from tasks.locking import workspace_lock
with workspace_lock({str(ws)!r}):
    print("child ran under the parent's lock")
"""
    with workspace_lock(ws):
        with workspace_lock(ws):  # nested in one process
            pass
        res = subprocess.run([sys.executable, "-c", child], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0 and "child ran" in res.stdout, res.stderr
        # an unrelated process (no inherited variable) is refused
        env = {k: v for k, v in os.environ.items() if k != "TMDSUB_LOCK_HOLDER"}
        res = subprocess.run([sys.executable, "-c", child], cwd=ROOT, capture_output=True, text=True, timeout=120,
                             env=env)
        assert res.returncode != 0 and "workspace busy" in res.stderr
    assert "TMDSUB_LOCK_HOLDER" not in os.environ
    with pytest.raises(WorkspaceBusy):  # a forged variable grants nothing while another process holds it
        proc = _python(_holder(ws, 30.0, "other"), tmp_path / "h.log")
        try:
            _wait_for(lambda: _held(ws), proc=proc)
            os.environ["TMDSUB_LOCK_HOLDER"] = f"{ws / '.tmdsub.lock'}:{os.getpid()}"
            with workspace_lock(ws):
                pass
        finally:
            os.environ.pop("TMDSUB_LOCK_HOLDER", None)
            _reap(proc)


# ------------------------------------------------------------------------------------- the CLI


@pytest.fixture(scope="module")
def ws_store(tmp_path_factory) -> tuple[Path, Path]:
    """A workspace with a 40-graph store, and a lone (in-process) run's artifacts to compare with."""
    from flows.config.tmd import TmdStageConfig
    from flows.tmd import make_task_runner, tmd_matrix_flow
    from tmdlib.datasets import read_tu

    ws = tmp_path_factory.mktemp("ws")
    (ws / "data" / "graphs").mkdir(parents=True)
    store = ws / "data" / "graphs" / "M40.parquet"
    pq.write_table(read_tu(RAW / "MUTAG", "MUTAG").slice(0, 40), store)
    ref = tmp_path_factory.mktemp("lone")
    tmd_matrix_flow.with_options(task_runner=make_task_runner("threads", 1))(
        str(store), str(ref / "matrix.npy"), str(ref / "meta.json"), str(ref / "cache"),
        cfg=TmdStageConfig(block_size=BLOCK))
    return ws, ref


def _tmdsub(ws: Path, log: Path, *pre: str) -> subprocess.Popen:
    exe = Path(sys.executable).with_name("tmdsub")
    fh = open(log, "w")
    try:
        return subprocess.Popen([str(exe), *pre, "tmd-matrix", "M40", "--out-dir", "data/tmd/M40", "--cache-dir",
                                 "data/tmd/cache", "--block-size", str(BLOCK), "--runner", "threads", "--workers", "1"],
                                cwd=ws, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
                                env={k: v for k, v in os.environ.items()
                                     if k not in ("TMDSUB_WORKSPACE", "TMDSUB_LOCK_HOLDER")})
    finally:
        fh.close()


def _finish(proc: subprocess.Popen) -> int:
    try:
        return proc.wait(timeout=500)
    finally:
        _reap(proc)


def _same_as_lone(ws: Path, ref: Path) -> None:
    for name in ("matrix.npy", "meta.json"):
        assert (ws / "data" / "tmd" / "M40" / name).read_bytes() == (ref / name).read_bytes(), name


def _lock_taken(ws: Path) -> bool:
    """Probe the flock itself (the holder record alone may outlive a release by a few microseconds)."""
    import fcntl

    from tasks.locking import LOCK_NAME

    fd = os.open(ws / LOCK_NAME, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def test_two_cli_runs_on_one_workspace_second_refused(ws_store, tmp_path):
    ws, ref = ws_store
    # The first run holds the lock only for a few seconds, less than a loaded machine may take to start
    # the second one: it is stopped (SIGSTOP keeps its flock) while the second starts and is refused.
    for attempt in range(3):
        first = _tmdsub(ws, tmp_path / "first.log")
        try:
            _wait_for(lambda: _held(ws), proc=first)
            os.killpg(first.pid, signal.SIGSTOP)
            if _lock_taken(ws):
                break
            os.killpg(first.pid, signal.SIGCONT)  # stopped just as it let go: run it again
            assert _finish(first) == 0, (tmp_path / "first.log").read_text()
            shutil.rmtree(ws / "data" / "tmd", ignore_errors=True)
        except BaseException:
            _reap(first)
            raise
    else:
        pytest.fail("the first run never stayed stopped while holding the lock")
    try:
        second = _tmdsub(ws, tmp_path / "second.log")
        rc2 = _finish(second)
        os.killpg(first.pid, signal.SIGCONT)
        rc1 = _finish(first)
    finally:
        _reap(first)
    out2 = (tmp_path / "second.log").read_text()
    assert rc1 == 0, (tmp_path / "first.log").read_text()
    assert rc2 == 75, out2
    assert "Traceback" not in out2
    line = [ln for ln in out2.splitlines() if ln.startswith("error:")]
    assert len(line) == 1 and "workspace busy" in line[0] and f"pid {first.pid}" in line[0], out2
    assert "tmd-matrix M40" in line[0]
    _same_as_lone(ws, ref)


@pytest.mark.slow
def test_two_cli_runs_second_waits_and_reuses(ws_store, tmp_path):
    ws, ref = ws_store
    shutil.rmtree(ws / "data" / "tmd", ignore_errors=True)
    first = _tmdsub(ws, tmp_path / "first.log")
    try:
        _wait_for(lambda: _held(ws), proc=first)
        second = _tmdsub(ws, tmp_path / "second.log", "--wait")
        rc2 = _finish(second)
        rc1 = _finish(first)
    finally:
        _reap(first)
    assert rc1 == 0 and rc2 == 0, (tmp_path / "second.log").read_text()
    assert "(0/15 blocks, 0 pairs computed)" in (tmp_path / "second.log").read_text()  # it ran after the first
    _same_as_lone(ws, ref)


# ------------------------------------------------------------------------------------- results rows


def test_concurrent_appends_never_interleave_rows(tmp_path):
    from tasks.locking import read_locked

    results = tmp_path / "results.csv"
    writer = """
import sys
from tasks.locking import append_lines
w = int(sys.argv[1])
for k in range(150):
    # rows of ~8 KiB (more than a pipe buffer page), several per call
    append_lines(sys.argv[2], [f"{w},{k},{r}," + ("abcdefgh"[w] * 8000) for r in range(3)])
"""
    procs = [subprocess.Popen([sys.executable, "-c", writer, str(w), str(results)], cwd=ROOT) for w in range(4)]
    for p in procs:
        assert p.wait(timeout=300) == 0
    rows = read_locked(results)
    assert len(rows) == 4 * 150 * 3
    seen = set()
    for row in rows:
        w, k, r, payload = row.split(",")
        assert payload == "abcdefgh"[int(w)] * 8000, "interleaved row"
        seen.add((int(w), int(k), int(r)))
    assert len(seen) == len(rows)
    # each writer's rows of one call are contiguous (one write per call)
    for i in range(0, len(rows), 3):
        assert len({tuple(rows[i + d].split(",")[:2]) for d in range(3)}) == 1


def test_two_experiment_runs_cannot_write_one_results_file(tmp_path):
    """The experiment flow's results store holds a lock: a second writer is refused, rows stay whole."""
    pytest.importorskip("tasks.experiment")
    from tasks.experiment import ResultStore
    from tmdlib import InputError

    holder = f"""
import time
from tasks.experiment import ResultStore
s = ResultStore({str(tmp_path)!r}, "MUTAG")
open({str(tmp_path / 'ready')!r}, "w").close()
time.sleep(60)
"""
    proc = _python(holder, tmp_path / "holder.log")
    try:
        _wait_for(lambda: (tmp_path / "ready").exists(), proc=proc)
        with pytest.raises(InputError, match="another experiment run"):
            ResultStore(str(tmp_path), "MUTAG")
    finally:
        _reap(proc)
    ResultStore(str(tmp_path), "MUTAG").close()  # free again once the holder is gone


# ------------------------------------------------------------------------------------- readers beside a writer


@pytest.fixture(scope="module")
def small_ws(tmp_path_factory) -> Path:
    """A workspace with a 10-graph store and a pair list, for the read-only commands."""
    from tmdlib.datasets import read_tu

    ws = tmp_path_factory.mktemp("readers")
    (ws / "data" / "graphs").mkdir(parents=True)
    pq.write_table(read_tu(RAW / "MUTAG", "MUTAG").slice(0, 10), ws / "data" / "graphs" / "M10.parquet")
    (ws / "pairs.csv").write_text("i,j\n0,1\n2,3\n4,4\n")
    return ws


def _cli(ws: Path, *args: str) -> subprocess.CompletedProcess:
    """``tmdsub ARGS`` in ``ws`` as a user would start it: no inherited lock, no waiting."""
    exe = Path(sys.executable).with_name("tmdsub")
    env = {k: v for k, v in os.environ.items() if k not in ("TMDSUB_WORKSPACE", "TMDSUB_LOCK_HOLDER",
                                                             "TMDSUB_LOCK_WAIT")}
    return subprocess.run([str(exe), *args], cwd=ws, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture()
def writer(small_ws, tmp_path):
    """Another process holding the workspace lock as a writing stage does (released at teardown)."""
    proc = _python(_holder(small_ws, 120.0, "tmdsub tmd-matrix M10"), tmp_path / "writer.log")
    try:
        _wait_for(lambda: _held(small_ws), proc=proc)
        yield proc
    finally:
        _reap(proc)


def test_lock_mode_of_each_command():
    from flows.cli import lock_mode

    for args in (["tmd", "M", "--pairs", "p.csv", "--out", "o.csv"], ["summary"], ["audit", "M", "--graphs", "g"],
                 [], ["--help"], ["-h"], ["select", "--help"], ["labels"], ["labels", "import", "--help"],
                 ["schedule"], ["retrain"]):
        assert lock_mode(args) == "none", args
    for args in (["ingest", "MUTAG"], ["tmd-matrix", "M"], ["select", "M", "--fraction", "0.1"], ["nodes", "M"],
                 ["label-requests", "M"], ["labels", "import", "M", "x.csv"], ["labels", "commit", "M"],
                 ["train"], ["evaluate"], ["experiment"], ["remote"]):
        assert lock_mode(args) == "exclusive", args


def test_reader_runs_beside_a_writer(small_ws, writer):
    """`tmdsub tmd --pairs` answers while a writing stage holds the workspace lock; the lock stays its."""
    from tasks.locking import LOCK_NAME, read_holder

    res = _cli(small_ws, "tmd", "M10", "--pairs", "pairs.csv", "--out", "out.csv", "--depth", "2")
    assert res.returncode == 0, res.stderr
    assert "workspace busy" not in res.stderr
    import csv

    rows = list(csv.reader((small_ws / "out.csv").open()))
    assert rows[0] == ["i", "j", "tmd"] and len(rows) == 4 and float(rows[3][2]) == 0.0, rows
    assert float(rows[1][2]) > 0.0
    assert read_holder(small_ws / LOCK_NAME)["pid"] == writer.pid  # the reader neither took nor dropped it
    assert writer.poll() is None


def test_writer_beside_a_writer_is_refused_with_one_clear_line(small_ws, writer):
    res = _cli(small_ws, "nodes", "M10", "--fraction", "0.5", "--method", "random")
    assert res.returncode == 75, res.stderr
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, res.stderr
    assert "workspace busy" in lines[0] and f"pid {writer.pid}" in lines[0] and "tmdsub tmd-matrix M10" in lines[0]
    assert "--wait" in lines[0]
    assert not (small_ws / "data" / "selection").exists()  # refused before writing anything
