"""The pool benchmark (issue 60): pickers compared where users are -- the whole set is the pool.

In production the pool is everything, and the model is for the molecules that were not picked.  Each set (the 30
MoleculeACE sets and the shipped molecule sets ogbg-molbace / ogbg-molbbbp) is used whole as an unlabelled pool: an
audit sample is drawn as in production (:func:`tmdlib.select.audit.audit_members`, ``labels.audit: auto``) and never
picked or trained on; a strategy picks a budget of the rest (5 / 10 / 20 %), in one shot or in rounds; one model per
row is trained on the picks' labels only; it is scored on every pool molecule that was neither picked nor in the audit
sample (RMSE for regression, ROC-AUC for classes).  The protocol is :mod:`tmdlib.experiment.pool`.

    .venv/bin/python benchmarks/pool_benchmark.py prepare              # whole-pool TMD matrices + ECFP4 counts (cached)
    .venv/bin/python benchmarks/pool_benchmark.py run [--sets ...] [--models svm rf] [--strategies ...]
    .venv/bin/python benchmarks/pool_benchmark.py control              # the Random control's verdicts (control.csv)
    .venv/bin/python benchmarks/pool_benchmark.py control-report       # right / wrong / undecided per family
    .venv/bin/python benchmarks/pool_benchmark.py summary              # reports/results/pool/summary.md

``run`` appends rows to ``reports/results/pool/<set>.csv`` as soon as a set's cell is done and skips rows already
there (resumable).  One BLAS / OpenMP thread per process (set before numpy loads).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "reports" / "results" / "pool"
CACHE = ROOT / "tmp" / "pool_benchmark"
SHIPPED = ("ogbg-molbace", "ogbg-molbbbp")
#: The series and property pools' members (committed: the pools are data, cut once from shipped files).
POOLS = RESULTS / "pools"


def all_sets(family: str | None = None) -> list[str]:
    """Smallest first (a partial run covers the most sets); every family, or one (``tmdlib.experiment.families``)."""
    from tmdlib.experiment.families import family_of
    from tmdlib.experiment.molecules import dataset_sizes

    names = list(dataset_sizes()) + list(SHIPPED) + sorted(p.stem for p in POOLS.glob("*.csv"))
    return sorted((n for n in names if family is None or family_of(n) == family), key=lambda n: (_size(n), n))


def _size(name: str) -> int:
    from tmdlib.datasets import DATASETS

    if name in DATASETS:
        return DATASETS[name].num_graphs
    with open(POOLS / f"{name}.csv", encoding="utf-8") as fh:
        return sum(1 for _ in fh) - 1


def families(threads: int) -> None:
    """Cut the series pools (the largest Butina cluster of each target set, when it holds ``SERIES_MIN``) and the
    property pools (MOSES subsets with RDKit-computed properties) into ``POOLS/<name>.csv`` (smiles, y, source_row:
    the row in the source file); an existing pool file is kept (resumable)."""
    import csv
    import gzip

    from tmdlib.experiment import families as F
    from tmdlib.experiment.molecules import dataset_sizes

    POOLS.mkdir(parents=True, exist_ok=True)

    def write(name, smiles, y, rows):
        tmp = POOLS / f".{name}.csv.tmp"
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["smiles", "y", "source_row"])
            w.writerows([s, repr(float(v)), int(r)] for s, v, r in zip(smiles, y, rows))
        tmp.replace(POOLS / f"{name}.csv")

    for ace in sorted(dataset_sizes()):
        name = F.SERIES_PREFIX + ace.removeprefix("ACE-")
        src = ROOT / "data" / "raw" / "MoleculeACE" / f"{ace.removeprefix('ACE-')}.csv"
        if (POOLS / f"{name}.csv").is_file():
            continue
        rows = list(csv.DictReader(open(src, newline="", encoding="utf-8")))
        members = F.series_members([r["smiles"] for r in rows])
        print(f"{name}: largest series {members.size} of {len(rows)}", flush=True)
        if members.size >= F.SERIES_MIN:
            write(name, [rows[i]["smiles"] for i in members], [float(rows[i]["y"]) for i in members], members)
    with gzip.open(ROOT / "data" / "raw" / "MOSES" / "train.csv.gz", "rt", encoding="utf-8") as fh:
        moses = [r["SMILES"] for r in csv.DictReader(fh)]
    for i, prop in enumerate(F.PROPERTIES):
        name = F.PROPERTY_PREFIX + prop
        if (POOLS / f"{name}.csv").is_file():
            continue
        members = F.property_pool_members(len(moses), i)
        smiles = [moses[j] for j in members]
        y = F.property_values(smiles, prop)
        keep = np.flatnonzero(np.isfinite(y))
        write(name, [smiles[j] for j in keep], y[keep], members[keep])
        print(f"{name}: {keep.size} molecules, {F.PROPERTIES[prop]} (computed)", flush=True)


def prepare(name: str, threads: int, tmd: bool = True) -> dict:
    """The whole set as a pool: SMILES, labels and ECFP4 counts (``<name>.npz``), and the exact TMD matrix
    (``<name>.tmd.npy``, skipped with ``tmd=False``: the fingerprint strategies run without it, their ε unknown),
    cached as plain arrays."""
    from tmdlib.experiment.pool import load_pool

    path = CACHE / f"{name}.npz"
    mpath = CACHE / f"{name}.tmd.npy"
    if path.is_file() and (mpath.is_file() or not tmd):
        return {"name": name, "cached": True}
    from tmdlib import tmd_matrix
    from tmdlib.chem import ecfp4_counts
    from tmdlib.experiment._grid import DEPTH, WEIGHTS

    p = load_pool(name, str(ROOT / "data" / "raw"), csv_path=POOLS / f"{name}.csv" if _is_cut(name) else None)
    CACHE.mkdir(parents=True, exist_ok=True)
    seconds = float("nan")
    if tmd:
        t0 = time.perf_counter()
        D = tmd_matrix(p["ds"], DEPTH, WEIGHTS, num_threads=threads)
        seconds = time.perf_counter() - t0
        tmp = mpath.with_suffix(".tmp.npy")
        np.save(tmp, D)
        tmp.replace(mpath)
    if not path.is_file():
        tmp = path.with_suffix(".tmp.npz")
        np.savez_compressed(tmp, smiles=np.array(p["smiles"], dtype=str), y=p["y"], graph_ids=p["graph_ids"],
                            counts=ecfp4_counts(p["smiles"]), task=np.array(p["task"]), seconds=np.array(seconds))
        tmp.replace(path)
    return {"name": name, "cached": False, "n": len(p["y"]), "seconds": round(seconds, 1)}


def _is_cut(name: str) -> bool:
    from tmdlib.experiment.families import family_of

    return family_of(name) in ("series", "property")


def load(name: str) -> dict:
    with np.load(CACHE / f"{name}.npz", allow_pickle=False) as z:
        out = {k: z[k] for k in z.files}
    mpath = CACHE / f"{name}.tmd.npy"
    out["tmd"] = np.load(mpath, mmap_mode="r") if mpath.is_file() else None  # (prepare --no-tmd)
    out["task"] = str(out["task"])
    out["smiles"] = out["smiles"].tolist()
    out["name"] = name
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("families", help="cut the series and property pools (reports/results/pool/pools/)")
    f.add_argument("--threads", type=int, default=2)
    p = sub.add_parser("prepare")
    p.add_argument("--sets", nargs="*")
    p.add_argument("--family", help="every pool of one family (target sets, series, property, classification)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-tmd", action="store_true", help="fingerprints only (the TMD matrix later)")
    r = sub.add_parser("run")
    r.add_argument("--sets", nargs="*")
    r.add_argument("--family", help="every pool of one family (target sets, series, property, classification)")
    r.add_argument("--models", nargs="*", default=["svm", "rf"])
    from tmdlib.experiment.pool import notation

    r.add_argument("--strategies", nargs="*", help=notation())
    r.add_argument("--random-seeds", type=int, default=10)
    r.add_argument("--trials", type=int, default=3)
    r.add_argument("--long", action="store_true",
                   help="also the budgets past 20 %% (30, 40, 60 %%): the curve that labels-to-a-target reads")
    r.add_argument("--largest-first", action="store_true",
                   help="walk the sets largest first (a second process beside one walking smallest first)")
    c = sub.add_parser("control", help="the Random control's verdict in round two, per set (control.csv)")
    c.add_argument("--sets", nargs="*")
    c.add_argument("--strategy", default=None, help="default: tmd-rounds' default (first>next/difficulty)")
    c.add_argument("--share", type=float, default=0.2)
    c.add_argument("--trials", type=int, default=3)
    cr = sub.add_parser("control-report", help="the control's right / wrong / undecided per family (control.md)")
    cr.add_argument("--truth", nargs="*", default=[],
                    help="more folders of benchmark rows to read the truth from (default: the results folder)")
    sub.add_parser("summary")
    a = ap.parse_args(argv)
    if a.cmd == "families":
        families(a.threads)
        return 0
    if a.cmd == "prepare":
        for name in a.sets or all_sets(a.family):
            print(prepare(name, a.threads, not a.no_tmd), flush=True)
        return 0
    if a.cmd == "run":
        from tmdlib.experiment import pool as P

        RESULTS.mkdir(parents=True, exist_ok=True)
        strategies = a.strategies or list(P.STRATEGIES)
        names = a.sets or all_sets(a.family)
        for name in (names[::-1] if a.largest_first else names):
            if not (CACHE / f"{name}.npz").is_file():
                print(f"{name}: not prepared, skipped", flush=True)
                continue
            claim = RESULTS / f".{name}.running"
            try:  # one process per set at a time (two processes may walk the sets from both ends)
                fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                print(f"{name}: another process is on it ({claim.name}), skipped", flush=True)
                continue
            os.close(fd)
            out = RESULTS / f"{name}.csv"
            done = {P.row_key(r) for r in P.read_rows(out)}
            t0 = time.perf_counter()
            n_new = 0
            for rows in P.run_set(load(name), a.models, strategies, random_seeds=a.random_seeds, trials=a.trials,
                                  skip=done, budgets=P.BUDGETS + (P.LONG if a.long else ())):
                P.append_rows(out, rows)
                n_new += len(rows)
            claim.unlink()
            print(f"{name}: {n_new} rows in {time.perf_counter() - t0:.0f} s", flush=True)
        return 0
    if a.cmd == "control":
        import csv

        from tmdlib.experiment import pool as P
        from tmdlib.select.rounds import default_strategy

        strategy = a.strategy or default_strategy()
        out = RESULTS / "control.csv"
        done = set()
        if out.is_file():
            done = {(r["dataset"], r["model"], r["strategy"], int(r["trial"])) for r in csv.DictReader(open(out))}
        for name in a.sets or all_sets():
            if not (CACHE / f"{name}.npz").is_file():
                continue
            data = load(name)
            model = "svm" if str(data["task"]) == P.REGRESSION else "rf"
            rows = P.run_control(data, strategy, model, a.share, a.trials, skip=done)
            new = not out.is_file()
            with open(out, "a", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=P.CONTROL_COLUMNS)
                if new:
                    w.writeheader()
                w.writerows(rows)
            print(f"{name}: {len(rows)} control rows", flush=True)
        return 0
    if a.cmd == "control-report":
        import csv

        from tmdlib.experiment.pool import read_rows
        from tmdlib.reporting.pool import collect, control_lines

        seen, rows = set(), []
        for d in [RESULTS] + [Path(t) for t in a.truth]:
            for f in sorted(d.glob("*.csv")):
                if not f.name.startswith("control") and f.name not in seen:
                    seen.add(f.name)
                    rows += read_rows(f)
        with open(RESULTS / "control.csv", newline="", encoding="utf-8") as fh:
            text = "\n".join(control_lines(list(csv.DictReader(fh)), collect(rows)))
        (RESULTS / "control.md").write_text("# " + text.lstrip("# ") + "\n", encoding="utf-8")
        print(text)
        return 0
    if a.cmd == "summary":
        from tmdlib.reporting.pool import write_summary

        print(write_summary(RESULTS))
        return 0
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
