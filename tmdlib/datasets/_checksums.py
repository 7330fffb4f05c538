"""Verify files against a ``sha256sum``-style list (``SHA256SUMS``)."""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path, PurePosixPath
from typing import Iterable

from .._errors import InputError

__all__ = ["verify_sha256sums", "sha256_file", "file_digest", "parse_sha256sums"]

_LINE = re.compile(r"([0-9a-fA-F]{64}) [ *](.+)")


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in ``chunk``-byte blocks."""
    return file_digest(path, "sha256", chunk)


def file_digest(path: str | os.PathLike, algorithm: str = "sha256", chunk: int = 1 << 20) -> str:
    """Hex digest of a file by a :mod:`hashlib` ``algorithm`` (``md5``: what DVC records), read in ``chunk``-byte
    blocks."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def parse_sha256sums(sums_path: str | os.PathLike) -> list[tuple[str, str, int]]:
    """Entries ``(relative_path, hex_digest, line)`` of a ``sha256sum`` output file.

    Raises
    ------
    InputError
        Missing file, a malformed line, or a path that is absolute or uses ``..``.
    """
    sums_path = Path(sums_path)
    try:
        text = sums_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(sums_path, "checksum list not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(sums_path, f"cannot read checksum list: {exc}") from None
    entries = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        m = _LINE.fullmatch(line.rstrip("\r"))
        if m is None:
            raise InputError(sums_path, f"malformed line (expected '<sha256>  <path>'): {line[:60]!r}", line=lineno)
        rel = PurePosixPath(m.group(2))
        if rel.is_absolute() or ".." in rel.parts:
            raise InputError(sums_path, f"path escapes the folder: {m.group(2)!r}", line=lineno)
        entries.append((str(rel), m.group(1).lower(), lineno))
    return entries


def _selected(rel: str, only: tuple[str, ...] | None) -> bool:
    """Whether ``rel`` lies under one of the ``only`` prefixes (or ``only`` is None)."""
    if only is None:
        return True
    parts = PurePosixPath(rel).parts
    return any(parts[:len(p)] == p for p in (PurePosixPath(o).parts for o in only))


def verify_sha256sums(root: str | os.PathLike, sums_file: str = "SHA256SUMS",
                      only: str | Iterable[str] | None = None) -> list[str]:
    """Check the files listed in ``root/sums_file`` against their sha256.

    Parameters
    ----------
    root : str or os.PathLike
        Folder the listed paths are relative to (where the list lives).
    sums_file : str, default "SHA256SUMS"
        Name of the list inside ``root`` (``sha256sum`` output format).
    only : str or iterable of str, optional
        Verify only entries under these sub-folders or files (e.g. ``"MUTAG"``).

    Returns
    -------
    list of str
        The relative paths verified, in list order.

    Raises
    ------
    InputError
        Naming the file for a missing file or a digest mismatch; naming the
        list for a malformed line or when ``only`` matches no entry.
    """
    root = Path(root)
    sums_path = root / sums_file
    if isinstance(only, str):
        only = (only,)
    only = None if only is None else tuple(only)
    entries = [e for e in parse_sha256sums(sums_path) if _selected(e[0], only)]
    if only is not None and not entries:
        raise InputError(sums_path, f"no entries under {', '.join(only)}")
    for rel, digest, lineno in entries:
        path = root / rel
        if not path.is_file():
            raise InputError(path, f"listed in {sums_file} (line {lineno}) but missing")
        actual = sha256_file(path)
        if actual != digest:
            raise InputError(path, f"sha256 mismatch: expected {digest} ({sums_file} line {lineno}), got {actual}")
    return [e[0] for e in entries]
