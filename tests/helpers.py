"""Helpers shared by the tests: paths, the installed CLI, local servers, temporary workspaces.

Importable as ``helpers`` from any test module (``pythonpath = ["tests"]`` in pyproject.toml); fixtures live in
``tests/conftest.py``.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository
RAW = ROOT / "data" / "raw"  # the shipped raw datasets
DATA = Path(__file__).resolve().parent / "data"  # test data: tests/data/


_SCRATCH: list[str] = []


def _scratch_workspace() -> str:
    """A temporary folder of this test process, the lock workspace of commands run from the repository root."""
    if not _SCRATCH:
        import atexit
        import shutil
        import tempfile

        _SCRATCH.append(tempfile.mkdtemp(prefix="tmdsub-test-ws-"))
        atexit.register(shutil.rmtree, _SCRATCH[0], True)
    return _SCRATCH[0]


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None):
    """Run the installed ``tmdsub`` console script; return the CompletedProcess."""
    import subprocess

    exe = Path(sys.executable).with_name("tmdsub")
    # Queue behind any other tmdsub run in the workspace instead of failing (see tasks/locking.py).  A command run
    # from the repository root (it reads data/raw there) locks a scratch workspace, never the developer's checkout:
    # a test must not block, or be blocked by, a `tmdsub` run of the person running the tests.
    scratch = {} if cwd is not None or "TMDSUB_WORKSPACE" in os.environ else \
        {"TMDSUB_WORKSPACE": _scratch_workspace()}
    full_env = {**os.environ, "TMDSUB_LOCK_WAIT": "600", **scratch, **(env or {})}
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


def make_inputs(tmp: Path, n_train: int = 40, n_test: int = 20, fraction: float = 0.2, labels_nan: bool = False,
                with_nodes: bool = False) -> dict:
    """A small MUTAG pipeline state for the train / evaluate stages: graph store, selection.json, labels.csv/json,
    matrix.npy[, nodes.parquet]."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from tmdlib import GraphDataset
    from tmdlib.select import budget_to_k, kmedoids_coreset
    from tmdlib.datasets import read_tu, to_dataset, write_graph_parquet
    from tmdlib.distance import tmd_matrix

    tmp.mkdir(parents=True, exist_ok=True)
    table = read_tu(RAW / "MUTAG", "MUTAG").slice(0, n_train + n_test)
    ds = to_dataset(table)
    if labels_nan:  # a store without labels: training must not need them
        idx = table.schema.get_field_index("y")
        table = table.set_column(idx, table.schema.field("y"), pa.nulls(len(table), pa.float64()))
        assert pc.all(pc.is_null(table.column("y"))).as_py()
    store = tmp / "MUTAG.parquet"
    write_graph_parquet(table, store)
    D = tmd_matrix(ds, depth=4, weights="pascal")
    np.save(tmp / "matrix.npy", D)
    from tasks.io import sha256_file
    from tmdlib.datasets import store_content_hash
    from tmdlib.distance import resolve_weights

    (tmp / "meta.json").write_text(json.dumps({  # as the tmd stage writes it (select / evaluate check it)
        "graphs": len(ds), "depth": 4, "weights": resolve_weights(4, "pascal").tolist(),
        "matrix_sha256": sha256_file(tmp / "matrix.npy"), "store_content_sha256": store_content_hash(ds)}))
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(ds))
    train, test = np.sort(perm[:n_train]), np.sort(perm[n_train:])
    cr = kmedoids_coreset(D[np.ix_(train, train)], budget_to_k(n_train, fraction=fraction), seed=0)
    gid = ds.graph_ids
    med = gid[train[cr.medoids]]
    sel = {"train_ids": gid[train].tolist(), "test_ids": gid[test].tolist(), "method": "tmd", "fraction": fraction,
           "k": int(cr.k), "seed": 0, "medoids": med.tolist(), "tau": cr.tau.astype(float).tolist(),
           "epsilon": float(cr.epsilon)}
    (tmp / "selection.json").write_text(json.dumps(sel))
    (tmp / "labels.csv").write_text("graph_id,y\n" + "".join(f"{int(g)},{float(ds.y[g])!r}\n" for g in med))
    (tmp / "labels.json").write_text(json.dumps({"source": "benchmark-standin"}))
    out = {"graphs": str(store), "selection": str(tmp / "selection.json"), "labels": str(tmp / "labels.csv"),
           "matrix": str(tmp / "matrix.npy"), "ds": ds, "sel": sel, "D": D, "train": train}
    if with_nodes:
        from tmdlib.select.nodes import subsample_nodes

        res = subsample_nodes(ds, fraction=0.5, method="tmd", depth=4)
        local = np.arange(ds.num_nodes) - np.repeat(ds.node_ptr[:-1], ds.nodes_per_graph)
        lists = [local[res.mask & (ds.graph_of_node == g)].astype(np.int32).tolist() for g in range(len(ds))]
        pq.write_table(pa.table({"graph_id": pa.array(gid, pa.int64()), "nodes": pa.array(lists, pa.list_(pa.int32())),
                                 "epsilon": pa.array(res.epsilon)}), tmp / "nodes.parquet")
        out["nodes"] = str(tmp / "nodes.parquet")
    return out


