r"""Exact Tree Mover's Distance (Chuang et al., 2022; Jain et al., Definitions 2.3-2.6).

Definitions
-----------
For a graph :math:`G` and node :math:`v`, :math:`T^1_v` is the single node
:math:`v` with feature :math:`f^v`; :math:`T^{\ell+1}_v` hangs the trees
:math:`T^{\ell}_u`, :math:`u \in N(v)`, below :math:`v` (unrolled: the parent
reappears among a child's neighbours).  With a blank tree :math:`\mathbf{0}`
(one node, zero feature, no children), unit masses and padding :math:`\rho` of
the smaller multiset with blank trees,

.. math::

    \mathrm{TD}(T_a, T_b) = \lVert f_a - f_b \rVert_2
        + w_{\ell-2}\, \mathrm{OT}_{\mathrm{TD}}\big(\rho(\mathcal{T}(T_a), \mathcal{T}(T_b))\big)
        \quad (\ell > 1),

    \mathrm{TMD}^L_w(G, G') = \mathrm{OT}_{\mathrm{TD}}\big(\rho(\mathcal{T}^L_G, \mathcal{T}^L_{G'})\big),

where :math:`\mathrm{OT}` sums the costs of the matched pairs and
``weights[l]`` (0-based) multiplies the child term when depth-``l+2`` trees are
built from depth-``l+1`` trees (``weights[0]`` innermost, ``weights[L-2]`` the
root level).  Values agree with the original ``tmd.py`` of chingyaoc/TMD.

Algorithm
---------
1. *Canonical ids* (:mod:`tmdlib.distance._ids`): the level-0 id of a node is its exact
   feature row; the level-``l+1`` id is (feature id, sorted multiset of the
   neighbours' level-``l`` ids).  Equal ids mean identical computation trees, so
   :math:`\mathrm{TD}` depends on ids only and is memoised between ids.
2. *Tables* (:mod:`tmdlib.distance._kernels`): for a block of row graphs and column
   graphs, ``T_l[i, j]`` = TD between the ``i``-th distinct level-``l`` row id and
   the ``j``-th column id, computed level by level; every child OT is a small
   exact assignment problem (enumerated up to 4 children per side; above that,
   children common to both sides are cancelled first -- TD is a pseudometric, so
   common mass may stay in place -- and the rest is solved exactly).
3. *Root OT*: one exact assignment per graph pair on ``T_{L-1}``, after
   cancelling common root trees, in rectangular form (the blank padding folded
   into the costs) by a shortest-augmenting-path solver (:mod:`tmdlib.distance.assign`).

Blocks are split so that the tables fit ``memory_limit`` bytes; numba threads run
rows of a table and rows of a block in parallel.  Single pairs (:func:`tmd`),
sparse pair lists (:func:`tmd_pairs`) and datasets with continuous features
whose trees are nearly all distinct (see :func:`_prefer_pairs`) instead run the
original node-level recursion in one numba call per pair
(:func:`tmdlib.distance._kernels.pair_tmd`, parallel over pairs), whose small tables
stay in cache; a pair of two large graphs (:data:`~tmdlib.distance._kernels.WIDE_PAIR_NODE_PAIRS`)
runs alone with the rows of its tables in parallel.  A :class:`PairEngine` whose trees repeat (molecules: a
part of ~800 MOSES molecules has ~2,500 distinct trees one level below the root) makes the table between *all*
its level-``(L-2)`` trees once, and each pair then builds only its root-level table from it
(:func:`tmdlib.distance._toplevel.pair_list_top`).  All paths are exact and agree to rounding.

Memory: a block's tables take ``8 * (R_0 C_0 + max_l (R_{l-1} C_{l-1} + R_l C_l))``
bytes for ``R_l x C_l`` distinct ids per level (see :func:`tmd_memory_plan`).
"""
from __future__ import annotations

import contextlib
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Sequence, Union

import numba
import numpy as np

from . import _kernels as _k
from ._toplevel import pair_list_top
from ._ids import dataset_feature_ids, tree_ids
from ._limits import check_finite, check_value_range
from .._graph import Graph, GraphDataset
from ._weights import WeightsLike, resolve_weights

__all__ = ["tmd", "tmd_block", "tmd_matrix", "tmd_pairs", "tmd_memory_plan", "warmup", "DEFAULT_MEMORY_LIMIT",
           "PairEngine"]

GraphsLike = Union[GraphDataset, Sequence[Graph]]

#: Default cap (bytes) on the memo tables of one block (2 GiB).
DEFAULT_MEMORY_LIMIT = 2 * 1024 ** 3


# --------------------------------------------------------------------------- ids

@dataclass
class _Level:
    r"""Distinct trees of one level of a universe.

    Attributes
    ----------
    feat : ndarray of int64, shape (U,)
        Level-0 (feature) id of each tree id.
    ch_ptr : ndarray of int64, shape (U + 1,)
        CSR pointer of the children.
    ch : ndarray of int64, shape (nnz,)
        Children's ids at the level below, sorted within each tree.
    blank : ndarray of float64, shape (U,)
        :math:`\mathrm{TD}` of each tree to a blank tree.
    """

    feat: np.ndarray
    ch_ptr: np.ndarray
    ch: np.ndarray
    blank: np.ndarray


