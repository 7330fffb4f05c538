"""Prefect flows: wiring only.  Each DVC stage's ``cmd`` runs one flow.

Importing this package sets quiet, local-only defaults for the stack (telemetry
off, a generous ephemeral-server start-up timeout) unless the user set them.
"""
from ._env import apply_defaults, quiet_user_errors

apply_defaults()
quiet_user_errors()
