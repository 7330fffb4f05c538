r"""The range of values the TMD engine and tree norms can reach, checked before any computation.

Node features are bounded at the library boundary, :math:`|x_{ij}| \le A \le` :data:`tmdlib._graph.FEATURE_LIMIT`
(checked by :class:`~tmdlib._graph.Graph` and :class:`~tmdlib._graph.GraphDataset`).  For graphs of at most
``n`` nodes and maximum degree :math:`\Delta`, with ``d`` features, every value the engine forms is then
bounded by the tree-norm recursion (Jain et al., Algorithm 1)

.. math::

    \beta_0 = A\sqrt d, \qquad \beta_\ell = A\sqrt d + w_{\ell-1}\,\Delta\,\beta_{\ell-1},

:math:`\beta_\ell` bounding the distance of a depth-:math:`(\ell+1)` computation tree to a blank tree.
Every tree distance is at most :math:`2\beta_{L-1}` (through the blank tree), every TMD and tree norm at
most :math:`R = 2 n \beta_{L-1}`, every squared feature distance at most :math:`4 A^2 d`; an
assignment problem has :math:`k \le n + \Delta` trees per side and costs of magnitude at most
:math:`2R`, a shortest augmenting path is at most :math:`2k` such costs long, and each of the ``k``
augmentations moves a dual potential by at most one path length, so every value of the solver is at
most :math:`4 k^2 R`.  With :math:`K = n + \Delta + 2`, :func:`check_value_range` requires

.. math:: 4 A^2 d \le V, \qquad 8 K^2 R \le V,

with :math:`V` = :data:`VALUE_LIMIT` = :math:`10^{300}`, so no sum can overflow float64 (max :math:`1.8 \cdot 10^{308}`).  With features within
``FEATURE_LIMIT`` this holds for every realistic depth and weights (it fails only when
:math:`n \sum_\ell \prod_t w_t \Delta^\ell` exceeds about :math:`10^{240}`).
"""
from __future__ import annotations

import numpy as np

from .._errors import InputError

__all__ = ["VALUE_LIMIT", "value_bound", "check_value_range", "check_finite"]

#: Largest value any sum inside the engine may reach (float64 overflows at 1.8e308).
VALUE_LIMIT = 1e300


def value_bound(abs_max: float, d: int, n_max: int, max_degree: int, weights: np.ndarray) -> float:
    r"""The worst case :math:`\max(4A^2 d,\; 8 K^2 \cdot 2 n \beta_{L-1})`, :math:`K = n + \Delta + 2` (module docstring).

    Parameters
    ----------
    abs_max : float
        :math:`A = \max |x_{ij}|`.
    d, n_max, max_degree : int
        Feature width, most nodes in a graph, largest degree.
    weights : ndarray of float64, shape (L - 1,)

    Returns
    -------
    float
        ``inf`` (or NaN for non-finite features) when the bound itself overflows.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        a = np.float64(abs_max)
        base = a * np.sqrt(np.float64(max(d, 1)))
        beta = base
        for w in np.asarray(weights, dtype=np.float64):
            beta = base + w * np.float64(max_degree) * beta
        r = 2.0 * np.float64(n_max) * beta
        k = np.float64(n_max + max_degree + 2)
        return float(max(4.0 * a * a * np.float64(max(d, 1)), 8.0 * k * k * r))


def _stats(graphs) -> tuple[float, int, int, int]:
    """``(max |x|, d, most nodes in a graph, largest degree)`` of anything with ``x`` (or a feature table
    ``features``), ``indptr`` and, for several graphs, ``node_ptr`` (a Graph, a GraphDataset); no copies."""
    x = graphs.features if hasattr(graphs, "features") else graphs.x
    abs_max = float(max(-x.min(), x.max())) if x.size else 0.0  # NaN propagates
    node_ptr = getattr(graphs, "node_ptr", None)
    n_max = int(np.diff(node_ptr).max()) if node_ptr is not None and len(node_ptr) > 1 else int(x.shape[0])
    degree = int(np.diff(graphs.indptr).max()) if graphs.indptr.size > 1 else 0
    return abs_max, int(x.shape[1]), n_max, degree


def check_value_range(depth: int, weights: np.ndarray, *graphs) -> None:
    """Refuse (before computing) inputs for which a sum inside the TMD or a tree norm could overflow.

    Parameters
    ----------
    depth : int
        Depth :math:`L`.
    weights : ndarray of float64, shape (L - 1,)
    *graphs : Graph or GraphDataset
        Everything that will be compared (the bound takes the largest values over all of them);
        any object with ``x`` or ``features``, ``indptr`` and optionally ``node_ptr`` will do.

    Raises
    ------
    InputError
        Non-finite features (possible only for containers built with ``validate=False``), or a
        worst-case value (:func:`value_bound`) above :data:`VALUE_LIMIT`, naming the quantities.
    """
    stats = [_stats(g) for g in graphs]
    if not stats:
        return
    abs_max = max(s[0] for s in stats) if all(np.isfinite(s[0]) for s in stats) else float("nan")
    d, n_max, degree = max(s[1] for s in stats), max(s[2] for s in stats), max(s[3] for s in stats)
    if not np.isfinite(abs_max):
        raise InputError(None, "node features contain NaN or inf (build graphs with validation on)")
    bound = value_bound(abs_max, d, n_max, degree, weights)
    if not bound <= VALUE_LIMIT:
        raise InputError(None, f"the TMD at depth {depth} with weights {np.asarray(weights).tolist()} could overflow "
                               f"float64: graphs of up to {n_max} nodes, degree {degree}, {d} features of magnitude up "
                               f"to {abs_max:.4g} give a worst-case value of {bound:.4g} > {VALUE_LIMIT:.0e}; use a "
                               f"smaller depth or smaller weights, or rescale the features (|x| <= FEATURE_LIMIT = "
                               f"3.4e38 is always safe for realistic depths and weights)")


def check_finite(values: np.ndarray, what: str = "TMD") -> np.ndarray:
    """Return ``values`` if all finite; else raise FloatingPointError (a refused assignment problem)."""
    values = np.asarray(values)
    if values.size and not np.isfinite(values).all():
        raise FloatingPointError(f"{what} is not finite: a cost overflowed float64 and the assignment solver "
                                 f"refused it (features beyond FEATURE_LIMIT given with validate=False?)")
    return values