class _Universe:
    """Canonical tree ids of every node of a dataset, levels ``0..L-1``.

    Parameters
    ----------
    ds : GraphDataset
        All graphs that will be compared (rows and columns together).
    depth : int
    weights : ndarray of float64, shape (L - 1,)
    """

    def __init__(self, ds: GraphDataset, depth: int, weights: np.ndarray):
        self.ds = ds
        self.depth = depth
        self.weights = weights
        fid, self.frows = dataset_feature_ids(ds)
        self.ids, reps, seqs = tree_ids(fid, ds.indptr, ds.indices, depth)
        fnorm = np.linalg.norm(self.frows, axis=1) if self.frows.size else np.zeros(len(self.frows))
        nf = len(self.frows)
        self.levels = [_Level(np.arange(nf, dtype=np.int64), np.zeros(nf + 1, np.int64),
                              np.zeros(0, np.int64), fnorm)]
        for lev in range(1, depth):
            self.levels.append(self._level(lev, fid, reps[lev], seqs[lev], fnorm))
        root = self.ids[depth - 1]
        gon = ds.graph_of_node
        order = np.lexsort((root, gon))
        #: root ids of each graph's nodes, sorted within the graph (CSR by ``ds.node_ptr``)
        self.root_sorted = root[order]

    def _level(self, lev: int, fid, rep, seq, fnorm) -> _Level:
        """Children, features and blank distances of the level-``lev`` ids."""
        indptr = self.ds.indptr
        deg = indptr[rep + 1] - indptr[rep]
        ch_ptr = np.zeros(rep.size + 1, np.int64)
        np.cumsum(deg, out=ch_ptr[1:])
        ch = seq[_ranges(indptr[rep], deg)]
        feat = fid[rep]
        below = self.levels[lev - 1].blank
        child_sum = np.bincount(np.repeat(np.arange(rep.size), deg), weights=below[ch], minlength=rep.size)
        blank = fnorm[feat] + self.weights[lev - 1] * child_sum
        return _Level(feat, ch_ptr, ch, blank)

    def node_slice(self, graphs: np.ndarray) -> np.ndarray:
        """Global node ids of ``graphs`` (graph after graph)."""
        npg = self.ds.nodes_per_graph
        return _ranges(self.ds.node_ptr[graphs], npg[graphs])

    def level_sets(self, graphs: np.ndarray) -> list[np.ndarray]:
        """Sorted distinct ids at each level among the nodes of ``graphs``."""
        nodes = self.node_slice(graphs)
        return [np.unique(ids[nodes]) for ids in self.ids]

    def top_bytes(self) -> int:
        """Peak bytes of :meth:`top_table` (``T_{L-2}`` and, while it is built, ``T_{L-3}``)."""
        if self.depth < 3:
            return 0
        sq = [float(lv.feat.size) ** 2 for lv in self.levels[:self.depth - 1]]
        return int(8 * (sq[-1] + (sq[-2] if len(sq) > 2 else 0) + sq[0]))

    def top_work(self) -> float:
        r"""Child problems of :meth:`top_table`: half of :math:`\sum_{l=1}^{L-2} U_l^2`."""
        return sum(float(lv.feat.size) ** 2 for lv in self.levels[1:self.depth - 1]) / 2

    def top_table(self) -> "_Top":
        """Tree distances between *all* level-``(L-2)`` ids of the universe (symmetric tables, level by level),
        for :func:`~tmdlib.distance._toplevel.pair_list_top`; needs ``depth >= 3``."""
        top = self.depth - 2
        every = [np.arange(lv.feat.size, dtype=np.int64) for lv in self.levels[:top + 1]]
        side = _Side(every, every)
        t0 = _k.feature_table(self.frows, self.frows, True)
        table = t0
        for lev in range(1, top + 1):
            fa, pa, ga, la, ba, ka = _children(self, side, lev)
            table = _k.level_table(fa, pa, ga, la, ba, fa, pa, ga, la, ba, table, t0, float(self.weights[lev - 1]),
                                   True, ka)
        return self._top_graphs(table, t0)

    def _top_graphs(self, table: np.ndarray, fdist: np.ndarray) -> "_Top":
        """The per-graph arrays of :func:`~tmdlib.distance._toplevel.pair_list_top` around the table ``T_{L-2}``:
        each graph's nodes in root-id order, and its distinct root trees with their children (``O(N)``)."""
        ds, L = self.ds, self.depth
        ids, below, w = self.ids[L - 2], self.levels[L - 2].blank, float(self.weights[L - 2])
        root, gon = self.ids[L - 1], ds.graph_of_node
        order = np.lexsort((np.arange(root.size), root, gon))  # by graph, then root id, then node
        rs = root[order]
        first = np.ones(root.size, bool)
        first[1:] = (rs[1:] != rs[:-1]) | (gon[order][1:] != gon[order][:-1])
        rep = order[first]  # the first node of each distinct root tree of each graph
        run = np.cumsum(first) - 1  # representative (pool-wide) of each position
        rep_ptr = np.zeros(len(ds) + 1, np.int64)
        np.cumsum(np.bincount(gon[rep], minlength=len(ds)), out=rep_ptr[1:])
        deg = ds.indptr[rep + 1] - ds.indptr[rep]
        ch_ptr = np.zeros(rep.size + 1, np.int64)
        np.cumsum(deg, out=ch_ptr[1:])
        owner = np.repeat(np.arange(rep.size), deg)
        ch = ids[ds.indices[_ranges(ds.indptr[rep], deg)]]
        ch = ch[np.lexsort((ch, owner))]  # sorted within each representative: ot_ranges cancels equal children
        ch_blank = below[ch]
        return _Top(rep_ptr, rs, run - rep_ptr[gon[order]], self.levels[L - 1].blank[rs], self.ids[0][rep], ch_ptr, ch, ch_blank, table,
                    fdist, w)


