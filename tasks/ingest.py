"""Ingestion tasks: raw source -> validated Arrow table -> Parquet graph store."""
from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.compute as pc
from prefect import task

from tmdlib import InputError
from tmdlib import datasets as tds

from . import io


@task(name="verify-checksums", persist_result=False)
def verify_checksums(raw_root: str, folder: str) -> list[str]:
    """Check the sha256 of every shipped raw file of ``folder`` against ``raw_root/SHA256SUMS``."""
    return tds.verify_sha256sums(raw_root, only=folder)


def _print_progress(name: str, total: int | None):
    """A progress callback printing molecules done, rate and ETA (every chunk)."""
    def report(done: int, seconds: float) -> None:
        rate = done / max(seconds, 1e-9)
        share = f" ({100 * done / total:.1f} %, ETA {(total - done) / rate / 60:.1f} min)" if total else ""
        print(f"ingest {name}: {done:,} molecules{share}, {rate:,.0f}/s", file=sys.stderr, flush=True)
    return report


@task(name="read-source", persist_result=False)
def read_source(kind: str, path: str, name: str, node_attributes: bool = False,
                smiles_column: str = "smiles", label_column: str | None = None, standin: str | None = None,
                workers: int = 1, limit: int | None = None):
    """Read one source (``tu`` folder, ``ogb`` folder, ``smiles`` CSV or graph-store ``parquet``)."""
    if kind == "tu":
        return tds.read_tu(path, name=name, node_attributes=node_attributes)
    if kind == "ogb":
        return tds.read_ogb(path, name=name)
    if kind == "smiles":
        info = tds.DATASETS.get(name)
        total = min(info.num_graphs, limit or info.num_graphs) if info is not None and info.kind == "smiles" else limit
        return tds.read_smiles_csv(path, smiles_column=smiles_column, label_column=label_column, standin=standin,
                                   workers=workers, limit=limit, progress=_print_progress(name, total))
    if kind == "parquet":
        return tds.read_graph_parquet(path)
    raise ValueError(f"unknown source kind {kind!r}")


BATCH_KINDS = {".csv": "smiles", ".parquet": "parquet"}


def batch_kind(path: str | Path) -> str:
    """Source kind of an appended batch: a TU folder, a SMILES ``.csv`` or a graph-store ``.parquet``."""
    p = Path(path)
    if p.is_dir():
        return "tu"
    kind = BATCH_KINDS.get(p.suffix.lower())
    if kind is None or not p.is_file():
        raise InputError(p, "a batch is a TU folder, a SMILES .csv or a graph-store .parquet file")
    return kind


def tu_name(folder: Path) -> str:
    """The ``NAME`` of a TU folder, from its one ``NAME_A.txt`` (or ``.txt.gz``) file."""
    names = sorted({f.name.rsplit("_A.txt", 1)[0] for f in folder.glob("*_A.txt*")})
    if len(names) != 1:
        raise InputError(folder, f"a TU folder holds exactly one NAME_A.txt file; found {len(names)}")
    return names[0]


def batch_sources(append_dir: str | None) -> list[tuple[str, str, str]]:
    """``(name, kind, path)`` of every batch under ``append_dir``, sorted by name (dotfiles and README skipped)."""
    if not append_dir or not Path(append_dir).is_dir():
        return []
    items = sorted(p for p in Path(append_dir).iterdir()
                   if not p.name.startswith(".") and p.name.lower() not in ("readme", "readme.md"))
    return [(p.name, batch_kind(p), str(p)) for p in items]


def read_batch(path: str, node_attributes: bool = False, smiles_column: str = "smiles",
               label_column: str | None = None):
    """Read and validate one batch (any of the three kinds) on its own, as the intake of new data does."""
    p = Path(path)
    kind = batch_kind(p)
    table = read_source.fn(kind, str(p), tu_name(p) if kind == "tu" else p.stem, node_attributes, smiles_column,
                           label_column)
    tds.validate_graph_table(table, p)
    return table


@task(name="append-batches", persist_result=False)
def append_batches(table, batches: list[tuple[str, str, str]], node_attributes: bool = False,
                   smiles_column: str = "smiles", label_column: str | None = None):
    """Append each batch's graphs after ``table`` (tmdlib.datasets.append_graph_table), in order."""
    from tmdlib.datasets.append import append_graph_table

    for name, _kind, path in batches:
        batch = read_batch(path, node_attributes, smiles_column, label_column)
        table = append_graph_table(table, batch, name, path)
    return table


@task(name="write-graph-store", persist_result=False)
def write_graph_store(table, out: str) -> dict:
    """Validate ``table`` and write it atomically to ``out``; return summary statistics."""
    tds.validate_graph_table(table, out)
    io.write_parquet(out, table)
    n_nodes = table.column("num_nodes").to_numpy()
    n_edges = pc.list_value_length(table.column("edge_src")).to_numpy() // 2
    return {
        "path": str(Path(out)),
        "graphs": int(table.num_rows),
        "mean_nodes": float(n_nodes.mean()) if table.num_rows else 0.0,
        "mean_edges": float(n_edges.mean()) if table.num_rows else 0.0,
        "sha256": io.sha256_file(out),
    }
