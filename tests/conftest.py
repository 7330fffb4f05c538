"""Shared test fixtures and environment."""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RAW = ROOT / "data" / "raw"

# One Prefect home per test process (its sqlite DB is set up once), outside the repo: pytest-xdist workers
# (``-n 2``) each get their own, so two processes never write one sqlite database.
_worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
os.environ.setdefault("PREFECT_HOME", str(Path(tempfile.gettempdir()) / f"tmdsub-test-prefect-{os.getuid()}-{_worker}"))
import flows  # noqa: E402,F401  (quiet defaults for Prefect/MLflow/DVC before they are imported)


@pytest.fixture(scope="session")
def raw_root() -> Path:
    """The shipped raw datasets."""
    return RAW


@pytest.fixture(scope="session")
def mutag():
    """MUTAG as a GraphDataset (one-hot node labels)."""
    from tmdlib import GraphDataset
    from tmdlib.datasets import read_tu

    return GraphDataset.from_arrow(read_tu(RAW / "MUTAG", "MUTAG"))


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None):
    """Run the installed ``tmdsub`` console script; return the CompletedProcess."""
    import subprocess

    exe = Path(sys.executable).with_name("tmdsub")
    # Queue behind any other tmdsub run in the workspace instead of failing (see tasks/locking.py).
    full_env = {**os.environ, "TMDSUB_LOCK_WAIT": "600", **(env or {})}
    return subprocess.run([str(exe), *args], cwd=cwd or ROOT, env=full_env, capture_output=True, text=True,
                          timeout=600)


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 120.0, proc=None) -> None:
    """Poll ``url`` until it answers 200 (or fail, showing why if ``proc`` died)."""
    import time
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer within {timeout}s")


def stop_process(proc, timeout: float = 20.0) -> None:
    """Terminate a server process (and its process group), killing it if it lingers."""
    import signal
    import subprocess

    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=timeout)


def mlflow_server_at(home: Path, backend_uri: str | None = None):
    """Context manager: `mlflow server` on 127.0.0.1 (sqlite store ``backend_uri``, default ``home/db.sqlite``;
    artifacts under ``home/art``), yielding its URL; always stopped."""
    import contextlib
    import subprocess

    @contextlib.contextmanager
    def _run():
        port = free_port()
        home.mkdir(parents=True, exist_ok=True)
        log = open(home / "server.log", "w")
        cmd = [str(Path(sys.executable).with_name("mlflow")), "server",
               "--backend-store-uri", backend_uri or f"sqlite:///{home / 'db.sqlite'}",
               "--default-artifact-root", str(home / "art"),
               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=home)
        url = f"http://127.0.0.1:{port}"
        try:
            try:
                wait_http(f"{url}/health", timeout=90, proc=proc)
            except (TimeoutError, RuntimeError) as err:
                log.flush()
                raise RuntimeError(f"{err}\n{(home / 'server.log').read_text()[-3000:]}") from None
            yield url
        finally:
            stop_process(proc)
            log.close()

    return _run()


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


def pipeline_env(prefect_api: str) -> dict:
    """Environment for `dvc`/`tmdsub` subprocesses in a temporary workspace (venv first, a git identity)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "PREFECT_API_URL": prefect_api,
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "DVC_NO_ANALYTICS": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def git_workspace(ws: Path, env: dict, remote_url: str | None = None) -> Path:
    """A git repository holding the project's files (MUTAG raw data only) with a small training budget."""
    import shutil
    import subprocess

    import yaml

    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    for rel in files:
        skip_raw = rel.startswith("data/raw/") and not rel.startswith(("data/raw/MUTAG/", "data/raw/SHA256SUMS"))
        if skip_raw or rel.startswith(("reports/", "benchmarks/")) or rel == "dvc.lock" or not (ROOT / rel).is_file():
            continue
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, ws / rel)
    params = yaml.safe_load((ws / "params.yaml").read_text())
    params["train"]["epochs"] = 5
    params["evaluate"].update(fractions="0.1,0.2", sweep_epochs=3)
    if remote_url is not None:
        params["remote"]["url"] = remote_url
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=ws, env=env, check=True, capture_output=True)
    return ws


# ----------------------------------------------------------------------------------------------
# Test tiers.  `make test-fast` runs `-m "not slow and not pipeline"` (library units, reference values,
# property tests with few examples); `make test` (CI) runs everything but `slow`.  A test is `pipeline`
# when it runs flows, the CLI, DVC or servers: whole modules below, plus the named tests of mixed modules.
# ----------------------------------------------------------------------------------------------
PIPELINE_MODULES = {"test_pipeline_dvc", "test_schedule", "test_faults", "test_tmd_stage", "test_experiment",
                    "test_cli_ingest", "test_concurrency", "test_mlflow_server"}
PIPELINE_TESTS = {
    "test_cache_keys": {"test_tmd_stage_recomputes_every_block_after_an_engine_edit"},
    "test_bounds": {"test_train_and_evaluate_flows", "test_training_reads_only_the_label_file",
                    "test_commands_are_typer_compatible"},
    "test_fuzz": {"test_cli_hostile_input_one_error_line", "test_cli_unexpected_error_is_one_line_with_debug_hint",
                  "test_console_script_hostile_input", "test_servers_bind_loopback",
                  "test_no_credentials_in_run_tags"},
    "test_audit": {"test_audit_flow_reports_the_run_and_links_it_from_mlflow", "test_bad_input_writes_no_report",
                   "test_cli_missing_input_is_one_error_line", "test_report_renders_in_headless_chromium"},
    "test_certified": {"test_flows_in_certified_mode"},
    "test_pyg": {"test_pyg_call_equals_cli_on_fake_dataset", "test_pyg_call_on_tudataset_mutag_equals_cli_on_ingested_mutag",
                 "test_pyg_call_with_the_scalable_engine_equals_cli_select_without_a_matrix",
                 "test_example_runs"},
    "test_incremental": {"test_append_keeps_old_graphs_and_ids", "test_incremental_tmd_computes_only_new_rows_and_columns",
                         "test_coreset_update_reuses_labels_and_requests_only_new",
                         "test_bad_batch_is_one_clear_error_and_no_store",
                         "test_smiles_batch_appends_to_a_molecule_dataset"},
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.module.__name__.rpartition(".")[2]
        if module in PIPELINE_MODULES or item.originalname in PIPELINE_TESTS.get(module, ()):
            item.add_marker(pytest.mark.pipeline)


try:  # `HYPOTHESIS_PROFILE=fast` (make test-fast): property tests with few examples
    from hypothesis import settings as _hyp_settings

    _hyp_settings.register_profile("fast", max_examples=10, deadline=None)
    if os.environ.get("HYPOTHESIS_PROFILE"):
        _hyp_settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])
except ImportError:  # pragma: no cover
    pass


def examples(n: int) -> int:
    """Hypothesis ``max_examples`` for a property test: ``n``, or at most 10 in the fast tier."""
    return min(n, 10) if os.environ.get("HYPOTHESIS_PROFILE") == "fast" else n


def dense_x(table) -> list:
    """Node features of a graph table as nested lists (one list of rows per graph), whatever its layout."""
    import numpy as np

    from tmdlib.datasets.schema import node_feature_rows

    rows, index = node_feature_rows(table)
    x = rows[index]
    ptr = np.concatenate([[0], np.cumsum(table.column("num_nodes").to_numpy())])
    return [x[a:b].tolist() for a, b in zip(ptr[:-1], ptr[1:])]
