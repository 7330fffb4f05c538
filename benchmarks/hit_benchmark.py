"""The hit benchmark (issue 68): rounds that hunt the pool's best molecules, beside the pool benchmark.

Each regression set is used whole as a pool with its audit sample (never picked), the goal ``maximize``; round one
5 % of the pool (uniform or the product's ``strat-fp``), round two to 10 % by an acquisition over a surrogate trained
on round one's labels; MolPAL's metrics (share of the true top 1 % / 5 % found, share of their mean score) and the
SVR's RMSE on the audit sample vs on the rest of the pool.  The protocol is :mod:`tmdlib.experiment.hits`; the pools
and their caches are the pool benchmark's (``benchmarks/pool_benchmark.py prepare``).

    .venv/bin/python benchmarks/hit_benchmark.py run [--family series] [--sets ...] [--strategies ...]
    .venv/bin/python benchmarks/hit_benchmark.py summary       # reports/results/hits/summary.md (the tables and the
                                                               # curves of the top 5 % found against labels spent)
    .venv/bin/python benchmarks/hit_benchmark.py moses [--n 200000] [--props logp qed] [--trials 3]
                                                               # MOSES, 1 % in three rounds (results/hits/moses.md)

``run`` writes ``reports/results/hits/<set>.csv`` (resumable: a (strategy, trial) already there is skipped).
``moses`` takes the first ``--n`` molecules of ``data/raw/MOSES/train.csv.gz`` (default all 1,584,663), their ECFP4
counts and RDKit-computed properties cached per block of 50,000 in ``tmp/moses_hits/`` (computed once, single
process), runs :func:`tmdlib.experiment.hits.moses_hits` per strategy and trial into
``reports/results/hits/moses/moses-<n>-<prop>.csv`` (resumable) and rewrites ``reports/results/hits/moses.md``.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
RESULTS = ROOT / "reports" / "results" / "hits"
FAMILIES = ("series", "property", "target sets")
MOSES_SMILES = ROOT / "data" / "raw" / "MOSES" / "train.csv.gz"
MOSES_CACHE = ROOT / "tmp" / "moses_hits"
MOSES_BLOCK = 50_000
#: The commands behind reports/results/hits/moses.md (quoted in it).
MOSES_COMMANDS = (
    "OMP_NUM_THREADS=1 .venv/bin/python benchmarks/hit_benchmark.py moses --n 200000 --props logp qed",
    "OMP_NUM_THREADS=1 .venv/bin/python benchmarks/hit_benchmark.py moses --props logp            # all 1,584,663",
    "OMP_NUM_THREADS=1 .venv/bin/python benchmarks/hit_benchmark.py moses --n 200000 --props qed logp "
    "--strategies 'random>greedy/rf'",
    "OMP_NUM_THREADS=1 .venv/bin/python benchmarks/hit_benchmark.py moses --n 200000 --props qed logp "
    "--strategies 'random>greedy/lgbm'",
    "OMP_NUM_THREADS=1 .venv/bin/python benchmarks/hit_benchmark.py moses --props qed             # all, QED",
    "OMP_NUM_THREADS=1 .venv/bin/python benchmarks/hit_benchmark.py moses --props qed --strategies 'random>greedy/rf' "
    "--trials 1",
    "OMP_NUM_THREADS=1 .venv/bin/python benchmarks/hit_benchmark.py moses --n 0                   # the report only",
)


def _rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _append_rows(out: Path, rows: list[dict], columns) -> None:
    """Rows appended to a results CSV as soon as they are done (the header when the file is new): runs resume."""
    fresh = not out.is_file()
    with open(out, "a", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=columns)
        if fresh:
            w.writeheader()
        w.writerows(rows)


def _moses_block(i: int, props) -> tuple:
    """Block ``i`` of MOSES (molecules ``[i B, (i+1) B)``): its CSR counts and properties, computed once and cached."""
    import gzip
    import itertools

    import numpy as np
    import scipy.sparse as sp

    from tmdlib.experiment.hits import moses_features

    MOSES_CACHE.mkdir(parents=True, exist_ok=True)
    fp = MOSES_CACHE / f"fp-{i:04d}.npz"
    want = [p for p in props if not (MOSES_CACHE / f"{p}-{i:04d}.npy").is_file()]
    if want or not fp.is_file():
        with gzip.open(MOSES_SMILES, "rt", encoding="utf-8") as fh:
            next(fh)  # header SMILES
            lines = [s.strip().split(",")[0] for s in itertools.islice(fh, i * MOSES_BLOCK, (i + 1) * MOSES_BLOCK)]
        X, values = moses_features(lines, want, chunk=MOSES_BLOCK)
        if not fp.is_file():
            sp.save_npz(fp, X, compressed=False)
        for p in want:
            np.save(MOSES_CACHE / f"{p}-{i:04d}.npy", values[p])
    return sp.load_npz(fp), {p: np.load(MOSES_CACHE / f"{p}-{i:04d}.npy") for p in props}


def moses(a) -> int:
    """The ``moses`` subcommand: features (cached), then the strategies' trials, then ``moses.md``."""
    import numpy as np
    import scipy.sparse as sp

    from tmdlib.experiment import hits as H

    out_dir = RESULTS / "moses"
    out_dir.mkdir(parents=True, exist_ok=True)
    if a.n:
        t0 = time.perf_counter()
        blocks = [_moses_block(i, a.props) for i in range((a.n + MOSES_BLOCK - 1) // MOSES_BLOCK)]
        X = sp.vstack([b[0] for b in blocks], format="csr")[:a.n]
        values = {p: np.concatenate([b[1][p] for b in blocks])[:a.n] for p in a.props}
        del blocks
        print(f"moses: {X.shape[0]:,} molecules, {X.nnz:,} non-zero counts ({X.data.nbytes + X.indices.nbytes:,} B) "
              f"in {time.perf_counter() - t0:.0f} s (features and properties, cached in {MOSES_CACHE})", flush=True)
        for p in a.props:
            ok = np.isfinite(values[p])
            Xp, yp = (X, values[p]) if ok.all() else (X[np.flatnonzero(ok)], values[p][ok])
            name = f"moses-{a.n}" if ok.all() else f"moses-{a.n}-{int(ok.sum())}"
            out = out_dir / f"moses-{a.n}-{p}.csv"
            done = {(r["strategy"], int(r["trial"])) for r in _rows(out)}
            for s in a.strategies:
                for trial in range(a.random_seeds if s == H.RANDOM else a.trials):
                    if (s, trial) in done:
                        continue
                    rows = H.moses_hits(Xp, yp, s, trial, name=name, prop=p)
                    _append_rows(out, rows, H.MOSES_COLUMNS)
                    last = rows[-1]
                    print(f"{name} {p} {s} trial {trial}: top 0.1 % {last['top01']:.3f}, top 1 % {last['top1']:.3f} "
                          f"after {last['k']:,}; {last['seconds']:.0f} s, peak {last['peak_mib']:,.0f} MiB", flush=True)
    rows = [r for f in sorted(out_dir.glob("*.csv")) for r in _rows(f)]
    text = ["# MOSES hit run: 1 % of the pool labelled in three rounds (issue 68)", "",
            "Generated by `benchmarks/hit_benchmark.py moses` from `reports/results/hits/moses/*.csv` (protocol: "
            "`tmdlib.experiment.hits.moses_hits`). The lab is an **RDKit-computed** property (not a measurement), "
            "maximized; shares over the pool less the audit sample. Rounds: 1/3 %, 2/3 %, 1 % of the pool "
            "(cumulative); `random>greedy/<surrogate>`: round one uniform, rounds two and three the best predicted. "
            "Per cell the mean over trials, [min–max]; RMSE and median absolute error of the surrogate trained on the "
            "labelled set, on the audit sample and on the rest of the pool (ratio in brackets); seconds: the trial's "
            "wall time after the features are loaded; peak: the process's peak resident memory (features included). "
            "Discussion: docs/hit-hunting.md, BENCHMARKS.md (hit hunting).", "",
            "Commands (2-core VM shared with other work, one process, one BLAS thread; the features of each block of "
            "50,000 molecules are computed once and cached in `tmp/moses_hits/`):", "",
            *[f"    {c}" for c in MOSES_COMMANDS], ""] + H.moses_lines(rows)
    (RESULTS / "moses.md").write_text("\n".join(text), encoding="utf-8")
    print("\n".join(text))
    return 0


def main(argv=None) -> int:
    import pool_benchmark as PB
    from tmdlib.experiment import hits as H

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--sets", nargs="*")
    r.add_argument("--family", help="series, property or 'target sets' (default: all three, smallest first)")
    r.add_argument("--strategies", nargs="*", help=H.notation())
    r.add_argument("--focus", action="store_true", help="only the strategies kept after the series pools (FOCUS)")
    r.add_argument("--random-seeds", type=int, default=10)
    r.add_argument("--trials", type=int, default=3)
    sub.add_parser("summary")
    m = sub.add_parser("moses", help="MOSES, 1 %% of the pool labelled in three rounds (issue 68)")
    m.add_argument("--n", type=int, default=1_584_663, help="the first N molecules (default all; 0: only the report)")
    m.add_argument("--props", nargs="+", default=["logp"], help="RDKit-computed properties (logp, tpsa, qed, fsp3)")
    m.add_argument("--strategies", nargs="+", default=["random", "random>greedy/ridge"])
    m.add_argument("--trials", type=int, default=3)
    m.add_argument("--random-seeds", type=int, default=3)
    a = ap.parse_args(argv)
    if a.cmd == "moses":
        return moses(a)
    from tmdlib.experiment.families import family_of

    RESULTS.mkdir(parents=True, exist_ok=True)
    if a.cmd == "run":
        names = a.sets or [n for f in ([a.family] if a.family else FAMILIES) for n in PB.all_sets(f)]
        for name in names:
            if not (PB.CACHE / f"{name}.npz").is_file():
                print(f"{name}: not prepared, skipped", flush=True)
                continue
            out = RESULTS / f"{name}.csv"
            done = {(r["strategy"], int(r["trial"])) for r in _rows(out)}
            t0 = time.perf_counter()
            data = PB.load(name)
            if data["task"] != "regression":
                continue
            rows = []
            for s in a.strategies or (H.FOCUS if a.focus else H.STRATEGIES):
                new = H.run_hits(data, family_of(name), [s], random_seeds=a.random_seeds, trials=a.trials, skip=done)
                _append_rows(out, new, H.COLUMNS)
                rows += new
            print(f"{name}: {len(rows)} rows in {time.perf_counter() - t0:.0f} s", flush=True)
        return 0
    rows = [r for f in sorted(RESULTS.glob("*.csv")) for r in _rows(f)]
    fams = [f for f in FAMILIES if any(r["family"] == f for r in rows)]
    text = ["# Hit benchmark: the best molecules found in two rounds (issue 68)", "",
            "Generated by `benchmarks/hit_benchmark.py summary` from `reports/results/hits/*.csv` "
            "(protocol: `tmdlib/experiment/hits.py`, docs/hit-hunting.md). Goal: maximize the label; "
            "Random 10 seeds, other strategies 3 trials; shares over the pool less the audit sample. Per family: "
            "the table after the second round (10 %), then the curve of the top 5 % found against labels spent "
            "after each round (the rounds the CSVs hold: 5 % and 10 %; the MOSES 1 %-in-three-rounds run of the "
            "issue is in [moses.md](moses.md), `hit_benchmark.py moses`).", ""]
    for f in fams:
        text += H.summary_lines(rows, f) + [""] + H.curve_lines(rows, f) + [""]
    (RESULTS / "summary.md").write_text("\n".join(text), encoding="utf-8")
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
