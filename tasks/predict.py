"""Prediction tasks: the calibration set, the predictions table, its files (Parquet and CSV, written atomically)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
from prefect import task
from prefect.cache_policies import NO_CACHE

from tmdlib import InputError

from . import io

#: Pool members predicted per batch (a pool of millions streams through).
CHUNK = 16384


def calibration_set(store, sel: dict, info: dict, task) -> tuple[np.ndarray, np.ndarray, str]:
    """``(positions, labels as stored, what)`` of the held-out labelled members the intervals are calibrated on:
    the labelled audit sample (production: the lab's labels), else the test split with the dataset's labels
    (benchmark mode)."""
    from .io import positions, read_labels
    from .train import selection_labels

    ids = store.graph_ids
    if not store.labelled:
        label_map, _ = read_labels(info["labels"], None, task)
        audit = [int(g) for g in sel.get("audit_ids") or [] if int(g) in label_map]
        y = selection_labels(label_map, audit, task, info["labels"]) if audit else np.zeros(0)
        return positions(np.asarray(audit, dtype=np.int64), ids, info["labels"], "audit"), y, \
            f"{len(audit)} labelled audit graphs (production)"
    test = positions(np.asarray(sel["test_ids"], dtype=np.int64), ids, "selection.json", "test_ids")
    y = store.dataset.y
    y = y[test] if y.ndim == 1 else y[test]
    return test, (y[:, 0] if y.ndim == 2 and task.num_targets == 1 else y), \
        f"{len(test)} test-split graphs with the dataset's labels (benchmark mode)"


def prediction_columns(cal, outputs, task) -> dict:
    """The prediction columns of members with ``outputs`` (:meth:`tmdlib.models.predict.Calibrated.predict`)."""
    p = cal.predict(outputs)
    cols = {}
    if task.is_regression:
        names = list(task.targets)
        for j, t in enumerate(names):
            suffix = "" if len(names) == 1 else f"_{t}"
            cols[f"prediction{suffix}"] = p["prediction"][:, j]
            cols[f"lower{suffix}"] = p["lower"][:, j]
            cols[f"upper{suffix}"] = p["upper"][:, j]
        return cols
    cols["prediction"] = p["prediction"]
    for c, v in enumerate(cal.class_values()):
        cols[f"p_{v:g}"] = p["probabilities"][:, c]
    sets = p["prediction_set"]
    cols["prediction_set"] = [None if sets is None else " ".join(f"{v:g}" for v in s) for s in
                              (sets if sets is not None else [None] * len(outputs))]
    return cols


_WORKER_MODEL: dict = {}


def _load_in_worker(path: str, info: dict) -> None:
    """Worker initialiser: the fitted model, loaded once per worker process from its file."""
    from .train import load_model

    _WORKER_MODEL["model"] = load_model(path, info)


def _molecule_outputs(smiles: list) -> np.ndarray:
    """The worker's model's outputs for a chunk of SMILES."""
    from tmdlib.models import Inputs

    return _WORKER_MODEL["model"].outputs(Inputs(smiles=smiles))


def _chunk_outputs(model, store, smiles, workers: int, model_file: tuple | None):
    """Outputs of every ``CHUNK`` of the pool, in order.  A molecule model on more than one chunk with ``workers`` >
    1 and its file known fans the chunks out to ``workers`` processes (each loads the model once); a graph model
    (torch) runs its chunks with ``workers`` torch threads."""
    from tmdlib.models import Inputs

    n = len(store.graph_ids)
    starts = range(0, n, CHUNK)
    if model.inputs == "molecules" and workers > 1 and model_file is not None and n > CHUNK:
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing import get_context

        with ProcessPoolExecutor(min(workers, len(starts)), mp_context=get_context("spawn"),
                                 initializer=_load_in_worker, initargs=model_file) as pool:
            yield from pool.map(_molecule_outputs, (smiles[a:a + CHUNK] for a in starts))
        return
    torch = threads = None
    if model.inputs == "graphs" and workers > 1:
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(workers)
    try:
        for a in starts:
            pos = np.arange(a, min(n, a + CHUNK), dtype=np.int64)
            yield model.outputs(Inputs(store.dataset if model.inputs == "graphs" else None,
                                       smiles if model.inputs == "molecules" else None, pos))
    finally:
        if threads is not None:
            torch.set_num_threads(threads)


@task(name="predict-pool", persist_result=False, cache_policy=NO_CACHE)
def predict_pool(model, store, cal, labelled_ids: set, progress=None, workers: int = 1,
                 model_file: tuple | None = None) -> pa.Table:
    """Every pool member's prediction and interval, ``CHUNK`` members at a time; ``workers`` processes (molecule
    models, given ``model_file`` = ``(model path, train.json info)`` to load the model from) or torch threads
    (graph models) share the chunks.  The table is the same for any ``workers``."""
    n = len(store.graph_ids)
    smiles = store.smiles()
    ids = compound_ids(store.path)
    labelled = np.fromiter(labelled_ids, np.int64, len(labelled_ids))  # once, not per chunk
    parts = []
    for a, outputs in zip(range(0, n, CHUNK), _chunk_outputs(model, store, smiles, int(workers), model_file)):
        pos = np.arange(a, min(n, a + CHUNK), dtype=np.int64)
        cols = prediction_columns(cal, outputs, model.head.task)
        gid = store.graph_ids[pos]
        head = {"graph_id": pa.array(gid, pa.int64())}
        if smiles is not None:
            head["smiles"] = pa.array([smiles[int(p)] for p in pos], pa.string())
        if ids is not None:  # the user's own compound ids, as ingested
            head["compound_id"] = pa.array([ids[int(p)] for p in pos], pa.string())
        head.update({k: pa.array(v) for k, v in cols.items()})
        head["labelled"] = pa.array(np.isin(gid, labelled))
        parts.append(pa.table(head))
        if progress:
            progress(min(n, a + CHUNK), n)
    return pa.concat_tables(parts)


def compound_ids(store_path: str) -> list | None:
    """The user's compound ids of a store, in store order (:data:`tmdlib.datasets.smiles.ID_COLUMN`), or None."""
    import pyarrow.parquet as pq

    from tmdlib.datasets.smiles import ID_COLUMN

    if ID_COLUMN not in pq.read_schema(store_path).names:
        return None
    return pq.read_table(store_path, columns=[ID_COLUMN]).column(ID_COLUMN).to_pylist()


