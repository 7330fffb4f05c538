"""Hostile input: a corpus of malformed files (``tests/data/malformed/``), hypothesis fuzzing of every
ingestion path, and the security rules (no pickle, no credentials in params, no escaping paths).  The CLI's
one-line errors, loopback servers and run tags: pipeline/test_fuzz_cli.py.

Every ingestion path -- TU folder, SMILES CSV (also with several label columns, a forced task type, split and kept
columns), Parquet graph store, a lab's answer sheet (any headers, delimiters, relations, units, transforms), label
import (both the ``labels import`` validator and the training stage's
``labels.csv`` reader, also against each task type: multi-class classes, one column per target of a multi-task or
multi-target regression), selection JSON, pair lists -- either loads correctly or raises one
:class:`tmdlib.InputError` naming the file (and the line where there is one); the chemists' pickers
(``tmdlib.chem.pick``) refuse a SMILES RDKit cannot parse, or without atoms, with one error naming its row; inputs
declaring huge sizes are refused before allocating (peak traced memory stays small).  Readers and validators write
nothing.
"""
from __future__ import annotations

import json
import re
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import DATA, ROOT, examples
from tmdlib import InputError
from tmdlib.datasets import to_dataset  # noqa: E402

MALFORMED = DATA / "malformed"
VALID_TU = DATA / "bad" / "tu" / "valid"
MEMORY_CAP = 64 << 20  # TMDSUB_MAX_MEMORY while reading the corpus
PEAK_LIMIT = 48 << 20  # numpy allocations traced while reading one corpus file

FUZZ = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------------------- corpus
# name -> None (loads) or a substring of the error.  Every file of the corpus must be listed.
TU_EXPECT = {
    "attr_extreme": "node attribute beyond the float32 range of the graph store: [2.0, 1e+200]",
    "attr_huge_width": "expected 5000 comma-separated value(s), found 1",
    "binary_garbage": "expected 2 comma-separated value(s)",
    "empty_indicator": "file is empty",
    "exponent_id": "not an integer: '1e3'",
    "hex_id": None,  # Arrow reads 0x1 as 1: a valid folder
    "huge_graph_count": "has 1003 graph label lines, expected 2",
    "huge_graph_id": "graph 1000000000000 follows graph 2",
    "huge_label_span": "one-hot encoding of width 4294967296 exceeds the limit",
    "huge_node_id": "node id out of range [1, 5] in edge (1, 1000000000000)",
    "int64_overflow": "integer out of the 64-bit range",
    "long_line": "integer out of the 64-bit range",
    "negative_huge": "node id out of range",
    "nul_bytes": "not an integer",
    "one_direction_edges": None,  # TU lists may give each edge once: symmetrised (checked below)
    "only_newlines": "file is empty",
    "utf16": "not an integer",
}
SMILES_EXPECT = {
    "binary.csv": "header has 2",
    "empty.csv": "empty CSV file",
    "extra_columns.csv": "4 fields, header has 2",
    "huge_label.csv": "label '1e400' is infinite",
    "huge_ring_index.csv": "invalid SMILES",
    "nan_smiles_text.csv": "invalid SMILES 'nan'",
    "nul_in_smiles.csv": "invalid SMILES",
    "only_header.csv": "no molecules",
    "unclosed_quote.csv": "header has 2",
    "utf16.csv": "",
    "utf8_bom_header.csv": None,  # valid: the BOM is stripped and the header SMILES matches "smiles" ignoring case
    "wildcard_atoms.csv": None,  # valid: OGB maps the dummy atom to its "misc" entry
}
PARQUET_EXPECT = {
    "bad_footer_magic.parquet": "not a readable Parquet file",
    # a valid store with bytes overwritten inside a column chunk's size statistics (a definition-level
    # histogram of 3 entries for max level 1): pyarrow 25's RowGroupMetaData.column() aborts the process on it
    "bad_size_statistics.parquet": "not a readable Parquet file",
    "bad_utf8_column_name.parquet": "a column name or tmdlib.* metadata entry is not UTF-8",  # "grap\xe3_id"
    "decompression_bomb.parquet": "needs 76.29 MiB of memory, more than the 64.00 MiB available",
    "extreme_features.parquet": None,  # +-float32 max and subnormals: the store's whole range is valid
    "asymmetric_edges.parquet": "asymmetric edges: (0, 1) is present but (1, 0) is not",
    "extreme_graph_ids.parquet": None,  # any unique int64 ids are valid
    "foreign_schema.parquet": "missing column(s)",
    "huge_edge_id.parquet": "edge (2147483647, 1) has a node id outside [0, 3)",
    "huge_num_nodes.parquet": "num_nodes is 1000000000000 but x has 3 rows",
    "negative_num_nodes.parquet": "num_nodes is -3",
    "only_magic.parquet": "not a readable Parquet file",
    "truncated.parquet": "not a readable Parquet file",
    "zero_bytes.parquet": "not a readable Parquet file",
}
ARRAYS_EXPECT = {  # GraphDataset(**np.load(file)): the library boundary for arrays built in code
    "asymmetric_directed_cycle.npz": "graph 1: edge 0 (0, 1): asymmetric: (1, 0) is missing",
    "asymmetric_edge.npz": "graph 1: edge 0 (0, 1): asymmetric: (1, 0) is missing",
    "duplicate_edge.npz": "graph 1: edge 2 (0, 1): duplicate edge",
    "edge_into_next_graph.npz": "graph 0: edge 0 (0, 3): endpoint out of range [0, 3)",
    "edge_out_of_range.npz": "graph 1: edge 0 (0, 2): endpoint out of range [0, 2)",
    "edge_ptr_mismatch.npz": "edge_ptr must rise from 0 to 8 without decreasing",
    "extreme_feature.npz": "graph 0: node 1: feature 0 = 1e+200 exceeds the feature limit",
    "float32_max_features.npz": None,
    "inf_feature.npz": "graph 1: node 1: feature 0 = -inf is not finite",
    "nan_feature.npz": "graph 0: node 2: feature 0 = nan is not finite",
    "negative_node_id.npz": "graph 1: edge 0 (-1, 0): endpoint out of range [0, 2)",
    "node_ptr_decreasing.npz": "node_ptr must rise from 0 to 5 without decreasing",
    "node_ptr_short.npz": "node_ptr must rise from 0 to 5 without decreasing",
    "self_loop.npz": "graph 1: edge 2 (1, 1): self-loop",
    "src_dst_lengths.npz": "src and dst must be 1-D of equal length, got (8,) and (7,)",
    "valid.npz": None,
}
LABELS_EXPECT = {  # imported against requests [0] of known ids 0..4, binary labels
    "binary.csv": "not a readable CSV",
    "duplicate_id.csv": "duplicate graph_id 0",
    "empty.csv": "not a readable CSV",
    "float_id.csv": "graph_id '0.5' is not an integer",
    "huge_id.csv": "graph_id 1111111111111111111111111111111111111111 is out of range",
    "inf_label.csv": "not a finite number",
    "missing_label_column.csv": "missing column(s) label",
    "missing_requested.csv": "no label for 1 requested graph_id(s): 0",
    "nan_label.csv": "not a finite number",
    "negative_id.csv": "unknown graph_id -1",
    "only_header.csv": "no label for 1 requested",
    "ragged.csv": "not a readable CSV",
    "text_label.csv": "label 'active' is not a finite number",
}


