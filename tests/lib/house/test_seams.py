"""The seams between the layers, checked on the source: flows reach selection through its public API (the policy
lives in tmdlib.select.plan_selection), and task types are asked of TaskSpec, not compared as strings."""
from __future__ import annotations

import ast
from pathlib import Path

from helpers import ROOT

#: The selection engine's internals: a flow that imports them re-derives what the library decides.
SELECTION_INTERNALS = ("tmdlib.select.scalable", "tmdlib.select._certificate", "tmdlib.select._coreset")


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
    assert _internals("import tmdlib.select._certificate as c\n")
    assert _internals("from tmdlib.select import _coreset\n") == ["tmdlib.select._coreset"]
    assert not _internals("from tmdlib.select import plan_selection, resolve_engine\n")


def test_no_flow_imports_the_selection_engines_internals():
    """flows/ asks :func:`tmdlib.select.plan_selection` what will run; it imports nothing of the engines."""
    bad = {str(p.relative_to(ROOT)): _internals(p.read_text(encoding="utf-8"))
           for p in sorted((ROOT / "flows").rglob("*.py"))}
    assert not {k: v for k, v in bad.items() if v}, bad


#: The task types (tmdlib.datasets._task.TASK_TYPES), as the literals a comparison would spell.
TYPE_NAMES = frozenset({"binary", "multiclass", "multitask", "regression"})
#: The module that decides and describes task types: the one place their names are compared.
TASK_MODULE = "tmdlib/datasets/_task.py"
#: Where comparisons of task-type names remain, at most this many each (none left: the chemists' estimators map
#: scikit-learn's kinds through ``tmdlib.chem._forest.REGRESSES``, the TU reader its class counts through
#: ``tmdlib.datasets._tu.TU_CLASS_COUNTS``, the rest ask TaskSpec).
REMAINING: dict[str, int] = {}
#: At most this many comparisons outside the task module, in tmdlib, tasks and flows together.
MOST_REMAINING = 3


def _names(node) -> set:
    """The task-type names a comparison operand spells: a string literal, or a tuple / list / set of them."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return {n.value for n in items if isinstance(n, ast.Constant) and isinstance(n.value, str)} & TYPE_NAMES


def _type_comparisons(source: str) -> list[int]:
    """Lines of comparisons (``==``, ``!=``, ``in``, ``not in``) of anything with a task type's name."""
    return [node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Compare)
            and any(_names(operand) for operand in (node.left, *node.comparators))]


def test_the_count_sees_every_spelling():
    src = ('a = t.type == "regression"\nb = task_type in ("binary", "multitask")\nc = "multiclass" != kind\n'
           'd = x.type != pa.float64()\ne = loss == "bce"\nf = spec.is_regression\n')
    assert _type_comparisons(src) == [1, 2, 3]


