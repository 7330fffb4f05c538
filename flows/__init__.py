"""Prefect flows: wiring only.  Each DVC stage's ``cmd`` runs one flow.

Importing this package sets quiet, local-only defaults for the stack (telemetry
off, a generous ephemeral-server start-up timeout) unless the user set them, and makes Prefect's
ephemeral API server, and a stage's process-pool workers, end with the process that started them
(see :func:`flows._env.guard_ephemeral_server` and :func:`flows._env.exit_with_parent`).
"""
from ._env import apply_defaults, guard_ephemeral_server, quiet_user_errors, watch_parent_if_pool_worker

apply_defaults()
guard_ephemeral_server()
watch_parent_if_pool_worker()
quiet_user_errors()