def _label_table(path):
    """A user's label CSV with every cell as text (validation parses them), as the label intake reads it."""
    from tmdlib.datasets.documents import read_text_csv

    return read_text_csv(path, what="label file")


# SMILES CSVs of the task types (several label columns, forced types, split and kept columns):
# name -> (read_smiles_csv options, None or a substring of the error).  Every error names its line.
_T2 = {"label_column": ["t1", "t2"]}
_Y = {"label_column": "y"}
SMILES_TASKS_EXPECT = {
    "cliff_mol_empty.csv": ({**_Y, "keep_columns": "cliff_mol"}, None),  # an empty kept cell is null
    "cliff_mol_text.csv": ({**_Y, "keep_columns": "cliff_mol", "split_column": "split"},
                           "3: column 'cliff_mol': 'yes' is not a number"),
    "forced_binary_two.csv": ({**_Y, "task": "binary"}, "4: label 2 is not a binary label (0 or 1); the dataset's "
                                                        "task is binary"),
    "forced_multitask_three.csv": ({**_T2, "task": "multitask"}, "4: label 3 is not a binary label (0 or 1); the "
                                                                 "dataset's task is multitask (2 tasks: t1, t2)"),
    "multi_label_bad_smiles.csv": (_T2, "3: invalid SMILES 'C1CC'"),
    "multi_label_gaps.csv": (_T2, None),  # multi-task with gaps: an empty cell is "not measured"
    "multi_label_inf.csv": (_T2, "3: label 'inf' is infinite (column 't2')"),
    "multi_label_missing_column.csv": (_T2, "1: no column 't2'; available columns: smiles, t1"),
    "multi_label_ragged.csv": (_T2, "3: 2 fields, header has 3"),
    "multi_label_text.csv": (_T2, "3: label 'active' is not a number (column 't2')"),
    "split_any_case.csv": ({**_Y, "split_column": "split"}, None),  # Train, VALIDATION: lower-cased
    "split_empty.csv": ({**_Y, "split_column": "split"}, "3: split '' is not one of train, test, valid"),
    "split_unknown.csv": ({**_Y, "split_column": "split"}, "3: split 'holdout' is not one of train, test, valid"),
}
# label files for a dataset's task (label import and the training reader): name -> expected.  The task is the
# file name's first word (TASKS_OF_LABELS); imported against requests [0] of known ids 0..4.
LABELS_TASKS_EXPECT = {
    "binary_two.csv": "2: label 2 is not a binary label (0 or 1); the dataset's task is binary",
    "multiclass_fraction.csv": "2: label 5.5 is not one of the classes 0, 5, 10",
    "multiclass_missing_label.csv": "2: label '' is not a finite number (this task needs every label)",
    "multiclass_unknown_class.csv": "3: label 7 is not one of the classes 0, 5, 10; the dataset's task is multiclass",
    "multitask_bad_value.csv": "3: label 2 is not a binary label (0 or 1); the dataset's task is multitask",
    "multitask_bad_values.csv": "2 problem(s) in the label file:\n  line 3: label -1 is not a binary label (0 or 1)"
                                "\n  line 4: label 0.5 is not a binary label (0 or 1)",
    "multitask_columns_reordered.csv": None,  # columns are found by name
    "multitask_duplicate_id.csv": "2: duplicate graph_id 0 on lines 2, 3",
    "multitask_gaps.csv": None,  # a multi-task label may be missing (empty cell), even all of a row's
    "multitask_missing_column.csv": "1: missing column(s)",
    "multitask_ragged.csv": "not a readable CSV: CSV parse error: Expected 4 columns, got 3: 1,0,1",
    "multitask_text.csv": "2: label t2 'active' is not a finite number",
    "regression_gaps.csv": None,
    "regression_inf.csv": "2: label b 'inf' is not a finite number",
    "regression_overflow.csv": "2: label a '1e400' is not a finite number",
}
# SMILES pools for the chemists' pickers (tmdlib.chem.pick, every picker): name -> None (picks) or
# (row of the bad SMILES in the pool, 1-based; its file line is row + 1, after the header, and the error text).
CHEM_EXPECT = {
    "aromatic_five_ring.csv": (2, "invalid SMILES 'c1cccc1' at position 1 (0-based; row 2)"),
    "blank_cell.csv": (2, "invalid SMILES '  ' at position 1"),
    "empty_cell.csv": (2, "invalid SMILES '' at position 1 (0-based; row 2): rdkit cannot parse it, or it has no "
                          "atoms"),
    "hypervalent.csv": (3, "invalid SMILES '[NH5]' at position 2"),
    "nan_text.csv": (1, "invalid SMILES 'nan' at position 0"),
    "nul_byte.csv": (2, "invalid SMILES 'C\\x00C' at position 1"),
    "odd_but_valid.csv": None,  # a dummy atom, deuterium, a stereocentre: all molecules
    "unclosed_ring.csv": (3, "invalid SMILES 'C1CC' at position 2 (0-based; row 3)"),
    "unknown_element.csv": (2, "invalid SMILES '[Xx]' at position 1"),
}


