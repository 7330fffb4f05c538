"""A team's project anywhere: ``tmdsub init DIR`` (issue 70).

The installed package carries the pipeline's templates (``flows/templates/``: ``dvc.yaml``, ``params.yaml``, the
project's ``README.md`` and ``.gitignore``); :func:`init_project` writes them into a new folder, with git and DVC
initialised and ``data/raw/`` ready for the pool.  The project's ``dvc.yaml`` is the checkout's with two changes
(:func:`project_dvc_yaml`): every stage runs the ``tmdsub`` on ``PATH`` (the installed one), and instead of the
tool's source files, which exist only in a checkout, each stage depends on ``tool.version`` in ``params.yaml``, so a
new version of the tool reruns the stages.  Its ``params.yaml`` is the checkout's (:func:`project_params_yaml`) with
the keys a user sets first on top, no dataset listed yet, and the tool's version recorded.

``python -m flows.project`` rewrites the two templates from the checkout's ``dvc.yaml`` and ``params.yaml``
(a house test checks that they agree).
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from tmdlib import InputError

TEMPLATES = Path(__file__).with_name("templates")
#: The dependencies of the checkout's stages on the tool's own source files (not in a project).
CODE_DEP = re.compile(r"^\s+- (flows|tasks|tmdlib)/\S*\s*(#.*)?$")
#: The params key recording the tool version a project's stages last ran with.
VERSION_KEY = "tool.version"
VERSION_PLACEHOLDER = "TMDSUB_VERSION"

_DVC_HEADER = """\
# The pipeline of a tmdsub project (made by `tmdsub init`). DVC is the one authority on the DAG and on skipping
# stages: each stage's cmd runs one step of the installed `tmdsub` (put its environment's bin/ on PATH, or activate
# it). Paths live here; parameters in params.yaml. `base.datasets` lists the pools (NAME: FILE under data/raw/);
# every stage runs once per pool (ingest@NAME, ...). A new tmdsub version (params.yaml: tool.version) reruns them.
vars:
  - tmdsub: tmdsub

"""

_PARAMS_HEADER = f"""\
# Parameters of this tmdsub project. Set first:
#   base.datasets   your pools, NAME: FILE in data/raw/ (.csv .tsv .smi .cxsmiles .sdf .parquet, each may be .gz)
#   labels.source   the lab's answer file once it is back, e.g. {{POOL: lab/answers.csv}}
#   select.fraction (or select.count)   how many molecules to ask the lab for
#   remote.url      the team's DVC remote (then `tmdsub remote`)
# Every other key below has the measured default; the comments say what each does.
tool:
  version: "{VERSION_PLACEHOLDER}"   # the tmdsub version this project's stages run with (a new one reruns them)

"""

_DATASETS = """\
  datasets: {}          # your pools: NAME: FILE under data/raw/, e.g. {POOL: pool.sdf}; one pipeline each
                        # (.csv/.tsv/semicolons sniffed, .smi/.cxsmiles, .sdf, .parquet with a SMILES column, .gz)
"""


def tool_version() -> str:
    """The installed tmdsub's version (``0+unknown`` when it is not installed: a bare source tree)."""
    from tasks.io import tool_version as installed

    return installed()


def project_dvc_yaml(text: str) -> str:
    """A project's ``dvc.yaml`` from the checkout's: its own header (``tmdsub`` from ``PATH``), no dependency on the
    tool's source files, ``tool.version`` a parameter of every stage."""
    body = text[text.index("\nstages:") + 1:]
    out, stages = [], re.split(r"(?m)^(?=  \S)", body)
    for stage in stages:
        lines = [ln for ln in stage.split("\n") if not CODE_DEP.match(ln)]
        if not stage.startswith("  ") or "      cmd:" not in stage:
            out.append("\n".join(lines))
            continue
        if any(ln.startswith("      params:") for ln in lines):
            k = next(i for i, ln in enumerate(lines) if ln.startswith("      params:"))
            lines.insert(k + 1, f"        - {VERSION_KEY}")
        else:
            k = next(i for i, ln in enumerate(lines) if ln.startswith("      deps:"))
            k = next(i for i in range(k + 1, len(lines)) if re.match(r"^      \S", lines[i]))
            lines[k:k] = ["      params:", f"        - {VERSION_KEY}"]
        out.append("\n".join(lines))
    return _DVC_HEADER + "".join(out)


def project_params_yaml(text: str) -> str:
    """A project's ``params.yaml`` from the checkout's: the keys set first and ``tool.version`` on top, no dataset."""
    body = text[text.index("\nbase:") + 1:]
    start = body.index("  datasets:")
    end = body.index("\n  task:", start) + 1
    return _PARAMS_HEADER + body[:start] + _DATASETS + body[end:]


