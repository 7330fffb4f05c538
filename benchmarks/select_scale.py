"""Select at growing pool sizes: wall, CPU and peak RSS of ``tmdsub select`` (TMD coreset, certified) and of
RDKit's MaxMin picker on the same training pool and k, measured in one run.

Usage::

    python benchmarks/select_scale.py --store <ws>/data/graphs/MOSES.parquet --sizes 200000,1584663 \\
        --fraction 0.01 --part-size 1000 [--maxmin] [--workdir /tmp/select_scale]

For each size n, a store of the first n molecules of ``--store`` is written (row group by row group) into its own
workspace (``--name``: datasets ``<name>_<n>``, default MOSES), then

* ``tmdsub select MOSES_<n> --method tmd --fraction f --part-size m`` runs there under ``/usr/bin/time -v``
  (a fresh part cache: nothing reused), as a user types it (defaults otherwise: 2 worker processes,
  ``--max-pairs auto``);
* with ``--maxmin``, RDKit's ``MaxMinPicker().LazyBitVectorPick`` on ECFP4 (Morgan radius 2, 2048 bits;
  :func:`tmdlib.chem._pickers.maxmin`) on the same training pool (the pipeline's split) and k, in its own process
  under ``/usr/bin/time -v`` -- the tool a chemist would otherwise run, without a certificate.

Peak RSS is GNU time's "Maximum resident set size" of the command (its largest process: for ``tmdsub select``
the client, whose pool memory is what grows with n; the worker processes hold one part each).  The machine must
be otherwise idle.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TMDSUB = Path(sys.executable).with_name("tmdsub")


def head_store(src: Path, dst: Path, n: int) -> None:
    """The first ``n`` rows of a graph store, written a row group at a time (schema and metadata kept)."""
    import pyarrow.parquet as pq

    if dst.exists() and pq.ParquetFile(dst).metadata.num_rows == n:
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    pf = pq.ParquetFile(src)
    tmp = dst.with_suffix(".tmp")
    left = n
    with pq.ParquetWriter(tmp, pf.schema_arrow) as out:
        for g in range(pf.num_row_groups):
            if left <= 0:
                break
            table = pf.read_row_group(g)
            table = table.slice(0, min(left, table.num_rows))
            out.write_table(table)
            left -= table.num_rows
    tmp.replace(dst)


def timed(cmd: list[str], cwd: Path, log: Path) -> dict:
    """Run ``cmd`` under ``/usr/bin/time -v``; wall, CPU (user + sys) and peak RSS from its report."""
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        rc = subprocess.call(["/usr/bin/time", "-v", *cmd], cwd=cwd, stdout=fh, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t0
    text = log.read_text()
    if rc != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({rc}); see {log}")

    def field(name):
        m = re.search(rf"{re.escape(name)}: ([\d.]+)", text)
        return float(m[1]) if m else float("nan")

    return {"wall_s": wall, "cpu_s": field("User time (seconds)") + field("System time (seconds)"),
            "rss_gb": field("Maximum resident set size (kbytes)") / 2**20, "log": str(log)}


def maxmin_main(store: str, fraction: float, seed: int, test_fraction: float) -> None:
    """(child) MaxMin on the training pool of ``store``: JSON with k, n and the fingerprint / pick seconds."""
    from tmdlib.store import store_segments, store_smiles, store_split
    from tmdlib.chem import maxmin
    from tmdlib.select import budget_to_k

    import pyarrow.parquet as pq

    n_all = pq.ParquetFile(store).metadata.num_rows
    train, _ = store_split(store, store_segments(store, n_all), test_fraction, seed)
    smiles = store_smiles(store, train)
    k = budget_to_k(len(smiles), fraction=fraction)
    t0 = time.process_time()
    maxmin(smiles, k, seed=seed)  # fingerprints (ECFP4) and picking
    print(json.dumps({"n_train": len(smiles), "k": k, "maxmin_cpu_s": time.process_time() - t0}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True, type=Path)
    ap.add_argument("--sizes", default="200000,1584663")
    ap.add_argument("--fraction", type=float, default=0.01)
    ap.add_argument("--part-size", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--maxmin", action="store_true")
    ap.add_argument("--skip-tmd", action="store_true")
    ap.add_argument("--name", default="MOSES", help="dataset names are <name>_<n> (e.g. MOSESX, the constructed "
                                                     "store of benchmarks/ten_million.py)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/select_scale"))
    args = ap.parse_args()
    env = {**os.environ, "PREFECT_LOGGING_LEVEL": os.environ.get("PREFECT_LOGGING_LEVEL", "WARNING")}
    os.environ.update(env)
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        name = f"{args.name}_{n}"
        ws = args.workdir / name
        store = ws / "data" / "graphs" / f"{name}.parquet"
        head_store(args.store, store, n)
        row = {"n": n}
        if not args.skip_tmd:
            cache = ws / "cache"
            subprocess.call(["rm", "-rf", str(cache), str(ws / "data" / "selection")])
            row["tmd"] = timed([str(TMDSUB), "select", name, "--method", "tmd", "--fraction", str(args.fraction),
                                "--part-size", str(args.part_size), "--workers", str(args.workers),
                                "--cache-dir", str(cache)], ws, ws / "select_tmd.log")
            sel = json.loads((ws / "data" / "selection" / name / "selection.json").read_text())
            row["tmd"].update({"n_train": sel["n_train"], "k": sel["k"], "epsilon_mean": sel["epsilon_mean"],
                               "pairs": sel["pairs_computed"], "parts": sel["engine_info"].get("parts")})
        if args.maxmin:
            log = ws / "select_maxmin.log"
            row["maxmin"] = timed([sys.executable, __file__, "_maxmin", str(store), str(args.fraction)], ws, log)
            line = [ln for ln in log.read_text().splitlines() if ln.startswith("{")]
            row["maxmin"].update(json.loads(line[-1]))
        rows.append(row)
        print(json.dumps(row), flush=True)
    base = rows[0]
    print("\n| n molecules | method | n_train | k | wall s | CPU s | peak RSS GB | RSS / first size | ε / n |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        for m in ("tmd", "maxmin"):
            if m in row:
                r = row[m]
                ratio = r["rss_gb"] / base[m]["rss_gb"] if m in base else float("nan")
                eps = f"{r['epsilon_mean']:.1f}" if "epsilon_mean" in r else "—"
                print(f"| {row['n']:,} | {m} | {r['n_train']:,} | {r['k']:,} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | "
                      f"{r['rss_gb']:.2f} | {ratio:.2f} | {eps} |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_maxmin":
        maxmin_main(sys.argv[2], float(sys.argv[3]), 0, 0.2)
    else:
        main()
