"""Label hand-off flows: ``tmdsub label-requests`` and ``tmdsub labels import``."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from prefect import flow

from tasks import io
from tmdlib.datasets._identity import STORE_HASH_KEY, check_same_store
from tmdlib.store import read_graph_ids
from tasks.graphs import open_store
from tasks.labels import build_requests, request_smiles, sdf_note, write_labels, write_requests
from tasks.ledger import commit_labels, read_ledger
from tmdlib import InputError
from tmdlib.datasets.intake import STANDIN, ImportRules, property_of, standin_measurements


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
    store = open_store(graphs)
    check_same_store(selection, sel, graphs, store.content_hash, "selection")
    known = store.graph_ids
    have = set(read_ledger(labelled, known, store.task).column("graph_id").to_pylist())
    requests = build_requests(graphs, sel, have)
    smiles = request_smiles(graphs, requests)
    manifest = {"dataset_sha256": io.sha256_file(graphs), "selection_sha256": io.sha256_file(selection),
                "method": sel["method"], "fraction": sel.get("fraction"), "count": sel.get("count"),
                "k": sel["k"], "seed": sel["seed"], "epsilon": sel.get("epsilon"),
                "epsilon_mean": sel.get("epsilon_mean", sel.get("epsilon")),
                "requested": requests.num_rows, "reused": int(sum(int(g) in have for g in sel["medoids"])),
                **requested_by_purpose(requests),
                "train_graphs": sel["n_train"], "graphs": int(len(known)), "ledger": labelled,
                "ledger_size": len(have), "sdf": sdf_note(smiles), STORE_HASH_KEY: sel.get(STORE_HASH_KEY)}
    write_requests(out_dir, requests, manifest, smiles)
    return manifest


def requested_by_purpose(requests) -> dict:
    """``requested_coreset`` / ``requested_audit``: how many of a round's requests are for training and for the audit
    sample (a benchmark selection has no audit sample: all coreset)."""
    if "purpose" not in requests.column_names:
        return {"requested_coreset": requests.num_rows, "requested_audit": 0}
    purpose = requests.column("purpose").to_pylist()
    return {"requested_coreset": purpose.count("coreset"), "requested_audit": purpose.count("audit")}


@flow(name="labels-import")
def labels_import_flow(graphs: str, requests: str, source: str | None, out_dir: str, labelled: str | None = None,
                       *, task: str | None = None, params: str | None = None, replicates: str | None = None,
                       censored: str | None = None, max_spread: float | None = None) -> dict:
    """Import what came back from the lab (or stand in with the dataset's own labels, flagged) with the ledger's
    labels, by the stated rules (docs/pipeline.md#labels); nothing is written when a key or a value does not fit.

    ``source``: an answer file (CSV or SD file keyed by graph_id, source_id or SMILES), ``benchmark-standin``, or
    None: ``labels.source`` of ``params`` (a path, or a mapping of each dataset to its file).  ``task``: auto or a
    type, for a pool stored without labels (default ``base.task``); ``replicates`` / ``censored`` /
    ``max_spread``: the rules (default ``labels.*`` of ``params``, else mean / drop / 1.0).  Writes
    ``measurements.csv`` (this import's new measurements), ``labels.csv`` and ``labels.json`` (task, counts:
    requested, answered, missing, notes, censored, replicates, conflicts).
    """
    import pyarrow.parquet as pq

    from tasks.labels import label_params, read_answer_file, resolve_import
    from tasks.ledger import read_ledger_history
    from tmdlib.datasets.ledger import ledger_task

    name = io.dataset_name(graphs)
    rules = label_params(params, name)
    source = source or rules["source"]
    if not source:
        raise InputError(params, f"no label source for {name}: set labels.source (a file, or {{{name}: file}})")
    task = task or rules["task"]
    sheet, named = rules["sheet"], rules["name"]
    rules = {"replicates": replicates or rules["replicates"], "censored": censored or rules["censored"],
             "max_spread": rules["max_spread"] if max_spread is None else float(max_spread)}
    store = open_store(graphs)
    store_spec = store.task  # ids and the y column only: a pool of millions is not loaded
    requested = read_graph_ids(requests)
    req_cols = pq.read_schema(requests).names
    purposes = None
    if "purpose" in req_cols:  # coreset | audit (the lead's audit sample): answers accepted whatever the purpose
        t = pq.read_table(requests, columns=["graph_id", "purpose"])
        purposes = dict(zip(t.column("graph_id").to_pylist(), t.column("purpose").to_pylist()))
    manifest_path = Path(requests).with_name("manifest.json")
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    store_hash = store.content_hash()  # the requests must have been made from this store
    check_same_store(str(manifest_path), manifest, graphs, store_hash, "label request list")
    ids = store.graph_ids
    order = np.argsort(ids)
    known = ids[order]
    history, ledger_meta = read_ledger_history(labelled, known)  # a hand-edited ledger stops here
    if source == STANDIN:
        y = None if store.y is None else store.y[order]
        new = standin_measurements(requested, known, y, store_spec, name)
        meta, sha = {"source": STANDIN, "benchmark_mode": True,
                     "warning": "labels were NOT imported: the dataset's own labels were joined for the requested "
                                "ids only (benchmark stand-in for a labelling round)"}, ""
        from tmdlib.datasets._schema import META_LABEL_RULE

        rule = (pq.read_schema(graphs).metadata or {}).get(META_LABEL_RULE.encode(), b"").decode()
        if rule.startswith("STAND-IN"):  # the dataset's labels may themselves be a stand-in (MOSES): say so
            meta["dataset_labels"] = rule
        answers = {"key": "graph_id", "rows": new.num_rows, "blank": 0}
    else:
        spec0 = ledger_task(store_spec, ledger_meta)  # the store's, else the ledger's
        new, answers = read_answer_file(source, graphs, requests, known, spec0.targets, sheet)
        sha = io.sha256_file(source)
        meta = {"source": "import", "benchmark_mode": False, "file": str(source), "sha256": sha}
    ids, Y, spec, report, added = resolve_import(new, history, ledger_meta, store_spec, requested,
                                                 ImportRules(str(source), sha, task, purposes=purposes, **rules))
    keep = ~np.isnan(Y).all(axis=1) if len(ids) else np.zeros(0, dtype=bool)
    meta = {**meta, **report, "key": answers["key"], "answer_rows": answers["rows"], STORE_HASH_KEY: store_hash,
            **{k: answers[k] for k in ("sheet", "copies") if k in answers}, "name": property_of(named, spec,
                                                                                               answers.get("sheet"))}
    write_labels(out_dir, ids[keep], Y[keep], meta, spec, measurements=added)
    return {**meta, "labelled": int(keep.sum()), "new": int(len(requested)), "from_ledger": len(
        set(history.column("graph_id").to_pylist())), "task": spec.type, "task_spec": spec}


def import_summary(dataset: str, res: dict, target) -> list[str]:
    """The CLI's lines for an import: labels written, what is missing, and each stated rule that acted."""
    flag = "  [BENCHMARK STAND-IN: dataset labels, not imported]" if res.get("benchmark_mode") else ""
    spec = res.get("task_spec")
    how = {"now": "fixed by this import", "ingest": "decided at ingest"}.get(res.get("task_decided"),
                                                                            "fixed by an earlier import")
    out = [f"{dataset}: {res['labelled']} labels ({spec.describe() if spec else res['task']}, {how}) -> "
           f"{Path(target) / 'labels.csv'}{flag}"]
    sheet = res.get("sheet")
    if sheet:
        used = ", ".join(f"{role} {col!r}" for role, col in sheet["columns"].items())
        out.append(f"  read as a {sheet['form']}: {used}")
        if sheet["ignored"]:
            out.append(f"  ignored columns: {', '.join(sheet['ignored'])}")
        out.append(f"  value rule: {sheet['rule']}")
        out.extend(f"  warning: {w}" for w in sheet["warnings"])
    why = res.get("task_reason")
    if why:
        out.append(f"  task: {why}")
    if res.get("copies"):
        c = res["copies"]
        out.append(f"  {c['answers']} answers for structures stored more than once: {c['rule']} ({c['graphs']} graphs)")
    if res.get("missing"):
        out.append(f"  {res['missing']} of {res['requested']} requested graphs have no answer yet: they stay "
                   "requested (train uses what came back)")
    if res.get("already_in_ledger"):
        out.append(f"  {res['already_in_ledger']} answers already in the ledger (not imported again)")
    if res.get("unrequested"):
        out.append(f"  {res['unrequested']} graphs measured without a request: kept as labels")
    for note, v in (res.get("notes") or {}).items():
        out.append(f"  {v['count']} answers '{note}': missing values (the graphs stay requested)")
    c = res.get("censored") or {}
    if c.get("censored"):
        out.append(f"  {c['censored']} censored values (<, >, <=, >=): labels.censored {c['rule']}"
                   + (f", {c['dropped']} dropped" if c.get("dropped") else ""))
    r = res.get("replicates") or {}
    if r.get("graphs"):
        out.append(f"  {r['graphs']} graphs measured more than once: labels.replicates {r['rule']}"
                   + (f"; {len(r['flagged'])} with a spread above {r['max_spread']:g} (flagged)" if r['flagged'] else ""))
    for c in res.get("conflicts") or []:
        vals = ", ".join(f"{m['value']:g} (round {m['round']})" for m in c["measurements"])
        out.append(f"  conflict: graph {c['graph_id']} measured {vals} -> {c['label']:g}")
    return out


@flow(name="labels-commit")
def labels_commit_flow(graphs: str, labels_csv: str, ledger: str) -> dict:
    """Append the measurements a labels run imported to the dataset's label ledger (so later runs reuse them),
    each with its round and file; nothing in the ledger is overwritten."""
    store = open_store(graphs)
    return commit_labels(ledger, labels_csv, store.graph_ids, store.task)
