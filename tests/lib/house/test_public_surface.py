"""A small public surface (issue 69, item 6), as scikit-learn keeps it: a module whose names its package re-exports is
private (``_name.py``), so a user reads one import path per name (``from tmdlib.select import select_graphs``, not
``tmdlib.select.api``); each package's ``__all__`` lists what a user is meant to call, and every name in it resolves.

The surface is counted as the names of every package's ``__all__`` plus the public top-level names (functions,
classes, constants not starting with ``_``) of tmdlib's public modules (those whose path has no ``_``-part).  It was
1,312 names before the re-exported modules went private and 897 after (the ``__all__`` of tmdlib's modules listed
1,155 names, 800 of them in the modules still public); :data:`MOST_PUBLIC` is the ceiling now.  The pipeline (``flows/``, ``tasks/``) and the benchmarks import a
re-exported name from its package, never from the private module behind it.
"""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

from helpers import ROOT

TMDLIB = ROOT / "tmdlib"
#: The most names the public surface may hold (measured when the modules went private; it may only go down).
MOST_PUBLIC = 897


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_private(path: Path) -> bool:
    return any(p.startswith("_") and p != "__init__.py" for p in path.relative_to(TMDLIB).parts)


def _reexported(init: Path) -> list[Path]:
    """The sibling modules (plain files) a package's ``__init__`` imports names from."""
    out = []
    for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            for name in ([node.module] if node.module else [a.name for a in node.names]):
                if name and "." not in name and (init.parent / f"{name}.py").exists():
                    out.append(init.parent / f"{name}.py")
    return out


def _all_of(init: Path) -> list[str]:
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return []


def _public_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


def public_surface() -> dict[str, int]:
    """``module -> names`` it adds to the public surface."""
    out = {}
    for path in sorted(TMDLIB.rglob("*.py")):
        if _is_private(path):
            continue
        out[_module(path)] = len(_all_of(path)) if path.name == "__init__.py" else len(_public_names(path))
    return out


def test_a_module_whose_names_its_package_reexports_is_private():
    public = [p.relative_to(ROOT).as_posix() for init in sorted(TMDLIB.rglob("__init__.py"))
              for p in _reexported(init) if not p.name.startswith("_")]
    assert not public, f"re-exported by their package, yet public (rename to _name.py): {public}"


def test_every_package_lists_what_a_user_calls_and_it_resolves():
    for init in sorted(TMDLIB.rglob("__init__.py")):
        if _is_private(init):
            continue
        names = _all_of(init)
        if not names:
            continue
        assert len(names) == len(set(names)), f"{init}: __all__ repeats names"
        module = importlib.import_module(_module(init))
        missing = [n for n in names if not hasattr(module, n)]
        assert not missing, f"{_module(init)}.__all__ names what it does not define: {missing}"


def test_the_public_surface_stays_small():
    surface = public_surface()
    total = sum(surface.values())
    assert total <= MOST_PUBLIC, (f"the public surface grew to {total} names (ceiling {MOST_PUBLIC}): make a helper "
                                  f"private (_name), or a module private; largest: "
                                  f"{sorted(surface.items(), key=lambda kv: -kv[1])[:8]}")


def _private_imports(path: Path):
    """``(package, private module, name)`` of each ``from tmdlib.pkg._mod import name`` in ``path``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            m = re.match(r"^(tmdlib(?:\.[a-z]\w*)*)\.(_\w+)$", node.module)
            if m:
                yield from ((m.group(1), node.module, a.name) for a in node.names)


def test_the_pipeline_imports_a_reexported_name_from_its_package():
    """``flows/``, ``tasks/`` and ``benchmarks/`` take a name from its package where the package re-exports it: a
    private module is an implementation detail even to the pipeline."""
    found = []
    for folder in ("flows", "tasks", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for pkg, mod, name in _private_imports(path):
                package, module = importlib.import_module(pkg), importlib.import_module(mod)
                if getattr(package, name, None) is getattr(module, name, object()):
                    found.append(f"{path.relative_to(ROOT)}: from {mod} import {name} (use {pkg})")
    assert not found, "\n".join(found)
