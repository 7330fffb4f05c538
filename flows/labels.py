"""Label hand-off flows: ``tmdsub label-requests`` and ``tmdsub labels import``."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from prefect import flow

from tasks import io
from tasks.graphs import (STORE_HASH_KEY, check_same_store, load_graph_store, store_content_hash, store_graph_ids,
                          store_task)
from tasks.labels import (build_requests, commit_labels, import_labels, merge_labels, read_ledger, request_smiles,
                          sdf_note, write_labels, write_requests)


@flow(name="label-requests")
def label_requests_flow(graphs: str, selection: str, out_dir: str, labelled: str | None = None) -> dict:
    """Export the graphs still to label (largest clusters first) with a manifest for the labelling team.

    Medoids already in the label ledger ``labelled`` are not requested again.  Writes ``label_requests.csv``,
    ``.parquet``, ``.sdf`` (molecules with 2D coordinates; no records for a dataset without SMILES, as the
    manifest's ``sdf`` entry says) and ``manifest.json``.
    """
    sel = json.loads(Path(selection).read_text())
    # a selection made for another store is refused (the store is read whole only when the selection
    # records its hash: older selections are accepted unchecked)
    check_same_store(selection, sel, graphs, lambda: store_content_hash(load_graph_store(graphs)), "selection")
    known = store_graph_ids(graphs)
    have = set(read_ledger(labelled, known, store_task(graphs)).column("graph_id").to_pylist())
    requests = build_requests(graphs, sel, have)
    smiles = request_smiles(graphs, requests)
    manifest = {"dataset_sha256": io.sha256_file(graphs), "selection_sha256": io.sha256_file(selection),
                "method": sel["method"], "fraction": sel.get("fraction"), "count": sel.get("count"),
                "k": sel["k"], "seed": sel["seed"], "epsilon": sel.get("epsilon"),
                "epsilon_mean": sel.get("epsilon_mean", sel.get("epsilon")),
                "requested": requests.num_rows, "reused": int(sum(int(g) in have for g in sel["medoids"])),
                "train_graphs": sel["n_train"], "graphs": int(len(known)), "ledger": labelled,
                "ledger_size": len(have), "sdf": sdf_note(smiles), STORE_HASH_KEY: sel.get(STORE_HASH_KEY)}
    write_requests(out_dir, requests, manifest, smiles)
    return manifest


@flow(name="labels-import")
def labels_import_flow(graphs: str, requests: str, source: str, out_dir: str, labelled: str | None = None) -> dict:
    """Validate imported labels against the requests and the dataset's task (or stand in with the dataset's own
    labels, flagged); nothing is written when a value does not fit.

    The labels written are the ledger's (``labelled``: reused) plus the new ones.
    """
    ds, task = load_graph_store(graphs), store_task(graphs)
    requested = store_graph_ids(requests)
    manifest_path = Path(requests).with_name("manifest.json")
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    store_hash = store_content_hash(ds)  # the requests must have been made from this store
    check_same_store(str(manifest_path), manifest, graphs, store_hash, "label request list")
    order = np.argsort(ds.graph_ids)
    known = ds.graph_ids[order]
    y = None if ds.y is None else ds.y[order]
    gids, labels, meta = import_labels(source, requested, known, y, task)
    if meta.get("benchmark_mode"):  # the dataset's labels may themselves be a stand-in (MOSES): say so
        import pyarrow.parquet as pq

        from tmdlib.datasets.schema import META_LABEL_RULE

        rule = (pq.read_schema(graphs).metadata or {}).get(META_LABEL_RULE.encode(), b"").decode()
        if rule.startswith("STAND-IN"):
            meta = {**meta, "dataset_labels": rule}
    ledger = read_ledger(labelled, known, task)
    all_ids, all_y = merge_labels(ledger, gids, labels, source)
    meta = {**meta, STORE_HASH_KEY: store_hash}
    write_labels(out_dir, all_ids, all_y, meta, task)  # labels.json stays the same when only the ledger grew
    return {**meta, "labelled": int(len(all_ids)), "new": int(len(requested)), "from_ledger": int(ledger.num_rows),
            "task": task.type}


@flow(name="labels-commit")
def labels_commit_flow(graphs: str, labels_csv: str, ledger: str) -> dict:
    """Append the labels a run used to the dataset's label ledger (so later runs reuse them)."""
    known = store_graph_ids(graphs)
    return commit_labels(ledger, labels_csv, known, store_task(graphs))
