"""chemprop rows of the molecules benchmark on a lent GPU machine (issue 53): pack here, run there, merge back.

The molecules benchmark (``tmdsub experiment --profile molecules``) trains every model on every pick on this machine;
chemprop costs about 0.23 CPU s per training molecule here (50 epochs), so its budget rows and its full-data rows on
the largest sets go to a GPU machine when one is lent.  The protocol is the benchmark's own: the picks are the
benchmark's cached picks (:func:`tasks.molecules.select_method`), each row is made by
:func:`tmdlib.experiment.molecules.run_cell` (the registered ``chemprop`` model, :func:`model_options`), the
full-data rows by ``benchmarks/moleculeace_models.py``'s :func:`fit_predict`; only the machine differs (the
``device`` column says which)::

    .venv/bin/python benchmarks/molecules_gpu.py pack --trials 5        # here: matrices, picks, jobs.json.gz
    python3 benchmarks/molecules_gpu.py run --jobs .devrun/jobs.json.gz --out $OUT --workers 15 --deadline 420
    .venv/bin/python benchmarks/molecules_gpu.py merge DIR              # rows into the results CSVs

``pack`` plans only the rows missing from ``reports/results/molecules/<SET>.csv`` and ``full_data.csv`` (resumable);
``run`` runs the jobs longest first (full data, then trial 0 of every set, then trial 1, ...) on a pool of spawned
processes sharing the GPU, appends each finished row to ``DIR/budget.csv`` / ``DIR/full.csv`` at once, stops starting
jobs at ``--deadline`` seconds and returns what finished; ``merge`` adds those rows (a row already there is kept).
"""
from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import sys
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
RESULTS = ROOT / "reports" / "results" / "molecules"
#: The pickers of the issue's chemprop grid: TMD (tau and unweighted), Random, MaxMin, fingerprint k-medoids.
METHODS = ("tmd", "random", "maxmin", "fp-kmedoids")


# ---------------------------------------------------------------------------------------------------------- pack
def cmd_pack(args) -> None:
    import numpy as np

    from moleculeace_models import read_csv
    from tasks.molecules import MoleculeResults, load_picks, load_set, prepare, select_method
    from tmdlib.experiment.molecules import PROFILE, dataset_sizes, plan_cells

    profile = {**PROFILE, "methods": list(args.methods), "trials": int(args.trials)}
    names = args.datasets or list(dataset_sizes())
    full_done = {(r["dataset"], r["model"]) for r in read_csv(RESULTS / "full_data.csv")}
    sets, jobs = {}, []
    for name in names:
        t0 = time.perf_counter()
        prep = prepare.fn(name, "data/raw", "reports/cache", args.threads)
        for m in profile["methods"]:
            select_method.fn(name, "data/raw", prep["paths"], m, profile["fractions"], profile["trials"])
        specs = [s for s in plan_cells(profile, name, MoleculeResults(str(RESULTS), name).done, ["chemprop"])
                 if s["trial"] < (args.only_trials or profile["trials"])]
        full = args.full and (name, "chemprop") not in full_done
        if not specs and not full:
            continue
        s = load_set(name, "data/raw")
        picks = load_picks(prep["paths"], profile["methods"])
        used = {}
        for spec in specs:
            for model, weighted, fraction in spec["rows"]:
                key = (spec["method"], round(float(fraction), 6), int(spec["trial"]))
                p = picks[key]
                used["|".join(map(str, key))] = {k: p[k] for k in ("positions", "tau", "epsilon", "select_seconds")}
                jobs.append({"kind": "budget", "dataset": name, "method": spec["method"], "trial": int(spec["trial"]),
                             "rows": [[model, bool(weighted), float(fraction)]],
                             "cost": len(p["positions"]), "order": int(spec["trial"]) + 1})
        if full:
            jobs.append({"kind": "full", "dataset": name, "trial": 0, "cost": int(len(s["train"])), "order": 0})
        sets[name] = {"smiles": list(s["smiles"]), "y": np.asarray(s["y"], dtype=float).tolist(),
                      "train": np.asarray(s["train"]).tolist(), "test": np.asarray(s["test"]).tolist(),
                      "cliff": np.asarray(s["cliff"], dtype=bool).tolist(), "picks": used}
        print(f"{name}: {sum(j['dataset'] == name for j in jobs)} jobs ({time.perf_counter() - t0:.1f} s)",
              flush=True)
    # full data first, then trial 0 of every set, trial 1, ...; within each, the longest first (--by-set: set by
    # set, largest set first, so that a run cut short leaves whole sets rather than every set's largest budgets)
    rank = {n: i for i, n in enumerate(names)}
    jobs.sort(key=lambda j: (j["order"], rank[j["dataset"]] if args.by_set else 0, -j["cost"]))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with gzip.open(tmp, "wt") as f:
        json.dump({"sets": sets, "jobs": jobs}, f)
    tmp.replace(out)
    print(f"{len(jobs)} jobs over {len(sets)} sets -> {out} ({out.stat().st_size / 1e6:.1f} MB)")


