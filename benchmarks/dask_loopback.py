"""The scalable select on a Dask cluster against the local runner: where the time goes, measured on loopback.

Usage::

    python benchmarks/dask_loopback.py --workspace /tmp/select_scale/MOSES_200000 --dataset MOSES_200000 \\
        [--fraction 0.01] [--workers 2]

In ``--workspace`` (a folder with ``data/graphs/<dataset>.parquet``, e.g. one made by ``select_scale.py``), two runs
of ``tmdsub select <dataset> --method tmd --fraction f --engine scalable``, each with a fresh part cache
(nothing reused):

* ``local``: the default runner, ``--workers W`` processes;
* ``dask``: one ``dask scheduler`` and W ``dask worker --nthreads 1`` processes on 127.0.0.1 (free ports, started
  here and stopped at the end; ``NUMBA_NUM_THREADS=1``, one core each), and ``--dask-address tcp://127.0.0.1:P``.

Every process of a run is polled (psutil, every 0.5 s) for its CPU time and RSS; the client's status lines are
timestamped, so the client's own phase before the first part is submitted (loading the store, hashes,
partition, scratch file: "load + partition") is split from the parts phase.  Printed per run: wall, load +
partition, parts phase, CPU of the client and of each worker, the estimate ``load + partition + parts' CPU / W``
against the measured wall, and the certificate (the same coreset either way).  The machine must be otherwise idle.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

TMDSUB = Path(sys.executable).with_name("tmdsub")
DASK = Path(sys.executable).with_name("dask")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Poll:
    """CPU seconds (user + system, last seen) and peak RSS of a process tree, by role."""

    def __init__(self):
        self.cpu: dict[int, float] = {}
        self.rss: dict[int, int] = {}
        self.role: dict[int, str] = {}
        self.cmd: dict[int, str] = {}

    def see(self, root: psutil.Process, role: str, child_role: str | None = None) -> None:
        try:
            procs = [(root, role)] + [(c, child_role or role) for c in root.children(recursive=True)]
        except psutil.Error:
            return
        for p, r in procs:
            try:
                t = p.cpu_times()
                self.cpu[p.pid] = t.user + t.system
                self.rss[p.pid] = max(self.rss.get(p.pid, 0), p.memory_info().rss)
                if p.pid not in self.role:
                    self.cmd[p.pid] = " ".join(p.cmdline())
                    # a stage's children also start Prefect's own server (flows/_env.py): not part work
                    self.role[p.pid] = "prefect server" if "uvicorn" in self.cmd[p.pid] or \
                        "prefect" in self.cmd[p.pid] and "server" in self.cmd[p.pid] else r
            except psutil.Error:
                pass

    def by_role(self) -> dict[str, list[tuple[float, float]]]:
        out: dict[str, list[tuple[float, float]]] = {}
        for pid, r in self.role.items():
            if self.cpu.get(pid, 0) > 0.5:  # helpers (resource trackers, shells) left out
                out.setdefault(r, []).append((self.cpu[pid], self.rss[pid] / 1e9))
        return out


def start_cluster(workers: int, log: Path) -> tuple[str, list[subprocess.Popen]]:
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    fh = open(log, "w")
    procs = [subprocess.Popen([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], stdout=fh, stderr=subprocess.STDOUT, env=env)]
    time.sleep(3)
    for _ in range(workers):
        procs.append(subprocess.Popen([str(DASK), "worker", address, "--nthreads", "1", "--no-nanny",
                                       "--no-dashboard", "--memory-limit", "0", "--host", "127.0.0.1"],
                                      stdout=fh, stderr=subprocess.STDOUT, env=env))
    from distributed import Client

    with Client(address, timeout=60) as c:
        c.wait_for_workers(workers, timeout=120)
    return address, procs


def stop(procs: list[subprocess.Popen]) -> None:
    for p in reversed(procs):
        p.terminate()
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()


def run(ws: Path, dataset: str, fraction: float, workers: int, runner: str) -> dict:
    cache = ws / f"cache_loopback_{runner}"
    shutil.rmtree(cache, ignore_errors=True)
    out = ws / f"selection_loopback_{runner}.json"
    cmd = [str(TMDSUB), "select", dataset, "--method", "tmd", "--fraction", str(fraction), "--engine", "scalable",
           "--cache-dir", str(cache), "--out", str(out), "--workers", str(workers)]
    cluster: list[subprocess.Popen] = []
    if runner == "dask":
        address, cluster = start_cluster(workers, ws / "loopback_dask.log")
        cmd += ["--dask-address", address]
    poll, lines = Poll(), []
    try:
        t0 = time.time()
        proc = subprocess.Popen(cmd, cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "PREFECT_LOGGING_LEVEL": "WARNING"})

        def read() -> None:
            for line in proc.stdout:
                lines.append((time.time() - t0, line.rstrip()))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        client = psutil.Process(proc.pid)
        workers_ps = [psutil.Process(p.pid) for p in cluster[1:]]
        while proc.poll() is None:
            poll.see(client, "client", "local worker")
            for w in workers_ps:
                poll.see(w, "dask worker")
            if cluster:
                poll.see(psutil.Process(cluster[0].pid), "dask scheduler")
            time.sleep(0.5)
        wall = time.time() - t0
        reader.join(10)
        for w in workers_ps:
            poll.see(w, "dask worker")
    finally:
        stop(cluster)
        shutil.rmtree(cache, ignore_errors=True)
    if proc.returncode:
        raise SystemExit(f"{runner}: exit {proc.returncode}\n" + "\n".join(l for _, l in lines[-20:]))
    first = next((t for t, l in lines if "coreset parts" in l), None)
    sel = json.loads(out.read_text())
    out.unlink()
    return {"runner": runner, "wall": wall, "before_parts": first, "cpu": poll.by_role(),
            "epsilon": sel["epsilon"], "pairs": sel["pairs_computed"], "k": sel["k"], "n": sel["n_train"],
            "parts": sel["engine_info"].get("parts")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--fraction", type=float, default=0.01)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runners", default="local,dask")
    args = ap.parse_args()
    rows = [run(args.workspace, args.dataset, args.fraction, args.workers, r) for r in args.runners.split(",")]
    print(f"\n{args.dataset}: {rows[0]['n']:,} training graphs, k = {rows[0]['k']:,}, {rows[0]['parts']} parts, "
          f"W = {args.workers}\n")
    print("| runner | wall | load + partition (client, before the first part) | parts phase | client CPU | "
          "workers' CPU (each) | estimate load + partition + parts' CPU / W | epsilon | exact pairs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cpu = r["cpu"]
        client = sum(c for c, _ in cpu.get("client", []))
        wk = sorted((c for c, _ in cpu.get("dask worker" if r["runner"] == "dask" else "local worker", [])),
                    reverse=True)
        before = r["before_parts"] or 0.0
        est = before + sum(wk) / args.workers
        print(f"| {r['runner']} | {r['wall']:.0f} s | {before:.0f} s | {r['wall'] - before:.0f} s | {client:.0f} s | "
              f"{' + '.join(f'{c:.0f}' for c in wk)} s | {est:.0f} s ({est / r['wall']:.2f} x wall) | "
              f"{r['epsilon']:.6g} | {r['pairs']:,} |")
    for r in rows:
        print(f"{r['runner']}: peak RSS by process (GB): " + ", ".join(
            f"{role} {max(g for _, g in v):.2f}" for role, v in r["cpu"].items()))
        for role, v in r["cpu"].items():
            if role not in ("client", "local worker", "dask worker"):
                print(f"  {role}: CPU {' + '.join(f'{c:.0f}' for c, _ in v)} s")


if __name__ == "__main__":
    main()