def _located(path: Path, expected: str | None) -> str | None:
    """``"<path>:<line>: <problem>"`` for an expectation that starts with its line, else the expectation."""
    return f"{path}:{expected}" if expected is not None and re.match(r"\d+: ", expected) else expected


def _task_of_labels(name: str):
    from tmdlib.datasets import TaskSpec

    return {"binary": TaskSpec("binary"), "multiclass": TaskSpec("multiclass", ("y",), (0, 5, 10)),
            "multitask": TaskSpec("multitask", ("t1", "t2", "t3")),
            "regression": TaskSpec("regression", ("a", "b"))}[name.split("_")[0]]


def test_corpus_is_fully_listed():
    listed = {"tu": TU_EXPECT, "smiles": SMILES_EXPECT, "parquet": PARQUET_EXPECT, "labels": LABELS_EXPECT,
              "arrays": ARRAYS_EXPECT, "smiles_tasks": SMILES_TASKS_EXPECT, "labels_tasks": LABELS_TASKS_EXPECT,
              "chem": CHEM_EXPECT}
    for kind, expect in listed.items():
        assert sorted(p.name for p in (MALFORMED / kind).iterdir()) == sorted(expect), kind


def _outcome(fn, path: Path, expected: str | None, monkeypatch) -> None:
    """Run a reader under a memory cap: it loads (expected None) or raises one InputError naming ``path``
    whose text contains ``expected``; numpy never allocates more than PEAK_LIMIT on the way."""
    monkeypatch.setenv("TMDSUB_MAX_MEMORY", str(MEMORY_CAP))
    tracemalloc.start()
    try:
        if expected is None:
            fn()
            return
        with pytest.raises(InputError) as info:
            fn()
        err = info.value
        assert err.path is not None and (Path(err.path) == path or path in Path(err.path).parents), str(err)
        assert expected in str(err), str(err)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < PEAK_LIMIT, f"{path.name}: {peak / 2**20:.0f} MiB allocated before the verdict"


@pytest.mark.parametrize("case", sorted(TU_EXPECT))
def test_corpus_tu(case, monkeypatch):
    from tmdlib.datasets import read_tu

    folder = MALFORMED / "tu" / case
    _outcome(lambda: read_tu(folder, name="TINY", node_attributes=True), folder, TU_EXPECT[case], monkeypatch)


@pytest.mark.parametrize("case", sorted(SMILES_EXPECT))
def test_corpus_smiles(case, monkeypatch):
    from tmdlib.datasets import read_smiles_csv

    path = MALFORMED / "smiles" / case
    _outcome(lambda: read_smiles_csv(path, label_column="label"), path, SMILES_EXPECT[case], monkeypatch)


@pytest.mark.parametrize("case", sorted(PARQUET_EXPECT))
def test_corpus_parquet(case, monkeypatch):
    from tmdlib.datasets import read_graph_parquet

    path = MALFORMED / "parquet" / case
    _outcome(lambda: read_graph_parquet(path), path, PARQUET_EXPECT[case], monkeypatch)


@pytest.mark.parametrize("case", sorted(ARRAYS_EXPECT))
def test_corpus_arrays(case):
    """Arrays handed to GraphDataset directly: one GraphValidationError naming graph, node or edge, or a
    valid dataset (symmetric, simple, bounded features) whose TMDs are finite."""
    from tmdlib import GraphDataset, GraphValidationError, tmd_matrix

    arrays = dict(np.load(MALFORMED / "arrays" / case, allow_pickle=False))
    if ARRAYS_EXPECT[case] is None:
        assert np.isfinite(tmd_matrix(GraphDataset(**arrays), depth=3)).all()
        return
    with pytest.raises(GraphValidationError) as info:
        GraphDataset(**arrays)
    assert ARRAYS_EXPECT[case] in str(info.value), str(info.value)


