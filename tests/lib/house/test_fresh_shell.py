"""A new shell works (issue 61): every DVC stage runs the .venv's `tmdsub` (its bin first on the stage's PATH, the
one on PATH otherwise), and the README's production walk-through calls the venv's `dvc` and `tmdsub` by path."""
from __future__ import annotations

import re

import yaml

from helpers import ROOT


def test_every_stage_finds_tmdsub_without_an_activated_venv():
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    (var,) = [v["tmdsub"] for v in dvc["vars"] if isinstance(v, dict) and "tmdsub" in v]
    assert var == 'PATH="$(pwd)/.venv/bin:$PATH" tmdsub'
    cmds = {name: stage["do"]["cmd"] for name, stage in dvc["stages"].items()}
    assert cmds and all(c.startswith("${tmdsub} ") for c in cmds.values()), cmds


def test_the_production_walk_through_needs_no_path():
    text = (ROOT / "README.md").read_text()
    block = text.split("## Production: a pool without labels", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [ln.split("#")[0].strip() for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]
    bare = [c for c in commands if re.match(r"(dvc|tmdsub)\b", c)]
    assert not bare, bare
