"""MOSES ingest at several pool sizes: wall, CPU and peak RSS of ``tmdsub ingest``, against rdkit's parsing floor.

Usage::

    python benchmarks/ingest_scale.py --sizes 200000,1584663 [--workers 2] [--baseline /tmp/old-checkout]

For each size ``n`` it runs ``tmdsub ingest MOSES --limit n --workers W --standin S --out <tmp>`` under ``/usr/bin/time -v``
(the command a user types; ``n`` = 1,584,663 is the whole pool) and prints wall seconds, CPU seconds (user + system
of the process and its worker processes) and the peak RSS of the largest process.  First it measures the floor:
``Chem.MolFromSmiles`` alone on the same first ``max(sizes)`` molecules in ``W`` processes (wall and CPU), and the
Crippen logP of the stand-in label on a 20,000-molecule sample (CPU per molecule), so the ratio of ingest to bare
parsing is printed from one run.  ``--baseline DIR`` also times ``python -m flows ingest`` from an older checkout
(e.g. ``git worktree add /tmp/old <commit>``) at the smallest size.  Run it on an otherwise idle machine.
"""
from __future__ import annotations

import argparse
import gzip
import itertools
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MOSES = ROOT / "data" / "raw" / "MOSES" / "train.csv.gz"


def _smiles(n: int) -> list[str]:
    with gzip.open(MOSES, "rt") as fh:
        next(fh)
        return [line.split(",", 1)[0] for line in itertools.islice(fh, n)]


def _parse(smiles: list[str]) -> tuple[int, float]:
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    start = time.process_time()
    ok = sum(Chem.MolFromSmiles(s) is not None for s in smiles)
    return ok, time.process_time() - start


def floor(n: int, workers: int) -> dict:
    """rdkit's parse of the first ``n`` molecules in ``workers`` processes: wall and CPU seconds."""
    smiles = _smiles(n)
    parts = [smiles[i::workers] for i in range(workers)]
    start = time.perf_counter()
    with ProcessPoolExecutor(workers) as pool:
        results = list(pool.map(_parse, parts))
    wall = time.perf_counter() - start
    from rdkit import Chem
    from rdkit.Chem import Crippen

    sample = [Chem.MolFromSmiles(s) for s in smiles[:20_000]]
    t = time.process_time()
    for mol in sample:
        Crippen.MolLogP(mol)
    logp = (time.process_time() - t) / len(sample)
    return {"n": sum(r[0] for r in results), "wall": wall, "cpu": sum(r[1] for r in results), "logp_ms": 1e3 * logp}


def timed(cmd: list[str], cwd: Path) -> dict:
    """Run ``cmd`` under ``/usr/bin/time -v``: wall, user + system CPU (with children) and peak RSS (GB)."""
    start = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-v", *cmd], cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    field = {k: float(v) for k, v in re.findall(r"^\s*(User time \(seconds\)|System time \(seconds\)|"
                                                 r"Maximum resident set size \(kbytes\)): ([\d.]+)$",
                                                 proc.stderr, re.M)}
    return {"wall": wall, "cpu": field["User time (seconds)"] + field["System time (seconds)"],
            "rss_gb": field["Maximum resident set size (kbytes)"] / 1024 ** 2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="200000,1584663")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--standin", default="none", help="none (the default: an unlabelled pool) | logp (the "
                        "benchmark stand-in, a third of the CPU before issue 55)")
    parser.add_argument("--baseline", type=Path, help="an older checkout to time at the smallest size")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    base = floor(max(sizes), args.workers)
    print(f"floor: MolFromSmiles on {base['n']:,} molecules in {args.workers} processes: {base['wall']:.1f} s wall, "
          f"{base['cpu']:.1f} CPU s ({1e3 * base['cpu'] / base['n']:.3f} ms per molecule); Crippen logP "
          f"(the stand-in label) {base['logp_ms']:.3f} ms per molecule", flush=True)
    floor_per_mol = base["wall"] / base["n"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = [("this checkout", ROOT, n) for n in sizes]
        if args.baseline:
            runs.insert(0, (f"baseline {args.baseline}", args.baseline.resolve(), min(sizes)))
        for label, where, n in runs:
            out = Path(tmp) / f"MOSES-{n}.parquet"
            cmd = [sys.executable, "-m", "flows", "ingest", "MOSES", "--limit", str(n), "--workers",
                   str(args.workers), "--out", str(out)] + (["--standin", args.standin] if where == ROOT else [])
            env_root = os.environ.get("PYTHONPATH")
            os.environ["PYTHONPATH"] = str(where) + (os.pathsep + env_root if env_root else "")
            try:
                r = timed(cmd, where)
            finally:
                if env_root is None:
                    os.environ.pop("PYTHONPATH")
                else:
                    os.environ["PYTHONPATH"] = env_root
            r.update(label=label, n=n, ratio=r["wall"] / (floor_per_mol * n), mb=out.stat().st_size / 1e6)
            out.unlink()
            rows.append(r)
            print(f"{label}: n = {n:,}: {r['wall']:.1f} s wall, {r['cpu']:.1f} CPU s, peak RSS {r['rss_gb']:.2f} GB, "
                  f"store {r['mb']:.0f} MB; {r['ratio']:.2f} x the parse floor's wall", flush=True)
    print("\n| code | molecules | wall s | CPU s | peak RSS GB | wall / parse floor |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['label']} | {r['n']:,} | {r['wall']:.1f} | {r['cpu']:.1f} | {r['rss_gb']:.2f} | "
              f"{r['ratio']:.2f} |")
    ours = [r for r in rows if r["label"] == "this checkout"]
    if len(ours) > 1:
        print(f"\npeak RSS at n = {ours[-1]['n']:,} / at n = {ours[0]['n']:,}: "
              f"{ours[-1]['rss_gb'] / ours[0]['rss_gb']:.2f}")


if __name__ == "__main__":
    main()