def test_corpus_loaded_graphs_are_simple_symmetric_and_give_finite_tmd():
    """What the corpus loads is a valid GraphDataset (symmetric, simple, bounded features) with finite TMDs,
    extreme features included."""
    from tmdlib import GraphDataset, tmd_matrix, tree_norm
    from tmdlib.datasets import read_graph_parquet, read_tu

    one_way = read_tu(MALFORMED / "tu" / "one_direction_edges", name="TINY", node_attributes=True)
    extreme = read_graph_parquet(MALFORMED / "parquet" / "extreme_features.parquet")
    for table in (one_way, extreme):
        ds = to_dataset(table)
        for g in ds:  # the single-graph validation agrees
            type(g)(g.x, g.edge_index)
        mat = tmd_matrix(ds, depth=4)
        assert np.isfinite(mat).all() and (mat >= 0).all()
        np.testing.assert_allclose(np.diag(tmd_matrix(ds, depth=4, rows=[0, 1], cols=[0, 1])), 0.0)
        assert all(np.isfinite(tree_norm(g, 4)) for g in ds)
    assert one_way.column("edge_src").to_pylist()[0] == [0, 0, 1, 1, 2, 2]  # 1-2, 2-3, 3-1 in both directions


@pytest.mark.parametrize("case", sorted(LABELS_EXPECT))
def test_corpus_label_import(case, monkeypatch):
    from tmdlib.datasets.labels import validate_label_import

    path = MALFORMED / "labels" / case
    _outcome(lambda: validate_label_import(_label_table(str(path)), np.array([0]), np.arange(5), str(path),
                                           allowed_labels={0.0, 1.0}), path, LABELS_EXPECT[case], monkeypatch)


@pytest.mark.parametrize("case", sorted(LABELS_EXPECT))
def test_corpus_training_label_reader(case, tmp_path, monkeypatch):
    """The training stage's labels.csv reader (columns graph_id,y) on the same hostile files."""
    from tasks.io import read_labels

    path = tmp_path / case
    path.write_bytes((MALFORMED / "labels" / case).read_bytes().replace(b"graph_id,label", b"graph_id,y", 1))
    ok = {"negative_id.csv", "missing_requested.csv", "only_header.csv"}  # ids checked later
    expect = "out of range" if case == "huge_id.csv" else ""  # no graph can have it: refused where it enters
    _outcome(lambda: read_labels(str(path)), path, None if case in ok else expect, monkeypatch)


@pytest.mark.parametrize("case", sorted(SMILES_TASKS_EXPECT))
def test_corpus_smiles_tasks(case, monkeypatch):
    """Several label columns, forced task types, split and kept columns: one InputError naming file and line."""
    from tmdlib.datasets import read_smiles_csv, validate_graph_table

    path = MALFORMED / "smiles_tasks" / case
    options, expected = SMILES_TASKS_EXPECT[case]
    if expected is None:
        validate_graph_table(read_smiles_csv(path, **options))
    _outcome(lambda: read_smiles_csv(path, **options), path, _located(path, expected), monkeypatch)


@pytest.mark.parametrize("case", sorted(LABELS_TASKS_EXPECT))
def test_corpus_label_import_of_a_task(case, monkeypatch):
    from tmdlib.datasets.labels import validate_label_import

    path = MALFORMED / "labels_tasks" / case
    task, expected = _task_of_labels(case), _located(MALFORMED / "labels_tasks" / case, LABELS_TASKS_EXPECT[case])
    _outcome(lambda: validate_label_import(_label_table(str(path)), np.array([0]), np.arange(5), str(path),
                                           task=task), path, expected, monkeypatch)


@pytest.mark.parametrize("case", sorted(LABELS_TASKS_EXPECT))
def test_corpus_training_label_reader_of_a_task(case, tmp_path, monkeypatch):
    """The training stage's labels.csv reader (``graph_id,y`` for one target, the target names for several)."""
    from tasks.io import read_labels

    path = tmp_path / case
    path.write_bytes((MALFORMED / "labels_tasks" / case).read_bytes().replace(b"graph_id,label", b"graph_id,y", 1))
    expected = "1: missing column(s) ['t3']" if case == "multitask_missing_column.csv" else LABELS_TASKS_EXPECT[case]
    _outcome(lambda: read_labels(str(path), task=_task_of_labels(case)), path, _located(path, expected), monkeypatch)


