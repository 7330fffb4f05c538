"""The molecules benchmark's budget grid with the molecule models (svm, rf), beside full data and the published numbers
(issue 53, "Measure and commit" / "Goals").

Reads the benchmark's rows (``reports/results/molecules/ACE-*.csv``, made by ``tmdsub experiment --profile molecules
--models svm,rf --methods tmd,random,maxmin,fp-kmedoids --trials 3 ...``), the full-data rows (``full_data.csv``:
``benchmarks/moleculeace_models.py``; ``full_data_bench.csv``: the benchmark's own forest, 100 trees, at 100 % — made
by ``fullrf`` below) and the published numbers (``/work/shared/reference/moleculeace_published.csv``).  Prints the
tables and writes ``reports/results/molecules/models_summary.md``::

    OMP_NUM_THREADS=1 taskset -c 0 .venv/bin/python benchmarks/molecules_models_summary.py fullrf   # ~1 min a set
    .venv/bin/python benchmarks/molecules_models_summary.py summary

Definitions (like for like: every picker τ-weighted where it has τ, or every picker unweighted; Random and MaxMin
have no τ, so their rows are the same in both fields):

* a set counts when every (model, picker, weighting, budget, trial < ``--trials``) row of the grid is there;
  trials ``0 .. --trials-1`` only (the forest has 5 trials from an earlier session, the SVM 3 + 2 from two later
  ones; default 5);
* mean RMSE: per set the mean over trials, then the mean over sets;
* ratio to full data: per set, the 30 % TMD coreset's RMSE over the same model's full-data RMSE (svm: ``full_data.csv``,
  the same estimator and settings; rf: the benchmark's 100-tree forest at 100 %, ``full_data_bench.csv``, and for
  reference the 500-tree forest of ``full_data.csv``), then the mean over sets (goal ≤ 1.10);
* labels saved: on the mean curve over sets (RMSE at 5 / 10 / 20 / 30 %, linearly interpolated between budgets), the
  smallest TMD budget ``b`` whose RMSE reaches Random's RMSE at 30 %; labels needed ``b / 30 %``, saved ``1 − b / 30 %``
  (goal: needed ≤ 70 %).  Per set the same; the sets whose TMD curve never reaches Random's 30 % RMSE within 30 % are
  counted (and enter the per-set mean as 0 saved, which flatters TMD: they need more than 30 %).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "reports" / "results" / "molecules"
PUBLISHED = Path(os.environ.get("TMDSUB_SHARED", ROOT.parent / "shared")) / "reference" / "moleculeace_published.csv"
MODELS = ("svm", "rf")
FRACTIONS = (0.05, 0.1, 0.2, 0.3)
#: (label, method, weighted) of the grid; the weighted field and the unweighted field.
WEIGHTED = (("tmd τ", "tmd", True), ("fp-kmedoids τ", "fp-kmedoids", True), ("random", "random", False),
            ("maxmin", "maxmin", False))
UNWEIGHTED = (("tmd", "tmd", False), ("fp-kmedoids", "fp-kmedoids", False), ("random", "random", False),
              ("maxmin", "maxmin", False))
VARIANTS = (("tmd τ", "tmd", True), ("tmd", "tmd", False), ("fp-kmedoids τ", "fp-kmedoids", True),
            ("fp-kmedoids", "fp-kmedoids", False), ("random", "random", False), ("maxmin", "maxmin", False))
PUBLISHED_OF = {"svm": "svm_ecfp", "rf": "rf_ecfp"}
FULL_BENCH = RESULTS / "full_data_bench.csv"
FULL_COLUMNS = ("dataset", "model", "trial", "n_train", "n_test", "n_cliff", "rmse", "rmse_cliff", "r2", "seconds",
                "settings")


def _read(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


def grid_rows(trials: int) -> dict:
    """``{(dataset, model, method, weighted, fraction): [rmse per trial]}`` and the same for cliff RMSE."""
    rmse, cliff = defaultdict(dict), defaultdict(dict)
    picks = defaultdict(dict)  # (dataset, method, weighted, fraction, trial) -> {model: (k, epsilon)}
    for path in sorted(RESULTS.glob("ACE-*.csv")):
        for r in _read(path):
            if r["model"] in MODELS:
                picks[(r["dataset"], r["method"], r["weighted"], r["fraction"], r["trial"])][r["model"]] = \
                    (int(r["k"]), float(r["epsilon"]))
            if r["model"] not in MODELS or int(r["trial"]) >= trials:
                continue
            key = (r["dataset"], r["model"], r["method"], r["weighted"] == "true", round(float(r["fraction"]), 6))
            rmse[key][int(r["trial"])] = float(r["rmse"])
            cliff[key][int(r["trial"])] = float(r["rmse_cliff"])
    grid_rows.picks = picks
    return rmse, cliff


def same_picks() -> dict:
    """Per picker: [selections compared, selections whose svm and rf picks differ (k, or ε beyond relative 1e-9),
    largest relative ε difference] over the (set, picker, budget, trial) both models have rows of."""
    out = {}
    seen = set()
    for (d, meth, _w, f, tr), m in grid_rows.picks.items():
        if "svm" in m and "rf" in m and (d, meth, f, tr) not in seen:
            seen.add((d, meth, f, tr))
            (k1, e1), (k2, e2) = m["svm"], m["rf"]
            rel = abs(e1 - e2) / max(abs(e1), 1.0)
            c = out.setdefault(meth, [0, 0, 0.0])
            c[0] += 1
            c[1] += int(k1 != k2 or rel > 1e-9)
            c[2] = max(c[2], rel)
    return out


def complete_sets(rmse: dict, trials: int) -> list[str]:
    sets = sorted({k[0] for k in rmse})
    ok = []
    for s in sets:
        if all(len(rmse.get((s, m, meth, w, f), {})) == trials
               for m in MODELS for _, meth, w in VARIANTS for f in FRACTIONS):
            ok.append(s)
    return ok


def full_data(sets: list[str]) -> dict:
    """``{(model, dataset): rmse}``: svm and rf (500 trees) of full_data.csv, ``rf100`` of full_data_bench.csv
    (mean over its trials)."""
    acc = defaultdict(list)
    for r in _read(RESULTS / "full_data.csv"):
        acc[(r["model"], r["dataset"])].append(float(r["rmse"]))
    for r in _read(FULL_BENCH):
        acc[("rf100" if r["model"] == "rf" else r["model"] + "-bench", r["dataset"])].append(float(r["rmse"]))
    return {k: float(np.mean(v)) for k, v in acc.items() if k[1] in sets}


def published(sets: list[str]) -> dict:
    return {(col, "ACE-" + r["dataset"]): float(r[col]) for r in _read(PUBLISHED) for col in r if col != "dataset"
            if "ACE-" + r["dataset"] in sets and r[col] not in ("", None)}


def labels_needed(curve, target) -> float | None:
    """Smallest budget (linear interpolation between :data:`FRACTIONS`) whose RMSE reaches ``target``; None if even
    the largest budget does not."""
    if curve[0] <= target:
        return FRACTIONS[0]
    for i in range(1, len(FRACTIONS)):
        if curve[i] <= target:
            a, b = curve[i - 1], curve[i]
            return FRACTIONS[i - 1] + (a - target) / (a - b) * (FRACTIONS[i] - FRACTIONS[i - 1])
    return None


def cmd_fullrf(a) -> None:
    """The benchmark's forest (``model_options('rf', trial)``: 100 trees) on the whole train split, trials 0..n-1."""
    from tasks.molecules import load_set
    from tmdlib.chem import ecfp4_counts
    from tmdlib.datasets import TaskSpec
    from tmdlib.experiment.molecules import _metrics, model_options
    from tmdlib.models import Inputs, get_model

    done = {(r["dataset"], r["model"], int(r["trial"])) for r in _read(FULL_BENCH)}
    sets = a.datasets or complete_sets(grid_rows(a.trials)[0], a.trials)
    for name in sets:
        if all((name, "rf", t) in done for t in range(a.trials)):
            continue
        s = load_set(name, str(ROOT / "data" / "raw"))
        counts = ecfp4_counts(s["smiles"])
        train, test = s["train"], s["test"]
        for t in range(a.trials):
            if (name, "rf", t) in done:
                continue
            t0 = time.process_time()
            opts = model_options("rf", t)
            fitted = get_model("rf").build(opts).fit(Inputs(s["ds"], s["smiles"], train, features=counts),
                                                     s["y"][train], np.ones(len(train)), TaskSpec("regression"))
            pred = np.asarray(fitted.outputs(Inputs(s["ds"], s["smiles"], test, features=counts))[:, 0], float)
            m = _metrics(pred, s["y"][test], s["cliff"])
            row = {"dataset": name, "model": "rf", "trial": t, "n_train": len(train), "n_test": len(test),
                   "n_cliff": int(s["cliff"].sum()), "rmse": round(m["rmse"], 6), "rmse_cliff": round(m["rmse_cliff"], 6),
                   "r2": round(m["r2"], 6), "seconds": round(time.process_time() - t0, 2),
                   "settings": json.dumps({k: v for k, v in opts.items() if k != "seed"}).replace(",", ";")}
            new = not FULL_BENCH.is_file()
            with open(FULL_BENCH, "a", newline="") as fh:
                if new:
                    fh.write("# the molecules benchmark's forest (model_options('rf', trial): 100 trees, seed = trial) "
                             "on the whole train split; benchmarks/molecules_models_summary.py fullrf\n")
                    fh.write(",".join(FULL_COLUMNS) + "\n")
                fh.write(",".join(str(row[c]) for c in FULL_COLUMNS) + "\n")
            print(f"{name} rf100 trial {t}: RMSE {row['rmse']:.4f} ({row['seconds']} s)", flush=True)


