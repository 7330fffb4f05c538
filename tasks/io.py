"""Atomic artifact writes: a reader never sees a half-written file.

Every writer goes to a temporary file in a private folder next to the destination,
flushes and fsyncs it, then ``os.replace``-s it onto the final name (atomic on POSIX)
and fsyncs the folder.  On any error (ENOSPC included) the temporary is removed and
the destination is untouched; temporaries of a killed writer carry its pid and are
removed by :func:`remove_stale_temps`.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

from tmdlib.datasets.checksums import sha256_file  # noqa: F401  (re-exported for the tasks)

__all__ = ["atomic_path", "write_bytes", "write_text", "write_json", "write_parquet", "write_npy", "sha256_file",
           "remove_stale_temps"]


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


def write_json(dest, obj: Any) -> Path:
    """Atomically write ``obj`` as indented, key-sorted JSON."""
    return write_text(dest, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def write_parquet(dest, table) -> Path:
    """Atomically write a pyarrow Table as Parquet (zstd)."""
    import pyarrow.parquet as pq

    return _write_with(dest, lambda p: pq.write_table(table, p, compression="zstd"))


def write_npy(dest, array) -> Path:
    """Atomically write a numpy array in ``.npy`` format (never pickled)."""
    import numpy as np

    def _w(p: Path) -> None:
        with open(p, "wb") as fh:
            np.save(fh, array, allow_pickle=False)

    return _write_with(dest, _w)


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def read_text_csv(path: str | os.PathLike, required: tuple[str, ...] = (), what: str = "file"):
    """Read a small user CSV with every cell as text, for validation that reports file lines.

    Blank lines are kept as rows (so row ``r`` is always file line ``r + 2``, the header being line
    1); a missing file, an unreadable CSV, a repeated column name or a missing required column is
    one :class:`~tmdlib.errors.InputError` naming the file.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from tmdlib.errors import InputError

    p = Path(path)
    if not p.is_file():
        raise InputError(path, f"{what} not found")
    try:
        names = pacsv.read_csv(p, read_options=pacsv.ReadOptions(skip_rows_after_names=0),
                               parse_options=pacsv.ParseOptions(ignore_empty_lines=False),
                               convert_options=pacsv.ConvertOptions(include_columns=[])).column_names
    except pa.ArrowInvalid as err:
        if "Duplicate column" in str(err) or "duplicate" in str(err).lower():
            raise InputError(path, f"repeated column name in the header: {err}", line=1) from None
        raise InputError(path, f"not a readable CSV: {err}") from None
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(path, f"repeated column name(s) {dupes} in the header", line=1)
    missing = [c for c in required if c not in names]
    if missing:
        raise InputError(path, f"missing column(s) {missing}; found {names}", line=1)
    try:
        return pacsv.read_csv(p, parse_options=pacsv.ParseOptions(ignore_empty_lines=False),
                              convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in names},
                                                                   strings_can_be_null=False))
    except pa.ArrowInvalid as err:
        raise InputError(path, f"not a readable CSV: {err}") from None
