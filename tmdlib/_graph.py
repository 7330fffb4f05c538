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

__all__ = ["Graph", "GraphDataset", "GraphValidationError", "FEATURE_LIMIT", "validate_graph_arrays"]

#: Largest magnitude of a node feature, :math:`|x_{ij}| \le` ``FEATURE_LIMIT`` = 3.4028234663852886e38, the
#: largest float32: the graph store keeps features as float32 and the GIN trains in float32, so nothing larger
#: can be stored or learned from.  In float64 it leaves the TMD and tree norms far from overflow: every
#: squared distance :math:`\lVert x_u - x_v \rVert^2 \le 4 d\,` ``FEATURE_LIMIT`` :math:`^2 \approx 4.6 \cdot
#: 10^{77} d` is finite for any width ``d``, and a tree norm is at most :math:`n \sqrt d\,` ``FEATURE_LIMIT``
#: :math:`\sum_l \prod_t w_t \Delta^l`, which the engine checks before it computes
#: (:func:`tmdlib.distance._limits.check_value_range`).
FEATURE_LIMIT = float(np.finfo(np.float32).max)


class GraphValidationError(ValueError):
    """Raised when arrays do not describe valid undirected simple graphs with bounded finite features."""


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
    r"""An undirected graph with node features.

    Parameters
    ----------
    x : array_like of float, shape (n, d)
        Node features; row ``v`` is :math:`f^v`.  A 1-D array is read as ``(n, 1)``.
    edge_index : array_like of int, shape (2, m)
        Directed edges; every undirected edge ``{u, v}`` appears as both
        ``(u, v)`` and ``(v, u)``.  Self-loops and duplicates are rejected.
    validate : bool, default True
        Check ranges, self-loops, duplicates, symmetry, and that features are finite with
        :math:`|x_{ij}| \le` :data:`FEATURE_LIMIT` (:func:`validate_graph_arrays`).  Only code that
        builds a graph from an already validated one should pass ``False``.

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
            validate_graph_arrays(x, np.array([0, n]), np.array([0, ei.shape[1]]), ei[0], ei[1])
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


def validate_graph_arrays(x: np.ndarray, node_ptr: np.ndarray, edge_ptr: np.ndarray, src: np.ndarray,
                          dst: np.ndarray, feature_index: np.ndarray | None = None) -> None:
    r"""Raise :class:`GraphValidationError` unless the arrays describe valid graphs.

    The one check behind :class:`Graph` (one graph: ``node_ptr = [0, n]``, ``edge_ptr = [0, m]``) and
    :class:`GraphDataset` (many graphs).  Vectorised over all graphs: a few passes over the arrays and one
    sort of the ``M`` edge keys, no per-graph Python loop.

    Parameters
    ----------
    x : ndarray of float, shape (N, d), or (F, d) with ``feature_index``
        Node features of all graphs (or the table of feature rows): finite, :math:`|x_{ij}| \le`
        :data:`FEATURE_LIMIT`.
    node_ptr, edge_ptr : ndarray of int, shape (G + 1,)
        Non-decreasing, from 0 to ``N`` and to ``M``.
    src, dst : ndarray of int, shape (M,)
        Directed edges in local node ids of their graph: in range, no self-loops, no duplicates, and
        symmetric (each ``(u, v)`` has its ``(v, u)`` in the same graph).  The TMD follows out-neighbours
        and the GIN in-neighbours: only for symmetric edges are they the same graph.
    feature_index : ndarray of int, shape (N,), optional
        Row of ``x`` of each node (dictionary-encoded features); its range is checked by the caller.

    Raises
    ------
    GraphValidationError
        At the first problem, naming the graph (for more than one), the node or edge and the rule.
    """
    node_ptr, edge_ptr = np.asarray(node_ptr), np.asarray(edge_ptr)
    _check_pointers(x, node_ptr, edge_ptr, src, dst, None if feature_index is None else np.size(feature_index))
    check_features(x, node_ptr, feature_index)
    _check_edges(node_ptr, edge_ptr, np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64))


def _where(node_ptr: np.ndarray, g: int) -> str:
    """``"graph g: "`` when there are several graphs, else nothing."""
    return f"graph {int(g)}: " if node_ptr.size > 2 else ""


def _check_pointers(x, node_ptr, edge_ptr, src, dst, num_nodes: int | None = None) -> None:
    """Pointer arrays consistent with the array lengths (``num_nodes``: default ``len(x)``)."""
    if np.ndim(x) != 2:
        raise GraphValidationError(f"x must have shape (N, d), got {np.shape(x)}")
    if np.shape(src) != np.shape(dst) or np.ndim(src) != 1:
        raise GraphValidationError(f"src and dst must be 1-D of equal length, got {np.shape(src)} and {np.shape(dst)}")
    nodes = x.shape[0] if num_nodes is None else num_nodes
    for name, ptr, total in (("node_ptr", node_ptr, nodes), ("edge_ptr", edge_ptr, np.size(src))):
        if ptr.ndim != 1 or ptr.size < 1 or not np.issubdtype(ptr.dtype, np.integer):
            raise GraphValidationError(f"{name} must be a 1-D integer array of G + 1 offsets, got {ptr.dtype} {ptr.shape}")
        if ptr[0] != 0 or ptr[-1] != total or np.any(ptr[1:] < ptr[:-1]):
            raise GraphValidationError(f"{name} must rise from 0 to {total} without decreasing")
    if node_ptr.size != edge_ptr.size:
        raise GraphValidationError(f"node_ptr has {node_ptr.size - 1} graphs, edge_ptr {edge_ptr.size - 1}")


def check_features(x: np.ndarray, node_ptr: np.ndarray | None = None,
                   feature_index: np.ndarray | None = None) -> None:
    """Every feature finite with magnitude at most :data:`FEATURE_LIMIT` (two passes, no temporary copy).

    ``x`` is the dense ``(N, d)`` matrix, or with ``feature_index`` the ``(F, d)`` table of feature rows
    (every row is checked, used or not).

    Raises
    ------
    GraphValidationError
        Naming the graph (when ``node_ptr`` holds several), the node, the feature column and the value.
    """
    if x.size == 0:
        return
    lo, hi = x.min(), x.max()  # NaN propagates through both
    if -FEATURE_LIMIT <= lo and hi <= FEATURE_LIMIT:
        return
    r, j = (int(a[0]) for a in np.nonzero(~(np.abs(x) <= FEATURE_LIMIT)))
    kind = "is not finite" if not np.isfinite(x[r, j]) else "exceeds the feature limit"
    rule = (f"features must be finite with |x| <= FEATURE_LIMIT = {FEATURE_LIMIT!r} (the float32 range of the "
            f"graph store and the GIN, which keeps every sum inside the TMD and tree norms far from float64 overflow)")
    if feature_index is None:
        v = r
    else:
        users = np.flatnonzero(np.asarray(feature_index) == r)
        if users.size == 0:
            raise GraphValidationError(f"feature table row {r} (used by no node): feature {j} = {float(x[r, j])!r} "
                                       f"{kind}; {rule}")
        v = int(users[0])
    ptr = np.asarray([0, x.shape[0] if feature_index is None else np.size(feature_index)]) if node_ptr is None \
        else np.asarray(node_ptr)
    g = int(np.searchsorted(ptr, v, side="right")) - 1
    raise GraphValidationError(f"{_where(ptr, g)}node {v - int(ptr[g])}: feature {j} = {float(x[r, j])!r} {kind}; {rule}")


def _check_edges(node_ptr: np.ndarray, edge_ptr: np.ndarray, src: np.ndarray, dst: np.ndarray) -> None:
    """Local ids in range, no self-loops, no duplicates, symmetric: one sort of global edge keys."""
    if src.size == 0:
        return
    epg = np.diff(edge_ptr)
    g = np.repeat(np.arange(epg.size), epg)
    n = np.diff(node_ptr)[g]

    def fail(k: int, problem: str) -> None:
        gk = int(g[k])
        raise GraphValidationError(f"{_where(node_ptr, gk)}edge {k - int(edge_ptr[gk])} ({src[k]}, {dst[k]}): {problem}")

    out = np.flatnonzero((src < 0) | (src >= n) | (dst < 0) | (dst >= n))
    if out.size:
        fail(int(out[0]), f"endpoint out of range [0, {n[out[0]]})")
    loops = np.flatnonzero(src == dst)
    if loops.size:
        fail(int(loops[0]), "self-loop")
    total = int(node_ptr[-1])
    if total >= 3_037_000_499:  # total**2 must fit in int64
        raise GraphValidationError(f"{total} nodes in all: more than the 3.0e9 the edge check supports")
    off = node_ptr[:-1][g]
    gs, gd = src + off, dst + off
    key = gs * total + gd
    skey = key if bool(np.all(key[1:] >= key[:-1])) else np.sort(key)  # stores keep edges sorted: no sort
    dup = np.flatnonzero(skey[1:] == skey[:-1])
    if dup.size:
        fail(int(np.flatnonzero(key == skey[dup[0]])[1]), "duplicate edge")
    rev = gd * total + gs
    pos = np.minimum(np.searchsorted(skey, rev), skey.size - 1)
    missing = np.flatnonzero(skey[pos] != rev)
    if missing.size:
        k = int(missing[0])
        fail(k, f"asymmetric: ({dst[k]}, {src[k]}) is missing (each undirected edge must appear in both directions)")


class GraphDataset:
    r"""Many graphs stored as concatenated numpy arrays, node features dictionary-encoded.

    Node features are held as a table of feature rows and one row index per node:
    :math:`f^v` = ``features[feature_index[v]]``.  Molecules and labelled TU graphs have a
    handful of distinct rows (MOSES: ~50 for 34 M nodes), so the dense ``(N, d)`` matrix is never
    needed; a dataset built from a dense ``x`` keeps ``features = x`` and an identity index.

    Parameters
    ----------
    x : ndarray of float, shape (N, d), optional
        Dense features of all nodes, graph after graph (give this *or* ``features`` and
        ``feature_index``).
    node_ptr : ndarray of int64, shape (G + 1,)
        Graph ``g`` owns global nodes ``node_ptr[g]:node_ptr[g + 1]``.
    edge_ptr : ndarray of int64, shape (G + 1,)
        Graph ``g`` owns directed edges ``edge_ptr[g]:edge_ptr[g + 1]`` of ``src``/``dst``.
    src, dst : ndarray of int64, shape (M,)
        Directed edges in *local* (per-graph, 0-based) node ids, both directions.
    graph_ids : ndarray of int64, shape (G,)
        Identifier of each graph (``graph_id`` column of the store).
    y : ndarray of float64, shape (G,) or (G, T), or None
        Graph labels, NaN where missing: one column, or ``T`` targets per graph (multi-task / multi-target
        regression; :mod:`tmdlib.datasets._task`).  Algorithms that select data never read it.
    features : ndarray of float, shape (F, d), optional
        The feature table (dictionary-encoded form).
    feature_index : ndarray of int, shape (N,), optional
        Row of ``features`` of each node, ``0 <= feature_index < F``.
    validate : bool, default True
        Check what :class:`Graph` checks, for all graphs at once (:func:`validate_graph_arrays`: pointers,
        node ids in range, no self-loops or duplicates, symmetric edges, finite features with
        :math:`|x_{ij}| \le` :data:`FEATURE_LIMIT`), vectorised: a few passes over the arrays and at most
        one sort of the edge keys, no per-graph Python loop.  ``False`` is only for internal constructors
        that derive a dataset from validated ones (:meth:`take`, :meth:`compact`, :meth:`concat`, induced
        subgraphs), never for data from outside.

    Raises
    ------
    GraphValidationError
        Naming the graph (its position), the node or edge and the rule broken.

    Attributes
    ----------
    indptr, indices : ndarray of int64
        Global CSR adjacency with global node ids.
    x : ndarray of float64, shape (N, d)
        The dense features, materialised on access (avoid it on large datasets; use
        ``features`` and ``feature_index``).
    """

    __slots__ = ("node_ptr", "edge_ptr", "src", "dst", "graph_ids", "y", "features", "feature_index",
                 "indptr", "indices", "_dense")

    def __init__(self, x: np.ndarray | None = None, node_ptr=None, edge_ptr=None, src=None, dst=None,
                 graph_ids=None, y=None, *, features: np.ndarray | None = None,
                 feature_index: np.ndarray | None = None, validate: bool = True, _csr: tuple | None = None) -> None:
        if (x is None) == (features is None):
            raise GraphValidationError("give either x (dense features) or features with feature_index")
        if x is not None:
            table = np.ascontiguousarray(x, dtype=np.float64)
            if table.ndim == 1:
                table = table[:, None]
            index = np.arange(table.shape[0], dtype=np.int64)
            dense = True
        else:
            if feature_index is None:
                raise GraphValidationError("features needs feature_index (one table row per node)")
            table = np.ascontiguousarray(features, dtype=np.float64)
            if table.ndim == 1:
                table = table[:, None]
            index = np.ascontiguousarray(feature_index, dtype=np.int64)
            dense = False
        if table.ndim != 2:
            raise GraphValidationError(f"features must have shape (F, d), got {table.shape}")
        s = object.__setattr__
        s(self, "features", table)
        s(self, "feature_index", index)
        s(self, "_dense", dense)
        for name, v in (("node_ptr", node_ptr), ("edge_ptr", edge_ptr), ("src", src), ("dst", dst),
                        ("graph_ids", graph_ids)):
            s(self, name, np.ascontiguousarray(v, dtype=np.int64))
        s(self, "y", None if y is None else np.asarray(y, dtype=np.float64))
        if validate:
            validate_graph_arrays(table, self.node_ptr, self.edge_ptr, self.src, self.dst,
                                  None if dense else index)
            if self.graph_ids.shape != (len(self),):
                raise GraphValidationError(f"graph_ids must have shape ({len(self)},), got {self.graph_ids.shape}")
            if self.y is not None and (self.y.ndim not in (1, 2) or self.y.shape[0] != len(self)):
                raise GraphValidationError(f"y must have shape ({len(self)},) or ({len(self)}, T), got {self.y.shape}")
        if index.shape != (self.num_nodes,):
            raise GraphValidationError(f"{index.size} feature rows for {self.num_nodes} nodes")
        if not dense and index.size and (index.min() < 0 or index.max() >= table.shape[0]):
            raise GraphValidationError(f"feature_index out of range [0, {table.shape[0]})")
        if _csr is None:
            g_of_edge = np.repeat(np.arange(len(self)), np.diff(self.edge_ptr))
            offset = self.node_ptr[:-1][g_of_edge]
            _csr = _csr_from_edges(self.num_nodes, self.src + offset, self.dst + offset)
        s(self, "indptr", _csr[0])
        s(self, "indices", _csr[1])

    def __setattr__(self, name, value):
        raise AttributeError("GraphDataset is immutable; use .replace(...)")

    def __reduce__(self):
        """Pickle support (process pools, Dask): the arrays, CSR included, without recomputing anything."""
        fields = {"node_ptr": self.node_ptr, "edge_ptr": self.edge_ptr, "src": self.src, "dst": self.dst,
                  "graph_ids": self.graph_ids, "y": self.y, "_csr": (self.indptr, self.indices)}
        if self._dense:
            fields["x"] = self.features
        else:
            fields.update(features=self.features, feature_index=self.feature_index)
        return (_restore_dataset, (fields,))

    def __repr__(self) -> str:
        return (f"GraphDataset(graphs={len(self)}, nodes={self.num_nodes}, edges={self.src.size // 2}, "
                f"features={self.features.shape[0]}x{self.num_features}{'' if self._dense else ' table'})")

    def replace(self, **changes) -> "GraphDataset":
        """A copy with some fields replaced (``y``, ``graph_ids``, ...; like ``dataclasses.replace``)."""
        fields = {"node_ptr": self.node_ptr, "edge_ptr": self.edge_ptr, "src": self.src, "dst": self.dst,
                  "graph_ids": self.graph_ids, "y": self.y}
        if "x" in changes:
            fields["x"] = changes.pop("x")
        else:
            fields.update(features=self.features, feature_index=self.feature_index)
            if self._dense:
                fields = {k: v for k, v in fields.items() if k not in ("features", "feature_index")}
                fields["x"] = self.features
        structural = {"node_ptr", "edge_ptr", "src", "dst"} & set(changes)
        fields.update(changes)
        if not structural:
            fields["_csr"] = (self.indptr, self.indices)
        # graphs and features unchanged (only y / graph_ids): nothing new to check but their shapes
        fields.setdefault("validate", not set(changes) <= {"y", "graph_ids"})
        if not fields["validate"]:
            for name in ("y", "graph_ids"):
                if fields[name] is not None and np.shape(fields[name]) != (len(self),):
                    raise GraphValidationError(f"{name} must have shape ({len(self)},), got {np.shape(fields[name])}")
        return GraphDataset(**fields)

    @property
    def x(self) -> np.ndarray:
        """Dense node features, shape ``(N, d)`` (materialised unless the dataset was built dense)."""
        return self.features if self._dense else self.features[self.feature_index]

    @property
    def is_dense(self) -> bool:
        """Whether the features are held densely (identity index) rather than as a table of distinct rows."""
        return bool(self._dense)

    def node_features(self, start: int, stop: int) -> np.ndarray:
        """Dense features of global nodes ``start:stop``, shape ``(stop - start, d)``."""
        if self._dense:
            return self.features[start:stop]
        return self.features[self.feature_index[start:stop]]

    def compact(self) -> "GraphDataset":
        """The same graphs with the feature table reduced to its distinct rows (exact row equality)."""
        if self.features.shape[0] == 0:
            return self.replace(features=self.features, feature_index=self.feature_index) if self._dense else self
        rows, inv = np.unique(self.features, axis=0, return_inverse=True)
        return GraphDataset(node_ptr=self.node_ptr, edge_ptr=self.edge_ptr, src=self.src, dst=self.dst,
                            graph_ids=self.graph_ids, y=self.y, features=rows,
                            feature_index=inv.reshape(-1)[self.feature_index], _csr=(self.indptr, self.indices),
                            validate=False)  # the same graphs and feature values

    def __len__(self) -> int:
        return int(self.node_ptr.size - 1)

    def __getitem__(self, g: int) -> Graph:
        a, b = self.node_ptr[g], self.node_ptr[g + 1]
        e0, e1 = self.edge_ptr[g], self.edge_ptr[g + 1]
        return Graph(self.node_features(a, b), np.stack([self.src[e0:e1], self.dst[e0:e1]]), validate=False)

    def __iter__(self) -> Iterator[Graph]:
        return (self[g] for g in range(len(self)))

    @property
    def num_nodes(self) -> int:
        """Total number of nodes :math:`N` over all graphs."""
        return int(self.node_ptr[-1]) if self.node_ptr.size else 0

    @property
    def num_features(self) -> int:
        """Feature dimension ``d``."""
        return int(self.features.shape[1])

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
        """The sub-dataset of graphs at positions ``index`` (in that order); the feature table is shared."""
        idx = np.asarray(index, dtype=np.int64)
        npg, epg = self.nodes_per_graph[idx], np.diff(self.edge_ptr)[idx]
        node_sel = _ranges(self.node_ptr[idx], npg)
        edge_sel = _ranges(self.edge_ptr[idx], epg)
        common = dict(node_ptr=np.concatenate([[0], np.cumsum(npg)]), edge_ptr=np.concatenate([[0], np.cumsum(epg)]),
                      src=self.src[edge_sel], dst=self.dst[edge_sel], graph_ids=self.graph_ids[idx],
                      y=None if self.y is None else self.y[idx])
        if self._dense:  # graphs of a validated dataset: not checked again
            return GraphDataset(x=self.features[node_sel], validate=False, **common)
        return GraphDataset(features=self.features, feature_index=self.feature_index[node_sel], validate=False,
                            **common)

    @classmethod
    def from_graphs(cls, graphs: Sequence[Graph], graph_ids: Sequence[int] | None = None,
                    y: Sequence[float] | None = None) -> "GraphDataset":
        """Concatenate :class:`Graph` objects (one Python step per graph, not per node); dense features.

        Checked again (vectorised) only if some graph was built with ``validate=False``.
        """
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
            validate=not all(g.validate for g in graphs),
        )

    @classmethod
    def concat(cls, datasets: Sequence["GraphDataset"]) -> "GraphDataset":
        """The graphs of several datasets, one after the other (feature tables stacked, indices shifted)."""
        datasets = list(datasets)
        if len(datasets) == 1:
            return datasets[0]
        dims = {d.num_features for d in datasets}
        if len(dims) > 1:
            raise GraphValidationError(f"feature dimensions differ: {sorted(dims)}")
        shift = np.cumsum([0] + [d.features.shape[0] for d in datasets[:-1]])
        node_off = np.cumsum([0] + [d.num_nodes for d in datasets[:-1]])
        edge_off = np.cumsum([0] + [d.src.size for d in datasets[:-1]])
        ys = [d.y for d in datasets]
        return cls(
            node_ptr=np.concatenate([[0]] + [d.node_ptr[1:] + o for d, o in zip(datasets, node_off)]),
            edge_ptr=np.concatenate([[0]] + [d.edge_ptr[1:] + o for d, o in zip(datasets, edge_off)]),
            src=np.concatenate([d.src for d in datasets]), dst=np.concatenate([d.dst for d in datasets]),
            graph_ids=np.concatenate([d.graph_ids for d in datasets]),
            y=None if any(v is None for v in ys) else np.concatenate(ys),
            features=np.concatenate([d.features for d in datasets]),
            feature_index=np.concatenate([d.feature_index + s for d, s in zip(datasets, shift)]),
            validate=False,  # each dataset was checked when it was built
        )


def _restore_dataset(fields: dict) -> GraphDataset:
    return GraphDataset(**fields)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + l)`` for each pair, without a Python loop."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    base = np.repeat(starts - (ends - lengths), lengths)
    return base + np.arange(total)
