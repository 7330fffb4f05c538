"""A store's hash, labels, ids and feature width without loading its graphs: the same values as the loaded dataset's."""
import numpy as np
import pytest

from tmdlib.datasets import store_content_hash
from tasks.graphs import open_store, streamed_content_hash
from tasks.tracking import graph_store_dataset
from tmdlib.datasets import write_smiles_parquet


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    d = tmp_path_factory.mktemp("pool")
    smiles = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "CCN(CC)CC", "O=C(O)c1ccccc1OC(C)=O", "CCCCN", "CC(C)O"]
    (d / "pool.csv").write_text("smiles,pKi\n" + "".join(f"{s},{i / 2}\n" for i, s in enumerate(smiles)))
    write_smiles_parquet(d / "pool.csv", d / "pool.parquet", label_column="pKi", chunk_size=3)  # 3 row groups
    return str(d / "pool.parquet")


def test_lean_reads_equal_the_loaded_dataset(pool):
    lean, full = open_store(pool), open_store(pool)
    ds = full.dataset
    assert lean._dataset is None
    assert lean.content_hash() == streamed_content_hash(pool) == store_content_hash(ds)
    np.testing.assert_array_equal(lean.y, ds.y)
    np.testing.assert_array_equal(lean.graph_ids, ds.graph_ids)
    assert lean.num_features == ds.num_features
    assert lean._dataset is None  # none of it loaded the graphs


def test_mlflow_dataset_profile_without_loading(pool):
    store = open_store(pool)
    d = graph_store_dataset(pool, store, "POOL")
    assert store._dataset is None
    ds = open_store(pool).dataset
    assert d.digest == store_content_hash(ds)[:len(d.digest)]
    assert str(int(ds.nodes_per_graph.sum())) in str(d.profile) and str(len(ds)) in str(d.profile)


def test_content_hash_remembered_per_store_file(pool, tmp_path, monkeypatch):
    import shutil

    import tasks.graphs as G

    monkeypatch.setenv("TMDSUB_HASH_CACHE", str(tmp_path / "hashes"))
    first = streamed_content_hash(pool)
    assert len(list((tmp_path / "hashes").iterdir())) == 1
    calls = []
    monkeypatch.setattr("tmdlib.select.scalable.cache.part_hashes", lambda *a, **k: calls.append(1) or [])
    assert streamed_content_hash(pool) == first and not calls  # read back, no pass over the graphs
    copy = tmp_path / "copy.parquet"
    shutil.copy(pool, copy)  # another file (another inode): computed again
    assert G._hash_cache_file(str(copy)) != G._hash_cache_file(pool)
    monkeypatch.setenv("TMDSUB_HASH_CACHE", "off")
    assert G._hash_cache_file(pool) is None
