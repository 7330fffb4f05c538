r"""Store identity: content hashes of graphs and of a whole graph store, independent of the file encoding.

Every artifact made from a graph store (the TMD matrix's ``meta.json``, ``selection.json``, the label manifest,
``train.json``, ``metrics.json``, the MLflow dataset digest, the audit report) names the store by
:func:`store_content_hash`, so artifacts that must belong together can be checked to do so.

* :func:`graph_hashes` -- sha256 of each graph's content (shapes and dtypes, feature rows, edge lists);
* :func:`content_hash` -- sha256 over the lines ``"<graph id> <graph hash>\n"`` in store order;
* :func:`store_content_hash` -- both, for a :class:`~tmdlib._graph.GraphDataset`;
* :func:`check_same_store` -- an artifact's recorded hash (:data:`STORE_HASH_KEY`) against the store's.
* :func:`duplicate_counts` -- the structures a molecule store holds more than once, by their keys.
"""
from __future__ import annotations

import hashlib
from typing import Iterable

import numpy as np

from .._errors import InputError
from .._graph import GraphDataset

__all__ = ["STORE_HASH_KEY", "graph_hashes", "content_hash", "store_content_hash", "check_same_store",
           "duplicate_counts", "structure_duplicates", "CANONICAL_DUPLICATES_LIMIT",
           "table_summary", "streamed_summary"]


#: The field under which an artifact (the TMD matrix's meta, a selection, a label manifest, ...) records the
#: :func:`store_content_hash` of the graph store it was made from.
STORE_HASH_KEY = "store_content_sha256"


def graph_hashes(ds: GraphDataset) -> list[str]:
    """sha256 of each graph's content, in dataset order.

    Each hash covers a header with the shapes and dtypes -- ``n`` nodes, ``d`` features, ``m`` directed
    edges, the dtypes of the feature and edge arrays -- then the feature rows and the edge lists, so two
    graphs whose arrays happen to concatenate to the same bytes (say ``n x 3`` features against ``n x 1``
    features plus edges) never share a hash.

    Returns
    -------
    list of str, length G
        Hex digests.
    """
    out = []
    d = ds.num_features
    dtypes = f"x={ds.features.dtype.str} src={ds.src.dtype.str} dst={ds.dst.dtype.str}"
    for g in range(len(ds)):
        a, b = ds.node_ptr[g], ds.node_ptr[g + 1]
        e0, e1 = ds.edge_ptr[g], ds.edge_ptr[g + 1]
        h = hashlib.sha256(f"graph n={b - a} d={d} m={e1 - e0} {dtypes}\n".encode())
        h.update(np.ascontiguousarray(ds.node_features(a, b)))  # the arrays' bytes, without a copy
        h.update(np.ascontiguousarray(ds.src[e0:e1]))
        h.update(np.ascontiguousarray(ds.dst[e0:e1]))
        out.append(h.hexdigest())
    return out


def content_hash(graph_ids: Iterable[int], graph_hashes: Iterable[str]) -> str:
    """sha256 of a dataset's content, independent of how the graph store file is encoded.

    Parameters
    ----------
    graph_ids : iterable of int
        Graph ids in store order.
    graph_hashes : iterable of str
        The per-graph content hashes (node features and edges), aligned with ``graph_ids``.

    Returns
    -------
    str
        Hex sha256 over the lines ``"<graph id> <graph hash>\\n"``: equal for two stores holding the same
        graphs under the same ids in the same order, whatever their Parquet compression or row groups.
    """
    h = hashlib.sha256()
    for gid, gh in zip(graph_ids, graph_hashes, strict=True):
        h.update(f"{int(gid)} {gh}\n".encode())
    return h.hexdigest()


def store_content_hash(ds: GraphDataset, hashes: list[str] | None = None) -> str:
    """:func:`content_hash` of a dataset's graph ids and per-graph hashes (``hashes`` when already computed)."""
    return content_hash(ds.graph_ids, graph_hashes(ds) if hashes is None else hashes)


