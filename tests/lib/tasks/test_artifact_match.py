"""Artifacts that do not belong together are refused (issue 19, item 4).

The TMD matrix's ``meta.json`` and ``selection.json`` record the graph store's content hash
(``store_content_sha256``, :func:`tasks.graphs.store_content_hash`); the matrix's meta also its depth and
weights.  ``select`` refuses a matrix made for another store, depth or weights; label requests, train
and evaluate refuse a selection made for another store; evaluate also a matrix meta of another store.
Each refusal is one :class:`tmdlib.InputError` naming the file and the mismatch.  Files written before
the field existed are accepted unchecked (existing ``dvc.lock`` outputs keep working).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from helpers import RAW, run_cli
from tmdlib import InputError
from flows.config.tmd import TmdStageConfig

N = 24


@pytest.fixture(scope="module")
def two_stores(tmp_path_factory) -> dict:
    """Store A (MUTAG 0..23), store B (MUTAG 24..47 under A's graph ids: same ids, same size, other graphs),
    A's TMD matrix + meta.json (depth 4, pascal) and A's selection."""
    from flows.select import select_flow
    from flows.config.select import SelectStageConfig
    from flows.tmd import tmd_matrix_flow
    from tmdlib.datasets import read_tu

    d = tmp_path_factory.mktemp("match")
    full = read_tu(RAW / "MUTAG", "MUTAG")
    a = full.slice(0, N)
    b = full.slice(N, N)
    b = b.set_column(b.schema.get_field_index("graph_id"), "graph_id", a.column("graph_id"))
    pq.write_table(a, d / "A.parquet")
    pq.write_table(b, d / "B.parquet")
    tmd = d / "tmd"
    meta = tmd_matrix_flow(str(d / "A.parquet"), str(tmd / "matrix.npy"), str(tmd / "meta.json"), str(d / "cache"),
                           cfg=TmdStageConfig(block_size=8))
    select_flow(str(d / "A.parquet"), str(d / "selection.json"), matrix=str(tmd / "matrix.npy"),
                cfg=SelectStageConfig(fraction=0.25, restarts=1))
    return {"dir": d, "A": str(d / "A.parquet"), "B": str(d / "B.parquet"), "matrix": str(tmd / "matrix.npy"),
            "meta": tmd / "meta.json", "selection": str(d / "selection.json"), "result": meta}


def _hash(path: str) -> str:
    from tmdlib.datasets import store_content_hash
    from tasks.graphs import load_graph_store

    return store_content_hash(load_graph_store(path))


def test_meta_and_selection_record_the_store_hash(two_stores):
    want = _hash(two_stores["A"])
    meta = json.loads(two_stores["meta"].read_text())
    assert meta["store_content_sha256"] == want and meta["depth"] == 4 and len(meta["weights"]) == 3
    sel = json.loads(Path(two_stores["selection"]).read_text())
    assert sel["store_content_sha256"] == want
    assert _hash(two_stores["B"]) != want


def test_meta_json_is_deterministic_on_a_resumed_run(two_stores, tmp_path):
    """A second run over the same cache (every block reused) writes the same meta.json bytes."""
    from flows.tmd import tmd_matrix_flow

    d = two_stores["dir"]
    res = tmd_matrix_flow(two_stores["A"], str(tmp_path / "matrix.npy"), str(tmp_path / "meta.json"),
                          str(d / "cache"), cfg=TmdStageConfig(block_size=8))
    assert res["blocks_computed"] == 0
    assert (tmp_path / "meta.json").read_bytes() == two_stores["meta"].read_bytes()


def test_scalable_meta_records_the_store_hash(two_stores, tmp_path):
    from flows.tmd import tmd_matrix_flow

    tmd_matrix_flow(two_stores["A"], str(tmp_path / "matrix.npy"), str(tmp_path / "meta.json"),
                    str(tmp_path / "cache"), cfg=TmdStageConfig(engine="scalable"))
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["matrix"] is False and meta["store_content_sha256"] == _hash(two_stores["A"])


def _matrix_copy(two_stores, tmp_path, edit=None) -> str:
    """A's matrix and meta.json copied to tmp_path (meta edited by ``edit``)."""
    out = tmp_path / "tmd"
    out.mkdir()
    shutil.copy(two_stores["matrix"], out / "matrix.npy")
    meta = json.loads(two_stores["meta"].read_text())
    if edit:
        edit(meta)
    (out / "meta.json").write_text(json.dumps(meta))
    return str(out / "matrix.npy")


def test_select_refuses_a_matrix_of_another_store(two_stores, tmp_path):
    from flows.select import select_flow
    from flows.config.select import SelectStageConfig

    with pytest.raises(InputError) as info:
        select_flow(two_stores["B"], str(tmp_path / "sel.json"), matrix=two_stores["matrix"],
                    cfg=SelectStageConfig(fraction=0.25, restarts=1))
    msg = str(info.value)
    assert info.value.path == two_stores["matrix"], msg
    assert "graph store content sha256" in msg and "B.parquet" in msg and "tmdsub tmd-matrix" in msg, msg
    assert not (tmp_path / "sel.json").exists()


@pytest.mark.parametrize("kwargs, problem", [({"depth": 3}, "depth 4 != --depth 3"),
                                             ({"weights": "1.0"}, "weights [")])
def test_select_refuses_a_matrix_of_another_depth_or_weights(two_stores, tmp_path, kwargs, problem):
    from flows.select import select_flow
    from flows.config.select import SelectStageConfig

    with pytest.raises(InputError, match="TMD matrix does not match") as info:
        select_flow(two_stores["A"], str(tmp_path / "sel.json"), matrix=two_stores["matrix"],
                    cfg=SelectStageConfig(fraction=0.25, restarts=1, **kwargs))
    assert problem in str(info.value)


def test_select_accepts_an_old_meta_without_the_hash_and_a_bare_matrix_only_when_trusted(two_stores, tmp_path):
    """meta.json written before the field (existing dvc.lock outputs): no store check; no meta.json at all: refused,
    unless the user vouches for the matrix (--trust-matrix)."""
    from flows.select import select_flow
    from flows.config.select import SelectStageConfig

    old = _matrix_copy(two_stores, tmp_path, lambda m: m.pop("store_content_sha256"))
    sel = select_flow(two_stores["B"], str(tmp_path / "sel.json"), matrix=old,
                      cfg=SelectStageConfig(fraction=0.25, restarts=1))
    assert sel["k"] == json.loads(Path(two_stores["selection"]).read_text())["k"]
    Path(old).with_name("meta.json").unlink()
    with pytest.raises(InputError, match="no meta.json beside this TMD matrix.*--trust-matrix") as err:
        select_flow(two_stores["B"], str(tmp_path / "sel2.json"), matrix=old,
                    cfg=SelectStageConfig(fraction=0.25, restarts=1))
    assert err.value.path == old and not (tmp_path / "sel2.json").exists()
    select_flow(two_stores["B"], str(tmp_path / "sel2.json"), matrix=old,
                cfg=SelectStageConfig(fraction=0.25, restarts=1, trust_matrix=True))


def test_select_refuses_a_matrix_that_is_not_the_one_its_meta_describes(two_stores, tmp_path):
    """MUTAG's matrix with rows and columns reversed, beside a copy of the real meta.json: the digest differs."""
    import numpy as np

    from flows.select import select_flow

    from flows.config.select import SelectStageConfig

    path = _matrix_copy(two_stores, tmp_path, lambda m: None)
    D = np.load(path)
    np.save(path, np.ascontiguousarray(D[::-1, ::-1]))
    with pytest.raises(InputError, match="matrix sha256 .* is not the .* its meta.json records") as err:
        select_flow(two_stores["A"], str(tmp_path / "sel.json"), matrix=path,
                    cfg=SelectStageConfig(fraction=0.25, restarts=1))
    assert err.value.path == path and not (tmp_path / "sel.json").exists()


def _refused_selection(err: pytest.ExceptionInfo, selection: str) -> None:
    msg = str(err.value)
    assert err.value.path == selection, msg
    assert "selection was made for another graph store" in msg and "B.parquet" in msg, msg


def test_label_requests_refuse_a_selection_of_another_store(two_stores, tmp_path):
    from flows.labels import label_requests_flow

    with pytest.raises(InputError) as info:
        label_requests_flow(two_stores["B"], two_stores["selection"], str(tmp_path / "labels"))
    _refused_selection(info, two_stores["selection"])
    assert not (tmp_path / "labels").exists()
    # an old selection (no hash) is accepted
    sel = json.loads(Path(two_stores["selection"]).read_text())
    sel.pop("store_content_sha256")
    old = tmp_path / "old.json"
    old.write_text(json.dumps(sel))
    assert label_requests_flow(two_stores["B"], str(old), str(tmp_path / "labels"))["requested"] == sel["k"]


def test_train_refuses_a_selection_of_another_store(two_stores, tmp_path):
    pytest.importorskip("torch")
    from flows.train import train_flow
    from flows.config.train import TrainStageConfig

    with pytest.raises(InputError) as info:
        train_flow(two_stores["B"], two_stores["selection"], str(tmp_path / "labels.csv"), str(tmp_path / "m.pt"),
                   str(tmp_path / "train.json"), cfg=TrainStageConfig(epochs=1, log_mlflow=False))
    _refused_selection(info, two_stores["selection"])
    assert not (tmp_path / "m.pt").exists()


def test_evaluate_refuses_a_selection_or_matrix_meta_of_another_store(two_stores, tmp_path):
    pytest.importorskip("torch")
    from flows.evaluate import evaluate_flow
    from flows.config.evaluate import EvaluateStageConfig

    info_path = tmp_path / "train.json"
    info_path.write_text(json.dumps({"config": {"seed": 0, "layers": 3}, "model": {}}))
    args = (str(tmp_path / "m.pt"), str(info_path), str(tmp_path / "metrics.json"), str(tmp_path / "plot.png"))
    with pytest.raises(InputError) as info:
        evaluate_flow(two_stores["B"], two_stores["selection"], *args, cfg=EvaluateStageConfig(log_mlflow=False))
    _refused_selection(info, two_stores["selection"])
    # the selection made for B (old, unchecked) but A's matrix meta: refused naming meta.json
    sel = json.loads(Path(two_stores["selection"]).read_text())
    sel.pop("store_content_sha256")
    old = tmp_path / "old.json"
    old.write_text(json.dumps(sel))
    with pytest.raises(InputError) as info:
        evaluate_flow(two_stores["B"], str(old), *args, tmd_meta=str(two_stores["meta"]),
                      cfg=EvaluateStageConfig(log_mlflow=False))
    assert info.value.path == str(two_stores["meta"])
    assert "TMD matrix was made for another graph store" in str(info.value)


def test_cli_select_mismatch_is_one_error_line(two_stores, tmp_path):
    res = run_cli("select", "B", "--graphs", two_stores["B"], "--matrix", two_stores["matrix"], "--fraction", "0.25",
                  "--restarts", "1", "--out", str(tmp_path / "sel.json"), cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert two_stores["matrix"] in lines[0] and "graph store content sha256" in lines[0], lines[0]