def _pool(case: str) -> list[str]:
    import csv

    with open(MALFORMED / "chem" / case, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["smiles"]
    return [r[0] for r in rows[1:]]


@pytest.mark.parametrize("method", ["maxmin", "leader", "butina", "fp_kmedoids", "scaffold"])
@pytest.mark.parametrize("case", sorted(CHEM_EXPECT))
def test_corpus_chem_pickers(case, method, monkeypatch):
    """SMILES RDKit cannot parse, or without atoms: one InputError naming the row (the pool is a list: no file),
    before any fingerprint matrix is allocated."""
    from tmdlib.chem import PICKERS, pick

    assert method in PICKERS
    pool = _pool(case)
    monkeypatch.setenv("TMDSUB_MAX_MEMORY", str(MEMORY_CAP))
    if CHEM_EXPECT[case] is None:
        res = pick(method, pool, 1)
        assert res.k == 1 and (res.tau is None or int(res.tau.sum()) == len(pool))
        return
    row, text = CHEM_EXPECT[case]
    tracemalloc.start()
    try:
        with pytest.raises(InputError) as info:
            pick(method, pool, 1)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    err = info.value
    assert err.line == row and text in str(err), str(err)
    assert "\n" not in str(err) and peak < PEAK_LIMIT


# --------------------------------------------------------------------------------------- hypothesis


def _loads_or_input_error(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except InputError as err:
        assert str(err)
        return None


_cell = st.one_of(st.text(max_size=12), st.integers(-10**25, 10**25).map(str),
                  st.sampled_from(["", "nan", "inf", "-0", "1e400", "0x1", "\x00", '"', "CCO", "c1ccccc1", "1", "0"]))


def _csv(header: list[str], rows: list[list[str]], eol: str) -> bytes:
    return (eol.join([",".join(header)] + [",".join(r) for r in rows]) + eol).encode("utf-8", "surrogatepass")


@FUZZ
@given(header=st.lists(st.sampled_from(["smiles", "label", "x", ""]), min_size=0, max_size=3),
       rows=st.lists(st.lists(_cell, max_size=3), max_size=5), eol=st.sampled_from(["\n", "\r\n"]))
def test_fuzz_smiles_csv(header, rows, eol):
    from tmdlib.datasets import read_smiles_csv, validate_graph_table

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.csv"
        path.write_bytes(_csv(header, rows, eol))
        table = _loads_or_input_error(read_smiles_csv, path, label_column="label" if "label" in header else None)
        if table is not None:
            validate_graph_table(table)


@FUZZ
@given(data=st.binary(max_size=200))
def test_fuzz_smiles_csv_bytes(data):
    from tmdlib.datasets import read_smiles_csv

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.csv"
        path.write_bytes(b"smiles,label\n" + data)
        _loads_or_input_error(read_smiles_csv, path, label_column="label")


@FUZZ
@given(header=st.lists(st.sampled_from(["graph_id", "label", "y", "z"]), max_size=3, unique=True),
       rows=st.lists(st.lists(_cell, max_size=3), max_size=6), eol=st.sampled_from(["\n", "\r\n"]))
def test_fuzz_label_files(header, rows, eol):
    """Label import (validator) and the training reader: loads or one InputError, never anything else."""
    from tasks.io import read_labels
    from tmdlib.datasets.labels import validate_label_import

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "labels.csv"
        path.write_bytes(_csv(header, rows, eol))
        table = _loads_or_input_error(_label_table, str(path))
        if table is not None:
            out = _loads_or_input_error(validate_label_import, table, np.array([0, 1]), np.arange(5), str(path),
                                        allowed_labels={0.0, 1.0})
            if out is not None:
                assert set(out.column("graph_id").to_pylist()) >= {0, 1}
        res = _loads_or_input_error(read_labels, str(path))
        if res is not None:
            assert all(v in (0.0, 1.0) for v in res[0].values())


_sheet_header = st.sampled_from(["SMILES", "Smiles", "canonical_smiles", "ID", "graph_id", "pIC50", "Comment",
                                  "Standard Value", "Standard Units", "pChEMBL Value", "Standard Relation", "units",
                                  "relation", "value", ""])
_sheet_cell = st.one_of(_cell, st.sampled_from(["'='", "'>'", "<", "nM", "uM", "%", "M", "10000", "0", "-3",
                                                "n.d.", "C", "CC(=O)O"]))


@FUZZ
@given(header=st.lists(_sheet_header, max_size=5, unique=True), rows=st.lists(st.lists(_sheet_cell, max_size=5),
       max_size=5), delimiter=st.sampled_from([",", ";", "\t"]),
       transform=st.sampled_from(["none", "log10", "p"]), units=st.sampled_from([None, "nM"]))
def test_fuzz_lab_sheets(header, rows, delimiter, transform, units):
    """A lab's sheet as it comes (any headers, delimiters, relations, units, a ChEMBL export's columns): read,
    normalised (tmdlib.datasets.labsheet) and read as answers, it loads or raises one InputError."""
    from tasks.labels import read_answer_sheet
    from tmdlib.datasets.labels import read_answers
    from tmdlib.datasets.labsheet import normalize_answers
    from tmdlib.datasets._smiles import canonical_smiles

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lab.csv"
        path.write_bytes((delimiter.join(header) + "\n" + "".join(delimiter.join(r) + "\n" for r in rows))
                         .encode("utf-8", "surrogatepass"))
        got = _loads_or_input_error(read_answer_sheet, str(path))
        if got is None:
            return
        table, lines, _ = got
        norm = _loads_or_input_error(normalize_answers, table, ("y",), transform=transform, units=units,
                                     path=str(path), line_numbers=lines)
        if norm is None:
            return
        out = _loads_or_input_error(read_answers, norm[0], np.arange(3), ("y",), request_sources={"C": [0]},
                                    pool_smiles=([0, 1, 2], ["C", "CC(=O)O", "CCO"]), canonical=canonical_smiles,
                                    path=str(path), line_numbers=lines)
        if out is not None:
            assert set(out[0].column("graph_id").to_pylist()) <= {0, 1, 2}


_task_cell = st.one_of(_cell, st.sampled_from(["2", "0.5", "-1", "5", "10", "train", "test", "VALID", " "]))


@FUZZ
@given(header=st.lists(st.sampled_from(["graph_id", "t1", "t2", "t3", "label", "y"]), max_size=5, unique=True),
       rows=st.lists(st.lists(_task_cell, max_size=5), max_size=6), eol=st.sampled_from(["\n", "\r\n"]),
       kind=st.sampled_from(["multitask", "regression", "multiclass", "binary"]))
def test_fuzz_multi_target_label_files(header, rows, eol, kind):
    """Label files of a dataset's task (one column per target for multi-task and multi-target regression): the
    import validator and the training reader load values that fit the task, or raise one InputError."""
    from tasks.io import read_labels
    from tmdlib.datasets.labels import validate_label_import
    from tmdlib.datasets import TaskSpec

    task = {"multitask": TaskSpec("multitask", ("t1", "t2", "t3")), "regression": TaskSpec("regression", ("t1", "t2")),
            "multiclass": TaskSpec("multiclass", ("y",), (0, 5, 10)), "binary": TaskSpec("binary")}[kind]

    def fits(values) -> bool:
        v = np.asarray(values, dtype=np.float64)
        if kind == "multitask":
            return bool(np.all(np.isnan(v) | (v == 0) | (v == 1)))
        if kind == "regression":
            return bool(np.all(np.isnan(v) | np.isfinite(v)))
        return bool(np.all(np.isin(v, [0, 5, 10] if kind == "multiclass" else [0, 1])))

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "labels.csv"
        path.write_bytes(_csv(header, rows, eol))
        table = _loads_or_input_error(_label_table, str(path))
        if table is not None:
            out = _loads_or_input_error(validate_label_import, table, np.array([0, 1]), np.arange(5), str(path),
                                        task=task)
            if out is not None:
                assert set(out.column("graph_id").to_pylist()) >= {0, 1}
                assert out.column_names[1:] == (["label"] if task.num_targets == 1 else list(task.targets))
                assert all(fits([np.nan if v is None else v for v in out.column(c).to_pylist()])
                           for c in out.column_names[1:])
        res = _loads_or_input_error(read_labels, str(path), task=task)
        if res is not None:
            assert all(fits(np.atleast_1d(v)) for v in res[0].values())


@FUZZ
@given(header=st.lists(st.sampled_from(["smiles", "t1", "t2", "split", "cliff_mol"]), min_size=1, max_size=5,
                       unique=True),
       rows=st.lists(st.lists(_task_cell, max_size=5), max_size=5), eol=st.sampled_from(["\n", "\r\n"]),
       task=st.sampled_from([None, "binary", "multiclass", "multitask", "regression"]),
       labels=st.sampled_from([("t1",), ("t1", "t2")]), split=st.booleans(), keep=st.booleans())
def test_fuzz_smiles_csv_tasks(header, rows, eol, task, labels, split, keep):
    """SMILES CSVs with several label columns, a forced task type, a split and a kept column: a valid graph table
    whose task fits the options, or one InputError."""
    from tmdlib.datasets import read_smiles_csv, table_task, validate_graph_table

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.csv"
        path.write_bytes(_csv(header, rows, eol))
        table = _loads_or_input_error(read_smiles_csv, path, label_column=list(labels), task=task,
                                      split_column="split" if split else None,
                                      keep_columns=("cliff_mol",) if keep else ())
        if table is not None:
            validate_graph_table(table)
            spec = table_task(table)
            assert spec.targets == labels and (task is None or spec.type == task)
            if split:
                assert set(table.column("split").to_pylist()) <= {"train", "test", "valid"}
            if keep:
                assert table.schema.field("cliff_mol").type == pa.float64()


@FUZZ
@given(data=st.binary(max_size=300))
def test_fuzz_parquet_bytes(data):
    from tmdlib.datasets import read_graph_parquet

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "g.parquet"
        path.write_bytes(b"PAR1" + data + b"PAR1" if data[:1] == b"\0" else data)
        _loads_or_input_error(read_graph_parquet, path)


@pytest.mark.parametrize("options", [
    {}, {"compression": "none", "version": "1.0"}, {"compression": "snappy", "row_group_size": 3},
    {"write_statistics": False, "write_page_index": True}, {"use_dictionary": False, "data_page_size": 64}])
def test_footer_sizes_match_pyarrow(tmp_path, options):
    """The store's own footer reader (no pyarrow, so a malformed footer cannot abort the process) gives
    the rows and per-chunk sizes pyarrow's metadata gives on valid files of every writer setting."""
    from tmdlib.datasets import read_tu
    from tmdlib.datasets._parquet import _footer_sizes

    width = {"BOOLEAN": 1, "INT32": 4, "FLOAT": 4, "INT64": 8, "DOUBLE": 8, "INT96": 12}
    base = read_tu(VALID_TU, name="TINY")
    extra = pa.table({"flag": pa.array([i % 2 == 0 for i in range(base.num_rows)]),
                      "name": pa.array([f"g{i % 3}" for i in range(base.num_rows)])})
    table = base.append_column(extra.schema.field(0), extra.column(0)).append_column(
        extra.schema.field(1), extra.column(1))
    table = pa.concat_tables([table] * 7)
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, **options)
    meta = pq.ParquetFile(path).metadata
    expected = sum(max(c.total_uncompressed_size, c.num_values * width.get(c.physical_type, 1))
                   for rg in (meta.row_group(i) for i in range(meta.num_row_groups))
                   for c in (rg.column(j) for j in range(rg.num_columns)))
    assert meta.num_rows == table.num_rows
    assert _footer_sizes(path) == (meta.num_rows, expected)


@pytest.fixture(scope="module")
def valid_store_bytes() -> bytes:
    from tmdlib.datasets import read_tu

    buf = pa.BufferOutputStream()
    pq.write_table(read_tu(VALID_TU, name="TINY"), buf)
    return buf.getvalue().to_pybytes()


@FUZZ
@given(pos=st.integers(0, 10**6), flips=st.binary(min_size=1, max_size=8), truncate=st.booleans())
def test_fuzz_parquet_corrupted_bytes(valid_store_bytes, pos, flips, truncate):
    """A valid store with bytes overwritten (or cut): loads a valid table, or one InputError."""
    from tmdlib.datasets import read_graph_parquet, validate_graph_table

    raw = bytearray(valid_store_bytes)
    k = pos % len(raw)
    raw[k:k + len(flips)] = flips
    if truncate:
        raw = raw[:k]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "g.parquet"
        path.write_bytes(bytes(raw))
        table = _loads_or_input_error(read_graph_parquet, path)
        if table is not None:
            validate_graph_table(table)


_ints = st.lists(st.integers(-2**40, 2**40), max_size=4)


@FUZZ
@given(num_nodes=st.lists(st.integers(-2**62, 2**62), min_size=2, max_size=2),
       src=st.lists(_ints, min_size=2, max_size=2), dst=st.lists(_ints, min_size=2, max_size=2),
       gid=st.lists(st.integers(-2**63, 2**63 - 1), min_size=2, max_size=2))
def test_fuzz_parquet_values(num_nodes, src, dst, gid):
    """Declared sizes and ids anywhere in int64: refused before allocating, or loaded."""
    from tmdlib.datasets import read_graph_parquet, read_tu

    t = read_tu(VALID_TU, name="TINY")
    clip = lambda v: [[max(min(x, 2**31 - 1), -2**31) for x in r] for r in v]  # noqa: E731
    cols = {"num_nodes": pa.array(num_nodes, pa.int64()), "graph_id": pa.array(gid, pa.int64()),
            "edge_src": pa.array(clip(src), pa.list_(pa.int32())), "edge_dst": pa.array(clip(dst), pa.list_(pa.int32()))}
    for name, arr in cols.items():
        t = t.set_column(t.column_names.index(name), t.schema.field(name), arr)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "g.parquet"
        pq.write_table(t, path)
        tracemalloc.start()
        try:
            _loads_or_input_error(read_graph_parquet, path)
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        assert peak < PEAK_LIMIT


_extreme = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(
    [0.0, -0.0, 5e-324, 1e200, -1e200, 3.4028234663852886e38, -3.4028234663852886e38, 3.4028235e38, 1.7e308]))


