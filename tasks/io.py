"""Reading and writing the pipeline's artifacts.

**Readers** (one :class:`~tmdlib._errors.InputError` naming the file, line and problem): ``selection.json``
(:func:`read_selection`), ``labels.csv`` (:func:`read_labels`, checked against the dataset's task),
``nodes.parquet`` (:func:`read_nodes`); small user CSVs and JSON objects are read by
:mod:`tmdlib.datasets.documents` (``read_text_csv``, ``read_json``, importable from here too).

**Atomic writes**: a reader never sees a half-written file.

Every writer goes to a temporary file in a private folder next to the destination,
flushes and fsyncs it, then ``os.replace``-s it onto the final name (atomic on POSIX)
and fsyncs the folder.  On any error (ENOSPC included) the temporary is removed and
the destination is untouched; temporaries of a killed writer carry its pid and are
removed by :func:`remove_stale_temps`.  Files that must change together are written with :func:`file_set`
(staged, one atomic rename as the commit point, rolled forward by :func:`settle_file_set` after a kill).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from tmdlib.datasets import sha256_file  # noqa: F401  (re-exported for the tasks)
from tmdlib.datasets.documents import (check_selection, node_subsets, node_subsets_for,  # noqa: F401  (tasks)
                                       positions, read_json, read_text_csv)
from tmdlib import InputError

__all__ = ["atomic_path", "write_bytes", "write_text", "write_pages", "write_json", "write_parquet", "write_npy",
           "write_npz", "sha256_file", "remove_stale_temps", "file_set", "settle_file_set", "cached_json",
           "read_text_csv", "read_json", "read_selection", "read_labels",
           "read_nodes", "nodes_off", "positions", "dataset_name", "node_subsets_for", "tool_version", "stamped",
           "VERSION_FIELD"]

#: The key every stage's JSON record (selection.json, manifest.json, labels.json, train.json, metrics.json,
#: predictions.json, the TMD's meta.json, the ledger's seal) keeps the tmdsub version that wrote it under.
VERSION_FIELD = "tmdsub_version"


def tool_version() -> str:
    """The installed tmdsub's version (``0+unknown`` when it is not installed: a bare source tree)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tmdsub")
    except PackageNotFoundError:
        return "0+unknown"


def stamped(record: dict) -> dict:
    """``record`` with :data:`VERSION_FIELD`: the tmdsub version that made it (:func:`tool_version`).  The version
    only, not the tool's git sha: these records are DVC outputs that later stages depend on, and a sha would rerun
    every later stage after any commit of the tool (the sha is in the MLflow runs' tags and the audit report)."""
    return {**record, VERSION_FIELD: tool_version()}


@contextlib.contextmanager
def atomic_path(dest: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``dest``; move it onto ``dest`` on success."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    # A private temporary folder holding a file with the final name: writers that record their file
    # name inside the file (torch.save names its zip records after it) write the same bytes on every
    # run.  The writer's pid is in the folder name, so a later run can remove what a killed one left.
    tmp_dir = Path(tempfile.mkdtemp(prefix=f".{dest.name}.{os.getpid()}.", suffix=".tmp", dir=dest.parent))
    tmp_path = tmp_dir / dest.name
    try:
        tmp_path.touch()
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_path, dest)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    _fsync_dir(dest.parent)  # the rename itself survives a power cut


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temps(folder: str | os.PathLike) -> int:
    """Delete ``atomic_path`` temporaries in ``folder`` left by writers that no longer run (killed).

    A temporary is never a finished artifact (readers only open final names); this only reclaims
    the space.  Temporaries of live processes (this one included) are kept.  Returns the count removed.
    """
    import re

    folder = Path(folder)
    if not folder.is_dir():
        return 0
    removed = 0
    for p in folder.glob(".*.tmp"):
        m = re.fullmatch(r"\..+\.(\d+)\.[^.]+\.tmp", p.name)
        if m is None or _pid_alive(int(m.group(1))):
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        removed += 1
    return removed


