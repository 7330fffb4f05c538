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
