"""Ingestion tasks: raw source -> validated Arrow table -> Parquet graph store."""
from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.compute as pc
from prefect import task

from tmdlib import InputError
from tmdlib import datasets as tds
from tmdlib.datasets.task import TaskSpec, store_task, table_task

from . import io
from .cpus import resolve_workers


@task(name="verify-checksums", persist_result=False)
def verify_checksums(raw_root: str, folder: str) -> list[str]:
    """Check the sha256 of every shipped raw file of ``folder`` against ``raw_root/SHA256SUMS``."""
    return tds.verify_sha256sums(raw_root, only=folder)


def _print_progress(name: str, total: int | None, unit: str = "molecules"):
    """A progress callback printing items (``unit``) done, rate and ETA (every chunk)."""
    def report(done: int, seconds: float) -> None:
        rate = done / max(seconds, 1e-9)
        share = f" ({100 * done / total:.1f} %, ETA {(total - done) / rate / 60:.1f} min)" if total else ""
        print(f"ingest {name}: {done:,} {unit}{share}, {rate:,.0f}/s", file=sys.stderr, flush=True)
    return report


#: Per-dataset source settings in params.yaml (``ingest.sources.<NAME>``) and their types.
SOURCE_KEYS = {"smiles_column": str, "label_columns": list, "split_column": str, "keep_columns": list, "task": str,
               "id_column": str}
#: Headers (compared as :func:`tmdlib.datasets.labsheet.header_key` writes them) taken as the user's compound id
#: when no ``id_column`` is named.
DEFAULT_ID_COLUMNS = ("compound id", "compound_id", "id", "registry number", "registry id", "molecule chembl id",
                      "chembl id", "molregno", "idnumber", "catalog id", "catalog number", "compound", "name",
                      "title")  # title: an SD record's title line, when no property names an id


def source_settings(params_path: str | None, name: str) -> dict:
    """The settings of one dataset's source in ``params.yaml`` (``ingest.sources.<NAME>``), checked.

    ``label_columns`` / ``keep_columns`` may be a list or one name; ``split_column`` may be null (no split
    column, none looked for).  Returns only the keys given.

    Raises
    ------
    InputError
        An unreadable file, an unknown key or a value of the wrong type (naming the file and the key).
    """
    import yaml

    if not params_path:
        return {}
    path = Path(params_path)
    try:
        params = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as err:
        raise InputError(path, f"cannot read the parameters: {err}") from None
    sources = (params.get("ingest") or {}).get("sources") or {}
    if not isinstance(sources, dict):
        raise InputError(path, "ingest.sources must map dataset names to their settings")
    raw = sources.get(name) or {}
    where = f"ingest.sources.{name}"
    if not isinstance(raw, dict):
        raise InputError(path, f"{where} must be a mapping of {', '.join(SOURCE_KEYS)}")
    out = {}
    for key, value in raw.items():
        if key not in SOURCE_KEYS:
            raise InputError(path, f"{where}: unknown key {key!r}; known: {', '.join(SOURCE_KEYS)}")
        if value is None and key == "id_column":
            out[key] = ""  # no id column, none looked for
            continue
        if value is None and key == "split_column":
            out[key] = ""  # no split column, none looked for
            continue
        if SOURCE_KEYS[key] is list:
            value = [value] if isinstance(value, str) else value
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise InputError(path, f"{where}.{key} must be a column name or a list of them; got {value!r}")
        elif not isinstance(value, str) or not value:
            raise InputError(path, f"{where}.{key} must be a non-empty string; got {value!r}")
        out[key] = value
    return out


def id_column_of(path: str, id_column: str | None, taken=()) -> str | None:
    """The compound-id column a SMILES CSV is read with: ``id_column`` ("" = none), else the first header that
    names an id (:data:`DEFAULT_ID_COLUMNS`, any case) and is no other column's."""
    from tmdlib.datasets.labsheet import header_key
    from tmdlib.datasets.smiles import csv_header

    if id_column is not None:
        return id_column or None
    header = csv_header(path)
    taken = {header_key(t) for t in taken if t}
    keys = {header_key(h): h for h in header}
    for name in DEFAULT_ID_COLUMNS:
        h = keys.get(header_key(name))
        if h is not None and header_key(h) not in taken:
            return h
    return None


def csv_columns(path: str, label_columns: list[str] | tuple | None, split_column: str | None,
                keep_columns: list[str] | tuple | None = None, *, optional: bool = False
                ) -> tuple[tuple[str, ...], str | None, tuple[str, ...]]:
    """The label, split and kept columns a CSV is read with.

    ``label_columns`` None: the CSV's ``y`` or ``label`` column if it has one (else unlabelled);
    ``split_column`` None: its ``split`` column if any ("" = none).  ``optional`` (an appended batch): a named
    split or kept column the file lacks is left out (null in the store) instead of refused, and a batch with
    none of the label columns is read unlabelled (one with only some of them is refused).
    """
    from tmdlib.datasets.smiles import column_index, csv_header, default_csv_columns

    header = csv_header(path)
    found_labels, found_split = default_csv_columns(path, header, labels=label_columns is None)
    labels = tuple(found_labels if label_columns is None else label_columns)
    split = found_split if split_column is None else (split_column or None)
    keep = tuple(keep_columns or ())
    if optional:
        def present(name):
            try:
                column_index(header, name, Path(path))
                return True
            except InputError:
                return False
        split = split if split and present(split) else None
        keep = tuple(c for c in keep if present(c))
        if labels and not any(present(c) for c in labels):
            labels = ()  # an unlabelled batch: its graphs join the pool, the ledger labels them later
    return labels, split, keep


