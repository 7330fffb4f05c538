"""The seams between the layers, checked on the source: flows reach selection through its public API (the policy
lives in tmdlib.select.plan_selection), and task types are asked of TaskSpec, not compared as strings."""
from __future__ import annotations

import ast
from pathlib import Path

from helpers import ROOT

#: The selection engine's internals: a flow that imports them re-derives what the library decides.
SELECTION_INTERNALS = ("tmdlib.select.scalable", "tmdlib.select.certificate", "tmdlib.select.coreset")


def _imported(source: str) -> set[str]:
    """Absolute module names a source imports (``from a.b import c`` gives ``a.b`` and ``a.b.c``), anywhere in it."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def _internals(source: str) -> list[str]:
    return sorted(m for m in _imported(source) for bad in SELECTION_INTERNALS if m == bad or m.startswith(bad + "."))


def test_the_check_sees_an_internal_import():
    assert _internals("def f():\n    from tmdlib.select.scalable import auto_pair_budget\n")
    assert _internals("import tmdlib.select.certificate as c\n")
    assert _internals("from tmdlib.select import coreset\n") == ["tmdlib.select.coreset"]
    assert not _internals("from tmdlib.select import plan_selection, resolve_engine\n")


def test_no_flow_imports_the_selection_engines_internals():
    """flows/ asks :func:`tmdlib.select.plan_selection` what will run; it imports nothing of the engines."""
    bad = {str(p.relative_to(ROOT)): _internals(p.read_text(encoding="utf-8"))
           for p in sorted((ROOT / "flows").rglob("*.py"))}
    assert not {k: v for k, v in bad.items() if v}, bad
