"""The experiment protocol of the paper's Section 5: datasets x methods x fractions x trials x architectures.

* :mod:`~tmdlib.experiment._grid` -- the grid (profiles ``quick`` / ``full``), constants of the protocol,
  and :func:`~tmdlib.experiment._grid.plan_cells` (what is still to run).
* :mod:`~tmdlib.experiment._results` -- result rows: key, CSV text, reading a results file.
* :mod:`~tmdlib.experiment.protocol` -- one cell: split, select, train, test (imports torch; import it
  explicitly).

Trial ``t`` uses ``t`` as the seed of the 80/20 split, of the selection (k-medoids restarts, random picks,
random walks) and of the network initialisation / batch order.  Selection never reads labels; the
condensation baselines' labelled variants (``doscond``, ``kidd``) do, and say so.
"""
from ._grid import (ALL_GRAPH_METHODS, ARCHS, COLUMNS, CONDENSE_METHODS, DATASETS, GRAPH_METHODS, KEY, KINDS,
                   LABELLED_METHODS, NODE_METHODS, PROFILES, needed_matrices, plan_cells)
from ._results import read_results, row_key, rows_to_csv

__all__ = ["ALL_GRAPH_METHODS", "ARCHS", "COLUMNS", "CONDENSE_METHODS", "DATASETS", "GRAPH_METHODS", "KEY", "KINDS",
           "LABELLED_METHODS", "NODE_METHODS", "PROFILES", "needed_matrices", "plan_cells", "read_results",
           "row_key", "rows_to_csv"]