def examples(n: int) -> int:
    """Hypothesis ``max_examples`` for a property test: ``n``, or at most 10 in the fast tier."""
    return min(n, 10) if os.environ.get("HYPOTHESIS_PROFILE") == "fast" else n


def dense_x(table) -> list:
    """Node features of a graph table as nested lists (one list of rows per graph), whatever its layout."""
    import numpy as np

    from tmdlib.datasets._schema import node_feature_rows

    rows, index = node_feature_rows(table)
    x = rows[index]
    ptr = np.concatenate([[0], np.cumsum(table.column("num_nodes").to_numpy())])
    return [x[a:b].tolist() for a, b in zip(ptr[:-1], ptr[1:])]


def kill_when(proc, ready, timeout: float = 300, poll: float = 0.02) -> bool:
    """SIGKILL ``proc``'s process group as soon as ``ready()`` is true; False when it ended (or ``timeout`` passed)
    first.  ``proc`` is started with ``start_new_session=True``."""
    import signal
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if ready():
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(poll)
    proc.wait()
    return False


#: Debian's Chromium, what the audit report's browser tests open pages in (CI installs it).
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
HAVE_CHROMIUM = os.access(CHROMIUM, os.X_OK)
NO_CHROMIUM = f"{CHROMIUM} not installed (CI installs Debian's chromium: apt-get install chromium)"


def open_in_chromium(page_file: Path, image_attr: str = "alt") -> tuple[str, list, list, list]:
    """Open a local HTML file in headless :data:`CHROMIUM`: ``(body text, [(complete, naturalWidth, <image_attr>)]
    per image, problems (console errors and warnings, page errors, failed requests), every URL requested)``."""
    from playwright.sync_api import sync_playwright

    problems, requests = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.on("requestfailed", lambda r: problems.append(f"failed: {r.url}"))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_file.as_uri(), wait_until="load")
            text = page.inner_text("body")
            images = page.eval_on_selector_all(
                "img", f"els => els.map(i => [i.complete, i.naturalWidth, i.{image_attr}])")
        finally:
            browser.close()
    return text, images, problems, requests


#: The venv's own ``dvc`` and ``tmdsub`` (what a pipeline test runs as a user would).
DVC = str(Path(sys.executable).parent / "dvc")
TMDSUB = str(Path(sys.executable).parent / "tmdsub")


def run_ok(args, cwd, env, timeout: float = 900):
    """Run a command in ``cwd``; it must succeed (the tail of its output is the assertion message)."""
    import subprocess

    res = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res
