"""Hostile input through the CLI (one error line, in-process and through the installed ``tmdsub``), and the security rules
that need the orchestration: loopback servers, no credentials in MLflow run tags (the corpus, the fuzzing and the other
rules: lib/datasets/test_fuzz.py)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import DATA, ROOT, run_cli


MALFORMED = DATA / "malformed"


VALID_TU = DATA / "bad" / "tu" / "valid"


def _one_error_line(stderr: str, code_ok: bool = True) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, stderr
    return errors[0]


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """In-process CLI calls lock their own workspace (tmp), not the repository."""
    monkeypatch.setenv("TMDSUB_WORKSPACE", str(tmp_path))
    return tmp_path


def _main(argv: list[str]) -> int:
    from flows.cli import main

    with pytest.raises(SystemExit) as info:
        main(argv)
    return int(info.value.code or 0)


@pytest.mark.parametrize("args,code,text", [
    (["ingest", "--tu-dir", str(MALFORMED / "tu" / "huge_graph_id"), "--name", "TINY"], 2,
     "graph ids not contiguous"),
    (["ingest", "--parquet", str(MALFORMED / "parquet" / "huge_num_nodes.parquet"), "--name", "X"], 2,
     "num_nodes is 1000000000000"),
    (["ingest", "--tu-dir", str(VALID_TU), "--name", "../../etc"], 2, "invalid dataset name"),
    (["tmd-matrix", "..", "--out-dir", "x"], 2, "invalid dataset name"),
])
def test_cli_hostile_input_one_error_line(args, code, text, workspace, capfd):
    out = workspace / "out.parquet"
    rc = _main(args + (["--out", str(out)] if args[0] == "ingest" else []))
    err = capfd.readouterr().err
    assert rc == code, err
    assert text in _one_error_line(err)
    assert not out.exists()


def test_cli_unexpected_error_is_one_line_with_debug_hint(workspace, capfd, monkeypatch):
    """Not an input error (here: the output folder is a file): exit 1, one line, no traceback."""
    (workspace / "afile").write_text("")
    rc = _main(["ingest", "--tu-dir", str(VALID_TU), "--name", "TINY", "--out",
                str(workspace / "afile" / "x.parquet")])
    err = capfd.readouterr().err
    assert rc == 1, err
    line = _one_error_line(err)
    assert "set TMDSUB_DEBUG=1" in line and ("NotADirectoryError" in line or "FileExistsError" in line), line
    monkeypatch.setenv("TMDSUB_DEBUG", "1")
    with pytest.raises(OSError):  # with TMDSUB_DEBUG the exception (and so its traceback) comes through
        from flows.cli import main

        main(["ingest", "--tu-dir", str(VALID_TU), "--name", "TINY", "--out", str(workspace / "afile" / "x.parquet")])


@pytest.mark.slow  # the real console script is also run by test_concurrency's CLI test (error line, exit code)
def test_console_script_hostile_input(tmp_path):
    """The installed ``tmdsub`` end to end: exit 2, one ``error:`` line, no traceback, no output."""
    out = tmp_path / "x.parquet"
    res = run_cli("ingest", "--tu-dir", str(MALFORMED / "tu" / "huge_node_id"), "--name", "TINY", "--out", str(out),
                  cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "node id out of range [1, 5] in edge (1, 1000000000000)" in _one_error_line(res.stderr)
    assert not out.exists()


CODE_DIRS = ("tmdlib", "tasks", "flows", "benchmarks", "tests")


def _sources():
    for d in CODE_DIRS:
        for p in sorted((ROOT / d).rglob("*.py")):
            yield p, p.read_text(encoding="utf-8")


def test_servers_bind_loopback():
    """Every server tmdsub or its tests start binds 127.0.0.1 (never 0.0.0.0 / all interfaces)."""
    for path, text in _sources():
        if path.name == Path(__file__).name:
            continue
        assert "0.0.0.0" not in text, path
        for m in re.finditer(r'"--host",\s*([^,\]]+)', text):
            assert "127.0.0.1" in m.group(1), f"{path}: {m.group(0)}"
        for m in re.finditer(r'"server",\s*"start"|"scheduler"|mlflow", "server"', text):
            window = text[m.start():m.start() + 300]
            assert "127.0.0.1" in window, f"{path}: server start without --host 127.0.0.1"
    from flows.tmd import make_task_runner

    runner = make_task_runner("dask", 2)
    assert runner.cluster_kwargs.get("host") == "127.0.0.1" and runner.cluster_kwargs.get("dashboard_address") is None


def test_no_credentials_in_run_tags(monkeypatch, tmp_path):
    """Run tags (git, dvc md5s, params hash) never carry the tracking URI or its credentials."""
    from tasks.tracking import run_tags

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://alice:s3cr3t@mlflow.example.org/")
    f = tmp_path / "in.csv"
    f.write_text("a\n")
    tags = run_tags("train", {"lr": 0.01}, [str(f)], root=ROOT)
    assert not any("s3cr3t" in f"{k}={v}" or "alice" in f"{k}={v}" for k, v in tags.items()), tags
