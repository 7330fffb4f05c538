"""Lineage (issue 69, item 7): every DVC stage lists among its ``deps`` every project file its code runs, so a change
to any of them reruns the stage (the train stage once fitted ``tmdlib/guarantees/losses.py``'s ``Standardizer``
without listing it: a change there reran nothing).

The rule, read from the source with :mod:`ast` (nothing is imported):

* a stage's code starts at its flow module, the one ``flows/*.py`` file among its deps not named ``_*.py`` and not in
  a subfolder (``flows/config/`` holds the stages' configs, which the flow imports; the
  ``tmdsub`` command line only parses the options params.yaml fills; it is not a dep);
* it reaches every project module (``flows/``, ``tasks/``, ``tmdlib/``) imported anywhere in a reached module, at
  module level or inside a function, transitively;
* ``from package import name`` reaches the module the package's ``__init__`` takes ``name`` from
  (``from tmdlib import InputError`` reaches ``tmdlib/_errors.py``), not every module the ``__init__`` re-exports:
  the stage runs the code it calls;
* a string naming a project module (``"tmdlib.chem.models:SVM"``, the model registry's entry points, imported by
  name on first lookup) reaches that module;
* the ``__init__.py`` of every package above a reached module runs too: the file itself is reached (not what it
  re-exports).

Every reached file must be covered by a code dep of the stage: the file itself or a folder above it.
"""
from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

from helpers import ROOT

PACKAGES = ("flows", "tasks", "tmdlib")
#: A string constant that may name a module: ``pkg.mod`` or ``pkg.mod:attribute``.
MODULE_STRING = re.compile(r"^((?:flows|tasks|tmdlib)(?:\.\w+)+)(?::[\w.]+)?$")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@lru_cache(maxsize=None)
def _modules(root: Path = ROOT) -> dict[str, Path]:
    return {_module_name(p, root): p for pkg in PACKAGES for p in (root / pkg).rglob("*.py")}


@lru_cache(maxsize=None)
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _absolute(name: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    """The absolute module of a (possibly relative) ``from ... import``."""
    if not node.level:
        return node.module or ""
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _reexport(package: str, attr: str, mods: dict[str, Path]) -> str | None:
    """The module a package's ``__init__`` takes ``attr`` from (``from .errors import InputError``), or None."""
    path = mods.get(package)
    if path is None or path.name != "__init__.py":
        return None
    for node in _tree(path).body:
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == attr for a in node.names):
            src = _absolute(package, True, node)
            real = next(a.name for a in node.names if (a.asname or a.name) == attr)
            if f"{src}.{real}" in mods:
                return f"{src}.{real}"
            if src in mods:
                return _reexport(src, real, mods) or src
    return None


def _reaches(name: str, mods: dict[str, Path]) -> set[str]:
    """The project modules one module reaches directly (the rule in the module docstring)."""
    path = mods[name]
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                out.update(".".join(parts[:k]) for k in range(1, len(parts) + 1) if ".".join(parts[:k]) in mods)
        elif isinstance(node, ast.ImportFrom):
            src = _absolute(name, is_pkg, node)
            if src not in mods:
                continue
            for a in node.names:
                sub = f"{src}.{a.name}"
                out.add(sub if sub in mods else _reexport(src, a.name, mods) or src)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            m = MODULE_STRING.match(node.value)
            if m and m.group(1) in mods:
                out.add(m.group(1))
    out.discard(name)
    return out


def stage_code(flow_module: str, root: Path = ROOT) -> set[str]:
    """Every project file (relative POSIX path) a stage whose flow is ``flow_module`` runs."""
    mods = _modules(root)
    seen: set[str] = set()
    todo = [flow_module]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo.extend(_reaches(m, mods) - seen)
    files = {mods[m] for m in seen}
    for m in seen:  # the packages above a module run their __init__ first
        parts = m.split(".")
        files.update(mods[".".join(parts[:k])] for k in range(1, len(parts)) if ".".join(parts[:k]) in mods)
    return {p.relative_to(root).as_posix() for p in files}


def uncovered(files: set[str], deps: list[str]) -> list[str]:
    """The files no dep covers (a dep covers itself and everything below it)."""
    prefixes = [d.rstrip("/") for d in deps]
    return sorted(f for f in files if not any(f == d or f.startswith(d + "/") for d in prefixes))


def _stages() -> dict[str, list[str]]:
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    return {name: [str(d) for d in stage["do"]["deps"]] for name, stage in dvc["stages"].items()}


def test_the_rule_follows_function_imports_reexports_and_entry_points():
    """On the checkout itself: the train flow reaches the loss module (the missed dep of issue 69), a name imported
    from a re-exporting package reaches its defining module, a registry entry point reaches the model's module."""
    mods = _modules()
    assert _reexport("tmdlib", "InputError", mods) == "tmdlib._errors"
    assert "tmdlib._errors" in _reaches("flows.config.ingest", mods)  # `from tmdlib import InputError`
    assert {"tmdlib.chem.models", "tmdlib.torch.model", "tmdlib.chem.lgbm"} <= _reaches("tmdlib.models._registry", mods)
    train = stage_code("flows.train")
    assert {"tmdlib/guarantees/losses.py", "tmdlib/torch/model.py", "tmdlib/__init__.py"} <= train
    assert uncovered({"tmdlib/guarantees/losses.py", "tmdlib/torch/gin.py"}, ["tmdlib/torch/", "tmdlib/models"]) \
        == ["tmdlib/guarantees/losses.py"]


def test_a_function_level_import_is_reached(tmp_path):
    """A module imported only inside a function is part of the stage (a lazy import is still code that runs)."""
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "flows" / "stage.py").write_text("def run():\n    from tasks.work import go\n    return go()\n")
    (tmp_path / "tasks" / "work.py").write_text("from tmdlib import helper\n")
    (tmp_path / "tmdlib" / "__init__.py").write_text("from ._impl import helper\n")
    (tmp_path / "tmdlib" / "_impl.py").write_text("MODEL = 'tmdlib.other:X'\n")
    (tmp_path / "tmdlib" / "other.py").write_text("")
    (tmp_path / "tmdlib" / "unused.py").write_text("")
    assert stage_code("flows.stage", tmp_path) == {
        "flows/__init__.py", "flows/stage.py", "tasks/__init__.py", "tasks/work.py", "tmdlib/__init__.py",
        "tmdlib/_impl.py", "tmdlib/other.py"}


@pytest.mark.parametrize("stage", sorted(_stages()))
def test_every_stage_depends_on_the_code_it_runs(stage):
    """Each stage's code deps cover every project file its flow reaches (the rule in the module docstring)."""
    deps = _stages()[stage]
    flows = [d for d in deps if d.startswith("flows/") and d.endswith(".py") and not d[6:].startswith("_")
             and "/" not in d[6:]]
    assert len(flows) == 1, f"{stage}: one flow module among its deps, got {flows}"
    code = [d for d in deps if d.split("/")[0] in PACKAGES]
    missing = uncovered(stage_code(flows[0][:-3].replace("/", ".")), code)
    assert not missing, f"dvc.yaml: stage {stage} runs these files but does not list them among its deps: {missing}"
