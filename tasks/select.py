"""Selection tasks: graph coresets and baselines, node subsampling."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from prefect import task

from tmdlib import GraphDataset

from . import io


@task(name="select-graphs", persist_result=False)
def select_task(pool: GraphDataset, method: str, **kwargs):
    """:func:`tmdlib.select_graphs` on the training pool (its keyword arguments passed through)."""
    from tmdlib.select import select_graphs

    return select_graphs(pool, method, **kwargs)


def resolve_plan(pool, method: str, production: bool, **plan_options):
    """``(method, plan)``: ``auto`` resolved (:func:`tmdlib.select.rounds.default_method`) once the engine is known —
    a pool the scalable engine takes keeps the paper's coreset — and the plan of the method that runs
    (:func:`tmdlib.select.plan.plan_selection` with ``plan_options``)."""
    from tmdlib.select.plan import plan_selection
    from tmdlib.select.rounds import default_method

    plan = plan_selection(pool, "tmd" if method == "auto" else method, **plan_options)
    chosen = default_method(method, production, plan.engine == "scalable")
    return chosen, (plan if chosen == plan.method else plan_selection(pool, chosen, **plan_options))


def learn_options(method: str, graphs: str, train: np.ndarray, train_ids: np.ndarray, ledger, next_strategy: str,
                  seed: int, exact: bool, control: float = 0.0, goal: str = "model", task=None,
                  target=None) -> dict:
    """The options a label-reading method gets (none for a label-free one): ``control`` and :func:`round_options`.
    ``goal`` (``select.goal``) and ``target`` (``select.target``: a multi-target pool's one target or a stated
    desirability) are checked against the pool's ``task`` or, for a pool stored without labels, the ledger's label
    columns (:func:`tmdlib.select.hits.check_goal`, :func:`tmdlib.select.hits.check_target`); a goal needs
    ``tmd-rounds``; ``model`` is the rounds as before."""
    from tmdlib.errors import InputError
    from tmdlib.select import get_method
    from tmdlib.select.hits import check_goal, check_target

    if task is not None and getattr(task, "decided", True):
        goal = check_goal(goal, classification=bool(task.is_classification), targets=int(task.num_targets),
                          target=target)
        target = check_target(target, task.targets)
    elif ledger.num_rows:  # a pool stored without labels: the ledger's columns and answers say
        cols = [c for c in ledger.column_names if c != "graph_id"]
        y = ledger.column(cols[0]).to_numpy(zero_copy_only=False) if len(cols) == 1 else np.zeros(0)
        goal = check_goal(goal, classification=bool(len(cols) == 1 and np.isin(y, (0.0, 1.0)).all()),
                          targets=len(cols), target=target)
        target = check_target(target, cols) if len(cols) > 1 else None
    else:
        goal = check_goal(goal, classification=False) if goal != "positive" else goal
        target = None  # nothing measured yet: round one is label-free
    if goal not in (None, "", "model") and method != "tmd-rounds":
        raise InputError(None, f"select.goal: {goal} needs select.method tmd-rounds (auto in production), "
                               f"not {method!r}")
    if get_method(method).label_free:
        return {}
    classes = task is not None and task.is_classification and getattr(task, "source", "") != "unlabelled"
    return {"control": control, **round_options(graphs, train, train_ids, ledger, next_strategy, "auto", seed, exact,
                                                goal=goal, classes=classes, target=target)}


@task(name="round-options", persist_result=False)
def round_options(graphs: str, train: np.ndarray, train_ids: np.ndarray, ledger, next_strategy: str = "auto",
                  difficulty: str = "auto", seed: int = 0, exact: bool = True, goal: str = "model",
                  acquisition: str = "auto", classes: bool = False, target=None) -> dict:
    """Options of a label-reading method (``tmd-rounds``) for the training pool ``train`` (positions in the store):
    its later-round ``strategy`` and a ``difficulty`` per member (``difficulty``: a name of
    :data:`tmdlib.select.rounds.DIFFICULTIES` or ``auto``, :func:`tmdlib.select.rounds.estimate_difficulty`; on ECFP4
    counts, from the ledger's labels of the pool members already labelled: the audit sample is not in the pool).

    A pool without SMILES, a multi-target ledger, fewer than 2 labelled members or a pool on the scalable engine
    (``exact`` False) gives no difficulty (the method then grows the coreset, saying so in the selection's info).

    ``goal`` ``maximize`` / ``minimize`` / ``positive`` (``select.goal``): the later round hunts hits instead
    (:mod:`tmdlib.select.hits`): an acquisition score per member (``acquisition``, default
    :data:`tmdlib.select.hits.DEFAULT_ACQUISITION`) over a surrogate trained on the same labels (the registered
    ``svm``'s predictions with a forest's spread; the forest's probability for ``positive``;
    :func:`tmdlib.select.hits.hit_scores`).  On a multi-target ledger ``target`` (checked by :func:`learn_options`)
    names the target the goal is about, or states a desirability ``{target: weight}``.
    The ``first`` round's picker (and so the space every round picks in) is the measured default for the goal and
    the labels' kind (:func:`tmdlib.select.rounds.default_first`; :data:`tmdlib.select.hits.HIT_FIRST` under a
    hit-hunting goal): ``classes`` (a task known to be classes before any answer), or 0/1 answers."""
    from tmdlib.select.hits import HIT_FIRST, hunting
    from tmdlib.select.rounds import DEFAULT_NEXT, default_first, difficulty_name, estimate_difficulty

    from .graphs import store_smiles

    strategy = DEFAULT_NEXT if next_strategy in (None, "", "auto") else str(next_strategy)
    cols = ["label"] if "label" in ledger.column_names else (
        [c for c in ledger.column_names if c != "graph_id"] if hunting(goal) and target is not None else [])
    ids = ledger.column("graph_id").to_numpy()
    where = np.isin(train_ids, ids)
    first = HIT_FIRST if hunting(goal) else default_first(classes)
    base = {"strategy": strategy, "first": first, **({"goal": goal} if goal not in (None, "", "model") else {})}
    if not cols or where.sum() < 2 or not exact:  # (the scalable engine: no matrix, the coreset grows)
        return base
    smiles = store_smiles(graphs, train)
    if smiles is None:
        return base
    from tmdlib.chem.fingerprints import ecfp4_counts

    row_of = {int(g): r for r, g in enumerate(ids.tolist())}
    X = ecfp4_counts(smiles)
    lab = np.flatnonzero(where)
    rows = [row_of[int(g)] for g in train_ids[lab]]
    Y = np.column_stack([ledger.column(c).to_numpy(zero_copy_only=False).astype(np.float64)[rows] for c in cols])
    y = Y[:, 0]
    how = difficulty_name(difficulty)
    classes = classes or bool(np.isin(y, (0.0, 1.0)).all())  # 0/1 answers: a binary task (the forest's spread)
    if goal not in (None, "", "model"):
        from tmdlib.select.hits import hit_scores

        return {"strategy": strategy, "goal": goal, "first": first, **({"target": target} if target else {}),
                **hit_scores(X[lab], Y if len(cols) > 1 else y, X, goal, acquisition, seed=seed, names=cols,
                             target=target)}
    u = estimate_difficulty(how, X[lab], y, X, classes=classes, seed=seed)
    return {"strategy": strategy, "first": default_first(classes), "difficulty": u, "difficulty_from": how}


@task(name="subsample-nodes", persist_result=False)
def subsample_nodes_task(ds: GraphDataset, method: str, fraction: float, depth: int, weights, seed: int,
                         bfs_mode: str = "fill"):
    """Per-graph node subsets (tmdlib.select.nodes.subsample_nodes) as an Arrow table."""
    from tmdlib.select.nodes import subsample_nodes

    res = subsample_nodes(ds, fraction=fraction, method=method, depth=depth, weights=weights, seed=seed,
                          bfs_mode=bfs_mode)
    local = np.arange(ds.num_nodes) - np.repeat(ds.node_ptr[:-1], ds.nodes_per_graph)
    kept_counts = np.bincount(ds.graph_of_node[res.mask], minlength=len(ds))
    offsets = np.concatenate([[0], np.cumsum(kept_counts)]).astype(np.int32)
    nodes = pa.ListArray.from_arrays(pa.array(offsets), pa.array(local[res.mask].astype(np.int32)))
    table = pa.table({"graph_id": pa.array(ds.graph_ids, pa.int64()), "nodes": nodes,
                      "k": pa.array(res.k, pa.int64()), "epsilon": pa.array(res.epsilon),
                      "tree_norm": pa.array(res.tree_norm), "kept_tree_norm": pa.array(res.kept_tree_norm)})
    return table, float(res.mean_epsilon)


def nodes_off_table(requested: str, reason: str):
    """``nodes.parquet`` of node subsampling that is off: the usual columns, no rows, and in the schema's metadata
    (:data:`tasks.io.NODES_META_KEY`) ``{"method": "off", "requested", "reason", "line"}``, which the later stages read
    (:func:`tasks.io.nodes_off`) to skip instead of training and measuring."""
    import json

    from tmdlib.select.nodes.policy import off_line

    schema = pa.schema([("graph_id", pa.int64()), ("nodes", pa.list_(pa.int32())), ("k", pa.int64()),
                        ("epsilon", pa.float64()), ("tree_norm", pa.float64()), ("kept_tree_norm", pa.float64())])
    doc = {"method": "off", "requested": requested, "reason": reason, "line": off_line(reason)}
    return schema.empty_table().replace_schema_metadata({io.NODES_META_KEY: json.dumps(doc).encode()})


@task(name="write-json", persist_result=False)
def write_json(path: str, obj: dict) -> str:
    """Atomic JSON write of ``selection.json``, with the tmdsub version that made it (:func:`tasks.io.stamped`)."""
    io.write_json(path, io.stamped(obj))
    return path


@task(name="write-parquet", persist_result=False)
def write_parquet(path: str, table) -> str:
    """Atomic Parquet write."""
    io.write_parquet(path, table)
    return path
