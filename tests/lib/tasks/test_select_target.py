"""``select.target`` and ``select.goal: positive`` where the select stage meets a real pool (tasks.select.learn_options,
issue 68): on a multi-target pool (MoleculeACE CHEMBL2835_Ki's measured values beside RDKit's Crippen logP) the later
round's scores hunt the named target or the stated desirability, an unknown name is one clear error naming the
targets; on ogbg-molbace (binary) the scores are the positive-class probability, the picks follow it and the audit
sample is never picked."""
from __future__ import annotations

import csv

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.stats import spearmanr

from helpers import RAW

from flows.config.select import SelectStageConfig
from tasks.select import learn_options
from tmdlib.datasets import TaskSpec
from tmdlib import InputError

needs_raw = pytest.mark.skipif(not (RAW / "MoleculeACE").is_dir() or not (RAW / "ogbg_molbace").is_dir(),
                               reason="data/raw not present")
N = 150


def _store(tmp_path, smiles) -> str:
    path = tmp_path / "pool.parquet"
    pq.write_table(pa.table({"smiles": pa.array(list(smiles), pa.string())}), path)
    return str(path)


@pytest.fixture(scope="module")
def two_targets():
    from tmdlib.experiment.families import property_values

    rows = list(csv.DictReader(open(RAW / "MoleculeACE" / "CHEMBL2835_Ki.csv", newline="")))[:N]
    smiles = [r["smiles"] for r in rows]
    return smiles, np.array([float(r["y"]) for r in rows]), property_values(smiles, "logp")


def _ledger(ids, lab, pki, logp):
    gone = np.zeros(lab.size, dtype=bool)
    gone[::5] = True  # some labelled members not measured for logP
    return pa.table({"graph_id": pa.array(ids[lab], pa.int64()), "pKi": pa.array(pki[lab]),
                     "logp": pa.array(logp[lab], mask=gone)})


@needs_raw
def test_a_multi_target_pool_hunts_the_named_target_or_the_desirability(tmp_path, two_targets):
    from tmdlib.select.hits import desirability, target_stats

    smiles, pki, logp = two_targets
    store, train, ids = _store(tmp_path, smiles), np.arange(N), np.arange(N) + 1000
    lab = np.arange(0, N, 3)
    rest = np.setdiff1d(train, lab)
    ledger = _ledger(ids, lab, pki, logp)
    task = TaskSpec("regression", targets=("pKi", "logp"))

    def scores(target, goal="maximize", t=task):
        o = learn_options(SelectStageConfig(goal=goal, target=target), "tmd-rounds", store, train, ids, ledger, True, t)
        assert o["goal"] == goal and o["target"] == target and o["scores"].shape == (N,)
        return o["scores"][rest]

    rho = {name: spearmanr(scores(name), truth[rest])[0] for name, truth in (("logp", logp), ("pKi", pki))}
    assert rho["logp"] > 0.7 and rho["pKi"] > 0.5
    assert spearmanr(scores("logp"), logp[rest])[0] > spearmanr(scores("logp"), pki[rest])[0] + 0.3
    assert spearmanr(scores("logp", "minimize"), -logp[rest])[0] > 0.6
    assert np.allclose(scores("logp", t=None), scores("logp"))  # a pool stored without labels: the ledger's columns
    want = {"pKi": 1.0, "logp": -1.0}  # potent and not greasy
    Y = np.column_stack([pki, logp])
    measured = Y[lab].copy()
    measured[::5, 1] = np.nan  # as the ledger
    d = desirability(Y, [1.0, -1.0], *target_stats(measured))  # the stated desirability's truth
    top = rest[np.argsort(-scores(want))[:15]]
    assert d[top].mean() > d[rest].mean() + 0.5 * d[rest].std()

    with pytest.raises(InputError, match="'pIC50' is not a target of this pool; its targets are pKi, logp"):
        learn_options(SelectStageConfig(goal="maximize", target="pIC50"), "tmd-rounds", store, train, ids, ledger, True,
                      task)