# ----------------------------------------------------------------------------------------------
# A set of files committed together (the predictions' .parquet / .csv / .json)
# ----------------------------------------------------------------------------------------------
_ORDER = ".order"


def _commit_dir(folder: Path, stem: str) -> Path:
    return folder / f".{stem}.commit"


@contextlib.contextmanager
def file_set(folder: str | os.PathLike, stem: str, last: str) -> Iterator[Path]:
    """Write several files as one set: every reader and every later run sees all the previous files or all the new.

    Yields a private staging folder; the caller writes the files there under their final names (``last``, the
    index naming the others, among them).  On success:

    1. every staged file and the folder are fsynced, and the move order (``last`` last) is written beside them;
    2. an interrupted earlier commit is finished (:func:`settle_file_set`);
    3. **commit point**: the staging folder is renamed to ``.<stem>.commit`` (one atomic rename);
    4. the files are moved into ``folder`` in that order (``os.replace`` each) and the commit folder removed.

    A run killed before step 3 leaves the previous set untouched (its staging folder, named with its pid, is removed
    by :func:`remove_stale_temps`); killed after it, the commit folder holds the complete new set and the next
    :func:`settle_file_set` (every later commit, and the readers, call it) moves the rest in: roll forward, never a
    mix.  On an error inside the block nothing is moved.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{stem}.{os.getpid()}.", suffix=".tmp", dir=folder))
    try:
        yield staging
        names = sorted((p.name for p in staging.iterdir() if p.name != _ORDER), key=lambda n: (n == last, n))
        if last not in names:
            raise ValueError(f"file set {stem}: {last} was not written")
        for name in names:
            with open(staging / name, "rb+") as fh:
                os.fsync(fh.fileno())
        (staging / _ORDER).write_text("\n".join(names) + "\n", encoding="utf-8")
        _fsync_dir(staging)
        settle_file_set(folder, stem)
        _pause_for_tests()
        os.rename(staging, _commit_dir(folder, stem))  # the commit point
        _fsync_dir(folder)
        _pause_for_tests()
        settle_file_set(folder, stem)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def settle_file_set(folder: str | os.PathLike, stem: str) -> bool:
    """Finish a :func:`file_set` commit that a killed run left (move the rest of its files into ``folder``, in its
    order, then remove the commit folder) and the staging folders of killed runs.  Idempotent, safe to call from a
    reader.  Returns whether there was a commit to finish."""
    folder = Path(folder)
    remove_stale_temps(folder)
    commit = _commit_dir(folder, stem)
    if not commit.is_dir():
        return False
    try:
        names = (commit / _ORDER).read_text(encoding="utf-8").split()
    except FileNotFoundError:  # another process finished it meanwhile
        return False
    for name in names:
        if (commit / name).exists():
            with contextlib.suppress(FileNotFoundError):  # moved by a concurrent reader
                os.replace(commit / name, folder / name)
            _pause_for_tests()
    _fsync_dir(folder)
    shutil.rmtree(commit, ignore_errors=True)
    return True


def _pause_for_tests() -> None:
    """``TMDSUB_COMMIT_PAUSE`` seconds between the steps of a :func:`file_set` commit: lets a test kill a real run
    at each step (unset: no pause)."""
    pause = os.environ.get("TMDSUB_COMMIT_PAUSE")
    if pause:
        import time

        time.sleep(float(pause))


def _write_with(dest, writer: Callable[[Path], Any]) -> Path:
    with atomic_path(dest) as tmp:
        writer(tmp)
    return Path(dest)


def write_bytes(dest, data: bytes) -> Path:
    """Atomically write ``data`` to ``dest``."""
    return _write_with(dest, lambda p: p.write_bytes(data))


def write_text(dest, text: str) -> Path:
    """Atomically write UTF-8 ``text`` to ``dest``."""
    return _write_with(dest, lambda p: p.write_text(text, encoding="utf-8"))


def write_pages(folder, pages: dict) -> list[str]:
    """Atomically write each ``{file name: text or bytes}`` of ``pages`` into ``folder``; returns the paths."""
    folder = Path(folder)
    return [str(write_bytes(folder / n, c) if isinstance(c, bytes) else write_text(folder / n, c))
            for n, c in pages.items()]


def write_json(dest, obj: Any) -> Path:
    """Atomically write ``obj`` as indented, key-sorted JSON.

    Streamed: the encoder's pieces go to the file as they come, never joined into one string, and a numpy array
    is turned into Python numbers a chunk at a time (the bytes are those of ``json.dumps(obj, indent=2,
    sort_keys=True) + "\\n"`` with every array given as its ``tolist()``).  For the selection of a 1.27 M-graph
    pool (four lists of ~10⁶ numbers) the joined string and its pieces took ~380 MB on top of the lists; the lists
    themselves, ~0.9 GB for an 8 M-graph pool, are not made when the caller passes the arrays.
    """
    encoder = json.JSONEncoder(indent=2, sort_keys=True, default=_json_default)

    def _w(p: Path) -> None:
        with open(p, "w", encoding="utf-8", buffering=1 << 20) as fh:
            for piece in encoder.iterencode(obj):
                fh.write(piece)
            fh.write("\n")

    return _write_with(dest, _w)


def write_parquet(dest, table) -> Path:
    """Atomically write a pyarrow Table as Parquet (zstd)."""
    import pyarrow.parquet as pq

    return _write_with(dest, lambda p: pq.write_table(table, p, compression="zstd"))


def write_npz(dest, arrays: dict) -> Path:
    """Atomically write a dict of numpy arrays as one ``.npz`` (never pickled)."""
    def _w(p: Path) -> None:
        with open(p, "wb") as fh:
            np.savez(fh, **{k: np.asarray(v) for k, v in arrays.items()})

    return _write_with(dest, _w)


def write_npy(dest, array) -> Path:
    """Atomically write a numpy array in ``.npy`` format (never pickled)."""
    import numpy as np

    def _w(p: Path) -> None:
        with open(p, "wb") as fh:
            np.save(fh, array, allow_pickle=False)

    return _write_with(dest, _w)


class _ArrayItems(list):
    """An array's items for :func:`write_json`'s encoder, made into Python numbers a chunk at a time as the
    encoder iterates (its list branch reads ``len`` and iterates; the list itself stays empty), so an array of
    10⁷ numbers is written without a list of 10⁷ Python objects (~36 bytes each)."""

    CHUNK = 1 << 16

    def __init__(self, array):
        super().__init__()
        self.array = array

    def __len__(self) -> int:
        return len(self.array)

    def __iter__(self):
        for s in range(0, len(self.array), self.CHUNK):
            yield from self.array[s:s + self.CHUNK].tolist()


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return _ArrayItems(o) if o.ndim else o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


# Artifact readers
# ----------------------------------------------------------------------------------------------
def cached_json(path) -> Any:
    """The JSON a cache kept at ``path``, or ``{}`` when it is missing or unreadable (then it is computed again)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


