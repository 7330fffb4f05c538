"""DVC and git from outside the DVC stages: the team remote, ``dvc repro``, ``dvc push``, commits.

These run the ``dvc``/``git`` command lines in a workspace (the repository root).  They are never
called from inside a DVC stage (a stage calling ``dvc`` would deadlock on DVC's own lock); the
``tmdsub remote`` command and the scheduled-run flow (:mod:`flows.schedule`) use them.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from tmdlib import InputError
from tmdlib.reporting.provenance import redact_uri

__all__ = ["read_group", "remote_settings", "configure_remote", "tool_env", "run_tool", "stages_ran",
           "git_commit", "is_git_repo"]

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def read_group(params_path: str | os.PathLike, group: str) -> dict:
    """The ``group`` mapping of ``params.yaml`` (``{}`` when absent); a bad file is an InputError."""
    p = Path(params_path)
    if not p.is_file():
        raise InputError(p, "params file not found")
    try:
        params = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise InputError(p, f"not valid YAML: {getattr(err, 'problem', err)}",
                         line=None if mark is None else mark.line + 1) from None
    if not isinstance(params, dict):
        raise InputError(p, "must be a mapping of parameter groups")
    value = params.get(group, {})
    if not isinstance(value, dict):
        raise InputError(p, f"`{group}:` must be a mapping, got {type(value).__name__}")
    return value


def remote_settings(params_path: str | os.PathLike, workspace: str | os.PathLike) -> tuple[str, str]:
    """``(name, url)`` of the ``remote:`` group; a relative local path is made absolute from ``workspace``.

    A URL with a scheme (``s3://``, ``ssh://``, ``gs://``, ``azure://``, ``https://`` ...) is kept as
    written; a local path is resolved against the workspace (not against ``.dvc/``, as ``dvc remote
    add`` would), so the committed config names the same folder from every clone.  Credentials in the
    URL are refused: they belong in the git-ignored ``.dvc/config.local``.
    """
    group = read_group(params_path, "remote")
    name, url = group.get("name", "team"), group.get("url")
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise InputError(params_path, f"remote.name must be letters, digits, _ or -; got {name!r}")
    if not isinstance(url, str) or not url.strip():
        raise InputError(params_path, "remote.url is missing: a local folder, s3://..., ssh://... or gs://...")
    url = url.strip()
    if redact_uri(url) != url:
        raise InputError(params_path, "remote.url must not hold credentials; set them with "
                                      f"`dvc remote modify --local {name} ...` (kept out of git)")
    if "://" in url:
        return name, url
    return name, str((Path(workspace) / Path(url).expanduser()).resolve())


def _tool(name: str) -> str:
    """The ``name`` executable next to this Python (the venv), else ``name`` on PATH."""
    exe = Path(sys.executable).with_name(name)
    return str(exe) if exe.exists() else name


def tool_env() -> dict:
    """This process's environment for a child command: the venv's ``bin`` first on PATH (stage commands
    call ``tmdsub``), without Prefect's per-run ``PREFECT__*`` variables (a stage is a run of its own)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT__")}
    return {**env, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}


def run_tool(args: list[str], cwd: str | os.PathLike, what: str | None = None,
             timeout: float | None = None) -> str:
    """Run ``dvc``/``git``/``tmdsub`` ``args`` in ``cwd``; return stdout+stderr, or raise one clear error.

    Raises
    ------
    RuntimeError
        Non-zero exit: the message names the command and ends with the last lines of its output.
    """
    res = subprocess.run([_tool(args[0]), *args[1:]], cwd=cwd, env=tool_env(), capture_output=True, text=True,
                         timeout=timeout)
    out = res.stdout + res.stderr
    if res.returncode != 0:
        tail = " | ".join(line.strip() for line in out.strip().splitlines()[-5:])
        raise RuntimeError(f"`{what or ' '.join(args)}` failed (exit {res.returncode}): {tail}")
    return out


def configure_remote(workspace: str | os.PathLike, params_path: str | os.PathLike | None = None) -> tuple[str, str]:
    """Make params.yaml's ``remote:`` the default DVC remote in the project's ``.dvc/config``.

    Returns ``(name, url)`` (the url as configured; print it with :func:`redact_uri`).
    """
    ws = Path(workspace).resolve()
    if not (ws / ".dvc").is_dir():
        raise InputError(ws, "not a DVC project (no .dvc/ folder)")
    name, url = remote_settings(params_path or ws / "params.yaml", ws)
    run_tool(["dvc", "remote", "add", "--project", "--default", "--force", name, url], ws,
             what=f"dvc remote add {name} {redact_uri(url)}")
    return name, url


def stages_ran(dvc_output: str) -> list[str]:
    """Stages ``dvc repro`` ran, in order, from its ``Running stage '...'`` lines."""
    return [line.split("'")[1] for line in dvc_output.splitlines() if line.startswith("Running stage '")]


def is_git_repo(workspace: str | os.PathLike) -> bool:
    """True when ``workspace`` is inside a git work tree."""
    res = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=workspace, capture_output=True,
                         text=True)
    return res.returncode == 0 and res.stdout.strip() == "true"


def git_commit(workspace: str | os.PathLike, paths: list[str], message: str) -> bool:
    """``git add`` the existing ``paths`` and commit them; False when there was nothing to commit."""
    present = [p for p in paths if (Path(workspace) / p).exists()]
    if not present:
        return False
    run_tool(["git", "add", "--", *present], workspace)
    staged = subprocess.run(["git", "diff", "--cached", "--quiet", "--", *present], cwd=workspace)
    if staged.returncode == 0:
        return False
    run_tool(["git", "commit", "-q", "-m", message, "--", *present], workspace, what="git commit")
    return True