@needs_raw
def test_positive_on_ogbg_molbace_follows_the_positive_class_and_never_picks_the_audit(tmp_path):
    import tmdlib
    from tmdlib.chem import ecfp4_counts
    from tmdlib.datasets import load_builtin, to_dataset
    from tmdlib.select.audit import audit_members
    from tmdlib.select.hits import surrogate
    from tmdlib.select.rounds import picking_distance

    table = load_builtin("ogbg-molbace", RAW)
    sub = np.sort(np.random.default_rng(0).choice(table.num_rows, 240, replace=False))
    t = table.take(sub)
    smiles, y = t.column("smiles").to_pylist(), np.asarray(t.column("y").to_pylist(), dtype=np.float64).reshape(-1)
    ids = np.asarray(t.column("graph_id").to_pylist(), dtype=np.int64)
    store = _store(tmp_path, smiles)
    audit = audit_members(ids, 20, 0)  # as the flow: the audit sample is outside the training pool
    train = np.setdiff1d(np.arange(sub.size), audit)
    lab = train[::4]
    ledger = pa.table({"graph_id": pa.array(ids[lab], pa.int64()), "label": pa.array(y[lab])})
    o = learn_options(SelectStageConfig(goal="positive"), "tmd-rounds", store, train, ids[train], ledger, True,
                      TaskSpec("binary"))
    assert o["goal"] == "positive" and o["acquisition"] == "greedy" and "target" not in o
    X = ecfp4_counts([smiles[i] for i in train])  # the surrogate's features, as round_options
    labelled = np.isin(train, lab)
    mu, _ = surrogate(X[labelled], y[lab], X, classes=True, seed=0)
    assert np.allclose(o["scores"], mu)  # greedy on the forest's positive-class probability

    pool = to_dataset(t).take(train)
    k = labelled.sum() + 30
    pool_smiles = [smiles[i] for i in train]
    # the fingerprint distance stands in for the TMD matrix (the certificate is not what this test checks)
    sel = tmdlib.select_graphs(pool, "tmd-rounds", k=int(k), seed=0, matrix=picking_distance(pool_smiles),
                               smiles=pool_smiles, labelled=labelled, **o)
    new = np.setdiff1d(sel.positions, np.flatnonzero(labelled))
    free = np.flatnonzero(~labelled)
    assert sel.info["goal"] == "positive" and sel.info["strategy"] == "hits"
    assert set(np.flatnonzero(labelled)) <= set(sel.positions) and new.size == 30
    assert set(new) == set(free[np.argsort(-mu[free], kind="stable")[:30]])
    assert not np.isin(pool.graph_ids[sel.positions], ids[audit]).any()
    assert y[train][new].mean() > y[train][free].mean()  # the positives come first


@pytest.mark.parametrize("target, want", [("none", None), ("pKi", "pKi"), ({"pKi": 1, "logS": -0.5},
                                                                            {"pKi": 1.0, "logS": -0.5})])
def test_params_yaml_select_target_reaches_the_select_command(tmp_path, target, want):
    """params.yaml's select.target through the repo's dvc.yaml (DVC's own interpolation: a mapping becomes
    ``--NAME WEIGHT`` pairs) to the select command's parsed --target, read back by parse_target."""
    import shlex
    import shutil

    import typer
    import yaml
    from dvc.parsing import DataResolver
    from dvc.repo import Repo

    from flows.cli import app
    from helpers import ROOT
    from tmdlib.select.hits import parse_target

    shutil.copy(ROOT / "dvc.yaml", tmp_path / "dvc.yaml")
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["base"]["datasets"] = {"POOL": "POOL.csv"}
    params["select"].update(goal="maximize", target=target)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    stages = DataResolver(Repo(str(tmp_path), uninitialized=True), str(tmp_path),
                          yaml.safe_load((tmp_path / "dvc.yaml").read_text())).resolve()["stages"]
    argv = shlex.split(stages["select@POOL"]["cmd"])
    ctx = typer.main.get_command(app).commands["select"].make_context("select", argv[argv.index("select") + 1:])
    assert ctx.params["goal"] == "maximize" and parse_target(ctx.params["target"]) == want
