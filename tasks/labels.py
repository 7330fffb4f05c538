"""Label hand-off tasks: export the label requests, import (or stand in for) the labels."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
from prefect import task

from tmdlib import InputError

from . import io

STANDIN = "benchmark-standin"


LEDGER_HEADER = "graph_id,label,source"


def _rows(y, n: int, task=None) -> np.ndarray:
    """``y`` as a float matrix ``(n, T)``; T from the task when given (an empty ``y`` has no width of its own)."""
    Y = np.asarray(y, dtype=np.float64)
    T = task.num_targets if task is not None else (Y.size // n if n else (Y.shape[1] if Y.ndim == 2 else 1))
    return Y.reshape(n, T)


def _matrix(table: pa.Table) -> np.ndarray:
    """Label columns of a validated label table as a float matrix ``(m, T)`` (null = NaN)."""
    cols = [c for c in table.column_names if c not in ("graph_id", "source")]
    if not cols:
        return np.zeros((table.num_rows, 1))
    return np.column_stack([np.asarray(table.column(c).to_numpy(zero_copy_only=False), dtype=np.float64)
                            for c in cols])


def read_ledger(path: str | None, known: np.ndarray, task=None) -> pa.Table:
    """The label ledger (``graph_id,label[,source]``, or one column per target: every label paid for so far),
    validated against the dataset's task.

    The ledger lives at ``data/labelled/<DATASET>.csv`` and only grows (``tmdsub labels commit``);
    a missing file is an empty ledger.  Returns :func:`tmdlib.datasets.labels.labels_schema` rows.
    """
    from tmdlib.datasets.labels import label_columns, labels_schema, validate_label_import

    if not path or not Path(path).exists():
        return labels_schema(task).empty_table()
    raw = io.read_text_csv(path, ("graph_id", *label_columns(task)), what="label ledger")
    return validate_label_import(raw, [], known, path, task=task)


def merge_labels(ledger: pa.Table, new_ids: np.ndarray, new_y: np.ndarray, path: str | None) -> tuple:
    """``(graph_ids, Y (m, T))`` of the ledger plus new labels; a graph labelled twice differently is an error
    (missing values are equal to each other)."""
    Y_new = _rows(new_y, len(new_ids))
    old = {int(g): row for g, row in zip(ledger.column("graph_id").to_pylist(), _matrix(ledger))}
    clash = [(int(g), old[int(g)], row) for g, row in zip(new_ids, Y_new)
             if int(g) in old and not np.array_equal(old[int(g)], row, equal_nan=True)]
    if clash:
        fmt = lambda r: repr(float(r[0])) if r.size == 1 else repr([float(v) for v in r])  # noqa: E731
        shown = ", ".join(f"graph {g}: ledger {fmt(a)}, new {fmt(b)}" for g, a, b in clash[:20])
        raise InputError(path, f"{len(clash)} graph(s) already in the label ledger with another label ({shown})")
    merged = {**old, **{int(g): row for g, row in zip(new_ids, Y_new)}}
    ids = np.array(sorted(merged), dtype=np.int64)
    T = Y_new.shape[1] if len(Y_new) else (next(iter(merged.values())).size if merged else 1)
    return ids, np.array([merged[int(g)] for g in ids], dtype=np.float64).reshape(len(ids), T)


def _cell(v: float) -> str:
    return "" if np.isnan(v) else repr(float(v))


@task(name="commit-labels", persist_result=False)
def commit_labels(ledger_path: str, labels_csv: str, known: np.ndarray, task=None) -> dict:
    """Append to the ledger the labels of ``labels.csv`` it does not hold yet (atomic rewrite)."""
    from tmdlib.datasets.labels import label_columns

    from .io import read_labels

    ledger = read_ledger(ledger_path, known, task)
    labels, meta = read_labels(labels_csv, task=task)
    have = set(ledger.column("graph_id").to_pylist())
    new = {g: y for g, y in sorted(labels.items()) if g not in have}
    source = meta.get("source", "unknown") if not meta.get("sha256") else f"import:{meta['sha256'][:12]}"
    p = Path(ledger_path)
    header = ",".join(["graph_id", *label_columns(task), "source"])
    text = p.read_text() if p.exists() else header + "\n"
    if text and not text.endswith("\n"):
        text += "\n"
    text += "".join(f"{g},{','.join(_cell(v) for v in np.atleast_1d(y))},{source}\n" for g, y in new.items())
    if new:
        io.write_text(p, text)
    return {"ledger": str(p), "added": len(new), "total": len(have) + len(new)}


@task(name="label-requests", persist_result=False)
def build_requests(store_path: str, selection: dict, labelled: set | None = None):
    """Label-request table of a selection: graph_id, source id (SMILES for molecules), τ, rank.

    Medoids in ``labelled`` (graph ids already in the ledger) are left out: only graphs that still
    need a label are requested, ranked 1.. by cluster size.
    """
    import pyarrow.parquet as pq
    from tmdlib.datasets.labels import label_request_table

    cols = pq.read_schema(store_path).names
    table = pq.read_table(store_path, columns=["graph_id"] + (["smiles"] if "smiles" in cols else []))
    gids = table.column("graph_id").to_numpy()
    pos_of = {int(g): k for k, g in enumerate(gids)}
    medoids = np.array([pos_of[int(g)] for g in selection["medoids"]], dtype=np.int64)
    source = table.column("smiles").to_pylist() if "smiles" in cols else None
    full = label_request_table(gids, medoids, np.rint(selection["tau"]).astype(np.int64), source)
    keep = ~np.isin(full.column("graph_id").to_numpy(), np.array(sorted(labelled or ()), dtype=np.int64))
    requests = full.filter(pa.array(keep))
    return requests.set_column(3, "rank", pa.array(np.arange(1, requests.num_rows + 1), pa.int64()))


#: The SD file of the label requests, and what the manifest says of it when the dataset has no molecules.
REQUESTS_SDF = "label_requests.sdf"
NO_MOLECULES = "no molecules in this dataset"


def request_smiles(store_path: str, requests: pa.Table) -> list | None:
    """SMILES of the requested graphs in the order of ``requests`` (``None`` for a graph stored without one), or
    ``None`` when the graph store has no ``smiles`` column (TU graphs, PyG exports)."""
    import pyarrow.parquet as pq

    if "smiles" not in pq.read_schema(store_path).names:
        return None
    table = pq.read_table(store_path, columns=["graph_id", "smiles"])
    of = dict(zip(table.column("graph_id").to_pylist(), table.column("smiles").to_pylist()))
    return [of.get(g) for g in requests.column("graph_id").to_pylist()]


def sdf_note(smiles: list | None) -> str:
    """The manifest's ``sdf`` entry: the SD file's name, or why it has no records."""
    return REQUESTS_SDF if smiles is not None else NO_MOLECULES


@task(name="write-requests", persist_result=False)
def write_requests(out_dir: str, requests: pa.Table, manifest: dict, smiles: list | None = None) -> str:
    """Write label_requests.csv/.parquet/.sdf and manifest.json atomically (manifest last).

    ``smiles`` (aligned with ``requests``, :func:`request_smiles`) gives the SD file one record per request
    (:func:`tmdlib.chem.sdf.requests_sdf`, largest clusters first); without it the SD file has no records, so
    the DVC output always exists.  Everything is rendered before the first write.
    """
    import pyarrow.csv as pacsv

    sdf = ""
    if smiles is not None:
        from tmdlib.chem.sdf import requests_sdf

        col = lambda name: requests.column(name).to_pylist()  # noqa: E731
        sdf = requests_sdf(smiles, col("graph_id"), col("tau"), col("rank"), col("source_id"))
    out = Path(out_dir)
    with io.atomic_path(out / "label_requests.csv") as tmp:
        pacsv.write_csv(requests, tmp)
    io.write_parquet(out / "label_requests.parquet", requests)
    io.write_text(out / REQUESTS_SDF, sdf)
    io.write_json(out / "manifest.json", manifest)
    return str(out)


def read_label_file(path: str) -> pa.Table:
    """Read a user's ``graph_id,label`` CSV with every cell as text (validation parses them)."""
    return io.read_text_csv(path, what="label file")