@dataclass(frozen=True)
class _Top:
    """Arguments of :func:`~tmdlib.distance._toplevel.pair_list_top` for a universe (:meth:`_Universe.top_table`)."""

    rep_ptr: np.ndarray     # (G + 1,) CSR of each graph's distinct root trees (representatives)
    root: np.ndarray        # (N,) per graph, its nodes' root ids, sorted
    rep_of: np.ndarray      # (N,) ... their representative, local to the graph
    root_blank: np.ndarray  # (N,) ... their root tree's distance to the blank tree
    rep_feat: np.ndarray    # (R,) feature row of each representative
    ch_ptr: np.ndarray      # (R + 1,) CSR of the representatives' children
    ch: np.ndarray          # (nnz,) children's level-(L-2) ids, sorted within a representative
    ch_blank: np.ndarray    # (nnz,) their distances to the blank tree
    table: np.ndarray       # (U, U) T_{L-2}
    fdist: np.ndarray       # (F, F) feature distances between the universe's distinct rows
    w: float                # weights[L - 2]


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + l)`` over pairs, vectorised."""
    starts = np.asarray(starts, np.int64)
    lengths = np.asarray(lengths, np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(total)


# --------------------------------------------------------------------------- blocks

@dataclass
class _Side:
    """Row or column side of a block: distinct ids per level and their local numbering."""

    sets: list          # per level: sorted global ids, shape (R_l,)
    local: list         # per level: global id -> local index (or -1), shape (U_l,)


def _side(uni: _Universe, graphs: np.ndarray) -> _Side:
    sets = uni.level_sets(graphs)
    local = []
    for lev, s in enumerate(sets):
        m = np.full(uni.levels[lev].feat.size, -1, np.int64)
        m[s] = np.arange(s.size)
        local.append(m)
    return _Side(sets, local)


def _children(uni: _Universe, side: _Side, lev: int):
    """Kernel arrays describing the children of the side's level-``lev`` ids."""
    L = uni.levels[lev]
    s = side.sets[lev]
    deg = L.ch_ptr[s + 1] - L.ch_ptr[s]
    ptr = np.zeros(s.size + 1, np.int64)
    np.cumsum(deg, out=ptr[1:])
    g = L.ch[_ranges(L.ch_ptr[s], deg)]
    loc = side.local[lev - 1][g]
    bl = uni.levels[lev - 1].blank[g]
    feat = side.local[0][L.feat[s]]
    kmax = int(deg.max()) if deg.size else 0
    return feat, ptr, g, loc, bl, kmax


def _roots(uni: _Universe, side: _Side, graphs: np.ndarray):
    """Kernel arrays of the root trees of ``graphs`` (sorted ids within each graph)."""
    npg = uni.ds.nodes_per_graph[graphs]
    ptr = np.zeros(graphs.size + 1, np.int64)
    np.cumsum(npg, out=ptr[1:])
    g = uni.root_sorted[_ranges(uni.ds.node_ptr[graphs], npg)]
    top = uni.depth - 1
    return ptr, g, side.local[top][g], uni.levels[top].blank[g], int(npg.max()) if npg.size else 0


def _root_table(uni: _Universe, a: _Side, b: _Side, symmetric: bool) -> np.ndarray:
    """Table ``T_{L-1}`` between the root-level ids of sides ``a`` and ``b``, level by level.

    Returns
    -------
    ndarray of float64, shape (R_{L-1}, C_{L-1})
    """
    fr = uni.frows
    table = _k.feature_table(fr[a.sets[0]], fr[b.sets[0]], symmetric)
    table0 = table
    for lev in range(1, uni.depth):
        fa, pa, ga, la, ba, ka = _children(uni, a, lev)
        fb, pb, gb, lb, bb, kb = (fa, pa, ga, la, ba, ka) if symmetric else _children(uni, b, lev)
        table = _k.level_table(fa, pa, ga, la, ba, fb, pb, gb, lb, bb, table, table0,
                               float(uni.weights[lev - 1]), symmetric, max(ka, kb))
    return table


def _block(uni: _Universe, rows: np.ndarray, cols: np.ndarray, symmetric: bool) -> np.ndarray:
    """TMD between graphs ``rows`` and ``cols`` of the universe, one set of tables.

    Returns
    -------
    ndarray of float64, shape (len(rows), len(cols))
        With ``symmetric`` (``rows`` equal to ``cols``): symmetric, zero diagonal.
    """
    a = _side(uni, rows)
    b = a if symmetric else _side(uni, cols)
    table = _root_table(uni, a, b, symmetric)
    pa, ga, la, ba, ka = _roots(uni, a, rows)
    pb, gb, lb, bb, kb = (pa, ga, la, ba, ka) if symmetric else _roots(uni, b, cols)
    return _k.root_pairs(pa, ga, la, ba, pb, gb, lb, bb, table, symmetric, max(ka, kb))