def _fmt(x, nd=3) -> str:
    return "–" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.{nd}f}"


def cmd_summary(a) -> None:
    rmse, cliff = grid_rows(a.trials)
    sets = complete_sets(rmse, a.trials)
    if not sets:
        sys.exit("no set has the whole svm/rf grid yet")
    full, pub = full_data(sets), published(sets)
    per = {}  # (model, label, fraction) -> per-set mean RMSE array (aligned with sets)
    per_cliff = {}
    for model in MODELS:
        for label, meth, w in VARIANTS:
            for f in FRACTIONS:
                per[(model, label, f)] = np.array([np.mean(list(rmse[(s, model, meth, w, f)].values())) for s in sets])
                per_cliff[(model, label, f)] = np.array(
                    [np.nanmean(list(cliff[(s, model, meth, w, f)].values())) for s in sets])
    L = []
    out = L.append
    out("# The molecule models at a budget: TMD coresets against Random, MaxMin and fingerprint k-medoids (issue 53)")
    out("")
    out(f"Test RMSE (pKi / pEC50) on the authors' MoleculeACE split, over the **{len(sets)} sets** that have the whole "
        f"svm / rf grid ({a.trials} trials, budgets 5 / 10 / 20 / 30 % of the train split): "
        + ", ".join(s.replace("ACE-", "") for s in sets) + ". Made by `benchmarks/molecules_models_summary.py` from "
        "the rows in `reports/results/molecules/` (commands at the end).")
    out("")
    out("Like for like: **τ** rows train every weighted picker with its cluster sizes τ as sample weights; unweighted "
        "rows train every picker with weight 1. Random and MaxMin have no τ, so they are the same rows in both fields.")
    out("")
    summary_rows = []
    verdict = {}
    verdict_at = len(L)
    for model in MODELS:
        fd = np.array([full.get((model if model == "svm" else "rf100", s), np.nan) for s in sets])
        fd500 = np.array([full.get(("rf", s), np.nan) for s in sets]) if model == "rf" else None
        pubv = np.array([pub.get((PUBLISHED_OF[model], s), np.nan) for s in sets])
        out(f"## {model}")
        out("")
        out("Mean RMSE over the sets (in parentheses: mean over sets of the RMSE / Random's at the same budget; "
            "cliff RMSE at 30 % in the last column).")
        out("")
        out("| picker | 5 % | 10 % | 20 % | 30 % | cliff RMSE 30 % |")
        out("|---|---|---|---|---|---|")
        for label, _, _ in VARIANTS:
            cells = []
            for f in FRACTIONS:
                v = per[(model, label, f)]
                ratio = np.mean(v / per[(model, "random", f)])
                cells.append(f"{np.mean(v):.3f} ({ratio:.3f})")
            out(f"| {label} | " + " | ".join(cells) + f" | {np.nanmean(per_cliff[(model, label, 0.3)]):.3f} |")
        fd_label = "full data (100 % of the train split, same model)" if model == "svm" else \
            "full data, the benchmark's forest (100 trees)"
        if np.isfinite(fd).all():
            out(f"| {fd_label} | | | | {np.mean(fd):.3f} | |")
        if fd500 is not None and np.isfinite(fd500).all():
            out(f"| full data, 500-tree forest (`full_data.csv`) | | | | {np.mean(fd500):.3f} | |")
        out(f"| published full data ({PUBLISHED_OF[model]}, same sets) | | | | {np.nanmean(pubv):.3f} | |")
        out("")
        # wins, like for like
        out("Cells (set × budget) where the TMD coreset has the lower mean RMSE, like for like:")
        out("")
        out("| field | budgets | TMD < Random | TMD < MaxMin | TMD < fp-kmedoids | TMD lowest of the four |")
        out("|---|---|---|---|---|---|")
        for field, rows, tlabel, flabel in (("τ-weighted", WEIGHTED, "tmd τ", "fp-kmedoids τ"),
                                            ("unweighted", UNWEIGHTED, "tmd", "fp-kmedoids")):
            for fr, name in (((0.05, 0.1, 0.2, 0.3), "5–30 %"), ((0.1, 0.2, 0.3), "10–30 %")):
                n = len(sets) * len(fr)
                b_r = sum(int((per[(model, tlabel, f)] < per[(model, "random", f)]).sum()) for f in fr)
                b_m = sum(int((per[(model, tlabel, f)] < per[(model, "maxmin", f)]).sum()) for f in fr)
                b_k = sum(int((per[(model, tlabel, f)] < per[(model, flabel, f)]).sum()) for f in fr)
                low = sum(int((per[(model, tlabel, f)] <= np.min([per[(model, lb, f)] for lb, _, _ in rows], axis=0)
                               ).sum()) for f in fr)
                out(f"| {field} | {name} | {b_r}/{n} | {b_m}/{n} | {b_k}/{n} | {low}/{n} |")
        out("")
        # goals
        out("Goals:")
        out("")
        out("| picker | RMSE 30 % / full data (mean over sets; goal ≤ 1.10) | sets ≤ 1.10 | budget reaching Random's "
            "30 % RMSE (mean curve) | labels needed / saved vs Random at 30 % (goal needed ≤ 70 %) | per set: sets "
            "reaching it within 30 %, mean saved |")
        out("|---|---|---|---|---|---|")
        target_curve = per[(model, "random", 0.3)]
        for label, _, _ in VARIANTS:
            ratio = per[(model, label, 0.3)] / fd if np.isfinite(fd).all() else None
            ratio_txt = _fmt(float(np.mean(ratio))) if ratio is not None else "–"
            if fd500 is not None and np.isfinite(fd500).all():
                ratio_txt += f" (500-tree: {np.mean(per[(model, label, 0.3)] / fd500):.3f})"
            n_ok = f"{int((ratio <= 1.10).sum())}/{len(sets)}" if ratio is not None else "–"
            mean_curve = [float(np.mean(per[(model, label, f)])) for f in FRACTIONS]
            b = labels_needed(mean_curve, float(np.mean(target_curve)))
            per_set = [labels_needed([per[(model, label, f)][i] for f in FRACTIONS], target_curve[i])
                       for i in range(len(sets))]
            reached = sum(p is not None for p in per_set)
            saved_set = np.mean([1 - p / 0.3 if p is not None else 0.0 for p in per_set])
            b_txt = f"{100 * b:.1f} %" if b is not None else "not within 30 %"
            ns = f"{100 * b / 0.3:.0f} % / {100 * (1 - b / 0.3):.0f} %" if b is not None else "> 100 % / < 0 %"
            out(f"| {label} | {ratio_txt} | {n_ok} | {b_txt} | {ns} | {reached}/{len(sets)}, {100 * saved_set:.0f} % |")
            verdict[(model, label)] = {"ratio": float(np.mean(ratio)) if ratio is not None else None,
                                       "needed": None if b is None else b / 0.3,
                                       "rmse30": float(np.mean(per[(model, label, 0.3)]))}
            summary_rows.append((model, label, ratio_txt, b_txt, ns))
        out("")
        if np.isfinite(fd).all():
            out(f"Full data on these {len(sets)} sets: ours {np.mean(fd):.3f}"
                + (f" (500-tree forest {np.mean(fd500):.3f})" if fd500 is not None and np.isfinite(fd500).all() else "")
                + f", published {PUBLISHED_OF[model]} {np.nanmean(pubv):.3f}.")
            out("")
    V = ["## Verdict (goals of issue 53, on these sets)", ""]
    for model in MODELS:
        for label in (("tmd τ", "tmd")):
            v = verdict[(model, label)]
            need = "does not reach Random's 30 % RMSE within 30 %" if v["needed"] is None else \
                f"reaches Random's 30 % RMSE with {100 * v['needed']:.0f} % of Random's labels " \
                f"({100 * (1 - v['needed']):.0f} % saved)"
            V.append(f"* **{model}, {label}**: RMSE at 30 % {v['rmse30']:.3f} = {v['ratio']:.3f} × full data "
                     f"(goal ≤ 1.10: {'met' if v['ratio'] <= 1.10 else 'missed'}); {need} (goal ≤ 70 %: "
                     f"{'met' if v['needed'] is not None and v['needed'] <= 0.70 else 'missed'}).")
    best = {m: min((lb for _, lb in [(0, x[0]) for x in VARIANTS]), key=lambda lb: verdict[(m, lb)]["rmse30"])
            for m in MODELS}
    closed = {m: (verdict[(m, "random")]["ratio"] - verdict[(m, "tmd")]["ratio"]) / (verdict[(m, "random")]["ratio"] - 1)
              for m in MODELS}
    V.append("* Lowest mean RMSE at 30 %: " + "; ".join(f"{m} {best[m]} ({verdict[(m, best[m])]['rmse30']:.4f})"
                                                        for m in MODELS)
             + ". No picker meets either goal. Random at 30 % is "
             + " / ".join(f"{verdict[(m, 'random')]['ratio']:.2f}" for m in MODELS)
             + " × full data (svm / rf), so the 1.10 goal asks a 30 % pick to halve that gap; the unweighted TMD "
               "coreset closes " + " / ".join(f"{100 * closed[m]:.0f} %" for m in MODELS) + " of it.")
    pubm = {c: np.nanmean([pub.get((c, s), np.nan) for s in sets]) for c in ("svm_ecfp", "rf_ecfp", "gbm_ecfp",
                                                                           "chemprop_v2", "gcn", "mpnn_moleculeace")}
    V.append("* Published full-data means over these sets: " + ", ".join(f"{c} {v:.3f}" for c, v in pubm.items())
             + ".")
    V.append("")
    L[verdict_at:verdict_at] = V
    out("## Commands")
    out("")
    out("One process, one core (`taskset -c 0`), one BLAS / OpenMP / numba thread, on the shared 2-core CPU machine "
        "(no GPU lent):")
    out("")
    out("    OMP_NUM_THREADS=1 taskset -c 0 .venv/bin/tmdsub experiment --profile molecules --models svm,rf \\")
    out("        --methods tmd,random,maxmin,fp-kmedoids --fractions 0.05,0.1,0.2,0.3 --trials 3 --workers 1 \\")
    out("        --no-report --datasets <the sets above, smallest first>")
    out("    OMP_NUM_THREADS=1 taskset -c 0 .venv/bin/python benchmarks/molecules_models_summary.py fullrf")
    out("    # a later session: the SVM's trials 3 and 4 (the same command with --models svm --trials 5, on core 1)")
    out(f"    .venv/bin/python benchmarks/molecules_models_summary.py summary --trials {a.trials}")
    out("")
    same = same_picks()
    out("The forest's rows at the budgets were already committed by an earlier session (5 trials), so the run above "
        "trained only the SVM, on picks made again here (the cache had gone) from a TMD matrix recomputed on one "
        "thread. Selections whose svm row and forest row differ in k or in the certificate ε (relative 1e-9): "
        + "; ".join(f"{meth} {c[1]} of {c[0]} (largest relative ε difference {c[2]:.1e})" for meth, c in
                    sorted(same.items()))
        + ". Random, MaxMin and fp-kmedoids reproduce exactly; some TMD selections do not: the recomputed matrix "
        "differs from the first in the last bits (summation order), and FasterPAM presumably stops in another local "
        "optimum of about the same ε (either side). The SVM is "
        "deterministic: its trials differ only by the seeded pickers' picks.")
    text = "\n".join(L) + "\n"
    if a.write:
        (RESULTS / "models_summary.md").write_text(text, encoding="utf-8")
    print(text)


