"""``tmdsub init``'s templates (issue 70): the project's dvc.yaml and params.yaml are the checkout's, made for a folder
without the tool's sources -- no stage depends on flows/, tasks/ or tmdlib/, every stage on ``tool.version`` -- and
they stay in step with the checkout's (regenerate with ``python -m flows.project``); init writes the project's files
and refuses a folder that holds a pipeline.  In process: no git, DVC or flow is run."""
from __future__ import annotations

import yaml

from helpers import ROOT

from flows.project import (PROJECT_FILES, TEMPLATES, VERSION_PLACEHOLDER, init_project, project_dvc_yaml,
                           project_params_yaml, tool_version)
from tmdlib import InputError


def test_the_templates_are_the_checkouts_pipeline_made_for_a_project():
    dvc_text = (TEMPLATES / "dvc.yaml").read_text()
    params_text = (TEMPLATES / "params.yaml").read_text()
    assert dvc_text == project_dvc_yaml((ROOT / "dvc.yaml").read_text()), "run: python -m flows.project"
    assert params_text == project_params_yaml((ROOT / "params.yaml").read_text()), "run: python -m flows.project"
    ours, theirs = yaml.safe_load(dvc_text), yaml.safe_load((ROOT / "dvc.yaml").read_text())
    assert ours["vars"] == [{"tmdsub": "tmdsub"}] and ours["stages"].keys() == theirs["stages"].keys()
    for name, stage in ours["stages"].items():
        do, orig = stage["do"], theirs["stages"][name]["do"]
        assert do["cmd"] == orig["cmd"] and do.get("outs") == orig.get("outs")
        assert not [d for d in do["deps"] if str(d).startswith(("flows/", "tasks/", "tmdlib/"))]
        assert [d for d in orig["deps"] if not str(d).startswith(("flows/", "tasks/", "tmdlib/"))] == do["deps"]
        assert do["params"][0] == "tool.version" and do["params"][1:] == orig.get("params", [])
    params, checkout = yaml.safe_load(params_text), yaml.safe_load((ROOT / "params.yaml").read_text())
    assert params["tool"] == {"version": VERSION_PLACEHOLDER} and params["base"]["datasets"] == {}
    assert {k: v for k, v in params.items() if k != "tool"} == {**checkout, "base": {**checkout["base"],
                                                                                     "datasets": {}}}
    assert params_text.startswith("# Parameters of this tmdsub project. Set first:")


def test_init_writes_the_project_and_refuses_a_pipeline_folder(tmp_path):
    info = init_project(tmp_path / "team", git=False, dvc=False)
    root = tmp_path / "team"
    assert sorted(info["files"]) == sorted(PROJECT_FILES.values()) and not info["git"] and not info["dvc"]
    params = yaml.safe_load((root / "params.yaml").read_text())
    assert params["tool"]["version"] == tool_version() == info["version"]
    assert (root / "data" / "raw").is_dir() and (root / ".prefect").is_dir()
    assert "/mlflow.db" in (root / ".gitignore").read_text().split()
    assert "dvc repro label_requests@POOL" in (root / "README.md").read_text()
    for folder, problem in ((root, "already holds dvc.yaml and params.yaml"), (root / "README.md", "is a file")):
        try:
            init_project(folder, git=False, dvc=False)
        except InputError as err:
            assert problem in str(err)
        else:
            raise AssertionError("init_project accepted " + str(folder))
