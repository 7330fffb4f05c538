"""The ingest stage's source settings, in-process (no Prefect run): per-dataset columns from ``params.yaml``
(``ingest.sources``), the default ``y`` / ``label`` / ``split`` columns of a CSV, and appended batches that keep
the dataset's task."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from tmdlib.datasets import read_smiles_csv, table_labels, table_task
from tmdlib import InputError


def _params(tmp_path: Path, sources: dict) -> str:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"base": {"task": "auto"}, "ingest": {"features": "onehot", "sources": sources}}))
    return str(path)


def _reading(name: str, params: str | None, **options):
    """How ``tmdsub ingest --params PARAMS [options]`` reads dataset ``name``."""
    from flows.config.ingest import IngestStageConfig

    return IngestStageConfig(params=params, **options).reading(name)


def test_source_options_precedence(tmp_path):
    params = _params(tmp_path, {"KI": {"label_columns": "pKi", "split_column": None, "smiles_column": "SMILES",
                                       "keep_columns": ["cliff"], "task": "regression", "id_column": "Registry"}})
    got = _reading("KI", params, task="auto")
    assert (got.smiles_column, got.label_columns, got.split_column, got.keep_columns, got.task, got.id_column) == (
        "SMILES", ["pKi"], "", ["cliff"], "regression", "Registry")
    # the command line wins for columns; a dataset's own task wins over --task (base.task, every dataset's default)
    got = _reading("KI", params, label_column=["a,b", "c"], split_column="set", task="binary")
    assert (got.label_columns, got.split_column, got.task) == (["a", "b", "c"], "set", "regression")
    got = _reading("OTHER", params, task="multitask")
    assert (got.smiles_column, got.label_columns, got.split_column, got.keep_columns, got.task, got.id_column) == (
        "smiles", None, None, None, "multitask", None)
    assert _reading("OTHER", None).task == "auto"


@pytest.mark.parametrize("sources,problem", [
    ({"KI": {"label_column": "y"}}, "ingest.sources.KI: unknown key 'label_column'"),
    ({"KI": {"label_columns": [1]}}, "ingest.sources.KI.label_columns must be a column name or a list"),
    ({"KI": {"smiles_column": ""}}, "ingest.sources.KI.smiles_column must be a non-empty string"),
    ({"KI": ["y"]}, "ingest.sources.KI must be a mapping"),
    ({"KI": {"task": "ranking"}}, "ingest.sources.KI.task must be auto or one of"),
])
def test_bad_source_settings_name_the_file_and_key(tmp_path, sources, problem):
    params = _params(tmp_path, sources)
    with pytest.raises(InputError) as err:  # when the config is built, before any file is read
        _reading("KI", params)
    assert str(err.value).startswith(params) and problem in str(err.value)


def test_default_csv_columns(tmp_path):
    from tmdlib.datasets.sources import csv_columns

    path = tmp_path / "m.csv"
    path.write_text("SMILES,Label,Split,cliff\nCCO,1,train,0\n")
    assert csv_columns(str(path), None, None) == (("Label",), "Split", ())
    assert csv_columns(str(path), [], "") == ((), None, ())
    assert csv_columns(str(path), ["cliff"], None, ["x"], optional=True) == (("cliff",), "Split", ())
    both = tmp_path / "both.csv"
    both.write_text("smiles,y,label\nCCO,1,0\n")
    with pytest.raises(InputError, match="both 'y' and 'label' columns could be the label"):
        csv_columns(str(both), None, None)
    assert csv_columns(str(both), ["y"], None) == (("y",), None, ())  # named: no ambiguity


def test_appended_batches_keep_the_dataset_task(tmp_path):
    from tasks.ingest import append_batches, batch_sources

    (tmp_path / "base.csv").write_text("smiles,y,split\nCCO,1.5,train\nCCN,-0.5,test\n")
    base = read_smiles_csv(tmp_path / "base.csv", label_column="y", split_column="split")
    append = tmp_path / "append"
    append.mkdir()
    (append / "b1.csv").write_text("smiles,y\nCCC,1\nCCCl,0\n")  # 0/1 on its own, regression in the dataset
    table = append_batches.fn(base, batch_sources(str(append)))
    assert table_task(table).type == "regression" and table.num_rows == 4
    assert np.array_equal(table_labels(table)[:, 0], [1.5, -0.5, 1.0, 0.0])
    assert table.column("split").to_pylist() == ["train", "test", None, None]
    (append / "b2.csv").write_text("smiles,y\nCO,2\nCS,oops\n")
    with pytest.raises(InputError) as err:
        append_batches.fn(base, batch_sources(str(append)))
    assert "b2.csv:3: label 'oops' is not a number" in str(err.value)

    (append / "b2.csv").unlink()
    (tmp_path / "bin.csv").write_text("smiles,y\nCCO,1\nCCN,0\n")
    binary = read_smiles_csv(tmp_path / "bin.csv", label_column="y")
    (append / "b3.csv").write_text("smiles,y\nCO,1\nCS,0.5\n")
    with pytest.raises(InputError) as err:
        append_batches.fn(binary, batch_sources(str(append)))
    assert "b1.csv" not in str(err.value) and "b3.csv" in str(err.value)
    assert ":3: label 0.5 is not a binary label" in str(err.value)


def test_ingest_rules_on_values(tmp_path):
    """What the ingest tasks decide from values: the readers' options, the ETA's total, a batch's reading, the
    duplicate structures and the skipped SMILES' report."""
    from tmdlib.datasets._identity import structure_duplicates
    from tmdlib.datasets.sources import SourceReading, batch_reading, expected_molecules, invalid_csv_text

    opts = SourceReading(label_columns=[], split_column="").smiles_options()
    assert opts["label_column"] is None and opts["split_column"] is None and opts["keep_columns"] == ()
    assert expected_molecules("not-a-dataset", 7) == 7 and expected_molecules("not-a-dataset", None) is None
    batch = tmp_path / "b.csv"
    batch.write_text("smiles,y\nCCO,1.5\n")
    reading = batch_reading(batch, "smiles", label_column="y")
    assert reading.label_columns == ["y"] and reading.smiles_column == "smiles"
    assert batch_reading(tmp_path, "tu", node_attributes=True).node_attributes is True
    dup = structure_duplicates(smiles=["OCC", "CCO", "CCN"])
    assert dup["compared"] == "RDKit's canonical SMILES" and dup["structures"] == 1 and dup["graphs"] == 1
    assert structure_duplicates(index=["a", "a", "b"])["graphs"] == 1
    assert invalid_csv_text([(3, "X", "bad"), (2, "Y", "worse")]) == "line,smiles,reason\n2,Y,worse\n3,X,bad\n"


def test_store_summaries(tmp_path):
    """A written store's summary from its table, and a streamed one's from its counts."""
    from tmdlib.datasets._identity import streamed_summary, table_summary
    from tmdlib.datasets._task import BINARY

    (tmp_path / "s.csv").write_text("smiles,y\nCCO,1\nCC,0\n")
    table = read_smiles_csv(tmp_path / "s.csv", label_column="y")
    s = table_summary(table)
    assert s["graphs"] == 2 and s["mean_nodes"] == 2.5 and s["mean_edges"] == 1.5 and "binary" in s["task"]
    assert streamed_summary({"graphs": 0, "nodes": 0, "edges": 0, "task": BINARY})["mean_nodes"] == 0.0


def test_ingest_progress_line():
    from tmdlib.datasets.sources import progress_line

    assert progress_line("P", 500, 2.0, 1000) == "ingest P: 500 molecules (50.0 %, ETA 0.0 min), 250/s"
    assert progress_line("P", 10, 1.0, None, "graphs") == "ingest P: 10 graphs, 10/s"
