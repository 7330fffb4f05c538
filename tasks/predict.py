"""Prediction tasks: the calibration set and the applicability domain, the predictions table, its files (Parquet,
CSV and the JSON naming them, committed as one set: :func:`write_predictions`).  The columns are
:func:`tmdlib.models.predict.prediction_columns`; what the ``.json`` says of the intervals and the domain,
:func:`tmdlib.chem.domain.intervals_meta` and :func:`~tmdlib.chem.domain.domain_meta`."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NO_CACHE

from tmdlib import InputError
from tmdlib.models.predict import pool_chunk, prediction_columns, rows_columns, smiles_table, trained_ids

from . import io
from .train import calibration_set, set_torch_threads

#: Pool members predicted per batch (a pool of millions streams through).
CHUNK = 16384


@task(name="calibrate-predictions", persist_result=False, cache_policy=NO_CACHE)
def calibrate_store(model, store, sel: dict, info: dict, task, confidence: float) -> tuple:
    """``(Calibrated, Domain or None, what)`` for a store's model: the calibration set
    (:func:`calibration_set`), its outputs, the trained molecules' domain
    (:func:`tmdlib.chem.domain.calibrate_with_domain`)."""
    from tmdlib.models import Inputs
    from tmdlib.chem.domain import calibrate_with_domain

    pos, y_cal, what = calibration_set(store, sel, info, task)
    X = Inputs(store.dataset if model.inputs == "graphs" else None,
               store.smiles() if model.inputs == "molecules" else None, pos)
    train = None
    if store.has_smiles:
        ids = trained_ids(info, sel)
        train = store.smiles(io.positions(np.asarray(ids, dtype=np.int64), store.graph_ids, "selection.json",
                                          "medoids")) if ids else None
    cal, domain = calibrate_with_domain(train, model.outputs(X) if len(pos) else [],
                                        store.smiles(pos) if store.has_smiles and len(pos) else [], y_cal, task,
                                        confidence)
    return cal, domain, what


def _chunk_outputs(model, store, smiles, workers: int, model_file: tuple | None, domain=None):
    """``(outputs, domain columns)`` of every ``CHUNK`` of the pool, in order
    (:func:`tmdlib.chem.domain.outputs_with_domain`).  A molecule model on more than one chunk with ``workers`` > 1
    (and ``model_file``, the model's file, known) fans the chunks out to ``workers`` processes (:mod:`tasks.predict_worker`: each is handed the fitted model and the domain once and
    measures both); a graph model (torch) runs its chunks with ``workers`` torch threads."""
    n = len(store.graph_ids)
    starts = range(0, n, CHUNK)
    if model.inputs == "molecules" and workers > 1 and model_file is not None and n > CHUNK:
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing import get_context

        from . import predict_worker

        with ProcessPoolExecutor(min(workers, len(starts)), mp_context=get_context("spawn"),
                                 initializer=predict_worker.start, initargs=(model, domain)) as pool:
            yield from pool.map(predict_worker.chunk, (smiles[a:a + CHUNK] for a in starts))
        return
    from tmdlib.chem.domain import outputs_with_domain

    threads = set_torch_threads(workers) if model.inputs == "graphs" and workers > 1 else None  # the old count
    try:
        for a in starts:
            pos = np.arange(a, min(n, a + CHUNK), dtype=np.int64)
            yield outputs_with_domain(model, domain, None if smiles is None else list(smiles[a:a + CHUNK]), pos,
                                      store.dataset if model.inputs == "graphs" else None)
    finally:
        if threads is not None:
            set_torch_threads(threads)


@task(name="predict-pool", persist_result=False, cache_policy=NO_CACHE)
def predict_pool(model, store, cal, labelled_ids: set, progress=None, workers: int = 1,
                 model_file: tuple | None = None, domain=None) -> pa.Table:
    """Every pool member's prediction and interval, ``CHUNK`` members at a time; ``workers`` processes (molecule
    models whose ``model_file`` = ``(model path, train.json info)`` is known: each worker is handed the fitted model
    and the domain, :mod:`tasks.predict_worker`) or torch threads (graph models) share the chunks.  The table is the
    same for any ``workers``."""
    n = len(store.graph_ids)
    smiles = store.smiles()
    ids = compound_ids(store.path)
    labelled = np.fromiter(labelled_ids, np.int64, len(labelled_ids))  # once, not per chunk
    parts = []
    work = _chunk_outputs(model, store, smiles, int(workers), model_file, domain if smiles is not None else None)
    for a, (outputs, dom) in zip(range(0, n, CHUNK), work):
        pos = np.arange(a, min(n, a + CHUNK), dtype=np.int64)
        parts.append(pool_chunk(store.graph_ids[pos], prediction_columns(cal, outputs, model.head.task, dom=dom),
                                labelled, None if smiles is None else [smiles[int(p)] for p in pos],
                                None if ids is None else [ids[int(p)] for p in pos]))
        if progress:
            progress(min(n, a + CHUNK), n)
    return pa.concat_tables(parts)


def compound_ids(store_path: str) -> list | None:
    """The user's compound ids of a store, in store order (:data:`tmdlib.datasets._smiles.ID_COLUMN`), or None."""
    from tmdlib.datasets._smiles import ID_COLUMN

    if ID_COLUMN not in pq.read_schema(store_path).names:
        return None
    return pq.read_table(store_path, columns=[ID_COLUMN]).column(ID_COLUMN).to_pylist()


