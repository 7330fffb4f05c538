"""The molecules benchmark's GIN rows, on a machine with a GPU (or on this one): export, run, merge.

The GIN part of ``tmdsub experiment --profile molecules`` trains thousands of small models; on a GPU machine with many
cores they run in parallel processes.  The GPU machine has PyTorch and PyG but not RDKit, POT or the project's
virtualenv, so the molecules travel as plain arrays and the picks as the benchmark cached them (every model trains on
the very molecules the random forests trained on):

    # here: after `tmdsub experiment --profile molecules --models rf` has made the picks of every set
    python benchmarks/molecules_gin.py export gpu_bundle            # arrays + picks of the sets (largest first)
    # there: python3 benchmarks/molecules_gin.py run gpu_bundle $OUT --workers 14 --device cuda --deadline 480
    #        (add --done <rows files> to train only the rows those files lack, e.g. after a run stopped by its deadline)
    # here: python benchmarks/molecules_gin.py merge <the rows-*.csv files> --results reports/results/molecules

``run`` trains the rows of :func:`tmdlib.experiment.molecules.plan_cells` for ``gin`` (largest sets first) with
:func:`tmdlib.experiment.molecules.run_cell`, writes each finished cell's rows to ``rows-<worker>.csv`` at once (a
run stopped by its deadline keeps what finished), and prints the throughput.  ``merge`` adds the rows to the results
files (finished keys are skipped, as in a resumed run).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def export(out: str, datasets: list[str] | None, cache_dir: str, raw_root: str) -> None:
    from tasks.molecules import _paths, load_set
    from tmdlib.experiment.molecules import dataset_sizes

    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = datasets or list(dataset_sizes())
    done = []
    for name in names:
        paths = _paths(cache_dir, name)
        pick_files = sorted(Path(paths["meta"]).parent.glob("picks-*.json"))
        if not pick_files:
            print(f"{name}: no picks yet (run the rf part first); skipped")
            continue
        s = load_set(name, raw_root)
        ds = s["ds"]
        np.savez_compressed(
            out_dir / f"{name}.npz", features=ds.features.astype(np.float32),
            feature_index=ds.feature_index.astype(np.int16), node_ptr=ds.node_ptr.astype(np.int32),
            edge_ptr=ds.edge_ptr.astype(np.int32), src=ds.src.astype(np.int16), dst=ds.dst.astype(np.int16),
            graph_ids=ds.graph_ids.astype(np.int32), y=s["y"], train=s["train"].astype(np.int32),
            test=s["test"].astype(np.int32), cliff=s["cliff"])
        picks = [p for f in pick_files for p in json.loads(f.read_text())["picks"]]
        (out_dir / f"{name}.picks.json").write_text(json.dumps(picks))
        done.append(name)
        print(f"{name}: {len(ds)} molecules, {len(picks)} picks", flush=True)
    (out_dir / "manifest.json").write_text(json.dumps({"sets": done}))
    size = sum(f.stat().st_size for f in out_dir.iterdir())
    print(f"bundle: {len(done)} sets, {size / 2**20:.1f} MiB -> {out_dir}")


_CACHE: dict = {}


def _load(bundle: str, name: str):
    if name not in _CACHE:
        from tmdlib import GraphDataset

        a = np.load(Path(bundle) / f"{name}.npz")
        ds = GraphDataset(node_ptr=a["node_ptr"].astype(np.int64), edge_ptr=a["edge_ptr"].astype(np.int64),
                          src=a["src"].astype(np.int64), dst=a["dst"].astype(np.int64),
                          graph_ids=a["graph_ids"].astype(np.int64), y=a["y"], features=a["features"],
                          feature_index=a["feature_index"].astype(np.int64))
        picks = {(p["method"], round(float(p["fraction"]), 6), int(p["trial"])): p
                 for p in json.loads((Path(bundle) / f"{name}.picks.json").read_text())}
        _CACHE.clear()
        _CACHE[name] = (ds, a["y"], a["train"].astype(np.int64), a["test"].astype(np.int64), a["cliff"], picks)
    return _CACHE[name]


def _work(job):
    bundle, out, spec, device, epochs = job
    import torch

    from tmdlib.experiment import molecules as mo

    torch.set_num_threads(1)
    if epochs:
        mo.GIN_CONFIG["epochs"] = int(epochs)
    ds, y, train, test, cliff, picks = _load(bundle, spec["dataset"])
    rows = mo.run_cell(spec, ds, y, train, test, cliff, None, picks, device)
    path = Path(out) / f"rows-{os.getpid()}.csv"
    text = mo.rows_csv(rows)
    with open(path, "a") as fh:
        fh.write(text if fh.tell() == 0 else text.split("\n", 1)[1])
    return len(rows)


def run(bundle: str, out: str, workers: int, device: str, deadline: float, epochs: int | None,
        trials: int | None, done_files: list[str] | None = None) -> None:
    from tmdlib.experiment.molecules import PROFILE, plan_cells, read_rows, row_key

    t0 = time.perf_counter()
    finished = {row_key(r) for f in done_files or [] for r in read_rows(f)}  # rows a resumed run skips
    Path(out).mkdir(parents=True, exist_ok=True)
    names = json.loads((Path(bundle) / "manifest.json").read_text())["sets"]
    jobs = []
    for name in names:  # the grid of the picks that were made (the profile's, or a smaller one)
        picks = json.loads((Path(bundle) / f"{name}.picks.json").read_text())
        grid = {**PROFILE, "fractions": sorted({float(q["fraction"]) for q in picks}),
                "methods": [m for m in PROFILE["methods"] if any(q["method"] == m for q in picks)],
                "trials": min(trials or PROFILE["trials"], 1 + max(int(q["trial"]) for q in picks))}
        for spec in plan_cells(grid, name, finished.__contains__, ["gin"]):
            jobs.append((bundle, out, spec, device, epochs))
    total = sum(len(j[2]["rows"]) for j in jobs)
    print(f"{len(jobs)} cells, {total} GIN models, {workers} workers on {device}", flush=True)
    done = 0
    ctx = mp.get_context("spawn")
    with ctx.Pool(workers) as pool:
        pending = [pool.apply_async(_work, (j,)) for j in jobs]
        for i, res in enumerate(pending):
            left = deadline - (time.perf_counter() - t0)
            if left <= 0:
                print(f"deadline: stopping after {done} models", flush=True)
                pool.terminate()
                break
            try:
                done += res.get(timeout=left)
            except mp.TimeoutError:
                print(f"deadline: stopping after {done} models", flush=True)
                pool.terminate()
                break
            if i % 20 == 0:
                el = time.perf_counter() - t0
                print(f"{done}/{total} models, {el:.0f} s ({done / max(el, 1e-9):.1f} models/s)", flush=True)
    el = time.perf_counter() - t0
    print(f"finished: {done} of {total} models in {el:.0f} s ({done / max(el, 1e-9):.2f} models/s)", flush=True)


def merge(files: list[str], results: str) -> None:
    from tasks.molecules import MoleculeResults
    from tmdlib.experiment.molecules import read_rows

    by_set: dict = {}
    for f in files:
        for r in read_rows(f):
            by_set.setdefault(r["dataset"], []).append(r)
    for name, rows in sorted(by_set.items()):
        store = MoleculeResults(results, name)
        before = len(store.rows)
        store.append(rows)
        print(f"{name}: {len(store.rows) - before} GIN rows added ({len(store.rows)} in all)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("out")
    e.add_argument("--datasets", default=None)
    e.add_argument("--cache-dir", default=str(ROOT / "reports" / "cache"))
    e.add_argument("--raw-root", default=str(ROOT / "data" / "raw"))
    r = sub.add_parser("run")
    r.add_argument("bundle")
    r.add_argument("out")
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--device", default="cpu")
    r.add_argument("--deadline", type=float, default=1e9, help="seconds; no new cell starts after it")
    r.add_argument("--epochs", type=int, default=None, help="smoke tests only (rows record their epochs)")
    r.add_argument("--trials", type=int, default=None)
    r.add_argument("--done", nargs="*", default=None, metavar="CSV",
                   help="rows files (results or earlier rows-*.csv) whose rows are not trained again")
    m = sub.add_parser("merge")
    m.add_argument("files", nargs="+")
    m.add_argument("--results", default=str(ROOT / "reports" / "results" / "molecules"))
    a = p.parse_args()
    if a.cmd == "export":
        export(a.out, a.datasets.split(",") if a.datasets else None, a.cache_dir, a.raw_root)
    elif a.cmd == "run":
        run(a.bundle, a.out, a.workers, a.device, a.deadline, a.epochs, a.trials, a.done)
    else:
        merge(a.files, a.results)


if __name__ == "__main__":
    main()
