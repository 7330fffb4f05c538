"""Workspace lock: one writing ``tmdsub`` run per workspace at a time; whole-row appends.

A *workspace* is the folder a run is started in (the repository root under ``dvc repro``), or
``TMDSUB_WORKSPACE`` if set.  Every *writing* ``tmdsub`` command takes an exclusive ``flock`` on
``<workspace>/.tmdsub.lock`` for its whole run.  A second writer in the same workspace is refused at
once with :class:`WorkspaceBusy`, whose message names the holder (pid, host, command, start time),
or waits for it (``wait`` seconds; ``tmdsub --wait ...`` / ``TMDSUB_LOCK_WAIT``).

Read-only commands (``tmd --pairs``, ``summary``, ``audit``, ``--help``: :func:`flows.cli.lock_mode`)
take no lock at all, so they run beside a writer.  (A shared ``flock`` would not do: it cannot be
granted while a writer holds the exclusive one.)  They stay consistent file by file because every
artifact is replaced atomically (:mod:`tasks.io`): a reader sees a whole old or a whole new file.

* The lock is held by the open file, so the kernel releases it when the holder dies, even by
  SIGKILL: a stale lock file never blocks anyone (its text is only a description of the holder).
* Re-entrant in a process (nested ``workspace_lock`` calls share one ``flock``), and inherited by
  child processes a holder starts itself (they see ``TMDSUB_LOCK_HOLDER`` naming the holder's pid,
  which the lock file confirms), so a flow may run ``tmdsub`` sub-commands.
* ``flock`` is advisory and local: it does not protect a workspace on a network file system shared
  by several hosts (use one host per workspace, or DVC's own lock with ``dvc repro``).

:func:`append_lines` appends whole rows to a shared results file under an exclusive ``flock`` of
that file, in a single ``write``: concurrent writers never interleave or tear rows.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Iterable, Iterator

from tmdlib import InputError

__all__ = ["LOCK_NAME", "WorkspaceBusy", "workspace_root", "workspace_lock", "read_holder", "append_lines", "read_locked"]

LOCK_NAME = ".tmdsub.lock"
HOLDER_ENV = "TMDSUB_LOCK_HOLDER"

# lock path -> [fd, depth] for the locks this process holds
_HELD: dict[str, list[int]] = {}


class WorkspaceBusy(InputError):
    """Another run holds the workspace lock (message names it and says how to wait)."""


def workspace_root(path: str | os.PathLike | None = None) -> Path:
    """The workspace: ``path``, else ``TMDSUB_WORKSPACE``, else the current directory (absolute)."""
    return Path(path or os.environ.get("TMDSUB_WORKSPACE") or ".").resolve()


def read_holder(lock_path: str | os.PathLike) -> dict:
    """What the lock file says about its (last) holder; ``{}`` if empty or unreadable."""
    try:
        text = Path(lock_path).read_text(encoding="utf-8", errors="replace")
        obj = json.loads(text) if text.strip() else {}
        return obj if isinstance(obj, dict) else {}
    except (OSError, ValueError):
        return {}


def _describe(holder: dict) -> str:
    if not holder:
        return "another process (no details recorded yet)"
    started = holder.get("started")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if isinstance(started, (int, float)) else "?"
    return (f"pid {holder.get('pid', '?')} on {holder.get('host', '?')} since {when}: "
            f"{holder.get('command', '?')}")


def _inherited(lock_path: Path) -> bool:
    """True if an ancestor that started us holds this lock (``TMDSUB_LOCK_HOLDER`` + lock file agree)."""
    value = os.environ.get(HOLDER_ENV, "")
    path, _, pid = value.rpartition(":")
    if path != str(lock_path) or not pid.isdigit():
        return False
    holder = read_holder(lock_path)
    if holder.get("pid") != int(pid) or holder.get("host") != socket.gethostname():
        return False
    try:  # the holder must still hold it: a free lock means the variable is stale
        fd = os.open(lock_path, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing also drops the probe's lock, if it got one
    return False


def _command() -> str:
    return " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:500] if sys.argv else "python"


@contextlib.contextmanager
def workspace_lock(root: str | os.PathLike | None = None, wait: float = 0.0, command: str | None = None,
                   poll: float = 0.2) -> Iterator[Path]:
    """Hold the exclusive lock of a workspace for the ``with`` block.

    Parameters
    ----------
    root : path, optional
        The workspace (default :func:`workspace_root`).
    wait : float
        Seconds to wait for a busy lock (0: refuse at once; ``float('inf')``: wait for ever).
    command : str, optional
        Recorded in the lock file for the message another run gets (default: this process's argv).

    Raises
    ------
    WorkspaceBusy
        The lock is still held by another process after ``wait`` seconds.
    """
    ws = workspace_root(root)
    lock_path = ws / LOCK_NAME
    key = str(lock_path)
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield lock_path
        finally:
            _HELD[key][1] -= 1
        return
    if _inherited(lock_path):
        yield lock_path
        return
    ws.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + max(0.0, float(wait))
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as err:
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    raise WorkspaceBusy(
                        lock_path, f"workspace busy: held by {_describe(read_holder(lock_path))}. Wait for it to "
                                   f"finish, or run with `tmdsub --wait ...` (or TMDSUB_LOCK_WAIT=SECONDS) to "
                                   f"queue behind it") from None
                time.sleep(min(poll, max(0.0, deadline - time.monotonic())) or poll)
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "command": command or _command(),
                  "started": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
        _HELD[key] = [fd, 1]
        old_env = os.environ.get(HOLDER_ENV)
        os.environ[HOLDER_ENV] = f"{key}:{os.getpid()}"
        try:
            yield lock_path
        finally:
            del _HELD[key]
            if old_env is None:
                os.environ.pop(HOLDER_ENV, None)
            else:
                os.environ[HOLDER_ENV] = old_env
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # the lock file stays (unlinking it would race with a waiter)
    finally:
        os.close(fd)  # releases the flock


def append_lines(path: str | os.PathLike, lines: Iterable[str]) -> int:
    """Append whole ``lines`` (newline added) to ``path`` atomically with respect to other appenders.

    One ``write(2)`` on an ``O_APPEND`` descriptor while holding an exclusive ``flock`` of the file,
    then ``fsync``: rows of concurrent writers never interleave, and a reader holding the same lock
    (:func:`read_locked`) never sees a partial row.  A writer killed mid-call leaves at most its own
    last row unterminated (no newline), which readers must skip.  Returns the bytes written.
    """
    data = "".join(f"{line.rstrip(chr(10))}\n" for line in lines).encode("utf-8")
    if not data:
        return 0
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        view = memoryview(data)
        while view:  # a regular file takes it in one write; loop only for safety (still under the lock)
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
        return len(data)
    finally:
        os.close(fd)


def read_locked(path: str | os.PathLike) -> list[str]:
    """Complete lines of ``path`` read under a shared ``flock`` (a torn last line is dropped)."""
    p = Path(path)
    if not p.exists():
        return []
    with open(p, "rb") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
        data = fh.read()
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    return lines[:-1]  # the part after the last newline is empty, or a torn row
