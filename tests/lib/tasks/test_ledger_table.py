"""The label ledger reads as a table (tasks.ledger, in process): pandas.read_csv gives its columns, the seal beside
it catches a hand edit, a commit killed between the seal and the ledger leaves the previous ledger trusted, and a
ledger of format 2 (the seal on a `#` first line) is still read and converted by the next write."""
from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pytest

from tmdlib import InputError


def _history(values):
    from tmdlib.datasets.ledger import with_origin
    from tmdlib.datasets.labels import MEASUREMENT_SCHEMA

    n = len(values)
    m = pa.table({"graph_id": list(range(n)), "target": ["y"] * n, "value": values, "qualifier": [""] * n,
                  "note": [""] * n, "line": list(range(2, n + 2))}, schema=MEASUREMENT_SCHEMA)
    return with_origin(m, 1, "lab/round1.csv", "ab" * 32)


def test_the_ledger_is_a_plain_table_sealed_beside_it(tmp_path):
    from tasks.ledger import read_ledger_history, seal_path, write_ledger
    from tmdlib.datasets.ledger import LEDGER_COLUMNS
    from tmdlib.datasets import TaskSpec

    ledger = tmp_path / "POOL.csv"
    write_ledger(str(ledger), _history([5.5, 6.25, 7.0]), TaskSpec("regression", ("y",)))
    frame = pd.read_csv(ledger)
    assert tuple(frame.columns) == LEDGER_COLUMNS and frame["value"].tolist() == [5.5, 6.25, 7.0]
    seal = json.loads(seal_path(ledger).read_text())
    assert seal_path(ledger).name == "POOL.seal.json" and seal["format"] == 3 and seal["task"]["type"] == "regression"
    hist, meta = read_ledger_history(str(ledger))
    assert meta["digest_checked"] and meta["task"]["type"] == "regression" and hist.num_rows == 3
    # a second commit; then the ledger is put back as it was before it (a kill between the seal and the ledger)
    before = ledger.read_text()
    write_ledger(str(ledger), _history([5.5, 6.25, 7.0, 8.0]), TaskSpec("regression", ("y",)))
    ledger.write_text(before)
    hist, meta = read_ledger_history(str(ledger))
    assert meta["digest_checked"] and meta["interrupted"] and hist.num_rows == 3
    # a hand edit is refused, naming the seal to delete to trust it; deleting it reads the ledger unchecked
    ledger.write_text(before.replace("6.25", "9.99"))
    with pytest.raises(InputError, match=r"POOL.csv:1: the label ledger was edited by hand.*delete POOL.seal.json"):
        read_ledger_history(str(ledger))
    seal_path(ledger).unlink()
    hist, meta = read_ledger_history(str(ledger))
    assert not meta["digest_checked"] and 9.99 in hist.column("value").to_pylist()


def test_a_format_2_ledger_is_still_read_and_converted(tmp_path):
    from tasks.ledger import read_ledger_history, seal_path, write_ledger
    from tmdlib.datasets.ledger import LEDGER_MAGIC, ledger_digest

    body = "graph_id,target,value,qualifier,round,file,sha256,line\n0,y,5.5,,1,lab.csv,,2\n1,y,6.0,>,1,lab.csv,,3\n"
    task = {"type": "regression", "targets": ["y"], "classes": [], "source": "import"}
    head = {"format": 2, "sha256": ledger_digest(body), "task": task}
    ledger = tmp_path / "OLD.csv"
    ledger.write_text(LEDGER_MAGIC + json.dumps(head) + "\n" + body)
    hist, meta = read_ledger_history(str(ledger))
    assert meta["format"] == 2 and meta["digest_checked"] and hist.column("qualifier").to_pylist() == ["", ">"]
    assert hist.column("line").to_pylist() == [2, 3]
    from tmdlib.datasets import TaskSpec

    write_ledger(str(ledger), hist, TaskSpec.from_dict(task))
    assert not ledger.read_text().startswith("#") and pd.read_csv(ledger)["qualifier"].fillna("").tolist() == ["", ">"]
    hist2, meta2 = read_ledger_history(str(ledger))
    assert meta2["format"] == 3 and meta2["digest_checked"] and hist2.num_rows == 2 and seal_path(ledger).is_file()


def test_small_records_from_values():
    """The ledger's unsealed meta and commit summary, the node-subsampling-off record, the model's domain record."""
    import json

    import pyarrow as pa

    from tmdlib.datasets import ledger as lg
    from tmdlib.datasets.documents import nodes_off_record
    from tmdlib.models.records import domain_record

    assert lg.unsealed_meta(1) == {"format": 1, "task": None, "digest_checked": False, "sha256": None}
    hist, add = pa.table({"graph_id": [1, 2]}), pa.table({"graph_id": [2, 3]})
    assert lg.commit_summary("L.csv", hist, add, 4) == {"ledger": "L.csv", "added": 2, "round": 4,
                                                       "measurements": 4, "total": 3}
    assert lg.commit_summary("L.csv", hist, add.slice(0, 0), 4)["round"] is None
    assert nodes_off_record(None) is None and nodes_off_record(json.dumps({"method": "kbfs"})) is None
    off = nodes_off_record(json.dumps({"method": "off", "requested": "kbfs"}).encode())
    assert off == {"method": "off", "requested": "kbfs", "reason": "nodes.method: off",
                   "line": "node subsampling: off"}
    rec = domain_record(["C"], [], [float("nan")], "none", 0.9)
    assert rec["calibration_labels"][0] != rec["calibration_labels"][0] and rec["confidence"] == 0.9