def _table_bytes(counts: Sequence[int]) -> int:
    """Peak bytes of the float64 tables of a symmetric block with ``counts[l]`` ids per level.

    ``T_0`` lives throughout; building ``T_l`` needs ``T_{l-1}`` alive.
    """
    sq = [int(c) * int(c) for c in counts]
    peak = sq[0] + max((sq[lev] + (sq[lev - 1] if lev > 1 else 0) for lev in range(1, len(sq))), default=0)
    return 8 * peak


def _chunks(uni: _Universe, graphs: np.ndarray, memory_limit: float) -> list[np.ndarray]:
    """Split ``graphs`` (in order) into runs whose tables fit ``memory_limit`` bytes.

    A run's estimate is :func:`_table_bytes` of its distinct ids per level; a block
    between two runs needs at most the larger of their estimates.  A single graph
    above the cap forms a run of its own.
    """
    totals = [np.unique(ids[uni.node_slice(graphs)]).size for ids in uni.ids]
    if _table_bytes(totals) <= memory_limit:
        return [graphs]
    ptr, npg = uni.ds.node_ptr, uni.ds.nodes_per_graph
    stamps = [np.full(lv.feat.size, -1, np.int64) for lv in uni.levels]
    counts = [0] * len(stamps)
    out, start, chunk = [], 0, 0
    for pos, g in enumerate(graphs):
        sl = slice(ptr[g], ptr[g] + npg[g])
        fresh = [np.unique(ids[sl][st[ids[sl]] != chunk]) for ids, st in zip(uni.ids, stamps)]
        if pos > start and _table_bytes([c + f.size for c, f in zip(counts, fresh)]) > memory_limit:
            out.append(graphs[start:pos])
            start, chunk = pos, chunk + 1
            fresh = [np.unique(ids[sl]) for ids in uni.ids]
            counts = [0] * len(stamps)
        for lev, f in enumerate(fresh):
            stamps[lev][f] = chunk
            counts[lev] += f.size
    out.append(graphs[start:])
    return out


_LAUNCH_LOCK = threading.RLock()


def _layer_is_threadsafe() -> bool:
    """numba's ``workqueue`` threading layer aborts on concurrent parallel launches; omp/tbb do not."""
    try:
        return numba.threading_layer() != "workqueue"
    except ValueError:  # no parallel kernel has run yet
        return False


@contextmanager
def _threads(num_threads: int | None):
    """Engine section: serialised across Python threads under ``workqueue``; sets numba threads.

    ``num_threads`` is clamped to ``1..NUMBA_NUM_THREADS``; ``None`` keeps numba's setting.
    """
    with contextlib.nullcontext() if _layer_is_threadsafe() else _LAUNCH_LOCK:
        if num_threads is None:
            yield
            return
        old = numba.get_num_threads()
        numba.set_num_threads(max(1, min(int(num_threads), numba.config.NUMBA_NUM_THREADS)))
        try:
            yield
        finally:
            numba.set_num_threads(old)


# --------------------------------------------------------------------------- inputs

def _as_dataset(graphs: GraphsLike) -> GraphDataset:
    if isinstance(graphs, GraphDataset):
        return graphs
    if isinstance(graphs, Graph):
        raise TypeError("expected a GraphDataset or a sequence of Graph; wrap a single graph in a list")
    return GraphDataset.from_graphs(list(graphs))


def _concat(a: GraphDataset, b: GraphDataset) -> GraphDataset:
    """The graphs of ``a`` followed by those of ``b``."""
    if a.features is b.features:  # shared table (e.g. two takes of one dataset): no stacking
        return GraphDataset(node_ptr=np.concatenate([a.node_ptr, a.node_ptr[-1] + b.node_ptr[1:]]),
                            edge_ptr=np.concatenate([a.edge_ptr, a.edge_ptr[-1] + b.edge_ptr[1:]]),
                            src=np.concatenate([a.src, b.src]), dst=np.concatenate([a.dst, b.dst]),
                            graph_ids=np.concatenate([a.graph_ids, b.graph_ids]), features=a.features,
                            feature_index=np.concatenate([a.feature_index, b.feature_index]),
                            validate=False)  # two validated datasets
    return GraphDataset.concat([a.replace(y=None), b.replace(y=None)])


def _same(a: GraphDataset, b: GraphDataset) -> bool:
    """Whether two datasets hold the same graphs in the same order (same encoding)."""
    if a is b:
        return True
    return all(np.array_equal(getattr(a, f), getattr(b, f))
               for f in ("node_ptr", "edge_ptr", "src", "dst", "feature_index", "features"))


def _check(depth, weights, *dims: int) -> np.ndarray:
    w = resolve_weights(depth, weights)
    if len(set(dims)) > 1:
        raise ValueError(f"feature dimensions differ: {' vs '.join(map(str, dims))}; "
                         "all graphs must have the same number of node features "
                         "(use Graph.empty(d) for an empty graph)")
    return w


