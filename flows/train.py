"""Train flow: a GIN on the selected (τ-weighted) graphs with the imported labels only.

Run as ``tmdsub train ...`` (:func:`train_command`).  Outputs ``model.pt`` (a state dict) and
``train.json`` (config, device, per-epoch losses, the stability constant c and its per-layer factors, and the
MLflow run id and model); the run is logged to MLflow (``tasks.tracking.tracking_uri()``) as ``train@<DATASET>``
(``train_nodes@<DATASET>`` with ``--nodes``): the per-epoch loss while training goes, the graph store, labels and
selection as dataset inputs, and the GIN as an MLflow model, registered as ``tmdsub-<DATASET>``
(:mod:`tasks.registry`; node-subsampled models are logged, not registered).
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Optional

import numpy as np
import typer
from prefect import flow

from tasks.graphs import check_same_store, load_graph_store, store_content_hash
from tasks.io import sha256_file
from tasks.registry import log_gin_model
from tasks.tracking import graph_store_dataset, labels_dataset, log_datasets, selection_dataset, tracking_uri
from tasks.train import (LiveMetric, dataset_name, log_run, node_subsets_for, open_run, positions, read_labels,
                         read_nodes, read_selection, save_model, set_torch_threads, train_model, write_model)
from tmdlib import InputError


def resolve_config(dataset: str, epochs: int, hidden: int | None, layers: int, batch_size: int | None, lr: float,
                   seed: int, device: str, pool: str, eta: float, bias: bool, lipschitz_budget=None,
                   lipschitz_mode=None) -> dict:
    """Training hyper-parameters with the paper's per-dataset defaults (B.2) filled in; checked.

    ``lipschitz_budget`` (certified mode, :mod:`tmdlib.torch.certified`): a positive number (per weight matrix) or a
    comma list of per-matrix budgets; ``None``, ``0``, ``"none"``, ``"null"`` → unconstrained.  It is added to
    the config only when set, so unconstrained configs are unchanged.  ``lipschitz_mode`` (``"ball"``, the
    default, or ``"orthogonal"``: MaxMin GIN with orthonormal matrices, the budget is c itself) is added only
    when it is ``"orthogonal"`` and a budget is set.
    """
    from tmdlib.torch.certified import parse_budget, parse_mode
    from tmdlib.torch.gin import default_hyperparameters

    d = default_hyperparameters(dataset)
    cfg = {"hidden": int(hidden or d["hidden"]), "layers": int(layers), "pool": pool, "eta": float(eta),
           "bias": bool(bias), "lr": float(lr), "batch_size": int(batch_size or d["batch_size"]),
           "epochs": int(epochs), "seed": int(seed), "device": device}
    problems = [f"--{k.replace('_', '-')} must be >= 1" for k in ("hidden", "layers", "batch_size") if cfg[k] < 1]
    if cfg["epochs"] < 0:
        problems.append("--epochs must be >= 0")
    if not cfg["lr"] > 0:
        problems.append("--lr must be > 0")
    if not cfg["eta"] > 0:
        problems.append("--eta must be > 0")
    if pool not in ("add", "mean"):
        problems.append("--pool must be 'add' or 'mean'")
    if device != "auto" and not (device == "cpu" or device.startswith("cuda")):
        problems.append("--device must be auto, cpu or cuda[:N]")
    try:
        budget = parse_budget(lipschitz_budget)
    except ValueError as err:
        problems.append(f"--lipschitz-budget: {err}")
        budget = None
    try:
        mode = parse_mode(lipschitz_mode)
    except ValueError as err:
        problems.append(f"--lipschitz-mode: {err}")
        mode = "ball"
    if budget is not None:
        cfg["lipschitz_budget"] = budget
        if mode == "orthogonal":
            cfg["lipschitz_mode"] = mode
            if isinstance(budget, list):
                problems.append("--lipschitz-mode orthogonal takes one budget (the constant c), not a list")
            if cfg["hidden"] % 2:
                problems.append("--lipschitz-mode orthogonal needs an even --hidden (MaxMin pairs units)")
        if isinstance(budget, list) and len(budget) != 2 * cfg["layers"] + 1 and mode == "ball":
            problems.append(f"--lipschitz-budget: {len(budget)} per-matrix budgets for {2 * cfg['layers'] + 1} "
                            "weight matrices (2 per GIN layer + readout)")
        if cfg["bias"]:
            problems.append("--lipschitz-budget needs --no-bias (phi(0) = 0 for the TMD stability bound)")
        if pool != "add":
            problems.append("--lipschitz-budget needs --pool add (sum readout for the TMD stability bound)")
    if problems:
        raise InputError(None, "; ".join(problems))
    return cfg


def parse_target(target) -> float | None:
    """``--lipschitz-target`` as a positive float, or None when unset / 0; :class:`InputError` otherwise."""
    if target is None or (isinstance(target, str) and target.strip().lower() in ("", "0", "none", "off")):
        return None
    try:
        t = float(target)
    except (TypeError, ValueError):
        raise InputError(None, f"--lipschitz-target must be a number of nats (0 = off), got {target!r}") from None
    if t == 0:
        return None
    if not (t > 0 and math.isfinite(t)):
        raise InputError(None, f"--lipschitz-target must be a positive number of nats (0 = off), got {target!r}")
    return t


def target_budget(target, epsilon, selection: str, layers: int, eta: float, weights, mode) -> float | None:
    """The budget that makes the certificate c·ε equal ``target`` nats for a selection with medoid objective ε.

    ``None`` when ``target`` is unset / 0.  ``"orthogonal"`` mode: the budget is c = target/ε; ``"ball"``: the
    per-matrix β with β^(2·layers+1)·κ = target/ε (:func:`tmdlib.torch.certified.budget_for_target`).  Raises
    :class:`InputError` for a negative / non-numeric target or a selection without ε.
    """
    from tmdlib.torch.certified import budget_for_target, parse_mode

    t = parse_target(target)
    if t is None:
        return None
    if epsilon is None or not float(epsilon) > 0:
        raise InputError(selection, "--lipschitz-target needs the selection's epsilon_mean (a TMD medoid objective); "
                                    "this selection has none: set --lipschitz-budget instead")
    c = t / float(epsilon)
    return c if parse_mode(mode) == "orthogonal" else budget_for_target(layers, c, eta, weights)


@flow(name="train", log_prints=True)
def train_flow(graphs: str, selection: str, labels: str, model_out: str, info_out: str,
               labels_meta: str | None = None, nodes: str | None = None, epochs: int = 100,
               hidden: int | None = None, layers: int = 3, batch_size: int | None = None, lr: float = 0.01,
               seed: int = 0, device: str = "auto", pool: str = "add", eta: float = 1.0, bias: bool = False,
               weights: str = "pascal", torch_threads: int = 1, experiment: str = "tmdsub",
               log_mlflow: bool = True, lipschitz_budget=None, lipschitz_mode=None,
               lipschitz_target: float | str | None = None) -> dict:
    """Train on the coreset graphs (τ-weighted BCE), optionally on their node-subsampled subgraphs.

    ``lipschitz_budget`` switches to certified mode (:mod:`tmdlib.torch.certified`): every weight matrix is kept at
    spectral norm ≤ the budget, and ``lipschitz.c`` is the certified constant (``c_measured`` next to it).
    ``lipschitz_mode="orthogonal"``: a MaxMin GIN with orthonormal matrices whose readout scale is the budget c.
    ``lipschitz_target`` > 0 (nats) sets the budget from the selection instead: c = target / ε, with ε the selection's
    ``epsilon_mean``, so the certificate c·ε equals the target whatever the dataset (``"ball"``: β = c^(1/(2·layers+1)));
    it overrides ``lipschitz_budget``.
    Returns ``train.json``'s content; when logged, both hold ``mlflow`` (``run_id``, ``tracking_uri`` redacted,
    ``experiment_id``).
    """
    from mlflow import MlflowClient

    from tmdlib.torch.certified import stability_constant
    from tmdlib.torch.gin import alive_units, model_config
    from tmdlib.torch.pyg import dataset_to_pyg

    set_torch_threads(torch_threads)
    name = dataset_name(graphs)
    target = parse_target(lipschitz_target)  # checked with the other parameters, before any file is read
    cfg = resolve_config(name, epochs, hidden, layers, batch_size, lr, seed, device, pool, eta, bias,
                         lipschitz_budget, lipschitz_mode)
    ds = load_graph_store(graphs)
    sel = read_selection(selection)
    if target is not None:  # the budget that makes c·ε = target for this selection's ε
        cfg = resolve_config(name, epochs, hidden, layers, batch_size, lr, seed, device, pool, eta, bias,
                             target_budget(target, sel.get("epsilon_mean"), selection, layers, eta, weights,
                                           lipschitz_mode), lipschitz_mode)
    check_same_store(selection, sel, graphs, lambda: store_content_hash(ds), "selection")
    label_map, label_meta = read_labels(labels, labels_meta)
    med_ids = sel["medoids"]
    pos = positions(med_ids, ds.graph_ids, selection, "medoids")
    missing = [int(g) for g in med_ids if int(g) not in label_map]
    if missing:
        raise InputError(labels, f"{len(missing)} selected graphs have no label, e.g. graph ids {missing[:10]}")
    y = np.asarray([label_map[int(g)] for g in med_ids])
    subsets, node_eps = (None, None)
    if nodes:
        subsets, node_eps = node_subsets_for(read_nodes(nodes), med_ids, nodes)
    data = dataset_to_pyg(ds, positions=pos, y=y, weights=sel["tau"], node_subsets=subsets)
    stage = f"{'train_nodes' if nodes else 'train'}@{name}"  # the DVC stage (and MLflow run) name
    params = {**{f"train.{k}": v for k, v in cfg.items()}, "dataset": name, "weights": weights,
              "selection.method": sel.get("method"), "selection.fraction": sel.get("fraction"),
              "selection.k": len(med_ids), "node_subsampling": bool(nodes),
              "labels_source": label_meta.get("source", "unknown"), "torch_threads": torch_threads,
              "certified": cfg.get("lipschitz_budget") is not None,
              "train.lipschitz_budget": cfg.get("lipschitz_budget"),
              "train.lipschitz_mode": cfg.get("lipschitz_mode", "ball"),
              "train.lipschitz_target": target or 0.0}
    inputs = [p for p in (graphs, selection, labels, nodes) if p]
    # the run exists before training (the loss is logged as it goes) and before train.json is written, so
    # train.json names it (``mlflow.run_id``: the audit reads it)
    with open_run("train", params, inputs, experiment, enabled=log_mlflow, run_name=stage,
                  extra_tags={"labels_source": params["labels_source"]}) as run:
        live = None
        if run:
            log_datasets(run["run_id"], [graph_store_dataset(graphs, ds, name),
                                         labels_dataset(labels, label_map, label_meta, name),
                                         selection_dataset(selection, sel, name)], "training")
            live = LiveMetric(run["run_id"], "train_loss", last_step=cfg["epochs"] - 1)
        t0 = time.perf_counter()
        model, losses, used = train_model(data, cfg, ds.num_features, on_loss=live)
        seconds = time.perf_counter() - t0
        if live:
            live.flush()
        lip = stability_constant(model, cfg.get("lipschitz_budget"), M=1.0, weights=weights,
                                 mode=cfg.get("lipschitz_mode", "ball"))
        alive = alive_units(model, data)
        info = {
            "dataset": name, "graphs": graphs, "selection": selection, "labels": labels,
            "labels_source": label_meta.get("source", "unknown"), "labels_meta": label_meta,
            "labels_used": int(len(med_ids)), "labels_available": int(len(label_map)),
            "selection_method": sel.get("method"), "fraction": sel.get("fraction"), "k": int(len(med_ids)),
            "tau_sum": float(sel["tau"].sum()), "epsilon": sel["epsilon_mean"],
            "node_subsampling": bool(nodes), "nodes": nodes,
            "node_epsilon_mean": None if node_eps is None else float(np.dot(sel["tau"], node_eps) / sel["tau"].sum()),
            "config": cfg, "model": model_config(model), "device": used, "torch_threads": int(torch_threads),
            "losses": losses,
            "final_loss": losses[-1] if losses else None, "train_seconds": round(seconds, 3),
            "lipschitz": {**lip, "depth": cfg["layers"] + 1, "weights": weights,
                          "loss": "BCE with logits (M = 1)"},
            "certified": lip["certified"], "c_certified": lip["c_certified"],
            "lipschitz_target": target,
            # hidden units of each layer non-zero on some training node; a 0 = a collapsed (dead) network
            "alive_units": alive, "collapsed": min(alive) == 0,
        }
        metrics = {"final_loss": info["final_loss"], "c": lip["c"], "collapsed": info["collapsed"],
                   "alive_units_min": min(alive), "kappa": lip["kappa"],
                   "bound_valid": lip["valid"], "train_seconds": seconds, "certified": lip["certified"],
                   "c_measured": lip["c_measured"],
                   **({"c_certified": lip["c_certified"], "constraint_ok": lip["constraint_ok"],
                       **{f"spectral_norm.{n}": v for n, v in zip(lip["matrices"], lip["spectral_norms"])}}
                      if lip["certified"] else {}),
                   **{f"phi.{i + 1}": v for i, v in enumerate(lip["per_layer"][:-1])},
                   "phi.readout": lip["readout"]}
        if info["node_epsilon_mean"] is not None:
            metrics["node_epsilon_mean"] = info["node_epsilon_mean"]
        save_model(model, model_out)  # model.pt first: the MLflow model version names its sha256
        if run:
            MlflowClient(tracking_uri=tracking_uri()).set_tag(run["run_id"], "device", used)
            sha = sha256_file(model_out)
            desc = (f"GIN ({cfg['layers']} layers, hidden {cfg['hidden']}, {cfg['pool']} readout"
                    f"{', certified budget ' + str(cfg['lipschitz_budget']) if lip['certified'] else ''}"
                    f"{' (orthogonal MaxMin)' if cfg.get('lipschitz_mode') == 'orthogonal' else ''}) trained by "
                    f"{stage} (run {run['run_id']}) on {len(med_ids)} coreset graphs with tau-weighted BCE; labels: "
                    f"{info['labels_source']}; stability constant c = {lip['c']:.4g}. Input: float32 (B, n, 1 + d + n) "
                    f"dense batch (node mask, {ds.num_features} features, adjacency), output: logits (B, 1) "
                    f"(tmdlib.torch.serving). Same weights as {model_out} (sha256 {sha}).")
            info["mlflow"] = {**run, "model": log_gin_model(
                run["run_id"], model, data, name, desc, register=not nodes,
                tags={"dataset": name, "stage": stage, "train_run_id": run["run_id"], "model_sha256": sha,
                      "labels_source": info["labels_source"], "certified": lip["certified"]})}
        info = write_model(None, model_out, info_out, info)  # model.pt is written above
        print(f"trained {name}: {len(med_ids)} graphs, {cfg['epochs']} epochs on {used}, final weighted loss "
              f"{info['final_loss'] if info['final_loss'] is not None else float('nan'):.4f}, c = {lip['c']:.4g}"
              + (f" (certified: budget {lip['lipschitz_budget']}, measured {lip['c_measured']:.4g}, constraint "
                 f"{'holds' if lip['constraint_ok'] else 'VIOLATED'})" if lip["certified"] else ""))
        if info["collapsed"]:
            print(f"WARNING: the trained GIN collapsed: layer {alive.index(0) + 1} has no unit that is non-zero on any "
                  f"training graph, so every graph gets the same output (alive units per layer: {alive}). Lower the "
                  f"learning rate (train.lr, now {cfg['lr']}) and retrain.", file=sys.stderr)
        if run:
            log_run("train", params, metrics, inputs, [info_out], experiment=experiment, run=run)
    return info


def train_command(
    graphs: Path = typer.Option(..., "--graphs", help="Graph-store Parquet (data/graphs/<DATASET>.parquet)."),
    selection: Path = typer.Option(..., "--selection", help="selection.json (train/test ids, medoids, tau, epsilon)."),
    labels: Path = typer.Option(..., "--labels", help="labels.csv (graph_id,y): the ONLY labels training reads."),
    model_out: Path = typer.Option(..., "--model-out", help="Output state dict (model.pt)."),
    info_out: Path = typer.Option(..., "--info-out", help="Output train.json (config, device, losses, c, per-layer Phi)."),
    labels_meta: Optional[Path] = typer.Option(None, "--labels-meta", help="labels.json (default: next to --labels)."),
    nodes: Optional[Path] = typer.Option(None, "--nodes", help="nodes.parquet: train on the induced subgraphs G[S]."),
    epochs: int = typer.Option(100, "--epochs", help="Training epochs."),
    hidden: Optional[int] = typer.Option(None, "--hidden", help="Hidden width (default 128 TU, 256 OGB)."),
    layers: int = typer.Option(3, "--layers", help="GIN layers (TMD depth = layers + 1)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Batch size (default 16 TU, 64 OGB)."),
    lr: float = typer.Option(0.01, "--lr", help="Adam learning rate."),
    seed: int = typer.Option(0, "--seed", help="Seed of the initialisation and the batch order."),
    device: str = typer.Option("auto", "--device", help="auto (cuda when present) | cpu | cuda[:N]."),
    pool: str = typer.Option("add", "--pool", help="Readout pooling: add (the guarantee needs it) | mean."),
    eta: float = typer.Option(1.0, "--eta", help="GIN neighbour weight eta (1 pairs with Pascal TMD weights)."),
    bias: bool = typer.Option(False, "--bias/--no-bias", help="Biases in the GIN MLPs (off: phi(0)=0, needed by the bound)."),
    weights: str = typer.Option("pascal", "--weights", help="TMD level weights the constant c is stated for."),
    lipschitz_budget: str = typer.Option("none", "--lipschitz-budget", help="Certified mode: spectral-norm budget of every weight matrix (projected after each step), c = budget^(2*layers+1); 0 or none = unconstrained."),
    lipschitz_target: float = typer.Option(0.0, "--lipschitz-target", help="Certified mode: the certificate c*eps to aim for, in nats (c = target / the selection's epsilon_mean); overrides --lipschitz-budget; 0 = off."),
    lipschitz_mode: str = typer.Option("ball", "--lipschitz-mode", help="Certified architecture: ball (ReLU GIN, budget per matrix) | orthogonal (MaxMin GIN, orthonormal matrices, the budget is c itself)."),
    torch_threads: int = typer.Option(1, "--torch-threads", help="CPU threads of torch (1: fastest for these small models, bit-reproducible)."),
    experiment: str = typer.Option("tmdsub", "--experiment", help="MLflow experiment name."),
    mlflow: bool = typer.Option(True, "--mlflow/--no-mlflow", help="Log the run to MLflow."),
) -> None:
    """Train a GIN on the selected graphs (tau-weighted BCE, paper B.2 hyper-parameters)."""
    try:
        info = train_flow(str(graphs), str(selection), str(labels), str(model_out), str(info_out),
                          labels_meta=str(labels_meta) if labels_meta else None,
                          nodes=str(nodes) if nodes else None, epochs=epochs, hidden=hidden, layers=layers,
                          batch_size=batch_size, lr=lr, seed=seed, device=device, pool=pool, eta=eta, bias=bias,
                          weights=weights, torch_threads=torch_threads, experiment=experiment, log_mlflow=mlflow,
                          lipschitz_budget=lipschitz_budget, lipschitz_mode=lipschitz_mode,
                          lipschitz_target=lipschitz_target)
    except InputError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2)
    typer.echo(f"model -> {model_out}, info -> {info_out} (c = {info['lipschitz']['c']:.4g}"
               f"{' certified' if info.get('certified') else ''}, device {info['device']})")
    if "mlflow" in info:
        typer.echo(f"mlflow run {info['mlflow']['run_id']} at {info['mlflow']['tracking_uri']}")
