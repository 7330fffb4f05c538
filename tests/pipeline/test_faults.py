"""Fault tests: SIGKILL the TMD and training stages at random points, fill the disk mid-write,
refuse a matrix that cannot fit in memory.

What they prove (README "Reliability and security", SECURITY.md):

* after any number of SIGKILLs at random points, the next run completes, recomputes no finished
  block (the files are not even rewritten: same inode and mtime), and its artifacts are
  byte-identical to an uninterrupted run's;
* at every kill point, each file under a final name is complete (byte-identical to the reference);
  torn writes exist only as temporaries, which the next run removes;
* ENOSPC during a block write leaves neither a partial block nor a temporary; a rerun completes;
* a matrix that would not fit in memory is refused before any block is computed, naming its size.

The kill points are random; the seed is printed on failure (set TMDSUB_FAULT_SEED to replay).
The default variants kill twice (TMD) and once (training); the ``slow`` ones kill more often, with
the process-pool runner, and also inside the final merge/write.
"""
from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from helpers import RAW, ROOT
from tmdlib.datasets import to_dataset  # noqa: E402
from flows.config.tmd import TmdStageConfig

N_GRAPHS = 40
BLOCK = 8  # 5 row blocks -> 15 upper-triangular blocks
N_BLOCKS = 15


def _seed() -> int:
    return int(os.environ.get("TMDSUB_FAULT_SEED") or time.time_ns() % 2**31)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """The first 40 MUTAG graphs as a graph store."""
    from tmdlib.datasets import read_tu

    path = tmp_path_factory.mktemp("faults-store") / "MUTAG40.parquet"
    pq.write_table(read_tu(RAW / "MUTAG", "MUTAG").slice(0, N_GRAPHS), path)
    return path


# ------------------------------------------------------------------------------------- processes


def _spawn(code: str, log: Path) -> subprocess.Popen:
    """Run ``code`` in its own process group (Prefect's ephemeral server and pool workers join it)."""
    fh = open(log, "a")
    try:
        return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
    finally:
        fh.close()


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=60)


def _finish(proc: subprocess.Popen, timeout: float = 400) -> int:
    try:
        return proc.wait(timeout=timeout)
    finally:
        try:  # reap what the run left in its group (the ephemeral API server)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _kill_when(proc: subprocess.Popen, ready, delay: float, timeout: float = 400) -> bool:
    """SIGKILL ``proc``'s whole group ``delay`` s after ``ready()`` first holds; False if it exited first."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            _kill_group(proc)
            return False
        if time.monotonic() > deadline:
            _kill_group(proc)
            raise TimeoutError("the run never reached the kill point")
        time.sleep(0.02)
    time.sleep(delay)
    killed = proc.poll() is None
    _kill_group(proc)
    return killed


def _snapshot(folder: Path, pattern: str = "*.npy") -> dict[str, tuple[int, int]]:
    """name -> (inode, mtime_ns) of the finished files: a rewrite changes the inode (atomic rename)."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.glob(pattern)}


# ------------------------------------------------------------------------------------- TMD stage


def _tmd_script(store: Path, out: Path, cache: Path, runner: str, workers: int, block_sleep: float) -> str:
    """The stage's flow, each block slowed by ``block_sleep`` s (a window for the kills to land in)."""
    return f"""
import json, time
import tmdlib.distance._engine as T
def slow(fn):
    def inner(*a, **k):
        time.sleep({block_sleep!r})
        return fn(*a, **k)
    return inner
T.tmd_block, T.tmd_matrix = slow(T.tmd_block), slow(T.tmd_matrix)
import flows
from flows.config.tmd import TmdStageConfig
from flows.tmd import make_task_runner, tmd_matrix_flow
from tasks import io
res = tmd_matrix_flow.with_options(task_runner=make_task_runner({runner!r}, {workers!r}))(
    {str(store)!r}, {str(out / 'matrix.npy')!r}, {str(out / 'meta.json')!r}, {str(cache)!r},
    cfg=TmdStageConfig(block_size={BLOCK}, threads_per_block=1))
io.write_json({str(out / 'result.json')!r}, {{"blocks_computed": res["blocks_computed"]}})
"""


