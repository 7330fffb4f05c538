"""Everything collected below ``tests/servers/`` starts real local servers (Prefect, MLflow, Dask scheduler and
workers) on 127.0.0.1: it is marked ``pipeline`` (left out of ``make test-fast``) and ``server``."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from helpers import free_port, stop_process, wait_http

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items):
    # A conftest's collection hook sees every item of the session: mark only the ones below this folder.
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.pipeline)
            item.add_marker(pytest.mark.server)


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory):
    """A real `prefect server start` on 127.0.0.1 (own PREFECT_HOME); yields its API URL."""
    import subprocess

    home = tmp_path_factory.mktemp("prefect-server-home")
    port = free_port()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_UI_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    log = open(home / "server.log", "w")
    proc = subprocess.Popen([str(Path(sys.executable).with_name("prefect")), "server", "start", "--host",
                             "127.0.0.1", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    try:
        wait_http(f"{url}/health", timeout=180, proc=proc)
        yield url
    finally:
        stop_process(proc)
        log.close()