@FUZZ
@given(n1=st.integers(1, 7), n2=st.integers(1, 7), data=st.data(), depth=st.integers(1, 4))
def test_fuzz_extreme_features(n1, n2, data, depth):
    """Any float features: the Graph refuses them with one GraphValidationError, or the TMD (both engine
    paths) and the tree norm are finite -- never a crash, never inf or NaN."""
    from tmdlib import FEATURE_LIMIT, Graph, GraphValidationError, tmd, tmd_matrix, tree_norm

    graphs = []
    for n in (n1, n2):
        x = np.array(data.draw(st.lists(_extreme, min_size=n, max_size=n)))[:, None]
        src, dst = np.arange(n - 1), np.arange(1, n)  # a path
        try:
            graphs.append(Graph(x, np.stack([np.r_[src, dst], np.r_[dst, src]])))
        except GraphValidationError as err:
            assert not (np.abs(x) <= FEATURE_LIMIT).all()
            assert "FEATURE_LIMIT" in str(err)
            return
    assert (np.abs(np.concatenate([g.x for g in graphs])) <= FEATURE_LIMIT).all()
    norms = [tree_norm(g, depth) for g in graphs]
    values = [tmd(*graphs, depth), tmd_matrix(graphs, depth)[0, 1]]
    assert np.isfinite(values + norms).all()
    # both engine paths agree up to rounding, relative to the size of the summands (TN(G1) + TN(G2) bounds
    # them: with features near 3.4e38 a small TMD is a difference of huge terms)
    np.testing.assert_allclose(values[0], values[1], rtol=1e-9, atol=1e-12 * sum(norms))
    assert values[0] <= sum(norms) * (1 + 1e-12)


