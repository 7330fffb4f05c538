"""Ingest flow: a built-in dataset, a TU folder, a molecule file (CSV/TSV, .smi, SD file, Parquet table) or a graph-store
Parquet file -> graph store.

Run as ``tmdsub ingest ...`` (or ``python -m flows ingest ...``).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from prefect import flow

from tmdlib import InputError
from tmdlib import datasets as tds
from tmdlib.datasets.registry import known_datasets_text
from tmdlib.datasets.task import table_task, with_task
from tasks.ingest import (INVALID_RULES, append_batches, batch_sources, copy_parquet_store, count_duplicates,
                          csv_columns, id_column_of, read_source, source_settings, verify_checksums, write_graph_store,
                          write_invalid_report, write_smiles_store)


def resolve_source(dataset: str | None, raw_root: str, tu_dir: str | None, smiles_csv: str | None,
                   parquet: str | None, name: str | None, source: str | None = None) -> tuple[str, str, str, str | None]:
    """Decide ``(kind, path, name, checksum_folder)`` from the CLI choices (no I/O beyond stat and a Parquet schema).

    ``source``: the dataset's entry in ``base.datasets`` (``NAME: FILE``), a file or folder under ``raw_root``; a
    user's dataset without one is looked for as ``<NAME>/`` (TU) or ``<NAME><suffix>`` for every molecule file
    suffix (:data:`tmdlib.datasets.molfiles.POOL_SUFFIXES`)."""
    from tmdlib.datasets.molfiles import POOL_SUFFIXES, source_kind

    given = [p for p in (tu_dir, smiles_csv, parquet) if p]
    if len(given) > 1:
        raise InputError(None, "give only one of --tu-dir, --smiles-csv, --parquet")
    if given:
        label = name or dataset
        if not label:
            raise InputError(given[0], "a dataset --name is required for user data")
        tds.check_dataset_name(label)
        if tu_dir:
            return "tu", tu_dir, label, None
        if smiles_csv:
            return "smiles", smiles_csv, label, None
        return "parquet", parquet, label, None
    if not dataset:
        raise InputError(None, "name a built-in dataset or give --tu-dir/--smiles-csv/--parquet")
    tds.check_dataset_name(dataset)
    if dataset in tds.DATASETS:
        info = tds.get_dataset_info(dataset)
        path = Path(raw_root) / info.folder
        return info.kind, str(path / info.file if info.file else path), info.name, info.folder
    # A user dataset in the raw root: the file base.datasets names, else a TU folder or a molecule file by its name.
    root = Path(raw_root)
    if source and source != dataset:
        if Path(source).is_absolute() or ".." in Path(source).parts:
            raise InputError(None, f"base.datasets: {dataset}: {source!r} must name a file or folder inside {root}")
        path = root / source
        if not path.exists():
            raise InputError(None, f"base.datasets: {dataset}: {source!r}, but there is no {path}")
        return source_kind(path), str(path), dataset, None
    if (root / dataset).is_dir():
        return "tu", str(root / dataset), dataset, None
    for suffix in POOL_SUFFIXES:
        if (root / f"{dataset}{suffix}").is_file():
            return source_kind(root / f"{dataset}{suffix}"), str(root / f"{dataset}{suffix}"), dataset, None
    raise InputError(None, f"unknown dataset {dataset!r}: not built in ({known_datasets_text()}) and no "
                           f"{root / dataset}/ (TU layout) or {dataset}.<csv|tsv|smi|cxsmiles|sdf|parquet>[.gz] in "
                           f"{root}; or name the file in base.datasets ({dataset}: FILE)")


def _names(values: list[str] | None) -> list[str] | None:
    """Repeated and/or comma-separated column names (``--label-column a,b --label-column c``) as one list."""
    if values is None:
        return None
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


def source_options(name: str, params: str | None = None, *, smiles_column: str | None = None,
                   label_columns: list[str] | None = None, split_column: str | None = None,
                   keep_columns: list[str] | None = None, task: str | None = None,
                   id_column: str | None = None) -> dict:
    """The reading options of one dataset: the command line's, else ``params.yaml``'s ``ingest.sources.<NAME>``,
    else the defaults (``smiles``; labels / split found by name; the task inferred).

    The task is the exception: ``--task`` carries ``base.task`` in the pipeline, the default of every dataset,
    so a dataset's own ``ingest.sources.<NAME>.task`` wins over it."""
    from tmdlib.datasets.task import TASK_TYPES

    own = source_settings(params, name)
    task = task or "auto"
    if task != "auto" and task not in TASK_TYPES:
        raise InputError(None, f"--task must be auto or one of {', '.join(TASK_TYPES)}; got {task!r}")
    if own.get("task"):
        task = own["task"]
        if task != "auto" and task not in TASK_TYPES:
            raise InputError(params, f"ingest.sources.{name}.task must be auto or one of {', '.join(TASK_TYPES)}; "
                                     f"got {task!r}")
    labels = _names(label_columns)
    keep = _names(keep_columns)
    return {
        "smiles_column": smiles_column or own.get("smiles_column", "smiles"),
        "label_column": labels if labels is not None else own.get("label_columns"),
        "split_column": split_column if split_column is not None else own.get("split_column"),
        "keep_columns": keep if keep is not None else own.get("keep_columns"),
        "task": task,
        "id_column": id_column if id_column is not None else own.get("id_column"),
    }


