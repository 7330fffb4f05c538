"""Run one command and report its wall time, CPU time and peak memory as one JSON line (appended to a file).

    python benchmarks/phase_time.py --name select --log phases.jsonl -- tmdsub select ...

* ``wall_s``: seconds from start to exit;
* ``cpu_s``: user + system seconds of the command and every descendant it waited for (``os.wait4``'s rusage);
* ``peak_rss_gb``: the largest sum of resident memory over the command's whole process tree (psutil, sampled every
  0.2 s): worker processes count together, which ``/usr/bin/time``'s maximum of one process does not;
* ``max_rss_gb``: that maximum of one process (``ru_maxrss``), for comparison.

Exits with the command's status.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

import psutil


def tree_rss(proc: psutil.Process) -> int:
    """Resident bytes of ``proc`` and all its descendants (processes gone meanwhile count 0)."""
    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", required=True, help="the phase's name in the log")
    ap.add_argument("--log", required=True, help="JSON-lines file the measurement is appended to")
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- the command and its arguments")
    a = ap.parse_args(argv)
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("no command")
    t0 = time.perf_counter()
    child = subprocess.Popen(cmd)
    proc = psutil.Process(child.pid)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], tree_rss(proc))
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, ru = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    rc = os.waitstatus_to_exitcode(status)
    child.returncode = rc  # reaped here, not by Popen
    row = {"phase": a.name, "wall_s": round(wall, 1), "cpu_s": round(ru.ru_utime + ru.ru_stime, 1),
           "peak_rss_gb": round(peak[0] / 1e9, 3), "max_rss_gb": round(ru.ru_maxrss * 1024 / 1e9, 3), "rc": rc}
    with open(a.log, "a") as f:
        f.write(json.dumps(row) + "\n")
    print(f"[{a.name}] wall {row['wall_s']} s, cpu {row['cpu_s']} s, peak RSS (tree) {row['peak_rss_gb']} GB, "
          f"largest process {row['max_rss_gb']} GB, rc {rc}", file=sys.stderr, flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