@FUZZ
@given(npg=st.lists(st.integers(0, 4), min_size=1, max_size=4), data=st.data())
def test_fuzz_dataset_arrays(npg, data):
    """Arbitrary edge lists and features handed to GraphDataset: one GraphValidationError, or a dataset
    whose edges are symmetric and simple and whose TMD matrix is finite -- nothing else, never a crash."""
    from tmdlib import GraphDataset, GraphValidationError, tmd_matrix

    n = sum(npg)
    x = np.array(data.draw(st.lists(_extreme, min_size=n, max_size=n)), dtype=float).reshape(n, 1)
    per_graph = [data.draw(st.lists(st.tuples(st.integers(-1, k), st.integers(-1, k)), max_size=6)) for k in npg]
    src = np.array([e[0] for edges in per_graph for e in edges], dtype=np.int64)
    dst = np.array([e[1] for edges in per_graph for e in edges], dtype=np.int64)
    if data.draw(st.booleans()):  # symmetrise each graph's list half of the time
        parts = [(np.r_[[e[0] for e in es], [e[1] for e in es]], np.r_[[e[1] for e in es], [e[0] for e in es]])
                 for es in per_graph]
        per_graph = [list(zip(a.tolist(), b.tolist())) for a, b in parts]
        src = np.concatenate([a for a, _ in parts]).astype(np.int64)
        dst = np.concatenate([b for _, b in parts]).astype(np.int64)
    edge_ptr = np.r_[0, np.cumsum([len(es) for es in per_graph])]
    try:
        ds = GraphDataset(x=x, node_ptr=np.r_[0, np.cumsum(npg)], edge_ptr=edge_ptr, src=src, dst=dst,
                          graph_ids=np.arange(len(npg)))
    except GraphValidationError as err:
        assert str(err)
        return
    pairs = set(zip((src + np.repeat(ds.node_ptr[:-1], np.diff(edge_ptr))).tolist(),
                    (dst + np.repeat(ds.node_ptr[:-1], np.diff(edge_ptr))).tolist()))
    assert len(pairs) == src.size and all((b, a) in pairs and a != b for a, b in pairs)
    assert np.isfinite(tmd_matrix(ds, depth=3)).all()


