"""Transcribe the paper's result tables (LaTeX source) into ``reports/paper_results.csv``.

    .venv/bin/python reports/paper_tables.py /work/shared/paper/subsampling-graphs-gnn-guarantees.tex

One row per (table, dataset, kind, arch, labels, method, fraction): the paper's mean and 95 % CI half-width
as printed (two decimals), its W / F columns where the table has them, and the LaTeX label of the table
each number came from.  Only the result tables are read (graph subsampling: TU and OGB tables; node
subsampling; both alternative-architecture tables); the KiDD / DosCond / MIRAGE ablations are skipped.
"""
from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

# label -> (dataset, kind, arch, table description); "" dataset = named by a \multicolumn header
TABLES = {
    "tab:COX2": ("COX2", "graph", "gin", "Table 2 (graph subsampling, TUDatasets), subtable COX2"),
    "tab:proteins": ("PROTEINS", "graph", "gin", "Table 2 (graph subsampling, TUDatasets), subtable PROTEINS"),
    "tab:mutag": ("MUTAG", "graph", "gin", "Table 2 (graph subsampling, TUDatasets), subtable MUTAG"),
    "tab:NCI1": ("NCI1", "graph", "gin", "Table 2 (graph subsampling, TUDatasets), subtable NCI1"),
    "tab:molbbbp": ("ogbg-molbbbp", "graph", "gin", "Table 3 (graph subsampling, OGBG), subtable OGBG-MOLBBBP"),
    "tab:molbace": ("ogbg-molbace", "graph", "gin", "Table 3 (graph subsampling, OGBG), subtable OGBG-MOLBACE"),
    "tab:mutag-pivot": ("MUTAG", "node", "gin", "Table 4 (node subsampling), subtable MUTAG"),
    "tab:proteins-pivot": ("PROTEINS", "node", "gin", "Table 4 (node subsampling), subtable PROTEINS"),
    "tab:dd-pivot": ("DD", "node", "gin", "Table 4 (node subsampling), subtable DD"),
    "tab:cox2-pivot": ("COX2", "node", "gin", "Table 4 (node subsampling), subtable COX2"),
    "tab:performance_comparison_large": ("", "graph", "gin-wide-mean",
                                         "Appendix table (graph subsampling, alternative architecture)"),
    "tab:mutag-node-2-pivot": ("MUTAG", "node", "gin-wide-mean", "Appendix table (node subsampling, alt. arch.), MUTAG"),
    "tab:proteins-node-2-pivot": ("PROTEINS", "node", "gin-wide-mean",
                                  "Appendix table (node subsampling, alt. arch.), PROTEINS"),
    "tab:dd-node-2-pivot": ("DD", "node", "gin-wide-mean", "Appendix table (node subsampling, alt. arch.), DD"),
    "tab:cox2-node-2-pivot": ("COX2", "node", "gin-wide-mean", "Appendix table (node subsampling, alt. arch.), COX2"),
}
METHODS = {"Doscond": "doscond", "Kidd": "kidd", "Feature": "feature", "WL": "wl", "Random": "random",
           "TMD": "tmd", "RW": "rw", "k-cores": "kcore"}
DATASET_HEADERS = {"MUTAG": "MUTAG", "PROTEINS": "PROTEINS", "COX2": "COX2", "NCI1": "NCI1",
                   "OGBG-MOLBACE": "ogbg-molbace", "OGBG-MOLBBBP": "ogbg-molbbbp"}
ROW = re.compile(r"(?:\\textbf\{)?(" + "|".join(re.escape(m) for m in METHODS) + r")\}?\s*&")
EVENT = re.compile(r"\\label\{(tab:[^}]*)\}|\\multicolumn\{\d+\}\{c\}\{\\textbf\{([^}]*)\}\}")
VALUE = re.compile(r"(\d\.\d+)\s*±\s*(\d\.\d+)")
COLUMNS = ["dataset", "kind", "arch", "labels", "method", "fraction", "mean", "ci", "paper_wins", "paper_fails",
           "table_label", "table"]


