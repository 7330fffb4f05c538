"""Experiment tasks: the paper's datasets x methods x fractions x trials grid (Jain et al., Section 5).

* :data:`PROFILES` -- ``quick`` (CI) and ``full`` (the paper's grid).
* :func:`prepare_dataset` -- once per dataset: the TMD, Feature and WL distance matrices of *all* graphs,
  cached on disk under ``<cache_dir>/<dataset>/`` (``reports/cache/``, ignored by git).  Every trial slices
  its training rows out of them (each of the three distances between two graphs does not depend on the
  other graphs, so slicing equals recomputing on the training set).
* :func:`run_cell` -- one Prefect task = one (dataset, kind, arch, method, trial) and a list of fractions:
  split, select (graphs: k-medoids on the sliced matrix / uniform random; nodes:
  :func:`tmdlib.nodes.subsample_nodes`), train (:func:`tmdlib.nn.train_gin`), evaluate on the full test
  graphs.  Workers load the dataset and the matrices once per process.
* :class:`ResultStore` -- the results CSV, rewritten atomically after each finished cell, keyed by
  :data:`KEY`; a rerun skips finished keys (resume).  One writer: the flow process (a lock file refuses a
  second concurrent writer).

Trial ``t`` uses ``t`` as the seed of the 80/20 split, of the selection (k-medoids restarts, random picks,
random walks) and of the network initialisation / batch order.  Selection never reads labels.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import time
from pathlib import Path

import numpy as np
from prefect import task

from tmdlib import GraphDataset, InputError

from . import io

GRAPH_METHODS = ("tmd", "random", "feature", "wl")
NODE_METHODS = ("tmd", "random", "rw", "kcore")
ARCHS = ("gin", "gin-wide-mean")
KINDS = ("graph", "node")
DATASETS = ("MUTAG", "COX2", "PROTEINS", "NCI1", "DD", "ogbg-molbace", "ogbg-molbbbp")

#: Columns of the results file; :data:`KEY` identifies a row (a rerun skips finished keys).
KEY = ("dataset", "kind", "method", "fraction", "trial", "arch", "epochs")
COLUMNS = KEY + ("metric", "value", "k", "n_train", "n_test", "epsilon", "final_loss", "train_seconds")

#: The paper's grid (``full``) and a CI-sized one (``quick``).  Epochs: the paper does not state them
#: (B.2 gives optimiser, lr, batch, width, pooling only); 100 is the pipeline's default (params.yaml).
PROFILES = {
    "quick": {
        "datasets": ["MUTAG"],
        "kinds": ["graph", "node"],
        "graph_methods": list(GRAPH_METHODS), "graph_fractions": [0.02, 0.05, 0.1],
        "node_methods": list(NODE_METHODS), "node_fractions": [0.5],
        "archs": ["gin"], "trials": 3, "graph_epochs": 20, "node_epochs": 5,
    },
    "full": {
        "datasets": list(DATASETS),
        "kinds": ["graph", "node"],
        "graph_methods": list(GRAPH_METHODS), "graph_fractions": [round(0.01 * i, 2) for i in range(1, 11)],
        "node_methods": list(NODE_METHODS), "node_fractions": [round(0.1 * i, 1) for i in range(1, 10)],
        "archs": list(ARCHS), "trials": 20, "graph_epochs": 100, "node_epochs": 100,
    },
}

DEPTH = 4            # TMD depth L = GIN layers + 1 (3 layers, paper B.2)
WEIGHTS = "pascal"   # TMD level weights (paper B.2)
TEST_FRACTION = 0.2  # 80/20 split (paper Section 5)
RESTARTS = 5         # k-medoids restarts (params.yaml select.restarts)
CACHE_VERSION = "exp-1"


def metric_for(dataset: str) -> str:
    """``rocauc`` for OGB, ``accuracy`` for TU (paper Section 5, following DosCond)."""
    from .train import metric_for_dataset

    return metric_for_dataset(dataset)


def arch_config(dataset: str, arch: str, epochs: int, seed: int, device: str = "cpu") -> dict:
    """``TrainConfig`` fields of ``arch``: ``gin`` is paper B.2 (3 layers, hidden 128 TU / 256 OGB, batch
    16 / 64, add pooling, Adam lr 0.01, no batch norm / dropout); ``gin-wide-mean`` is the paper's
    alternative architecture (Appendix "alternative GNN architecture": 2x hidden width, mean pooling)."""
    from tmdlib.nn import default_hyperparameters

    if arch not in ARCHS:
        raise InputError(None, f"unknown architecture {arch!r}: {', '.join(ARCHS)}")
    d = default_hyperparameters(dataset)
    wide = arch == "gin-wide-mean"
    return {"hidden": d["hidden"] * (2 if wide else 1), "layers": 3, "pool": "mean" if wide else "add",
            "eta": 1.0, "bias": False, "lr": 0.01, "batch_size": d["batch_size"], "epochs": int(epochs),
            "seed": int(seed), "device": device}


# ----------------------------------------------------------------------------------------------
# Per-dataset preparation (once) and per-process loading
# ----------------------------------------------------------------------------------------------
def load_dataset(name: str, raw_root: str) -> GraphDataset:
    """A built-in dataset read from its shipped raw files (``tmdlib.datasets.load_builtin``)."""
    from tmdlib.datasets import load_builtin

    return GraphDataset.from_arrow(load_builtin(name, raw_root))


def dataset_key(ds: GraphDataset) -> str:
    """Content hash of the graphs and of the distance parameters (names the cache files)."""
    h = hashlib.sha256(f"{CACHE_VERSION}|{DEPTH}|{WEIGHTS}".encode())
    for arr in (ds.x, ds.node_ptr, ds.edge_ptr, ds.src, ds.dst):
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()[:16]


def matrix_paths(cache_dir: str, name: str, key: str) -> dict:
    """Cache file of each distance matrix of dataset ``name``."""
    base = Path(cache_dir) / name
    return {m: str(base / f"{m}-{key}.npy") for m in ("tmd", "feature", "wl")}


@task(name="prepare-dataset", persist_result=False)
def prepare_dataset(name: str, raw_root: str, cache_dir: str, threads: int = 2) -> dict:
    """Distance matrices (TMD, Feature, WL) of all graphs of ``name``: computed once, cached as ``.npy``.

    Returns ``{"graphs", "key", "paths", "seconds": {matrix: seconds or 0 if cached}}``.
    """
    from tmdlib import baselines
    from tmdlib.tmd import tmd_matrix

    ds = load_dataset(name, raw_root)
    key = dataset_key(ds)
    paths = matrix_paths(cache_dir, name, key)
    compute = {"tmd": lambda: tmd_matrix(ds, DEPTH, WEIGHTS, num_threads=threads),
               "feature": lambda: baselines.feature_distance_matrix(ds),
               "wl": lambda: baselines.wl_distance_matrix(ds, iterations=3)}
    seconds = {}
    for m, path in paths.items():
        t0 = time.perf_counter()
        if not _readable_matrix(path, len(ds)):
            io.write_npy(path, np.asarray(compute[m](), dtype=np.float64))
            seconds[m] = round(time.perf_counter() - t0, 2)
        else:
            seconds[m] = 0.0
    io.write_json(Path(cache_dir) / name / f"meta-{key}.json",
                  {"dataset": name, "graphs": len(ds), "depth": DEPTH, "weights": WEIGHTS, "key": key,
                   "files": {m: Path(p).name for m, p in paths.items()}})
    return {"graphs": len(ds), "key": key, "paths": paths, "seconds": seconds}


def _readable_matrix(path: str, n: int) -> bool:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False).shape == (n, n)
    except (OSError, ValueError):
        return False


@functools.lru_cache(maxsize=4)
def _loaded(name: str, raw_root: str, paths_json: str) -> tuple:
    """(dataset, {matrix name: array}) -- once per worker process."""
    ds = load_dataset(name, raw_root)
    mats = {m: np.load(p, allow_pickle=False) for m, p in json.loads(paths_json).items()}
    return ds, mats


@functools.lru_cache(maxsize=64)
def _node_subsample(name: str, raw_root: str, paths_json: str, method: str, fraction: float, seed: int):
    """``tmdlib.nodes.subsample_nodes`` of every graph (tree norms computed once per method/fraction/seed)."""
    from tmdlib.nodes import subsample_nodes

    ds, _ = _loaded(name, raw_root, paths_json)
    return subsample_nodes(ds, fraction=fraction, method=method, depth=DEPTH, weights=WEIGHTS, seed=seed)


# ----------------------------------------------------------------------------------------------
# One cell: (dataset, kind, arch, method, trial) x fractions
# ----------------------------------------------------------------------------------------------
def select_graphs(D: np.ndarray | None, n: int, method: str, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions (into the training set) and weights τ of the selected graphs.

    k-medoids methods: τ = cluster sizes (``tmdlib.coreset.kmedoids_coreset``); Random: uniform weights 1.
    """
    from tmdlib import baselines
    from tmdlib.coreset import budget_to_k, kmedoids_coreset

    k = budget_to_k(n, fraction=fraction)
    if method == "random":
        return baselines.random_selection(n, k, seed), np.ones(k)
    res = kmedoids_coreset(D, k, seed=seed, restarts=RESTARTS)
    return res.medoids, res.tau.astype(np.float64)


