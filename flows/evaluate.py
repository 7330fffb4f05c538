"""Evaluate flow: test metric, and the loss guarantees of the selection measured next to their bounds.

Run as ``tmdsub evaluate ...`` (:func:`evaluate_command`).  For the trained coreset model it reports
Lemma 3.2 (observed |weighted coreset loss − full training loss| vs c·ε), Corollary 3.3 (excess training
loss over a model trained on the whole training set vs 2cε) and, with ``--nodes``, Corollary 4.1
(mean ε_i, c·mean ε_i, observed).  With ``--fractions`` and ``--matrix`` it re-runs a k-medoids coreset per
fraction, trains a quick model on each and plots bound vs observed gap (``bound_vs_gap.png``).
Evaluation labels are the dataset's own (benchmark mode).  Everything is logged to MLflow from this process.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import numpy as np
import typer
from prefect import flow

from tasks.evaluate import (bound_point, losses_of, parse_fractions, plot_bound_vs_gap, score_on,
                            sweep_point, write_metrics)
from tasks.graphs import check_same_store, load_graph_store, load_matrix, matrix_path, store_content_hash
from tasks.registry import tag_evaluation
from tasks.tracking import graph_store_dataset, log_datasets, selection_dataset
from tasks.train import (BENCHMARK_EVAL, dataset_name, load_model, log_run, node_subsets_for, positions, read_json,
                         read_nodes, read_selection, set_torch_threads, start_run, train_model)
from tmdlib import InputError
from tmdlib.datasets import metric_for
from tmdlib.reporting.verdict import verdict_lines


def _tmd_setting(tmd_meta: str | None, layers: int, weights: str) -> tuple[int, object, list, dict]:
    """(depth, weights, problems, meta) of the TMD the bound is stated with; the matrix's meta.json wins."""
    problems, meta = [], {}
    depth, w = layers + 1, weights
    if tmd_meta:
        meta = read_json(tmd_meta, "TMD meta file")
        depth = int(meta.get("depth", depth))
        w = meta.get("weights", w)
    if depth != layers + 1:
        problems.append(f"TMD depth {depth} != GIN layers + 1 = {layers + 1}")
    return depth, w, problems, meta