#: The GIN's pickers in the budget rows (every clustering picker τ-weighted; TMD also unweighted).
GIN_ENTRIES = (("tmd τ", "tmd", True), ("tmd", "tmd", False), ("random", "random", False),
               ("maxmin", "maxmin", False), ("fp-kmedoids τ", "fp-kmedoids", True), ("leader τ", "leader", True),
               ("butina τ", "butina", True), ("scaffold τ", "scaffold", True), ("feature τ", "feature", True),
               ("wl τ", "wl", True))


def cmd_gin(a) -> None:
    """The GIN's budget rows (5 trials, the molecules benchmark) against its full-data rows (``full_data.csv``,
    ``moleculeace_models.py run --models gin``): the same two goals as the fingerprint models', on the sets that have
    both; writes ``gin_summary.md``."""
    budget_vs_full("gin", GIN_ENTRIES, "The GIN at a budget against the same GIN on all the data (issue 53)",
                   "every clustering picker τ-weighted, TMD also unweighted", "no GIN is published",
                   ["Commands: `benchmarks/moleculeace_models.py run --models gin` (full data, see full_data.md), then",
                    "`python benchmarks/molecules_models_summary.py gin`. The budget rows are the committed GIN rows "
                    "of the", "molecules benchmark (docs/molecules-benchmark.md), trained with the same options as "
                    "the full-data row."])


