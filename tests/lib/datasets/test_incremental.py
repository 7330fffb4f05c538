"""New graphs arrive: label reuse, recorded TMD chunks, a split stable under append, ledger conflicts.  Appended ingest,
incremental TMD and coreset update through the flows: pipeline/test_incremental_flows.py."""
from __future__ import annotations

import numpy as np
import pytest


def test_reuse_labelled_constraints():
    from tmdlib.select import kmedoids_coreset, reuse_labelled

    rng = np.random.default_rng(0)
    pts = rng.normal(size=(40, 2))
    D = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
    assert reuse_labelled(np.zeros(40, bool), 40, 5) == (None, None)
    cand, fixed = reuse_labelled([1, 2], 40, 5)
    assert cand is None and np.flatnonzero(fixed).tolist() == [1, 2]
    res = kmedoids_coreset(D, 5, candidates=cand, fixed=fixed)
    assert {1, 2} <= set(res.medoids.tolist())
    cand, fixed = reuse_labelled(list(range(10)), 40, 5)
    assert fixed is None and cand.sum() == 10
    res = kmedoids_coreset(D, 5, candidates=cand, fixed=fixed)
    assert set(res.medoids.tolist()) <= set(range(10))


def test_plan_chunks_reuses_recorded_chunks():
    from tmdlib.distance.blocks import blocks_of_chunks, plan_chunks

    hashes = [f"h{i}" for i in range(10)]
    assert blocks_of_chunks(plan_chunks(hashes, 4, {})) == [(0, 4, 0, 4), (0, 4, 4, 8), (0, 4, 8, 10), (4, 8, 4, 8),
                                                            (4, 8, 8, 10), (8, 10, 8, 10)]
    index = {"h0": [hashes[0:4]], "h4": [hashes[4:10]]}
    grown_hashes = hashes + ["n1", "n2"]
    assert plan_chunks(grown_hashes, 6, index) == [(0, 4), (4, 10), (10, 12)]
    # a removed graph breaks only its own chunk
    assert plan_chunks(hashes[:2] + hashes[3:], 6, index) == [(0, 3), (3, 9)]
    # recorded chunks longer than the block size are not reused: a smaller block size is honoured
    assert plan_chunks(hashes, 3, index) == [(0, 3), (3, 6), (6, 9), (9, 10)]


def test_split_is_stable_under_append():
    from tmdlib.select import batched_train_test_split, train_test_split

    tr, te = batched_train_test_split([100], 0.2, 3)
    tr0, te0 = train_test_split(100, 0.2, 3)
    np.testing.assert_array_equal(tr, tr0)
    tr2, te2 = batched_train_test_split([100, 30], 0.2, 3)
    np.testing.assert_array_equal(tr2[tr2 < 100], tr0)
    assert len(te2) == 20 + 6 and len(tr2) + len(te2) == 130


def test_ledger_conflict_is_one_clear_error(tmp_path):
    from tasks.ledger import read_ledger
    from tmdlib import InputError

    ledger = tmp_path / "M.csv"
    ledger.write_text("graph_id,label,source\n3,1.0,import:abc\n5,0.0,import:abc\n")
    table = read_ledger(str(ledger), np.arange(10))
    assert table.column("graph_id").to_pylist() == [3, 5]
    ledger.write_text("graph_id,label,source\n3,1.0,x\n42,0.0,x\n")
    with pytest.raises(InputError, match="M.csv:3: graph_id '42' is no graph of the pool"):
        read_ledger(str(ledger), np.arange(10))