@task(name="read-source", persist_result=False)
def read_source(kind: str, path: str, name: str, node_attributes: bool = False,
                smiles_column: str = "smiles", label_column=None, standin: str | None = None,
                workers: int | str = "auto", limit: int | None = None, *, split_column: str | None = None,
                keep_columns=(), task=None, skipped: list | None = None, id_column: str | None = None):
    """Read one source (``tu`` folder, ``ogb`` folder, ``smiles`` CSV or graph-store ``parquet``) with its task.

    ``label_column`` is one column or a list (SMILES); ``task`` is auto / a type / an existing dataset's
    :class:`~tmdlib.datasets.task.TaskSpec`; ``workers``: processes converting a SMILES source, auto (the cores
    this process may use, :func:`tasks.cpus.resolve_workers`) or a number; ``skipped`` (a list, SMILES only):
    a SMILES rdkit cannot parse is left out and appended to it (``(line, smiles, reason)``) instead of stopping.
    """
    if kind == "tu":
        return tds.read_tu(path, name=name, node_attributes=node_attributes,
                           task=None if isinstance(task, TaskSpec) else task)
    if kind == "ogb":
        return tds.read_ogb(path, name=name, task=task)
    if kind == "smiles":
        return tds.read_smiles_csv(path, smiles_column=smiles_column, label_column=label_column or None,
                                   split_column=split_column or None, keep_columns=keep_columns or (), task=task,
                                   standin=standin, workers=resolve_workers(workers), limit=limit,
                                   progress=_print_progress(name, _smiles_total(name, limit)), name=name,
                                   skipped=skipped, id_column=id_column)
    if kind == "parquet":
        return store_task(tds.read_graph_parquet(path), task, path)
    raise ValueError(f"unknown source kind {kind!r}")


def _smiles_total(name: str, limit: int | None) -> int | None:
    """Molecules a SMILES source will give, when known (a built-in pool), for the progress lines' ETA."""
    info = tds.DATASETS.get(name)
    return min(info.num_graphs, limit or info.num_graphs) if info is not None and info.kind == "smiles" else limit


@task(name="write-smiles-store", persist_result=False)
def write_smiles_store(path: str, out: str, name: str, smiles_column: str = "smiles", label_column=None,
                       standin: str | None = None, workers: int | str = "auto", limit: int | None = None, *,
                       split_column: str | None = None, keep_columns=(), task=None,
                       task_source: str | None = None, skip_invalid: bool = False,
                       id_column: str | None = None) -> dict:
    """Convert a SMILES CSV straight into the graph store ``out`` (atomically), one row group per chunk as the
    molecules are converted (:func:`tmdlib.datasets.write_smiles_parquet`: memory that does not grow with the
    pool); return the same summary as :func:`write_graph_store`."""
    with io.atomic_path(out) as tmp:
        stats = tds.write_smiles_parquet(path, tmp, smiles_column=smiles_column, label_column=label_column or None,
                                         split_column=split_column or None, keep_columns=keep_columns or (),
                                         task=task, task_source=task_source, standin=standin,
                                         workers=resolve_workers(workers),
                                         limit=limit, progress=_print_progress(name, _smiles_total(name, limit)),
                                         name=name, skip_invalid=skip_invalid, id_column=id_column)
    return {**_streamed_summary(out, stats), "invalid": stats["invalid"]}


#: What ``ingest.invalid`` may say of a SMILES rdkit cannot parse.
INVALID_RULES = ("skip", "refuse")


def invalid_report_path(out: str | Path) -> Path:
    """The report of the SMILES an ingest skipped, beside the store: ``data/graphs/<DS>.invalid.csv``."""
    p = Path(out)
    return p.with_name(p.name.removesuffix(".parquet") + ".invalid.csv")


@task(name="write-invalid-report", persist_result=False)
def write_invalid_report(out: str, invalid: list) -> str | None:
    """``line,smiles,reason`` of every SMILES left out, beside the store (atomically); an earlier report is
    removed when this ingest skipped none, so the report always describes the store beside it."""
    import csv
    import io as _io

    path = invalid_report_path(out)
    if not invalid:
        path.unlink(missing_ok=True)
        return None
    buf = _io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["line", "smiles", "reason"])
    w.writerows(sorted(invalid))
    io.write_text(path, buf.getvalue())
    return str(path)


#: A store without the canonical key column (older, or an OGB source) has its duplicate structures counted on
#: RDKit's canonical SMILES up to this size (about 0.2 ms a molecule on one core, measured: 10 s at this size),
#: larger ones on the SMILES as written.
CANONICAL_DUPLICATES_LIMIT = 50_000


