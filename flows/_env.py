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
    """Set each default unless the variable is already present in the environment."""
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)


class _UserErrorFilter:
    """Drop Prefect run-log records about expected user-input errors (:class:`tmdlib.InputError`).

    The CLI prints such an error once, as ``error: <file>:<line>: <problem>``; Prefect would
    otherwise log the same failure three times with tracebacks.  The run's state in Prefect
    still records the failure and its message.
    """

    def filter(self, record) -> bool:  # noqa: A003 - logging API
        from tmdlib.errors import InputError

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
