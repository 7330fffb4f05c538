"""Cache keys through the TMD stage: an edited engine makes the stage recompute every block (the keys themselves:
lib/distance/test_cache_keys.py)."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from helpers import RAW

N_GRAPHS, BLOCK = 12, 4


def _engine_copy(tmp_path: Path) -> Path:
    """A copy of the engine's source files (``tmdlib/distance/*.py``)."""
    from tmdlib.distance._fingerprint import SOURCE_DIR

    copy = tmp_path / "engine"
    copy.mkdir()
    for f in SOURCE_DIR.glob("*.py"):
        shutil.copy2(f, copy / f.name)
    return copy


@pytest.fixture()
def small_store(tmp_path) -> Path:
    from tmdlib.datasets import read_tu

    path = tmp_path / "M12.parquet"
    pq.write_table(read_tu(RAW / "MUTAG", "MUTAG").slice(0, N_GRAPHS), path)
    return path


def test_tmd_stage_recomputes_every_block_after_an_engine_edit(small_store, tmp_path, monkeypatch):
    """The reported case: after a fix in a kernel file, rerunning the stage recomputed 0 pairs."""
    import tmdlib.distance._fingerprint as fp
    from flows.config.tmd import TmdStageConfig
    from flows.tmd import make_task_runner, tmd_matrix_flow

    flow = tmd_matrix_flow.with_options(task_runner=make_task_runner("threads", 1))
    cache, out = tmp_path / "cache", tmp_path / "out"
    all_pairs = N_GRAPHS * (N_GRAPHS - 1) // 2

    def run() -> dict:
        return flow(str(small_store), str(out / "matrix.npy"), str(out / "meta.json"), str(cache),
                    cfg=TmdStageConfig(block_size=BLOCK))

    first = run()
    assert first["pairs_computed"] == all_pairs
    reference = np.load(out / "matrix.npy")
    copy = _engine_copy(tmp_path)
    monkeypatch.setattr(fp, "SOURCE_DIR", copy)
    assert run()["pairs_computed"] == 0  # the same engine files: every block is reused
    (copy / "_kernels.py").write_text((copy / "_kernels.py").read_text() + "\n# a fix in the kernels\n")
    edited = run()
    assert edited["pairs_computed"] == all_pairs and edited["blocks_computed"] == edited["blocks"]
    assert edited["engine_fingerprint"] == fp.engine_fingerprint(copy) != first["engine_fingerprint"]
    np.testing.assert_array_equal(np.load(out / "matrix.npy"), reference)
