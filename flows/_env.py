"""Environment defaults for Prefect / MLflow / DVC / POT, applied before they are imported."""
from __future__ import annotations

import os

DEFAULTS = {
    # Prefect: ephemeral mode (no server) unless PREFECT_API_URL is set by the user.
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    # MLflow / DVC telemetry off.
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    "DVC_NO_ANALYTICS": "1",
    "DO_NOT_TRACK": "1",
    # POT: skip importing its torch backend (saves ~2 s per process).
    "POT_BACKEND_DISABLE_PYTORCH": "1",
}


def apply_defaults() -> None:
    """Set each default unless the variable is already present in the environment.

    Two follow the place tmdsub runs in, so that an installed tmdsub writes nothing into its own installation:
    ``PREFECT_HOME`` is ``./.prefect`` when the working directory has one (a project made by ``tmdsub init``
    has), and numba's compiled kernels are cached under the user's cache folder (``$XDG_CACHE_HOME/tmdsub/numba``,
    default ``~/.cache``), not beside the installed sources."""
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)
    if "PREFECT_HOME" not in os.environ and os.path.isdir(".prefect") and os.path.isfile("dvc.yaml"):
        os.environ["PREFECT_HOME"] = os.path.abspath(".prefect")
    if "NUMBA_CACHE_DIR" not in os.environ:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        os.environ["NUMBA_CACHE_DIR"] = os.path.join(cache, "tmdsub", "numba")


class _UserErrorFilter:
    """Drop Prefect run-log records about expected user-input errors (:class:`tmdlib.InputError`).

    The CLI prints such an error once, as ``error: <file>:<line>: <problem>``; Prefect would
    otherwise log the same failure three times with tracebacks.  The run's state in Prefect
    still records the failure and its message.
    """

    def filter(self, record) -> bool:  # noqa: A003 - logging API
        from tmdlib import InputError

        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, InputError):
            return False
        return "InputError" not in record.getMessage()


def quiet_user_errors() -> None:
    """Install :class:`_UserErrorFilter` on Prefect's flow-run and task-run loggers."""
    import logging

    import prefect  # noqa: F401  (prefect configures its loggers on import)

    for name in ("prefect.flow_runs", "prefect.task_runs"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _UserErrorFilter) for f in logger.filters):
            logger.addFilter(_UserErrorFilter())


# --------------------------------------------------------------------------- ephemeral Prefect server
#
# Without PREFECT_API_URL, Prefect starts a temporary API server (``python -m uvicorn ...
# prefect.server.api.server:create_app``) at the first flow run of a process and stops it from an atexit
# hook.  As shipped (Prefect 3.8) that server can outlive its stage:
#
# * a stage killed by a signal (SIGTERM, SIGKILL, OOM killer) runs no atexit hook: the server is orphaned;
# * ``SubprocessASGIServer.start`` is not thread-safe: two threads of one process that need the API at
#   the same time start two servers, and the atexit hook stops only the last one;
# * every child process of a stage (process-pool task runners, Dask workers) starts a server of its own,
#   because the parent's address is not passed on; a child that is killed orphans its server.
#
# :func:`guard_ephemeral_server` fixes all three where the server is made, whoever starts it (the CLI,
# a flow called in-process, a test): the server watches the process that started it and shuts down as
# soon as that process is gone, however it ended; one lock makes ``start`` start one server per process;
# and the server's address is exported as PREFECT_API_URL, so that child processes use it instead of
# starting their own.

_SERVER_MODULE = "prefect.server.api.server"
_SERVER_ENV_KEY = "PREFECT_API_URL"

#: Runs the ephemeral server (``uvicorn``'s command line, after the pid of the process that started it)
#: with a thread that shuts the server down once that process is gone: reparented, getppid() changes.
_SERVER_LAUNCHER = """\
import os, signal, sys, threading, time
owner = int(sys.argv.pop(1))
def _watch_owner():
    while os.getppid() == owner:
        time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's graceful shutdown
    time.sleep(15)
    os._exit(1)
threading.Thread(target=_watch_owner, name="owner-watch", daemon=True).start()
sys.argv[0] = "uvicorn"
import uvicorn
uvicorn.main()
"""


