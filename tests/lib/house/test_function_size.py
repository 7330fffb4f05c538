"""Rooms of the house (issue 69, item 5): few long functions.  A function's size is its lines of code: from the
first statement after its docstring to its last line, blank and comment-only lines left out."""
from __future__ import annotations

import ast
import textwrap

from helpers import ROOT

PACKAGES = ("tmdlib", "tasks", "flows")
#: A function over this many lines of code is long ...
LONG = 80
#: ... and at most this many may be (numba kernels whose loops share their state, today).
MAX_LONG = 3


def code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> int:
    """Lines of code of a function: its body without the docstring, blank and comment-only lines."""
    body = node.body
    first = body[0]
    doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    start = first.end_lineno + 1 if doc else first.lineno
    return sum(1 for t in lines[start - 1:node.end_lineno] if t.strip() and not t.strip().startswith("#"))


def long_functions(limit: int = LONG) -> dict[str, int]:
    """``path:function -> lines of code`` of every function of tmdlib, tasks and flows over ``limit``."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            src = path.read_text(encoding="utf-8")
            lines = src.splitlines()
            for node in ast.walk(ast.parse(src)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    n = code_lines(node, lines)
                    if n > limit:
                        out[f"{path.relative_to(ROOT).as_posix()}:{node.name}"] = n
    return out


def test_code_lines_leave_out_the_docstring_blanks_and_comments():
    src = textwrap.dedent('''
        def f(x):
            """Doc
            string."""
            # a comment

            y = x + 1  # counted
            return y
        ''')
    node = ast.parse(src).body[0]
    assert code_lines(node, src.splitlines()) == 2


def test_at_most_three_functions_are_long():
    long = long_functions()
    assert len(long) <= MAX_LONG, (f"{len(long)} functions over {LONG} lines of code (at most {MAX_LONG}; split "
                                   f"them into named steps): {dict(sorted(long.items(), key=lambda kv: -kv[1]))}")
