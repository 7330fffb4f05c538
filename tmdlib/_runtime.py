"""The running machine, as the compute engine sees it: the cores this process may use, and the C heap's free pages.

``workers: auto`` (every command and stage that fans out: ingest, the TMD matrix, selection, the experiment
profiles) is :func:`resolve_workers` of the cores :func:`usable_cores` finds, which is

* the process's CPU affinity (``os.sched_getaffinity(0)``: taskset, a cpuset cgroup, ``docker --cpuset-cpus``),
* capped by the CPU quota of its cgroup (``docker --cpus``, Kubernetes CPU limits): cgroup v2 ``cpu.max``
  (``"max 100000"``: none; ``"150000 100000"``: 1.5 cores) or cgroup v1 ``cpu.cfs_quota_us`` /
  ``cpu.cfs_period_us`` (quota ``-1``: none), the strictest one on the path from the process's cgroup up to the
  mount's root; a fractional quota rounds up (1.5 cores run two workers at 75 % each, as fast as one core's
  worth of quota allows),
* never more than ``os.cpu_count()`` and never fewer than 1.

:func:`release_freed_memory` hands the C heap's free pages back to the system (a long run of parts);
:func:`on_disk` keeps an array that is read late in a scratch file instead of memory.
Plain functions of the running machine; ``root`` points them at a copy of ``/proc`` and ``/sys/fs/cgroup``
(tests).
"""
from __future__ import annotations

import functools
import math
import numbers
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._errors import InputError

__all__ = ["AUTO", "Cores", "cgroup_quota", "usable_cores", "resolve_workers", "release_freed_memory", "on_disk"]

#: The value that asks for the cores this process may use.
AUTO = "auto"


@dataclass(frozen=True)
class Cores:
    """What ``auto`` resolves to, and why.

    Attributes
    ----------
    count : int
        The cores this process may use: min(affinity, ceil(quota), machine), at least 1.
    machine : int
        ``os.cpu_count()`` (1 when unknown).
    affinity : int or None
        ``len(os.sched_getaffinity(0))``; None where the platform has no affinity call.
    quota : float or None
        The cgroup CPU quota in cores (quota / period); None when there is none.
    quota_source : str or None
        The file the quota was read from.
    """

    count: int
    machine: int
    affinity: int | None
    quota: float | None
    quota_source: str | None = None

    def describe(self) -> str:
        """``"affinity 2, cgroup quota none"`` (or ``"... cgroup quota 1.5 cores"``, ``"... of 64 cores"``)."""
        parts = [f"affinity {self.affinity}" if self.affinity is not None else f"{self.machine} cores"]
        parts.append("cgroup quota none" if self.quota is None else f"cgroup quota {self.quota:g} cores")
        if self.affinity is not None and self.affinity < self.machine:
            parts.append(f"of {self.machine} cores")
        return ", ".join(parts)


def _own_cgroups(root: Path) -> dict[str, str]:
    """Controller -> the process's cgroup path, from ``/proc/self/cgroup`` (``""``: the cgroup v2 hierarchy)."""
    try:
        text = (root / "proc" / "self" / "cgroup").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    own = {}
    for line in text.splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        hier, controllers, path = fields
        if hier == "0" and controllers == "":
            own[""] = path
        for c in controllers.split(","):
            if c:
                own[c] = path
    return own


def _dirs(mount: Path, own: str | None) -> list[Path]:
    """The process's cgroup folder under ``mount`` and its ancestors up to ``mount`` (those that exist).

    Without a cgroup namespace ``/proc/self/cgroup`` names the host's path (``/docker/<id>``) while the mount
    shows the container's own cgroup at its root: such a path is not found and the mount's root is used.
    """
    dirs = []
    rel = [p for p in (own or "").strip().split("/") if p and p not in (".", "..")]
    for depth in range(len(rel), 0, -1):
        d = mount.joinpath(*rel[:depth])
        if d.is_dir():
            dirs.append(d)
    dirs.append(mount)
    return dirs


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def _v2_limit(d: Path) -> float | None:
    text = _read(d / "cpu.max")
    if not text:
        return None
    fields = text.split()
    try:
        period = float(fields[1]) if len(fields) > 1 else 100_000.0
        if fields[0] == "max" or period <= 0:
            return None
        quota = float(fields[0])
    except ValueError:  # not the kernel's format: no limit we can read
        return None
    return quota / period if quota > 0 else None


def _v1_limit(d: Path) -> float | None:
    quota, period = _read(d / "cpu.cfs_quota_us"), _read(d / "cpu.cfs_period_us")
    try:
        q, p = int(quota), int(period)
    except (TypeError, ValueError):
        return None
    return q / p if q > 0 and p > 0 else None


