"""Predict flow: every pool member's prediction with a prediction interval (regression) or class probabilities and a
prediction set (classification), calibrated by split-conformal prediction on held-out labelled members.

Run as ``tmdsub predict DATASET [--smiles-csv FILE]`` (:func:`flows.cli.predict`).  Wiring only: the model comes
from the registry (:func:`tasks.train.load_model`), the calibration set is the labelled audit sample in production
(the test split in benchmark mode, :func:`tasks.train.calibration_set`), the intervals are
:func:`tmdlib.models.predict.calibrate` (``crepes``), on a pool with SMILES calibrated per bin of similarity to the
trained molecules and normalised by the applicability domain's difficulty (``intervals`` in the ``.json``: the rule,
each bin's calibration members, any bin merged for too few; :mod:`tmdlib.chem.domain`: each row's ``nn_similarity``
to the nearest trained molecule and ``in_domain``, the threshold stated in the ``.json``).  Writes
``predictions.parquet`` / ``.csv`` / ``.json`` (the pool) or ``<file stem>.predictions.*`` (a user's SMILES file)
and logs a ``predict@<DATASET>`` run to MLflow.
"""
from __future__ import annotations

import time
from pathlib import Path

from prefect import flow

from flows.config.predict import PredictStageConfig
from tmdlib.datasets._identity import check_same_store
from tasks.graphs import open_store
from tasks.io import dataset_name, read_json, read_selection, sha256_file
from tasks.labels import task_of
from tasks.predict import calibrate_store, predict_pool, predict_smiles, write_predictions
from tasks.train import load_model
from tmdlib.datasets.intake import property_from


@flow(name="predict", log_prints=True)
def predict_flow(graphs: str, selection: str, model: str, train_info: str, out_dir: str,
                 smiles_csv: str | None = None, cfg: PredictStageConfig | None = None) -> dict:
    """Predictions for the pool (or for ``smiles_csv``) at ``cfg.confidence``; returns the ``.json`` written beside
    them.  ``cfg`` (:class:`flows.config.predict.PredictStageConfig`; None: the defaults) holds the options; its
    ``workers`` (a number or ``auto``, :mod:`tasks.cpus`) share the pool's chunks."""
    from tasks.cpus import resolve_workers
    from tmdlib.chem.domain import domain_meta, intervals_meta

    t0 = time.perf_counter()
    cfg = cfg or PredictStageConfig()
    confidence, workers = cfg.confidence, resolve_workers(cfg.workers)
    info = read_json(train_info, "train info")
    fitted = load_model(model, info)
    store, sel = open_store(graphs), read_selection(selection)
    task = task_of(store.task, info.get("labels_meta"))
    name = dataset_name(graphs)
    if fitted.inputs == "graphs" or smiles_csv is None:  # the store's graphs are read: they must be the model's
        check_same_store(train_info, info, graphs, store.content_hash(), "model")
    cal, domain, what = calibrate_store(fitted, store, sel, info, task, confidence)
    if smiles_csv:
        table, stem = predict_smiles(fitted, cal, smiles_csv, domain), f"{Path(smiles_csv).stem}.predictions"
    else:
        from tasks.io import read_labels

        labelled = set(read_labels(info["labels"], None, task)[0]) if Path(info.get("labels", "")).is_file() else set()
        table, stem = predict_pool(fitted, store, cal, labelled, workers=workers, model_file=(model, info),
                                   domain=domain), "predictions"
    meta = {"dataset": name, "model": fitted.name, "task": task.to_dict(), "confidence": confidence,
            "property": property_from(info.get("labels_meta"), task),  # what prediction / lower / upper are in
            "calibration": what, "n_calibration": cal.n_calibration, "intervals_note": cal.note,
            "method": "split-conformal (crepes): absolute residuals (regression; divided by the difficulty^p when "
                      "normalised, one quantile per similarity bin when Mondrian), 1 - p(true class) "
                      "(classification)", "normalised": cal.normalised,
            "intervals": intervals_meta(cal, domain), "domain": domain_meta(domain, table),
            "rows": table.num_rows, "input": smiles_csv or graphs, "model_sha256": sha256_file(model),
            "workers": workers,
            "seconds": round(time.perf_counter() - t0, 2)}
    if smiles_csv:
        meta["rows_without_prediction"] = int(table.num_rows - table.column("reason").null_count)
    files = write_predictions(out_dir, table, meta, stem)
    print(f"predicted {table.num_rows:,} {'rows of ' + smiles_csv if smiles_csv else 'pool graphs'} with "
          f"{fitted.name} at {100 * confidence:g} % ({what}" + (f"; {cal.note}" if cal.note else "") + f") -> "
          f"{files['parquet']}")
    if cfg.log_mlflow:
        from tasks.tracking import log_run

        meta["mlflow"] = log_run("predict", {"dataset": name, "model": fitted.name, "confidence": confidence,
                                             "n_calibration": cal.n_calibration},
                                 {"rows": table.num_rows, "seconds": meta["seconds"]},
                                 [graphs, selection, model, train_info] + ([smiles_csv] if smiles_csv else []),
                                 [files["parquet"]], experiment=cfg.experiment, run_name=f"predict@{name}")
    return meta