def write_templates(checkout: Path) -> None:
    """Rewrite ``flows/templates/dvc.yaml`` and ``params.yaml`` from a checkout's (``python -m flows.project``)."""
    (TEMPLATES / "dvc.yaml").write_text(project_dvc_yaml((checkout / "dvc.yaml").read_text()))
    (TEMPLATES / "params.yaml").write_text(project_params_yaml((checkout / "params.yaml").read_text()))


#: What ``tmdsub init`` writes: template file -> path in the project.
PROJECT_FILES = {"dvc.yaml": "dvc.yaml", "params.yaml": "params.yaml", "README.md": "README.md",
                 "gitignore": ".gitignore", "raw-README.md": "data/raw/README.md",
                 "append-README.md": "data/append/README.md", "labelled-README.md": "data/labelled/README.md"}


def _run(args: list[str], cwd: Path, what: str) -> None:
    try:
        res = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        raise InputError(cwd, f"{what}: {args[0]} not found on PATH") from None
    if res.returncode != 0:
        raise InputError(cwd, f"{what} failed: {(res.stderr or res.stdout).strip().splitlines()[-1:]}")


def init_project(folder: str | Path, *, git: bool = True, dvc: bool = True) -> dict:
    """Make a team's project in ``folder`` (created; an existing folder may hold other files, not a pipeline).

    Writes :data:`PROJECT_FILES` (``params.yaml`` with this tool's version recorded), ``.prefect/`` (Prefect's home
    while ``tmdsub`` runs in the project), then ``git init`` (unless ``folder`` is inside a git repository already)
    and ``dvc init``.

    Returns
    -------
    dict
        ``path``, ``version``, ``files`` (written), ``git`` and ``dvc`` (what was initialised).

    Raises
    ------
    InputError
        ``folder`` is a file, already holds a ``dvc.yaml`` or ``params.yaml``, or git / dvc fail.
    """
    root = Path(folder).expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise InputError(root, "is a file; tmdsub init makes a project folder")
    taken = [n for n in ("dvc.yaml", "params.yaml") if (root / n).exists()]
    if taken:
        raise InputError(root, f"already holds {' and '.join(taken)}: a project is there (or another pipeline)")
    version = tool_version()
    root.mkdir(parents=True, exist_ok=True)
    written = []
    for src, dst in PROJECT_FILES.items():
        target = root / dst
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        text = (TEMPLATES / src).read_text(encoding="utf-8")
        target.write_text(text.replace(VERSION_PLACEHOLDER, version), encoding="utf-8")
        written.append(dst)
    (root / ".prefect").mkdir(exist_ok=True)
    did_git = did_dvc = False
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True) \
        if shutil.which("git") else None
    inside = top is not None and top.returncode == 0
    if git and top is not None and not inside:
        _run(["git", "init", "-q"], root, "git init")
        did_git = inside = True
    if dvc and not (root / ".dvc").exists():
        scm = [] if not inside else [] if did_git or Path(top.stdout.strip()).resolve() == root else ["--subdir"]
        _run([*_dvc(), "init", "-q", *(scm if inside else ["--no-scm"])], root, "dvc init")
        _run([*_dvc(), "config", "core.analytics", "false"], root, "dvc config")
        did_dvc = True
    return {"path": str(root), "version": version, "files": written, "git": did_git, "dvc": did_dvc}


def _dvc() -> list[str]:
    """The ``dvc`` beside this Python (the environment tmdsub is installed in), else the one on ``PATH``."""
    import sys

    beside = Path(sys.executable).with_name("dvc")
    return [str(beside)] if beside.exists() else ["dvc"]


if __name__ == "__main__":  # rewrite the templates from the checkout this file is in
    write_templates(Path(__file__).resolve().parents[1])


def upgrade_project(root: str | Path = ".") -> dict:
    """Set ``tool.version`` of a project's ``params.yaml`` to the installed tmdsub's version (the line edited in
    place, comments kept), so that ``dvc repro`` reruns every stage with it.

    Returns
    -------
    dict
        ``previous`` and ``version`` (equal when nothing changed), ``path`` of the params file.

    Raises
    ------
    InputError
        No ``params.yaml``, or one without ``tool.version`` (not a project made by ``tmdsub init``).
    """
    import re

    from tmdlib import InputError

    path = Path(root) / "params.yaml"
    if not path.is_file():
        raise InputError(path, "no params.yaml here: run `tmdsub upgrade` in a project made by `tmdsub init`")
    text = path.read_text(encoding="utf-8")
    found = re.search(r'(?m)^tool:[^\n]*\n(?:[ \t]*(?:#[^\n]*)?\n)*([ \t]+version:[ \t]*)("?)([^"\s#]*)("?)', text)
    if found is None:
        raise InputError(path, "no tool.version: the checkout's stages depend on its source files (`dvc repro` "
                               "reruns what changed); `tmdsub upgrade` is for a project made by `tmdsub init`")
    version = tool_version()
    if found.group(3) != version:
        from tasks import io

        io.write_text(path, text[:found.start(2)] + f'"{version}"' + text[found.end(4):])
    return {"path": str(path), "previous": found.group(3), "version": version}