@task(name="experiment-cell", persist_result=False)
def run_cell(spec: dict) -> list[dict]:
    """Train and test one model per fraction in ``spec["fractions"]``; returns result rows (:data:`COLUMNS`).

    ``spec``: ``dataset``, ``raw_root``, ``paths`` (from :func:`prepare_dataset`), ``kind``, ``method``,
    ``arch``, ``trial``, ``epochs``, ``fractions``, ``torch_threads``, ``device``.
    """
    import torch

    from tmdlib.coreset import medoids_objective
    from tmdlib.nn import TrainConfig, evaluate, predict_logits, train_gin
    from tmdlib.split import train_test_split

    from .train import to_data

    torch.set_num_threads(int(spec.get("torch_threads", 1)))
    name, kind, method, trial = spec["dataset"], spec["kind"], spec["method"], int(spec["trial"])
    paths_json = json.dumps(spec["paths"], sort_keys=True)
    ds, mats = _loaded(name, spec["raw_root"], paths_json)
    metric = metric_for(name)
    y = np.asarray(ds.y, dtype=np.float64)
    train, test = train_test_split(len(ds), TEST_FRACTION, seed=trial)
    test_data = to_data(ds, test)
    cfg = arch_config(name, spec["arch"], int(spec["epochs"]), trial, spec.get("device", "cpu"))
    D_tmd_train = mats["tmd"][np.ix_(train, train)]
    rows = []
    for fraction in spec["fractions"]:
        if kind == "graph":
            D = None if method == "random" else (D_tmd_train if method == "tmd"
                                                 else mats[method][np.ix_(train, train)])
            sel, tau = select_graphs(D, len(train), method, fraction, trial)
            pos = train[sel]
            data = to_data(ds, pos, y=y[pos], weights=tau)
            k, eps = int(len(sel)), float(medoids_objective(D_tmd_train, sel))
        elif kind == "node":
            sub = _node_subsample(name, spec["raw_root"], paths_json, method, float(fraction), trial)
            local = np.arange(ds.num_nodes) - np.repeat(ds.node_ptr[:-1], ds.nodes_per_graph)
            subsets = [local[ds.node_ptr[p]:ds.node_ptr[p + 1]][sub.mask[ds.node_ptr[p]:ds.node_ptr[p + 1]]]
                       for p in train]
            data = to_data(ds, train, y=y[train], node_subsets=subsets)
            k, eps = int(sub.k[train].sum()), float(sub.epsilon[train].mean())
        else:
            raise InputError(None, f"unknown kind {kind!r}: graph or node")
        t0 = time.perf_counter()
        res = train_gin(data, TrainConfig(**cfg), in_dim=ds.num_features)
        seconds = time.perf_counter() - t0
        value = evaluate(predict_logits(res.model, test_data), y[test], metric)
        rows.append({"dataset": name, "kind": kind, "method": method, "fraction": float(fraction),
                     "trial": trial, "arch": spec["arch"], "epochs": int(spec["epochs"]), "metric": metric,
                     "value": value, "k": k, "n_train": int(len(train)), "n_test": int(len(test)),
                     "epsilon": eps, "final_loss": res.losses[-1] if res.losses else float("nan"),
                     "train_seconds": round(seconds, 3)})
    return rows


