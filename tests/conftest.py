"""Shared fixtures and the test environment.  Helpers (paths, the CLI, servers, workspaces) live in ``helpers.py``.

Tiers follow the folder a test lives in (see ARCHITECTURE.md, "Tests"): ``tests/lib/`` is the fast tier,
``tests/pipeline/conftest.py`` marks everything below it ``pipeline``, ``tests/servers/conftest.py`` marks everything
below it ``pipeline`` and ``server``.  ``slow`` stays a per-test decorator.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from helpers import RAW

# One Prefect home per test process (its sqlite DB is set up once), outside the repo: pytest-xdist workers
# (``-n 2``) each get their own, so two processes never write one sqlite database.
_worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
os.environ.setdefault("PREFECT_HOME", str(Path(tempfile.gettempdir()) / f"tmdsub-test-prefect-{os.getuid()}-{_worker}"))
# Store content hashes remembered for the tests' stores only (tasks.graphs.streamed_content_hash), not in ~/.cache.
os.environ.setdefault("TMDSUB_HASH_CACHE", str(Path(tempfile.gettempdir()) / f"tmdsub-test-hashes-{os.getuid()}"))
import flows  # noqa: E402,F401  (quiet defaults for Prefect/MLflow/DVC before they are imported)
from tmdlib.datasets import to_dataset  # noqa: E402


@pytest.fixture(scope="session")
def raw_root() -> Path:
    """The shipped raw datasets."""
    return RAW


@pytest.fixture(scope="session")
def mutag():
    """MUTAG as a GraphDataset (one-hot node labels)."""
    from tmdlib import GraphDataset
    from tmdlib.datasets import read_tu

    return to_dataset(read_tu(RAW / "MUTAG", "MUTAG"))


try:  # `HYPOTHESIS_PROFILE=fast` (make test-fast): property tests with few examples
    from hypothesis import settings as _hyp_settings

    _hyp_settings.register_profile("fast", max_examples=10, deadline=None)
    if os.environ.get("HYPOTHESIS_PROFILE"):
        _hyp_settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])
except ImportError:  # pragma: no cover
    pass
