"""Label hand-off tasks: export the label requests, import (or stand in for) the labels."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
from prefect import task

from tmdlib import InputError

from . import io

STANDIN = "benchmark-standin"


@task(name="label-requests", persist_result=False)
def build_requests(store_path: str, selection: dict):
    """Label-request table of a selection: graph_id, source id (SMILES for molecules), τ, rank."""
    import pyarrow.parquet as pq
    from tmdlib.labels import label_request_table

    cols = pq.read_schema(store_path).names
    table = pq.read_table(store_path, columns=["graph_id"] + (["smiles"] if "smiles" in cols else []))
    gids = table.column("graph_id").to_numpy()
    pos_of = {int(g): k for k, g in enumerate(gids)}
    medoids = np.array([pos_of[int(g)] for g in selection["medoids"]], dtype=np.int64)
    source = table.column("smiles").to_pylist() if "smiles" in cols else None
    return label_request_table(gids, medoids, np.rint(selection["tau"]).astype(np.int64), source)


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
    from tmdlib.labels import validate_label_import

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
