"""Malformed inputs: every reader raises one InputError naming file, line/row and problem."""
from __future__ import annotations

import gzip
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import DATA, examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tmdlib.datasets import (check_dataset_name, get_dataset_info, read_graph_parquet, read_smiles_csv,
                             read_tu, validate_graph_table, verify_sha256sums)
from tmdlib.datasets._tu import read_numeric_text
from tmdlib import InputError

BAD = DATA / "bad"
TU = BAD / "tu"


def _raises(fn, *args, file: str, line: int | None, problem: str, **kwargs) -> InputError:
    """Call ``fn`` and check the InputError's file, line and problem text."""
    with pytest.raises(InputError) as info:
        fn(*args, **kwargs)
    err = info.value
    assert Path(err.path).name == file, str(err)
    assert err.line == line, str(err)
    assert problem.lower() in err.problem.lower(), str(err)
    prefix = f"{err.path}:{line}:" if line is not None else f"{err.path}:"
    assert str(err).startswith(prefix)
    return err


# --------------------------------------------------------------------------- TU corpus

TU_CASES = [
    # case folder,            file (TINY_...),                 line, problem substring
    ("non_integer_id", "TINY_A.txt", 3, "not an integer: 'x'"),
    ("float_id", "TINY_A.txt", 4, "not an integer: '3.0'"),
    ("non_integer_indicator", "TINY_graph_indicator.txt", 2, "not an integer"),
    ("out_of_range_id", "TINY_A.txt", 5, "out of range [1, 5]"),
    ("zero_id", "TINY_A.txt", 1, "out of range"),
    ("wrong_column_count", "TINY_A.txt", 2, "expected 2 comma-separated value(s), found 3"),
    ("unsorted_indicator", "TINY_graph_indicator.txt", 4, "not sorted"),
    ("noncontiguous_indicator", "TINY_graph_indicator.txt", 4, "not contiguous"),
    ("indicator_not_from_one", "TINY_graph_indicator.txt", 1, "must start at 1"),
    ("edges_across_graphs", "TINY_A.txt", 7, "joins graph 1 and graph 2"),
    ("label_count_short", "TINY_graph_labels.txt", 2, "has 1 graph label lines, expected 2"),
    ("label_count_extra", "TINY_graph_labels.txt", 3, "has 3 graph label lines, expected 2: extra"),
    ("node_label_count", "TINY_node_labels.txt", 5, "has 4 node label lines, expected 5"),
    ("blank_lines", "TINY_A.txt", 6, "out of range"),
]

TU_ATTR_CASES = [
    ("attribute_count", "TINY_node_attributes.txt", 6, "has 6 node attribute lines, expected 5"),
    ("attribute_ragged", "TINY_node_attributes.txt", 2, "expected 2 comma-separated value(s), found 1"),
    ("attribute_nan", "TINY_node_attributes.txt", 3, "non-finite"),
    ("attribute_inf", "TINY_node_attributes.txt", 4, "non-finite"),
]


def test_valid_corpus_folder_loads():
    table = read_tu(TU / "valid", name="TINY", node_attributes=True)
    validate_graph_table(table)
    assert table.num_rows == 2
    assert table.column("y").to_pylist() == [1.0, 0.0]  # raw labels 1, -1 -> ranks 1, 0
    assert len(table.column("x")[0][0]) == 3 + 2


@pytest.mark.parametrize("case,file,line,problem", TU_CASES)
def test_tu_corpus(case, file, line, problem):
    _raises(read_tu, TU / case, name="TINY", file=file, line=line, problem=problem)


@pytest.mark.parametrize("case,file,line,problem", TU_ATTR_CASES)
def test_tu_attribute_corpus(case, file, line, problem):
    _raises(read_tu, TU / case, name="TINY", node_attributes=True, file=file, line=line, problem=problem)


def test_attributes_ignored_unless_requested():
    read_tu(TU / "attribute_nan", name="TINY")  # no error: the file is not read


@pytest.mark.parametrize("case,file", [("missing_A", "TINY_A.txt"), ("missing_graph_labels", "TINY_graph_labels.txt")])
def test_tu_missing_required_file(case, file):
    _raises(read_tu, TU / case, name="TINY", file=file, line=None, problem="required TU file missing")


def test_tu_missing_attributes_file_when_requested(tmp_path):
    folder = _copy_valid(tmp_path)
    (folder / "TINY_node_attributes.txt").unlink()
    _raises(read_tu, folder, name="TINY", node_attributes=True, file="TINY_node_attributes.txt", line=None,
            problem="missing")


def test_tu_missing_folder(tmp_path):
    _raises(read_tu, tmp_path / "nope", file="nope", line=None, problem="not found")