def test_task_types_are_asked_of_the_task_spec_not_compared():
    """Outside :mod:`tmdlib.datasets._task` nothing compares task-type names (``task.type == "regression"``):
    code asks the :class:`~tmdlib.datasets._task.TaskSpec` (``is_classification``, ``is_regression``,
    ``output_dim``, ``class_indices`` / ``decode_labels``, ``default_loss``, ``metrics``, ...) or dispatches
    through a table keyed by type (:data:`tmdlib.metrics.METRICS`, :data:`tmdlib.guarantees.losses.LOSSES`)."""
    found = {}
    for pkg in ("tmdlib", "tasks", "flows"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            lines = _type_comparisons(path.read_text(encoding="utf-8"))
            if lines and rel != TASK_MODULE:
                found[rel] = lines
    over = {rel: lines for rel, lines in found.items() if len(lines) > REMAINING.get(rel, 0)}
    assert not over, f"task-type names compared outside {TASK_MODULE} (ask TaskSpec instead): {over}"
    assert sum(REMAINING.values()) <= MOST_REMAINING


#: What a task spec answers that says which task type it is: reading one of these in a condition is deciding the type.
#: (Its behaviour -- ``conformal``, ``estimator_kind``, ``control_error``, ``predicted_classes``, ... -- is what
#: callers ask instead: a new type declares each in the task module's tables, it does not fall into one side of an
#: ``if`` somewhere else.)
TYPE_PREDICATES = frozenset({"is_regression", "is_classification", "is_binary", "single_label", "class_indices",
                             "standardises_targets", "allows_missing", "logits"})
#: At most this many branches on a task type outside the task module, in tmdlib, tasks and flows (issue 69).
MOST_TYPE_BRANCHES = 8
#: The branches left, per file: how many, and why (each also says so in a ``# task type:`` comment where its file
#: is not being rewritten by another change).
KEPT_TYPE_BRANCHES: dict[str, tuple[int, str]] = {
    "tmdlib/experiment/protocol.py": (2, "the paper's protocol: its own metric per binary set; node subsampling and "
                                         "the condensation baselines on binary tasks only"),
    "tmdlib/torch/measure.py": (1, "the bound benchmark needs every training label unless the type masks missing ones"),
    "tmdlib/experiment/molecules.py": (1, "the molecules benchmark measures RMSE on one regression target"),
    "tmdlib/datasets/labels.py": (1, "replicate measurements: a vote among classes, a mean of values (label intake, "
                                     "being rewritten: issue 69 item 5)"),
    "tmdlib/datasets/_smiles.py": (1, "the store's label-rule text names the class-index encoding (being rewritten)"),
}
#: The reason a kept branch gives in its file: ``# task type: <why>`` on its line or the line above.
REASON = "# task type:"


def _decides_type(expr) -> bool:
    """Whether a condition compares a task-type name or reads a :data:`TYPE_PREDICATES` property."""
    return any((isinstance(n, ast.Compare) and any(_names(o) for o in (n.left, *n.comparators)))
               or (isinstance(n, ast.Attribute) and n.attr in TYPE_PREDICATES) for n in ast.walk(expr))


def _type_branches(source: str) -> list[int]:
    """Lines of ``if`` / ``while`` / ternary / comprehension conditions that decide on a task type."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        conditions = ([node.test] if isinstance(node, (ast.If, ast.IfExp, ast.While))
                      else node.ifs if isinstance(node, ast.comprehension) else [])
        lines += [c.lineno for c in conditions if _decides_type(c)]
    return sorted(lines)


def test_the_branch_count_sees_every_kind_of_condition():
    src = ('if task.is_regression:\n    pass\n'
           'x = a if spec.type == "binary" else b\n'
           'y = [t for t in ts if t.single_label]\n'
           'while not head.task.class_indices:\n    break\n'
           'z = spec.output_dim if ok else 0\n'
           'w = task.is_regression\n'
           'if task.conformal == "intervals":\n    pass\n')
    assert _type_branches(src) == [1, 3, 4, 5]


def _all_type_branches() -> dict[str, list[int]]:
    found = {}
    for pkg in ("tmdlib", "tasks", "flows"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            lines = _type_branches(path.read_text(encoding="utf-8"))
            if lines and rel != TASK_MODULE:
                found[rel] = lines
    return found


def test_few_branches_on_the_task_type_each_with_its_reason():
    """Task-type behaviour is asked of :class:`~tmdlib.datasets._task.TaskSpec` (its estimator kind, conformal kind,
    constant predictor, control error, class values, probabilities, trained label shape, target moments, ...); the
    few branches left outside the task module are listed in :data:`KEPT_TYPE_BRANCHES` with their reasons."""
    found = _all_type_branches()
    over = {rel: lines for rel, lines in found.items() if len(lines) > KEPT_TYPE_BRANCHES.get(rel, (0, ""))[0]}
    assert not over, f"branches on a task type outside {TASK_MODULE} (ask TaskSpec instead): {over}"
    assert sum(n for n, _ in KEPT_TYPE_BRANCHES.values()) <= MOST_TYPE_BRANCHES
    assert all(why for _, why in KEPT_TYPE_BRANCHES.values())
    unexplained = []
    for rel, lines in found.items():
        if rel in ("tmdlib/datasets/labels.py", "tmdlib/datasets/_smiles.py"):
            continue  # being rewritten by another change: the reason is in KEPT_TYPE_BRANCHES only
        text = (ROOT / rel).read_text(encoding="utf-8").splitlines()
        unexplained += [f"{rel}:{n}" for n in lines if REASON not in text[n - 1] and REASON not in text[n - 2]]
    assert not unexplained, f"branches on a task type without a `{REASON} <why>` comment: {unexplained}"