# --------------------------------------------------------------------------- API

def tmd_block(graphs_a: GraphsLike, graphs_b: GraphsLike, depth: int = 4, weights: WeightsLike = "pascal",
              *, memory_limit: float = DEFAULT_MEMORY_LIMIT, num_threads: int | None = None) -> np.ndarray:
    r"""Tree Mover's Distances between every graph of ``graphs_a`` and every graph of ``graphs_b``.

    .. math:: D[i, j] = \mathrm{TMD}^L_w(A_i, B_j)

    If both arguments hold the same graphs (e.g. ``ds.take(idx)`` twice), the
    symmetric block is computed once (upper triangle) and mirrored.

    Parameters
    ----------
    graphs_a, graphs_b : GraphDataset or sequence of Graph
        ``len_a`` and ``len_b`` graphs with the same feature dimension ``d``.
    depth : int, default 4
        Depth :math:`L \ge 1` of the computation trees.
    weights : "pascal", float or sequence of float
        ``L - 1`` level weights, see :func:`tmdlib.distance._weights.resolve_weights`.
    memory_limit : float, default 2 GiB
        Cap in bytes on the memo tables of one sub-block; larger inputs are split
        into sub-blocks (distances are unaffected, only time).
    num_threads : int, optional
        Number of numba threads (default: numba's setting).

    Returns
    -------
    ndarray of float64, shape (len_a, len_b)

    Raises
    ------
    ValueError
        ``depth < 1``, a wrong number of weights, or different feature dimensions;
        :class:`~tmdlib.InputError` (a ValueError) when a value could overflow float64
        (:func:`tmdlib.distance._limits.check_value_range`).
    """
    a, b = _as_dataset(graphs_a), _as_dataset(graphs_b)
    w = _check(depth, weights, a.num_features, b.num_features)
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)))
    check_value_range(depth, w, a, b)
    return check_finite(_block_values(a, b, depth, w, memory_limit, num_threads))


def _block_values(a: GraphDataset, b: GraphDataset, depth: int, w: np.ndarray, memory_limit: float,
                  num_threads: int | None) -> np.ndarray:
    """:func:`tmd_block` of checked inputs."""
    with _threads(num_threads):
        if _same(a, b):
            return _matrix(_Universe(a, depth, w), memory_limit)
        uni = _Universe(_concat(a, b), depth, w)
        rows = np.arange(len(a))
        cols = np.arange(len(a), len(a) + len(b))
        if _prefer_pairs(uni):
            gi, gj = np.repeat(rows, len(b)), np.tile(cols, len(a))
            return _pairs_path(uni, gi, gj).reshape(len(a), len(b))
        out = np.empty((len(a), len(b)))
        ra = 0
        col_chunks = _chunks(uni, cols, memory_limit)
        for rc in _chunks(uni, rows, memory_limit):
            ca = 0
            for cc in col_chunks:
                out[ra:ra + rc.size, ca:ca + cc.size] = _block(uni, rc, cc, False)
                ca += cc.size
            ra += rc.size
        return out


#: Use the per-pair kernel when the id tables would save less than this fraction of the work ...
PAIR_PATH_SHARING = 0.3
#: ... and the feature table has more distinct rows than this (it no longer fits in cache).
PAIR_PATH_MIN_FEATURES = 1024


def _prefer_pairs(uni: _Universe) -> bool:
    r"""Whether shared id tables do not pay off (continuous features).

    Tables cost :math:`\sum_l U_l^2` entries for :math:`U_l` distinct trees per
    level, the node-level recursion :math:`L N^2` for :math:`N` nodes.  When
    trees are barely shared *and* the level-0 table is large (continuous
    features, e.g. COX2: every lookup misses the cache), the small per-pair
    tables are faster (measured ~2.4x on COX2); with few distinct features
    (DD, PROTEINS labels) the tables stay ahead even without sharing.
    """
    n = float(uni.ds.num_nodes)
    shared = sum(float(lv.feat.size) ** 2 for lv in uni.levels)
    return (n > 0 and uni.levels[0].feat.size > PAIR_PATH_MIN_FEATURES
            and shared > PAIR_PATH_SHARING * uni.depth * n * n)


def _pairs_path(uni: _Universe, gi: np.ndarray, gj: np.ndarray) -> np.ndarray:
    """Per-pair kernel over listed graph pairs of the universe, shape ``(P,)``."""
    ds = uni.ds
    return _k.pair_values(ds.features, ds.feature_index, ds.indptr, ds.indices, ds.node_ptr, gi, gj,
                          np.asarray(uni.weights, np.float64))


