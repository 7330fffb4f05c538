"""How one dataset's source is read: where it is, its settings, the columns a molecule file is read with.

The ingest stage's decisions, as functions of the options and of the file's header (no project layout):

* :func:`resolve_source` -- which source a dataset is (a built-in's shipped files, a user's TU folder, molecule
  file or graph-store Parquet file) and its kind;
* :func:`check_sources` / :func:`check_source` -- the per-dataset source settings (``params.yaml``'s
  ``ingest.sources``: :data:`SOURCE_KEYS`), checked;
* :func:`choose_reading` -- the command line's choices over a dataset's own settings over the defaults, as one
  :class:`SourceReading`;
* :func:`plan_reading` -- a built-in dataset's own columns and task, and the label stand-in's rule;
* :func:`csv_columns`, :func:`id_column_of`, :func:`file_columns` -- the label, split, kept and compound-id
  columns a molecule file is read with (defaults found by name in its header);
* :func:`batch_kind`, :func:`tu_name` -- what an appended batch is.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .._errors import InputError

__all__ = ["expected_molecules", "batch_reading", "invalid_csv_text", "progress_line", "SOURCE_KEYS", "DEFAULT_ID_COLUMNS", "INVALID_RULES", "FEATURES", "SourceReading", "Source",
           "resolve_source", "check_sources", "check_source", "split_names", "choose_reading", "plan_reading",
           "csv_columns", "id_column_of", "file_columns", "batch_kind", "tu_name"]

#: Per-dataset source settings (``ingest.sources.<NAME>``) and their types.
SOURCE_KEYS = {"smiles_column": str, "label_columns": list, "split_column": str, "keep_columns": list, "task": str,
               "id_column": str}
#: Headers (compared as :func:`tmdlib.datasets.labsheet.header_key` writes them) taken as the user's compound id
#: when no ``id_column`` is named.
DEFAULT_ID_COLUMNS = ("compound id", "compound_id", "id", "registry number", "registry id", "molecule chembl id",
                      "chembl id", "molregno", "idnumber", "catalog id", "catalog number", "compound", "name",
                      "title")  # title: an SD record's title line, when no property names an id
#: What ``ingest.invalid`` may say of a SMILES rdkit cannot parse.
INVALID_RULES = ("skip", "refuse")
#: TU node features (``ingest.features``): one-hot of the node labels, or with the node attributes appended.
FEATURES = ("onehot", "onehot+attributes")


@dataclass(frozen=True)
class SourceReading:
    """How one source is read (the readers' options, :func:`tmdlib.datasets.read_smiles_csv` and the others').

    Attributes
    ----------
    smiles_column : str
        The SMILES column of a molecule file.
    label_columns : list of str or None
        Its label columns (None: a ``y`` or ``label`` column if it has one; ``[]``: unlabelled).
    split_column : str or None
        Its split column (None: a ``split`` column if any; ``""``: none).
    keep_columns : list of str or None
        Further numeric columns kept in the store (None: a built-in's own, else none).
    task : str, TaskSpec or None
        ``auto`` / None (decided from the labels), a task type, or an existing dataset's
        :class:`~tmdlib.datasets._task.TaskSpec` (an appended batch).
    id_column : str or None
        The column of the user's compound ids (None: one named like one, :func:`id_column_of`; ``""``: none).
    standin : str or None
        A label stand-in rule for an unlabelled pool (:data:`tmdlib.datasets._smiles.STANDIN_RULES`), or None.
    node_attributes : bool
        TU sources: append the node attributes to the one-hot node labels.
    limit : int or None
        Molecule sources: only the first ``limit`` molecules.
    """

    smiles_column: str = "smiles"
    label_columns: Any = None
    split_column: str | None = None
    keep_columns: Any = None
    task: Any = None
    id_column: str | None = None
    standin: str | None = None
    node_attributes: bool = False
    limit: int | None = None

    def smiles_options(self) -> dict:
        """The SMILES readers' keyword arguments (:func:`tmdlib.datasets.read_smiles_csv`,
        :func:`~tmdlib.datasets.write_smiles_parquet`), an empty choice as none."""
        return {"smiles_column": self.smiles_column, "label_column": self.label_columns or None,
                "split_column": self.split_column or None, "keep_columns": self.keep_columns or (),
                "task": self.task, "standin": self.standin, "limit": self.limit, "id_column": self.id_column}


@dataclass(frozen=True)
class Source:
    """A resolved source: its ``kind`` (``tu``, ``ogb``, ``smiles``, ``parquet``), ``path``, the dataset's
    ``name`` and, for a built-in dataset, the raw folder whose checksums are verified (``checksum_folder``)."""

    kind: str
    path: str
    name: str
    checksum_folder: str | None = None


def resolve_source(dataset: str | None, raw_root: str, tu_dir: str | None = None, smiles_csv: str | None = None,
                   parquet: str | None = None, name: str | None = None, source: str | None = None) -> Source:
    """Which source a dataset is (no I/O beyond stat).

    Parameters
    ----------
    dataset : str or None
        A built-in dataset's name, or a user's dataset in ``raw_root``.
    raw_root : str
        The folder of the raw datasets.
    tu_dir, smiles_csv, parquet : str or None
        A user's source given directly (at most one), named ``name`` (else ``dataset``).
    name : str or None
        The dataset's name for a source given directly.
    source : str or None
        The dataset's entry in ``base.datasets`` (``NAME: FILE``), a file or folder under ``raw_root``; a user's
        dataset without one is looked for as ``<NAME>/`` (TU) or ``<NAME><suffix>`` for every molecule file
        suffix (:data:`tmdlib.datasets.molfiles.POOL_SUFFIXES`).

    Returns
    -------
    Source

    Raises
    ------
    InputError
        Several sources, no name for user data, an unsafe name, or no such dataset.
    """
    from .molfiles import POOL_SUFFIXES, source_kind
    from ._registry import DATASETS, check_dataset_name, get_dataset_info, known_datasets_text

    given = [p for p in (tu_dir, smiles_csv, parquet) if p]
    if len(given) > 1:
        raise InputError(None, "give only one of --tu-dir, --smiles-csv, --parquet")
    if given:
        label = name or dataset
        if not label:
            raise InputError(given[0], "a dataset --name is required for user data")
        check_dataset_name(label)
        kind = "tu" if tu_dir else "smiles" if smiles_csv else "parquet"
        return Source(kind, given[0], label)
    if not dataset:
        raise InputError(None, "name a built-in dataset or give --tu-dir/--smiles-csv/--parquet")
    check_dataset_name(dataset)
    if dataset in DATASETS:
        info = get_dataset_info(dataset)
        path = Path(raw_root) / info.folder
        return Source(info.kind, str(path / info.file if info.file else path), info.name, info.folder)
    # A user dataset in the raw root: the file base.datasets names, else a TU folder or a molecule file by its name.
    root = Path(raw_root)
    if source and source != dataset:
        if Path(source).is_absolute() or ".." in Path(source).parts:
            raise InputError(None, f"base.datasets: {dataset}: {source!r} must name a file or folder inside {root}")
        path = root / source
        if not path.exists():
            raise InputError(None, f"base.datasets: {dataset}: {source!r}, but there is no {path}")
        return Source(source_kind(path), str(path), dataset)
    if (root / dataset).is_dir():
        return Source("tu", str(root / dataset), dataset)
    for suffix in POOL_SUFFIXES:
        if (root / f"{dataset}{suffix}").is_file():
            return Source(source_kind(root / f"{dataset}{suffix}"), str(root / f"{dataset}{suffix}"), dataset)
    raise InputError(None, f"unknown dataset {dataset!r}: not built in ({known_datasets_text()}) and no "
                           f"{root / dataset}/ (TU layout) or {dataset}.<csv|tsv|smi|cxsmiles|sdf|parquet>[.gz] in "
                           f"{root}; or name the file in base.datasets ({dataset}: FILE)")


def _task_choice(task: str, what: str, where=None) -> None:
    from ._task import TASK_TYPES

    if task != "auto" and task not in TASK_TYPES:
        raise InputError(where, f"{what} must be auto or one of {', '.join(TASK_TYPES)}; got {task!r}")


def check_source(raw, name: str, where=None) -> dict:
    """One dataset's source settings (``ingest.sources.<NAME>``), checked.

    ``label_columns`` / ``keep_columns`` may be a list or one name; ``split_column`` / ``id_column`` may be null
    (none, none looked for: stored as ``""``).  Returns only the keys given.

    Raises
    ------
    InputError
        Not a mapping, an unknown key or a value of the wrong type (naming ``where``, the file, and the key).
    """
    raw = raw or {}
    at = f"ingest.sources.{name}"
    if not isinstance(raw, dict):
        raise InputError(where, f"{at} must be a mapping of {', '.join(SOURCE_KEYS)}")
    out = {}
    for key, value in raw.items():
        if key not in SOURCE_KEYS:
            raise InputError(where, f"{at}: unknown key {key!r}; known: {', '.join(SOURCE_KEYS)}")
        if value is None and key in ("id_column", "split_column"):
            out[key] = ""  # no such column, none looked for
            continue
        if SOURCE_KEYS[key] is list:
            value = [value] if isinstance(value, str) else value
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise InputError(where, f"{at}.{key} must be a column name or a list of them; got {value!r}")
        elif not isinstance(value, str) or not value:
            raise InputError(where, f"{at}.{key} must be a non-empty string; got {value!r}")
        out[key] = value
    if "task" in out:
        _task_choice(out["task"], f"{at}.task", where)
    return out


def check_sources(sources, where=None) -> dict[str, dict]:
    """Every dataset's source settings (``ingest.sources``: name -> settings), each checked by
    :func:`check_source`."""
    sources = sources or {}
    if not isinstance(sources, dict):
        raise InputError(where, "ingest.sources must map dataset names to their settings")
    return {str(name): check_source(raw, str(name), where) for name, raw in sources.items()}


def split_names(values) -> list[str] | None:
    """Repeated and/or comma-separated column names (``--label-column a,b --label-column c``) as one list; one
    string is one such value; None stays None (not given)."""
    if values is None:
        return None
    values = [values] if isinstance(values, str) else values
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


def choose_reading(own: dict, *, smiles_column: str | None = None, label_columns=None,
                   split_column: str | None = None, keep_columns=None, task: str | None = None,
                   id_column: str | None = None) -> SourceReading:
    """A dataset's reading options: the command line's (the keyword arguments, None: not given), else its own
    settings (``own``: :func:`check_source`'s), else the defaults (``smiles``; labels / split found by name; the
    task decided from the labels).

    The task is the exception: ``task`` carries ``base.task`` in the pipeline, the default of every dataset, so a
    dataset's own ``task`` wins over it.
    """
    task = task or "auto"
    _task_choice(task, "--task")
    labels, keep = split_names(label_columns), split_names(keep_columns)
    return SourceReading(
        smiles_column=smiles_column or own.get("smiles_column", "smiles"),
        label_columns=labels if labels is not None else own.get("label_columns"),
        split_column=split_column if split_column is not None else own.get("split_column"),
        keep_columns=keep if keep is not None else own.get("keep_columns"),
        task=own.get("task") or task,
        id_column=id_column if id_column is not None else own.get("id_column"),
    )


def plan_reading(source: Source, info, reading: SourceReading) -> tuple[SourceReading, bool]:
    """The reading of ``source`` with a built-in dataset's own columns and task filled in.

    Parameters
    ----------
    source : Source
    info : DatasetInfo or None
        The built-in dataset's entry (:data:`tmdlib.datasets.DATASETS`), None for a user's dataset.
    reading : SourceReading
        The options chosen (:func:`choose_reading`); ``standin`` ``"none"`` / ``""`` is None.

    Returns
    -------
    reading : SourceReading
        A built-in molecule dataset's label / split / kept columns where none were chosen; its registered task
        under ``auto`` (not an unlabelled built-in pool's without its stand-in: its registered task is the
        stand-in's).
    builtin_task : bool
        The task is the registry's, not one the user asked for.

    Raises
    ------
    InputError
        A label stand-in for a source that is no molecule file.
    """
    standin = None if reading.standin in (None, "", "none") else reading.standin
    if standin is not None and source.kind != "smiles":
        raise InputError(source.path, f"a label stand-in ({standin!r}) is for unlabelled SMILES pools; "
                                      f"{source.name} is a {source.kind} source")
    labels = [reading.label_columns] if isinstance(reading.label_columns, str) else reading.label_columns
    split, keep = reading.split_column, reading.keep_columns
    if info is not None and info.kind == "smiles":
        labels = list(info.label_columns) if labels is None else labels
        split = (info.split_column or "") if split is None else split
        keep = list(info.keep_columns) if keep is None else keep
    builtin_task = reading.task in (None, "", "auto") and info is not None and (info.standin is None
                                                                                or standin is not None)
    task = info.task if builtin_task else reading.task
    return replace(reading, label_columns=labels, split_column=split, keep_columns=keep, task=task,
                   standin=standin), builtin_task


def id_column_of(path: str | os.PathLike, id_column: str | None, taken=()) -> str | None:
    """The compound-id column a molecule file is read with: ``id_column`` ("" = none), else the first header that
    names an id (:data:`DEFAULT_ID_COLUMNS`, any case) and is no other column's (``taken``)."""
    from .labsheet import header_key
    from ._smiles import csv_header

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


def csv_columns(path: str | os.PathLike, label_columns, split_column: str | None, keep_columns=None, *,
                optional: bool = False) -> tuple[tuple[str, ...], str | None, tuple[str, ...]]:
    """The label, split and kept columns a molecule file is read with.

    ``label_columns`` None: the file's ``y`` or ``label`` column if it has one (else unlabelled);
    ``split_column`` None: its ``split`` column if any ("" = none).  ``optional`` (an appended batch): a named
    split or kept column the file lacks is left out (null in the store) instead of refused, and a batch with
    none of the label columns is read unlabelled (one with only some of them is refused).
    """
    from ._smiles import column_index, csv_header, default_csv_columns

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


def file_columns(path: str | os.PathLike, reading: SourceReading, find_id: bool = True) -> SourceReading:
    """``reading`` with the columns of the molecule file ``path`` found (:func:`csv_columns`; the compound-id
    column by :func:`id_column_of` when ``find_id``, a user's file: a built-in names its own)."""
    found, split, keep = csv_columns(path, reading.label_columns, reading.split_column, reading.keep_columns)
    ident = id_column_of(path, reading.id_column, (*found, split, *keep, reading.smiles_column)) if find_id else None
    return replace(reading, label_columns=list(found) or None, split_column=split, keep_columns=keep,
                   id_column=ident or None)


def batch_kind(path: str | os.PathLike) -> str:
    """Source kind of an appended batch: a TU folder, a molecule file (``.csv``, ``.tsv``, ``.smi``, ``.sdf``, ...:
    :data:`tmdlib.datasets.molfiles.FORMATS`) or a graph-store ``.parquet``."""
    from .molfiles import source_kind

    p = Path(path)
    try:
        return source_kind(p)
    except InputError as err:
        raise InputError(p, "a batch is a TU folder, a molecule file (.csv, .tsv, .smi, .sdf, ..., .gz allowed) or "
                            f"a graph-store .parquet file: {err.problem}") from None


def tu_name(folder: str | os.PathLike) -> str:
    """The ``NAME`` of a TU folder, from its one ``NAME_A.txt`` (or ``.txt.gz``) file."""
    folder = Path(folder)
    names = sorted({f.name.rsplit("_A.txt", 1)[0] for f in folder.glob("*_A.txt*")})
    if len(names) != 1:
        raise InputError(folder, f"a TU folder holds exactly one NAME_A.txt file; found {len(names)}")
    return names[0]


def expected_molecules(name: str, limit: int | None) -> int | None:
    """Molecules a SMILES source will give, when known (a built-in pool: its size, at most ``limit``), else
    ``limit``: the progress lines' ETA."""
    from ._registry import DATASETS

    info = DATASETS.get(name)
    return min(info.num_graphs, limit or info.num_graphs) if info is not None and info.kind == "smiles" else limit


def batch_reading(path: str | os.PathLike, kind: str, node_attributes: bool = False, smiles_column: str = "smiles",
                  label_column=None, *, split_column: str | None = None, keep_columns=(), task=None) -> SourceReading:
    """How one appended batch of ``kind`` (:func:`batch_kind`) is read: a SMILES batch with the dataset's label
    columns (``label_column``; None: its own ``y`` or ``label`` column, if any), split and kept columns (one it
    lacks left null, :func:`csv_columns`) and the dataset's ``task`` (its labels must fit it); TU batches with
    ``node_attributes`` (their classes are mapped to the dataset's when appended)."""
    reading = SourceReading(smiles_column=smiles_column, node_attributes=node_attributes)
    if kind != "smiles":
        return reading
    named = [label_column] if isinstance(label_column, str) else label_column
    labels, split, keep = csv_columns(str(path), named, split_column, keep_columns, optional=True)
    return replace(reading, label_columns=list(labels), split_column=split, keep_columns=keep, task=task)


def invalid_csv_text(invalid) -> str:
    """``line,smiles,reason`` of the SMILES an ingest left out (``invalid``: ``(line, smiles, reason)`` rows),
    sorted, as CSV text."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["line", "smiles", "reason"])
    w.writerows(sorted(invalid))
    return buf.getvalue()


def progress_line(name: str, done: int, seconds: float, total: int | None = None, unit: str = "molecules") -> str:
    """``ingest NAME: done unit (share %, ETA min), rate/s``: a reading's progress (share and ETA when ``total``
    is known)."""
    rate = done / max(seconds, 1e-9)
    share = f" ({100 * done / total:.1f} %, ETA {(total - done) / rate / 60:.1f} min)" if total else ""
    return f"ingest {name}: {done:,} {unit}{share}, {rate:,.0f}/s"
