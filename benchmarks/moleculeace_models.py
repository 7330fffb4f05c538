"""Full-data models on the 30 MoleculeACE sets against the published numbers (issue 53): svm, rf, gbm, chemprop, gin;
lgbm (issue 62), or any other registered model, through the model registry.

Each model is trained on the whole train split of a set (the authors' split, as the molecules benchmark loads it:
``tasks.molecules.load_set``) and scored on its test split: RMSE, RMSE on the test molecules in an activity cliff
(MoleculeACE's ``cliff_mol``), R².  One process, one thread per BLAS / OpenMP pool (set before numpy loads)::

    .venv/bin/python benchmarks/moleculeace_models.py prepare               # SMILES, y, split, cliff, ECFP4 counts
    .venv/bin/python benchmarks/moleculeace_models.py tune --models svm gbm # inner validation on the train splits
    .venv/bin/python benchmarks/moleculeace_models.py run --models svm rf gbm
    .venv/bin/python benchmarks/moleculeace_models.py run --models chemprop --datasets ... --epochs 50
    .venv/bin/python benchmarks/moleculeace_models.py run --models gin     # the molecules benchmark's GIN
    .venv/bin/python benchmarks/moleculeace_models.py run --models lgbm    # any registered model, by the registry
    .venv/bin/python benchmarks/moleculeace_models.py summary              # full_data.md beside the published numbers

``run`` appends one row per (dataset, model, trial) to ``reports/results/molecules/full_data.csv`` as soon as it is
done and skips the rows already there (resumable per set).  ``tune`` never reads a test split: each set's train split
is cut 80/20 (seeded) and every candidate setting is scored on the 20 %; it writes ``full_data_tuning.csv``.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "reports" / "results" / "molecules"
CACHE = ROOT / "tmp" / "moleculeace_models"
PUBLISHED = Path(os.environ.get("TMDSUB_SHARED", ROOT.parent / "shared")) / "reference" / "moleculeace_published.csv"
COLUMNS = ("dataset", "model", "trial", "n_train", "n_test", "n_cliff", "rmse", "rmse_cliff", "r2", "seconds",
           "settings")
#: The published columns each of our models is compared with.
PUBLISHED_OF = {"svm": "svm_ecfp", "rf": "rf_ecfp", "gbm": "gbm_ecfp", "lgbm": "gbm_ecfp", "chemprop": "chemprop_v2",
                "gin": "gcn"}
#: Graph models: trained through the registry on the set's graphs, with the molecules benchmark's options
#: (``tmdlib.experiment.molecules.model_options``), so a full-data row is the 100 % point of the benchmark's curve.
GRAPH_MODELS = ("gin",)

# the candidate settings of `tune` (standardised targets for the SVM: epsilon in units of the target's spread)
SVM_GRID = [{"C": c, "epsilon": e} for c in (1.0, 3.0, 5.0, 10.0) for e in (0.02, 0.05, 0.1)]
GBM_GRID = [{"learning_rate": 0.05, "max_iter": 500, "max_leaf_nodes": 31, "min_samples_leaf": 10, "max_features": 0.3},
            {"learning_rate": 0.05, "max_iter": 500, "max_leaf_nodes": 15, "min_samples_leaf": 5, "max_features": 0.3},
            {"learning_rate": 0.1, "max_iter": 300, "max_leaf_nodes": 31, "min_samples_leaf": 20, "max_features": 1.0},
            {"learning_rate": 0.03, "max_iter": 1000, "max_leaf_nodes": 31, "min_samples_leaf": 5,
             "max_features": 0.2}]


def datasets() -> list[str]:
    from tmdlib.experiment.molecules import dataset_sizes

    return list(dataset_sizes())


def load(name: str) -> dict:
    """The set as the molecules benchmark loads it, cached as plain arrays (no pickle)."""
    path = CACHE / f"{name}.npz"
    if not path.is_file():
        from tasks.molecules import load_set
        from tmdlib.chem import ecfp4_counts

        s = load_set(name, str(ROOT / "data" / "raw"))
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npz")
        np.savez_compressed(tmp, smiles=np.array(s["smiles"], dtype=str), y=s["y"], train=s["train"],
                            test=s["test"], cliff=s["cliff"], counts=ecfp4_counts(s["smiles"]))
        tmp.replace(path)
    with np.load(path, allow_pickle=False) as z:
        return {"name": name, **{k: z[k] for k in z.files}}


_GRAPHS: dict = {}


def graphs(name: str):
    """The set's graphs as the molecules benchmark builds them (same order as :func:`load`'s arrays)."""
    if name not in _GRAPHS:
        from tasks.molecules import load_set

        _GRAPHS.clear()
        _GRAPHS[name] = load_set(name, str(ROOT / "data" / "raw"))["ds"]
    return _GRAPHS[name]


def metrics(pred: np.ndarray, y: np.ndarray, cliff: np.ndarray) -> dict:
    from tmdlib.metrics import score

    s = score(pred, y, "regression")
    c = score(pred[cliff], y[cliff], "regression")["rmse"] if cliff.any() else float("nan")
    return {"rmse": s["rmse"], "rmse_cliff": c, "r2": s["r2"]}


def make(model: str, settings: dict, seed: int):
    """The estimator of the issue-53 models (their rows in full_data.csv); None for any other registered model."""
    from tmdlib.chem import models

    if model == "svm":
        return models.TanimotoSVR(**settings)
    if model == "rf":
        return models.ECFPForest(seed=seed, **settings)
    if model == "gbm":
        return models.ECFPBoosting(seed=seed, **settings)
    if model == "chemprop":
        from tmdlib.torch.chemprop import ChempropRegressor

        return ChempropRegressor(seed=seed, **settings)
    return None


def fit_predict(model: str, settings: dict, seed: int, s: dict, train: np.ndarray, test: np.ndarray) -> np.ndarray:
    if model in GRAPH_MODELS:
        from tmdlib.datasets import TaskSpec
        from tmdlib.experiment.molecules import model_options
        from tmdlib.models import Inputs, get_model

        ds = graphs(str(s["name"]))
        fitted = get_model(model).build({**model_options(model, seed), **settings}).fit(
            Inputs(ds, positions=train), s["y"][train], np.ones(train.size), TaskSpec("regression"))
        return fitted.outputs(Inputs(ds, positions=test))[:, 0]
    est = make(model, settings, seed)
    if est is None:  # any other registered model (lgbm, ...): through the registry, on the same ECFP4 counts
        from tmdlib.datasets import TaskSpec
        from tmdlib.experiment.molecules import model_options
        from tmdlib.models import Inputs, get_model

        X = Inputs(smiles=s["smiles"].tolist(), features=s["counts"])
        fitted = get_model(model).build({**model_options(model, seed), **settings}).fit(
            X.subset(train), s["y"][train], np.ones(train.size), TaskSpec("regression"))
        return fitted.outputs(X.subset(test))[:, 0]
    if model == "chemprop":
        smiles = s["smiles"].tolist()
        est.fit([smiles[i] for i in train], s["y"][train])
        return est.predict([smiles[i] for i in test])
    est.fit(s["counts"][train], s["y"][train])
    return est.predict(s["counts"][test])


def result_row(s: dict, model: str, trial: int, pred, seconds: float, settings: dict) -> dict:
    """One ``full_data.csv`` row (:data:`COLUMNS`) of set ``s`` (:func:`load`'s arrays, its whole train split) from
    the predictions on its test split."""
    test, cliff = s["test"], s["cliff"].astype(bool)
    m = metrics(np.asarray(pred, dtype=np.float64), s["y"][test], cliff)
    return {"dataset": str(s["name"]), "model": model, "trial": trial, "n_train": s["train"].size,
            "n_test": test.size, "n_cliff": int(cliff.sum()), "rmse": f"{m['rmse']:.6f}",
            "rmse_cliff": f"{m['rmse_cliff']:.6f}", "r2": f"{m['r2']:.6f}", "seconds": f"{seconds:.2f}",
            "settings": repr(settings)}


def read_csv(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with path.open() as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def append_row(path: Path, row: dict, header: str) -> None:
    new = not path.is_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as f:
        if new:
            f.write(header)
        w = csv.DictWriter(f, fieldnames=list(row))
        if new:
            w.writeheader()
        w.writerow(row)


def cmd_prepare(args) -> None:
    for name in args.datasets or datasets():
        t0 = time.perf_counter()
        s = load(name)
        print(f"{name}: {len(s['train'])} train, {len(s['test'])} test, {int(s['cliff'].sum())} cliff "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)


def cmd_tune(args) -> None:
    out = RESULTS / "full_data_tuning.csv"
    done = {(r["dataset"], r["model"], r["settings"]) for r in read_csv(out)}
    header = ("# inner validation on the train splits only: each set's train split cut 80/20 (seed 0), every setting\n"
              "# fitted on the 80 % and scored on the 20 %; written by "
              "`benchmarks/moleculeace_models.py tune`\n")
    for name in args.datasets or datasets():
        s = load(name)
        rng = np.random.default_rng(0)
        train = rng.permutation(s["train"])
        cut = int(round(0.8 * train.size))
        inner, val = np.sort(train[:cut]), np.sort(train[cut:])
        for model in args.models:
            grid = {"svm": SVM_GRID, "gbm": GBM_GRID}[model]
            for settings in grid:
                key = repr(sorted(settings.items()))
                if (name, model, key) in done:
                    continue
                t0 = time.perf_counter()
                pred = fit_predict(model, settings, 0, s, inner, val)
                m = metrics(pred, s["y"][val], np.zeros(val.size, dtype=bool))
                append_row(out, {"dataset": name, "model": model, "settings": key, "rmse": f"{m['rmse']:.6f}",
                                 "seconds": f"{time.perf_counter() - t0:.2f}"}, header)
                print(f"{name} {model} {settings}: val RMSE {m['rmse']:.4f} ({time.perf_counter() - t0:.1f} s)",
                      flush=True)


def cmd_run(args) -> None:
    out = RESULTS / "full_data.csv"
    done = {(r["dataset"], r["model"], r["trial"]) for r in read_csv(out)}
    header = ("# full-data models on the 30 MoleculeACE sets (issue 53): whole train split, authors' test split;\n"
              "# `benchmarks/moleculeace_models.py run --models ...` (see full_data.md for the exact commands)\n")
    settings = {"chemprop": {"epochs": args.epochs}} if "chemprop" in args.models else {}
    for name in args.datasets or datasets():
        s = load(name)
        train, test = s["train"], s["test"]
        for model in args.models:
            for trial in range(args.trials):
                if (name, model, str(trial)) in done:
                    continue
                t0 = time.perf_counter()
                pred = fit_predict(model, settings.get(model, {}), trial, s, train, test)
                sec = time.perf_counter() - t0
                row = result_row(s, model, trial, pred, sec, settings.get(model, {}))
                append_row(out, row, header)
                print(f"{name} {model} trial {trial}: RMSE {row['rmse']} cliff {row['rmse_cliff']} "
                      f"R2 {row['r2']} ({sec:.1f} s)", flush=True)


def cmd_summary(args) -> None:
    rows = read_csv(RESULTS / "full_data.csv")
    pub = {r["dataset"]: r for r in read_csv(PUBLISHED)}
    models = [m for m in PUBLISHED_OF if any(r["model"] == m for r in rows)]
    ours: dict = {}
    for r in rows:
        ours.setdefault((r["dataset"].removeprefix("ACE-"), r["model"]), []).append(r)
    names = sorted(pub)

    def mean(rs, key):
        return float(np.mean([float(r[key]) for r in rs]))

    lines = ["# Full-data models on the 30 MoleculeACE sets, beside the published numbers", "",
             "Test RMSE (pKi / pEC50 units) on the authors' split, each model trained on the whole train split; "
             "published: MoleculeACE's results file (svm / rf / gbm on ECFP) and the chemprop authors' chemprop v2 "
             "runs (`/work/shared/reference/moleculeace_published.csv`). Ours: `full_data.csv` (mean over trials).",
             "", "## Means over the sets", "",
             "| model | sets | RMSE ours | RMSE published (same sets) | ours / published | cliff RMSE ours | "
             "R² ours | fit+predict s (mean) |", "|---|---|---|---|---|---|---|---|"]
    for m in models:
        have = [n for n in names if (n, m) in ours]
        o = np.array([mean(ours[(n, m)], "rmse") for n in have])
        p = np.array([float(pub[n][PUBLISHED_OF[m]]) for n in have])
        c = np.array([mean(ours[(n, m)], "rmse_cliff") for n in have])
        r2 = np.array([mean(ours[(n, m)], "r2") for n in have])
        sec = np.array([mean(ours[(n, m)], "seconds") for n in have])
        lines.append(f"| {m} | {len(have)} | {o.mean():.3f} | {p.mean():.3f} ({PUBLISHED_OF[m]}) | "
                     f"{o.mean() / p.mean():.3f} | {np.nanmean(c):.3f} | {r2.mean():.3f} | {sec.mean():.1f} |")
    pc = np.array([float(pub[n]["svm_ecfp_cliff"]) for n in names])
    lines += ["", f"Published SVM cliff RMSE, mean over the 30 sets: {pc.mean():.3f}.", "",
              "## Per set (RMSE; cliff RMSE in parentheses)", "",
              "| set | " + " | ".join(f"{m} ours | {m} published" for m in models) + " |",
              "|---|" + "---|---|" * len(models)]
    for n in names:
        cells = []
        for m in models:
            rs = ours.get((n, m))
            cells.append(f"{mean(rs, 'rmse'):.3f} ({mean(rs, 'rmse_cliff'):.3f})" if rs else "–")
            pubv = f"{float(pub[n][PUBLISHED_OF[m]]):.3f}"
            if m == "svm":
                pubv += f" ({float(pub[n]['svm_ecfp_cliff']):.3f})"
            cells.append(pubv)
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    extra = RESULTS / "full_data_notes.md"
    if extra.is_file():
        text += "\n" + extra.read_text()
    (RESULTS / "full_data.md").write_text(text)
    print(text)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("prepare", "tune", "run", "summary"):
        p = sub.add_parser(name)
        p.add_argument("--datasets", nargs="*", help="ACE-* names (default: all 30, largest first)")
        p.add_argument("--models", nargs="*", default=["svm", "rf", "gbm"])
        p.add_argument("--trials", type=int, default=1)
        p.add_argument("--epochs", type=int, default=50, help="chemprop's epochs")
    args = ap.parse_args(argv)
    {"prepare": cmd_prepare, "tune": cmd_tune, "run": cmd_run, "summary": cmd_summary}[args.cmd](args)


if __name__ == "__main__":
    main()
