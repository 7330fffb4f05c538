"""README, "Using your own data": a SMILES CSV, a graph-store Parquet or a TU folder dropped into data/raw/ and listed
as ``NAME: NAME`` under ``base.datasets`` goes through a real ``dvc repro`` (temporary git workspace, Prefect in
ephemeral mode); so does a MoleculeACE built-in, a CSV whose columns are set in ``ingest.sources``, and the
ingest command's task options."""
from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from helpers import RAW, git_workspace, pipeline_env, run_cli

from tmdlib.datasets import read_graph_parquet, read_tu, table_labels, table_task, write_graph_parquet

DVC = str(Path(sys.executable).parent / "dvc")
pytestmark = pytest.mark.skipif(not (RAW / "MoleculeACE").is_dir() or not (RAW / "ogbg_molbbbp").is_dir(),
                                reason="data/raw not present")


def _bbbp_rows(n: int = 40) -> list[tuple[str, str]]:
    """``n`` molecules of ogbg-molbbbp, half of each class: ``(smiles, label)``."""
    rows = [line.split(",") for line in gzip.open(RAW / "ogbg_molbbbp/mapping/mol.csv.gz", "rt").read().splitlines()[1:]]
    pos = [(r[1], r[0]) for r in rows if r[0] == "1"][: n // 2]
    neg = [(r[1], r[0]) for r in rows if r[0] == "0"][: n - n // 2]
    return [m for pair in zip(pos, neg) for m in pair]


def _sh(args, cwd, env):
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _ran(stdout: str) -> set[str]:
    return {line.split("'")[1] for line in stdout.splitlines() if line.startswith("Running stage '")}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """The project in a git repo, with the README's three forms of own data, a CSV with its own column names and a
    MoleculeACE set under ``base.datasets``."""
    env = pipeline_env("")
    env.pop("PREFECT_API_URL")  # ephemeral Prefect in each stage process, as a fresh clone has it
    ws = git_workspace(tmp_path_factory.mktemp("own"), env)
    raw = ws / "data" / "raw"
    (raw / "MYDATA.csv").write_text("smiles,label\n" + "".join(f"{s},{y}\n" for s, y in _bbbp_rows()))
    mutag = read_tu(RAW / "MUTAG", "MUTAG")
    write_graph_parquet(mutag.slice(0, 30), raw / "MYPQ.parquet")
    from tu_writer import write_tu_folder

    write_tu_folder(mutag.slice(30, 25), raw / "MYTU", "MYTU")
    (raw / "KI.csv").write_text("SMILES,pKi,set\n" + "".join(f"{s},{5 + i / 7:.3f},{'test' if i % 5 else 'Train'}\n"
                                                            for i, (s, _) in enumerate(_bbbp_rows(12))))
    shutil.copytree(RAW / "MoleculeACE", raw / "MoleculeACE")
    params = yaml.safe_load((ws / "params.yaml").read_text())
    assert params["base"]["task"] == "auto"
    params["base"]["datasets"] = {"MYDATA": "MYDATA", "MYPQ": "MYPQ", "MYTU": "MYTU", "KI": "KI",
                                  "ACE-CHEMBL2835_Ki": "MoleculeACE"}
    params["ingest"]["sources"] = {"KI": {"label_columns": ["pKi"], "split_column": "set"}}
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return ws, env


def test_readme_recipe_csv_through_ingest_tmd_and_select(workspace):
    ws, env = workspace
    res = _sh([DVC, "repro", "select@MYDATA"], ws, env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _ran(res.stdout) == {"ingest@MYDATA", "tmd@MYDATA", "select@MYDATA"}
    store = read_graph_parquet(ws / "data/graphs/MYDATA.parquet")
    assert store.num_rows == 40 and table_task(store).type == "binary" and table_task(store).targets == ("label",)
    assert sorted(store.column("y").to_pylist()) == [0.0] * 20 + [1.0] * 20
    sel = json.loads((ws / "data/selection/MYDATA/selection.json").read_text())
    assert sel["k"] >= 1 and len(sel["medoids"]) == sel["k"]
    res = _sh([DVC, "repro", "select@MYDATA"], ws, env)  # nothing changed: nothing runs
    assert res.returncode == 0 and not _ran(res.stdout), res.stdout


def test_readme_recipe_parquet_and_tu_folder(workspace):
    ws, env = workspace
    targets = ["ingest@MYPQ", "ingest@MYTU"]
    res = _sh([DVC, "repro", *targets], ws, env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _ran(res.stdout) == set(targets)
    pq, tu = read_graph_parquet(ws / "data/graphs/MYPQ.parquet"), read_graph_parquet(ws / "data/graphs/MYTU.parquet")
    assert (pq.num_rows, tu.num_rows) == (30, 25) and table_task(pq).type == table_task(tu).type == "binary"


def test_columns_set_in_params_and_a_moleculeace_builtin(workspace):
    ws, env = workspace
    targets = ["ingest@KI", "ingest@ACE-CHEMBL2835_Ki"]
    res = _sh([DVC, "repro", *targets], ws, env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _ran(res.stdout) == set(targets)
    ki = read_graph_parquet(ws / "data/graphs/KI.parquet")
    assert table_task(ki).type == "regression" and table_task(ki).targets == ("pKi",)
    assert ki.column("split").to_pylist()[:5] == ["train", "test", "test", "test", "test"]
    ace = read_graph_parquet(ws / "data/graphs/ACE-CHEMBL2835_Ki.parquet")
    spec = table_task(ace)
    assert ace.num_rows == 615 and (spec.type, spec.source) == ("regression", "builtin")
    assert {"split", "cliff_mol"} <= set(ace.column_names) and not np.isnan(table_labels(ace)).any()


def test_cli_prints_the_task_and_refuses_labels_that_do_not_fit(tmp_path):
    """The issue's ChEMBL Ki table: floats under y and a split column are found without options; --task binary
    is one error naming the lines, and nothing is written."""
    rows = _bbbp_rows(6)
    (tmp_path / "ki.csv").write_text("smiles,y,split\n" + "".join(f"{s},{-3.5 + i / 4},train\n"
                                                                 for i, (s, _) in enumerate(rows)))
    out = tmp_path / "KI.parquet"
    res = run_cli("ingest", "--smiles-csv", str(tmp_path / "ki.csv"), "--name", "KI", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().endswith(f"-> {out}; task: regression (1 target: y)")
    assert read_graph_parquet(out).column("split").to_pylist() == ["train"] * 6
    out.unlink()
    res = run_cli("ingest", "--smiles-csv", str(tmp_path / "ki.csv"), "--name", "KI", "--out", str(out),
                  "--task", "binary")
    assert res.returncode == 2 and "ki.csv" in res.stderr and "line 2: label -3.5 is not a binary label" in res.stderr
    assert not out.exists()