def dataset_name(graphs_path: str) -> str:
    """Dataset name recorded in the graph store's schema metadata (``tmdlib.name``), else the file stem."""
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(graphs_path).metadata or {}
    except Exception:  # noqa: BLE001 - the store itself is validated by load_graph_store
        meta = {}
    name = meta.get(b"tmdlib.name")
    return name.decode() if name else Path(graphs_path).stem


def canonical_keys(store_path: str):
    """Each molecule's canonical SMILES from the store's key index (``canonical_smiles``, written at ingest), in
    store order, as an Arrow array; a molecule appended from a source without it is canonicalised here, only those.
    None: the store has no index (an older store or an OGB source)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tmdlib.datasets._smiles import CANONICAL_COLUMN, filled_keys

    if CANONICAL_COLUMN not in pq.read_schema(store_path).names:
        return None
    keys = pq.read_table(store_path, columns=[CANONICAL_COLUMN]).column(CANONICAL_COLUMN)
    if not keys.null_count:
        return keys
    written = pq.read_table(store_path, columns=["smiles"]).column("smiles").to_pylist()
    return pa.array(filled_keys(keys.to_pylist(), written), pa.string())


def read_selection(path: str) -> dict:
    """Validated ``selection.json`` (:func:`tmdlib.datasets.documents.check_selection`)."""
    return check_selection(read_json(path, "selection file"), path)


def read_labels(csv_path: str, meta_path: str | None = None, task=None) -> tuple[dict, dict]:
    """``({graph_id: label}, labels.json)`` from ``labels.csv`` (``graph_id,y``, or ``graph_id`` and one column
    per target), every value checked against the dataset's ``task`` (binary when None: 0 or 1).

    A label is a float (one target) or a float array of shape ``(T,)`` (NaN = not measured), in the values users
    write (multi-class: the class values).  ``meta_path`` defaults to ``labels.json`` next to the CSV; missing →
    ``{"source": "unknown"}``.
    """
    from tmdlib.datasets.labels import label_columns, labels_of_table
    from tmdlib.datasets._task import BINARY

    task = task or BINARY
    cols = ["y"] if task.num_targets == 1 else label_columns(task)
    labels = labels_of_table(read_text_csv(csv_path, ("graph_id", *cols), what="labels file"), task, csv_path)
    return labels, read_labels_meta(csv_path, meta_path)


def read_labels_meta(csv_path: str, meta_path: str | None = None) -> dict:
    """``labels.json`` of a labels file (``meta_path``, default next to the CSV) with the import's bookkeeping
    (``import.json`` beside it: round, requested / answered / missing, ...) when there is one;
    ``{"source": "unknown"}`` when there is none."""
    mp = Path(meta_path) if meta_path else Path(csv_path).with_suffix(".json")
    meta = read_json(str(mp), "labels metadata") if mp.is_file() else {"source": "unknown"}
    imp = mp.with_name("import.json")
    return {**read_json(str(imp), "label import record"), **meta} if imp.is_file() else meta


def nodes_table(path: str, columns: tuple):
    """``columns`` of ``nodes.parquet`` (InputError naming the file: missing, or not readable with them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not Path(path).is_file():
        raise InputError(path, "node-subsampling file not found")
    try:
        return pq.read_table(path, columns=list(columns))
    except (pa.ArrowException, OSError, ValueError, KeyError) as err:
        raise InputError(path, f"not a readable nodes Parquet ({', '.join(columns)}): {err}") from None


def read_nodes(path: str) -> dict[int, tuple[np.ndarray, float]]:
    """``{graph_id: (kept local node ids, epsilon)}`` from ``nodes.parquet``."""
    table = nodes_table(path, ("graph_id", "nodes", "epsilon"))
    return node_subsets(*(table.column(c).to_pylist() for c in ("graph_id", "nodes", "epsilon")), path)


#: The schema-metadata key of ``nodes.parquet`` that records node subsampling as off, and why.
NODES_META_KEY = b"tmdsub.nodes"


def nodes_off(path: str | None) -> dict | None:
    """``{"method": "off", "requested", "reason", "line"}`` when ``nodes.parquet`` records node subsampling as off
    (:func:`tasks.select.nodes_off_table`), else None (also for no path or a missing file: its reader says so)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tmdlib.datasets.documents import nodes_off_record

    if not path or not Path(path).is_file():
        return None
    try:
        raw = (pq.read_schema(path).metadata or {}).get(NODES_META_KEY)
    except (pa.ArrowException, OSError) as err:
        raise InputError(path, f"not a readable nodes Parquet: {err}") from None
    return nodes_off_record(raw)
