"""Speed of the exact TMD engine (tmdlib.distance._engine) on MUTAG, NCI1 and DD.

Usage::

    python benchmarks/tmd_speed.py [--quick] [--extrapolate] [--skip-dd] [--json OUT]

Reports

* numba compile time (cold on-disk cache) and cache-load time (warm cache), each in a
  fresh subprocess;
* per-pair latency of ``tmd(g1, g2)`` (median over random MUTAG pairs);
* MUTAG all 17,578 pairs (``tmd_matrix``);
* NCI1 all 8.4M pairs, in a subprocess (peak RSS included), or, with
  ``--extrapolate``, a measured block of random rows x all graphs scaled to the
  full upper triangle;
* the speed-up over a reference-style implementation (the original ``tmd.py``
  algorithm: O(L n1 n2) small OTs with ``ot.emd2``) on the same MUTAG pairs;
* the "root-assignment floor": per pair, solving *only* the final root-level
  assignment on precomputed cost matrices, against the engine's amortised
  per-pair time (both single-threaded);
* the memory plan (tree ids per level, sub-blocks, table bytes) for NCI1 and DD,
  and a measured DD sample.

Timings are wall-clock unless marked CPU; the machine may be shared.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tmdlib import GraphDataset  # noqa: E402
import tmdlib.distance._engine as T  # noqa: E402
from tmdlib.distance.assign import assign_rect, rect_work  # noqa: E402
from tmdlib.datasets import read_tu, to_dataset  # noqa: E402
from tmdlib.distance import resolve_weights  # noqa: E402

RAW = ROOT / "data" / "raw"
DEPTH, WEIGHTS = 4, "pascal"


def load(name: str) -> GraphDataset:
    """A TU dataset as a GraphDataset (one-hot node labels)."""
    return to_dataset(read_tu(RAW / name, name))


# ----------------------------------------------------------------------------- reference style

def reference_style_tmd(g1, g2, depth: int = DEPTH, weights=WEIGHTS) -> float:
    """The original algorithm's semantics: level tables between *nodes*, one ``ot.emd2`` per entry.

    ``M`` is ``(n1+1) x (n2+1)``, the last row/column the distance to a blank tree;
    each level replaces ``M[i, j]`` by ``D[i, j] + w[l] * OT(neighbours of i, of j)``
    with the smaller side padded by one blank entry of mass ``|deg_i - deg_j|``.
    """
    import ot

    w = resolve_weights(depth, weights)
    n1, n2 = g1.num_nodes, g2.num_nodes
    dist = np.linalg.norm(g1.x[:, None, :] - g2.x[None, :, :], axis=2)
    nrm1, nrm2 = np.linalg.norm(g1.x, axis=1), np.linalg.norm(g2.x, axis=1)
    m = np.zeros((n1 + 1, n2 + 1))
    m[:n1, :n2], m[:n1, n2], m[n1, :n2] = dist, nrm1, nrm2
    nb1 = [g1.neighbors(i) for i in range(n1)]
    nb2 = [g2.neighbors(j) for j in range(n2)]
    for lev in range(depth - 1):
        prev, m = m, np.zeros((n1 + 1, n2 + 1))
        for i in range(n1):
            for j in range(n2):
                a, b = nb1[i], nb2[j]
                if a.size == 0 and b.size == 0:
                    ot_val = 0.0
                elif a.size == 0:
                    ot_val = prev[n1, b].sum()
                elif b.size == 0:
                    ot_val = prev[a, n2].sum()
                elif a.size < b.size:
                    cost = np.vstack([prev[np.ix_(a, b)], prev[n1, b][None, :]])
                    mu = np.r_[np.ones(a.size), b.size - a.size]
                    ot_val = ot.emd2(mu, np.ones(b.size), cost)
                else:
                    cost = np.hstack([prev[np.ix_(a, b)], prev[a, n2][:, None]])
                    nu = np.r_[np.ones(b.size), a.size - b.size]
                    ot_val = ot.emd2(np.ones(a.size), nu, cost)
                m[i, j] = dist[i, j] + w[lev] * ot_val
        m[:n1, n2] = nrm1 + w[lev] * np.array([prev[a, n2].sum() for a in nb1])
        m[n1, :n2] = nrm2 + w[lev] * np.array([prev[n1, b].sum() for b in nb2])
    mu, nu = np.ones(n1 + 1), np.ones(n2 + 1)
    mu[n1], nu[n2] = max(n2 - n1, 0), max(n1 - n2, 0)
    return float(ot.emd2(mu, nu, m))


# ----------------------------------------------------------------------------- floor

def root_problems(ds: GraphDataset, pairs: np.ndarray):
    """Precomputed root-level cost matrices of ``pairs`` (engine tables, no cancellation).

    Returns the rectangular blank-subtracted problems (``n_small x n_large``,
    cost ``T[a, b] - blank_b``, offset ``sum blank``) and the square padded ones
    (``max(n1, n2)`` square, blank rows/columns), as flat arrays.
    """
    w = resolve_weights(DEPTH, WEIGHTS)
    uni = T._Universe(ds, DEPTH, w)
    graphs = np.arange(len(ds))
    side = T._side(uni, graphs)
    table = T._root_table(uni, side, side, True)
    top = DEPTH - 1
    ids = uni.ids[top]
    loc, blank = side.local[top], uni.levels[top].blank
    rect, square, offsets = [], [], []
    for gi, gj in pairs:
        ia = ids[ds.node_ptr[gi]:ds.node_ptr[gi + 1]]
        ib = ids[ds.node_ptr[gj]:ds.node_ptr[gj + 1]]
        a, b, ba, bb = loc[ia], loc[ib], blank[ia], blank[ib]
        c = table[np.ix_(a, b)]
        k = max(a.size, b.size)
        sq = np.zeros((k, k))
        sq[:a.size, :b.size] = c
        sq[a.size:, :b.size] = bb[None, :]
        sq[:a.size, b.size:] = ba[:, None]
        square.append(sq)
        if a.size <= b.size:
            rect.append(c - bb[None, :])
            offsets.append(bb.sum())
        else:
            rect.append((c - ba[:, None]).T)
            offsets.append(ba.sum())
    return rect, square, np.array(offsets)


def _flat(mats):
    nr = np.array([m.shape[0] for m in mats], np.int64)
    nc = np.array([m.shape[1] for m in mats], np.int64)
    off = np.concatenate([[0], np.cumsum(nr * nc)]).astype(np.int64)
    flat = np.concatenate([np.ascontiguousarray(m).ravel() for m in mats]) if mats else np.zeros(0)
    return flat, off, nr, nc


def _solve_all_impl(flat, off, nr, nc, out):
    wk = rect_work(int(nc.max()) if nc.size else 1)
    for q in range(nr.size):
        c = flat[off[q]:off[q + 1]].reshape(nr[q], nc[q])
        out[q] = assign_rect(c, nr[q], nc[q], *wk)


def floor_time(mats) -> tuple[float, np.ndarray]:
    """CPU seconds per problem to solve precomputed assignments (numba, one thread)."""
    from numba import njit

    solve = njit(cache=True)(_solve_all_impl)
    flat, off, nr, nc = _flat(mats)
    out = np.empty(nr.size)
    solve(flat[:off[1]], off[:2], nr[:1], nc[:1], out[:1])  # compile / load
    best = np.inf
    for _ in range(3):
        t = time.thread_time()
        solve(flat, off, nr, nc, out)
        best = min(best, time.thread_time() - t)
    return best / nr.size, out


def scipy_floor(mats) -> float:
    """Seconds per problem with ``scipy.optimize.linear_sum_assignment`` (incl. its Python call)."""
    from scipy.optimize import linear_sum_assignment

    t = time.perf_counter()
    for m in mats:
        linear_sum_assignment(m)
    return (time.perf_counter() - t) / len(mats)


# ----------------------------------------------------------------------------- subprocess runs

def run_child(code: str, env: dict | None = None) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON line last."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-3000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def compile_times() -> dict:
    code = """
        import json, time
        t0 = time.perf_counter()
        from tmdlib.distance._engine import warmup
        t1 = time.perf_counter()
        warmup()
        t2 = time.perf_counter()
        print(json.dumps({"import_s": t1 - t0, "warmup_s": t2 - t1}))
    """
    with tempfile.TemporaryDirectory() as cache:
        cold = run_child(code, {"NUMBA_CACHE_DIR": cache})
        warm = run_child(code, {"NUMBA_CACHE_DIR": cache})
    return {"cold_compile_s": cold["import_s"] + cold["warmup_s"],
            "warm_cache_load_s": warm["import_s"] + warm["warmup_s"]}


def full_matrix_child(name: str, threads: int | None) -> dict:
    code = f"""
        import json, resource, time
        import numpy as np
        from tmdlib.datasets import to_dataset
        from tmdlib.datasets import read_tu
        from tmdlib.distance._engine import tmd_matrix, warmup
        warmup()
        ds = to_dataset(read_tu({str(RAW / name)!r}, {name!r}))
        t, c = time.perf_counter(), time.process_time()
        d = tmd_matrix(ds, {DEPTH}, {WEIGHTS!r}, num_threads={threads!r})
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        print(json.dumps({{"graphs": len(ds), "wall_s": wall, "cpu_s": cpu, "checksum": float(d.sum()),
                          "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
    """
    return run_child(code)


# ----------------------------------------------------------------------------- main

def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions and samples")
    ap.add_argument("--extrapolate", action="store_true",
                    help="NCI1: time a block of random rows x all graphs and scale, instead of the full matrix")
    ap.add_argument("--skip-dd", action="store_true", help="skip the DD memory plan and sample")
    ap.add_argument("--threads", type=int, default=None, help="numba threads (default: all cores)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results as JSON")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    res: dict = {"cores": os.cpu_count(), "load_avg_start": os.getloadavg()}
    say = lambda *a: print(*a, flush=True)  # noqa: E731

    res["compile"] = compile_times()
    say(f"numba compile (cold cache): {res['compile']['cold_compile_s']:.1f} s; "
        f"warm cache load: {res['compile']['warm_cache_load_s']:.2f} s")
    T.warmup()

    mutag = load("MUTAG")
    g = len(mutag)
    reps = 3 if args.quick else 5
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        full = T.tmd_matrix(mutag, DEPTH, WEIGHTS, num_threads=args.threads)
        times.append(time.perf_counter() - t)
    n_pairs = g * (g - 1) // 2
    res["mutag_all_pairs_s"] = min(times)
    say(f"MUTAG all {n_pairs} pairs: {min(times):.3f} s (best of {reps}; median {np.median(times):.3f} s) "
        f"= {min(times) / n_pairs * 1e6:.2f} us/pair amortised")

    # per-pair latency of tmd(g1, g2)
    pairs = rng.integers(0, g, size=(60 if args.quick else 300, 2))
    lat = []
    for i, j in pairs:
        a, b = mutag[int(i)], mutag[int(j)]
        t = time.perf_counter()
        T.tmd(a, b, DEPTH, WEIGHTS)
        lat.append(time.perf_counter() - t)
    res["pair_latency_median_s"] = float(np.median(lat))
    say(f"tmd(g1, g2) latency on MUTAG: median {np.median(lat) * 1e6:.0f} us over {len(lat)} pairs")

    # reference-style implementation on the same pairs
    ref_pairs = pairs[:3 if args.quick else 10]
    ref_t, ref_v = [], []
    for i, j in ref_pairs:
        t = time.perf_counter()
        ref_v.append(reference_style_tmd(mutag[int(i)], mutag[int(j)]))
        ref_t.append(time.perf_counter() - t)
    got = full[ref_pairs[:, 0], ref_pairs[:, 1]]
    assert np.allclose(got, ref_v, rtol=1e-9, atol=1e-9), (got, ref_v)
    res["reference_style_pair_s"] = float(np.median(ref_t))
    res["speedup_vs_reference_latency"] = float(np.median(ref_t) / np.median(lat))
    res["speedup_vs_reference_amortised"] = float(np.median(ref_t) / (min(times) / n_pairs))
    say(f"reference-style implementation: median {np.median(ref_t):.3f} s/pair over {len(ref_t)} pairs "
        f"(values agree); speed-up x{res['speedup_vs_reference_latency']:.0f} per call, "
        f"x{res['speedup_vs_reference_amortised']:.0f} amortised in the all-pairs matrix")

    # root-assignment floor (single thread): MUTAG all pairs, NCI1 subset sample
    floor = {}
    nci1 = load("NCI1")
    for name, ds, sub_n, n_sample in [("MUTAG", mutag, g, n_pairs),
                                      ("NCI1", nci1, 600 if args.quick else 1000, 5000 if args.quick else 20000)]:
        sub = ds.take(np.arange(sub_n))
        c = time.process_time()
        d1 = T.tmd_matrix(sub, DEPTH, WEIGHTS, num_threads=1)
        eng = (time.process_time() - c) / (sub_n * (sub_n - 1) / 2)
        iu = np.triu_indices(sub_n, 1)
        pick = rng.choice(iu[0].size, size=min(n_sample, iu[0].size), replace=False)
        pp = np.stack([iu[0][pick], iu[1][pick]], axis=1)
        rect, square, offs = root_problems(sub, pp)
        fl, vals = floor_time(rect)
        sq, vals_sq = floor_time(square)
        assert np.allclose(vals + offs, d1[pp[:, 0], pp[:, 1]], rtol=1e-9, atol=1e-9)
        assert np.allclose(vals_sq, d1[pp[:, 0], pp[:, 1]], rtol=1e-9, atol=1e-9)
        sp = scipy_floor(square[:3000])
        floor[name] = {"graphs": sub_n, "engine_cpu_us_per_pair": eng * 1e6, "floor_rect_us": fl * 1e6,
                       "floor_square_us": sq * 1e6, "scipy_square_us": sp * 1e6, "ratio_vs_rect_floor": eng / fl,
                       "ratio_vs_square_floor": eng / sq}
        say(f"{name} ({sub_n} graphs, 1 thread): engine {eng * 1e6:.2f} us/pair (CPU, amortised, all stages) vs "
            f"root-assignment floor {fl * 1e6:.2f} us (rectangular form) / {sq * 1e6:.2f} us (square padded) / "
            f"scipy {sp * 1e6:.2f} us -> ratio {eng / fl:.2f} / {eng / sq:.2f}")
    res["floor"] = floor

    # NCI1 all pairs
    gn = len(nci1)
    n_pairs_nci1 = gn * (gn - 1) // 2
    if args.extrapolate:
        r = 100 if args.quick else 300
        rows = np.sort(rng.choice(gn, r, replace=False))
        t, c = time.perf_counter(), time.process_time()
        T.tmd_block(nci1.take(rows), nci1, DEPTH, WEIGHTS, num_threads=args.threads)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        scale = n_pairs_nci1 / (r * gn)
        res["nci1"] = {"mode": "extrapolated", "rows": r, "sample_wall_s": wall, "wall_s": wall * scale,
                       "cpu_s": cpu * scale}
        say(f"NCI1 all {n_pairs_nci1} pairs: ~{wall * scale:.0f} s extrapolated "
            f"({r} random rows x {gn} graphs took {wall:.1f} s wall, {cpu:.1f} s CPU)")
    else:
        out = full_matrix_child("NCI1", args.threads)
        res["nci1"] = {"mode": "full", **out}
        say(f"NCI1 all {n_pairs_nci1} pairs: {out['wall_s']:.1f} s wall, {out['cpu_s']:.1f} s CPU, "
            f"peak RSS {out['max_rss_mb']:.0f} MB (subprocess)")
    plan = T.tmd_memory_plan(nci1, DEPTH)
    res["nci1_plan"] = plan
    say(f"NCI1 memory plan: ids/level {plan['ids_per_level']}, one block would need "
        f"{plan['unchunked_table_bytes'] / 2**30:.1f} GiB of tables; with the 2 GiB cap: "
        f"{len(plan['chunks'])} runs, {plan['blocks']} blocks, peak tables {plan['peak_table_bytes'] / 2**30:.2f} GiB")

    if not args.skip_dd:
        dd = load("DD")
        plan = T.tmd_memory_plan(dd, DEPTH)
        res["dd_plan"] = plan
        say(f"DD memory plan: ids/level {plan['ids_per_level']}, one block would need "
            f"{plan['unchunked_table_bytes'] / 2**30:.0f} GiB; with the 2 GiB cap: {len(plan['chunks'])} runs, "
            f"{plan['blocks']} blocks, peak tables {plan['peak_table_bytes'] / 2**30:.2f} GiB")
        npg = dd.nodes_per_graph.astype(np.float64)
        k = 4 if args.quick else 8
        rows = rng.choice(len(dd), k, replace=False)
        cols = rng.choice(len(dd), k, replace=False)
        t = time.perf_counter()
        T.tmd_block(dd.take(rows), dd.take(cols), DEPTH, WEIGHTS, num_threads=args.threads)
        wall = time.perf_counter() - t
        node_pairs = npg[rows].sum() * npg[cols].sum()
        total_node_pairs = (npg.sum() ** 2 - (npg ** 2).sum()) / 2
        res["dd_sample"] = {"graphs": k, "wall_s": wall, "extrapolated_full_s": wall / node_pairs * total_node_pairs}
        say(f"DD: {k}x{k} random graphs ({node_pairs:.2e} node pairs) {wall:.1f} s; full matrix extrapolated "
            f"by node pairs: ~{wall / node_pairs * total_node_pairs / 3600:.0f} h")

    res["load_avg_end"] = os.getloadavg()
    res["max_rss_mb_this_process"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    say(f"load average start {res['load_avg_start']}, end {res['load_avg_end']}")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