def _matrix(uni: _Universe, memory_limit: float) -> np.ndarray:
    """Symmetric all-pairs matrix of a universe, by chunk pairs ``i <= j``."""
    n = len(uni.ds)
    if _prefer_pairs(uni):
        out = np.zeros((n, n))
        iu, ju = np.triu_indices(n, 1)
        out[iu, ju] = _pairs_path(uni, iu, ju)
        out[ju, iu] = out[iu, ju]
        return out
    chunks = _chunks(uni, np.arange(n), memory_limit)
    starts = np.cumsum([0] + [c.size for c in chunks])
    out = np.empty((n, n))
    for i, ci in enumerate(chunks):
        si = slice(starts[i], starts[i + 1])
        out[si, si] = _block(uni, ci, ci, True)
        for j in range(i + 1, len(chunks)):
            sj = slice(starts[j], starts[j + 1])
            blk = _block(uni, ci, chunks[j], False)
            out[si, sj] = blk
            out[sj, si] = blk.T
    return out


def tmd_matrix(dataset: GraphsLike, depth: int = 4, weights: WeightsLike = "pascal", *,
               rows: Sequence[int] | np.ndarray | None = None, cols: Sequence[int] | np.ndarray | None = None,
               memory_limit: float = DEFAULT_MEMORY_LIMIT, num_threads: int | None = None) -> np.ndarray:
    r"""All-pairs Tree Mover's Distance matrix of one dataset (or a shard of it).

    .. math:: D[i, j] = \mathrm{TMD}^L_w(G_{r_i}, G_{c_j})

    Parameters
    ----------
    dataset : GraphDataset or sequence of Graph
        ``G`` graphs.
    depth : int, default 4
        Depth :math:`L \ge 1`.
    weights : "pascal", float or sequence of float
        ``L - 1`` level weights.
    rows, cols : array_like of int, optional
        Graph positions of a shard (default: all graphs).  A shard with
        ``rows == cols`` is computed once as a symmetric block.
    memory_limit : float, default 2 GiB
        Cap in bytes on the memo tables of one sub-block.
    num_threads : int, optional
        Number of numba threads.

    Returns
    -------
    ndarray of float64, shape (len(rows), len(cols))
        Without ``rows``/``cols``: the symmetric ``(G, G)`` matrix with zero diagonal.
    """
    ds = _as_dataset(dataset)
    w = _check(depth, weights, ds.num_features)
    if rows is not None or cols is not None:
        r = np.arange(len(ds)) if rows is None else np.asarray(rows, np.int64)
        c = np.arange(len(ds)) if cols is None else np.asarray(cols, np.int64)
        if np.array_equal(r, c):
            return tmd_matrix(ds.take(r), depth, w, memory_limit=memory_limit, num_threads=num_threads)
        return tmd_block(ds.take(r), ds.take(c), depth, w, memory_limit=memory_limit, num_threads=num_threads)
    if len(ds) == 0:
        return np.zeros((0, 0))
    check_value_range(depth, w, ds)
    with _threads(num_threads):
        return check_finite(_matrix(_Universe(ds, depth, w), memory_limit))


def tmd_pairs(dataset: GraphsLike, i: Sequence[int] | np.ndarray, j: Sequence[int] | np.ndarray,
              depth: int = 4, weights: WeightsLike = "pascal", *,
              memory_limit: float = DEFAULT_MEMORY_LIMIT, num_threads: int | None = None) -> np.ndarray:
    r"""Tree Mover's Distance of listed pairs of one dataset.

    .. math:: d[k] = \mathrm{TMD}^L_w(G_{i_k}, G_{j_k})

    When the pairs cover a large part of the ``unique(i) x unique(j)`` grid, the
    whole block is computed with shared id tables; otherwise each pair runs the
    node-level recursion (:func:`tmdlib.distance._kernels.pair_tmd`), in parallel over pairs.

    Parameters
    ----------
    dataset : GraphDataset or sequence of Graph
    i, j : array_like of int, shape (P,)
        Graph positions of the pairs.
    depth : int, default 4
    weights : "pascal", float or sequence of float
    memory_limit : float, default 2 GiB
        Cap in bytes on the memo tables of one sub-block (dense case).
    num_threads : int, optional
        Number of numba threads.

    Returns
    -------
    ndarray of float64, shape (P,)
    """
    ds = _as_dataset(dataset)
    w = _check(depth, weights, ds.num_features)
    i = np.asarray(i, np.int64).reshape(-1)
    j = np.asarray(j, np.int64).reshape(-1)
    if i.shape != j.shape:
        raise ValueError(f"i and j must have the same length, got {i.size} and {j.size}")
    if i.size == 0:
        return np.zeros(0)
    if min(i.min(), j.min()) < 0 or max(i.max(), j.max()) >= len(ds):
        raise IndexError(f"pair index out of range for a dataset of {len(ds)} graphs")
    check_value_range(depth, w, ds)
    ui, inv_i = np.unique(i, return_inverse=True)
    uj, inv_j = np.unique(j, return_inverse=True)
    if i.size >= 0.25 * ui.size * uj.size:
        block = tmd_block(ds.take(ui), ds.take(uj), depth, w, memory_limit=memory_limit,
                          num_threads=num_threads)
        return block[inv_i, inv_j]
    with _threads(num_threads):
        return check_finite(_k.pair_values(ds.features, ds.feature_index, ds.indptr, ds.indices, ds.node_ptr, i, j, w))


