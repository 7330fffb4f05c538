r"""Guarantees: the bounds a selection certifies (Jain et al., Lemma 3.2, Corollaries 3.3 and 4.1).

For a GNN :math:`h` whose loss is :math:`c`-Lipschitz in TMD, a coreset with medoid objective
:math:`\varepsilon` (mean TMD of the graphs to their medoids) gives

.. math:: \Big| \frac1n \sum_i \ell(G_i) - \frac1n \sum_{j \in \mathcal I} \tau_j \ell(G_j) \Big|
          \le c\,\varepsilon \quad\text{(Lemma 3.2)}, \qquad
          \text{excess training loss} \le 2c\,\varepsilon \quad\text{(Corollary 3.3)}.

See :mod:`tmdlib.guarantees._bounds`.  The constant :math:`c` of a trained network is on the torch
side (:func:`tmdlib.torch.gin.lipschitz_bound`).
"""
from ._bounds import (LN2, VERDICTS, bound_verdict, cluster_sizes, coreset_gap, erm_bound, excess_loss, lemma_bound, medoid_objective,
                     node_bounds, node_epsilon_mean, node_gap, weighted_subset_loss)

__all__ = ["LN2", "VERDICTS", "bound_verdict", "cluster_sizes", "coreset_gap", "erm_bound", "excess_loss", "lemma_bound", "medoid_objective",
           "node_bounds", "node_epsilon_mean", "node_gap", "weighted_subset_loss"]
