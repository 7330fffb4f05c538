"""Label hand-off (tmdlib.datasets.labels): request tables and validated label imports."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from tmdlib.select import kmedoids_coreset
from tmdlib import InputError
from tmdlib.datasets.labels import LABEL_REQUEST_SCHEMA, label_request_table, validate_label_import

GRAPH_IDS = np.array([10, 11, 12, 13, 14, 15])


def test_request_table_ranks():
    t = label_request_table(GRAPH_IDS, medoids=[4, 0, 2, 5], tau=[2, 1, 2, 1])
    assert t.schema == LABEL_REQUEST_SCHEMA
    assert t.column("graph_id").to_pylist() == [12, 14, 10, 15]  # tau 2, 2 (id order), then 1, 1
    assert t.column("tau").to_pylist() == [2, 2, 1, 1]
    assert t.column("rank").to_pylist() == [1, 2, 3, 4]
    assert t.column("source_id").to_pylist() == ["12", "14", "10", "15"]
    smiles = ["C", "CC", "CCC", "CCCC", "O", "N"]
    t2 = label_request_table(GRAPH_IDS, [4, 0], [1, 5], source_ids=smiles)
    assert t2.column("source_id").to_pylist() == ["C", "O"]
    for bad in (dict(medoids=[0, 0], tau=[1, 1]), dict(medoids=[9], tau=[1]), dict(medoids=[0], tau=[0]),
                dict(medoids=[0, 1], tau=[1])):
        with pytest.raises(ValueError):
            label_request_table(GRAPH_IDS, **bad)
    with pytest.raises(ValueError):
        label_request_table(GRAPH_IDS, [0], [1], source_ids=["x"])


def read(tmp_path, text):
    p = tmp_path / "labels.csv"
    p.write_text(text)
    return p, pacsv.read_csv(p)


def test_validate_ok(tmp_path):
    p, table = read(tmp_path, "graph_id,label\n13,1\n10,0\n12,1\n")
    out = validate_label_import(table, requested_ids=[10, 13], known_ids=GRAPH_IDS, path=p, allowed_labels={0, 1})
    assert out.column("graph_id").to_pylist() == [10, 12, 13]  # extra known id 12 accepted
    assert out.column("label").to_pylist() == [0.0, 1.0, 1.0]
    assert out.schema.field("label").type == pa.float64()


def test_validate_lists_all_offenders(tmp_path):
    text = ("graph_id,label\n"
            "10,1\n"      # 2 ok
            "99,0\n"      # 3 unknown id
            "11,abc\n"    # 4 non-numeric label
            "12,nan\n"    # 5 NaN
            "10,0\n"      # 6 duplicate of line 2
            "13,inf\n"    # 7 infinite
            "x7,1\n"      # 8 id not an integer
            "14,\n"       # 9 empty label
            "11,2\n")     # 10 duplicate of line 4 and label not allowed
    p, table = read(tmp_path, text)
    with pytest.raises(InputError) as exc:
        validate_label_import(table, requested_ids=[10, 11, 15], known_ids=GRAPH_IDS, path=p, allowed_labels=[0, 1])
    err = exc.value
    msg = str(err)
    assert str(p) in msg
    lines = sorted({ln for ln, _ in err.offenders if ln is not None})
    assert lines == [2, 3, 4, 5, 7, 8, 9, 10]
    for needle in ("line 3: unknown graph_id 99", "line 4: label 'abc' is not a finite number",
                   "line 5: label", "duplicate graph_id 10 on lines 2, 6", "duplicate graph_id 11 on lines 4, 10",
                   "line 7: label", "line 8: graph_id 'x7' is not an integer", "line 9: label",
                   "line 10: label '2' is not one of [0.0, 1.0]", "no label for 1 requested graph_id(s): 15"):
        assert needle in msg, needle


def test_validate_numeric_columns_and_line_numbers(tmp_path):
    table = pa.table({"graph_id": [10, 11, 77], "label": [0.5, float("nan"), 1.0]})
    with pytest.raises(InputError) as exc:
        validate_label_import(table, [10], GRAPH_IDS, "x.csv", line_numbers=[3, 5, 8])
    assert [ln for ln, _ in exc.value.offenders] == [5, 8]
    with pytest.raises(InputError) as exc:
        validate_label_import(pa.table({"id": [1], "label": [0]}), [1], [1], "y.csv")
    assert exc.value.line == 1 and "graph_id" in str(exc.value)


def test_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    pts = rng.normal(size=(30, 2))
    d = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
    ids = 1000 + np.arange(30)
    y = rng.integers(0, 2, 30).astype(float)
    cs = kmedoids_coreset(d, 5, seed=1)
    req = label_request_table(ids, cs.medoids, cs.tau)
    pacsv.write_csv(req, tmp_path / "request.csv")
    back = pacsv.read_csv(tmp_path / "request.csv")
    assert back.equals(req.cast(back.schema))
    # annotator answers in their own order
    answered = pa.table({"graph_id": back.column("graph_id").to_numpy()[::-1],
                         "label": y[back.column("graph_id").to_numpy()[::-1] - 1000]})
    pacsv.write_csv(answered, tmp_path / "labels.csv")
    out = validate_label_import(pacsv.read_csv(tmp_path / "labels.csv"), req.column("graph_id").to_numpy(), ids,
                                tmp_path / "labels.csv", allowed_labels=[0, 1])
    assert out.column("graph_id").to_pylist() == sorted(ids[cs.medoids].tolist())
    assert np.array_equal(out.column("label").to_numpy(), y[np.sort(cs.medoids)])