class PairEngine:
    r"""Exact TMD of arbitrary pairs of one dataset, with one id universe shared by every call.

    For algorithms that ask for scattered pairs many times (:mod:`tmdlib.select.scalable`): the
    canonical tree ids are computed once; each call groups its pairs by column graph and computes
    one block per group (tables over the distinct trees of the group's rows against that graph's),
    falling back to the per-pair recursion for small groups and for continuous features.

    Parameters
    ----------
    dataset : GraphDataset or sequence of Graph
    depth : int, default 4
    weights : "pascal", float or sequence of float
    num_threads : int, optional
        numba threads.
    min_group : int, default 4
        Smallest group computed as a block.
    expected_pairs : int, default 0
        Pairs the caller expects to ask for in all: the table of every tree one level below the root
        (:meth:`_Universe.top_table`, for universes whose trees repeat, e.g. molecules) is then made at the
        first call if they would pay for it, instead of once the pairs asked for have.

    Examples
    --------
    >>> eng = PairEngine(ds)            # doctest: +SKIP
    >>> eng([0, 1, 2], [5, 5, 7])       # TMD(G0, G5), TMD(G1, G5), TMD(G2, G7)   # doctest: +SKIP
    """

    def __init__(self, dataset: GraphsLike, depth: int = 4, weights: WeightsLike = "pascal", *,
                 num_threads: int | None = None, min_group: int = 4, expected_pairs: int = 0):
        self.ds = _as_dataset(dataset)
        self.weights = _check(depth, weights, self.ds.num_features)
        self.depth = int(depth)
        if len(self.ds):
            check_value_range(self.depth, self.weights, self.ds)
        self.num_threads = num_threads
        self.min_group = int(min_group)
        self.uni = _Universe(self.ds, self.depth, self.weights) if len(self.ds) else None
        self.pair_path = self.uni is None or _prefer_pairs(self.uni)
        self._lookup = None  # feature distances of the per-pair recursion, made at its first call
        # the table of all trees one level below the root, made once the pairs asked for would have paid for it
        self._top = None
        self._top_ok = (not self.pair_path and self.depth >= 3 and self.uni.top_bytes() <= TOP_TABLE_BYTES)
        self._top_due = 0.0
        if self._top_ok and expected_pairs > 0:
            npg = self.ds.nodes_per_graph.astype(np.float64)
            self._top_due = (self.depth - 2) * float(expected_pairs) * float(np.mean(npg)) ** 2

    def __call__(self, i, j) -> np.ndarray:
        """Distances of pairs ``(i[k], j[k])``, shape ``(P,)``."""
        i = np.asarray(i, np.int64).reshape(-1)
        j = np.asarray(j, np.int64).reshape(-1)
        if i.shape != j.shape:
            raise ValueError(f"i and j must have the same length, got {i.size} and {j.size}")
        out = np.zeros(i.size)
        if i.size == 0:
            return out
        if min(i.min(), j.min()) < 0 or max(i.max(), j.max()) >= len(self.ds):
            raise IndexError(f"pair index out of range for a dataset of {len(self.ds)} graphs")
        with _threads(self.num_threads):
            if self._use_top(i, j):
                return check_finite(self._top_values(i, j))
            small = np.ones(i.size, bool)
            if not self.pair_path:
                # group by the side with fewer distinct graphs: one block per graph of that side
                if np.unique(i).size < np.unique(j).size:
                    i, j, swapped = j, i, True
                else:
                    swapped = False
                cols, inv, counts = np.unique(j, return_inverse=True, return_counts=True)
                for c in np.flatnonzero(counts >= self.min_group):
                    sel = np.flatnonzero(inv == c)
                    rows, rinv = np.unique(i[sel], return_inverse=True)
                    blk = _block(self.uni, rows, np.array([cols[c]]), False)
                    out[sel] = blk[rinv, 0]
                    small[sel] = False
                if swapped:
                    i, j = j, i
            if small.any():
                ds = self.ds
                if self._lookup is None:  # kept across calls: many calls of a few pairs each
                    self._lookup = _k.feature_lookup(ds.features)
                out[small] = _k.pair_values(ds.features, ds.feature_index, ds.indptr, ds.indices, ds.node_ptr,
                                            i[small], j[small], self.weights, self._lookup)
        return check_finite(out)

    def _use_top(self, i: np.ndarray, j: np.ndarray) -> bool:
        r"""Whether these pairs go through the top table, making it first when the pairs asked for so far
        (these included) would have saved its cost: :math:`(L-2)\sum |V_i||V_j|` node-level child problems
        against :meth:`_Universe.top_work`.  Deterministic in the sequence of calls."""
        if self._top is None and self._top_ok:
            npg = self.ds.nodes_per_graph.astype(np.float64)
            self._top_due += (self.depth - 2) * float(np.dot(npg[i], npg[j]))
            if self._top_due >= self.uni.top_work():
                self._top = self.uni.top_table()
        return self._top is not None

    def _top_values(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """:func:`~tmdlib.distance._toplevel.pair_list_top` of the pairs (one thread while they are little work)."""
        t, ds = self._top, self.ds
        npg = ds.nodes_per_graph.astype(np.float64)
        with _k.serial_if(_k._little_work(npg[i] * npg[j])):
            return pair_list_top(ds.node_ptr, i, j, t.rep_ptr, t.root, t.rep_of, t.root_blank, t.rep_feat,
                                    t.ch_ptr, t.ch, t.ch_blank, t.table, t.fdist, t.w, numba.get_num_threads())


#: Largest peak (bytes) of a :class:`PairEngine`'s table of every tree one level below the root
#: (:meth:`_Universe.top_table`): 18-56 MB for parts of 781 MOSES molecules; proteins' trees hardly repeat, so
#: their tables would be far larger and they keep the blocks and the per-pair recursion.
TOP_TABLE_BYTES = 256 * 1024 ** 2


def tmd_memory_plan(dataset: GraphsLike, depth: int = 4, *,
                    memory_limit: float = DEFAULT_MEMORY_LIMIT) -> dict:
    """How :func:`tmd_matrix` would tile a dataset, and the memory its tables need.

    Parameters
    ----------
    dataset : GraphDataset or sequence of Graph
    depth : int, default 4
    memory_limit : float, default 2 GiB

    Returns
    -------
    dict
        ``ids_per_level`` (distinct computation trees of depth 1..L),
        ``unchunked_table_bytes`` (peak table bytes with one block),
        ``chunks`` (graphs per sub-block run), ``blocks`` (sub-blocks computed),
        ``peak_table_bytes`` (largest estimate over the runs; a block between two
        runs needs at most the larger of their estimates).
    """
    ds = _as_dataset(dataset)
    uni = _Universe(ds, depth, resolve_weights(depth, 1.0))
    graphs = np.arange(len(ds))
    totals = [int(np.unique(ids).size) for ids in uni.ids]
    chunks = _chunks(uni, graphs, memory_limit)
    per_chunk = [_table_bytes([np.unique(ids[uni.node_slice(c)]).size for ids in uni.ids]) for c in chunks]
    return {
        "graphs": len(ds),
        "nodes": ds.num_nodes,
        "ids_per_level": totals,
        "unchunked_table_bytes": _table_bytes(totals),
        "memory_limit": float(memory_limit),
        "chunks": [int(c.size) for c in chunks],
        "blocks": len(chunks) * (len(chunks) + 1) // 2,
        "peak_table_bytes": max(per_chunk, default=0),
    }


def tmd(g1: Graph, g2: Graph, depth: int = 4, weights: WeightsLike = "pascal") -> float:
    r"""Tree Mover's Distance :math:`\mathrm{TMD}^L_w(G_1, G_2)` between two graphs.

    Parameters
    ----------
    g1, g2 : Graph
        Graphs with ``n1``, ``n2`` nodes and the same feature dimension ``d``
        (either may be empty, e.g. ``Graph.empty(d)``).
    depth : int, default 4
        Depth :math:`L \ge 1` of the computation trees.
    weights : "pascal", float or sequence of float
        ``L - 1`` level weights; ``weights[0]`` innermost, ``weights[L-2]`` root level.

    Returns
    -------
    float
        Non-negative, symmetric; ``tmd(g, Graph.empty(d))`` is the tree norm.

    Raises
    ------
    ValueError
        ``depth < 1``, a wrong number of weights, or different feature dimensions;
        :class:`~tmdlib.InputError` (a ValueError) when a value could overflow float64
        (:func:`tmdlib.distance._limits.check_value_range`; never for features within
        :data:`tmdlib._graph.FEATURE_LIMIT` and realistic depths and weights).
    """
    w = _check(depth, weights, g1.num_features, g2.num_features)
    check_value_range(depth, w, g1, g2)
    c = np.ascontiguousarray
    wide = numba.get_num_threads() > 1 and g1.num_nodes * g2.num_nodes >= _k.WIDE_PAIR_NODE_PAIRS
    args = (c(g1.x), g1.indptr, g1.indices, c(g2.x), g2.indptr, g2.indices, w)
    return float(check_finite(_k.pair_tmd_wide(*args, _k._lanes()) if wide else _k.pair_tmd(*args)))


def warmup() -> None:
    """Compile (first run) or load from numba's on-disk cache (later runs) every kernel.

    Runs a few tiny problems that reach all code paths (symmetric and
    rectangular blocks, child problems above 4 trees, the parallel mirror).
    """
    star = Graph(np.ones((7, 1)), np.array([[0] * 6 + list(range(1, 7)), list(range(1, 7)) + [0] * 6]))
    path = Graph(np.arange(3.0)[:, None], np.array([[0, 1, 1, 2], [1, 0, 2, 1]]))
    tmd_matrix([star, path, Graph.empty(1)], 3)
    tmd_block([star], [path], 3)
    tmd(star, path, 3)
    ds = GraphDataset.from_graphs([star, path])
    for fdist, fnorm in (_k.feature_lookup(ds.features), _k.feature_lookup(np.zeros((0, 1)))):  # both starts
        _k.pair_list(ds.features, ds.feature_index, ds.indptr, ds.indices, ds.node_ptr, np.array([0]), np.array([1]),
                     np.ones(2), fdist, fnorm)
    _k.pair_tmd_wide(star.x, star.indptr, star.indices, path.x, path.indptr, path.indices, np.ones(2), 2)
    PairEngine(ds, 3, expected_pairs=10)(np.array([0]), np.array([1]))  # the top table and its pairs
    _k._mirror_parallel(np.zeros((4, 4)), 64)