def smiles_outputs(model, smiles: list) -> np.ndarray:
    """A model's outputs ``(m, D)`` for valid SMILES: a molecule model reads them, a graph model their graphs
    (:func:`tmdlib.datasets.smiles.graphs_from_smiles`, the store's molecule features)."""
    from tmdlib.datasets.smiles_input import graphs_from_smiles
    from tmdlib.models import Inputs

    if not smiles:
        return np.zeros((0, model.head.task.output_dim))
    ds = graphs_from_smiles(smiles) if model.inputs == "graphs" else None
    return model.outputs(Inputs(dataset=ds, smiles=list(smiles)))


@task(name="predict-smiles", persist_result=False, cache_policy=NO_CACHE)
def predict_smiles(model, cal, path: str) -> pa.Table:
    """Predictions for a user's SMILES file, one row per data row: a row that gives no molecule keeps its line
    and its ``reason`` (:func:`tmdlib.datasets.smiles.read_prediction_smiles`) with null predictions."""
    from tmdlib.datasets.smiles_input import read_prediction_smiles

    rows = read_prediction_smiles(path)
    ok = np.array([r is None for r in rows.reason], dtype=bool)
    good = [s for s, k in zip(rows.smiles, ok) if k]
    cols = prediction_columns(cal, smiles_outputs(model, good), model.head.task)
    out = {"line": pa.array(rows.line, pa.int64()), "smiles": pa.array(rows.smiles, pa.string())}
    where = np.flatnonzero(ok)
    for k, v in cols.items():
        arr = [None] * len(ok)
        for i, val in zip(where, v):
            arr[i] = None if isinstance(val, float) and np.isnan(val) else (val.item() if hasattr(val, "item") else val)
        out[k] = pa.array(arr)
    out["reason"] = pa.array(rows.reason, pa.string())
    return pa.table(out)


@task(name="write-predictions", persist_result=False)
def write_predictions(out_dir: str, table: pa.Table, meta: dict, stem: str = "predictions") -> dict:
    """``<stem>.parquet``, ``<stem>.csv`` and ``<stem>.json`` (what they were made from) atomically, JSON last."""
    import pyarrow.csv as pacsv

    out = Path(out_dir)
    io.write_parquet(out / f"{stem}.parquet", table)
    with io.atomic_path(out / f"{stem}.csv") as tmp:
        pacsv.write_csv(table, tmp)
    io.write_json(out / f"{stem}.json", meta)
    return {"parquet": str(out / f"{stem}.parquet"), "csv": str(out / f"{stem}.csv")}
