"""Everything collected below ``tests/pipeline/`` is in the ``pipeline`` tier: it runs flows, the ``tmdsub`` CLI,
DVC or subprocess pipelines (left out of ``make test-fast``; run by ``make test``)."""
from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items):
    # A conftest's collection hook sees every item of the session: mark only the ones below this folder.
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.pipeline)