def cmd_chemprop(a) -> None:
    """chemprop's budget rows (the molecules benchmark's chemprop rows, trained on a lent GPU by
    ``benchmarks/molecules_gpu.py``) against its full-data rows; writes ``chemprop_summary.md``."""
    budget_vs_full("chemprop", VARIANTS, "chemprop at a budget against the same chemprop on all the data (issue 53)",
                   "like for like: TMD and fp-kmedoids τ-weighted and unweighted, Random and MaxMin unweighted",
                   "chemprop v2 is the chemprop authors' run",
                   ["Commands: `benchmarks/molecules_gpu.py pack`, `run`, `merge`: the budget rows of the 15 largest "
                    "sets on the lent H200, of the 15 smaller ones on this CPU (`pack --only-trials 1 --by-set "
                    "--no-full`, `run --workers 1` under `taskset -c 0` / `-c 1`: 9 sets in one run, 6 in two more); full data by "
                    "`benchmarks/moleculeace_models.py run --models chemprop` (the 21 smallest sets on this CPU) and "
                    "by `molecules_gpu.py` (the 9 largest, on the H200: full_data.csv's `settings` says which); then "
                    "`python benchmarks/molecules_models_summary.py chemprop`. chemprop's own defaults (50 epochs, "
                    "hidden 300, depth 3), the registered `chemprop` model with the benchmark's options."])


