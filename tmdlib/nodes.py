r"""Node subsampling with TMD guarantees (Jain et al., Section 4 and Appendix A.3).

For every graph :math:`G = (V, E, f)` and node budget :math:`k`, a node set
:math:`S \subseteq V`, :math:`|S| \le k`, is chosen from a small candidate family
:math:`\mathcal S` so as to minimise :math:`\mathrm{TMD}(G, G[S])`.  By Theorem 4.2 (via
Lemma 4.5 with T = S, :math:`\mathrm{TN}(G) = \mathrm{TMD}(G, G[S]) + \mathrm{TN}(G[S])`) this is the
candidate with the **largest tree norm** of its induced subgraph, and the attained
distance is

.. math:: \varepsilon = \mathrm{TMD}(G, G[S]) = \mathrm{TN}(G) - \mathrm{TN}(G[S]),

the per-graph term of Corollary 4.1.  Tree norms are Algorithm 1:
:math:`\mathrm{TN}(G) = \sum_{\ell=0}^{L-1} c_\ell \, \mathbf 1^\top A^\ell x` with
:math:`x_v = \lVert f^v \rVert_2`, :math:`c_0 = 1`, :math:`c_\ell = \prod_{t=1}^{\ell} w(L-t)`
(the same convention as :func:`tmdlib.treenorm.tree_norm_node_terms`).

Candidate family (Appendix A.3) for a graph with :math:`n = |V| > k`:

* **k-BFS subsets**, one per root :math:`v \in V` (:func:`bfs_subset`).  ``bfs_mode="paper"``
  is the paper's definition: all nodes within distance :math:`\ell_k` of :math:`v`, where
  :math:`\ell_k` is the deepest level whose BFS ball has at most :math:`k` nodes -- this can
  hold far fewer than :math:`k` nodes (a star rooted at its centre: 1 node for every
  :math:`k < n`; rooted at a leaf: 2 nodes).  ``bfs_mode="fill"`` (default) takes the same ball and
  then adds nodes of the next level in increasing node id until :math:`k` nodes; when the
  root's component is exhausted it continues with a BFS from the smallest unvisited node id.
  Every fill set contains the paper set of the same root and the tree norm is monotone
  under adding nodes (all terms of Algorithm 1 are non-negative), so with a fixed budget
  ``"fill"`` is never worse -- that is why it is the default.
* **random-walk subset** (the role of Razin et al., 2023 in the paper; our exact rule,
  :func:`random_walk_subset`): a seeded random walk that at each step returns to its current
  root with probability ``rw_restart`` (default 0.15) and otherwise moves to a uniformly random
  neighbour, collecting distinct nodes until :math:`k`.  The root starts uniformly at
  random; when the root's connected component is fully visited the walk jumps to a uniformly
  random unvisited node (new root, other component); after :math:`n` consecutive steps
  without a new node it jumps to a uniformly random unvisited node adjacent to the visited
  set (new root, same component).
* **k-core subset** (the role of Salha et al., 2022; :func:`kcore_subset`): nodes in
  decreasing core number, ties by decreasing degree then increasing id, first :math:`k`.
  Core numbers by the Batagelj–Zaversnik peeling algorithm (:func:`core_numbers`).

The selected candidate is the first maximiser of :math:`\mathrm{TN}(G[S])` in the order
BFS roots :math:`0..n-1`, random walk, k-core (a later candidate must be strictly better).
Graphs with :math:`n \le k` keep all nodes (:math:`\varepsilon = 0`); empty graphs keep none.

All candidate tree norms of a graph are evaluated in one compiled (numba) pass: each
candidate costs :math:`O(\mathrm{vol}(S) + L\,|E(S)|)`, so a graph costs at most
:math:`O(L\,|V|\,|E|)` as in the paper.  Randomness (random walk, ``method="random"``) is
seeded per graph from ``(seed, graph_id)``, so a graph's selection does not depend on the
other graphs of the dataset or on their order; labels are never read.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba import njit

from .coreset import CoresetResult, budget_to_k, kmedoids_coreset
from .graph import Graph, GraphDataset
from .weights import resolve_weights

__all__ = [
    "METHODS",
    "BFS_MODES",
    "WINNER_NAMES",
    "NodeCandidates",
    "NodeSubsample",
    "CombinedSubsample",
    "node_budgets",
    "graph_seeds",
    "bfs_subset",
    "random_walk_subset",
    "core_numbers",
    "kcore_subset",
    "node_candidates",
    "select_nodes",
    "subsample_nodes",
    "induced_subdataset",
    "combined_subsample",
]

#: ``method`` values: TMD-optimal candidate, uniform random nodes, random-walk subset alone,
#: k-core subset alone.
METHODS = ("tmd", "random", "rw", "kcore")
BFS_MODES = ("fill", "paper")
_METHOD_CODE = {"tmd": 0, "random": 1, "rw": 2, "kcore": 3}
#: Meaning of :attr:`NodeSubsample.winner`.
WINNER_NAMES = {-1: "empty", 0: "all", 1: "bfs", 2: "rw", 3: "kcore", 4: "random"}
_DEFAULT_RESTART = 0.15


# ---------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------
def _tree_norm_coefs(depth: int, weights) -> np.ndarray:
    r"""Shape ``(L,)``: :math:`c_0 = 1`, :math:`c_\ell = c_{\ell-1}\, w(L-\ell)` (``weights[L-1-ell]``)."""
    w = resolve_weights(depth, weights)
    c = np.ones(int(depth))
    for ell in range(1, int(depth)):
        c[ell] = c[ell - 1] * w[depth - 1 - ell]
    return c


def node_budgets(num_nodes, fraction: float | None = None, count: int | None = None) -> np.ndarray:
    r"""Per-graph node budgets, :func:`tmdlib.coreset.budget_to_k` applied to each :math:`|V_g|`.

    :math:`k_g = \min(|V_g|, \max(1, \lceil \mathrm{fraction}\cdot|V_g| \rceil))` (0 for empty
    graphs), or :math:`\min(|V_g|, \mathrm{count})`.

    Parameters
    ----------
    num_nodes : array_like of int, shape (G,)
    fraction : float in (0, 1], optional
    count : int >= 1, optional

    Returns
    -------
    ndarray of int64, shape (G,)
    """
    n = np.asarray(num_nodes, dtype=np.int64)
    budget_to_k(1, fraction=fraction, count=count)  # argument validation only
    if fraction is not None:
        k = np.ceil(np.round(float(fraction) * n, 9)).astype(np.int64)
    else:
        k = np.full(n.shape, int(count), dtype=np.int64)
    return np.where(n > 0, np.minimum(n, np.maximum(k, 1)), 0)


def graph_seeds(seed: int, graph_ids) -> np.ndarray:
    """Per-graph 32-bit RNG seeds: SplitMix64 of ``seed`` and each graph id.

    Returns
    -------
    ndarray of int64, shape (G,), values in ``[0, 2**32)``
    """
    ids = np.asarray(graph_ids, dtype=np.int64).astype(np.uint64)
    with np.errstate(over="ignore"):
        z = ids + np.uint64(int(seed) % (1 << 64)) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x632BE59BD9B4E019)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z & np.uint64(0xFFFFFFFF)).astype(np.int64)


def _check_mode(method: str | None, bfs_mode: str, rw_restart: float) -> None:
    if method is not None and method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if bfs_mode not in BFS_MODES:
        raise ValueError(f"bfs_mode must be one of {BFS_MODES}, got {bfs_mode!r}")
    if not 0.0 <= rw_restart < 1.0:
        raise ValueError(f"rw_restart must be in [0, 1), got {rw_restart}")


# ---------------------------------------------------------------------------------------
# numba kernels.  Graph g owns global nodes a..a+n-1; indices[] are global ids.  Work arrays
# are indexed by local id (v - a).  Set membership: stamp[v - a] == cur; pos[v - a] is the
# position of v in the current node list.
# ---------------------------------------------------------------------------------------
@njit(cache=True)
def _mark(nodes, s, a, stamp, cur, pos):
    for i in range(s):
        stamp[nodes[i] - a] = cur
        pos[nodes[i] - a] = i


@njit(cache=True)
def _set_tree_norm(nodes, s, a, indptr, indices, xnorm, coefs, stamp, cur, pos, lptr, lidx, P, Q):
    r"""TN(G[S]) for S = nodes[:s] (marked with ``cur``).

    Algorithm 1 gives :math:`\mathrm{TN} = \sum_{\ell<L} c_\ell\, \mathbf 1^\top A_S^\ell x`.  As
    :math:`A_S` is symmetric, :math:`\mathbf 1^\top A_S^\ell x = (A_S^{a}\mathbf 1)^\top (A_S^{\ell-a} x)`
    with :math:`a = \lfloor \ell/2 \rfloor`: rows ``P[j] = A_S^j 1`` and ``Q[j] = A_S^j x`` up to
    :math:`j = \lceil (L-1)/2 \rceil` suffice.  ``P[1]`` (degrees in S) and ``Q[1]`` are
    accumulated while the induced CSR is built, so depth 4 needs a single extra pass
    over the induced edges instead of three.
    """
    L = coefs.size
    total = 0.0
    for i in range(s):
        Q[0, i] = xnorm[nodes[i]]
        total += Q[0, i]
    if L == 1:
        return total
    jp = (L - 1) // 2
    jq = L - 1 - jp
    e = 0
    lptr[0] = 0
    for i in range(s):
        v = nodes[i]
        acc = 0.0
        for p in range(indptr[v], indptr[v + 1]):
            u = indices[p] - a
            if stamp[u] == cur:
                t = pos[u]
                lidx[e] = t
                acc += Q[0, t]
                e += 1
        lptr[i + 1] = e
        P[1, i] = e - lptr[i]
        Q[1, i] = acc
    for j in range(2, jq + 1):
        do_p = j <= jp
        for i in range(s):
            accq = 0.0
            accp = 0.0
            for p in range(lptr[i], lptr[i + 1]):
                t = lidx[p]
                accq += Q[j - 1, t]
                if do_p:
                    accp += P[j - 1, t]
            Q[j, i] = accq
            if do_p:
                P[j, i] = accp
    for ell in range(1, L):
        ap = ell // 2
        bq = ell - ap
        acc = 0.0
        if ap == 0:
            for i in range(s):
                acc += Q[bq, i]
        else:
            for i in range(s):
                acc += P[ap, i] * Q[bq, i]
        total += coefs[ell] * acc
    return total


@njit(cache=True)
def _bfs_set(root, k, a, n, indptr, indices, fill, stamp, cur, pos, queue):
    """k-BFS subset of ``root`` into queue[:s]; returns s (see :func:`bfs_subset`)."""
    queue[0] = root
    stamp[root - a] = cur
    pos[root - a] = 0
    count = 1
    lvl_start = 0
    scan = 0
    while count < k:
        tail = count
        for i in range(lvl_start, count):
            v = queue[i]
            for p in range(indptr[v], indptr[v + 1]):
                u = indices[p]
                if stamp[u - a] != cur:
                    stamp[u - a] = cur
                    queue[tail] = u
                    tail += 1
        size = tail - count
        if size == 0:  # component exhausted
            if not fill:
                break
            while stamp[scan] == cur:
                scan += 1
            stamp[scan] = cur
            queue[count] = a + scan
            pos[scan] = count
            lvl_start = count
            count += 1
            continue
        if count + size <= k:
            for i in range(count, tail):
                pos[queue[i] - a] = i
            lvl_start = count
            count = tail
        else:
            if fill:
                seg = np.sort(queue[count:tail])
                need = k - count
                for i in range(size):
                    if i < need:
                        queue[count + i] = seg[i]
                        pos[seg[i] - a] = count + i
                    else:
                        stamp[seg[i] - a] = 0
                count = k
            else:
                for i in range(count, tail):
                    stamp[queue[i] - a] = 0
            break
    return count


@njit(cache=True)
def _components(a, n, indptr, indices, comp, comp_size, queue):
    """Connected-component label (0..c-1, in order of smallest node id) of each local node."""
    for v in range(n):
        comp[v] = -1
    c = 0
    for r in range(n):
        if comp[r] >= 0:
            continue
        comp[r] = c
        queue[0] = r
        head = 0
        tail = 1
        while head < tail:
            v = queue[head]
            head += 1
            for p in range(indptr[a + v], indptr[a + v + 1]):
                u = indices[p] - a
                if comp[u] < 0:
                    comp[u] = c
                    queue[tail] = u
                    tail += 1
        comp_size[c] = tail
        c += 1
    return c


@njit(cache=True)
def _rw_set(k, a, n, indptr, indices, p_restart, comp, comp_size, comp_seen, ncomp, stamp, cur, pos, queue,
            buf):
    """Random-walk subset into queue[:k] (numba RNG must be seeded by the caller)."""
    for c in range(ncomp):
        comp_seen[c] = 0
    s = np.random.randint(0, n)
    stamp[s] = cur
    pos[s] = 0
    queue[0] = a + s
    comp_seen[comp[s]] += 1
    count = 1
    node = s
    stall = 0
    while count < k:
        c = comp[s]
        jump = -1
        if comp_seen[c] == comp_size[c]:
            r = np.random.randint(0, n - count)
            for u in range(n):
                if stamp[u] != cur:
                    if r == 0:
                        jump = u
                        break
                    r -= 1
        elif stall >= n:
            nb = 0
            for u in range(n):
                if stamp[u] != cur:
                    for p in range(indptr[a + u], indptr[a + u + 1]):
                        if stamp[indices[p] - a] == cur:
                            buf[nb] = u
                            nb += 1
                            break
            jump = buf[np.random.randint(0, nb)]
        if jump >= 0:
            s = jump
            node = s
            stall = 0
            stamp[s] = cur
            pos[s] = count
            queue[count] = a + s
            comp_seen[comp[s]] += 1
            count += 1
            continue
        if np.random.random() < p_restart:
            node = s
        else:
            d = indptr[a + node + 1] - indptr[a + node]
            node = indices[indptr[a + node] + np.random.randint(0, d)] - a
        if stamp[node] != cur:
            stamp[node] = cur
            pos[node] = count
            queue[count] = a + node
            comp_seen[comp[node]] += 1
            count += 1
            stall = 0
        else:
            stall += 1
    return count


@njit(cache=True)
def _core_numbers(a, n, indptr, indices, core, vert, posv, binv):
    """Batagelj–Zaversnik O(|E|) core decomposition; core numbers into core[:n]."""
    md = 0
    for v in range(n):
        d = indptr[a + v + 1] - indptr[a + v]
        core[v] = d
        if d > md:
            md = d
    for d in range(md + 1):
        binv[d] = 0
    for v in range(n):
        binv[core[v]] += 1
    start = 0
    for d in range(md + 1):
        num = binv[d]
        binv[d] = start
        start += num
    for v in range(n):
        posv[v] = binv[core[v]]
        vert[posv[v]] = v
        binv[core[v]] += 1
    for d in range(md, 0, -1):
        binv[d] = binv[d - 1]
    binv[0] = 0
    for i in range(n):
        v = vert[i]
        for p in range(indptr[a + v], indptr[a + v + 1]):
            u = indices[p] - a
            if core[u] > core[v]:
                du = core[u]
                pu = posv[u]
                pw = binv[du]
                w = vert[pw]
                if u != w:
                    posv[u] = pw
                    vert[pu] = w
                    posv[w] = pu
                    vert[pw] = u
                binv[du] += 1
                core[u] -= 1


@njit(cache=True)
def _kcore_set(k, a, n, indptr, indices, core, vert, posv, binv, queue):
    """k-core subset into queue[:k]: decreasing core number, then degree, then increasing id."""
    _core_numbers(a, n, indptr, indices, core, vert, posv, binv)
    key = np.empty(n, dtype=np.int64)
    for v in range(n):
        key[v] = -(core[v] * (n + 1) + (indptr[a + v + 1] - indptr[a + v]))
    order = np.argsort(key, kind="mergesort")
    for i in range(k):
        queue[i] = a + order[i]
    return k


@njit(cache=True)
def _random_set(k, a, n, perm, queue):
    """k distinct uniform nodes (partial Fisher–Yates) into queue[:k]."""
    for v in range(n):
        perm[v] = v
    for i in range(k):
        j = np.random.randint(i, n)
        t = perm[i]
        perm[i] = perm[j]
        perm[j] = t
        queue[i] = a + perm[i]
    return k


@njit(cache=True)
def _subsample_kernel(indptr, indices, node_ptr, xnorm, ks, seeds, coefs, method, fill, p_restart,
                      keep, tn_full, tn_kept, winner, root_out):
    n_graphs = node_ptr.size - 1
    maxn = 1
    maxe = 1
    for g in range(n_graphs):
        nn = node_ptr[g + 1] - node_ptr[g]
        ee = indptr[node_ptr[g + 1]] - indptr[node_ptr[g]]
        maxn = max(maxn, nn)
        maxe = max(maxe, ee)
    stamp = np.zeros(maxn, dtype=np.int64)
    pos = np.zeros(maxn, dtype=np.int64)
    queue = np.zeros(maxn, dtype=np.int64)
    best = np.zeros(maxn, dtype=np.int64)
    aux1 = np.zeros(maxn + 1, dtype=np.int64)
    aux2 = np.zeros(maxn + 1, dtype=np.int64)
    aux3 = np.zeros(maxn + 1, dtype=np.int64)
    aux4 = np.zeros(maxn + 1, dtype=np.int64)
    lptr = np.zeros(maxn + 1, dtype=np.int64)
    lidx = np.zeros(maxe, dtype=np.int64)
    rows = max(2, coefs.size - 1 - (coefs.size - 1) // 2 + 1)
    pbuf = np.zeros((rows, maxn))
    qbuf = np.zeros((rows, maxn))
    cur = 0
    for g in range(n_graphs):
        a = node_ptr[g]
        n = node_ptr[g + 1] - a
        k = ks[g]
        root_out[g] = -1
        if n == 0:
            tn_full[g] = 0.0
            tn_kept[g] = 0.0
            winner[g] = -1
            continue
        for i in range(n):
            queue[i] = a + i
        cur += 1
        _mark(queue, n, a, stamp, cur, pos)
        full = _set_tree_norm(queue, n, a, indptr, indices, xnorm, coefs, stamp, cur, pos, lptr, lidx, pbuf, qbuf)
        tn_full[g] = full
        if k >= n:
            for i in range(n):
                keep[a + i] = True
            tn_kept[g] = full
            winner[g] = 0
            continue
        np.random.seed(seeds[g])
        bval = -1.0
        bs = 0
        win = -1
        if method == 0:
            for r in range(n):
                cur += 1
                s = _bfs_set(a + r, k, a, n, indptr, indices, fill, stamp, cur, pos, queue)
                t = _set_tree_norm(queue, s, a, indptr, indices, xnorm, coefs, stamp, cur, pos, lptr, lidx, pbuf, qbuf)
                if t > bval:
                    bval = t
                    bs = s
                    win = 1
                    root_out[g] = r
                    for i in range(s):
                        best[i] = queue[i]
        for cand in (2, 3, 1):
            if cand == 2 and (method == 0 or method == 2):
                ncomp = _components(a, n, indptr, indices, aux1, aux2, queue)
                cur += 1
                s = _rw_set(k, a, n, indptr, indices, p_restart, aux1, aux2, aux3, ncomp, stamp, cur, pos, queue, aux4)
            elif cand == 3 and (method == 0 or method == 3):
                s = _kcore_set(k, a, n, indptr, indices, aux1, aux2, aux3, aux4, queue)
                cur += 1
                _mark(queue, s, a, stamp, cur, pos)
            elif cand == 1 and method == 1:
                s = _random_set(k, a, n, aux1, queue)
                cur += 1
                _mark(queue, s, a, stamp, cur, pos)
            else:
                continue
            t = _set_tree_norm(queue, s, a, indptr, indices, xnorm, coefs, stamp, cur, pos, lptr, lidx, pbuf, qbuf)
            if t > bval:
                bval = t
                bs = s
                win = 4 if cand == 1 else cand
                root_out[g] = -1
                for i in range(s):
                    best[i] = queue[i]
        for i in range(bs):
            keep[best[i]] = True
        tn_kept[g] = bval
        winner[g] = win


# ---------------------------------------------------------------------------------------
# single-graph API
# ---------------------------------------------------------------------------------------
def _graph_arrays(g: Graph):
    return g.indptr, g.indices, np.array([0, g.num_nodes], dtype=np.int64)


def _check_k(g: Graph, k: int) -> int:
    if int(k) != k or k < 0:
        raise ValueError(f"k must be an integer >= 0, got {k!r}")
    return int(k)


def bfs_subset(g: Graph, root: int, k: int, bfs_mode: str = "fill") -> np.ndarray:
    r"""The k-BFS subset :math:`S_{\mathrm{BFS}(v;k)}` of ``root``.

    ``"paper"``: :math:`\{u : d(v, u) \le \ell_k\}` with :math:`\ell_k` the deepest level
    whose ball has :math:`\le k` nodes (may hold fewer than :math:`k`; a component smaller
    than :math:`k` is returned whole).  ``"fill"``: that ball plus the smallest ids of the
    next level up to :math:`k` nodes; when the component runs out, BFS continues from the
    smallest unvisited node id (so exactly :math:`\min(k, n)` nodes).

    Parameters
    ----------
    g : Graph
    root : int
    k : int
        Budget (``k >= 1``; ``k = 0`` returns an empty set).
    bfs_mode : {"fill", "paper"}

    Returns
    -------
    ndarray of int64
        Sorted node ids.
    """
    _check_mode(None, bfs_mode, 0.0)
    k = min(_check_k(g, k), g.num_nodes)
    if not 0 <= root < g.num_nodes:
        raise IndexError(f"root {root} out of range [0, {g.num_nodes})")
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    n = g.num_nodes
    stamp, pos, queue = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    s = _bfs_set(int(root), k, 0, n, g.indptr, g.indices, bfs_mode == "fill", stamp, 1, pos, queue)
    return np.sort(queue[:s])


@njit(cache=True)
def _rw_one(seed, k, n, indptr, indices, p_restart):
    np.random.seed(seed)
    comp = np.zeros(n, np.int64)
    csize = np.zeros(n, np.int64)
    seen = np.zeros(n, np.int64)
    queue = np.zeros(n, np.int64)
    ncomp = _components(0, n, indptr, indices, comp, csize, queue)
    stamp = np.zeros(n, np.int64)
    pos = np.zeros(n, np.int64)
    buf = np.zeros(n, np.int64)
    s = _rw_set(k, 0, n, indptr, indices, p_restart, comp, csize, seen, ncomp, stamp, 1, pos, queue, buf)
    return queue[:s].copy()


def random_walk_subset(g: Graph, k: int, seed: int = 0, graph_id: int = 0,
                       rw_restart: float = _DEFAULT_RESTART) -> np.ndarray:
    r"""The random-walk candidate :math:`S_{\mathrm{RW}}` (rule in the module docstring).

    Parameters
    ----------
    g : Graph
    k : int
        Budget; ``min(k, n)`` nodes are returned.
    seed, graph_id : int
        The walk's RNG is seeded with ``graph_seeds(seed, [graph_id])`` (as in
        :func:`subsample_nodes`).
    rw_restart : float in [0, 1)
        Probability of jumping back to the current root at each step.

    Returns
    -------
    ndarray of int64, shape (min(k, n),), sorted
    """
    _check_mode(None, "fill", rw_restart)
    k = min(_check_k(g, k), g.num_nodes)
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    s = int(graph_seeds(seed, [graph_id])[0])
    return np.sort(_rw_one(s, k, g.num_nodes, g.indptr, g.indices, float(rw_restart)))


def core_numbers(g: Graph) -> np.ndarray:
    """Core number of every node (largest ``c`` such that the node is in the ``c``-core).

    Returns
    -------
    ndarray of int64, shape (n,)
    """
    n = g.num_nodes
    core, vert, posv = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    binv = np.zeros(n + 1, np.int64)
    if n:
        _core_numbers(0, n, g.indptr, g.indices, core, vert, posv, binv)
    return core


def kcore_subset(g: Graph, k: int) -> np.ndarray:
    """The k-core candidate: first ``k`` nodes by (core number desc, degree desc, id asc).

    Returns
    -------
    ndarray of int64, shape (min(k, n),), sorted
    """
    k = min(_check_k(g, k), g.num_nodes)
    core = core_numbers(g)
    order = np.lexsort((np.arange(g.num_nodes), -g.degree, -core))
    return np.sort(order[:k]).astype(np.int64)


@dataclass(frozen=True, eq=False)
class NodeCandidates:
    """Candidate family :math:`\\mathcal S` of one graph (Appendix A.3).

    Attributes
    ----------
    bfs : list of ndarray
        ``bfs[v]`` is the sorted k-BFS subset rooted at node ``v``.
    rw : ndarray
        Sorted random-walk subset.
    kcore : ndarray
        Sorted k-core subset.
    k : int
    """

    bfs: list
    rw: np.ndarray
    kcore: np.ndarray
    k: int

    def all(self) -> list:
        """All candidates in tie-break order: BFS roots 0..n-1, random walk, k-core."""
        return [*self.bfs, self.rw, self.kcore]


def node_candidates(g: Graph, k: int, seed: int = 0, bfs_mode: str = "fill", graph_id: int = 0,
                    rw_restart: float = _DEFAULT_RESTART) -> NodeCandidates:
    """All candidate subsets of ``g`` for budget ``k`` (for inspection and tests).

    Parameters are those of :func:`select_nodes`; the random walk matches the one the
    selection uses for the same ``seed`` and ``graph_id``.
    """
    _check_mode(None, bfs_mode, rw_restart)
    return NodeCandidates(
        bfs=[bfs_subset(g, v, k, bfs_mode) for v in range(g.num_nodes)],
        rw=random_walk_subset(g, k, seed, graph_id, rw_restart),
        kcore=kcore_subset(g, k),
        k=int(k),
    )


def _run_kernel(indptr, indices, node_ptr, x, ks, seeds, method, depth, weights, bfs_mode, rw_restart):
    _check_mode(method, bfs_mode, rw_restart)
    coefs = _tree_norm_coefs(depth, weights)
    n_graphs = node_ptr.size - 1
    keep = np.zeros(int(node_ptr[-1]), dtype=np.bool_)
    tn_full, tn_kept = np.zeros(n_graphs), np.zeros(n_graphs)
    winner, root = np.zeros(n_graphs, np.int8), np.zeros(n_graphs, np.int64)
    xnorm = np.linalg.norm(x, axis=1) if x.shape[0] else np.zeros(0)
    _subsample_kernel(np.ascontiguousarray(indptr, np.int64), np.ascontiguousarray(indices, np.int64),
                      np.ascontiguousarray(node_ptr, np.int64), np.ascontiguousarray(xnorm),
                      np.ascontiguousarray(ks, np.int64), np.ascontiguousarray(seeds, np.int64), coefs,
                      _METHOD_CODE[method], bfs_mode == "fill", float(rw_restart),
                      keep, tn_full, tn_kept, winner, root)
    return keep, tn_full, tn_kept, winner, root


def select_nodes(g: Graph, fraction: float | None = None, k: int | None = None, method: str = "tmd",
                 depth: int = 4, weights="pascal", seed: int = 0, bfs_mode: str = "fill",
                 rw_restart: float = _DEFAULT_RESTART, graph_id: int = 0) -> tuple[np.ndarray, float]:
    r"""Choose the node set of one graph.

    Parameters
    ----------
    g : Graph
    fraction : float in (0, 1], optional
        Budget :math:`k = \lceil \mathrm{fraction}\cdot|V| \rceil` (at least 1 if :math:`|V|\ge1`).
    k : int, optional
        Absolute budget instead of ``fraction`` (exactly one of the two).
    method : {"tmd", "random", "rw", "kcore"}
        ``"tmd"``: the candidate of largest :math:`\mathrm{TN}(G[S])` among all k-BFS, the
        random-walk and the k-core subsets; ``"random"``: ``k`` uniform nodes; ``"rw"`` /
        ``"kcore"``: that candidate alone (baselines).
    depth, weights
        TMD depth :math:`L` and level weights (see :func:`tmdlib.weights.resolve_weights`).
    seed, graph_id : int
        RNG seed is ``graph_seeds(seed, [graph_id])``, the one :func:`subsample_nodes` uses
        for the graph with that id.
    bfs_mode : {"fill", "paper"}
    rw_restart : float

    Returns
    -------
    nodes : ndarray of int64, sorted
        The kept nodes :math:`S`.
    epsilon : float
        :math:`\mathrm{TN}(G) - \mathrm{TN}(G[S]) = \mathrm{TMD}^L_w(G, G[S])`.
    """
    if (fraction is None) == (k is None):
        raise ValueError("give exactly one of fraction= or k=")
    kk = node_budgets([g.num_nodes], fraction=fraction, count=k)
    indptr, indices, node_ptr = _graph_arrays(g)
    keep, tn_full, tn_kept, _, _ = _run_kernel(indptr, indices, node_ptr, g.x, kk, graph_seeds(seed, [graph_id]),
                                               method, depth, weights, bfs_mode, rw_restart)
    return np.flatnonzero(keep).astype(np.int64), max(float(tn_full[0] - tn_kept[0]), 0.0)


# ---------------------------------------------------------------------------------------
# dataset-level API
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class NodeSubsample:
    r"""Outcome of :func:`subsample_nodes` on a dataset of ``G`` graphs and ``N`` nodes.

    Attributes
    ----------
    mask : ndarray of bool, shape (N,)
        Kept global nodes.
    epsilon : ndarray of float64, shape (G,)
        :math:`\varepsilon_g = \mathrm{TN}(G_g) - \mathrm{TN}(G_g[S_g])` (clipped at 0).
    tree_norm, kept_tree_norm : ndarray of float64, shape (G,)
        :math:`\mathrm{TN}(G_g)` and :math:`\mathrm{TN}(G_g[S_g])`.
    k : ndarray of int64, shape (G,)
        Budgets.
    winner : ndarray of int8, shape (G,)
        Which candidate was kept, see :data:`WINNER_NAMES`.
    root : ndarray of int64, shape (G,)
        Local root id of the winning BFS candidate, else -1.
    method, bfs_mode : str
    seed, depth : int
    """

    mask: np.ndarray
    epsilon: np.ndarray
    tree_norm: np.ndarray
    kept_tree_norm: np.ndarray
    k: np.ndarray
    winner: np.ndarray
    root: np.ndarray
    method: str
    bfs_mode: str
    seed: int
    depth: int

    @property
    def mean_epsilon(self) -> float:
        r""":math:`\frac1n \sum_g \varepsilon_g`, the term of Corollary 4.1."""
        return float(self.epsilon.mean()) if self.epsilon.size else 0.0


def subsample_nodes(dataset: GraphDataset, fraction: float | None = None, method: str = "tmd", *,
                    count: int | None = None, depth: int = 4, weights="pascal", seed: int = 0,
                    bfs_mode: str = "fill", rw_restart: float = _DEFAULT_RESTART) -> NodeSubsample:
    """Node subsampling of every graph of ``dataset`` (one compiled pass over all graphs).

    Graph ``g`` gets the result of ``select_nodes(dataset[g], ..., graph_id=dataset.graph_ids[g])``.

    Parameters
    ----------
    dataset : GraphDataset
    fraction : float in (0, 1], optional
        Per-graph budget fraction (or ``count``: the same absolute budget for every graph).
    method, depth, weights, seed, bfs_mode, rw_restart
        As in :func:`select_nodes`.

    Returns
    -------
    NodeSubsample
    """
    ks = node_budgets(dataset.nodes_per_graph, fraction=fraction, count=count)
    keep, tn_full, tn_kept, winner, root = _run_kernel(
        dataset.indptr, dataset.indices, dataset.node_ptr, dataset.x, ks, graph_seeds(seed, dataset.graph_ids),
        method, depth, weights, bfs_mode, rw_restart)
    return NodeSubsample(mask=keep, epsilon=np.maximum(tn_full - tn_kept, 0.0), tree_norm=tn_full,
                         kept_tree_norm=tn_kept, k=ks, winner=winner, root=root, method=method,
                         bfs_mode=bfs_mode, seed=int(seed), depth=int(depth))


def induced_subdataset(dataset: GraphDataset, mask) -> GraphDataset:
    """The dataset of induced subgraphs :math:`G_g[S_g]`, ``S_g`` = kept nodes of graph ``g``.

    Nodes keep their relative order (new local ids ``0..|S_g|-1`` in increasing old id, as
    :meth:`Graph.subgraph`); edges keep their order; ``graph_ids`` and ``y`` are unchanged.

    Parameters
    ----------
    dataset : GraphDataset
    mask : array_like of bool, shape (N,)

    Returns
    -------
    GraphDataset
    """
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != (dataset.num_nodes,):
        raise ValueError(f"mask must have shape ({dataset.num_nodes},), got {mask.shape}")
    n_graphs = len(dataset)
    gon = dataset.graph_of_node
    kept = np.bincount(gon[mask], minlength=n_graphs)
    node_ptr = np.concatenate([[0], np.cumsum(kept)]).astype(np.int64)
    new_local = np.cumsum(mask) - 1 - node_ptr[gon]
    g_of_edge = np.repeat(np.arange(n_graphs), np.diff(dataset.edge_ptr))
    off = dataset.node_ptr[:-1][g_of_edge]
    gs, gd = dataset.src + off, dataset.dst + off
    em = mask[gs] & mask[gd]
    edge_ptr = np.concatenate([[0], np.cumsum(np.bincount(g_of_edge[em], minlength=n_graphs))]).astype(np.int64)
    return GraphDataset(x=dataset.x[mask], node_ptr=node_ptr, edge_ptr=edge_ptr, src=new_local[gs[em]],
                        dst=new_local[gd[em]], graph_ids=dataset.graph_ids.copy(),
                        y=None if dataset.y is None else dataset.y.copy())


# ---------------------------------------------------------------------------------------
# combined node + graph subsampling
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class CombinedSubsample:
    r"""Outcome of :func:`combined_subsample`.

    Attributes
    ----------
    dataset : GraphDataset
        The final training set: induced subgraphs of the selected graphs, in the order of
        ``coreset.medoids``; train with per-graph weights ``coreset.tau``.
    coreset : CoresetResult
        Graph selection (indices into the input dataset).
    nodes : NodeSubsample
        Node selection, on the whole dataset (``"nodes-first"``) or on the selected graphs
        only (``"graphs-first"``).
    order : str
    epsilon_graphs, epsilon_nodes : float
        The two terms of ``epsilon_total`` (see :func:`combined_subsample`).
    """

    dataset: GraphDataset
    coreset: CoresetResult
    nodes: NodeSubsample
    order: str
    epsilon_graphs: float
    epsilon_nodes: float

    @property
    def epsilon_total(self) -> float:
        """``epsilon_graphs + epsilon_nodes``."""
        return self.epsilon_graphs + self.epsilon_nodes


def combined_subsample(dataset: GraphDataset, distance: Callable[[GraphDataset], np.ndarray], k: int,
                       node_fraction: float, order: str = "nodes-first", node_method: str = "tmd",
                       depth: int = 4, weights="pascal", seed: int = 0, bfs_mode: str = "fill",
                       **coreset_kwargs) -> CombinedSubsample:
    r"""Node subsampling composed with graph (coreset) subsampling.

    With :math:`G'_i = G_i[S_i]`, :math:`\varepsilon_i = \mathrm{TMD}(G_i, G'_i)` and
    :math:`a(i)` the medoid of graph :math:`i`, the triangle inequality of TMD gives, for any
    GNN with Lipschitz product :math:`c`, :math:`|\mathcal L(h(G_i)) - \mathcal L(h(G'_{a(i)}))|
    \le c\,[\ldots]`, so Lemma 3.2 holds for the :math:`\tau`-weighted set
    :math:`\{G'_j\}_{j\in\mathcal I}` with :math:`\varepsilon_{\mathrm{total}}`:

    * ``"nodes-first"``: subsample nodes of every graph, then k-medoids on
      ``distance(X')``:  :math:`\varepsilon_{\mathrm{total}} = f_D(\mathcal I; X')
      + \frac1n\sum_i \varepsilon_i`.
    * ``"graphs-first"``: k-medoids on ``distance(X)``, then subsample nodes of the ``k``
      medoids only (cheaper): :math:`\varepsilon_{\mathrm{total}} = f_D(\mathcal I; X)
      + \frac1n\sum_{j\in\mathcal I} \tau_j \varepsilon_j`.

    The bound is that of the paper only when ``distance`` is TMD with the same ``depth``
    and ``weights``; for other distances the numbers are diagnostics.

    Parameters
    ----------
    dataset : GraphDataset
    distance : callable
        ``distance(ds) -> ndarray (len(ds), len(ds))``, e.g. a TMD block or
        :func:`tmdlib.baselines.feature_distance_matrix`.
    k : int
        Number of graphs.
    node_fraction : float
        Per-graph node budget fraction.
    order : {"nodes-first", "graphs-first"}
    node_method, depth, weights, seed, bfs_mode
        Passed to :func:`subsample_nodes`.
    **coreset_kwargs
        Passed to :func:`tmdlib.coreset.kmedoids_coreset` (``method``, ``restarts``, ...).

    Returns
    -------
    CombinedSubsample
    """
    node_kw = dict(method=node_method, depth=depth, weights=weights, seed=seed, bfs_mode=bfs_mode)
    if order == "nodes-first":
        ns = subsample_nodes(dataset, node_fraction, **node_kw)
        sub = induced_subdataset(dataset, ns.mask)
        cs = kmedoids_coreset(distance(sub), k, seed=seed, **coreset_kwargs)
        return CombinedSubsample(dataset=sub.take(cs.medoids), coreset=cs, nodes=ns, order=order,
                                 epsilon_graphs=cs.epsilon, epsilon_nodes=ns.mean_epsilon)
    if order == "graphs-first":
        cs = kmedoids_coreset(distance(dataset), k, seed=seed, **coreset_kwargs)
        chosen = dataset.take(cs.medoids)
        ns = subsample_nodes(chosen, node_fraction, **node_kw)
        eps_nodes = float((cs.tau * ns.epsilon).sum() / len(dataset))
        return CombinedSubsample(dataset=induced_subdataset(chosen, ns.mask), coreset=cs, nodes=ns, order=order,
                                 epsilon_graphs=cs.epsilon, epsilon_nodes=eps_nodes)
    raise ValueError(f"order must be 'nodes-first' or 'graphs-first', got {order!r}")
