"""Graph condensation baselines of the paper's Section 5: DosCond and KiDD, with and without labels.

They *synthesise* a training set instead of selecting real graphs, and their labelled variants **use the
training labels** -- unlike every selection method of tmdsub (TMD, Random, Feature, WL), which chooses
without labels.  One interface::

    res = condense("doscond", train_ds, k, labels=y_train, seed=0, gin=arch_config(...))
    res.graphs   # k PyG Data (x, edge_index, weight = 1, y when labels were given)
    res.source   # the real graph each synthetic graph started from
    res.seconds  # CPU seconds of the condensation

``labels=None`` runs the paper's label-free variant (Appendix "Effects of validation and label usage in
KiDD and DosCond"): label-dependent loss terms dropped, class-agnostic random initialisation; the caller
labels synthetic graph ``i`` with the label of ``source[i]`` (k labels, the budget of every method).
The other half of the paper's adaptation -- no validation set, the model of the final epoch -- is the
experiment protocol's (:func:`tmdlib.experiment.protocol.run_cell`).

* :mod:`~tmdlib.torch.condense._common` -- result type, sizing, initialisation, structure relaxation,
  dense GIN forward.
* :mod:`~tmdlib.torch.condense._doscond` -- one-step gradient matching (Jin et al., KDD 2022).
* :mod:`~tmdlib.torch.condense._kidd` -- kernel ridge regression with LiteGNTK (Xu et al., KDD 2023).
"""
from __future__ import annotations

from ..._graph import GraphDataset
from ._common import Condensed
from ._doscond import doscond
from ._kidd import kidd

__all__ = ["Condensed", "condense", "doscond", "kidd", "METHODS"]

METHODS = {"doscond": doscond, "kidd": kidd}


def condense(method: str, ds: GraphDataset, k: int, labels=None, seed: int = 0, gin: dict | None = None,
             **options) -> Condensed:
    """Run ``method`` (``"doscond"`` or ``"kidd"``); ``labels=None`` is the label-free variant."""
    if method not in METHODS:
        raise ValueError(f"unknown condensation method {method!r}: {', '.join(METHODS)}")
    return METHODS[method](ds, k, labels=labels, seed=seed, gin=gin, **options)
