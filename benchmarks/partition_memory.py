"""The scalable engine's partition of a large pool: wall, CPU and peak RSS with the centred rows formed a block at a
time (the default) against the whole group centred at once (``chunk >= n``: one centred copy of the embedding, the
engine's behaviour before blocks), each in its own process, in one run.

Usage::

    python benchmarks/partition_memory.py --n 8000000 --dim 33 --part-size 1953

The embedding is random float32 with the pool's shape (8,000,000 training graphs × 33 is the 10^7 select's),
written once to a scratch ``.npy`` that each measured process loads; the peak RSS of a process includes that
embedding (n · d · 4 bytes).  Also prints the share of graphs that land in the same part either way, and of parts equal as sets (the two
differ only in the rounding of the groups larger than one block, which moves graphs near each split's median).  The machine must be otherwise idle.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def child(path: str, part_size: int, chunk: int, out: str) -> None:
    import numpy as np

    from tmdlib.select.scalable import partition

    emb = np.load(path)
    base = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    parts = partition(emb, part_size, chunk=chunk)
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    np.savez(out, order=np.concatenate(parts), sizes=[p.size for p in parts])
    print(json.dumps({"chunk": chunk, "parts": len(parts), "wall_s": round(wall, 1),
                      "cpu_s": round(ru.ru_utime + ru.ru_stime - base.ru_utime - base.ru_stime, 1),
                      "peak_rss_gb": round(ru.ru_maxrss / 2**20, 2), "embedding_gb": round(emb.nbytes / 2**30, 2)}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=8_000_000)
    ap.add_argument("--dim", type=int, default=33)
    ap.add_argument("--part-size", type=int, default=1953)
    args = ap.parse_args()
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "emb.npy"
        rng = np.random.default_rng(0)
        emb = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(args.n, args.dim))
        scale = rng.uniform(0.1, 5.0, args.dim).astype(np.float32)
        for s in range(0, args.n, 1 << 20):
            e = min(s + (1 << 20), args.n)
            emb[s:e] = rng.normal(size=(e - s, args.dim)).astype(np.float32) * scale + 3.0
        emb.flush()
        del emb
        rows, orders = [], []
        for chunk in (1 << 18, args.n):  # blocks (default), then one centred copy
            out = Path(tmp) / f"parts_{chunk}.npz"
            res = subprocess.run([sys.executable, __file__, "_child", str(path), str(args.part_size), str(chunk),
                                  str(out)], capture_output=True, text=True, check=True)
            rows.append(json.loads(res.stdout.strip().splitlines()[-1]))
            with np.load(out) as z:
                orders.append(np.split(z["order"], np.cumsum(z["sizes"])[:-1]))
            print(json.dumps(rows[-1]), flush=True)
    a, b = rows
    # the bisection tree has the same shape either way (sizes depend on n only): part p is the same node of it
    label = [np.empty(sum(p.size for p in o), np.int64) for o in orders]
    for lab, o in zip(label, orders):
        for p, part in enumerate(o):
            lab[part] = p
    same = float(np.mean(label[0] == label[1]))
    same_parts = sum(np.array_equal(np.sort(p), np.sort(q)) for p, q in zip(*orders)) / len(orders[1])
    print(f"\nblocks / one copy: wall {a['wall_s'] / b['wall_s']:.2f}x, CPU {a['cpu_s'] / b['cpu_s']:.2f}x, "
          f"peak RSS {a['peak_rss_gb']:.2f} / {b['peak_rss_gb']:.2f} GB (embedding {a['embedding_gb']:.2f} GB); "
          f"graphs in the same part: {same:.1%} (parts equal as sets: {same_parts:.1%})")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        main()
