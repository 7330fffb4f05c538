"""The one-call PyG API equals the CLI, and the shipped example runs (the API's units: lib/torch/test_pyg.py).

The CLI selects among the training graphs of a split; `--test-fraction 0` makes every graph a training graph, so
`tmdsub tmd-matrix` + `tmdsub select --test-fraction 0` select from the same n graphs the PyG call is given.
"""
from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest
import torch
from torch_geometric.datasets import FakeDataset, TUDataset

from helpers import RAW, run_cli
from tmdlib.torch.pyg import select_coreset, subsample_nodes, to_graph_table

torch.set_num_threads(1)


def fake(n: int = 30, seed: int = 0, **kw) -> FakeDataset:
    torch.manual_seed(seed)
    args = {"num_graphs": n, "avg_num_nodes": 10, "avg_degree": 3, "num_channels": 3, "num_classes": 2, **kw}
    return FakeDataset(**args)


@pytest.fixture(scope="module")
def mutag_pyg(tmp_path_factory):
    """MUTAG through PyG's own TUDataset reader, from the shipped raw files (no download)."""
    root = tmp_path_factory.mktemp("pyg")
    shutil.copytree(RAW / "MUTAG", root / "MUTAG" / "raw")
    return TUDataset(str(root), name="MUTAG")


# ----------------------------------------------------------------------------------------------
# the PyG call equals the CLI's selection on the same graphs
# ----------------------------------------------------------------------------------------------
def cli_selection(store, name: str, tmp, fraction: float) -> dict:
    """`tmdsub tmd-matrix` then `tmdsub select --method tmd --test-fraction 0 --audit 0` (the paper's coreset, as the
    one-call API picks: on an unlabelled pool the CLI's default is the pool setting's rounds; every graph in the
    pool: no split and no audit sample) on ``store``."""
    res = run_cli("tmd-matrix", name, "--graphs", str(store), "--out-dir", str(tmp / "tmd"), "--cache-dir",
                  str(tmp / "cache"), "--workers", "1")
    assert res.returncode == 0, res.stderr
    out = tmp / "selection.json"
    res = run_cli("select", name, "--graphs", str(store), "--matrix", str(tmp / "tmd" / "matrix.npy"),
                  "--method", "tmd", "--fraction", str(fraction), "--test-fraction", "0", "--audit", "0",
                  "--labelled", str(tmp / "no-ledger.csv"),
                  "--out", str(out))
    assert res.returncode == 0, res.stderr
    return json.loads(out.read_text())


def assert_same_selection(c, sel: dict, n: int) -> None:
    assert sel["train_ids"] == list(range(n)) and sel["test_ids"] == []
    assert c.indices.tolist() == sel["medoids"]  # graph ids are positions: 0..n-1 in both
    assert c.weights.tolist() == sel["tau"]
    assert c.epsilon == pytest.approx(sel["epsilon"], rel=1e-12)  # selection.json: the certificate's sum
    assert c.epsilon_mean == pytest.approx(sel["epsilon_mean"], rel=1e-12)  # and f_TMD = eps / n


def test_pyg_call_equals_cli_on_fake_dataset(tmp_path):
    from tmdlib.datasets import write_graph_parquet

    ds = fake(40, seed=1)
    store = tmp_path / "FAKE.parquet"
    write_graph_parquet(to_graph_table(ds, "FAKE"), store)
    sel = cli_selection(store, "FAKE", tmp_path, 0.1)
    assert_same_selection(select_coreset(ds, fraction=0.1), sel, len(ds))

    # node subsampling too: `tmdsub nodes` on the same store
    out = tmp_path / "nodes.parquet"
    res = run_cli("nodes", "FAKE", "--graphs", str(store), "--fraction", "0.5", "--out", str(out))
    assert res.returncode == 0, res.stderr
    t = pq.read_table(out)
    ns = subsample_nodes(ds, 0.5)
    assert t.column("graph_id").to_pylist() == list(range(len(ds)))
    assert [sorted(v) for v in t.column("nodes").to_pylist()] == [s.tolist() for s in ns.nodes]
    assert t.column("epsilon").to_pylist() == pytest.approx(ns.epsilon.tolist(), rel=1e-12)


def test_pyg_call_on_tudataset_mutag_equals_cli_on_ingested_mutag(tmp_path, mutag_pyg):
    """Two independent readers of the same raw files: PyG's TUDataset, and `tmdsub ingest MUTAG`."""
    store = tmp_path / "MUTAG.parquet"
    res = run_cli("ingest", "MUTAG", "--out", str(store))
    assert res.returncode == 0, res.stderr
    sel = cli_selection(store, "MUTAG", tmp_path, 0.1)
    c = select_coreset(mutag_pyg, fraction=0.1)
    assert c.k == 19 and float(c.weights.sum()) == 188
    assert_same_selection(c, sel, len(mutag_pyg))


def test_pyg_call_with_the_scalable_engine_equals_cli_select_without_a_matrix(tmp_path):
    """`engine="scalable"` (no matrix) is the CLI's `tmdsub select --engine scalable`, and `auto` picks the exact
    engine on a small dataset: `tmdsub select` with no matrix and no tmd stage just works."""
    from tmdlib.datasets import write_graph_parquet

    ds = fake(30, seed=2)
    store = tmp_path / "FAKE.parquet"
    write_graph_parquet(to_graph_table(ds, "FAKE"), store)
    common = ["--graphs", str(store), "--method", "tmd", "--fraction", "0.2", "--test-fraction", "0", "--audit", "0",
              "--labelled",
              str(tmp_path / "no-ledger.csv"), "--cache-dir", str(tmp_path / "cache"), "--workers", "1"]
    for engine in ("scalable", "auto"):
        out = tmp_path / f"{engine}.json"
        res = run_cli("select", "FAKE", "--engine", engine, *common, "--out", str(out), cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        sel = json.loads(out.read_text())
        c = select_coreset(ds, fraction=0.2, engine=engine)
        assert sel["engine"] == c.certificate.engine == ("scalable" if engine == "scalable" else "exact")
        assert_same_selection(c, sel, len(ds))
    with pytest.raises(ValueError, match="engine must be one of exact, scalable, auto"):
        select_coreset(ds, count=3, engine="fast")


def test_example_runs(tmp_path):
    """examples/pyg_coreset.py (README's PyG section) runs as shipped: classification on PyG's TUDataset of the raw
    MUTAG files, then regression on CHEMBL2835 molecules as PyG Data, with the TMD coreset and with MaxMin."""
    import re
    import subprocess
    import sys

    from helpers import ROOT

    res = subprocess.run([sys.executable, str(ROOT / "examples" / "pyg_coreset.py"), "--epochs", "2",
                          "--molecules", "150"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert "label these 16 of 151 training graphs" in res.stdout and "test accuracy" in res.stdout
    m = re.search(r"regression: (\d+) training and (\d+) test molecules", res.stdout)
    assert m and int(m.group(1)) + int(m.group(2)) == 150, res.stdout
    k = -(-int(m.group(1)) // 10)  # fraction 0.1 of the training molecules, rounded up
    for method in ("tmd", "maxmin"):
        line = re.search(rf"\[{method}\] test RMSE (\S+) on {m.group(2)} held-out molecules, trained on (\d+) labels",
                         res.stdout)
        assert line and int(line.group(2)) == k and float(line.group(1)) > 0, res.stdout
