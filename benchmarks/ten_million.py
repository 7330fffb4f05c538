"""Ten million graphs by construction: a graph store of ``--size`` graphs built from the MOSES store without the
molecules existing, then ingested as a user's Parquet file would be, with wall, CPU and peak RSS of both.

Usage::

    python benchmarks/ten_million.py --store <ws>/data/graphs/MOSES.parquet --size 10000000 --workdir /tmp/tenm

Construction (this process, streaming, one row group at a time): the MOSES store's graphs in order, then copy 1
of them, copy 2, ... until ``--size`` graphs.  In copy ``c >= 1`` the first atom of every molecule has its formal
charge code moved by ``c`` (OGB's 12-code vocabulary, modulo 12: at most 11 copies, 19 M graphs): one atom feature
changed per molecule, so every copy's graphs are distinct graphs (their content hashes differ; nothing is
deduplicated) with the same sizes and structure as real molecules.  The feature table grows by those variant rows;
``graph_id`` runs 0..n-1; the stand-in labels are kept; ``smiles`` is null in the copies (no such molecule exists).

Ingest: ``tmdsub ingest --parquet <constructed> --name <NAME>`` in ``--workdir`` under ``/usr/bin/time -v`` -- the
command a user with a graph-store Parquet file types (validated and copied a slice at a time).

The selection at growing sizes runs on the ingested store with ``benchmarks/select_scale.py --store
<workdir>/data/graphs/<NAME>.parquet --name <NAME> --sizes ... --fraction 0.001``.  The machine must be otherwise
idle.
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from select_scale import TMDSUB, timed  # noqa: E402  (benchmarks/ is the script's folder)

#: OGB atom feature perturbed in the copies, and its vocabulary size.
FEATURE, VOCAB = 3, 12  # formal_charge


def _variant_rows(rows: np.ndarray, copies: int) -> tuple[np.ndarray, np.ndarray]:
    """The feature table with every row's variants for copies ``1..copies`` and ``remap[c, r]`` (row of ``r``'s
    variant in copy ``c``; ``remap[0]`` is the identity)."""
    from tmdlib.datasets import ATOM_FEATURE_DIMS

    start = int(sum(ATOM_FEATURE_DIMS[:FEATURE]))
    block = slice(start, start + VOCAB)
    table, index = [r for r in rows], {r.tobytes(): i for i, r in enumerate(rows)}
    remap = np.zeros((copies + 1, len(rows)), dtype=np.int32)
    remap[0] = np.arange(len(rows))
    for c in range(1, copies + 1):
        for i, r in enumerate(rows):
            code = int(np.argmax(r[block]))
            v = r.copy()
            v[block] = 0
            v[start + (code + c) % VOCAB] = 1
            key = v.tobytes()
            if key not in index:
                index[key] = len(table)
                table.append(v)
            remap[c, i] = index[key]
    return np.stack(table), remap


def construct(src: Path, dst: Path, n: int, name: str) -> dict:
    """Write the constructed store of ``n`` graphs (see the module text); return its counts and costs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tmdlib.datasets._schema import META_FEATURE_TABLE, META_NAME, encode_feature_table, feature_table_of

    t0, c0 = time.perf_counter(), time.process_time()
    source = pq.ParquetFile(src)
    n_src = source.metadata.num_rows
    copies = -(-n // n_src) - 1
    if copies >= VOCAB:
        raise SystemExit(f"at most {VOCAB - 1} copies ({VOCAB * n_src:,} graphs) can differ in one formal charge")
    schema = source.schema_arrow
    rows = feature_table_of(schema.empty_table(), src)
    table_rows, remap = _variant_rows(rows, copies)
    meta = dict(schema.metadata)
    meta[META_FEATURE_TABLE.encode()] = encode_feature_table(table_rows).encode()
    meta[META_NAME.encode()] = name.encode()
    schema = schema.with_metadata(meta)
    written = nodes = 0
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_suffix(".tmp")
    with pq.ParquetWriter(tmp, schema, compression="zstd") as out:
        for c in range(copies + 1):
            for g in range(source.num_row_groups):
                if written >= n:
                    break
                t = source.read_row_group(g)
                t = t.slice(0, min(t.num_rows, n - written))
                if c:
                    t = _perturbed(t, c, remap[c])
                t = t.set_column(0, schema.field(0), pa.array(np.arange(written, written + t.num_rows)))
                out.write_table(t.replace_schema_metadata(meta).cast(schema), row_group_size=t.num_rows)
                written += t.num_rows
                nodes += int(np.sum(t.column("num_nodes").to_numpy()))
    tmp.replace(dst)
    return {"graphs": written, "copies": copies + 1, "feature_rows": len(table_rows), "nodes": nodes,
            "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
            "rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, "bytes": dst.stat().st_size}


def _perturbed(t, c: int, remap: np.ndarray):
    """Row group ``t`` as copy ``c``: each graph's atom 0 gets its formal-charge variant (feature row and code)."""
    import pyarrow as pa

    def parts(arr):  # zero-based offsets and the values of a (possibly sliced) list array
        off = np.asarray(arr.offsets, dtype=np.int64)
        return off - off[0], arr.flatten()

    def rebuild(off, values):
        return pa.ListArray.from_arrays(pa.array(off.astype(np.int32)), values)

    t = t.combine_chunks()
    off, ids = parts(t.column("x_id").chunk(0))
    ids = np.asarray(ids, dtype=np.int32).copy()
    ids[off[:-1]] = remap[ids[off[:-1]]]
    a_off, inner = parts(t.column("atom_features").chunk(0))
    i_off, codes = parts(inner)
    codes = np.asarray(codes, dtype=np.int16).copy()
    at = i_off[a_off[:-1]] + FEATURE
    codes[at] = (codes[at] + c) % VOCAB
    for name, value in (("x_id", rebuild(off, pa.array(ids))),
                        ("atom_features", rebuild(a_off, rebuild(i_off, pa.array(codes)))),
                        ("smiles", pa.nulls(t.num_rows, pa.string()))):
        t = t.set_column(t.column_names.index(name), t.schema.field(name), value)
    return t


def main() -> None:
    import os

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True, type=Path, help="the MOSES graph store (tmdsub ingest MOSES)")
    ap.add_argument("--size", type=int, default=10_000_000)
    ap.add_argument("--name", default="MOSESX")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/tenm"))
    args = ap.parse_args()
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    ws = args.workdir
    built = ws / "constructed" / f"{args.name}.parquet"
    row = {"n": args.size, "construct": construct(args.store, built, args.size, args.name)}
    print(json.dumps(row), flush=True)
    out = ws / "data" / "graphs" / f"{args.name}.parquet"
    row["ingest"] = timed([str(TMDSUB), "ingest", "--parquet", str(built), "--name", args.name, "--out", str(out)], ws,
                          ws / "ingest.log")
    print(json.dumps(row), flush=True)
    c, i = row["construct"], row["ingest"]
    print(f"\n| step | graphs | wall s | CPU s | peak RSS GB |\n|---|---|---|---|---|\n"
          f"| construct ({c['copies']} copies, {c['feature_rows']} feature rows, {c['bytes'] / 2**20:,.0f} MiB) | "
          f"{c['graphs']:,} | {c['wall_s']:.1f} | {c['cpu_s']:.1f} | {c['rss_gb']:.2f} |\n"
          f"| `tmdsub ingest --parquet` | {c['graphs']:,} | {i['wall_s']:.1f} | {i['cpu_s']:.1f} | {i['rss_gb']:.2f} |")


if __name__ == "__main__":
    main()