@task(name="predict-smiles", persist_result=False, cache_policy=NO_CACHE)
def predict_smiles(model, cal, path: str, domain=None) -> pa.Table:
    """Predictions for a user's SMILES file, one row per data row: a row that gives no molecule keeps its line
    and its ``reason`` (:func:`tmdlib.datasets._smiles.read_prediction_smiles`) with null predictions."""
    from tmdlib.datasets.smiles_input import read_prediction_smiles

    rows = read_prediction_smiles(path)
    return smiles_table(rows, rows_columns(model, cal, domain, rows.smiles, rows.reason))


@task(name="write-predictions", persist_result=False)
def write_predictions(out_dir: str, table: pa.Table, meta: dict, stem: str = "predictions") -> dict:
    """``<stem>.parquet``, ``<stem>.csv`` and ``<stem>.json`` (what they were made from) as one set.

    The rule: the three are staged and committed together (:func:`tasks.io.file_set`: one atomic rename is the
    commit point, the ``.json`` moved in last), and the ``.json`` names the sha256 of the other two (``files``, also
    added to ``meta``).  A ``tmdsub predict`` killed at any moment leaves the previous three or, once committed, the
    new three (the next run or reader finishes the move: :func:`read_prediction_set`), never a new ``.parquet``
    beside an old ``.csv``; a set that still disagrees with its ``.json`` (files copied by hand) is refused by the
    reader.
    """
    import pyarrow.csv as pacsv

    out = Path(out_dir)
    with io.file_set(out, stem, last=f"{stem}.json") as stage:
        pq.write_table(table, stage / f"{stem}.parquet", compression="zstd")
        pacsv.write_csv(table, stage / f"{stem}.csv")
        meta["files"] = {name: io.sha256_file(stage / name) for name in (f"{stem}.parquet", f"{stem}.csv")}
        meta[io.VERSION_FIELD] = io.tool_version()
        io.write_json(stage / f"{stem}.json", meta)
    return {"parquet": str(out / f"{stem}.parquet"), "csv": str(out / f"{stem}.csv")}


def read_prediction_set(out_dir: str, stem: str = "predictions") -> dict:
    """The ``<stem>.json`` of a predictions folder, after finishing a commit a killed run left
    (:func:`tasks.io.settle_file_set`) and checking that the ``.parquet`` and ``.csv`` are the ones it names.

    Raises
    ------
    InputError
        No ``.json``, or a file whose sha256 differs from the one the ``.json`` records (a mixed set).
    """
    out = Path(out_dir)
    io.settle_file_set(out, stem)
    meta = io.read_json(str(out / f"{stem}.json"), "predictions metadata")
    for name, digest in (meta.get("files") or {}).items():  # a .json written before the rule has none
        path = out / name
        if not path.is_file() or io.sha256_file(path) != digest:
            raise InputError(path, f"not the file {stem}.json was written with (a mixed set of predictions): "
                                   "rerun tmdsub predict")
    return meta
