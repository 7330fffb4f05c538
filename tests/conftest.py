"""Shared test fixtures and environment."""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RAW = ROOT / "data" / "raw"

# One Prefect home for the whole session (its sqlite DB is set up once), outside the repo.
os.environ.setdefault("PREFECT_HOME", str(Path(tempfile.gettempdir()) / f"tmdsub-test-prefect-{os.getuid()}"))
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
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([str(exe), *args], cwd=cwd or ROOT, env=full_env, capture_output=True, text=True,
                          timeout=600)
