"""Readers on the real raw datasets, and round trips through TU, SMILES and Parquet."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from helpers import RAW, dense_x

from tmdlib.datasets import (ATOM_FEATURE_DIMS, DATASETS, canonical_edges, check_dataset_name,
                             get_dataset_info, graph_table_metadata, load_builtin, one_hot_atom_features,
                             read_graph_parquet, read_smiles_csv, read_tu, validate_graph_table,
                             verify_sha256sums, write_graph_parquet)
from tmdlib import GraphDataset
from tmdlib import InputError
from tmdlib.datasets import to_dataset  # noqa: E402

needs_raw = pytest.mark.skipif(not (RAW / "SHA256SUMS").is_file(), reason="data/raw not present")

_cache: dict[str, pa.Table] = {}


def table(name: str) -> pa.Table:
    """Each built-in dataset is read once per test session."""
    if name not in _cache:
        _cache[name] = load_builtin(name, RAW)
    return _cache[name]


# --------------------------------------------------------------------------- built-in datasets


GRAPH_SETS = [n for n, info in DATASETS.items() if info.kind != "smiles"]  # MOSES (1.58 M): see below


@needs_raw
@pytest.mark.parametrize("name", GRAPH_SETS)
def test_builtin_statistics(name):
    info = get_dataset_info(name)
    t = table(name)
    validate_graph_table(t, name)
    ds = to_dataset(t)
    assert len(ds) == t.num_rows == info.num_graphs
    assert round(float(ds.nodes_per_graph.mean()), 2) == pytest.approx(info.mean_nodes, abs=1e-9)
    assert round(float(ds.edges_per_graph.mean()), 2) == pytest.approx(info.mean_edges, abs=1e-9)
    assert np.array_equal(ds.graph_ids, np.arange(info.num_graphs))
    assert set(np.unique(ds.y)) == {0.0, 1.0}
    meta = graph_table_metadata(t)
    assert meta["tmdlib.source"] == info.kind and meta["tmdlib.features"]


@needs_raw
def test_mutag_features_labels():
    t = table("MUTAG")
    ds = to_dataset(t)
    assert ds.num_features == 7
    assert np.all(ds.x.sum(axis=1) == 1.0)
    labels = np.asarray(t.column("node_labels").combine_chunks().flatten())
    assert np.array_equal(ds.x.argmax(axis=1), labels - labels.min())
    y_raw = t.column("y_raw").to_numpy()
    assert set(y_raw) == {-1, 1}
    assert np.array_equal(ds.y, (y_raw == 1).astype(float))
    assert t.schema.field("node_labels").type == pa.list_(pa.int32())


@needs_raw
def test_mutag_edges_match_raw_file():
    """Independent per-graph check against the raw edge list (a slow, obvious implementation)."""
    ds = to_dataset(table("MUTAG"))
    a = np.loadtxt(RAW / "MUTAG" / "MUTAG_A.txt", delimiter=",", dtype=np.int64) - 1
    gi = np.loadtxt(RAW / "MUTAG" / "MUTAG_graph_indicator.txt", dtype=np.int64) - 1
    for g in (0, 1, 100, 187):
        start = int(np.flatnonzero(gi == g)[0])
        mine = a[gi[a[:, 0]] == g] - start
        expected = sorted({(int(u), int(v)) for u, v in mine} | {(int(v), int(u)) for u, v in mine})
        graph = ds[g]
        assert list(zip(graph.edge_index[0].tolist(), graph.edge_index[1].tolist())) == expected


@needs_raw
def test_proteins_node_attributes_after_one_hot():
    plain = to_dataset(table("PROTEINS"))
    t = read_tu(RAW / "PROTEINS", node_attributes=True)
    validate_graph_table(t)
    ds = to_dataset(t)
    assert plain.num_features == 3 and ds.num_features == 3 + 1
    assert np.array_equal(ds.x[:, :3], plain.x)
    attrs = np.loadtxt(RAW / "PROTEINS" / "PROTEINS_node_attributes.txt", dtype=np.float64)
    assert np.allclose(ds.x[:, 3], attrs.astype(np.float32))
    assert "node attributes" in graph_table_metadata(t)["tmdlib.features"]


@needs_raw
@pytest.mark.parametrize("name", ["ogbg-molbace", "ogbg-molbbbp"])
def test_ogb_encoding(name):
    from ogb.utils.features import get_atom_feature_dims

    assert tuple(get_atom_feature_dims()) == ATOM_FEATURE_DIMS
    t = table(name)
    ds = to_dataset(t)
    assert ds.num_features == sum(get_atom_feature_dims())
    assert np.all(ds.x.sum(axis=1) == 9.0)
    codes = np.asarray(t.column("atom_features").combine_chunks().flatten().flatten()).reshape(-1, 9)
    assert np.array_equal(one_hot_atom_features(codes), ds.x.astype(np.float32))
    smiles = t.column("smiles")
    assert smiles.null_count == 0 and smiles.type == pa.string()
    assert len(smiles) == len(ds)


def test_one_hot_l2_counts_differing_features():
    a = np.zeros((1, 9), dtype=np.int64)
    b = a.copy()
    b[0, [0, 6]] = [52, 3]  # two differing features
    xa, xb = one_hot_atom_features(a), one_hot_atom_features(b)
    assert np.linalg.norm(xa - xb) == pytest.approx(np.sqrt(2 * 2))


@needs_raw
def test_checksums_verify():
    listed = verify_sha256sums(RAW)
    assert "DD/DD_A.txt.gz" in listed and "ogbg_molbace/raw/edge.csv.gz" in listed
    assert verify_sha256sums(RAW, only="MUTAG") == [p for p in listed if p.startswith("MUTAG/")]


# --------------------------------------------------------------------------- round trips


def _write_tu(t: pa.Table, folder: Path, name: str, gz_edges: bool) -> None:
    """Write a TU-read table back in the TU layout (1-based global ids, CRLF line ends)."""
    ds = to_dataset(t)
    folder.mkdir()
    offset = np.repeat(ds.node_ptr[:-1], np.diff(ds.edge_ptr))
    edges = "".join(f"{s},{d}\r\n" for s, d in zip(ds.src + offset + 1, ds.dst + offset + 1)).encode()
    a_path = folder / f"{name}_A.txt"
    if gz_edges:
        (folder / f"{name}_A.txt.gz").write_bytes(gzip.compress(edges))
    else:
        a_path.write_bytes(edges)
    lines = lambda values: "".join(f"{v}\r\n" for v in values)  # noqa: E731
    (folder / f"{name}_graph_indicator.txt").write_text(lines(ds.graph_of_node + 1), newline="")
    (folder / f"{name}_graph_labels.txt").write_text(lines(t.column("y_raw").to_pylist()), newline="")
    labels = t.column("node_labels").combine_chunks().flatten().to_pylist()
    (folder / f"{name}_node_labels.txt").write_text(lines(labels), newline="")


@needs_raw
@pytest.mark.parametrize("gz_edges", [False, True])
def test_tu_round_trip(tmp_path, gz_edges):
    original = table("MUTAG")
    _write_tu(original, tmp_path / "COPY", "COPY", gz_edges)
    again = read_tu(tmp_path / "COPY")
    for col in ("graph_id", "num_nodes", "x_id", "edge_src", "edge_dst", "y", "y_raw", "node_labels"):
        assert again.column(col).equals(original.column(col)), col
    assert dense_x(again) == dense_x(original)
    assert graph_table_metadata(again)["tmdlib.name"] == "COPY"


def test_tu_without_node_labels_has_constant_feature(tmp_path):
    folder = tmp_path / "T"
    folder.mkdir()
    (folder / "T_A.txt").write_text("1, 2\n2, 1\n2, 2\n3, 4\n")  # self-loop dropped, 3->4 symmetrised
    (folder / "T_graph_indicator.txt").write_text("1\n1\n2\n2\n")
    (folder / "T_graph_labels.txt").write_text("3\n7\n")
    t = read_tu(folder)
    validate_graph_table(t)
    assert dense_x(t) == [[[1.0], [1.0]], [[1.0], [1.0]]]
    assert t.column("edge_src").to_pylist() == [[0, 1], [0, 1]]
    assert t.column("edge_dst").to_pylist() == [[1, 0], [1, 0]]
    assert t.column("y").to_pylist() == [0.0, 1.0]
    assert t.column("node_labels").null_count == 2


def test_canonical_edges():
    src, dst = canonical_edges(np.array([2, 0, 0, 1, 1]), np.array([0, 2, 2, 1, 0]), 3)
    assert src.tolist() == [0, 0, 1, 2] and dst.tolist() == [1, 2, 0, 0]


SMILES = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "[Na+].[Cl-]", "C"]


@needs_raw
def test_moses_is_built_in_with_a_flagged_label_standin():
    """The shipped MOSES file (checksum listed) reads streaming, in parallel chunks equal to one process,
    with OGB atom features, no real labels and a stand-in that says what it is."""
    info = get_dataset_info("MOSES")
    assert info.kind == "smiles" and info.num_graphs == 1_584_663 and info.standin == "logp"
    assert verify_sha256sums(RAW, only="MOSES") == ["MOSES/train.csv.gz", "MOSES/LICENSE", "MOSES/test.csv.gz"]
    one = load_builtin("MOSES", RAW, limit=1500, chunk_size=400, standin="logp")
    two = load_builtin("MOSES", RAW, limit=1500, chunk_size=300, workers=2, standin="logp")
    assert one.equals(two) and one.num_rows == 1500
    validate_graph_table(one, "MOSES")
    meta = graph_table_metadata(one)
    assert meta["tmdlib.label_rule"].startswith("STAND-IN LABEL, NOT A MEASUREMENT")
    y = np.asarray(one.column("y").to_pylist())
    assert set(np.unique(y)) == {0.0, 1.0} and 0.3 < y.mean() < 0.7  # about balanced by design
    from rdkit import Chem
    from rdkit.Chem import Crippen

    smi = one.column("smiles").to_pylist()
    assert all(y[i] == float(Crippen.MolLogP(Chem.MolFromSmiles(smi[i])) >= 2.75) for i in range(0, 1500, 97))
    ds = to_dataset(one)
    assert ds.num_features == sum(ATOM_FEATURE_DIMS) and len(ds.features) < 60  # dictionary-encoded atoms
    # the same molecules through the user path (a SMILES CSV, no stand-in): same graphs, no labels
    assert not any(v is not None for v in read_smiles_csv(RAW / "MOSES" / "train.csv.gz", limit=20)
                   .column("y").to_pylist())


def test_smiles_reader_streams_bad_rows_with_their_line(tmp_path):
    path = tmp_path / "pool.csv.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("SMILES\n" + "CCO\n" * 700 + "C1CC\n" + "CC\n" * 10)
    for workers in (1, 2):
        with pytest.raises(InputError, match=r"pool.csv.gz:702: invalid SMILES 'C1CC'"):
            read_smiles_csv(path, workers=workers, chunk_size=128)
    with pytest.raises(InputError, match="stand-in"):
        read_smiles_csv(path, label_column="SMILES", standin="logp")


def test_smiles_csv_without_labels(tmp_path):
    path = tmp_path / "mols.csv"
    path.write_text("id,smiles\n" + "".join(f"m{i},{s}\n" for i, s in enumerate(SMILES)))
    t = read_smiles_csv(path)
    validate_graph_table(t, path)
    ds = to_dataset(t)
    assert ds.nodes_per_graph.tolist() == [3, 7, 11, 2, 1]
    assert ds.edges_per_graph.tolist() == [2, 7, 11, 0, 0]
    assert ds.num_features == sum(ATOM_FEATURE_DIMS)
    assert t.column("y").null_count == len(SMILES)
    assert t.column("smiles").to_pylist() == SMILES
    assert graph_table_metadata(t)["tmdlib.source"] == "smiles"


def test_smiles_csv_with_labels(tmp_path):
    path = tmp_path / "mols.csv"
    path.write_text("smiles,activity\n" + "\n".join(f"{s},{v}" for s, v in zip(SMILES, ["1", "0", "", "nan", "2.5"])))
    t = read_smiles_csv(path, label_column="activity")
    assert t.column("y").to_pylist() == [1.0, 0.0, None, None, 2.5]


def test_smiles_column_matched_ignoring_case(tmp_path):
    """A MOSES-style header ``SMILES`` is found for the default ``smiles``; so is a label column in any case."""
    path = tmp_path / "moses.csv"
    path.write_text("SMILES,SPLIT,Activity\n" + "".join(f"{s},train,{i % 2}\n" for i, s in enumerate(SMILES)))
    t = read_smiles_csv(path, label_column="activity")
    assert t.column("smiles").to_pylist() == SMILES
    assert t.column("y").to_pylist() == [float(i % 2) for i in range(len(SMILES))]


def test_smiles_column_exact_name_wins_and_ambiguity_names_the_choices(tmp_path):
    path = tmp_path / "two.csv"
    path.write_text("SMILES,smiles\nC,CC\n")
    assert read_smiles_csv(path).column("smiles").to_pylist() == ["CC"]  # the exact name
    assert read_smiles_csv(path, smiles_column="SMILES").column("smiles").to_pylist() == ["C"]
    with pytest.raises(InputError) as err:
        read_smiles_csv(path, smiles_column="Smiles")
    assert err.value.line == 1 and "'SMILES', 'smiles'" in str(err.value) and "ambiguous" in str(err.value)


@needs_raw
def test_smiles_csv_matches_ogb_raw_features(tmp_path):
    """smiles2graph on the mapping SMILES reproduces OGB's pre-featurised graphs."""
    ogb = table("ogbg-molbace").slice(0, 25)
    path = tmp_path / "bace.csv"
    path.write_text("smiles,y\n" + "".join(f"{s},{y}\n" for s, y in zip(ogb.column("smiles").to_pylist(),
                                                                       ogb.column("y").to_pylist())))
    t = read_smiles_csv(path, label_column="y")
    for col in ("num_nodes", "edge_src", "edge_dst", "y", "atom_features", "smiles"):
        assert t.column(col).equals(ogb.column(col)), col
    assert dense_x(t) == dense_x(ogb)


@needs_raw
@pytest.mark.parametrize("name", ["MUTAG", "ogbg-molbbbp"])
def test_parquet_round_trip(tmp_path, name):
    t = table(name)
    path = tmp_path / f"{name}.parquet"
    write_graph_parquet(t, path)
    back = read_graph_parquet(path)
    assert back.equals(t)
    assert graph_table_metadata(back) == graph_table_metadata(t)
    assert np.array_equal(to_dataset(back).x, to_dataset(t).x)


# --------------------------------------------------------------------------- registry


def test_registry_entries_are_relative_and_safe():
    for name, info in DATASETS.items():
        assert check_dataset_name(name) == name
        assert check_dataset_name(info.folder) == info.folder
        assert info.kind in ("tu", "ogb", "smiles") and info.citation
        assert info.file is None or check_dataset_name(info.file) == info.file
    assert get_dataset_info("ogbg-molbace").folder == "ogbg_molbace"
    assert get_dataset_info("DD").kind == "tu"
