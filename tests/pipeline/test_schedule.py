"""Scheduled runs (flows/schedule.py) and the team DVC remote (tasks/dvcops.py).

Here: the intake, the remote settings, the cron check.  The scheduled run against a real Prefect server:
servers/test_schedule_servers.py.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import RAW, ROOT
from tu_writer import write_tu_folder

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def mutag_table():
    from tmdlib.datasets import read_tu

    return read_tu(RAW / "MUTAG", "MUTAG")


def test_intake_moves_all_batches_or_none(tmp_path, mutag_table, monkeypatch):
    """A bad batch fails the intake naming its file, and no batch moves; good batches all move."""
    from tasks.schedule import intake_batches
    from tmdlib.datasets import write_graph_parquet
    from tmdlib import InputError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "data/graphs").mkdir(parents=True)
    write_graph_parquet(mutag_table, tmp_path / "data/graphs/MUTAG.parquet")
    incoming = tmp_path / "data/incoming/MUTAG"
    write_tu_folder(mutag_table.slice(0, 2), incoming / "a-good", "good")
    (incoming / "b-bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match=r"b-bad\.parquet.*nothing was moved"):
        intake_batches.fn("data/incoming", "data/append", ["MUTAG"], "20260101T000000Z", {})
    assert sorted(p.name for p in incoming.iterdir()) == ["a-good", "b-bad.parquet"]
    assert not (tmp_path / "data/append").exists()

    (incoming / "b-bad.parquet").unlink()
    (incoming / "c-molecules.csv").write_text("smiles\nCCO\n")  # parses, but not in MUTAG's feature space
    with pytest.raises(InputError, match=r"c-molecules\.csv.*dimension"):
        intake_batches.fn("data/incoming", "data/append", ["MUTAG"], "20260101T000000Z", {})
    assert not (tmp_path / "data/append").exists()

    (incoming / "c-molecules.csv").unlink()
    (incoming / ".partial-upload").write_text("")  # dotfiles are left alone
    got = intake_batches.fn("data/incoming", "data/append", ["MUTAG"], "20260101T000000Z", {})
    assert got == [{"dataset": "MUTAG", "source": "data/incoming/MUTAG/a-good",
                    "batch": "data/append/MUTAG/20260101T000000Z-a-good", "graphs": 2}]
    assert (tmp_path / "data/append/MUTAG/20260101T000000Z-a-good/good_A.txt").is_file()
    assert [p.name for p in incoming.iterdir()] == [".partial-upload"]


def test_remote_settings_resolve_local_paths_and_refuse_credentials(tmp_path):
    from tasks.dvcops import remote_settings
    from tmdlib import InputError

    params = tmp_path / "params.yaml"
    cases = {"../shared/remote": ("team", str((tmp_path / "../shared/remote").resolve())),
             "s3://bucket/tmdsub": ("team", "s3://bucket/tmdsub"),
             "ssh://host/srv/tmdsub": ("team", "ssh://host/srv/tmdsub")}
    for url, expected in cases.items():
        params.write_text(yaml.safe_dump({"remote": {"name": "team", "url": url}}))
        assert remote_settings(params, tmp_path) == expected
    for group, problem in (({"name": "team", "url": "ssh://me:secret@host/x"}, "credentials"),
                           ({"name": "team"}, "remote.url is missing"),
                           ({"name": "a b", "url": "x"}, "remote.name"),
                           ("s3://x", "must be a mapping")):
        params.write_text(yaml.safe_dump({"remote": group}))
        with pytest.raises(InputError, match=problem):
            remote_settings(params, tmp_path)
    params.write_text("remote: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML"):
        remote_settings(params, tmp_path)


def test_schedule_refuses_a_bad_cron_in_one_line(tmp_path):
    res = subprocess.run([str(BIN / "tmdsub"), "schedule", "--cron", "every day", "--workspace", str(ROOT)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and res.stderr.startswith("error: --cron") and len(res.stderr.splitlines()) == 1
