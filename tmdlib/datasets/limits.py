"""Memory guard for readers: refuse an input whose *declared* size would not fit, before allocating."""
from __future__ import annotations

import os

from .._errors import InputError

__all__ = ["memory_budget", "check_fits", "format_size"]


def memory_budget() -> int:
    """Bytes this process may still allocate: free RAM (psutil, if installed), capped by a cgroup v2
    limit (containers, CI runners) and by ``TMDSUB_MAX_MEMORY`` (bytes; for schedulers and tests)."""
    from pathlib import Path

    budget = 1 << 62
    try:
        import psutil

        budget = int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001 - psutil is optional for the library
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
            budget = min(budget, max(0, int(limit) - used))
    except (OSError, ValueError):
        pass
    cap = os.environ.get("TMDSUB_MAX_MEMORY")
    if cap:
        try:
            budget = min(budget, int(float(cap)))
        except ValueError:
            pass
    return budget


def format_size(nbytes: int) -> str:
    """``13.50 KiB``, ``7.28 TiB``."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes} bytes"


def check_fits(nbytes: int, path, what: str, line: int | None = None) -> None:
    """InputError if ``nbytes`` (what the input declares it needs) exceeds :func:`memory_budget`."""
    budget = memory_budget()
    if nbytes > budget:
        raise InputError(path, f"{what} needs {format_size(nbytes)} of memory, more than the "
                               f"{format_size(budget)} available", line=line)
