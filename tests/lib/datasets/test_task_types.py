"""Task types at ingest: inference from the labels, forced types, the store format (one or T targets, class
indices), the split and kept columns, appended batches keeping the dataset's task, and MoleculeACE shipped."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from helpers import RAW

from tmdlib.datasets import (ACE_SETS, DATASETS, META_TASK, TaskSpec, get_dataset_info, graph_table_metadata,
                             load_builtin, metric_for, read_graph_parquet, read_smiles_csv, read_tu,
                             store_task, table_labels, table_task, task_and_labels, validate_graph_table,
                             verify_sha256sums, write_graph_parquet)
from tmdlib.datasets.append import append_graph_table
from tmdlib.datasets._task import MAX_CLASSES, source_labels, with_task
from tmdlib.datasets import to_dataset
from tmdlib import InputError

needs_raw = pytest.mark.skipif(not (RAW / "SHA256SUMS").is_file(), reason="data/raw not present")

SMILES = ["CCO", "CCN", "c1ccccc1", "CC(=O)O", "CCCl", "C1CC1", "CCOC", "CN", "CCS", "OCCO"]


def _csv(tmp_path: Path, header: str, rows: list[str], name: str = "m.csv") -> Path:
    path = tmp_path / name
    path.write_text(header + "\n" + "".join(f"{SMILES[i % len(SMILES)]},{r}\n" for i, r in enumerate(rows)))
    return path


def _spec(table: pa.Table) -> TaskSpec:
    return table_task(table)


# --------------------------------------------------------------------------- inference rules


@pytest.mark.parametrize("values,kind,classes", [
    (["0", "1", "1", "0"], "binary", ()),
    (["0.0", "1.0", "1.0", "0.0"], "binary", ()),                      # 0/1 written as floats: still binary
    (["2", "0", "1", "2", "1"], "multiclass", (0.0, 1.0, 2.0)),      # 3 classes
    (["-1", "7", "3", "3"], "multiclass", (-1.0, 3.0, 7.0)),         # any small set of integers
    ([str(v) for v in range(25)], "regression", ()),                 # 25 distinct integers: not classes
    (["1.5", "-0.25", "3", ""], "regression", ()),                   # floats, a gap allowed
    (["1", "1", "1"], "binary", ()),                                 # one class seen: still 0/1
])
def test_one_label_column_is_inferred(tmp_path, values, kind, classes):
    t = read_smiles_csv(_csv(tmp_path, "smiles,y", values), label_column="y")
    spec = _spec(t)
    assert (spec.type, spec.classes, spec.targets, spec.source) == (kind, classes, ("y",), "inferred")
    assert t.schema.field("y").type == pa.float64()
    validate_graph_table(t)


def test_class_limit_is_max_classes():
    ok = task_and_labels(np.arange(MAX_CLASSES) % MAX_CLASSES)[0]
    over = task_and_labels(np.arange(MAX_CLASSES + 1))[0]
    assert ok.type == "multiclass" and ok.num_classes == MAX_CLASSES and over.type == "regression"


def test_several_columns_multitask_and_regression_with_gaps(tmp_path):
    t = read_smiles_csv(_csv(tmp_path, "smiles,a,b,c", ["1,,0", "0,1,", ",0,1", "1,1,1"]), label_column=["a", "b", "c"])
    spec = _spec(t)
    assert spec.type == "multitask" and spec.targets == ("a", "b", "c") and spec.output_dim == 3
    assert t.schema.field("y").type == pa.list_(pa.float64())
    y = table_labels(t)
    assert y.shape == (4, 3) and np.isnan(y).sum() == 3 and np.nansum(y) == 6
    r = read_smiles_csv(_csv(tmp_path, "smiles,p,q", ["1.5,", ",2", "0.25,7"], "r.csv"), label_column=["p", "q"])
    assert _spec(r).type == "regression" and _spec(r).num_targets == 2


def test_all_missing_columns(tmp_path):
    """A column with no value does not sway the rules; a single one is an unlabelled pool (binary, y null)."""
    t = read_smiles_csv(_csv(tmp_path, "smiles,a,b", ["1,", "0,", "nan,"]), label_column=["a", "b"])
    assert _spec(t).type == "multitask" and np.isnan(table_labels(t)[:, 1]).all()
    u = read_smiles_csv(_csv(tmp_path, "smiles,y", ["", "nan", ""], "u.csv"), label_column="y")
    assert _spec(u).type == "binary" and u.column("y").null_count == 3
    f = read_smiles_csv(_csv(tmp_path, "smiles,y", ["", ""], "f.csv"), label_column="y", task="regression")
    assert _spec(f).type == "regression" and _spec(f).source == "user"
    with pytest.raises(InputError, match="at least 2 classes"):
        read_smiles_csv(_csv(tmp_path, "smiles,y", ["", ""], "g.csv"), label_column="y", task="multiclass")


def test_a_binary_column_with_a_gap_keeps_the_graph_unlabelled(tmp_path):
    """A pool is mostly unlabelled: a missing label is stored as missing whatever the task (label *files* of a
    binary task need every row; tests/pipeline/test_task_types.py)."""
    import math

    path = tmp_path / "gap.csv"
    path.write_text("smiles,y\nCCO,1\n\nCCN,\nCCC,0\n")  # a blank line: the gap is on line 4
    table = read_smiles_csv(path, label_column="y")
    assert _spec(table).type == "binary"
    y = table.column("y").to_pylist()
    assert y[0] == 1.0 and y[1] is None or (isinstance(y[1], float) and math.isnan(y[1])) and y[2] == 0.0
    assert _spec(read_smiles_csv(path, label_column="y", task="multitask")).type == "multitask"


@pytest.mark.parametrize("rows,task,problem", [
    (["0", "1", "2.5", "1"], "binary", ":4: label 2.5 is not a binary label"),
    (["0", "1", "2", "1"], "binary", ":4: label 2 is not a binary label"),
    (["0", "1.5", "2", "1"], "multiclass", None),  # classes from the values: 1.5 is a class, fine
    (["0", "1", "inf", "1"], "regression", "m.csv:4: label 'inf' is infinite"),
])
def test_forced_types_that_do_not_fit_are_one_error_naming_the_line(tmp_path, rows, task, problem):
    path = _csv(tmp_path, "smiles,y", rows)
    if problem is None:
        assert _spec(read_smiles_csv(path, label_column="y", task=task)).type == task
        return
    with pytest.raises(InputError) as err:
        read_smiles_csv(path, label_column="y", task=task)
    assert str(err.value).startswith(str(path)) and problem in str(err.value)


def test_forced_types_against_the_columns(tmp_path):
    path = _csv(tmp_path, "smiles,a,b", ["1,0", "0,1"])
    with pytest.raises(InputError, match="a binary task has one label column; 2 were given"):
        read_smiles_csv(path, label_column=["a", "b"], task="binary")
    with pytest.raises(InputError, match="--task must be auto or one of"):
        read_smiles_csv(path, label_column="a", task="ranking")
    spec = _spec(read_smiles_csv(path, label_column="a", task="regression"))
    assert (spec.type, spec.source) == ("regression", "user")
    spec = _spec(read_smiles_csv(path, label_column="a", task="multiclass"))
    assert spec.type == "multiclass" and spec.classes == (0.0, 1.0)


def test_errors_list_every_offending_line(tmp_path):
    path = _csv(tmp_path, "smiles,y", ["0", "3.5", "1", "-2", "1"])
    with pytest.raises(InputError) as err:
        read_smiles_csv(path, label_column="y", task="binary")
    text = str(err.value)
    assert "2 label problem(s)" in text and "line 3:" in text and "line 5:" in text and "line 2:" not in text


# --------------------------------------------------------------------------- store format


def test_multiclass_is_stored_as_class_indices(tmp_path):
    t = read_smiles_csv(_csv(tmp_path, "smiles,grade", ["5", "2", "9", "2", "5"]), label_column="grade")
    spec = _spec(t)
    assert spec.type == "multiclass" and spec.classes == (2.0, 5.0, 9.0) and spec.output_dim == 3
    assert t.column("y").to_pylist() == [1.0, 0.0, 2.0, 0.0, 1.0]
    assert source_labels(table_labels(t), spec)[:, 0].tolist()[:4] == [5.0, 2.0, 9.0, 2.0]
    assert "index of column 'grade' among the classes 2, 5, 9" in graph_table_metadata(t)["tmdlib.label_rule"]
    assert json.loads(graph_table_metadata(t)[META_TASK])["classes"] == [2.0, 5.0, 9.0]


def test_multi_target_store_round_trip_through_parquet_and_graph_dataset(tmp_path):
    path = _csv(tmp_path, "smiles,logd,sol,split", ["1.5,-2,train", ",0.5,test", "2.25,,valid", "0,1,train"])
    t = read_smiles_csv(path, label_column=["logd", "sol"], split_column="split")
    out = tmp_path / "store.parquet"
    write_graph_parquet(t, out)
    back = read_graph_parquet(out)
    assert back.equals(t) and _spec(back) == _spec(t) and _spec(back).targets == ("logd", "sol")
    want = np.array([[1.5, -2], [np.nan, 0.5], [2.25, np.nan], [0, 1]])
    assert np.array_equal(table_labels(back), want, equal_nan=True)
    ds = to_dataset(back)
    assert ds.y.shape == (4, 2) and np.array_equal(ds.y, want, equal_nan=True)
    assert back.column("split").to_pylist() == ["train", "test", "valid", "train"]


# --------------------------------------------------------------------------- split and kept columns


def test_split_column_is_lower_cased_and_checked(tmp_path):
    t = read_smiles_csv(_csv(tmp_path, "smiles,y,Split", ["1,TRAIN", "0,Test", "1,validation", "0,valid"]),
                        label_column="y", split_column="split")
    assert t.column("split").to_pylist() == ["train", "test", "valid", "valid"]
    assert t.schema.field("split").type == pa.string()
    for bad in ("holdout", ""):
        path = _csv(tmp_path, "smiles,y,split", ["1,train", f"0,{bad}"], "bad.csv")
        with pytest.raises(InputError) as err:
            read_smiles_csv(path, label_column="y", split_column="split")
        assert err.value.line == 3 and f"split {bad!r} is not one of train, test, valid" in str(err.value)


def test_kept_columns_are_nullable_floats(tmp_path):
    t = read_smiles_csv(_csv(tmp_path, "smiles,y,cliff_mol", ["1.5,1", "2,", "0.5,0"]), label_column="y",
                        keep_columns=["cliff_mol"])
    assert t.schema.field("cliff_mol").type == pa.float64() and t.column("cliff_mol").to_pylist() == [1.0, None, 0.0]
    with pytest.raises(InputError) as err:
        read_smiles_csv(_csv(tmp_path, "smiles,y,cliff_mol", ["1,1", "2,yes"], "b.csv"), label_column="y",
                        keep_columns="cliff_mol")
    assert err.value.line == 3 and "column 'cliff_mol': 'yes' is not a number" in str(err.value)
    with pytest.raises(InputError, match="would replace the graph store's own column"):
        read_smiles_csv(_csv(tmp_path, "smiles,y", ["1"], "c.csv"), keep_columns="y")


def test_several_workers_give_the_same_table(tmp_path):
    rows = [f"{i % 3},{'train' if i % 4 else 'test'},{i % 2}" for i in range(60)]
    path = _csv(tmp_path, "smiles,y,split,flag", rows)
    kw = dict(label_column="y", split_column="split", keep_columns=["flag"], chunk_size=7)
    one, two = read_smiles_csv(path, **kw), read_smiles_csv(path, workers=2, **kw)
    assert one.equals(two) and _spec(one).type == "multiclass"


# --------------------------------------------------------------------------- other readers


@pytest.mark.skipif(not (RAW / "MUTAG").is_dir(), reason="data/raw not present")
def test_tu_keeps_its_mapping_and_is_binary_or_multiclass(tmp_path):
    from tu_writer import write_tu_folder

    mutag = read_tu(RAW / "MUTAG", "MUTAG")
    assert _spec(mutag) == TaskSpec("binary") and set(mutag.column("y_raw").to_pylist()) == {-1, 1}
    assert np.array_equal(table_labels(mutag)[:, 0], (mutag.column("y_raw").to_numpy() == 1).astype(float))
    three = mutag.slice(0, 12).set_column(mutag.schema.get_field_index("y_raw"), "y_raw",
                                           pa.array([1, 2, 7] * 4, pa.int64()))
    folder = write_tu_folder(three, tmp_path / "T3", "T3")
    t = read_tu(folder, "T3")
    assert _spec(t).type == "multiclass" and _spec(t).classes == (1.0, 2.0, 7.0)
    assert t.column("y").to_pylist() == [0.0, 1.0, 2.0] * 4
    with pytest.raises(InputError) as err:
        read_tu(folder, "T3", task="binary")
    assert err.value.line == 3 and "graph label 7 is a third class" in str(err.value)
    with pytest.raises(InputError, match="TU graph labels are classes"):
        read_tu(folder, "T3", task="regression")


@needs_raw
def test_builtins_carry_their_task():
    assert {DATASETS[n].task for n in ("MUTAG", "PROTEINS", "COX2", "NCI1", "DD", "ogbg-molbace", "ogbg-molbbbp",
                                       "MOSES")} == {"binary"}
    bace = load_builtin("ogbg-molbace", RAW)
    assert _spec(bace) == TaskSpec("binary") and _spec(bace).source == "builtin"
    pool = read_smiles_csv(RAW / "MOSES" / "train.csv.gz", standin="logp", limit=30)
    assert _spec(pool).type == "binary" and set(pool.column("y").to_pylist()) <= {0.0, 1.0}
    with pytest.raises(InputError, match="stand-in label is binary"):
        read_smiles_csv(RAW / "MOSES" / "train.csv.gz", standin="logp", limit=3, task="regression")
    assert metric_for("MUTAG") == "accuracy" and metric_for("ogbg-molbace") == "rocauc"


def test_a_parquet_store_keeps_or_gets_its_task(tmp_path):
    t = read_smiles_csv(_csv(tmp_path, "smiles,y", ["1.5", "2", "0.5"]), label_column="y")
    assert store_task(t) is t
    meta = {k: v for k, v in t.schema.metadata.items() if k != META_TASK.encode()}
    bare = t.replace_schema_metadata(meta)  # written elsewhere, or before task types
    assert _spec(store_task(bare)).type == "regression"
    with pytest.raises(InputError, match="line 1: label 1.5 is not a binary label"):
        store_task(t, "binary", "s.parquet")
    lying = with_task(t, TaskSpec("binary"))
    with pytest.raises(InputError, match="not a binary label"):
        store_task(lying, None, "s.parquet")


# --------------------------------------------------------------------------- appended batches


def test_a_batch_keeps_the_dataset_task(tmp_path):
    base = read_smiles_csv(_csv(tmp_path, "smiles,y", ["4", "2", "9", "2"]), label_column="y")
    spec = _spec(base)
    batch = read_smiles_csv(_csv(tmp_path, "smiles,y", ["9", "9"], "b1.csv"), label_column="y", task=spec)
    assert _spec(batch) == spec and batch.column("y").to_pylist() == [2.0, 2.0]  # the base's class indices
    both = append_graph_table(base, batch, "b1.csv")
    assert _spec(both) == spec and both.column("y").to_pylist() == [1.0, 0.0, 2.0, 0.0, 2.0, 2.0]
    with pytest.raises(InputError) as err:
        read_smiles_csv(_csv(tmp_path, "smiles,y", ["2", "3"], "b2.csv"), label_column="y", task=spec)
    assert "b2.csv" in str(err.value) and ":3: label 3 is not one of the classes 2, 4, 9" in str(err.value)
    # a batch read on its own (its own task) is taken back to its values and checked against the base's
    alone = read_smiles_csv(_csv(tmp_path, "smiles,y", ["4", "9"], "b3.csv"), label_column="y")
    assert _spec(alone).type == "multiclass"  # two integers other than 0/1: two classes on their own
    assert append_graph_table(base, alone, "b3.csv").column("y").to_pylist()[4:] == [1.0, 2.0]
    wrong = read_smiles_csv(_csv(tmp_path, "smiles,y", ["4", "0.5"], "b4.csv"), label_column="y")
    with pytest.raises(InputError) as err:
        append_graph_table(base, wrong, "b4.csv", tmp_path / "b4.csv")
    assert "b4.csv" in str(err.value) and ":2: label 0.5 is not one of the classes" in str(err.value)
    (tmp_path / "b5.csv").write_text("smiles\nCCO\nCCN\n")
    unlabelled = read_smiles_csv(tmp_path / "b5.csv")
    assert append_graph_table(base, unlabelled, "b5.csv").column("y").null_count == 2


def test_a_multi_target_batch(tmp_path):
    base = read_smiles_csv(_csv(tmp_path, "smiles,p,q,split", ["1.5,,train", "0.5,2,test"]), label_column=["p", "q"],
                           split_column="split")
    batch = read_smiles_csv(_csv(tmp_path, "smiles,p,q", [",3.5"], "b.csv"), label_column=["p", "q"],
                            task=_spec(base))
    both = append_graph_table(base, batch, "b.csv")
    assert np.array_equal(table_labels(both), [[1.5, np.nan], [0.5, 2], [np.nan, 3.5]], equal_nan=True)
    assert both.column("split").to_pylist() == ["train", "test", None]  # the batch has no split: null
    swapped = read_smiles_csv(_csv(tmp_path, "smiles,q,p", ["1,2"], "s.csv"), label_column=["q", "p"])
    with pytest.raises(InputError, match="label columns q, p are not the dataset's p, q"):
        append_graph_table(base, swapped, "s.csv")


# --------------------------------------------------------------------------- MoleculeACE


def test_moleculeace_registry():
    names = [n for n in DATASETS if n.startswith("ACE-")]
    assert len(names) == len(ACE_SETS) == 30 and "ACE-CHEMBL204_Ki" in names
    assert sum(DATASETS[n].num_graphs for n in names) == 48_714
    info = get_dataset_info("ACE-CHEMBL204_Ki")
    assert (info.kind, info.folder, info.file, info.task) == ("smiles", "MoleculeACE", "CHEMBL204_Ki.csv",
                                                              "regression")
    assert (info.label_columns, info.split_column, info.keep_columns) == (("y",), "split", ("cliff_mol",))
    assert metric_for("ACE-CHEMBL204_Ki") == "rmse"
    if (RAW / "MoleculeACE").is_dir():
        assert sorted(f"{n[4:]}.csv" for n in names) == sorted(p.name for p in (RAW / "MoleculeACE").glob("*.csv"))


@pytest.mark.skipif(not (RAW / "MoleculeACE").is_dir(), reason="data/raw/MoleculeACE not present")
def test_moleculeace_builtin_ingest(tmp_path):
    """The smallest set (615 molecules) from the shipped file: counts, regression, split, cliff_mol, checksums."""
    assert len(verify_sha256sums(RAW, only="MoleculeACE")) == 31  # 30 CSVs and the license
    info = get_dataset_info("ACE-CHEMBL2835_Ki")
    t = load_builtin(info.name, RAW)
    validate_graph_table(t)
    spec = _spec(t)
    assert (spec.type, spec.targets, spec.source) == ("regression", ("y",), "builtin")
    nodes = t.column("num_nodes").to_numpy()
    edges = np.array([len(e) for e in t.column("edge_src").to_pylist()]) // 2
    assert t.num_rows == info.num_graphs == 615
    assert (round(float(nodes.mean()), 2), round(float(edges.mean()), 2)) == (info.mean_nodes, info.mean_edges)
    assert t.column("split").to_pylist().count("train") == 489 and t.column("split").to_pylist().count("test") == 126
    assert t.schema.field("cliff_mol").type == pa.float64() and np.nansum(t.column("cliff_mol").to_numpy()) == 60
    y = table_labels(t)[:, 0]
    assert not np.isnan(y).any() and -6 < y.min() and y.max() < 3
    # a tampered copy is refused by the same check
    root = tmp_path / "raw"
    shutil.copytree(RAW / "MoleculeACE", root / "MoleculeACE")
    shutil.copy(RAW / "SHA256SUMS", root / "SHA256SUMS")
    with open(root / "MoleculeACE" / "CHEMBL2835_Ki.csv", "a") as fh:
        fh.write("C,1.0,-0.0,0,train\n")
    with pytest.raises(InputError, match="CHEMBL2835_Ki.csv: sha256 mismatch"):
        verify_sha256sums(root, only="MoleculeACE")