def cmd_gbm(a) -> None:
    """Gradient boosting's budget rows (one trial, the sets the CPU allowed) against its full-data rows; writes
    ``gbm_summary.md``."""
    budget_vs_full("gbm", VARIANTS, "Gradient boosting at a budget against the same model on all the data (issue 53)",
                   "like for like: TMD and fp-kmedoids τ-weighted and unweighted, Random and MaxMin unweighted",
                   "MoleculeACE's GBM on ECFP",
                   ["Commands: `OMP_NUM_THREADS=1 taskset -c 1 tmdsub experiment --profile molecules --models gbm "
                    "--methods tmd,random,maxmin,fp-kmedoids --fractions 0.05,0.1,0.2,0.3 --trials 1 --workers 1 "
                    "--no-report --datasets <the 30 sets, smallest first>` (stopped when the session's CPU time was "
                    "spent), full data by `benchmarks/moleculeace_models.py run --models gbm`; then "
                    "`python benchmarks/molecules_models_summary.py gbm`."], published_col="gbm_ecfp")


def budget_vs_full(model: str, entries, title: str, pickers: str, published_note: str, commands: list,
                   published_col: str | None = None) -> None:
    """One model's budget rows (every trial there is) against its full-data rows (``full_data.csv``), on the sets
    that have every (picker, budget) and a full-data row; writes ``<model>_summary.md``.  ``published_col``: a
    published column to quote after ``published_note`` (its mean over the same sets)."""
    rmse = defaultdict(list)
    for path in sorted(RESULTS.glob("ACE-*.csv")):
        for r in _read(path):
            if r["model"] == model:
                rmse[(r["dataset"], r["method"], r["weighted"] == "true", round(float(r["fraction"]), 6))].append(
                    float(r["rmse"]))
    full = defaultdict(list)
    for r in _read(RESULTS / "full_data.csv"):
        if r["model"] == model:
            full[r["dataset"]].append(float(r["rmse"]))
    sets = sorted(d for d in full if all(rmse.get((d, m, w, f)) for _, m, w in entries for f in FRACTIONS))
    if not sets:
        sys.exit(f"no set has both {model}'s budget rows and its full-data row")
    fd = np.array([np.mean(full[d]) for d in sets])
    pub = published(sets)
    shown = {"gin": "GIN"}.get(model, model)
    per = {(lb, f): np.array([np.mean(rmse[(d, m, w, f)]) for d in sets]) for lb, m, w in entries
           for f in FRACTIONS}
    trials = sorted({len(rmse[(d, m, w, f)]) for d in sets for _, m, w in entries for f in FRACTIONS})
    mean_pub = {c: f"{np.nanmean([pub.get((c, d), np.nan) for d in sets]):.3f}"
                for c in ("gcn", "chemprop_v2", "svm_ecfp", published_col) if c}
    note = published_note + (f": {mean_pub[published_col]}" if published_col else "")
    plural = "s" if trials != [1] else ""
    L = [f"# {title}", "",
         f"The molecules benchmark's {shown} rows ({'/'.join(map(str, trials))} trial{plural}, budgets 5–30 %, "
         f"{pickers}) "
         f"over the **{len(sets)} sets** that have the same {shown} at 100 % of the train split (`full_data.csv`, "
         "one seed): " + ", ".join(d.replace("ACE-", "") for d in sets) + ".",
         "", f"Full data: ours **{np.mean(fd):.3f}** mean test RMSE; published on the same sets: GCN "
         f"{mean_pub['gcn']}, chemprop v2 {mean_pub['chemprop_v2']}, SVM {mean_pub['svm_ecfp']} ({note}).", "",
         "| picker | 5 % | 10 % | 20 % | 30 % | RMSE 30 % / full data (goal ≤ 1.10) | sets ≤ 1.10 | labels to reach "
         "Random's 30 % RMSE (mean curve; goal ≤ 70 %) |", "|---|---|---|---|---|---|---|---|"]
    target = float(np.mean(per[("random", 0.3)]))
    for lb, _, _ in entries:
        ratio = per[(lb, 0.3)] / fd
        b = labels_needed([float(np.mean(per[(lb, f)])) for f in FRACTIONS], target)
        need = f"{100 * b / 0.3:.0f} % ({100 * (1 - b / 0.3):.0f} % saved)" if b is not None else "not within 30 %"
        L.append(f"| {lb} | " + " | ".join(f"{np.mean(per[(lb, f)]):.3f}" for f in FRACTIONS)
                 + f" | {np.mean(ratio):.3f} | {int((ratio <= 1.10).sum())}/{len(sets)} | {need} |")
    L += ["", "Cells (set × budget) where the TMD coreset has the lower mean RMSE than Random, 5–30 %: "
          + "; ".join(f"{lb} {sum(int((per[(lb, f)] < per[('random', f)]).sum()) for f in FRACTIONS)}"
                      f"/{len(sets) * len(FRACTIONS)}" for lb in ("tmd τ", "tmd") if (lb, 0.3) in per) + ".", ""]
    L += commands
    text = "\n".join(L) + "\n"
    (RESULTS / f"{model}_summary.md").write_text(text)
    print(text)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("fullrf", help="the benchmark's 100-tree forest at 100 %% of the train split")
    p.add_argument("--datasets", nargs="*")
    p.add_argument("--trials", type=int, default=3)
    p.set_defaults(fn=cmd_fullrf)
    p = sub.add_parser("gin", help="the GIN's budget rows against its full-data rows: write gin_summary.md")
    p.set_defaults(fn=cmd_gin)
    p = sub.add_parser("chemprop", help="chemprop's budget rows against its full-data rows: chemprop_summary.md")
    p.set_defaults(fn=cmd_chemprop)
    p = sub.add_parser("gbm", help="gradient boosting's budget rows against its full-data rows: gbm_summary.md")
    p.set_defaults(fn=cmd_gbm)
    p = sub.add_parser("summary", help="print the tables, write models_summary.md")
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--no-write", dest="write", action="store_false")
    p.set_defaults(fn=cmd_summary)
    a = ap.parse_args(argv)
    a.fn(a)


if __name__ == "__main__":
    main()