class _SubprocessWithOwnerWatch:
    """Stands in for the ``subprocess`` module inside Prefect's server module: ``Popen`` of
    ``[python, -m, uvicorn, ...]`` runs the same command under :data:`_SERVER_LAUNCHER`."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def Popen(self, args, *rest, **kwargs):  # noqa: N802 - the subprocess API
        argv = list(args) if isinstance(args, (list, tuple)) else None
        if argv and argv[1:3] == ["-m", "uvicorn"]:
            args = [argv[0], "-c", _SERVER_LAUNCHER, str(os.getpid()), *argv[3:]]
        return self._real.Popen(args, *rest, **kwargs)


def _guard_server_class(module) -> None:
    """Patch ``module.SubprocessASGIServer`` (once): owner-watching, one start at a time, address exported."""
    import subprocess
    import threading

    cls = module.SubprocessASGIServer
    if getattr(cls, "_tmdsub_guarded", False):
        return
    module.subprocess = _SubprocessWithOwnerWatch(subprocess)
    lock = threading.RLock()
    start, stop = cls.start, cls.stop

    def guarded_start(self, *args, **kwargs):
        with lock:
            start(self, *args, **kwargs)
            if self.running and self.server_process is not None:
                os.environ[_SERVER_ENV_KEY] = self.api_url  # child processes use this server

    def guarded_stop(self, *args, **kwargs):
        with lock:
            url = self.api_url if self.port is not None else None
            try:
                stop(self, *args, **kwargs)
            finally:
                if url is not None and os.environ.get(_SERVER_ENV_KEY) == url:
                    del os.environ[_SERVER_ENV_KEY]

    guarded_start.__doc__, guarded_stop.__doc__ = start.__doc__, stop.__doc__
    cls.start, cls.stop = guarded_start, guarded_stop
    cls._tmdsub_guarded = True


class _ServerModuleHook:
    """Import hook: applies :func:`_guard_server_class` when Prefect imports its server module (a 10 s
    import, so it is not imported here before it is needed)."""

    def find_spec(self, name, path=None, target=None):
        if name != _SERVER_MODULE:
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_guard(module):
            exec_module(module)
            _guard_server_class(module)

        spec.loader.exec_module = exec_and_guard
        return spec


def guard_ephemeral_server() -> None:
    """Make Prefect's ephemeral API server end with the process that started it (see above)."""
    import sys

    if _SERVER_MODULE in sys.modules:
        _guard_server_class(sys.modules[_SERVER_MODULE])
    elif not any(isinstance(f, _ServerModuleHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _ServerModuleHook())


# --------------------------------------------------------------------------- worker processes

_PARENT_WATCH: list[int] = []


def exit_with_parent() -> None:
    """End this process as soon as the process that started it is gone, however that one ended.

    For the worker processes of a stage (Prefect's process-pool task runner, ``ProcessPoolExecutor``):
    a worker waits for work on a queue whose write end it holds itself, so it never sees the end of a
    stage killed by a signal and would wait forever.  A daemon thread leaves with ``os._exit`` when the
    parent is gone: at end of file on ``multiprocessing``'s parent sentinel once the child has
    bootstrapped, before that (and in other children) when the parent pid changes (reparented).
    Usable as a process-pool ``initializer``.
    """
    import threading
    import time

    if _PARENT_WATCH:
        return
    first = os.getppid()
    _PARENT_WATCH.append(first)

    def _watch() -> None:
        from multiprocessing import parent_process
        from multiprocessing.connection import wait

        while True:
            parent = parent_process()
            if parent is not None and parent.sentinel is not None:
                wait([parent.sentinel])  # readable (end of file) once the parent process is gone
                break
            if os.getppid() != first:
                break
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=_watch, name="tmdsub-parent-watch", daemon=True).start()


def watch_parent_if_pool_worker() -> None:
    """:func:`exit_with_parent` in a ``multiprocessing`` spawn child (process-pool workers of a stage,
    which import this package when they re-run the ``tmdsub`` script as ``__mp_main__``)."""
    import sys

    if "--multiprocessing-fork" in sys.orig_argv[1:]:  # sys.argv is the parent's while the child imports
        exit_with_parent()