def test_tu_gzipped_file_error_names_gz(tmp_path):
    folder = _copy_valid(tmp_path)
    (folder / "TINY_A.txt").unlink()
    (folder / "TINY_A.txt.gz").write_bytes(gzip.compress(b"1, 2\n2, 1\n2, 7\n"))
    _raises(read_tu, folder, name="TINY", file="TINY_A.txt.gz", line=3, problem="out of range")


def test_tu_corrupt_gzip(tmp_path):
    folder = _copy_valid(tmp_path)
    (folder / "TINY_A.txt").unlink()
    (folder / "TINY_A.txt.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    _raises(read_tu, folder, name="TINY", file="TINY_A.txt.gz", line=None, problem="cannot read")


def test_tu_crlf_line_numbers(tmp_path):
    folder = _copy_valid(tmp_path)
    (folder / "TINY_graph_indicator.txt").write_bytes(b"1\r\n1\r\n1\r\n2\r\n2\r\n")
    (folder / "TINY_A.txt").write_bytes(b"1,2\r\n2,1\r\n2,x\r\n")
    _raises(read_tu, folder, name="TINY", file="TINY_A.txt", line=3, problem="not an integer")


def test_tu_huge_node_label_range(tmp_path):
    folder = _copy_valid(tmp_path)
    (folder / "TINY_node_labels.txt").write_text("0\n1\n0\n999999\n1\n")
    _raises(read_tu, folder, name="TINY", file="TINY_node_labels.txt", line=4, problem="exceeds the limit")


def test_read_numeric_text_integer_overflow(tmp_path):
    f = tmp_path / "big.txt"
    f.write_text("1\n99999999999999999999\n")
    _raises(read_numeric_text, f, 1, file="big.txt", line=2, problem="64-bit range")


def _copy_valid(tmp_path: Path) -> Path:
    dst = tmp_path / "TINY"
    shutil.copytree(TU / "valid", dst)
    return dst


# --------------------------------------------------------------------------- SMILES


@pytest.mark.parametrize("file,line,problem,label", [
    ("invalid_smiles.csv", 3, "invalid SMILES 'C1CC'", None),
    ("empty_smiles.csv", 4, "invalid SMILES ''", None),
    ("missing_column.csv", 1, "no SMILES column (smiles, SMILES, Canonical SMILES", None),
    ("bad_label.csv", 3, "label 'active' is not a number", "label"),
    ("short_row.csv", 3, "1 fields, header has 2", None),
])
def test_smiles_corpus(file, line, problem, label):
    _raises(read_smiles_csv, BAD / "smiles" / file, label_column=label, file=file, line=line, problem=problem)


def test_smiles_missing_label_column():
    _raises(read_smiles_csv, BAD / "smiles" / "bad_label.csv", label_column="y", file="bad_label.csv", line=1,
            problem="no column 'y'")


# --------------------------------------------------------------------------- Parquet / schema


@pytest.fixture(scope="module")
def tiny_table() -> pa.Table:
    return read_tu(TU / "valid", name="TINY")


def _with(table: pa.Table, name: str, values: list, typ: pa.DataType | None = None) -> pa.Table:
    """``table`` with column ``name`` replaced by ``values``."""
    i = table.column_names.index(name)
    typ = typ or table.schema.field(name).type
    return table.set_column(i, pa.field(name, typ), pa.array(values, type=typ))


def _parquet(tmp_path: Path, table: pa.Table) -> Path:
    path = tmp_path / "graphs.parquet"
    pq.write_table(table, path)
    return path


def test_not_parquet():
    _raises(read_graph_parquet, BAD / "parquet" / "not_parquet.parquet", file="not_parquet.parquet", line=None,
            problem="not a readable Parquet file")


def test_parquet_missing_file(tmp_path):
    _raises(read_graph_parquet, tmp_path / "none.parquet", file="none.parquet", line=None, problem="not found")


def test_parquet_missing_column(tmp_path, tiny_table):
    path = _parquet(tmp_path, tiny_table.drop_columns(["edge_dst"]))
    _raises(read_graph_parquet, path, file="graphs.parquet", line=None, problem="missing column(s) 'edge_dst'")


def test_parquet_wrong_type(tmp_path, tiny_table):
    x = tiny_table.column("x").cast(pa.list_(pa.list_(pa.float64())))
    path = _parquet(tmp_path, tiny_table.set_column(2, "x", x))
    _raises(read_graph_parquet, path, file="graphs.parquet", line=None,
            problem="column 'x' has type list<list<double>>, expected list<list<float32>>")


def test_parquet_wrong_edge_type(tmp_path, tiny_table):
    src = tiny_table.column("edge_src").cast(pa.list_(pa.float32()))
    path = _parquet(tmp_path, tiny_table.set_column(3, "edge_src", src))
    _raises(read_graph_parquet, path, file="graphs.parquet", line=None, problem="column 'edge_src' has type")


def test_parquet_edge_out_of_range(tmp_path, tiny_table):
    src, dst = tiny_table.column("edge_src").to_pylist(), tiny_table.column("edge_dst").to_pylist()
    src[1] = [0, 2]  # graph 2 has nodes 0..1
    dst[1] = [2, 0]
    t = _with(_with(tiny_table, "edge_src", src), "edge_dst", dst)
    _raises(read_graph_parquet, _parquet(tmp_path, t), file="graphs.parquet", line=2, problem="outside [0, 2)")


def test_parquet_nan_feature(tmp_path, tiny_table):
    x = tiny_table.column("x").to_pylist()
    x[1][0][1] = float("nan")
    _raises(read_graph_parquet, _parquet(tmp_path, _with(tiny_table, "x", x)), file="graphs.parquet", line=2,
            problem="non-finite feature")


def test_parquet_inf_feature(tmp_path, tiny_table):
    x = tiny_table.column("x").to_pylist()
    x[0][2][0] = float("inf")
    _raises(read_graph_parquet, _parquet(tmp_path, _with(tiny_table, "x", x)), file="graphs.parquet", line=1,
            problem="node 2 has a non-finite feature")


# direct validator cases (row numbers are 1-based graph rows)

def _edges(table, src, dst):
    return _with(_with(table, "edge_src", src), "edge_dst", dst)


VALIDATOR_CASES = [
    ("duplicate graph_id", lambda t: _with(t, "graph_id", [0, 0]), 2, "graph_id 0 is not unique"),
    ("num_nodes mismatch", lambda t: _with(t, "num_nodes", [3, 3]), 2, "num_nodes is 3 but x has 2 rows"),
    ("ragged features", lambda t: _with(t, "x", [t.column("x")[0].as_py(), [[1.0, 0, 0], [1.0, 0]]]), 2,
     "node 1 has 2 features, expected 3"),
    ("self loop", lambda t: _edges(t, [[0, 1, 1, 2], [0, 1]], [[1, 0, 1, 1], [1, 0]]), 1, "self-loop (1, 1)"),
    ("duplicate edge", lambda t: _edges(t, [[0, 0, 1], [0, 1]], [[1, 1, 0], [1, 0]]), 1, "duplicate edge (0, 1)"),
    ("asymmetric", lambda t: _edges(t, [[0, 1, 1], [0, 1]], [[1, 0, 2], [1, 0]]), 1,
     "(1, 2) is present but (2, 1) is not"),
    ("length mismatch", lambda t: _edges(t, [[0, 1], [0, 1]], [[1, 0], [1]]), 2,
     "edge_src has 2 entries but edge_dst has 1"),
    ("unsorted", lambda t: _edges(t, [t.column("edge_src")[0].as_py(), [1, 0]],
                                  [t.column("edge_dst")[0].as_py(), [0, 1]]), 2, "not sorted"),
    ("negative id", lambda t: _edges(t, [[0, -1], [0, 1]], [[-1, 0], [1, 0]]), 1, "outside [0, 3)"),
    ("null x", lambda t: _with(t, "x", [None, t.column("x")[1].as_py()]), 1, "column 'x' is null"),
]


@pytest.mark.parametrize("label,mutate,row,problem", VALIDATOR_CASES, ids=[c[0] for c in VALIDATOR_CASES])
def test_validator(label, mutate, row, problem, tiny_table):
    _raises(validate_graph_table, mutate(tiny_table), "store.parquet", file="store.parquet", line=row,
            problem=problem)


def test_validator_rejects_non_table():
    _raises(validate_graph_table, {"x": []}, "f.parquet", file="f.parquet", line=None, problem="pyarrow.Table")


# --------------------------------------------------------------------------- names and checksums


@pytest.mark.parametrize("name", ["../x", "/abs", "a/b", ".hidden", "a..b", "..", "a\\b", "", "x" * 200, "a b"])
def test_escaping_names_rejected(name):
    with pytest.raises(InputError, match="invalid dataset name"):
        check_dataset_name(name)


def test_unknown_dataset_lists_known():
    with pytest.raises(InputError) as info:
        get_dataset_info("FOO")
    assert "unknown dataset 'FOO'" in str(info.value)
    assert "MUTAG" in str(info.value) and "ogbg-molbace" in str(info.value)


def test_unknown_dataset_name_is_checked_first():
    with pytest.raises(InputError, match="invalid dataset name"):
        get_dataset_info("../MUTAG")


def _sums(tmp_path: Path, content: bytes, listed_digest: str) -> Path:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f.txt").write_bytes(content)
    (tmp_path / "SHA256SUMS").write_text(f"{listed_digest}  sub/f.txt\n")
    return tmp_path


def test_checksum_mismatch(tmp_path):
    root = _sums(tmp_path, b"hello\n", "0" * 64)
    _raises(verify_sha256sums, root, file="f.txt", line=None, problem="sha256 mismatch")


def test_checksum_missing_file(tmp_path):
    root = _sums(tmp_path, b"hello\n", "0" * 64)
    (root / "sub" / "f.txt").unlink()
    _raises(verify_sha256sums, root, file="f.txt", line=None, problem="missing")


def test_checksum_malformed_and_escaping_lines(tmp_path):
    (tmp_path / "SHA256SUMS").write_text("abc  f.txt\n")
    _raises(verify_sha256sums, tmp_path, file="SHA256SUMS", line=1, problem="malformed")
    (tmp_path / "SHA256SUMS").write_text("# comment\n" + "0" * 64 + "  ../etc/passwd\n")
    _raises(verify_sha256sums, tmp_path, file="SHA256SUMS", line=2, problem="escapes")


def test_checksum_only_matching_nothing(tmp_path):
    import hashlib
    root = _sums(tmp_path, b"hello\n", hashlib.sha256(b"hello\n").hexdigest())
    assert verify_sha256sums(root, only="sub") == ["sub/f.txt"]
    _raises(verify_sha256sums, root, only="other", file="SHA256SUMS", line=None, problem="no entries")


# --------------------------------------------------------------------------- fuzz


def _fuzz_folder(tmp: str, files: dict[str, bytes]) -> Path:
    folder = Path(tmp) / "F"
    shutil.copytree(TU / "valid", folder)
    for suffix, data in files.items():
        (folder / f"TINY_{suffix}.txt").write_bytes(data)
    return folder


def _loads_or_input_error(folder: Path, node_attributes: bool = False) -> None:
    try:
        table = read_tu(folder, name="TINY", node_attributes=node_attributes)
    except InputError as err:
        assert err.path is not None
        return
    validate_graph_table(table)


FUZZ = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(target=st.sampled_from(["A", "graph_indicator", "graph_labels", "node_labels", "node_attributes"]),
       data=st.binary(max_size=64))
def test_fuzz_random_bytes(target, data):
    with tempfile.TemporaryDirectory() as tmp:
        _loads_or_input_error(_fuzz_folder(tmp, {target: data}), node_attributes=True)


_small_int = st.integers(min_value=-2, max_value=7)
_lines = st.lists(st.lists(_small_int, min_size=1, max_size=3), max_size=12)


def _text(rows: list[list[int]], sep: str, eol: str) -> bytes:
    return "".join(sep.join(map(str, r)) + eol for r in rows).encode()


@FUZZ
@given(gi=st.lists(st.integers(min_value=0, max_value=4), min_size=0, max_size=10),
       labels=_lines, node_labels=_lines, edges=_lines,
       sep=st.sampled_from([",", ", "]), eol=st.sampled_from(["\n", "\r\n"]))
def test_fuzz_small_integer_files(gi, labels, node_labels, edges, sep, eol):
    files = {"graph_indicator": _text([[v] for v in sorted(gi)], sep, eol), "graph_labels": _text(labels, sep, eol),
             "node_labels": _text(node_labels, sep, eol), "A": _text(edges, sep, eol)}
    with tempfile.TemporaryDirectory() as tmp:
        _loads_or_input_error(_fuzz_folder(tmp, files))


@FUZZ
@given(n_graphs=st.integers(1, 4), sizes=st.lists(st.integers(1, 4), min_size=4, max_size=4),
       edges=st.lists(st.tuples(st.integers(-1, 17), st.integers(-1, 17)), max_size=20))
def test_fuzz_structured_edges(n_graphs, sizes, edges):
    """Plausible TU folders with random edges: load (valid, symmetric) or a located InputError."""
    gi = np.repeat(np.arange(1, n_graphs + 1), sizes[:n_graphs])
    files = {"graph_indicator": _text([[v] for v in gi], ",", "\n"),
             "graph_labels": _text([[g % 2] for g in range(n_graphs)], ",", "\n"),
             "node_labels": _text([[v % 3] for v in range(gi.size)], ",", "\n"),
             "A": _text([list(e) for e in edges], ", ", "\n")}
    with tempfile.TemporaryDirectory() as tmp:
        folder = _fuzz_folder(tmp, files)
        try:
            table = read_tu(folder, name="TINY")
        except InputError as err:
            assert err.line is not None and Path(err.path).name == "TINY_A.txt"
            return
        validate_graph_table(table)
        assert table.num_rows == n_graphs