@pytest.fixture(scope="module")
def tmd_reference(store, tmp_path_factory) -> Path:
    """An uninterrupted run of the stage (in-process): matrix.npy, meta.json and its block cache."""
    from flows.tmd import make_task_runner, tmd_matrix_flow

    root = tmp_path_factory.mktemp("tmd-ref")
    meta = tmd_matrix_flow.with_options(task_runner=make_task_runner("threads", 1))(
        str(store), str(root / "out" / "matrix.npy"), str(root / "out" / "meta.json"), str(root / "cache"),
        cfg=TmdStageConfig(block_size=BLOCK))
    assert meta["blocks"] == N_BLOCKS and meta["blocks_computed"] == N_BLOCKS
    return root


def _check_consistent(cache: Path, out: Path, ref: Path, why: str) -> None:
    """Every file under a final name is complete: byte-identical to the uninterrupted run's."""
    for p in cache.glob("*.npy"):
        assert p.read_bytes() == (ref / "cache" / p.name).read_bytes(), f"torn block {p.name} ({why})"
    for name in ("matrix.npy", "meta.json"):
        if (out / name).exists():
            assert (out / name).read_bytes() == (ref / "out" / name).read_bytes(), f"torn {name} ({why})"


def _tmd_kill_and_resume(store, ref, tmp_path, kills: int, runner: str, workers: int, block_sleep: float,
                         allow_late: bool) -> None:
    seed = _seed()
    rng = random.Random(seed)
    out, cache, log = tmp_path / "out", tmp_path / "cache", tmp_path / "runs.log"
    code = _tmd_script(store, out, cache, runner, workers, block_sleep)
    why = f"TMDSUB_FAULT_SEED={seed}"
    for k in range(kills):
        done = len(list(cache.glob("*.npy")))
        before = _snapshot(cache)
        # kill after a random number of further finished blocks, plus a random delay: it lands in a
        # block's computation, in a write, between blocks, or (allow_late) in the merge and final writes
        high = N_BLOCKS if allow_late else N_BLOCKS - 1
        target = rng.randint(min(done + 1, high), high)
        delay = rng.uniform(0.0, 1.5 * block_sleep)
        proc = _spawn(code, log)
        killed = _kill_when(proc, lambda: len(list(cache.glob("*.npy"))) >= target, delay)
        why = f"TMDSUB_FAULT_SEED={seed}, kill {k + 1}: after {target} blocks + {delay:.3f}s"
        _check_consistent(cache, out, ref, why)
        assert killed or (out / "result.json").exists(), why
        # finished blocks survive a kill untouched
        after = _snapshot(cache)
        assert all(after.get(n) == v for n, v in before.items()), why
    finished = _snapshot(cache)
    assert finished, "no block finished before the kills; widen block_sleep"
    if (out / "result.json").exists():
        (out / "result.json").unlink()
    proc = _spawn(code, log)
    rc = _finish(proc)
    assert rc == 0, f"{why}\n{log.read_text()[-3000:]}"
    for name in ("matrix.npy", "meta.json"):
        assert (out / name).read_bytes() == (ref / "out" / name).read_bytes(), f"{name} differs ({why})"
    # no finished block was recomputed (nor even rewritten)
    assert json.loads((out / "result.json").read_text())["blocks_computed"] == N_BLOCKS - len(finished), why
    now = _snapshot(cache)
    assert all(now[n] == v for n, v in finished.items()), why
    assert sorted(now) == sorted(p.name for p in (ref / "cache").glob("*.npy"))
    assert not list(cache.glob(".*.tmp")) and not list(out.glob(".*.tmp")), "temporaries of killed runs left"


def test_tmd_stage_sigkilled_twice_resumes_byte_identical(store, tmd_reference, tmp_path):
    _tmd_kill_and_resume(store, tmd_reference, tmp_path, kills=2, runner="threads", workers=1,
                         block_sleep=0.15, allow_late=False)


