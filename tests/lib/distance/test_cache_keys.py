"""Cache keys that cannot go stale: the engine's code in every TMD block key and experiment matrix name,
shape headers in every graph hash."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np


def _engine_copy(tmp_path: Path) -> Path:
    """A copy of the engine's source files (``tmdlib/distance/*.py``)."""
    from tmdlib.distance._fingerprint import SOURCE_DIR

    copy = tmp_path / "engine"
    copy.mkdir()
    for f in SOURCE_DIR.glob("*.py"):
        shutil.copy2(f, copy / f.name)
    return copy


def test_fingerprint_follows_the_engine_source_not_its_location(tmp_path):
    from tmdlib.distance import engine_fingerprint

    copy = _engine_copy(tmp_path)
    base = engine_fingerprint()
    assert len(base) == 64 and engine_fingerprint() == base
    assert engine_fingerprint(copy) == base  # same files elsewhere: same engine
    kernels = copy / "_kernels.py"
    kernels.write_text(kernels.read_text() + "\n# a fix in the kernels\n")
    edited = engine_fingerprint(copy)
    assert edited != base
    (copy / "extra.py").write_text("X = 1\n")  # a new engine module counts too
    assert engine_fingerprint(copy) not in (base, edited)


def test_fingerprint_follows_numpy_and_numba_versions(monkeypatch):
    import numba

    from tmdlib.distance import engine_fingerprint

    base = engine_fingerprint()
    monkeypatch.setattr(np, "__version__", np.__version__ + ".post1")
    after_numpy = engine_fingerprint()
    monkeypatch.setattr(numba, "__version__", numba.__version__ + ".post1")
    assert len({base, after_numpy, engine_fingerprint()}) == 3


def test_block_key_holds_the_engine_fingerprint(tmp_path, monkeypatch):
    import tmdlib.distance._fingerprint as fp
    from tmdlib.distance.blocks import block_key

    hashes = [f"{k:064x}" for k in range(4)]
    key = block_key(hashes, (0, 2, 2, 4), 4, [1 / 3, 1, 3])
    copy = _engine_copy(tmp_path)
    monkeypatch.setattr(fp, "SOURCE_DIR", copy)
    assert block_key(hashes, (0, 2, 2, 4), 4, [1 / 3, 1, 3]) == key
    (copy / "assign.py").write_text((copy / "assign.py").read_text() + "\n# edited\n")
    assert block_key(hashes, (0, 2, 2, 4), 4, [1 / 3, 1, 3]) != key


def _collision_pair():
    """Two graphs whose arrays concatenate to the same bytes: ``2 x 3`` features and no edges, against
    ``2 x 1`` features and the edge 0-1 (both directions)."""
    from tmdlib import Graph

    b = Graph(np.array([[1.0], [2.0]]), np.array([[0, 1], [1, 0]]))
    raw = np.concatenate([b.x.ravel().view(np.uint8), b.edge_index[0].view(np.uint8),
                          b.edge_index[1].view(np.uint8)])
    a = Graph(raw.view(np.float64).reshape(2, 3), np.zeros((2, 0), np.int64))
    return a, b


def test_graph_hash_has_a_shape_header():
    from tmdlib.datasets import graph_hashes
    from tmdlib import GraphDataset

    a, b = _collision_pair()
    ha = graph_hashes(GraphDataset.from_graphs([a]))
    hb = graph_hashes(GraphDataset.from_graphs([b]))
    assert ha != hb
    assert graph_hashes(GraphDataset.from_graphs([b])) == hb  # deterministic


def test_experiment_cache_names_follow_data_shapes_and_code(tmp_path, monkeypatch):
    import tmdlib.distance._fingerprint as fp
    from tasks.experiment import matrix_paths
    from tmdlib.experiment.matrices import dataset_key
    from tmdlib import GraphDataset

    a, b = _collision_pair()
    da, db = GraphDataset.from_graphs([a]), GraphDataset.from_graphs([b])
    assert dataset_key(da) != dataset_key(db)
    key = dataset_key(db)
    before = matrix_paths(str(tmp_path), "X", key)
    copy = _engine_copy(tmp_path)
    monkeypatch.setattr(fp, "SOURCE_DIR", copy)
    assert matrix_paths(str(tmp_path), "X", key) == before
    (copy / "_kernels.py").write_text((copy / "_kernels.py").read_text() + "\n# edited\n")
    after = matrix_paths(str(tmp_path), "X", key)
    assert after["tmd"] != before["tmd"]
    assert (after["feature"], after["wl"]) == (before["feature"], before["wl"])  # not the engine's values