@flow(name="ingest", log_prints=True)
def ingest_flow(kind: str, path: str, name: str, out: str, raw_root: str | None = None,
                checksum_folder: str | None = None, node_attributes: bool = False,
                smiles_column: str = "smiles", label_column: str | list[str] | None = None,
                append_dir: str | None = None, workers: int | str = "auto", limit: int | None = None,
                split_column: str | None = None, keep_columns: list[str] | None = None,
                task: str | None = None, standin: str | None = None, invalid: str = "skip",
                id_column: str | None = None) -> dict:
    """Verify (built-in data), read, append the batches of ``append_dir``, validate and atomically write.

    ``append_dir`` holds batches of new graphs (TU folders, SMILES ``.csv``, graph-store ``.parquet``),
    appended in name order after the base source; old graphs keep their ids, features and task.
    A SMILES source is converted by ``workers`` processes (auto: the cores this process may use, see
    :mod:`tasks.cpus`; ``limit``: its first molecules only).  An unlabelled pool (MOSES) is stored without labels,
    as a real pool is; ``standin`` (a rule of :data:`tmdlib.datasets.smiles.STANDIN_RULES`, e.g. ``logp``) fills
    in the flagged benchmark label stand-in instead, for benchmark mode only (``None`` / ``"none"``: no stand-in).

    The task (``task``: auto or a type) is decided from the labels (:mod:`tmdlib.datasets.task`); a built-in
    dataset brings its own (and its label / split / kept columns) unless another is asked for.  A user's CSV
    without named label columns (``label_column`` None) uses its ``y`` or ``label`` column if it has one, and
    its ``split`` column when ``split_column`` is None (``""``: none).

    ``invalid`` (``ingest.invalid``): ``skip`` (default) leaves a SMILES rdkit cannot parse out of the store and
    lists it with its line and reason in ``<store>.invalid.csv`` beside it (:func:`tasks.ingest.invalid_report_path`;
    an appended batch is still refused whole); ``refuse`` stops at the first one.  A molecule store's summary
    also counts the structures stored more than once (``duplicates``).  ``id_column``: the SMILES CSV's column
    of the user's compound ids, stored as ``compound_id`` and carried to the requests and the predictions (None:
    a column named like one, :func:`tasks.ingest.id_column_of`; ``""``: none).
    """
    if invalid not in INVALID_RULES:
        raise InputError(None, f"ingest.invalid must be one of {', '.join(INVALID_RULES)}; got {invalid!r}")
    summary = _ingest(kind, path, name, out, raw_root, checksum_folder, node_attributes, smiles_column,
                      label_column, append_dir, workers, limit, split_column, keep_columns, task, standin,
                      [] if kind == "smiles" and invalid == "skip" else None, id_column)
    skipped = summary.pop("invalid", None) or []
    summary["invalid"] = len(skipped)
    summary["invalid_report"] = write_invalid_report(out, skipped)
    if kind == "smiles":
        summary["duplicates"] = count_duplicates(out)
    return summary


def _ingest(kind, path, name, out, raw_root, checksum_folder, node_attributes, smiles_column, label_column,
            append_dir, workers, limit, split_column, keep_columns, task, standin, skipped, id_column) -> dict:
    if checksum_folder is not None and raw_root is not None:
        verify_checksums(raw_root, checksum_folder)
    info = tds.DATASETS.get(name) if checksum_folder is not None else None
    standin = None if standin in (None, "", "none") else standin
    if standin is not None and kind != "smiles":
        raise InputError(path, f"a label stand-in ({standin!r}) is for unlabelled SMILES pools; {name} is a {kind} "
                               "source")
    labels = [label_column] if isinstance(label_column, str) else label_column
    if info is not None and info.kind == "smiles":
        labels = list(info.label_columns) if labels is None else labels
        split_column = (info.split_column or "") if split_column is None else split_column
        keep_columns = list(info.keep_columns) if keep_columns is None else keep_columns
    # an unlabelled built-in pool has no task of its own: its registered task is the stand-in's
    builtin_task = task in (None, "", "auto") and info is not None and (info.standin is None or standin is not None)
    if builtin_task:
        task = info.task
    options = {}
    if kind == "smiles":
        found, split, keep = csv_columns(path, labels, split_column, keep_columns)
        ident = None if info is not None else id_column_of(path, id_column, (*found, split, *keep, smiles_column))
        options = {"label_column": list(found) or None, "split_column": split, "keep_columns": keep}
        if ident:
            options["id_column"] = ident
    batches = batch_sources(append_dir)
    if kind == "smiles" and not batches:  # streamed into the store, a row group per chunk
        summary = write_smiles_store(path, out, name, smiles_column, standin=standin, workers=workers, limit=limit,
                                     task=task, task_source="builtin" if builtin_task else None,
                                     skip_invalid=skipped is not None, **options)
        return {**summary, "batches": []}
    if kind == "parquet" and not batches and not builtin_task:  # validated and copied a slice at a time
        summary = copy_parquet_store(path, out, name, task=task)
        return {**summary, "batches": []}
    if skipped is not None:
        options["skipped"] = skipped
    table = read_source(kind, path, name, node_attributes, smiles_column, standin=standin, workers=workers,
                        limit=limit, task=task, **options)
    if builtin_task:  # the registry's task, not one the user asked for
        table = with_task(table, replace(table_task(table), source="builtin"))
    if batches:  # named columns as for the base; a batch's own y / label / split columns otherwise
        table = append_batches(table, batches, node_attributes, smiles_column, labels,
                               split_column=split_column, keep_columns=keep_columns)
    summary = write_graph_store(table, out)
    return {**summary, "batches": [b[0] for b in batches], "invalid": skipped}