# ----------------------------------------------------------------------------------------------------------- run
_SETS: dict = {}


def _init(path: str) -> None:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    for name in ("lightning", "lightning.pytorch", "pytorch_lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)
    import torch

    torch.set_num_threads(1)
    with gzip.open(path, "rt") as f:
        _SETS.update(json.load(f)["sets"])


def _job(job: dict) -> dict:
    import numpy as np

    s = _SETS[job["dataset"]]
    y = np.asarray(s["y"], dtype=np.float64)
    train, test = np.asarray(s["train"], dtype=np.int64), np.asarray(s["test"], dtype=np.int64)
    cliff = np.asarray(s["cliff"], dtype=bool)
    t0 = time.perf_counter()
    if job["kind"] == "full":
        import torch

        from moleculeace_models import fit_predict, result_row

        d = {"name": job["dataset"], "smiles": np.asarray(s["smiles"]), "y": y, "train": train, "test": test,
             "cliff": cliff}
        pred = fit_predict("chemprop", {"epochs": 50}, int(job["trial"]), d, train, test)
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        return {"kind": "full", "row": result_row(d, "chemprop", job["trial"], pred, time.perf_counter() - t0,
                                                  {"epochs": 50, "device": dev})}
    from tmdlib.experiment.molecules import run_cell

    picks = {}
    for key, p in s["picks"].items():
        method, fraction, trial = key.split("|")
        picks[(method, round(float(fraction), 6), int(trial))] = p
    spec = {"dataset": job["dataset"], "method": job["method"], "trial": job["trial"],
            "rows": [tuple(r) for r in job["rows"]]}
    rows = run_cell(spec, None, y, train, test, cliff, None, picks, smiles=s["smiles"])
    return {"kind": "budget", "rows": rows, "seconds": time.perf_counter() - t0}


def cmd_run(args) -> None:
    import concurrent.futures as cf
    import multiprocessing as mp

    t_start = time.perf_counter()
    with gzip.open(args.jobs, "rt") as f:
        jobs = json.load(f)["jobs"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / "log.txt", "a")

    def say(msg: str) -> None:
        line = f"[{time.perf_counter() - t_start:7.1f} s] {msg}"
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    from moleculeace_models import COLUMNS as FULL
    from tmdlib.experiment.molecules import COLUMNS, rows_csv

    budget_path, full_path = out / "budget.csv", out / "full.csv"
    for path, cols in ((budget_path, COLUMNS), (full_path, FULL)):
        if not path.is_file():
            path.write_text(",".join(cols) + "\n")
    say(f"{len(jobs)} jobs, {args.workers} workers, deadline {args.deadline} s")
    pool = cf.ProcessPoolExecutor(args.workers, mp_context=mp.get_context("spawn"), initializer=_init,
                                  initargs=(str(args.jobs),))
    pending, queue, done, failed = set(), list(jobs), 0, 0
    while queue or pending:
        while queue and len(pending) < 2 * args.workers and time.perf_counter() - t_start < args.deadline:
            pending.add(pool.submit(_job, queue.pop(0)))
        if not pending:
            break
        finished, pending = cf.wait(pending, timeout=30, return_when=cf.FIRST_COMPLETED)
        for fut in finished:
            try:
                res = fut.result()
            except Exception as e:  # one failed model does not stop the others; the first few are printed
                failed += 1
                if failed <= 3:
                    say(f"job failed: {type(e).__name__}: {e}")
                continue
            done += 1
            if res["kind"] == "full":
                with full_path.open("a", newline="") as f:
                    csv.DictWriter(f, fieldnames=list(FULL)).writerow(res["row"])
                say(f"full {res['row']['dataset']}: RMSE {res['row']['rmse']} ({res['row']['seconds']} s)")
            else:
                with budget_path.open("a") as f:
                    f.write(rows_csv(res["rows"]).split("\n", 1)[1])
            if done % 50 == 0:
                say(f"{done} done, {failed} failed, {len(queue)} not started")
        if failed >= 2 * args.workers and done == 0:  # the setup is broken: say so now, not after every job
            say(f"stopping: the first {failed} jobs all failed")
            break
        if time.perf_counter() - t_start > args.deadline + args.grace:
            say(f"grace over: {len(pending)} running jobs abandoned")
            break
    say(f"finished: {done} done, {failed} failed, {len(queue)} not started, {len(pending)} abandoned")
    log.close()
    for proc in list(getattr(pool, "_processes", {}).values()):  # abandoned ones too: nothing outlives the run
        proc.terminate()
    os._exit(0)


# --------------------------------------------------------------------------------------------------------- merge
def cmd_merge(args) -> None:
    from moleculeace_models import COLUMNS as FULL, append_row, read_csv
    from tasks.molecules import MoleculeResults
    from tmdlib.experiment.molecules import read_rows

    d = Path(args.dir)
    by_set: dict = {}
    for r in read_rows(str(d / "budget.csv")):  # [] when the run wrote none
        by_set.setdefault(r["dataset"], []).append(r)
    for name, rs in sorted(by_set.items()):
        store = MoleculeResults(str(RESULTS), name)
        before = len(store.rows)
        store.append(rs)
        print(f"{name}: {len(store.rows) - before} chemprop rows added ({len(rs)} in {d})")
    full = RESULTS / "full_data.csv"
    have = {(r["dataset"], r["model"], r["trial"]) for r in read_csv(full)}
    for r in read_csv(d / "full.csv"):
        if (r["dataset"], r["model"], r["trial"]) not in have:
            append_row(full, {c: r[c] for c in FULL}, "")
            print(f"full data: {r['dataset']} {r['model']} trial {r['trial']} RMSE {r['rmse']}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--datasets", nargs="*")
    p.add_argument("--methods", nargs="*", default=list(METHODS))
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--threads", type=int, default=2, help="numba threads of each set's TMD matrix")
    p.add_argument("--no-full", dest="full", action="store_false", help="no full-data jobs")
    p.add_argument("--only-trials", type=int, help="plan only trials 0 .. N-1 (the picks are still made for all)")
    p.add_argument("--by-set", action="store_true", help="within a trial, one set after the other (largest first)")
    p.add_argument("--out", default=str(ROOT / ".devrun" / "jobs.json.gz"))
    p = sub.add_parser("run")
    p.add_argument("--jobs", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--deadline", type=float, default=420.0, help="seconds after which no job is started")
    p.add_argument("--grace", type=float, default=90.0, help="seconds the running jobs get after the deadline")
    p = sub.add_parser("merge")
    p.add_argument("dir")
    args = ap.parse_args(argv)
    {"pack": cmd_pack, "run": cmd_run, "merge": cmd_merge}[args.cmd](args)


if __name__ == "__main__":
    main()