@task(name="import-labels", persist_result=False)
def import_labels(source: str, requested: np.ndarray, known: np.ndarray, dataset_y: np.ndarray | None,
                  task=None) -> tuple:
    """Validated labels ``(graph_ids, Y (m, T), meta)`` in the values users write (multi-class: the class values);
    from a user file (checked against the dataset's task: nothing is written on a bad value), or the flagged
    benchmark stand-in."""
    from tmdlib.datasets.labels import validate_label_import

    if source == STANDIN:
        if dataset_y is None:
            raise InputError(None, "the dataset has no labels to stand in with")
        pos = np.searchsorted(known, requested)
        y = np.asarray(dataset_y, dtype=np.float64)[pos]
        if task is not None and task.type == "multiclass":  # the store holds class indices
            y = np.asarray(task.classes)[y.astype(np.int64)]
        meta = {"source": STANDIN, "benchmark_mode": True,
                "warning": "labels were NOT imported: the dataset's own labels were joined for the requested ids "
                           "only (benchmark stand-in for a labelling round)"}
        return np.asarray(requested), y, meta
    table = validate_label_import(read_label_file(source), requested, known, source, task=task)
    meta = {"source": "import", "benchmark_mode": False, "file": str(source), "sha256": io.sha256_file(source)}
    return table.column("graph_id").to_numpy(), _matrix(table), meta


@task(name="write-labels", persist_result=False)
def write_labels(out_dir: str, graph_ids: np.ndarray, y: np.ndarray, meta: dict, task=None) -> str:
    """labels.csv (``graph_id,y``, or one column per target; empty = not measured) and labels.json atomically."""
    out = Path(out_dir)
    Y = _rows(y, len(graph_ids), task)
    head = ["y"] if task is None or task.num_targets == 1 else list(task.targets)
    lines = [",".join(["graph_id", *head])] + [f"{int(g)},{','.join(_cell(v) for v in row)}"
                                               for g, row in zip(graph_ids, Y)]
    io.write_text(out / "labels.csv", "\n".join(lines) + "\n")
    io.write_json(out / "labels.json", {**meta, "labelled": int(len(graph_ids))})
    return str(out)