@pytest.mark.slow
@pytest.mark.parametrize("runner,workers", [("threads", 2), ("local", 2)])
def test_tmd_stage_sigkilled_many_times_resumes_byte_identical(store, tmd_reference, tmp_path, runner, workers):
    _tmd_kill_and_resume(store, tmd_reference, tmp_path, kills=5, runner=runner, workers=workers,
                         block_sleep=0.3, allow_late=True)


@pytest.mark.slow
def test_tmd_stage_killed_in_final_write_never_leaves_torn_matrix(store, tmd_reference, tmp_path):
    """Kill while matrix.npy is being written (the writer is slowed there): no torn matrix.npy."""
    out, cache, log = tmp_path / "out", tmp_path / "cache", tmp_path / "run.log"
    import shutil

    shutil.copytree(tmd_reference / "cache", cache)  # all blocks done: the run goes straight to the merge
    marker = tmp_path / "writing"
    code = f"""
import time, numpy as np
_save = np.save
def slow_save(fh, arr, **k):
    if arr.shape == ({N_GRAPHS}, {N_GRAPHS}):
        open({str(marker)!r}, "w").close()
        fh.write(b"\\x93NUMPY partial")
        fh.flush()
        time.sleep(30)
    return _save(fh, arr, **k)
np.save = slow_save
""" + _tmd_script(store, out, cache, "threads", 1, 0.0)
    proc = _spawn(code, log)
    assert _kill_when(proc, marker.exists, 0.2)
    assert not (out / "matrix.npy").exists()
    assert list(out.glob(".matrix.npy.*.tmp")), "expected the killed writer's temporary"
    rc = _finish(_spawn(_tmd_script(store, out, cache, "threads", 1, 0.0), log))
    assert rc == 0, log.read_text()[-3000:]
    assert (out / "matrix.npy").read_bytes() == (tmd_reference / "out" / "matrix.npy").read_bytes()
    assert not list(out.glob(".*.tmp"))


# ------------------------------------------------------------------------------------- disk full


def test_disk_full_during_block_write_leaves_no_partial_block(store, tmd_reference, tmp_path, monkeypatch):
    """ENOSPC in the middle of a block write: no block file, no temporary; a rerun completes."""
    from tasks import io
    from tasks.tmd import compute_block
    from tmdlib.distance.blocks import block_graphs, block_key, blocks_of_chunks, plan_chunks
    from tmdlib.datasets import graph_hashes

    from tmdlib import GraphDataset
    from tmdlib.datasets import read_graph_parquet
    from tmdlib.distance import resolve_weights

    ds = to_dataset(read_graph_parquet(store))
    hashes = graph_hashes(ds)
    blocks = blocks_of_chunks(plan_chunks(hashes, BLOCK, {}))
    cache = tmp_path / "cache"
    w = resolve_weights(4, "pascal").tolist()  # the stage's defaults: same block names as the reference
    paths = [cache / f"{block_key(hashes, b, 4, w)}.npy" for b in blocks[:3]]

    real_save = np.save

    def full_disk_save(fh, arr, **kw):
        fh.write(b"\x93NUMPY" + b"\0" * 100)  # part of the block reached the disk, then ENOSPC
        fh.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "save", full_disk_save)
    def block_file(b, p):  # what the stage does per block: compute it (on a worker), write it (here)
        io.write_npy(p, compute_block.fn(*block_graphs(ds, b), 4, w, 1))

    for b, p in zip(blocks[:3], paths):
        with pytest.raises(OSError) as info:
            block_file(b, p)
        assert info.value.errno == errno.ENOSPC
    assert list(cache.iterdir()) == [], "a partial block or temporary was left behind"
    monkeypatch.setattr(np, "save", real_save)
    for b, p in zip(blocks[:3], paths):  # space freed: the rerun writes complete blocks
        block_file(b, p)
        assert p.read_bytes() == (tmd_reference / "cache" / p.name).read_bytes()
    assert sorted(q.name for q in cache.iterdir()) == sorted(p.name for p in paths)
    # every writer of tasks.io behaves the same way
    monkeypatch.setattr(np, "save", full_disk_save)
    with pytest.raises(OSError):
        io.write_npy(tmp_path / "m" / "matrix.npy", np.zeros(3))
    assert list((tmp_path / "m").iterdir()) == []


