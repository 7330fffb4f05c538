"""Selection flows: ``tmdsub select`` (graphs) and ``tmdsub nodes`` (nodes per graph)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from prefect import flow
from prefect.utilities.annotations import quote

from tasks.coreset import on_disk, part_hashes, part_mapper, status_line
from tmdlib.datasets._identity import STORE_HASH_KEY
from tasks.graphs import check_matrix_meta, load_matrix, matrix_path, open_store
from tasks.ledger import read_ledger
from flows.config.nodes import NodesStageConfig
from flows.config.select import SelectStageConfig
from tasks.select import learn_options, nodes_off_table, select_task, subsample_nodes_task, write_json, write_parquet
from tmdlib.datasets import content_hash
from tmdlib.select._plan import check_engine
from tmdlib.select.audit import audit_members, audit_size
from tmdlib.select.nodes import NODE_OFF, node_method, off_line
from tmdlib.select.round_policy import method_plan
from tmdlib.select.rounds import check_control


#: selection.json's lists of one entry per graph: in the file, not in the flow's result.
PER_GRAPH_KEYS = ("assignment", "distance", "train_ids", "test_ids")


@flow(name="select")
def select_flow(graphs: str, out: str, matrix: str | None = None, labelled: str | None = None,
                cache_dir: str | None = None, cfg: SelectStageConfig | None = None) -> dict:
    """The dataset's own split (a ``split`` column) or the seeded one (per ingested batch), then
    :func:`tmdlib.select_graphs` on the training graphs; writes ``selection.json`` (``out``: the selection, its
    certificate, the split, the store's content hash) and returns it without :data:`PER_GRAPH_KEYS`, with the labels
    reused.  ``cfg`` (:class:`flows.config.select.SelectStageConfig`, checked when built; None: the defaults) holds the
    options.

    A ``matrix`` that is not the one its ``meta.json`` describes (digest), or was made for another store, depth or
    weights, is refused, as is one without ``meta.json`` unless ``cfg.trust_matrix``; graphs already in the label
    ledger ``labelled`` are reused first (only their ids are read).  The scalable engine's
    parts run on this flow's task runner, finished parts and exact pairs cached under ``cache_dir``.

    A pool without labels (production) has no 80/20 split: its test set is the audit sample (``cfg.audit`` members,
    :func:`tmdlib.select.audit.audit_members`, the same every round); the selection runs on the rest of the pool.

    ``method="auto"`` is the measured default of the mode (:func:`tmdlib.select.rounds.default_method`): the pool
    setting's ``tmd-rounds`` in production, the paper's ``tmd`` coreset in benchmark mode.  A method that reads
    labels (``tmd-rounds`` from its second round) gets a difficulty per pool member from the ledger's labels of the
    members already picked (never the audit sample's); ``control`` (a share) spends that much of each round on a
    uniform pick, the Random control arm the evaluate stage compares the strategy with.  ``goal`` (``select.goal``):
    ``model`` (a model good on the whole pool) or hit hunting from round two (``maximize`` / ``minimize`` a regression
    label, ``positive`` of a binary pool: :func:`tasks.select.learn_options`); the audit sample is never a candidate;
    ``target``: ``select.target`` (:func:`tmdlib.select.hits.parse_target`).
    """
    c = cfg if cfg is not None else SelectStageConfig()
    seed, depth, weights, audit = c.seed, c.depth, c.weights, c.audit
    source = open_store(graphs)
    store = source.stored()  # ids and sizes; the graphs are read a chunk at a time
    production = not source.labelled
    if production:
        test = audit_members(store.graph_ids, audit_size(audit, len(store)), seed)
        train = np.setdiff1d(np.arange(len(store), dtype=np.int64), test)
        print(f"unlabelled pool (production): {len(test):,} graphs drawn as the audit sample (labels.audit = "
              f"{audit}), never trained on; the selection runs on the other {len(train):,}", flush=True)
    else:
        train, test = source.split(source.segments(len(store)), c.test_fraction, seed)
    hashes = part_hashes(store, status_line)  # one pass over the store, every graph checked (ASCII hex, S64)
    store_hash = content_hash(store.graph_ids, (h.decode() for h in hashes))
    matrix = matrix_path(matrix)  # None when the tmd stage chose the scalable engine (meta.json only)
    check_engine(c.engine, bool(matrix))
    if matrix:
        check_matrix_meta(matrix, graphs, store_hash, depth, weights, trust=c.trust_matrix)
    mat = load_matrix(matrix, len(store))[np.ix_(train, train)] if matrix else None
    ledger = read_ledger(labelled, store.graph_ids, source.task)
    have = ledger.column("graph_id").to_numpy()
    pool = store.subset(train)
    # the library decides method (auto), budget, engine, part size and pair budget once; say what, before the search
    method, plan = method_plan(pool, c.method, production, k=c.count, fraction=c.fraction, engine=c.engine,
                               has_matrix=bool(matrix), part_size=c.part_size, max_pairs=c.max_pairs)
    check_control(method, c.control)
    for line in plan.lines:
        print(line, flush=True)
    if not plan.scalable:  # the scalable engine reads the pool part by part; everything else holds it
        pool = pool.load()
    scratch = str(Path(cache_dir) / "scratch") if cache_dir else None
    # the training pool's hashes key the caches: read when the parts are looked up, on disk until then
    mapper = part_mapper(cache_dir, pool, depth, weights, seed, plan.part_size, c.threads,
                         hashes=on_disk(hashes, scratch, train) if cache_dir else None)
    del hashes
    learn = learn_options(c, method, graphs, train, store.graph_ids[train], ledger, plan.engine == "exact",
                          source.task)
    sel = select_task(pool, method, plan=plan, seed=seed, depth=depth, **learn,
                      weights=weights, matrix=mat, smiles=source.smiles_for(train, method),
                      labelled=np.isin(pool.graph_ids, have), map_parts=mapper, num_threads=c.threads,
                      restarts=c.restarts, backend=c.backend, scratch_dir=scratch, progress=status_line)
    del mapper, pool  # the parts' caches and the pool's reader: done with
    doc = sel.to_json(arrays=True)  # the per-graph lists stay arrays: write_json streams them (~1 GB less at 10⁷)
    doc.update({STORE_HASH_KEY: store_hash, "fraction": c.fraction, "count": c.count, "test_fraction": c.test_fraction,
                "train_ids": store.graph_ids[train], "test_ids": store.graph_ids[test]})
    if production:  # benchmark selections keep their bytes
        doc.update({"mode": "production", "test_fraction": None, "audit": str(audit),
                    "audit_ids": store.graph_ids[test]})
    # How many labels were reused is reported (and in the label manifest), not stored: committing
    # labels to the ledger must not change selection.json when the medoids stay the same.
    reuse = {key: doc.pop(key) for key in ("labelled_in_pool", "reused_labels")}
    write_json(out, quote(doc))  # quoted: Prefect would walk and copy the per-graph arrays
    # Prefect walks the flow's result too (30 s, ~250 MB at 1.27 M graphs): the per-graph lists stay in the file.
    return {**{key: value for key, value in doc.items() if key not in PER_GRAPH_KEYS}, **reuse}


@flow(name="nodes")
def nodes_flow(graphs: str, out: str, cfg: NodesStageConfig | None = None) -> dict:
    """Node subsampling of every graph; writes graph_id, kept nodes and ε_i = TN(G) − TN(G[S]).

    ``method="auto"`` (:func:`tmdlib.select.nodes.node_method`): off on a molecule pool without labels
    (production), else ``tmd``.  Off (or ``method="off"``), the file has no rows and records why
    (:func:`tasks.select.nodes_off_table`); train_nodes and evaluate_nodes then skip, saying so.  ``cfg``
    (:class:`flows.config.nodes.NodesStageConfig`; None: the defaults) holds the options."""
    cfg = cfg or NodesStageConfig()
    method, fraction = cfg.method, cfg.fraction
    store = open_store(graphs)
    chosen, reason = node_method(method, not store.labelled, store.has_smiles)
    if chosen == NODE_OFF:
        write_parquet(out, nodes_off_table(method, reason))
        print(off_line(reason), flush=True)
        return {"graphs": 0, "mean_epsilon": None, "method": NODE_OFF, "reason": reason, "fraction": fraction}
    table, mean_eps = subsample_nodes_task(store.dataset, chosen, fraction, cfg.depth, cfg.weights, cfg.seed,
                                           cfg.bfs_mode)
    write_parquet(out, table)
    return {"graphs": table.num_rows, "mean_epsilon": mean_eps, "method": chosen, "fraction": fraction}