def count_duplicates(store: str) -> dict | None:
    """Structures stored more than once in a molecule store (None: no ``smiles`` column): ``structures`` (how many
    structures have copies), ``graphs`` (the graphs beyond each structure's first), ``compared`` (on what)."""
    import pyarrow.parquet as pq

    if "smiles" not in pq.read_schema(store).names:
        return None
    index = io.canonical_keys(store)
    if index is not None:  # the key index written at ingest: canonical at any size, no parsing
        keys, compared = index.to_pylist(), "RDKit's canonical SMILES"
    else:
        smiles = pq.read_table(store, columns=["smiles"]).column("smiles").to_pylist()
        if len(smiles) <= CANONICAL_DUPLICATES_LIMIT:
            from tmdlib.datasets.smiles import canonical_smiles

            keys, compared = [canonical_smiles(s) or s for s in smiles], "RDKit's canonical SMILES"
        else:
            keys, compared = smiles, "the SMILES as written (a pool this large is not canonicalised)"
    from collections import Counter

    counts = Counter(keys)
    copies = [c for c in counts.values() if c > 1]
    return {"structures": len(copies), "graphs": int(sum(copies) - len(copies)), "compared": compared}


def _streamed_summary(out: str, stats: dict) -> dict:
    """:func:`write_graph_store`'s summary of a store written a slice at a time (``stats``: its counts and task)."""
    graphs = stats["graphs"]
    return {
        "path": str(Path(out)),
        "task": stats["task"].describe(),
        "graphs": graphs,
        "mean_nodes": stats["nodes"] / graphs if graphs else 0.0,
        "mean_edges": stats["edges"] / graphs if graphs else 0.0,
        "sha256": io.sha256_file(out),
    }


@task(name="copy-parquet-store", persist_result=False)
def copy_parquet_store(path: str, out: str, name: str, task=None) -> dict:
    """Validate a graph-store Parquet file and copy it into the store ``out`` (atomically) a slice of graphs at a
    time, with its task (:func:`tmdlib.datasets.copy_graph_parquet`: memory that does not grow with the file);
    return the same summary as :func:`write_graph_store`."""
    with io.atomic_path(out) as tmp:
        stats = tds.copy_graph_parquet(path, tmp, task, progress=_print_progress(name, None, "graphs"))
    return _streamed_summary(out, stats)


def batch_kind(path: str | Path) -> str:
    """Source kind of an appended batch: a TU folder, a molecule file (``.csv``, ``.tsv``, ``.smi``, ``.sdf``, ...:
    :data:`tmdlib.datasets.molfiles.FORMATS`) or a graph-store ``.parquet``."""
    from tmdlib.datasets.molfiles import source_kind

    p = Path(path)
    try:
        return source_kind(p)
    except InputError as err:
        raise InputError(p, "a batch is a TU folder, a molecule file (.csv, .tsv, .smi, .sdf, ..., .gz allowed) or "
                            f"a graph-store .parquet file: {err.problem}") from None


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
               label_column=None, *, split_column: str | None = None, keep_columns=(), task=None):
    """Read and validate one batch (any of the three kinds) on its own, as the intake of new data does.

    A SMILES batch is read with the dataset's label columns (``label_column``; None: its own ``y`` or
    ``label`` column, if any) and, when given, the dataset's task (a
    :class:`~tmdlib.datasets.task.TaskSpec`: its labels must fit it, every offending line named); a named
    split or kept column it lacks is left null.
    """
    p = Path(path)
    kind = batch_kind(p)
    options = {}
    if kind == "smiles":  # TU batches: their classes are mapped to the dataset's when appended
        named = [label_column] if isinstance(label_column, str) else label_column
        labels, split, keep = csv_columns(str(p), named, split_column, keep_columns, optional=True)
        options = {"label_column": list(labels), "split_column": split, "keep_columns": keep, "task": task}
    table = read_source.fn(kind, str(p), tu_name(p) if kind == "tu" else p.stem, node_attributes, smiles_column,
                           **options)
    tds.validate_graph_table(table, p)
    return table


@task(name="append-batches", persist_result=False)
def append_batches(table, batches: list[tuple[str, str, str]], node_attributes: bool = False,
                   smiles_column: str = "smiles", label_column=None, split_column: str | None = None,
                   keep_columns=()):
    """Append each batch's graphs after ``table`` (tmdlib.datasets.append_graph_table), in order; every batch
    keeps the dataset's task (a batch whose labels do not fit it is refused, naming its file and line)."""
    from tmdlib.datasets.append import append_graph_table

    spec = table_task(table)
    for name, _kind, path in batches:
        batch = read_batch(path, node_attributes, smiles_column, label_column, split_column=split_column,
                           keep_columns=keep_columns, task=spec)
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
        "task": table_task(table).describe(),
        "graphs": int(table.num_rows),
        "mean_nodes": float(n_nodes.mean()) if table.num_rows else 0.0,
        "mean_edges": float(n_edges.mean()) if table.num_rows else 0.0,
        "sha256": io.sha256_file(out),
    }