def test_disk_full_in_flow_then_rerun_completes(store, tmd_reference, tmp_path, monkeypatch):
    """The whole stage with the disk filling up after 4 blocks: the run fails, the finished blocks are
    complete, nothing partial is left; once space is back, the rerun computes only the missing blocks."""
    import flows.tmd as flows_tmd
    from flows.tmd import make_task_runner, tmd_matrix_flow
    from tasks import io

    real = io.write_npy
    calls = {"n": 0}

    def filling(dest, array):
        calls["n"] += 1
        if calls["n"] > 4:
            def torn(p):
                with open(p, "wb") as fh:
                    fh.write(b"\x93NUMPY" + b"\0" * 64)
                raise OSError(errno.ENOSPC, "No space left on device")
            return io._write_with(dest, torn)
        return real(dest, array)

    monkeypatch.setattr(io, "write_npy", filling)
    monkeypatch.setattr(flows_tmd, "compute_block", flows_tmd.compute_block.with_options(retries=0))
    out, cache = tmp_path / "out", tmp_path / "cache"
    run = tmd_matrix_flow.with_options(task_runner=make_task_runner("threads", 1))
    with pytest.raises(OSError):
        run(str(store), str(out / "matrix.npy"), str(out / "meta.json"), str(cache),
               cfg=TmdStageConfig(block_size=BLOCK))
    left = sorted(p.name for p in cache.iterdir() if p.name != "chunks")  # chunks/: the plan's chunk index
    assert len(left) == 4 and all(n.endswith(".npy") for n in left), left
    for n in left:
        assert (cache / n).read_bytes() == (tmd_reference / "cache" / n).read_bytes()
    assert not (out / "matrix.npy").exists()
    monkeypatch.setattr(io, "write_npy", real)
    meta = run(str(store), str(out / "matrix.npy"), str(out / "meta.json"), str(cache),
               cfg=TmdStageConfig(block_size=BLOCK))
    assert meta["blocks_computed"] == N_BLOCKS - 4
    assert (out / "matrix.npy").read_bytes() == (tmd_reference / "out" / "matrix.npy").read_bytes()


# ------------------------------------------------------------------------------------- memory


def test_matrix_too_big_for_memory_is_refused_up_front(store, tmp_path, monkeypatch):
    from flows.tmd import tmd_matrix_flow
    from tmdlib.distance.blocks import check_matrix_fits, matrix_memory_bytes
    from tmdlib import InputError

    monkeypatch.setenv("TMDSUB_MAX_MEMORY", str(matrix_memory_bytes(N_GRAPHS, BLOCK) - 1))
    with pytest.raises(InputError, match=r"the 40 x 40 TMD matrix needs 13\.50 KiB of memory"):
        tmd_matrix_flow(str(store), str(tmp_path / "o" / "matrix.npy"), str(tmp_path / "o" / "meta.json"),
                        str(tmp_path / "cache"), cfg=TmdStageConfig(block_size=BLOCK))
    assert not (tmp_path / "cache").exists() and not (tmp_path / "o").exists()  # refused before any work
    monkeypatch.delenv("TMDSUB_MAX_MEMORY")
    # one million graphs: 7.28 TiB; refused by size alone (no data are read)
    with pytest.raises(InputError, match=r"1000000 x 1000000 TMD matrix needs 7\.28 TiB"):
        check_matrix_fits(1_000_000, 256)
    assert check_matrix_fits(N_GRAPHS, BLOCK) == 8 * 40 * 40 + 2 * 8 * 8 * 8


# ------------------------------------------------------------------------------------- training stage


