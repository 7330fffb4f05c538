"""``workers: auto``, as a command prints it.

Every command and pipeline stage that fans out takes ``--workers auto`` by default: the cores this process may use
(:func:`tmdlib._runtime.usable_cores`: affinity, capped by the cgroup CPU quota and ``os.cpu_count()``, at least 1).
A number (``--workers 4``, ``workers: 4`` in ``params.yaml``) overrides it.  :func:`workers_line` is the line a
command prints first, e.g. ``workers: 2 (auto: affinity 2, cgroup quota none)``.
"""
from __future__ import annotations

from tmdlib._runtime import AUTO, Cores, resolve_workers, usable_cores  # noqa: F401  (the stages')

__all__ = ["workers_line"]


def workers_line(value=AUTO, *, option: str = "--workers", cores: Cores | None = None, per_worker: int = 1,
                 label: str = "workers") -> tuple[int, str]:
    """The workers for ``value`` (:func:`resolve_workers`) and the line a command prints first.

    Returns
    -------
    tuple of (int, str)
        e.g. ``(2, "workers: 2 (auto: affinity 2, cgroup quota none)")`` or
        ``(4, "workers: 4 (given; auto: 2 = affinity 2, cgroup quota none)")``.
    """
    cores = cores or usable_cores()
    n = resolve_workers(value, option=option, cores=cores, per_worker=per_worker)
    per = f", {per_worker} cores per worker" if per_worker > 1 else ""
    if value is None or (isinstance(value, str) and value.strip().lower() == AUTO):
        return n, f"{label}: {n} (auto: {cores.describe()}{per})"
    auto = max(1, cores.count // max(1, int(per_worker)))
    return n, f"{label}: {n} (given; auto: {auto} = {cores.describe()}{per})"
