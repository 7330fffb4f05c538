"""One table per kind of member (issue 69, item 4): first-round pickers, later-round strategies, hit-hunting acquisitions, difficulty
estimates and models are each one entry in one table, and the code dispatches through the table instead of
comparing names; the CLI help, params.yaml's comment and the benchmarks read the tables."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

from helpers import ROOT


def _model_names() -> set[str]:
    from tmdlib.models import model_names

    return set(model_names())


def _spelled(source: str, names: set[str]) -> list[tuple[int, str]]:
    """``(line, name)`` of every string constant of ``source`` that is exactly one of ``names``."""
    return [(n.lineno, n.value) for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names]


def _compared(source: str, function: str, names) -> list[str]:
    """The constants of ``names`` that a comparison inside ``function`` (anywhere in ``source``) tests against:
    ``x == "name"``, ``x in ("name", ...)``."""
    names = set(names)
    out = []
    for fn in ast.walk(ast.parse(source)):
        if not (isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == function):
            continue
        for node in (n for stmt in fn.body for n in ast.walk(stmt)):
            if not isinstance(node, ast.Compare):
                continue
            for side in [node.left, *node.comparators]:
                items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                out += [i.value for i in items if isinstance(i, ast.Constant) and i.value in names]
    return out


def _source(relative: str) -> str:
    return (ROOT / relative).read_text(encoding="utf-8")


def test_the_checks_see_a_name():
    assert _spelled('if spec.name in ("gin", "certified-gin"):\n    pass\n', {"gin"}) == [(1, "gin")]
    src = 'def f(s):\n    if s == "badge":\n        return 1\n    return s in ("tmd", "x")\n'
    assert _compared(src, "f", {"badge", "tmd"}) == ["badge", "tmd"]
    assert not _compared('def f(s="badge"):\n    """badge"""\n    return s\n', "f", {"badge"})


def test_no_model_name_in_flows_or_tasks():
    """flows/ and tasks/ ask the registry (``ModelSpec.takes_recipe``, ``certified``, ``graph_default``,
    ``auto_recipe``) instead of spelling a model's name."""
    names = _model_names()
    found = {str(p.relative_to(ROOT)): _spelled(p.read_text(encoding="utf-8"), names)
             for d in ("flows", "tasks") for p in sorted((ROOT / d).rglob("*.py"))}
    found = {k: v for k, v in found.items() if v}
    assert not found, f"model names spelled in flows/ or tasks/ (ask tmdlib.models._registry): {found}"


def test_the_rounds_dispatch_through_their_tables():
    """No function that runs a later-round strategy, an acquisition or a difficulty estimate compares its name with
    a table's entries: it looks the entry up (a new entry is one line in one table)."""
    from tmdlib.select.hits import ACQUISITIONS
    from tmdlib.select.rounds import DIFFICULTIES, FIRST_KINDS, FIRST_PICKERS, NEXT_STRATEGIES

    assert {kind for kind, _space in FIRST_PICKERS.values()} <= set(FIRST_KINDS)  # every first round has its picker
    picks = {e.pick.__name__ for e in NEXT_STRATEGIES.values()} | {"next_batch", "_greedy", "needs_difficulty"}
    scores = {e.score.__name__ for e in ACQUISITIONS.values()} | {"acquisition", "reads_spread",
                                                                     "_regression_surrogate", "hit_scores"}
    checks = [("tmdlib/select/rounds.py", f, NEXT_STRATEGIES) for f in sorted(picks)]
    checks += [("tmdlib/select/rounds.py", f, DIFFICULTIES) for f in ("estimate_difficulty", "difficulty_name")]
    checks += [("tmdlib/select/rounds.py", "first_picks", FIRST_KINDS)]
    checks += [("tmdlib/select/hits.py", f, ACQUISITIONS) for f in sorted(scores)]
    checks += [("tmdlib/select/_methods.py", "_next_round", NEXT_STRATEGIES),
               ("tasks/select.py", "round_options", {**NEXT_STRATEGIES, **DIFFICULTIES, **ACQUISITIONS}),
               ("tmdlib/select/round_policy.py", "steer_round", {**NEXT_STRATEGIES, **DIFFICULTIES, **ACQUISITIONS}),
               ("tmdlib/experiment/pool.py", "difficulty", DIFFICULTIES),
               ("tmdlib/experiment/hits.py", "hit_picks", ACQUISITIONS)]
    bad = {f"{path}:{fn}": hit for path, fn, table in checks if (hit := _compared(_source(path), fn, table))}
    assert not bad, f"names compared instead of looked up in their table: {bad}"


def _option_help(command, parameter: str) -> str:
    return inspect.signature(command).parameters[parameter].default.help


def test_every_table_entry_is_in_the_help():
    """``--next`` and ``--model`` list every entry of their tables, the benchmarks' ``--strategies`` every first
    round, strategy, difficulty estimate and acquisition."""
    from flows.cli import select
    from flows.train import train_command
    from tmdlib.experiment.hits import notation as hit_notation
    from tmdlib.experiment.pool import notation as pool_notation
    from tmdlib.select.hits import ACQUISITIONS
    from tmdlib.select.rounds import DIFFICULTIES, FIRST_PICKERS, NEXT_STRATEGIES

    nxt, model = _option_help(select, "next_strategy"), _option_help(train_command, "model")
    assert all(f"{name} (" in nxt for name in NEXT_STRATEGIES), nxt
    assert all(NEXT_STRATEGIES[name].help in nxt for name in NEXT_STRATEGIES)
    assert all(name in model for name in _model_names()), model
    pool, hits = pool_notation(), hit_notation()
    for name in [*FIRST_PICKERS, *NEXT_STRATEGIES, *DIFFICULTIES]:
        assert name in pool, (name, pool)
    for name in [*FIRST_PICKERS, *ACQUISITIONS]:
        assert name in hits, (name, hits)


def _comment(params: str, section: str, key: str) -> str:
    """The comment of ``section.key`` in params.yaml: its line's and the indented comment lines after it."""
    lines = params.splitlines()
    start = lines.index(f"{section}:")
    at = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(f"  {key}:"))
    out = [lines[at].partition("#")[2]]
    for line in lines[at + 1:]:
        if not line.lstrip().startswith("#"):
            break
        out.append(line.lstrip()[1:])
    return " ".join(out)


def test_params_comment_lists_every_strategy():
    """params.yaml's ``select.next`` comment names every later-round strategy of the table."""
    from tmdlib.select.rounds import NEXT_STRATEGIES

    text = _comment(Path(ROOT / "params.yaml").read_text(encoding="utf-8"), "select", "next")
    words = {w.strip(" |(),.;:") for w in text.split()}
    assert set(NEXT_STRATEGIES) <= words, sorted(set(NEXT_STRATEGIES) - words)