def _train_inputs(store: Path, folder: Path, n_selected: int = 24) -> dict:
    """selection.json, labels.csv/labels.json for the first 40 MUTAG graphs."""
    from tmdlib.datasets import read_graph_parquet

    folder.mkdir(parents=True, exist_ok=True)
    y = read_graph_parquet(store).column("y").to_pylist()
    train_ids, test_ids = list(range(32)), list(range(32, N_GRAPHS))
    medoids = train_ids[:n_selected]
    sel = {"train_ids": train_ids, "test_ids": test_ids, "medoids": medoids, "tau": [1.0] * len(medoids),
           "epsilon": 1.5, "method": "tmd", "fraction": n_selected / 32, "k": len(medoids), "seed": 0,
           "n_train": 32}
    (folder / "selection.json").write_text(json.dumps(sel))
    (folder / "labels.csv").write_text("graph_id,y\n" + "".join(f"{g},{y[g]!r}\n" for g in medoids))
    (folder / "labels.json").write_text(json.dumps({"source": "import", "benchmark_mode": False}))
    return {"graphs": str(store), "selection": str(folder / "selection.json"), "labels": str(folder / "labels.csv")}


TRAIN_KW = dict(epochs=60, hidden=32, seed=0, device="cpu", torch_threads=1, log_mlflow=False)


def _train_script(inputs: dict, out: Path, marker: Path) -> str:
    return f"""
import pathlib
import tmdlib.torch.gin as nn
_train = nn.train_gin
def marked(*a, **k):
    pathlib.Path({str(marker)!r}).touch()
    return _train(*a, **k)
nn.train_gin = marked
import flows
from flows.train import train_flow
from flows.config.train import TrainStageConfig
train_flow({inputs['graphs']!r}, {inputs['selection']!r}, {inputs['labels']!r}, {str(out / 'model.pt')!r},
           {str(out / 'train.json')!r}, cfg=TrainStageConfig(**{TRAIN_KW!r}))
"""


def _stable(info: dict) -> dict:
    """train.json without the wall-clock field (the only one that differs between two runs)."""
    return {k: v for k, v in info.items() if k not in ("train_seconds",)}


@pytest.fixture(scope="module")
def train_reference(store, tmp_path_factory) -> tuple[dict, Path, float]:
    from flows.train import train_flow
    from flows.config.train import TrainStageConfig

    root = tmp_path_factory.mktemp("train-ref")
    inputs = _train_inputs(store, root / "in")
    t0 = time.monotonic()
    train_flow(inputs["graphs"], inputs["selection"], inputs["labels"], str(root / "model.pt"),
               str(root / "train.json"), cfg=TrainStageConfig(**TRAIN_KW))
    return inputs, root, time.monotonic() - t0


def _train_kill_and_resume(train_reference, tmp_path, kills: int) -> None:
    from tasks import io

    inputs, ref, seconds = train_reference
    seed = _seed()
    rng = random.Random(seed)
    out, log, marker = tmp_path / "out", tmp_path / "runs.log", tmp_path / "training"
    code = _train_script(inputs, out, marker)
    why = f"TMDSUB_FAULT_SEED={seed}"
    for k in range(kills):
        marker.unlink(missing_ok=True)
        delay = rng.uniform(0.0, 1.2 * seconds)  # inside training, or into the writes just after
        proc = _spawn(code, log)
        _kill_when(proc, marker.exists, delay)
        why = f"TMDSUB_FAULT_SEED={seed}, kill {k + 1}: {delay:.3f}s into training"
        # a model under its final name is a complete one; train.json only ever names a complete model
        if (out / "model.pt").exists():
            assert (out / "model.pt").read_bytes() == (ref / "model.pt").read_bytes(), why
        if (out / "train.json").exists():
            info = json.loads((out / "train.json").read_text())
            assert info["model_sha256"] == io.sha256_file(out / "model.pt"), why
    rc = _finish(_spawn(code, log))
    assert rc == 0, f"{why}\n{log.read_text()[-3000:]}"
    assert (out / "model.pt").read_bytes() == (ref / "model.pt").read_bytes(), why
    assert _stable(json.loads((out / "train.json").read_text())) == \
        _stable(json.loads((ref / "train.json").read_text())), why
    # what a killed writer can leave is only a hidden temporary, never a file under a final name
    assert {p.name for p in out.iterdir() if not p.name.endswith(".tmp")} == {"model.pt", "train.json"}