_json = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                               st.floats(allow_nan=True), st.text(max_size=5)),
                     lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                     max_leaves=12)


@FUZZ
@given(obj=st.fixed_dictionaries({}, optional={k: _json for k in ("train_ids", "test_ids", "medoids", "tau",
                                                                     "epsilon")}),
       raw=st.one_of(st.none(), st.binary(max_size=40)))
def test_fuzz_selection_json(obj, raw):
    from tasks.io import read_selection

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "selection.json"
        path.write_bytes(raw if raw is not None else json.dumps(obj).encode())
        sel = _loads_or_input_error(read_selection, str(path))
        if sel is not None:
            assert sel["medoids"].size and np.all(np.isfinite(sel["tau"]))


@FUZZ
@given(header=st.lists(st.sampled_from(["i", "j", "k"]), max_size=3, unique=True),
       rows=st.lists(st.lists(_cell, max_size=3), max_size=5))
def test_fuzz_pair_lists(header, rows):
    from tmdlib.datasets.documents import read_id_pairs

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pairs.csv"
        path.write_bytes(_csv(header, rows, "\n"))
        res = _loads_or_input_error(read_id_pairs, str(path), np.arange(5))
        if res is not None:
            assert all(((0 <= a) & (a < 5)).all() for a in res)


def test_pair_list_repeated_header(tmp_path):
    from tmdlib.datasets.documents import read_id_pairs

    path = tmp_path / "pairs.csv"
    path.write_text("i,j,i\n0,1,2\n")
    with pytest.raises(InputError):
        read_id_pairs(str(path), np.arange(5))


@pytest.mark.parametrize("header", ["graph_id,graph_id,label", "graph_id,y,y"])
def test_label_file_repeated_header(header, tmp_path):
    from tasks.io import read_labels
    from tmdlib.datasets.labels import validate_label_import

    path = tmp_path / "labels.csv"
    path.write_text(header + "\n0,0,1\n")
    with pytest.raises(InputError):
        validate_label_import(_label_table(str(path)), np.array([0]), np.arange(5), str(path))
    with pytest.raises(InputError):
        read_labels(str(path))


# --------------------------------------------------------------------------------------- the CLI


# --------------------------------------------------------------------------------------- security

CODE_DIRS = ("tmdlib", "tasks", "flows", "benchmarks", "tests")


def _sources():
    for d in CODE_DIRS:
        for p in sorted((ROOT / d).rglob("*.py")):
            yield p, p.read_text(encoding="utf-8")


def test_no_pickle_loading_anywhere():
    """No pickle.load(s); every torch.load has weights_only=True; every np.load has allow_pickle=False."""
    me = Path(__file__).resolve()
    for path, text in _sources():
        if path.resolve() == me:
            continue
        assert not re.search(r"\bpickle\.loads?\(|\bjoblib\.load\(|pd\.read_pickle\(", text), path
        for m in re.finditer(r"torch\.load\(([^)]*)\)", text):
            assert "weights_only=True" in m.group(1), f"{path}: {m.group(0)}"
        for m in re.finditer(r"np\.load\(([^)]*)\)", text):  # numpy's default is allow_pickle=False
            assert "allow_pickle" not in m.group(1) or "allow_pickle=False" in m.group(1), f"{path}: {m.group(0)}"
        assert not re.search(r"allow_pickle\s*=\s*True", text), path


def test_model_loader_refuses_pickled_objects(tmp_path):
    """A model file carrying a pickled object (code execution on load) is refused by load_model."""
    import torch

    from tasks.train import load_model

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    path = tmp_path / "model.pt"
    torch.save({"w": Evil()}, path)
    with pytest.raises(InputError, match="not a loadable state dict"):
        load_model(str(path), {})


@pytest.mark.parametrize("uri,shown", [
    ("https://alice:s3cr3t@mlflow.example.org/", "https://***@mlflow.example.org/"),
    ("postgresql://u:p%40ss@db:5432/mlflow", "postgresql://***@db:5432/mlflow"),
    ("http://token@host:5000", "http://***@host:5000"),
    ("sqlite:////work/mlflow.db", "sqlite:////work/mlflow.db"),
    ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),
    ("https://h/api?access_token=abc&x=1", "https://h/api?access_token=***&x=1"),
    ("databricks://profile?password=p;api_key=k", "databricks://profile?password=***;api_key=***"),
])
def test_tracking_uri_redaction(uri, shown):
    from tmdlib.reporting.provenance import redact_uri

    assert redact_uri(uri) == shown


def test_params_hold_no_credentials():
    text = (ROOT / "params.yaml").read_text()
    assert not re.search(r"(?i)(password|secret|token|api[_-]?key)\s*:", text)
    assert not re.search(r"://[^/\s:@]+:[^/\s@]+@", text)


@pytest.mark.parametrize("name", ["../evil", "/etc", "a/../../b", "..", ".git", "x\x00y", "~root", "a/b"])
def test_dataset_names_cannot_escape(name):
    from tmdlib.datasets import check_dataset_name

    with pytest.raises(InputError):
        check_dataset_name(name)


def test_checksum_list_cannot_escape(tmp_path):
    from tmdlib.datasets import verify_sha256sums

    (tmp_path / "SHA256SUMS").write_text("0" * 64 + "  sub/../../outside\n")
    with pytest.raises(InputError, match="escapes"):
        verify_sha256sums(tmp_path)
