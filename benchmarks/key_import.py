"""Answers keyed as labs key them, on MOSES: SMILES and compound-id keys against graph-id keys (issue 70, item 5).

Usage::

    python benchmarks/key_import.py build --workdir /tmp/keys [--limit N] [--workers 2]
    python benchmarks/key_import.py time --workdir /tmp/keys [--answers 16045]

``build`` writes MOSES's training SMILES with a compound id (``MOSES-0000001`` ...) to a CSV and ingests it into a
graph store with the library's streamed ingest (``write_smiles_parquet``, ``id_column``): the store carries the
canonical-SMILES key index written at ingest.  It prints the ingest's wall time (not the point of this benchmark).

``time`` draws ``--answers`` molecules of the pool (seed 0; 16,045 as in the issue's MOSES walk), writes one lab
file per key -- ``graph_id``, ``Compound ID``, and ``SMILES`` written the way another tool writes them (RDKit's
random SMILES of each molecule: the canonical form must be found, not the string) -- and times
``tasks.labels.read_answer_file`` (what ``tmdsub`` runs on a lab's file) on each, one after the other in one
process, then the SMILES file once more against a copy of the store *without* the key index (the code path of a
store from before it, which canonicalises the whole pool: the issue's 5.3 min).  Each key must give the same
measurements.  Run it on an otherwise idle machine; the ratios are from one run.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MOSES = ROOT / "data" / "raw" / "MOSES" / "train.csv.gz"


def build(workdir: Path, limit: int | None, workers: int) -> None:
    from tmdlib.datasets import write_smiles_parquet

    workdir.mkdir(parents=True, exist_ok=True)
    src = workdir / "moses_ids.csv.gz"
    with gzip.open(MOSES, "rt") as fh, gzip.open(src, "wt", newline="", compresslevel=1) as out:
        next(fh)
        w = csv.writer(out)
        w.writerow(["SMILES", "Compound ID"])
        for i, line in enumerate(fh):
            if limit is not None and i >= limit:
                break
            w.writerow([line.split(",", 1)[0].strip(), f"MOSES-{i + 1:07d}"])
    start = time.perf_counter()
    stats = write_smiles_parquet(src, workdir / "MOSES.parquet", smiles_column="SMILES", id_column="Compound ID",
                                 workers=workers, name="MOSES")
    print(f"ingest: {stats['graphs']:,} molecules in {time.perf_counter() - start:.1f} s wall ({workers} workers)")


def _lab_files(workdir: Path, n_answers: int) -> tuple[dict, np.ndarray]:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    t = pq.read_table(workdir / "MOSES.parquet", columns=["graph_id", "smiles", "compound_id"])
    rng = np.random.default_rng(0)
    rows = np.sort(rng.choice(t.num_rows, size=n_answers, replace=False))
    gids = np.asarray(t.column("graph_id"))[rows]
    smiles = t.column("smiles").take(pa.array(rows)).to_pylist()
    ids = t.column("compound_id").take(pa.array(rows)).to_pylist()
    values = np.round(rng.normal(6.0, 1.0, n_answers), 3)
    written = [Chem.MolToSmiles(Chem.MolFromSmiles(s), doRandom=True) for s in smiles]
    files = {}
    for key, header, cells in (("graph_id", "graph_id", gids.tolist()), ("compound id", "Compound ID", ids),
                               ("SMILES", "SMILES", written)):
        path = workdir / f"answers_{header.replace(' ', '_').lower()}.csv"
        with open(path, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow([header, "pIC50"])
            w.writerows(zip(cells, values.tolist()))
        files[key] = path
    requests = workdir / "requests.parquet"
    pq.write_table(pa.table({"graph_id": pa.array(gids, pa.int64()),
                             "source_id": pa.array([str(g) for g in gids], pa.string())}), requests)
    plain = workdir / "MOSES_no_index.parquet"  # the columns read_answer_file reads of a store without the index
    pq.write_table(pq.read_table(workdir / "MOSES.parquet", columns=["graph_id", "smiles"]), plain)
    return files, gids


def time_keys(workdir: Path, n_answers: int) -> None:
    import pyarrow.parquet as pq

    from tasks.labels import read_answer_file

    files, gids = _lab_files(workdir, n_answers)
    store = str(workdir / "MOSES.parquet")
    known = np.asarray(pq.read_table(store, columns=["graph_id"]).column("graph_id"))
    print(f"pool {known.size:,} molecules, {n_answers:,} answers; read_answer_file per key (one process):")
    print("| key | store | seconds | × graph_id | measurements |")
    print("|---|---|---|---|---|")
    base, ref = None, None
    runs = [(k, store, "with the key index") for k in files] + [("SMILES", str(workdir / "MOSES_no_index.parquet"),
                                                                  "without it (older store)")]
    for key, path, what in runs:
        start = time.perf_counter()
        m, info = read_answer_file.fn(str(files[key]), path, str(workdir / "requests.parquet"), known, ("y",))
        sec = time.perf_counter() - start
        base = sec if base is None else base
        got = sorted(m.column("graph_id").to_pylist())
        ref = got if ref is None else ref
        assert got == sorted(gids.tolist()) == ref, f"{key}: other molecules matched"
        print(f"| {key} | {what} | {sec:.2f} | {sec / base:.2f} | {m.num_rows:,} |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=("build", "time"))
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/key_import"))
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--answers", type=int, default=16_045)
    a = ap.parse_args(argv)
    if a.command == "build":
        build(a.workdir, a.limit, a.workers)
    else:
        time_keys(a.workdir, a.answers)


if __name__ == "__main__":
    main()
