"""Label hand-off flows: ``tmdsub label-requests`` and ``tmdsub labels import``."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from prefect import flow

from tasks import io
from tasks.graphs import load_graph_store
from tasks.labels import build_requests, import_labels, write_labels, write_requests


@flow(name="label-requests")
def label_requests_flow(graphs: str, selection: str, out_dir: str) -> dict:
    """Export the graphs to label (largest clusters first) with a manifest for the labelling team."""
    sel = json.loads(Path(selection).read_text())
    requests = build_requests(graphs, sel)
    manifest = {"dataset_sha256": io.sha256_file(graphs), "selection_sha256": io.sha256_file(selection),
                "method": sel["method"], "fraction": sel.get("fraction"), "count": sel.get("count"),
                "k": sel["k"], "seed": sel["seed"], "epsilon": sel.get("epsilon"),
                "requested": requests.num_rows, "train_graphs": sel["n_train"]}
    write_requests(out_dir, requests, manifest)
    return manifest


@flow(name="labels-import")
def labels_import_flow(graphs: str, requests: str, source: str, out_dir: str) -> dict:
    """Validate imported labels against the requests (or stand in with the dataset's own labels, flagged)."""
    import pyarrow.parquet as pq

    ds = load_graph_store(graphs)
    requested = pq.read_table(requests, columns=["graph_id"]).column("graph_id").to_numpy()
    order = np.argsort(ds.graph_ids)
    known = ds.graph_ids[order]
    y = None if ds.y is None else ds.y[order]
    gids, labels, meta = import_labels(source, requested, known, y)
    write_labels(out_dir, gids, labels, meta)
    return {**meta, "labelled": int(len(gids))}