def check_same_store(path: str, recorded: dict, graphs: str, store_hash, what: str) -> None:
    """Refuse an artifact made for another graph store.

    Parameters
    ----------
    path : str
        The artifact (named in the error).
    recorded : dict
        Its JSON content; without :data:`STORE_HASH_KEY` (written before the field existed) it is accepted
        unchecked.
    graphs : str
        The graph store the command was given.
    store_hash : str or callable
        That store's :func:`store_content_hash`, or a function returning it (called only when needed).
    what : str
        What the artifact is, for the message (``"selection"``, ``"TMD matrix"``).

    Raises
    ------
    InputError
        The recorded hash differs from the store's.
    """
    want = recorded.get(STORE_HASH_KEY)
    if want is None:
        return
    have = store_hash() if callable(store_hash) else store_hash
    if want != have:
        raise InputError(path, f"this {what} was made for another graph store: it records content sha256 "
                               f"{str(want)[:16]}..., {graphs} has {have[:16]}... (make it again from this store, or pass "
                               f"the store it was made from with --graphs)")

def duplicate_counts(keys: Iterable) -> dict[str, int]:
    """Structures stored more than once, given one key per graph (a canonical SMILES, or the SMILES as written).

    Returns
    -------
    dict
        ``structures``: the keys held by more than one graph; ``graphs``: the graphs beyond each such key's first
        (``sum(count - 1)`` over them).
    """
    from collections import Counter

    copies = [c for c in Counter(keys).values() if c > 1]
    return {"structures": len(copies), "graphs": int(sum(copies) - len(copies))}


#: A store without the canonical key column (older, or an OGB source) has its duplicate structures counted on
#: RDKit's canonical SMILES up to this size (about 0.2 ms a molecule on one core, measured: 10 s at this size),
#: larger ones on the SMILES as written.
CANONICAL_DUPLICATES_LIMIT = 50_000


def structure_duplicates(index=None, smiles=None) -> dict:
    """:func:`duplicate_counts` of a molecule store, with what the structures were compared on.

    Parameters
    ----------
    index : list of str, optional
        The store's canonical SMILES key index (written at ingest): canonical at any size, nothing parsed.
    smiles : list of str, optional
        Without an index, the SMILES as stored: canonicalised by RDKit up to
        :data:`CANONICAL_DUPLICATES_LIMIT` molecules, compared as written above it.

    Returns
    -------
    dict
        ``{"structures", "graphs", "compared"}``.
    """
    if index is not None:
        keys, compared = index, "RDKit's canonical SMILES"
    elif len(smiles) <= CANONICAL_DUPLICATES_LIMIT:
        from ._smiles import canonical_smiles

        keys, compared = [canonical_smiles(s) or s for s in smiles], "RDKit's canonical SMILES"
    else:
        keys, compared = smiles, "the SMILES as written (a pool this large is not canonicalised)"
    return {**duplicate_counts(keys), "compared": compared}


def table_summary(table) -> dict:
    """What an ingest says of the graph store it wrote: ``{"task", "graphs", "mean_nodes", "mean_edges"}`` (the task
    described, the graphs, their mean node and undirected edge counts; 0.0 for an empty store)."""
    import pyarrow.compute as pc

    from ._task import table_task

    n_nodes = table.column("num_nodes").to_numpy()
    n_edges = pc.list_value_length(table.column("edge_src")).to_numpy() // 2
    return {"task": table_task(table).describe(), "graphs": int(table.num_rows),
            "mean_nodes": float(n_nodes.mean()) if table.num_rows else 0.0,
            "mean_edges": float(n_edges.mean()) if table.num_rows else 0.0}


def streamed_summary(stats: dict) -> dict:
    """:func:`table_summary` of a store written a slice at a time, from its counts (``stats``: ``graphs``,
    ``nodes``, ``edges`` and ``task``)."""
    graphs = stats["graphs"]
    return {"task": stats["task"].describe(), "graphs": graphs,
            "mean_nodes": stats["nodes"] / graphs if graphs else 0.0,
            "mean_edges": stats["edges"] / graphs if graphs else 0.0}