def parse(tex: str) -> list[dict]:
    lines = tex.splitlines()
    # the result tables: main text + appendix B alternative architecture (skip the ablation tables)
    region = "\n".join(lines[454:960] + lines[1404:1730])
    region = re.sub(r"(?<!\\)%.*", "", region)
    out, pending, labels, header_ds = [], [], "without", ""
    for chunk in region.replace("\n", " ").split("\\\\"):
        matches = list(ROW.finditer(chunk))
        cut = matches[-1].start() if matches else len(chunk)
        for ev in EVENT.finditer(chunk[:cut]):
            if ev.group(1):
                label = ev.group(1)
                if label in TABLES:
                    ds, kind, arch, desc = TABLES[label]
                    for r in pending:
                        r.update({"dataset": r["dataset"] or ds, "kind": kind, "arch": arch,
                                  "table_label": label, "table": desc})
                        out.append(r)
                pending, labels, header_ds = [], "without", ""
            else:
                head = ev.group(2).strip()
                if head.lower() == "with labels":
                    labels = "with"
                elif head.lower() == "without labels":
                    labels = "without"
                elif head in DATASET_HEADERS:
                    header_ds = DATASET_HEADERS[head]
        if not matches:
            continue
        row = chunk[cut:]
        method = METHODS[matches[-1].group(1)]
        cells = [c.strip() for c in row.split("&")[1:]]
        vals = [VALUE.search(c) for c in cells]
        nums = [(float(m.group(1)), float(m.group(2))) for m in vals if m]
        rest = [c for c, m in zip(cells, vals) if not m]
        node = len(nums) == 9
        fracs = [round(0.1 * (i + 1), 1) for i in range(9)] if node else [round(0.01 * (i + 1), 2) for i in range(10)]
        wins = rest[0] if rest else ""
        fails = rest[1] if len(rest) > 1 else ""
        for f, (mu, ci) in zip(fracs, nums):
            pending.append({"dataset": header_ds, "method": method, "labels": labels, "fraction": f, "mean": mu,
                            "ci": ci, "paper_wins": wins if wins not in ("-", "") else "",
                            "paper_fails": fails if fails not in ("-", "") else ""})
    # the OGBG-MOLBACE table omits its "With labels" header: its first DosCond / KiDD rows are the labelled ones
    seen = {}
    for r in out:
        if r["table_label"] == "tab:molbace" and r["method"] in ("doscond", "kidd"):
            seen[r["method"]] = seen.get(r["method"], 0) + 1
            if seen[r["method"]] <= 10:
                r["labels"] = "with"
    return out


def duplicates(rows: list[dict]) -> list[str]:
    """Rows (method sequences over all fractions, mean and CI) printed identically in two places of the paper."""
    seq: dict = {}
    for r in rows:
        seq.setdefault((r["table_label"], r["dataset"], r["labels"], r["method"]), []).append((r["mean"], r["ci"]))
    keys = list(seq)
    out = []
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            same = sum(x == y for x, y in zip(seq[a], seq[b]))
            if len(seq[a]) == len(seq[b]) and same >= len(seq[a]) - 2:
                what = "identical" if same == len(seq[a]) else f"{same}/{len(seq[a])} cells equal"
                out.append(f"| {a[3]} in `{a[0]}` ({a[1]}) | {b[3]} in `{b[0]}` ({b[1]}) | {what} |")
    return out


def main(argv: list[str]) -> int:
    tex = Path(argv[1] if len(argv) > 1 else "/work/shared/paper/subsampling-graphs-gnn-guarantees.tex").read_text()
    rows = parse(tex)
    dest = Path(__file__).with_name("paper_results.csv")
    with open(dest, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} rows -> {dest}")
    dup = Path(__file__).with_name("paper_duplicates.md")
    dup.write_text("# Rows the paper prints twice (mean ± CI equal at every fraction, or at all but one or two)\n\n"
                   "Found by `reports/paper_tables.py` in `paper_results.csv` (label-free rows).\n\n"
                   "| row | same numbers as | |\n|---|---|---|\n" + "\n".join(duplicates(rows)) + "\n",
                   encoding="utf-8")
    print(f"duplicated rows -> {dup}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
