"""Ingest flow: a built-in dataset, a TU folder, a SMILES CSV or a Parquet file -> graph store.

Run as ``tmdsub ingest ...`` (or ``python -m flows ingest ...``).
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow

from tmdlib import InputError
from tmdlib import datasets as tds
from tasks.ingest import append_batches, batch_sources, read_source, verify_checksums, write_graph_store


def resolve_source(dataset: str | None, raw_root: str, tu_dir: str | None, smiles_csv: str | None,
                   parquet: str | None, name: str | None) -> tuple[str, str, str, str | None]:
    """Decide ``(kind, path, name, checksum_folder)`` from the CLI choices (no I/O beyond stat)."""
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
    # A user dataset dropped into the raw root: a TU folder, a graph-store Parquet or a SMILES CSV.
    root = Path(raw_root)
    if (root / dataset).is_dir():
        return "tu", str(root / dataset), dataset, None
    for suffix, kind in ((".parquet", "parquet"), (".csv", "smiles")):
        if (root / f"{dataset}{suffix}").is_file():
            return kind, str(root / f"{dataset}{suffix}"), dataset, None
    raise InputError(None, f"unknown dataset {dataset!r}: not built in ({', '.join(tds.DATASETS)}) and no "
                           f"{root / dataset}/ (TU layout), {dataset}.parquet or {dataset}.csv (SMILES) in {root}")


@flow(name="ingest", log_prints=True)
def ingest_flow(kind: str, path: str, name: str, out: str, raw_root: str | None = None,
                checksum_folder: str | None = None, node_attributes: bool = False,
                smiles_column: str = "smiles", label_column: str | None = None,
                append_dir: str | None = None, workers: int = 1, limit: int | None = None) -> dict:
    """Verify (built-in data), read, append the batches of ``append_dir``, validate and atomically write.

    ``append_dir`` holds batches of new graphs (TU folders, SMILES ``.csv``, graph-store ``.parquet``),
    appended in name order after the base source; old graphs keep their ids and features.
    A SMILES source is converted by ``workers`` processes (``limit``: its first molecules only); a built-in
    unlabelled pool (MOSES) gets its flagged benchmark label stand-in.
    """
    if checksum_folder is not None and raw_root is not None:
        verify_checksums(raw_root, checksum_folder)
    info = tds.DATASETS.get(name)
    standin = info.standin if info is not None and checksum_folder is not None else None
    table = read_source(kind, path, name, node_attributes, smiles_column, label_column, standin=standin,
                        workers=workers, limit=limit)
    batches = batch_sources(append_dir)
    if batches:
        table = append_batches(table, batches, node_attributes, smiles_column, label_column)
    summary = write_graph_store(table, out)
    return {**summary, "batches": [b[0] for b in batches]}