@flow(name="evaluate", log_prints=True)
def evaluate_flow(graphs: str, selection: str, model: str, train_info: str, metrics_out: str, plot_out: str,
                  matrix: str | None = None, nodes: str | None = None, tmd_meta: str | None = None,
                  fractions: str | list | None = None, sweep_epochs: int = 20, full_epochs: int | None = None,
                  seed: int | None = None, device: str = "auto", torch_threads: int = 1,
                  experiment: str = "tmdsub", log_mlflow: bool = True, sample: int = 0) -> dict:
    """Measure the guarantees of the trained coreset model; returns ``metrics.json``'s content (+ ``mlflow``).

    ``sample > 0`` (pools too large to score whole, e.g. MOSES): the coreset graphs are scored exactly, the
    full training loss is estimated on a seeded uniform sample of ``sample`` training graphs (with its standard
    error), the full-data reference model is trained on that sample (marked so), the test set is sampled to at
    most ``sample`` graphs, and the matrix checks and the sweep are skipped.
    """
    from tmdlib.guarantees import bounds
    from tmdlib.torch.certified import stability_constant
    from tmdlib.torch.pyg import dataset_to_pyg

    t0 = time.perf_counter()
    set_torch_threads(torch_threads)
    fr = parse_fractions(",".join(map(str, fractions)) if isinstance(fractions, (list, tuple)) else fractions)
    info = read_json(train_info, "train info")
    if "config" not in info or "model" not in info:
        raise InputError(train_info, "not a train.json (needs 'config' and 'model')")
    cfg = dict(info["config"], device=device)
    budget = cfg.get("lipschitz_budget")  # certified mode: c is the certified constant of this budget
    mode = cfg.get("lipschitz_mode", "ball")
    seed = int(cfg["seed"] if seed is None else seed)
    depth, tmd_weights, tmd_problems, tmd_meta_doc = _tmd_setting(tmd_meta, int(cfg["layers"]),
                                                    info.get("lipschitz", {}).get("weights", "pascal"))
    name = dataset_name(graphs)
    metric = metric_for(name)
    ds = load_graph_store(graphs)
    sel = read_selection(selection)
    store_hash = store_content_hash(ds)  # the selection and the matrix must both belong to this store
    check_same_store(selection, sel, graphs, store_hash, "selection")
    if tmd_meta:
        check_same_store(tmd_meta, tmd_meta_doc, graphs, store_hash, "TMD matrix")
    train_pos = positions(sel["train_ids"], ds.graph_ids, selection, "train_ids")
    test_pos = positions(sel["test_ids"], ds.graph_ids, selection, "test_ids")
    med_pos = positions(sel["medoids"], ds.graph_ids, selection, "medoids")
    in_train = {int(p): k for k, p in enumerate(train_pos)}
    subset = np.asarray([in_train[int(p)] for p in med_pos], dtype=np.int64)
    tau = sel["tau"]
    n_train = int(len(train_pos))
    sample_idx, sample_info = None, None
    if sample and sample < 0:
        raise InputError(None, f"--sample must be >= 0, got {sample}")
    if sample and n_train > sample:
        rng = np.random.default_rng(seed)
        pick = np.sort(rng.choice(n_train, size=int(sample), replace=False))
        keep = np.union1d(subset, pick)  # positions into train_pos: the coreset graphs and the sample
        sample_idx, subset, train_pos = np.searchsorted(keep, pick), np.searchsorted(keep, subset), train_pos[keep]
        n_test_all = int(len(test_pos))
        if n_test_all > sample:
            test_pos = np.sort(rng.choice(test_pos, size=int(sample), replace=False))
        sample_info = {"train_sample": int(sample), "n_train": n_train, "test_sample": int(len(test_pos)),
                       "n_test": n_test_all, "seed": seed,
                       "note": "full training loss estimated on a uniform sample (full_stderr); the full-data "
                               "reference model is trained on that sample; no matrix check, no sweep"}
        matrix = None
    if ds.y is None or np.isnan(ds.y[train_pos]).any():
        raise InputError(graphs, "the bound evaluation is a benchmark measurement: it needs the dataset's label "
                                 "of every training graph, and some are missing")
    y_train = ds.y[train_pos]
    test_pos = test_pos[~np.isnan(ds.y[test_pos])]
    y_test = ds.y[test_pos]
    train_data = dataset_to_pyg(ds, positions=train_pos, y=y_train)
    test_data = dataset_to_pyg(ds, positions=test_pos, y=y_test)

    net = load_model(model, info["model"])

    # epsilon: the selection's, checked against the TMD matrix when given
    D_train, eps_matrix, tau_match, assignment = None, None, None, None
    matrix = matrix_path(matrix) if sample_idx is None else None  # None: scalable engine or sampled pool
    if matrix:
        D_train = load_matrix(matrix, len(ds))[np.ix_(train_pos, train_pos)]
        eps_matrix = bounds.medoid_objective(D_train, subset)
        tau_match = bool(np.array_equal(np.rint(tau).astype(np.int64), bounds.cluster_sizes(D_train, subset)))
        if tau_match:  # nearest medoid, ties to the first listed one (as bounds.cluster_sizes)
            near = np.argmin(D_train[:, subset], axis=1)
            near[subset] = np.arange(subset.size)
            assignment = subset[near]
    epsilon = sel["epsilon_mean"] if sel["epsilon_mean"] is not None else eps_matrix  # Lemma 3.2's mean ε
    eps_source = "selection" if sel["epsilon_mean"] is not None else ("matrix" if eps_matrix is not None else None)

    # reference: a model trained on every training graph (benchmark labels), same hyper-parameters
    full_cfg = dict(cfg, epochs=int(full_epochs if full_epochs is not None else cfg["epochs"]))
    ref_data = train_data if sample_idx is None else [train_data[i] for i in sample_idx]
    full_net, full_curve, used = train_model(ref_data, full_cfg, ds.num_features)
    full_L = losses_of(full_net, train_data, y_train)
    c_full = stability_constant(full_net, budget, 1.0, tmd_weights, mode=mode)["c"]
    ref_loss = float(full_L.mean() if sample_idx is None else full_L[sample_idx].mean())

    main = bound_point(net, train_data, y_train, subset, tau, epsilon, ref_loss, c_full, tmd_weights,
                       lipschitz_budget=budget, assignment=assignment, sample=sample_idx, n_train=n_train,
                       lipschitz_mode=mode)
    full_gap = bounds.coreset_gap(full_L, subset, tau, sample=sample_idx, n=n_train)
    main.update({
        "fraction": sel.get("fraction"), "k": int(len(subset)), "epsilon_source": eps_source,
        "epsilon_matrix": eps_matrix, "tau_matches_tmd_assignment": tau_match,
        # Lemma 3.2 is proven for tau = nearest-medoid cluster sizes (checked when the matrix is given)
        "lemma_applies": bool(abs(float(np.sum(tau)) - n_train) < 1e-6 and tau_match is not False),
        "c_full_model": c_full, "full_model_gap_observed": full_gap["gap"],
        "full_model_c_epsilon": None if epsilon is None else bounds.lemma_bound(c_full, epsilon),
        "depth": depth, "weights": tmd_weights,
    })
    if tmd_problems:
        main["valid"] = False
        main["conditions"] = main["conditions"] + tmd_problems

    # node subsampling (Corollary 4.1), over the selected graphs with weights tau
    node_metrics = None
    if nodes:
        subsets, eps_i = node_subsets_for(read_nodes(nodes), sel["medoids"], nodes)
        y_med = ds.y[med_pos]
        data_sub = dataset_to_pyg(ds, positions=med_pos, y=y_med, node_subsets=subsets)
        data_whole = dataset_to_pyg(ds, positions=med_pos, y=y_med, weights=tau)
        L_whole, L_sub = losses_of(net, data_whole, y_med), losses_of(net, data_sub, y_med)
        ng = bounds.node_gap(L_whole, L_sub, weights=tau)
        nb = bounds.node_bounds(main["c"], eps_i, weights=tau)
        viol = int(np.sum(np.abs(L_sub - L_whole) > main["c"] * eps_i * (1 + 1e-9) + 1e-12))
        ref_net, _, _ = train_model(data_whole, cfg, ds.num_features)
        ref_L = losses_of(ref_net, data_whole, y_med)
        c_node_class = max(main["c"], stability_constant(ref_net, budget, 1.0, tmd_weights, mode=mode)["c"])
        w = tau / tau.sum()
        excess = bounds.excess_loss(float(np.dot(w, L_whole)), float(np.dot(w, ref_L)))
        node_metrics = {
            "epsilon_mean": nb["epsilon_mean"], "c": main["c"], "bound": nb["bound"], "gap_observed": ng["gap"],
            "mean_abs_observed": ng["mean_abs"], "max_abs_observed": ng["max_abs"], "per_graph_violations": viol,
            "lemma_holds": bool(ng["gap"] <= nb["bound"] * (1 + 1e-9) + 1e-12),
            "reference": "model trained on the same selected graphs without node subsampling",
            "excess_loss": excess, "c_class": c_node_class,
            "erm_bound": bounds.erm_bound(c_node_class, nb["epsilon_mean"]),
        }
        node_metrics["corollary_holds"] = bool(excess <= node_metrics["erm_bound"] * (1 + 1e-9) + 1e-12)
        if epsilon is not None:
            # graph coreset of subgraphs vs full-data model: 2c(eps + sum_{i in I} tau_i eps_i / n)
            comb = epsilon + float(np.dot(tau, eps_i)) / n_train
            main["erm_bound_with_nodes"] = bounds.erm_bound(main["c_class"], comb)
            main["corollary_holds"] = bool(main["excess_loss"] <= main["erm_bound_with_nodes"] * (1 + 1e-9) + 1e-12)

    # sweep over fractions (quick models), then the plot
    sweep, sweep_note = [], None
    if fr and D_train is None:
        sweep_note = "no --matrix: sweep skipped"
    elif fr:
        scfg = dict(cfg, epochs=int(sweep_epochs), seed=seed)
        if scfg["epochs"] == full_cfg["epochs"] and seed == int(cfg["seed"]):
            s_ref_loss, s_ref_c = float(full_L.mean()), c_full
        else:
            s_net, _, _ = train_model(train_data, scfg, ds.num_features)
            s_ref_loss = float(losses_of(s_net, train_data, y_train).mean())
            s_ref_c = stability_constant(s_net, budget, 1.0, tmd_weights, mode=mode)["c"]
        for f in fr:
            sweep.append(sweep_point(ds, train_pos, y_train, D_train, f, seed, scfg, train_data, s_ref_loss, s_ref_c,
                                     test_data, y_test, metric, tmd_weights))
    c_text = (f"certified GIN (budget {budget}), c = {main['c']:.3g}" if budget is not None
              else "GIN c = M·∏Φ·‖W_out‖")
    title = (f"{name}: {sel.get('method')} selection, {c_text}, TMD depth {depth}; "
             f"sweep models {sweep_epochs} epochs, labels: dataset (benchmark)")
    plot_bound_vs_gap(sweep, plot_out, title, main if main.get("epsilon") is not None else None)

    metrics = {
        "dataset": name, "method": sel.get("method"), "fraction": sel.get("fraction"), "k": int(len(subset)),
        "n_train": n_train, "n_test": int(len(test_pos)), "seed": seed, "sample": sample_info,
        "labels_for_evaluation": BENCHMARK_EVAL, "labels_for_training": info.get("labels_source", "unknown"),
        "labels_for_reference_and_sweep_training": BENCHMARK_EVAL,
        "test": {"metric": metric, "coreset_model": score_on(net, test_data, y_test, metric),
                 "full_model": score_on(full_net, test_data, y_test, metric), "n": int(len(test_pos)),
                 "full_model_trained_on": "all training graphs" if sample_idx is None else
                 f"a uniform sample of {len(sample_idx)} of {n_train} training graphs"},
        "certified": budget is not None, "lipschitz_budget": budget,
        "lipschitz_mode": mode if budget is not None else None,
        "bound": main, "nodes": node_metrics, "sweep": sweep, "sweep_note": sweep_note,
        "epochs": {"coreset_model": int(cfg["epochs"]), "full_model": full_cfg["epochs"],
                   "sweep": int(sweep_epochs) if sweep else None},
        "device": used, "seconds": round(time.perf_counter() - t0, 2),
    }
    write_metrics(metrics_out, metrics)
    b = main
    print(f"{name}: test {metric} {metrics['test']['coreset_model']} (full-data model "
          f"{metrics['test']['full_model']}); eps = {b.get('epsilon')}, c = {b['c']:.4g}"
          f"{' (certified)' if budget is not None else ''}, "
          f"gap {b['gap_observed']:.4g} <= c*eps {b.get('c_epsilon')}, excess {b['excess_loss']:.4g} <= "
          f"2c*eps {b.get('erm_bound')}")
    if log_mlflow:
        params = {"dataset": name, "selection.method": sel.get("method"), "selection.fraction": sel.get("fraction"),
                  "selection.k": len(subset), "fractions": ",".join(map(str, fr)), "sweep_epochs": sweep_epochs,
                  "full_epochs": full_cfg["epochs"], "seed": seed, "device": device, "torch_threads": torch_threads,
                  "tmd.depth": depth, "tmd.weights": str(tmd_weights), "node_subsampling": bool(nodes),
                  "certified": budget is not None, "lipschitz_budget": budget, "sample": sample}
        flat = {"test": {k: v for k, v in metrics["test"].items() if k != "metric"},
                "bound": {k: v for k, v in main.items() if k not in ("per_layer", "fraction", "k")},
                "nodes": node_metrics or {}}
        flat[f"test_{metric}"] = metrics["test"]["coreset_model"]
        steps = {f"sweep.{key}": [p.get(key) if p.get(key) is not None else float("nan") for p in sweep]
                 for key in ("fraction", "epsilon", "c_epsilon", "gap_observed", "erm_bound", "excess_loss")}
        inputs = [p for p in (graphs, selection, model, train_info, matrix, nodes) if p]
        run = start_run("evaluate", params, inputs, experiment, f"{'evaluate_nodes' if nodes else 'evaluate'}@{name}",
                        {"labels_for_evaluation": BENCHMARK_EVAL, "labels_for_training": metrics["labels_for_training"]})
        logged = (info.get("mlflow") or {}).get("model") or {}
        log_datasets(run["run_id"], [graph_store_dataset(graphs, ds, name), selection_dataset(selection, sel, name)],
                     "evaluation", model_ids=[logged["model_id"]] if logged.get("model_id") else None)
        metrics["mlflow"] = log_run("evaluate", params, flat, inputs, [metrics_out, plot_out], experiment=experiment,
                                    step_metrics=steps if sweep else None, run=run)
        # the registered model version of train.json gets its test metric (the scheduled run's champion rule)
        tag_evaluation(logged, metric, metrics["test"]["coreset_model"], run["run_id"])
    return metrics


