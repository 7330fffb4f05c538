"""Run ``tmdsub select`` on a pool too large to finish here, sample every process's RSS each second, and stop it
(SIGKILL to its process group) once ``STOP_PARTS`` parts are done: the memory of every phase that grows with the pool
(store passes, embedding, partition, grouping by part) and the run's own ETA for its parts.

Usage::

    python benchmarks/select_watch.py WORKSPACE DATASET FRACTION STOP_PARTS LOG [-- TMDSUB SELECT OPTIONS...]

e.g. ``python benchmarks/select_watch.py /tmp/tenm MOSESX 0.001 40 /tmp/tenm/select_partial.log`` after
``benchmarks/ten_million.py``.  Prints one JSON line: wall, seconds to the first part's line, the last progress
line's numbers (parts done, parts, ETA s, elapsed s, exact pairs), peak RSS of the client / any process / all
together, the client's peak in each phase (before the parts, the parts, after them: the phases are told apart by
the log's "coreset parts" lines: the first, and the one of every part done, cached or solved), and CPU seconds per
process.  Every sample (seconds, client GB and its anonymous / file-backed split, all processes GB, the log's last
line) goes to ``LOG.rss.jsonl``.  Options after ``--`` replace the default ``--part-size 1000 --workers 2
--cache-dir cache`` (``--`` alone: the command exactly as a user types it, ``tmdsub select DATASET --method tmd
--fraction FRACTION``).  The JSON line also gives, for every kind of status line the command prints (the text before
its first colon or digit), the seconds from the start to its first and last appearance: the wall of each phase.  The machine must be otherwise idle.  With every part in the cache (a rerun with
``--cache-dir`` of a finished run) it measures the phases around the parts without solving them.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil


def _anon_file(pid: int) -> dict:
    """The client's resident memory split (Linux): anonymous (its own) and file-backed (mapped files, e.g. the
    scratch files it memory-maps; the kernel can drop those pages), in GB."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            kb = {k: int(v.split()[0]) for k, v in (ln.split(":", 1) for ln in fh) if k in ("RssAnon", "RssFile")}
    except (OSError, ValueError):
        return {}
    return {"client_anon_gb": round(kb.get("RssAnon", 0) / 2**20, 3), "client_file_gb": round(kb.get("RssFile", 0) / 2**20, 3)}


def main() -> None:
    ws, name, frac, stop_parts, log = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    env = {**os.environ, "PREFECT_LOGGING_LEVEL": "WARNING"}
    extra = ["--part-size", "1000", "--workers", "2", "--cache-dir", "cache"]
    if "--" in sys.argv:
        extra = sys.argv[sys.argv.index("--") + 1:]
    cmd = [str(Path(sys.executable).with_name("tmdsub")), "select", name, "--method", "tmd", "--fraction", frac, *extra]
    fh = open(log, "w")
    t0 = time.time()
    proc = subprocess.Popen(cmd, cwd=ws, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    root = psutil.Process(proc.pid)
    peak_client = peak_any = peak_sum = 0.0
    first_part = None
    cpu, names = {}, {}
    seen: dict[str, list[float]] = {}
    n_lines = 0
    last = ""
    phase, peak_phase = "before parts", {}
    samples = open(log + ".rss.jsonl", "w")
    while proc.poll() is None:
        try:
            procs = [root] + root.children(recursive=True)
        except psutil.NoSuchProcess:
            break
        total = client = 0.0
        for q in procs:
            try:
                r = q.memory_info().rss / 2**30
                t = q.cpu_times()
                cpu[q.pid] = t.user + t.system
                if q.pid not in names:
                    names[q.pid] = " ".join(q.cmdline()[:4])[-120:]
            except psutil.Error:
                continue
            total += r
            peak_any = max(peak_any, r)
            if q.pid == root.pid:
                client = r
                peak_client = max(peak_client, r)
        peak_sum = max(peak_sum, total)
        text = open(log).read()
        lines = text.splitlines()
        now = round(time.time() - t0, 1)
        for ln in lines[max(n_lines - 1, 0):]:
            key = re.split(r"[:\d]", ln.strip(), maxsplit=1)[0].strip()[:60]
            if key:
                seen.setdefault(key, [now, now])[1] = now
        n_lines = len(lines)
        tail = text.rstrip().rsplit("\n", 1)[-1][-160:]
        if phase == "before parts" and "coreset parts:" in text:
            phase = "parts"
        if phase == "parts" and re.search(r"coreset parts: (\d+)/\1 ", text):
            phase = "after parts"
        peak_phase[phase] = max(peak_phase.get(phase, 0.0), client)
        samples.write(json.dumps({"t": round(time.time() - t0, 1), "client_gb": round(client, 3),
                                  **_anon_file(proc.pid), "all_gb": round(total, 3), "phase": phase,
                                  "log": tail}) + "\n")
        samples.flush()
        m = re.findall(r"coreset parts: (\d+)/(\d+).*?ETA\s+([\d.]+)s, elapsed\s+([\d.]+)s(?: (\d+) exact pairs)?",
                       text)
        if m and first_part is None:
            first_part = time.time() - t0
        if m:
            last = m[-1]
            if int(last[0]) >= stop_parts:
                break
        time.sleep(1.0)
    wall = time.time() - t0
    samples.close()
    finished = proc.poll() is not None
    if not finished:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    print(json.dumps({"name": name, "finished": finished, "wall_s": round(wall, 1),
                      "start_to_first_part_line_s": None if first_part is None else round(first_part, 1),
                      "last_progress": last, "peak_client_gb": round(peak_client, 3), "peak_any_gb": round(peak_any, 3),
                      "peak_sum_gb": round(peak_sum, 3),
                      "peak_client_gb_by_phase": {k: round(v, 3) for k, v in peak_phase.items()},
                      "cpu_s_by_process": {f"{k} {names.get(k, '')}": round(v, 1) for k, v in cpu.items()},
                      "status_lines_first_last_s": seen}))


if __name__ == "__main__":
    main()