def cgroup_quota(root: str | os.PathLike = "/") -> tuple[float | None, str | None]:
    """The CPU quota of this process's cgroup, in cores, and the file it came from (``(None, None)``: none).

    Parameters
    ----------
    root : str or os.PathLike, default "/"
        Where ``proc/self/cgroup`` and ``sys/fs/cgroup`` are found (a test's fake tree).

    Returns
    -------
    tuple of (float or None, str or None)
        The strictest quota / period on the path from the process's cgroup up to the mount's root, cgroup v2
        (``sys/fs/cgroup/cpu.max``) first, else cgroup v1 (``sys/fs/cgroup/cpu[,cpuacct]/cpu.cfs_quota_us``).
        Files that are missing or unreadable count as no quota: resolving cores never fails a command.
    """
    base = Path(root) / "sys" / "fs" / "cgroup"
    own = _own_cgroups(Path(root))
    found: list[tuple[float, str]] = []
    for d in _dirs(base, own.get("")):
        limit = _v2_limit(d)
        if limit is not None:
            found.append((limit, str(d / "cpu.max")))
    if not found:
        for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
            mount = base / name
            if not mount.is_dir():
                continue
            for d in _dirs(mount, own.get("cpu")):
                limit = _v1_limit(d)
                if limit is not None:
                    found.append((limit, str(d / "cpu.cfs_quota_us")))
            break
    if not found:
        return None, None
    return min(found)


def usable_cores(root: str | os.PathLike = "/") -> Cores:
    """The cores this process may use: affinity, capped by the cgroup CPU quota and ``os.cpu_count()``, >= 1.

    Parameters
    ----------
    root : str or os.PathLike, default "/"
        Where the cgroup files are read (see :func:`cgroup_quota`).

    Returns
    -------
    Cores
        ``count`` and what it came from (printed by ``tasks.cpus.workers_line``).
    """
    machine = max(1, os.cpu_count() or 1)
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity (macOS, Windows)
        affinity = None
    quota, source = cgroup_quota(root)
    count = min(machine, affinity or machine)
    if quota is not None:
        count = min(count, math.ceil(quota - 1e-9))
    return Cores(max(1, count), machine, affinity, quota, source)


def resolve_workers(value=AUTO, *, option: str = "--workers", cores: Cores | None = None,
                    per_worker: int = 1) -> int:
    """Workers for ``value``: ``"auto"`` / None -> the cores this process may use, a whole number >= 1 as given.

    Parameters
    ----------
    value : str, int or None
        ``"auto"`` (any case, surrounding spaces ignored), None (the same), a positive int, or its string.
    option : str, default "--workers"
        How the value is named in the error (the option or the ``params.yaml`` key).
    cores : Cores, optional
        The machine's cores (default: :func:`usable_cores`, read only when ``value`` is auto).
    per_worker : int, default 1
        Cores each worker keeps busy (e.g. its torch threads): auto is ``max(1, cores // per_worker)``.

    Returns
    -------
    int
        At least 1.

    Raises
    ------
    tmdlib.InputError
        One line naming ``option`` and the bad value (0, a negative number, a fraction, a word, a bool).
    """
    if value is None or (isinstance(value, str) and value.strip().lower() == AUTO):
        cores = cores or usable_cores()
        return max(1, cores.count // max(1, int(per_worker)))
    n = None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):  # int, numpy integers
        n = int(value)
    elif isinstance(value, str) and value.strip().isdigit():
        n = int(value.strip())
    if n is None or n < 1:
        raise InputError(None, f"{option} must be auto (the cores this process may use) or a whole number "
                               f">= 1; got {value!r}")
    return n


def release_freed_memory() -> bool:
    """Hand the C heap's free pages back to the system (glibc ``malloc_trim(0)``; elsewhere nothing).

    The client of a long run of parts allocates each part's payload (hundreds of KB, pickled in Prefect's
    resolver thread) and result (unpickled in its result thread) in other threads' malloc arenas; once freed,
    glibc keeps those pages, scattered between live blocks, and the resident memory grew ~0.23 MB per part
    (MOSES 200 k at 1 %, 256 parts) although Python held no more (tracemalloc: flat).  Returns whether it ran.
    """
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (loaded once)."""
    import ctypes
    import ctypes.util

    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), "malloc_trim", None)
    except OSError:
        return None


def on_disk(array: np.ndarray, folder: str | Path | None = None, index: np.ndarray | None = None,
            chunk: int = 1 << 20) -> np.ndarray:
    """``array`` (or ``array[index]``) as a read-only memory map of a scratch file in ``folder`` that is unlinked
    at once.

    The same values, paged in from disk only when read: an array of one entry per graph that is needed
    late (the pool's content hashes, read when the parts' caches are looked up) takes no memory in between,
    while the partition's passes run.  With ``index`` the entries are gathered ``chunk`` at a time into the file,
    never copied whole (the training pool's hashes of 10⁷ molecules: 512 MB).  No file is left behind, whatever
    happens next.
    """
    import tempfile

    array = np.asarray(array)
    index = None if index is None else np.asarray(index, dtype=np.int64)
    size = len(array) if index is None else index.size
    Path(folder or tempfile.gettempdir()).mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=folder, prefix="tmdsub-", suffix=".npy") as fh:  # unlinked on close
        out = np.lib.format.open_memmap(fh.name, mode="w+", dtype=array.dtype, shape=(size,))
        for start in range(0, size, chunk):
            stop = start + chunk
            out[start:stop] = array[start:stop] if index is None else array[index[start:stop]]
        out.flush()
        del out
        return np.load(fh.name, mmap_mode="r")  # the mapping outlives the file's name
