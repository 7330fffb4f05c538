"""The test tree mirrors the packages and the tiers follow the folders (ARCHITECTURE.md, "Tests").

* every test module lives in ``tests/lib/<folder>/`` (a tmdlib package or module, or ``house`` / ``tasks``),
  ``tests/pipeline/`` or ``tests/servers/``; basenames are unique (pytest's default import mode needs it);
* everything under ``tests/pipeline/`` is marked ``pipeline``, everything under ``tests/servers/`` ``pipeline`` and
  ``server``, nothing under ``tests/lib/`` either: checked on the session's own items, and on a new file dropped into
  a copy of each tier folder (so a new test cannot land in the wrong tier).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from helpers import ROOT

TESTS = ROOT / "tests"
TIER_FOLDERS = ("pipeline", "servers")
LIB_EXTRA = ("house", "tasks")  # cross-cutting checks; in-process checks of tasks/ and flows/ code


def _lib_folders() -> set[str]:
    """tests/lib/<name>: a tmdlib subpackage or module (graph.py or the private _graph.py -> graph), or one of
    LIB_EXTRA."""
    tmdlib = ROOT / "tmdlib"
    names = {p.name for p in tmdlib.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    names |= {p.stem.lstrip("_") for p in tmdlib.glob("*.py") if p.stem != "__init__"}
    return names | set(LIB_EXTRA)


def _test_modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "data" not in p.relative_to(TESTS).parts)


def test_every_test_module_lives_in_a_known_folder():
    lib = _lib_folders()
    misplaced = []
    for p in _test_modules():
        parts = p.relative_to(TESTS).parts
        ok = (len(parts) == 2 and parts[0] in TIER_FOLDERS) or (len(parts) == 3 and parts[0] == "lib"
                                                                 and parts[1] in lib)
        if not ok:
            misplaced.append(str(p.relative_to(ROOT)))
    assert not misplaced, f"test modules outside tests/lib/<package>/, tests/pipeline/, tests/servers/: {misplaced}"


def test_test_module_basenames_are_unique():
    counts = Counter(p.name for p in _test_modules())
    assert not [n for n, c in counts.items() if c > 1], "same basename in two folders (rootdir import mode)"


def _tier(path: Path) -> str | None:
    try:
        parts = path.resolve().relative_to(TESTS.resolve()).parts
    except ValueError:
        return None
    return parts[0] if parts and parts[0] in ("lib", *TIER_FOLDERS) else None


def test_collected_items_carry_their_folders_markers(request):
    """On whatever this session collected (all of it under `make test`, tests/lib under `make test-fast`)."""
    want = {"lib": set(), "pipeline": {"pipeline"}, "servers": {"pipeline", "server"}}
    wrong = []
    for item in request.session.items:
        tier = _tier(Path(item.path))
        if tier is None:
            continue
        have = {m.name for m in item.iter_markers()} & {"pipeline", "server"}
        if have != want[tier]:
            wrong.append(f"{item.nodeid}: {sorted(have)}")
    assert not wrong, wrong


@pytest.mark.parametrize("folder, markers", [("pipeline", "pipeline"), ("servers", "pipeline and server")])
def test_a_new_file_in_a_tier_folder_is_in_that_tier(tmp_path, folder, markers):
    """Copy the folder's conftest beside a new test file: `-m` selects it by the folder's markers alone."""
    (tmp_path / folder).mkdir()
    shutil.copy(TESTS / folder / "conftest.py", tmp_path / folder / "conftest.py")
    (tmp_path / folder / "test_zz_new.py").write_text("def test_new():\n    pass\n")
    (tmp_path / "pytest.ini").write_text(f"[pytest]\npythonpath = {TESTS}\nmarkers =\n    pipeline: x\n    server: x\n")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}

    def selected(expr: str) -> int:
        res = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                              "--strict-markers", "-m", expr, folder], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=120)
        assert res.returncode in (0, 5), res.stdout + res.stderr  # 5: nothing selected
        return sum("::" in line for line in res.stdout.splitlines())

    assert selected(markers) == 1
    assert selected(f"not ({markers})") == 0
