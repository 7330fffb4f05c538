"""Whether node subsampling runs at all: ``nodes.method: auto`` resolved for the pool at hand.

Measured (issue 61 item 4, issue 63): on a med-chem pool in production the node-subsampled certified GIN's pool
estimate was twice the constant predictor's error (RMSE 2.33 against 1.09), and on MOSES (1.58 M molecules, 16 k
labels) training it alone would take about 20 minutes of CPU.  So on a molecule pool without labels the stages are
off by default; benchmark mode (labels present) and graph pools without SMILES keep the paper's ``tmd``.
"""
from __future__ import annotations

__all__ = ["NODE_OFF", "NODE_AUTO", "DEFAULT_NODE_METHOD", "node_method", "off_line"]

#: ``nodes.method`` values beside the subsampling methods: ``off`` (the stages write outputs that say so and do
#: nothing else) and ``auto`` (:func:`node_method`).
NODE_OFF = "off"
NODE_AUTO = "auto"
#: What ``auto`` runs wherever node subsampling stays on (the paper's TMD-optimal candidate).
DEFAULT_NODE_METHOD = "tmd"
#: Why ``auto`` turned it off.
PRODUCTION_MOLECULES = "production molecule pool"


def node_method(method: str, production: bool, molecules: bool) -> tuple[str, str | None]:
    """``nodes.method`` resolved for a pool: the method to run, or :data:`NODE_OFF` with the reason.

    Parameters
    ----------
    method : str
        ``nodes.method`` as set: ``auto``, ``off`` or a subsampling method (``tmd``, ``random``, ``rw``, ``kcore``).
    production : bool
        The pool holds no labels (production: the lab's answers come later), decided from the store as the select
        stage decides it.
    molecules : bool
        The store has SMILES (a molecule pool).

    Returns
    -------
    method : str
        ``off``, or the subsampling method that runs (``auto`` gives :data:`DEFAULT_NODE_METHOD`).
    reason : str or None
        Why it is off (``"production molecule pool; nodes.method: auto"`` or ``"nodes.method: off"``); None when it
        runs.

    Examples
    --------
    >>> node_method("auto", production=True, molecules=True)
    ('off', 'production molecule pool; nodes.method: auto')
    >>> node_method("auto", production=False, molecules=True)
    ('tmd', None)
    >>> node_method("kcore", production=True, molecules=True)
    ('kcore', None)
    """
    if method == NODE_OFF:
        return NODE_OFF, f"nodes.method: {NODE_OFF}"
    if method != NODE_AUTO:
        return method, None
    if production and molecules:
        return NODE_OFF, f"{PRODUCTION_MOLECULES}; nodes.method: {NODE_AUTO}"
    return DEFAULT_NODE_METHOD, None


def off_line(reason: str) -> str:
    """The one line every report gives for stages that were off: ``node subsampling: off (<reason>)``."""
    return f"node subsampling: off ({reason})"