def evaluate_command(
    graphs: Path = typer.Option(..., "--graphs", help="Graph-store Parquet (data/graphs/<DATASET>.parquet)."),
    selection: Path = typer.Option(..., "--selection", help="selection.json (train/test ids, medoids, tau, epsilon)."),
    model: Path = typer.Option(..., "--model", help="model.pt from `tmdsub train`."),
    train_info: Path = typer.Option(..., "--train-info", help="train.json from `tmdsub train` (model config)."),
    metrics_out: Path = typer.Option(..., "--metrics-out", help="Output metrics.json."),
    plot_out: Path = typer.Option(..., "--plot-out", help="Output bound_vs_gap.png."),
    matrix: Optional[Path] = typer.Option(None, "--matrix", help="TMD matrix.npy (graph-store order): checks epsilon, enables the sweep."),
    tmd_meta: Optional[Path] = typer.Option(None, "--tmd-meta", help="The matrix's meta.json (depth, weights) to check against the GIN."),
    nodes: Optional[Path] = typer.Option(None, "--nodes", help="nodes.parquet, if the model was trained on node-subsampled graphs."),
    fractions: str = typer.Option("", "--fractions", help="Comma list of coreset fractions for the bound-vs-gap sweep, e.g. 0.05,0.1,0.2,0.5."),
    sweep_epochs: int = typer.Option(20, "--sweep-epochs", help="Epochs of each sweep model."),
    full_epochs: Optional[int] = typer.Option(None, "--full-epochs", help="Epochs of the full-training-set model (default: as train.json)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the sweep's k-medoids and models (default: train.json's)."),
    device: str = typer.Option("auto", "--device", help="auto (cuda when present) | cpu | cuda[:N]."),
    torch_threads: int = typer.Option(1, "--torch-threads", help="CPU threads of torch (1: fastest for these small models, bit-reproducible)."),
    sample: int = typer.Option(0, "--sample", min=0, help="Large pools: score the coreset exactly and estimate the full training loss on a uniform sample of this many training graphs (0 = all)."),
    experiment: str = typer.Option("tmdsub", "--experiment", help="MLflow experiment name."),
    mlflow: bool = typer.Option(True, "--mlflow/--no-mlflow", help="Log the run to MLflow."),
) -> None:
    """Test metric and the loss guarantees (Lemma 3.2, Cor. 3.3/4.1): observed gaps next to their bounds."""
    try:
        if sweep_epochs < 0 or (full_epochs is not None and full_epochs < 0):
            raise InputError(None, "--sweep-epochs/--full-epochs must be >= 0")
        m = evaluate_flow(str(graphs), str(selection), str(model), str(train_info), str(metrics_out), str(plot_out),
                          matrix=str(matrix) if matrix else None, nodes=str(nodes) if nodes else None,
                          tmd_meta=str(tmd_meta) if tmd_meta else None, fractions=fractions,
                          sweep_epochs=sweep_epochs, full_epochs=full_epochs, seed=seed, device=device,
                          torch_threads=torch_threads, experiment=experiment, log_mlflow=mlflow, sample=sample)
    except InputError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2)
    b = m["bound"]
    typer.echo(verdict_lines(m)[0])
    typer.echo(f"test {m['test']['metric']}: {m['test']['coreset_model']} (full-data model {m['test']['full_model']})")
    typer.echo(f"Lemma 3.2: gap {b['gap_observed']:.4g} vs c*eps {b.get('c_epsilon')}; "
               f"Cor 3.3: excess {b['excess_loss']:.4g} vs 2c*eps {b.get('erm_bound')}")
    if m.get("certified"):
        typer.echo(f"certified: budget {m['lipschitz_budget']}, c = {b['c']:.4g} (measured {b['c_measured']:.4g}); "
                   f"label-consistent gap {b.get('gap_label_consistent')} <= c*eps; "
                   f"with labels: gap <= {b.get('bound_with_labels')}")
    typer.echo(f"metrics -> {metrics_out}, plot -> {plot_out}")
    if "mlflow" in m:
        typer.echo(f"mlflow run {m['mlflow']['run_id']} at {m['mlflow']['tracking_uri']}")
