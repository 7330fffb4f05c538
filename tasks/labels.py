"""Label hand-off tasks: export the label requests, import (or stand in for) the labels."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
from prefect import task

from tmdlib import InputError

from . import io

STANDIN = "benchmark-standin"


LEDGER_HEADER = "graph_id,label,source"


def read_ledger(path: str | None, known: np.ndarray) -> pa.Table:
    """The label ledger (``graph_id,label[,source]``: every label paid for so far), validated.

    The ledger lives at ``data/labelled/<DATASET>.csv`` and only grows (``tmdsub labels commit``);
    a missing file is an empty ledger.  Returns :data:`tmdlib.datasets.labels.LABEL_SCHEMA` rows.
    """
    from tmdlib.datasets.labels import LABEL_SCHEMA, validate_label_import

    if not path or not Path(path).exists():
        return LABEL_SCHEMA.empty_table()
    raw = io.read_text_csv(path, ("graph_id", "label"), what="label ledger")
    return validate_label_import(raw, [], known, path)


def merge_labels(ledger: pa.Table, new_ids: np.ndarray, new_y: np.ndarray, path: str | None) -> tuple:
    """``(graph_ids, y)`` of the ledger plus new labels; a graph labelled twice differently is an error."""
    old = dict(zip(ledger.column("graph_id").to_pylist(), ledger.column("label").to_pylist()))
    clash = [(int(g), old[int(g)], float(v)) for g, v in zip(new_ids, new_y) if int(g) in old and old[int(g)] != float(v)]
    if clash:
        shown = ", ".join(f"graph {g}: ledger {a!r}, new {b!r}" for g, a, b in clash[:20])
        raise InputError(path, f"{len(clash)} graph(s) already in the label ledger with another label ({shown})")
    merged = {**old, **{int(g): float(v) for g, v in zip(new_ids, new_y)}}
    ids = np.array(sorted(merged), dtype=np.int64)
    return ids, np.array([merged[int(g)] for g in ids], dtype=np.float64)


@task(name="commit-labels", persist_result=False)
def commit_labels(ledger_path: str, labels_csv: str, known: np.ndarray) -> dict:
    """Append to the ledger the labels of ``labels.csv`` it does not hold yet (atomic rewrite)."""
    from .train import read_labels

    ledger = read_ledger(ledger_path, known)
    labels, meta = read_labels(labels_csv)
    have = set(ledger.column("graph_id").to_pylist())
    new = {g: y for g, y in sorted(labels.items()) if g not in have}
    source = meta.get("source", "unknown") if not meta.get("sha256") else f"import:{meta['sha256'][:12]}"
    p = Path(ledger_path)
    text = p.read_text() if p.exists() else LEDGER_HEADER + "\n"
    if text and not text.endswith("\n"):
        text += "\n"
    text += "".join(f"{g},{y!r},{source}\n" for g, y in new.items())
    if new:
        io.write_text(p, text)
    return {"ledger": str(p), "added": len(new), "total": len(have) + len(new)}


@task(name="label-requests", persist_result=False)
def build_requests(store_path: str, selection: dict, labelled: set | None = None):
    """Label-request table of a selection: graph_id, source id (SMILES for molecules), τ, rank.

    Medoids in ``labelled`` (graph ids already in the ledger) are left out: only graphs that still
    need a label are requested, ranked 1.. by cluster size.
    """
    import pyarrow.parquet as pq
    from tmdlib.datasets.labels import label_request_table

    cols = pq.read_schema(store_path).names
    table = pq.read_table(store_path, columns=["graph_id"] + (["smiles"] if "smiles" in cols else []))
    gids = table.column("graph_id").to_numpy()
    pos_of = {int(g): k for k, g in enumerate(gids)}
    medoids = np.array([pos_of[int(g)] for g in selection["medoids"]], dtype=np.int64)
    source = table.column("smiles").to_pylist() if "smiles" in cols else None
    full = label_request_table(gids, medoids, np.rint(selection["tau"]).astype(np.int64), source)
    keep = ~np.isin(full.column("graph_id").to_numpy(), np.array(sorted(labelled or ()), dtype=np.int64))
    requests = full.filter(pa.array(keep))
    return requests.set_column(3, "rank", pa.array(np.arange(1, requests.num_rows + 1), pa.int64()))


@task(name="write-requests", persist_result=False)
def write_requests(out_dir: str, requests: pa.Table, manifest: dict) -> str:
    """Write label_requests.csv/.parquet and manifest.json atomically."""
    import pyarrow.csv as pacsv

    out = Path(out_dir)
    with io.atomic_path(out / "label_requests.csv") as tmp:
        pacsv.write_csv(requests, tmp)
    io.write_parquet(out / "label_requests.parquet", requests)
    io.write_json(out / "manifest.json", manifest)
    return str(out)


def read_label_file(path: str) -> pa.Table:
    """Read a user's ``graph_id,label`` CSV with every cell as text (validation parses them)."""
    return io.read_text_csv(path, what="label file")


@task(name="import-labels", persist_result=False)
def import_labels(source: str, requested: np.ndarray, known: np.ndarray, dataset_y: np.ndarray | None) -> tuple:
    """Validated labels ``(graph_ids, y, meta)``; from a user file, or the flagged benchmark stand-in."""
    from tmdlib.datasets.labels import validate_label_import

    if source == STANDIN:
        if dataset_y is None:
            raise InputError(None, "the dataset has no labels to stand in with")
        pos = np.searchsorted(known, requested)
        y = dataset_y[pos]
        meta = {"source": STANDIN, "benchmark_mode": True,
                "warning": "labels were NOT imported: the dataset's own labels were joined for the requested ids "
                           "only (benchmark stand-in for a labelling round)"}
        return np.asarray(requested), y, meta
    table = validate_label_import(read_label_file(source), requested, known, source)
    meta = {"source": "import", "benchmark_mode": False, "file": str(source), "sha256": io.sha256_file(source)}
    return table.column("graph_id").to_numpy(), table.column("label").to_numpy().astype(float), meta


@task(name="write-labels", persist_result=False)
def write_labels(out_dir: str, graph_ids: np.ndarray, y: np.ndarray, meta: dict) -> str:
    """labels.csv (graph_id,y) and labels.json atomically."""
    out = Path(out_dir)
    lines = ["graph_id,y"] + [f"{int(g)},{float(v)!r}" for g, v in zip(graph_ids, y)]
    io.write_text(out / "labels.csv", "\n".join(lines) + "\n")
    io.write_json(out / "labels.json", {**meta, "labelled": int(len(graph_ids))})
    return str(out)
