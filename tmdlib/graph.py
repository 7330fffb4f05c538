"""In-memory graph containers shared by every tmdlib algorithm.

Two containers, both plain numpy (no torch):

* :class:`Graph` -- one undirected graph with node features ``x`` of shape
  ``(n, d)`` and a symmetric ``edge_index`` of shape ``(2, m)`` (both
  directions stored, no self-loops, no duplicates).  It keeps a CSR view of the
  adjacency (``indptr`` of shape ``(n + 1,)``, ``indices`` of shape ``(m,)``).
* :class:`GraphDataset` -- many graphs concatenated: node features of all
  graphs stacked into one ``(N, d)`` array, ``node_ptr`` of shape ``(G + 1,)``
  marking where each graph's nodes start, and one global CSR adjacency whose
  column indices are *global* node ids.  Built from Arrow list columns by
  offset arithmetic, without per-node Python loops.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np

__all__ = ["Graph", "GraphDataset", "GraphValidationError"]


class GraphValidationError(ValueError):
    """Raised when arrays do not describe a valid undirected simple graph."""


def _csr_from_edges(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR arrays of a directed edge list.

    Parameters
    ----------
    n : int
        Number of nodes.
    src, dst : ndarray of int, shape (m,)
        Edge ``k`` goes from ``src[k]`` to ``dst[k]``.

    Returns
    -------
    indptr : ndarray of int64, shape (n + 1,)
    indices : ndarray of int64, shape (m,)
        Neighbours of node ``v`` are ``indices[indptr[v]:indptr[v + 1]]``, sorted.
    """
    order = np.lexsort((dst, src))
    indices = np.asarray(dst, dtype=np.int64)[order]
    counts = np.bincount(np.asarray(src, dtype=np.int64), minlength=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return indptr, indices


@dataclass(frozen=True, eq=False)
class Graph:
    """An undirected graph with node features.

    Parameters
    ----------
    x : array_like of float, shape (n, d)
        Node features; row ``v`` is :math:`f^v`.  A 1-D array is read as ``(n, 1)``.
    edge_index : array_like of int, shape (2, m)
        Directed edges; every undirected edge ``{u, v}`` appears as both
        ``(u, v)`` and ``(v, u)``.  Self-loops and duplicates are rejected.
    validate : bool, default True
        Check symmetry, ranges, self-loops, duplicates and finiteness.

    Attributes
    ----------
    indptr, indices : ndarray of int64
        CSR adjacency: :math:`N(v)` = ``indices[indptr[v]:indptr[v+1]]`` (sorted).
    """

    x: np.ndarray
    edge_index: np.ndarray
    validate: bool = field(default=True, repr=False)
    indptr: np.ndarray = field(init=False, repr=False)
    indices: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        x = np.asarray(self.x, dtype=np.float64)
        if x.ndim == 1:
            x = x[:, None]
        if x.ndim != 2:
            raise GraphValidationError(f"x must have shape (n, d), got {x.shape}")
        ei = np.asarray(self.edge_index)
        if ei.size == 0:
            ei = np.zeros((2, 0), dtype=np.int64)
        if ei.ndim != 2 or ei.shape[0] != 2:
            raise GraphValidationError(f"edge_index must have shape (2, m), got {ei.shape}")
        if not np.issubdtype(ei.dtype, np.integer):
            raise GraphValidationError(f"edge_index must be integer, got {ei.dtype}")
        ei = ei.astype(np.int64, copy=False)
        n = x.shape[0]
        if self.validate:
            _validate_simple_symmetric(n, ei[0], ei[1])
            if not np.all(np.isfinite(x)):
                raise GraphValidationError("x contains NaN or inf")
        indptr, indices = _csr_from_edges(n, ei[0], ei[1])
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "edge_index", ei)
        object.__setattr__(self, "indptr", indptr)
        object.__setattr__(self, "indices", indices)

    @property
    def num_nodes(self) -> int:
        """Number of nodes :math:`|V|`."""
        return int(self.x.shape[0])

    @property
    def num_edges(self) -> int:
        """Number of undirected edges :math:`|E|` (half the directed count)."""
        return int(self.edge_index.shape[1] // 2)

    @property
    def num_features(self) -> int:
        """Feature dimension ``d``."""
        return int(self.x.shape[1])

    @property
    def degree(self) -> np.ndarray:
        """Node degrees, shape ``(n,)``."""
        return np.diff(self.indptr)

    def neighbors(self, v: int) -> np.ndarray:
        """Sorted neighbours of node ``v``."""
        return self.indices[self.indptr[v]:self.indptr[v + 1]]

    def subgraph(self, nodes: Sequence[int] | np.ndarray) -> "Graph":
        """Induced subgraph :math:`G[S]`.

        Parameters
        ----------
        nodes : array_like of int, shape (k,)
            The node set ``S`` (order and repeats ignored).

        Returns
        -------
        Graph
            Nodes relabelled ``0..k-1`` in sorted order of the original ids;
            edges are those of ``G`` with both ends in ``S``.
        """
        keep = np.unique(np.asarray(nodes, dtype=np.int64))
        if keep.size and (keep[0] < 0 or keep[-1] >= self.num_nodes):
            raise IndexError("subgraph node id out of range")
        new_id = np.full(self.num_nodes, -1, dtype=np.int64)
        new_id[keep] = np.arange(keep.size)
        src, dst = new_id[self.edge_index[0]], new_id[self.edge_index[1]]
        mask = (src >= 0) & (dst >= 0)
        return Graph(self.x[keep], np.stack([src[mask], dst[mask]]), validate=False)

    @classmethod
    def empty(cls, num_features: int) -> "Graph":
        """The graph with no nodes, ``x`` of shape ``(0, num_features)``."""
        return cls(np.zeros((0, num_features)), np.zeros((2, 0), dtype=np.int64), validate=False)


def _validate_simple_symmetric(n: int, src: np.ndarray, dst: np.ndarray) -> None:
    """Raise :class:`GraphValidationError` unless the edges form a simple undirected graph."""
    if src.size == 0:
        return
    lo, hi = min(src.min(), dst.min()), max(src.max(), dst.max())
    if lo < 0 or hi >= n:
        raise GraphValidationError(f"edge endpoint out of range [0, {n}): found {lo if lo < 0 else hi}")
    if np.any(src == dst):
        k = int(np.flatnonzero(src == dst)[0])
        raise GraphValidationError(f"self-loop at edge {k} ({src[k]}, {dst[k]})")
    key = src.astype(np.int64) * n + dst
    uniq = np.unique(key)
    if uniq.size != key.size:
        raise GraphValidationError("duplicate edges")
    rev = np.unique(dst.astype(np.int64) * n + src)
    if not np.array_equal(uniq, rev):
        raise GraphValidationError("edge_index is not symmetric (each edge must appear in both directions)")


@dataclass(frozen=True, eq=False)
class GraphDataset:
    """Many graphs stored as concatenated numpy arrays.

    Parameters
    ----------
    x : ndarray of float64, shape (N, d)
        Features of all nodes of all graphs, graph after graph.
    node_ptr : ndarray of int64, shape (G + 1,)
        Graph ``g`` owns global nodes ``node_ptr[g]:node_ptr[g + 1]``.
    edge_ptr : ndarray of int64, shape (G + 1,)
        Graph ``g`` owns directed edges ``edge_ptr[g]:edge_ptr[g + 1]`` of ``src``/``dst``.
    src, dst : ndarray of int64, shape (M,)
        Directed edges in *local* (per-graph, 0-based) node ids, both directions.
    graph_ids : ndarray of int64, shape (G,)
        Identifier of each graph (``graph_id`` column of the store).
    y : ndarray of float64, shape (G,) or None
        Graph labels, NaN where missing.  Algorithms that select data never read it.

    Notes
    -----
    ``indptr``/``indices`` give a global CSR adjacency with global node ids.
    """

    x: np.ndarray
    node_ptr: np.ndarray
    edge_ptr: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    graph_ids: np.ndarray
    y: np.ndarray | None = None
    indptr: np.ndarray = field(init=False, repr=False)
    indices: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        x = np.ascontiguousarray(self.x, dtype=np.float64)
        if x.ndim == 1:
            x = x[:, None]
        object.__setattr__(self, "x", x)
        for name in ("node_ptr", "edge_ptr", "src", "dst", "graph_ids"):
            object.__setattr__(self, name, np.ascontiguousarray(getattr(self, name), dtype=np.int64))
        g_of_edge = np.repeat(np.arange(len(self)), np.diff(self.edge_ptr))
        offset = self.node_ptr[:-1][g_of_edge]
        gsrc, gdst = self.src + offset, self.dst + offset
        indptr, indices = _csr_from_edges(self.num_nodes, gsrc, gdst)
        object.__setattr__(self, "indptr", indptr)
        object.__setattr__(self, "indices", indices)

    def __len__(self) -> int:
        return int(self.node_ptr.size - 1)

    def __getitem__(self, g: int) -> Graph:
        a, b = self.node_ptr[g], self.node_ptr[g + 1]
        e0, e1 = self.edge_ptr[g], self.edge_ptr[g + 1]
        return Graph(self.x[a:b], np.stack([self.src[e0:e1], self.dst[e0:e1]]), validate=False)

    def __iter__(self) -> Iterator[Graph]:
        return (self[g] for g in range(len(self)))

    @property
    def num_nodes(self) -> int:
        """Total number of nodes :math:`N` over all graphs."""
        return int(self.node_ptr[-1])

    @property
    def num_features(self) -> int:
        """Feature dimension ``d``."""
        return int(self.x.shape[1])

    @property
    def nodes_per_graph(self) -> np.ndarray:
        """Shape ``(G,)``: :math:`|V_g|`."""
        return np.diff(self.node_ptr)

    @property
    def edges_per_graph(self) -> np.ndarray:
        """Shape ``(G,)``: undirected edge count :math:`|E_g|`."""
        return np.diff(self.edge_ptr) // 2

    @property
    def graph_of_node(self) -> np.ndarray:
        """Shape ``(N,)``: the graph index (0..G-1) owning each global node."""
        return np.repeat(np.arange(len(self)), self.nodes_per_graph)

    def take(self, index: Sequence[int] | np.ndarray) -> "GraphDataset":
        """The sub-dataset of graphs at positions ``index`` (in that order)."""
        idx = np.asarray(index, dtype=np.int64)
        npg, epg = self.nodes_per_graph[idx], np.diff(self.edge_ptr)[idx]
        node_sel = _ranges(self.node_ptr[idx], npg)
        edge_sel = _ranges(self.edge_ptr[idx], epg)
        return GraphDataset(
            x=self.x[node_sel],
            node_ptr=np.concatenate([[0], np.cumsum(npg)]),
            edge_ptr=np.concatenate([[0], np.cumsum(epg)]),
            src=self.src[edge_sel],
            dst=self.dst[edge_sel],
            graph_ids=self.graph_ids[idx],
            y=None if self.y is None else self.y[idx],
        )

    @classmethod
    def from_graphs(cls, graphs: Sequence[Graph], graph_ids: Sequence[int] | None = None,
                    y: Sequence[float] | None = None) -> "GraphDataset":
        """Concatenate :class:`Graph` objects (one Python step per graph, not per node)."""
        graphs = list(graphs)
        d = graphs[0].num_features if graphs else 1
        npg = np.array([g.num_nodes for g in graphs], dtype=np.int64)
        epg = np.array([g.edge_index.shape[1] for g in graphs], dtype=np.int64)
        return cls(
            x=np.concatenate([g.x for g in graphs]) if graphs else np.zeros((0, d)),
            node_ptr=np.concatenate([[0], np.cumsum(npg)]),
            edge_ptr=np.concatenate([[0], np.cumsum(epg)]),
            src=np.concatenate([g.edge_index[0] for g in graphs]) if graphs else np.zeros(0, np.int64),
            dst=np.concatenate([g.edge_index[1] for g in graphs]) if graphs else np.zeros(0, np.int64),
            graph_ids=np.arange(len(graphs)) if graph_ids is None else np.asarray(graph_ids),
            y=None if y is None else np.asarray(y, dtype=np.float64),
        )

    @classmethod
    def from_arrow(cls, table) -> "GraphDataset":
        """Build from an Arrow table in the tmdsub graph-store schema.

        Columns used: ``graph_id`` (int64), ``num_nodes``, ``x`` (list<list<float32>>),
        ``edge_src`` / ``edge_dst`` (list<int32>, local ids), ``y`` (nullable float).
        Offsets of the list columns become ``node_ptr``/``edge_ptr`` directly.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        def flat(col):
            arr = table.column(col).combine_chunks()
            return arr

        x_outer = flat("x")
        node_ptr = np.asarray(x_outer.offsets, dtype=np.int64)
        node_ptr = node_ptr - node_ptr[0]
        rows = x_outer.flatten()
        inner_off = np.asarray(rows.offsets, dtype=np.int64)
        vals = np.asarray(rows.flatten(), dtype=np.float64)
        n_nodes = len(rows)
        d = int(inner_off[1] - inner_off[0]) if n_nodes else 0
        x = vals.reshape(n_nodes, d) if n_nodes else np.zeros((0, max(d, 1)))
        src_col, dst_col = flat("edge_src"), flat("edge_dst")
        edge_ptr = np.asarray(src_col.offsets, dtype=np.int64)
        edge_ptr = edge_ptr - edge_ptr[0]
        y = None
        if "y" in table.column_names:
            y = pc.fill_null(table.column("y").cast(pa.float64()), float("nan")).to_numpy()
        return cls(
            x=x,
            node_ptr=node_ptr,
            edge_ptr=edge_ptr,
            src=np.asarray(src_col.flatten(), dtype=np.int64),
            dst=np.asarray(dst_col.flatten(), dtype=np.int64),
            graph_ids=table.column("graph_id").to_numpy(),
            y=y,
        )


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + l)`` for each pair, without a Python loop."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    base = np.repeat(starts - (ends - lengths), lengths)
    return base + np.arange(total)