# ----------------------------------------------------------------------------------------------
# Results file (resume)
# ----------------------------------------------------------------------------------------------
def row_key(row: dict) -> tuple:
    """Normalised :data:`KEY` tuple of a row (fractions rounded to 6 decimals)."""
    return (str(row["dataset"]), str(row["kind"]), str(row["method"]), round(float(row["fraction"]), 6),
            int(row["trial"]), str(row["arch"]), int(row["epochs"]))


class ResultStore:
    """``<dir>/<dataset>.csv`` per dataset; each :meth:`append` rewrites the file atomically.

    A crash leaves the previous complete file; a rerun reads it and skips finished keys.  The store
    holds an exclusive lock file (``.<dataset>.csv.lock``, ``fcntl.flock``) while open, so two runs
    cannot write the same file.
    """

    def __init__(self, directory: str, dataset: str):
        import fcntl

        self.path = Path(directory) / f"{dataset}.csv"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.path.parent / f".{self.path.name}.lock", "w")  # noqa: SIM115 - held open
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            raise InputError(str(self.path), "another experiment run is writing this results file") from None
        self.rows = read_results(str(self.path))
        self.keys = {row_key(r) for r in self.rows}

    def done(self, key: tuple) -> bool:
        return key in self.keys

    def append(self, rows: list[dict]) -> None:
        new = [r for r in rows if row_key(r) not in self.keys]
        if not new:
            return
        self.rows.extend(new)
        self.keys.update(row_key(r) for r in new)
        io.write_text(self.path, rows_to_csv(self.rows))

    def close(self) -> None:
        self._lock.close()