def test_training_stage_sigkilled_resumes_byte_identical(train_reference, tmp_path):
    _train_kill_and_resume(train_reference, tmp_path, kills=1)


@pytest.mark.slow
def test_training_stage_sigkilled_many_times_resumes_byte_identical(train_reference, tmp_path):
    _train_kill_and_resume(train_reference, tmp_path, kills=3)


# ------------------------------------------------------------------------------------- experiment flow


EXP_KW = dict(profile="quick", datasets="MUTAG", trials=1, epochs=3, kinds="graph", report=False,
              torch_threads=1, device="cpu")


def _rows_by_key(path: Path) -> dict:
    """key -> row as text (``repr`` of each value: NaN equals NaN)."""
    from tmdlib.experiment import read_results, row_key

    return {row_key(r): {c: repr(v) for c, v in r.items()} for r in read_results(str(path))}


@pytest.mark.slow
def test_experiment_flow_sigkilled_resumes_without_retraining(tmp_path):
    """SIGKILL the experiment flow twice at random points after rows were appended; the rerun trains
    only the missing models, keeps every finished row as it was, and yields the same results as an
    uninterrupted run (all columns but the wall-clock ``train_seconds``)."""
    pytest.importorskip("flows.experiment")
    from flows.experiment import experiment_flow

    from prefect.task_runners import ThreadPoolTaskRunner
    from flows.config.experiment import ExperimentStageConfig

    cache = tmp_path / "cache"  # distance matrices: shared, so the runs below go straight to training
    ref = tmp_path / "ref"
    # one cell at a time, as `tmdsub experiment --workers 1` (cells in concurrent threads share torch's
    # global RNG while they initialise their models, which makes losses depend on the interleaving)
    experiment_flow.with_options(task_runner=ThreadPoolTaskRunner(max_workers=1))(
        out_dir=str(ref), cache_dir=str(cache), cfg=ExperimentStageConfig(**EXP_KW))
    ref_rows = _rows_by_key(ref / "results" / "quick" / "MUTAG.csv")
    total = len(ref_rows)
    assert total >= 6

    seed = _seed()
    rng = random.Random(seed)
    out, log = tmp_path / "run", tmp_path / "runs.log"
    results = out / "results" / "quick" / "MUTAG.csv"
    code = f"""
import flows
from prefect.task_runners import ThreadPoolTaskRunner
from flows.experiment import experiment_flow
from flows.config.experiment import ExperimentStageConfig
experiment_flow.with_options(task_runner=ThreadPoolTaskRunner(max_workers=1))(
    out_dir={str(out)!r}, cache_dir={str(cache)!r}, cfg=ExperimentStageConfig(**{EXP_KW!r}))
"""
    kept: dict = {}
    for k in range(2):
        have = len(_rows_by_key(results)) if results.exists() else 0
        target = rng.randint(have + 1, total - 1) if have + 1 < total else total
        delay = rng.uniform(0.0, 1.0)
        _kill_when(_spawn(code, log), lambda: results.exists() and len(_rows_by_key(results)) >= target, delay)
        rows = _rows_by_key(results)
        why = f"TMDSUB_FAULT_SEED={seed}, kill {k + 1}: after {target} rows + {delay:.2f}s"
        assert all(rows[key] == r for key, r in kept.items()), why  # finished rows survive untouched
        kept = rows
    assert kept, "no row finished before the kills"
    rc = _finish(_spawn(code, log))
    assert rc == 0, log.read_text()[-3000:]
    rows = _rows_by_key(results)
    assert sorted(rows) == sorted(ref_rows), why
    for key, r in kept.items():  # not retrained: the very same row, wall time included
        assert rows[key] == r, why

    def strip(r):
        return {c: v for c, v in r.items() if c != "train_seconds"}

    for key in rows:
        assert strip(rows[key]) == strip(ref_rows[key]), (key, why)
