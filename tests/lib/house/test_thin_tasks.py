"""Thin tasks (issue 69, item 3): ``tasks/`` reads inputs, calls tmdlib, writes outputs, logs; the science lives in
tmdlib.

Two checks on the source.  No module of ``tasks/`` imports a science library (scipy, scikit-learn, numba, POT, RDKit,
crepes, MAPIE): what computes is called through tmdlib.  torch is allowed for what the pipeline does with it — the
thread count, and saving / loading a model's tensors.  And ``tasks/`` holds at most :data:`MOST_TASK_LINES` lines:
a ceiling that can only come down, below the issue's goal of 4,000 (6,821 lines when the issue was filed, 3,821 once
the stage configs went to ``flows/config/`` and what computed went to tmdlib).  What is left is the pipeline's own
machinery (MLflow runs and the model registry, the workspace lock, DVC and git calls, the schedule, atomic writes),
which belongs neither in the pure library nor in the wiring.
"""
from __future__ import annotations

import ast

from helpers import ROOT

#: The issue's goal for ``tasks/``, in lines.
GOAL_TASK_LINES = 4000
#: The ceiling today (it may only come down; it stays within :data:`GOAL_TASK_LINES`).
MOST_TASK_LINES = 3821
#: Libraries that compute: a task calls them through tmdlib, never directly.
SCIENCE = ("scipy", "sklearn", "numba", "ot", "rdkit", "crepes", "mapie", "lightgbm", "chemprop")


def _imports(path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out


def task_lines() -> dict[str, int]:
    return {p.relative_to(ROOT).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
            for p in sorted((ROOT / "tasks").rglob("*.py"))}


def test_no_task_imports_a_science_library():
    bad = {rel: sorted(_imports(ROOT / rel) & set(SCIENCE)) for rel in task_lines()}
    assert not {k: v for k, v in bad.items() if v}, f"tasks/ computing with a science library (call tmdlib): {bad}"


def test_the_tasks_stay_within_their_ceiling():
    lines = task_lines()
    total = sum(lines.values())
    assert MOST_TASK_LINES <= GOAL_TASK_LINES
    assert total <= MOST_TASK_LINES, (
        f"tasks/ has {total} lines (ceiling {MOST_TASK_LINES}, goal {GOAL_TASK_LINES}): move what computes into "
        f"tmdlib; largest: {sorted(lines.items(), key=lambda kv: -kv[1])[:6]}")