def rows_to_csv(rows: list[dict]) -> str:
    """CSV text (header :data:`COLUMNS`); floats in full precision (``repr``)."""
    lines = [",".join(COLUMNS)]
    for r in rows:
        lines.append(",".join(_fmt(r.get(c)) for c in COLUMNS))
    return "\n".join(lines) + "\n"


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    return str(v)


def read_results(path: str) -> list[dict]:
    """Rows of a results CSV (empty list if the file does not exist)."""
    import csv

    p = Path(path)
    if not p.is_file():
        return []
    out = []
    with open(p, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in KEY + ("value",) if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(str(p), f"not an experiment results file: missing columns {missing}", line=1)
        for line, r in enumerate(reader, start=2):
            try:
                row = dict(r)
                for c in ("fraction", "value", "epsilon", "final_loss", "train_seconds"):
                    row[c] = float(row[c]) if row.get(c) not in (None, "") else float("nan")
                for c in ("trial", "epochs", "k", "n_train", "n_test"):
                    row[c] = int(row[c]) if row.get(c) not in (None, "") else None
            except (TypeError, ValueError) as err:
                raise InputError(str(p), f"bad row: {err}", line=line) from None
            out.append(row)
    return out


def plan_cells(profile: dict, dataset: str, store: ResultStore, paths: dict, raw_root: str,
               torch_threads: int = 1, device: str = "cpu") -> list[dict]:
    """Specs of the cells still to run, trial-major (an interrupted run leaves every cell with some trials)."""
    specs = []
    for trial in range(int(profile["trials"])):
        for kind in profile["kinds"]:
            epochs = int(profile[f"{kind}_epochs"])
            for arch in profile["archs"]:
                for method in profile[f"{kind}_methods"]:
                    todo = [f for f in profile[f"{kind}_fractions"]
                            if not store.done(row_key({"dataset": dataset, "kind": kind, "method": method,
                                                       "fraction": f, "trial": trial, "arch": arch,
                                                       "epochs": epochs}))]
                    if todo:
                        specs.append({"dataset": dataset, "raw_root": raw_root, "paths": paths, "kind": kind,
                                      "method": method, "arch": arch, "trial": trial, "epochs": epochs,
                                      "fractions": todo, "torch_threads": torch_threads, "device": device})
    return specs


def cpu_count() -> int:
    """CPUs this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


# ----------------------------------------------------------------------------------------------
# Reports
# ----------------------------------------------------------------------------------------------
KIND_TITLES = {"graph": "Graph subsampling (fraction of the training graphs)",
               "node": "Node subsampling (fraction of each training graph's nodes)"}
ARCH_TITLES = {"gin": "GIN of paper B.2 (3 layers, hidden 128 TU / 256 OGB, add pooling)",
               "gin-wide-mean": "alternative architecture (2x hidden width, mean pooling)"}


def read_paper(path: str | None) -> dict:
    """``{(dataset, kind, arch): {method: {fraction: (mean, ci)}}}`` of the paper's label-free rows, plus
    ``{(dataset, kind, arch): table label}`` under the key ``"_labels"``."""
    import csv

    out: dict = {"_labels": {}}
    if not path or not Path(path).is_file():
        return out
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r["labels"] != "without":
                continue
            key = (r["dataset"], r["kind"], r["arch"])
            out.setdefault(key, {}).setdefault(r["method"], {})[round(float(r["fraction"]), 6)] = (
                float(r["mean"]), float(r["ci"]))
            out["_labels"][key] = r["table_label"]
    return out


def _groups(rows: list[dict]) -> list[tuple]:
    order = {k: i for i, k in enumerate(KINDS)}
    aorder = {a: i for i, a in enumerate(ARCHS)}
    return sorted({(r["kind"], r["arch"], int(r["epochs"])) for r in rows},
                  key=lambda g: (order.get(g[0], 9), aorder.get(g[1], 9), g[2]))


def dataset_report(name: str, rows: list[dict], paper: dict) -> tuple[str, list[dict], list[tuple]]:
    """Markdown of one dataset, its per-group summaries and, for the plot, ``(title, cells, methods, paper TMD)``."""
    from tmdlib import report

    metric = rows[0]["metric"] if rows else metric_for(name)
    agg = report.aggregate(rows)
    eps = report.aggregate(rows, value="epsilon")
    md = [f"# {name}: test {metric}, mean ± 95 % CI (Student t) over trials\n",
          "Best per column **bold**, second best <u>underlined</u> (compared as printed, 2 decimals); W = columns "
          "won (ties count for each), F = columns with mean < 0.5.  `paper W/F`: the same counts recomputed from "
          "the paper's printed means over the same four methods (the paper's own W also counts DosCond/KiDD).  "
          "The *TMD (paper)* row is the paper's TMD row, not ranked.\n"]
    summaries, panels = [], []
    for kind, arch, epochs in _groups(rows):
        methods = [m for m in (GRAPH_METHODS if kind == "graph" else NODE_METHODS)
                   if any(r["method"] == m and r["kind"] == kind and r["arch"] == arch for r in rows)]
        fractions = sorted({round(r["fraction"], 6) for r in rows if r["kind"] == kind and r["arch"] == arch
                            and r["epochs"] == epochs})
        cells = {m: {f: agg[(name, kind, arch, epochs, m, f)] for f in fractions
                     if (name, kind, arch, epochs, m, f) in agg} for m in methods}
        pkey = (name, kind, arch)
        ptab = paper.get(pkey)
        md.append(f"## {KIND_TITLES[kind]} — {ARCH_TITLES.get(arch, arch)}, {epochs} epochs\n")
        if ptab:
            md.append(f"Paper's numbers: `reports/paper_results.csv`, table `{paper['_labels'][pkey]}`.\n")
        md.append(report.markdown_table(cells, methods, fractions, ptab))
        if kind == "graph":
            md.append("\nMean ε = f_TMD(selection; training graphs), the medoid objective of each method's "
                      "selection under TMD (Lemma 3.2's bound is 2·c·ε):\n")
        else:
            md.append("\nMean ε = mean over training graphs of TN(G) − TN(G[S]) = TMD(G, G[S]) (Corollary 4.1):\n")
        md.append("| Method | " + " | ".join(f"{100 * f:g}%" for f in fractions) + " |")
        md.append("|---|" + "---:|" * len(fractions))
        for m in methods:
            md.append(f"| {METHOD_LABELS_SHORT.get(m, m)} | " + " | ".join(
                f"{eps[(name, kind, arch, epochs, m, f)][0]:.4g}" if (name, kind, arch, epochs, m, f) in eps else "–"
                for f in fractions) + " |")
        md.append("")
        from tmdlib.report import wins_fails

        ours = wins_fails({m: {f: v[0] for f, v in cells[m].items()} for m in methods})
        theirs = None
        if ptab:
            theirs = wins_fails({m: {f: ptab[m][f][0] for f in fractions if f in ptab.get(m, {})}
                                 for m in methods if m in ptab})
        summaries.append({"dataset": name, "kind": kind, "arch": arch, "epochs": epochs, "ours": ours,
                          "paper": theirs, "trials": min((c[2] for m in methods for c in cells[m].values()),
                                                         default=0),
                          "tmd_vs_paper": _tmd_gap(cells.get("tmd", {}), (ptab or {}).get("tmd", {}))})
        panels.append((f"{KIND_TITLES[kind].split(' (')[0]}, {arch}, {epochs} ep", cells, methods,
                       (ptab or {}).get("tmd")))
    return "\n".join(md) + "\n", summaries, panels


METHOD_LABELS_SHORT = {"tmd": "TMD", "random": "Random", "feature": "Feature", "wl": "WL", "rw": "RW",
                       "kcore": "k-cores"}


def _tmd_gap(ours: dict, paper: dict) -> dict:
    """Mean of (our TMD mean − paper's TMD mean) over the shared fractions, and how many are within our CI."""
    shared = [f for f in ours if f in paper and math.isfinite(ours[f][0])]
    if not shared:
        return {}
    diffs = [ours[f][0] - paper[f][0] for f in shared]
    inside = sum(abs(ours[f][0] - paper[f][0]) <= (ours[f][1] if math.isfinite(ours[f][1]) else 0) + paper[f][1]
                 for f in shared)
    return {"mean_diff": float(np.mean(diffs)), "overlap": int(inside), "n": len(shared)}


def summary_markdown(summaries: list[dict], profile: str) -> str:
    """Wins / fails per method summed over datasets, ours next to the paper's (same methods, same datasets)."""
    md = [f"# Summary ({profile} profile): wins / fails per method\n",
          "W = columns (fractions) won, F = columns with mean below 0.5, summed over the datasets listed.  "
          "`paper` = the same counts recomputed from the paper's printed means over the same four methods and "
          "datasets (the paper's Table 1 also counts DosCond and KiDD, so its totals differ).\n"]
    keys = sorted({(s["kind"], s["arch"], s["epochs"]) for s in summaries})
    for kind, arch, epochs in keys:
        group = [s for s in summaries if (s["kind"], s["arch"], s["epochs"]) == (kind, arch, epochs)]
        methods = list(group[0]["ours"])
        md.append(f"## {KIND_TITLES[kind]} — {arch}, {epochs} epochs\n")
        head = ["Method"] + [f"{s['dataset']} ({s['trials']} tr.) W/F" for s in group] + ["total W/F",
                                                                                          "paper total W/F"]
        md.append("| " + " | ".join(head) + " |")
        md.append("|---|" + "---:|" * (len(head) - 1))
        for m in methods:
            row = [METHOD_LABELS_SHORT.get(m, m)]
            tw = tf = pw = pf = 0
            have_paper = False
            for s in group:
                w, f = s["ours"].get(m, (0, 0))
                tw, tf = tw + w, tf + f
                cell = f"{w}/{f}"
                if s["paper"] and m in s["paper"]:
                    have_paper = True
                    pw, pf = pw + s["paper"][m][0], pf + s["paper"][m][1]
                    cell += f" (paper {s['paper'][m][0]}/{s['paper'][m][1]})"
                row.append(cell)
            row += [f"{tw}/{tf}", f"{pw}/{pf}" if have_paper else "–"]
            md.append("| " + " | ".join(row) + " |")
        gaps = [(s["dataset"], s["tmd_vs_paper"]) for s in group if s["tmd_vs_paper"]]
        if gaps:
            md.append("\nOur TMD vs the paper's TMD row: " + "; ".join(
                f"{d}: mean difference {g['mean_diff']:+.3f}, CIs overlap at {g['overlap']}/{g['n']} fractions"
                for d, g in gaps) + ".")
        md.append("")
    return "\n".join(md) + "\n"


@task(name="write-reports", persist_result=False)
def write_reports(results_dir: str, report_dir: str, profile: str, paper_csv: str | None = None) -> dict:
    """Tables (Markdown), plots (PNG) and the summary from every results CSV in ``results_dir``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tmdlib.report import plot_curves

    paper = read_paper(paper_csv)
    files, summaries = [], []
    for csv_path in sorted(Path(results_dir).glob("*.csv")):
        rows = read_results(str(csv_path))
        if not rows:
            continue
        name = csv_path.stem
        text, summ, panels = dataset_report(name, rows, paper)
        summaries += summ
        md_path = Path(report_dir) / f"{name}.md"
        io.write_text(md_path, text)
        files.append(str(md_path))
        fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.6), squeeze=False)
        for ax, (title, cells, methods, ptmd) in zip(axes[0], panels):
            plot_curves(ax, cells, methods, ptmd, title=f"{name}: {title}", ylabel=f"test {rows[0]['metric']}")
        fig.tight_layout()
        png = Path(report_dir) / f"{name}.png"
        with io.atomic_path(png) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
        plt.close(fig)
        files.append(str(png))
    if summaries:
        sp = Path(report_dir) / "summary.md"
        io.write_text(sp, summary_markdown(summaries, profile))
        files.append(str(sp))
    return {"files": files, "summaries": summaries}
