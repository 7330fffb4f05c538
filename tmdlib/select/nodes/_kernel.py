"""Compiled (numba) kernels of node subsampling: candidate sets and their tree norms.

Graph ``g`` owns global nodes ``a..a+n-1``; ``indices[]`` are global ids.  Work arrays are
indexed by local id (``v - a``).  Set membership: ``stamp[v - a] == cur``; ``pos[v - a]`` is the
position of ``v`` in the current node list.  The rules these kernels implement are stated in
:mod:`tmdlib.select.nodes` (k-BFS, random walk with restart, k-core, uniform random);
:func:`subsample_kernel` evaluates every candidate's tree norm (Algorithm 1) in one pass per graph.
"""
from __future__ import annotations

import numpy as np
from numba import njit

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
def subsample_kernel(indptr, indices, node_ptr, xnorm, ks, seeds, coefs, method, fill, p_restart,
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


@njit(cache=True)
def rw_one(seed, k, n, indptr, indices, p_restart):
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

