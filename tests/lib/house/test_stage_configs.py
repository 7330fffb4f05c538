"""One typed config per stage (issue 69, item 2): parameters no longer travel as long argument lists.

The goal: every stage has one typed config (:mod:`flows.config`, one module per stage), built once from the command line's options (which
dvc.yaml fills from params.yaml) and checked there; the flow takes it, the tasks take what they need, and no function
in ``flows/`` (the command line aside) or ``tasks/`` has more than :data:`MAX_PARAMETERS` parameters.

The train, evaluate, ingest, audit and experiment stages are there.  :data:`STILL_OVER` lists the functions of the other stages still over, with
their count today: a ratchet, the list can only shrink (a function over the limit and not listed fails, and so does
one listed with fewer parameters than it has, or one no longer over that is still listed).  The command line is the
typer commands (``flows/cli.py``, and the ``*_command`` functions beside their flows whose every parameter is a
``typer.Option``): their parameters are the options.
"""
from __future__ import annotations

import ast
import dataclasses
import inspect

import yaml

from helpers import ROOT

#: At most this many parameters for a function of flows/ (the command line aside) or tasks/.
MAX_PARAMETERS = 10

#: Functions still over :data:`MAX_PARAMETERS` (the stages without a typed config yet), with their count today:
#: each may only lose parameters, and leaves the list when it is within the limit.
STILL_OVER = {
}


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    return len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)


def _is_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A typer command: every parameter's default is ``typer.Option(...)`` / ``typer.Argument(...)``."""
    defaults = node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
    return bool(defaults) and len(defaults) == len(node.args.args) + len(node.args.kwonlyargs) and all(
        isinstance(d, ast.Call) and ast.unparse(d.func).split(".")[-1] in ("Option", "Argument") for d in defaults)


