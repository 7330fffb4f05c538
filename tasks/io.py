"""Atomic artifact writes: a reader never sees a half-written file.

Every writer goes to a temporary file in the destination folder, flushes and
fsyncs it, then ``os.replace``-s it onto the final name (atomic on POSIX).  On
any error the temporary file is removed and the destination is untouched.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

__all__ = ["atomic_path", "write_bytes", "write_text", "write_json", "write_parquet", "write_npy", "sha256_file"]


@contextlib.contextmanager
def atomic_path(dest: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``dest``; move it onto ``dest`` on success."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_path, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


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


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


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