def over_the_limit(limit: int = MAX_PARAMETERS) -> dict[str, int]:
    """``path:function -> parameters`` of every function of flows/ (cli.py and typer commands aside) and tasks/ with
    more than ``limit`` parameters."""
    out = {}
    for pkg in ("flows", "tasks"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == "flows/cli.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_command(node):
                    n = _parameters(node)
                    if n > limit:
                        out[f"{rel}:{node.name}"] = n
    return out


def test_no_function_of_flows_or_tasks_takes_more_than_ten_parameters():
    over = over_the_limit()
    new = {f: n for f, n in over.items() if f not in STILL_OVER}
    assert not new, (f"over {MAX_PARAMETERS} parameters (issue 69: one typed config per stage, flows/config/; a "
                     f"flow takes its stage's config and paths, a task what it needs of them): {new}")
    grown = {f: (n, STILL_OVER[f]) for f, n in over.items() if n > STILL_OVER[f]}
    assert not grown, f"more parameters than STILL_OVER allows (now, listed): {grown}"
    shrunk = {f: (over.get(f), n) for f, n in STILL_OVER.items() if over.get(f) != n}
    assert not shrunk, (f"fewer parameters than listed, or within {MAX_PARAMETERS} now (now, listed): lower them in "
                        f"STILL_OVER, or take them off it: {shrunk}")


def test_the_command_line_is_counted_apart():
    """The typer commands beside their flows are recognised, and only they."""
    src = (ROOT / "flows" / "train.py").read_text(encoding="utf-8")
    kinds = {n.name: _is_command(n) for n in ast.walk(ast.parse(src)) if isinstance(n, ast.FunctionDef)}
    assert kinds["train_command"] and not kinds["train_flow"]


def _stages():
    from flows.audit import audit_command, audit_flow
    from flows.cli import ingest as ingest_command
    from flows.evaluate import evaluate_command, evaluate_flow
    from flows.experiment import experiment_command, experiment_flow
    from flows.ingest import ingest_flow
    from flows.cli import nodes as nodes_command
    from flows.cli import predict as predict_command
    from flows.cli import select as select_command
    from flows.cli import tmd_matrix as tmd_command
    from flows.config.nodes import NodesPaths, NodesStageConfig
    from flows.config.predict import PredictPaths, PredictStageConfig
    from flows.config.tmd import TmdPaths, TmdStageConfig
    from flows.predict import predict_flow
    from flows.select import nodes_flow
    from flows.tmd import tmd_matrix_flow
    from flows.select import select_flow
    from flows.train import train_command, train_flow
    from flows.config.audit import AuditPaths, AuditStageConfig
    from flows.config.evaluate import EvaluatePaths, EvaluateStageConfig
    from flows.config.select import SelectPaths, SelectStageConfig
    from flows.config.train import TrainPaths, TrainStageConfig
    from flows.config.experiment import ExperimentPaths, ExperimentStageConfig
    from flows.config.ingest import IngestPaths, IngestStageConfig

    return {"train": (train_command, train_flow, TrainStageConfig, TrainPaths),
            "evaluate": (evaluate_command, evaluate_flow, EvaluateStageConfig, EvaluatePaths),
            "ingest": (ingest_command, ingest_flow, IngestStageConfig, IngestPaths),
            "audit": (audit_command, audit_flow, AuditStageConfig, AuditPaths),
            "experiment": (experiment_command, experiment_flow, ExperimentStageConfig, ExperimentPaths),
            "select": (select_command, select_flow, SelectStageConfig, SelectPaths),
            "tmd": (tmd_command, tmd_matrix_flow, TmdStageConfig, TmdPaths),
            "nodes": (nodes_command, nodes_flow, NodesStageConfig, NodesPaths),
            "predict": (predict_command, predict_flow, PredictStageConfig, PredictPaths)}


#: Config fields that are no command-line option (a direct call of the flow sets them; ingest's ``sources`` is
#: params.yaml's ``ingest.sources``, read from ``--params``).
FLOW_ONLY = {"evaluate": {"confidence"}, "ingest": {"sources"}, "experiment": {"prepare_threads"},
             "select": {"threads"}, "tmd": {"matrix_out", "meta_out"},
             "predict": {"selection", "train_info", "experiment"}}
#: Stages whose flow takes its paths as one argument, ``paths`` (more files than a flow's parameters may be).
PATHS_ARGUMENT = {"audit"}
#: Command-line options that are no config field: the dataset's name (it defaults the paths) and the task runner the
#: command starts the flow on (``--runner``, ``--workers``, ``--dask-address``: params.yaml's ``tmd:`` group).
#: ``tmdsub tmd-matrix``'s ``--out-dir`` names the matrix and its meta (``TmdPaths.from_options``); the dataset names
#: the default paths of ``nodes`` and ``predict`` (``predict``'s selection and train.json are found from them).
CLI_ONLY = {"select": {"dataset", "runner", "workers", "dask_address"}, "tmd": {"dataset", "out_dir", "dask_address"},
            "nodes": {"dataset"}, "predict": {"dataset"}}


def test_each_config_covers_its_command_line():
    """Every option of each stage's command is a field of the stage's config or of its paths (but :data:`CLI_ONLY`),
    and every field of them is an option (but :data:`FLOW_ONLY`)."""
    from flows.config import RENAMED

    for stage, (command, _flow, config, paths) in _stages().items():
        options = {RENAMED.get(p, p) for p in inspect.signature(command).parameters} - CLI_ONLY.get(stage, set())
        cfg = {f.name for f in dataclasses.fields(config)}
        where = {f.name for f in dataclasses.fields(paths)}
        assert not cfg & where, f"{stage}: fields both option and path: {cfg & where}"
        assert options <= cfg | where, f"{stage}: options no config field holds: {options - cfg - where}"
        assert cfg | where <= options | FLOW_ONLY.get(stage, set()), \
            f"{stage}: fields no option sets: {(cfg | where) - options}"


def test_the_flow_takes_the_config_and_its_paths():
    from flows.molecules import molecules_flow
    from flows.config.molecules import MoleculesPaths, MoleculesStageConfig

    for stage, (_command, flow, config, paths) in {**_stages(), "molecules": (
            None, molecules_flow, MoleculesStageConfig, MoleculesPaths)}.items():
        params = list(inspect.signature(flow.fn).parameters)
        if stage in PATHS_ARGUMENT:
            assert params == ["paths", "cfg"], stage
            assert paths.__name__ in str(inspect.signature(flow.fn).parameters["paths"].annotation), stage
        else:
            assert params == [f.name for f in dataclasses.fields(paths)] + ["cfg"], stage
        assert config.__name__ in str(inspect.signature(flow.fn).parameters["cfg"].annotation), stage


def test_params_yaml_groups_are_config_fields_and_valid():
    """params.yaml's stage groups (``train:``, ``evaluate:``, ``ingest:``, ``select:``; ``audit:`` and
    ``experiment:`` when there are) name fields of the stage's config, and the configs it states are built and checked (the defaults of
    dvc.yaml's commands where the file says nothing)."""
    from flows.config.evaluate import EvaluateStageConfig
    from flows.config.select import SelectStageConfig
    from flows.config.train import TrainStageConfig
    from flows.config.ingest import IngestStageConfig

    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    for group, (_command, _flow, config, _paths) in _stages().items():
        names = {f.name for f in dataclasses.fields(config)}
        keys = set(params.get(group) or {})
        assert keys <= names, f"params.yaml {group}: keys no config field holds: {keys - names}"
        assert isinstance(config.from_params(params), config), group
    assert {"train", "evaluate", "ingest", "select"} <= set(params)
    ingest = IngestStageConfig.from_params(params)
    assert (ingest.features, ingest.invalid, ingest.task) == (params["ingest"]["features"],
                                                              params["ingest"]["invalid"], params["base"]["task"])
    train = TrainStageConfig.from_params(params)
    assert (train.seed, train.weights, train.epochs) == (params["base"]["seed"], params["base"]["weights"],
                                                         params["train"]["epochs"])
    assert EvaluateStageConfig.from_params(params).sweep_epochs == params["evaluate"]["sweep_epochs"]
    select = SelectStageConfig.from_params(params)
    assert (select.seed, select.depth, select.method, select.restarts) == (
        params["base"]["seed"], params["base"]["depth"], params["select"]["method"], params["select"]["restarts"])
    assert select.count is None and select.fraction == params["select"]["fraction"]  # count 0: the fraction


def test_a_bad_option_is_refused_when_the_config_is_built():
    import pytest

    from flows.config.evaluate import EvaluateStageConfig
    from flows.config.select import SelectStageConfig
    from flows.config.train import TrainStageConfig
    from flows.config.experiment import ExperimentStageConfig
    from flows.config.ingest import IngestStageConfig
    from tmdlib import InputError

    for config, bad, match in ((TrainStageConfig, {"weighting": "x"}, "--weighting"),
                               (TrainStageConfig, {"loss": "nope"}, "--loss"),
                               (TrainStageConfig, {"epochs": -1}, "--epochs"),
                               (TrainStageConfig, {"lipschitz_target": -1}, "--lipschitz-target"),
                               (TrainStageConfig, {"lr": "fast"}, "--lr"),
                               (EvaluateStageConfig, {"fractions": "0.1,2"}, "--fractions"),
                               (EvaluateStageConfig, {"sweep_epochs": -1}, "--sweep-epochs"),
                               (EvaluateStageConfig, {"sample": -3}, "--sample"),
                               (IngestStageConfig, {"features": "x"}, "--features"),
                               (IngestStageConfig, {"task": "ranking"}, "--task"),
                               (IngestStageConfig, {"standin": "x"}, "--standin"),
                               (IngestStageConfig, {"invalid": "x"}, "--invalid"),
                               (IngestStageConfig, {"sources": {"X": {"task": "ranking"}}}, "ingest.sources.X.task"),
                               (ExperimentStageConfig, {"profile": "nope"}, "unknown profile"),
                               (ExperimentStageConfig, {"trials": 0}, "--trials"),
                               (ExperimentStageConfig, {"methods": "tmd,nope"}, "--methods"),
                               (ExperimentStageConfig, {"torch_threads": 0}, "--torch-threads"),
                               (ExperimentStageConfig, {"device": "tpu"}, "--device"),
                               (SelectStageConfig, {"fraction": None}, "--fraction or --count"),
                               (SelectStageConfig, {"method": "nope"}, "--method"),
                               (SelectStageConfig, {"next_strategy": "nope"}, "--next"),
                               (SelectStageConfig, {"goal": "nope"}, "--goal"),
                               (SelectStageConfig, {"engine": "nope"}, "--engine"),
                               (SelectStageConfig, {"weights": "1,2,3,4,5,6"}, "--depth/--weights"),
                               (SelectStageConfig, {"part_size": "1"}, "--part-size"),
                               (SelectStageConfig, {"max_pairs": "lots"}, "--max-pairs")):
        with pytest.raises(InputError, match=match):
            config.from_options(bad)


def test_dvc_yaml_commands_set_config_fields():
    """Each ``--option`` dvc.yaml's train / evaluate / ingest / audit commands pass is a field of the stage's config
    or paths (the experiment is no DVC stage)."""
    import re

    from flows.config import RENAMED

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    for stage, (_command, _flow, config, paths) in _stages().items():
        names = ({f.name for f in dataclasses.fields(config)} | {f.name for f in dataclasses.fields(paths)}
                 | CLI_ONLY.get(stage, set()))
        for name in (stage, f"{stage}_nodes"):
            if name not in stages:
                assert name != stage or stage == "experiment", f"dvc.yaml has no stage {stage}"
                continue
            flags = {RENAMED.get(f, f) for f in (f[2:].replace("-", "_")
                                                 for f in re.findall(r"--[a-z][a-z-]*", stages[name]["do"]["cmd"]))}
            assert flags <= names, f"dvc.yaml {name}: options no config field holds: {flags - names}"


def test_each_option_help_comes_from_its_config():
    """The help of every command-line option is its field's entry in the config's (or paths') ``HELP``: one text,
    which ``--help`` and ``tmdsub params`` both show, and every field of a config has one."""
    from flows.config import RENAMED

    for stage, (command, _flow, config, paths) in _stages().items():
        for cls in (config, paths):
            missing = {f.name for f in dataclasses.fields(cls)} - {k for k, v in cls.HELP.items() if v}
            assert not missing, f"{stage}: {cls.__name__} fields without HELP: {missing}"
        for name, parameter in inspect.signature(command).parameters.items():
            field = RENAMED.get(name, name)
            owner = config if field in config.HELP else paths if field in paths.HELP else None
            if owner is None:
                assert name in CLI_ONLY.get(stage, set()), f"{stage}: option --{name} has no HELP entry"
                continue
            assert parameter.default.help == owner.HELP[field], f"{stage}: --{name}'s help is not {owner.__name__}.HELP"


def test_params_command_documents_params_yaml():
    """``tmdsub params`` documents every key of params.yaml's stage groups from the stage's config: the key, the value
    the stage gets and the field's help."""
    from flows.cli import STAGE_CONFIGS, params_lines

    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    stages = _stages()
    assert set(STAGE_CONFIGS) == set(stages)
    for stage, (_command, _flow, config, _paths) in stages.items():
        text = "\n".join(params_lines(stage, params))
        for key in params.get(stage) or {}:
            line = next((ln for ln in text.splitlines() if ln.startswith(f"  {key} = ")), None)
            assert line is not None and f"[{stage}.{key}]" in line and config.HELP[key] in line, (stage, key, line)
    # a value another group sets is said to come from it (dvc.yaml's commands pass base.seed, select.engine, ...)
    for stage, field, where in (("select", "seed", "base.seed"), ("tmd", "engine", "select.engine"),
                                ("evaluate", "device", "train.device"), ("select", "audit", "labels.audit")):
        line = next(ln for ln in params_lines(stage, params) if ln.startswith(f"  {field} = "))
        assert f"[{where}]" in line, line
