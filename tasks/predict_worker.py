"""The predict stage's worker processes (:func:`tasks.predict._chunk_outputs`): handed the fitted model and the
applicability domain once (:func:`start`), then one chunk of SMILES at a time (:func:`chunk`).

Kept apart from :mod:`tasks.predict` so that a worker imports neither Prefect's tasks nor torch to load a model file
(a fingerprint model arrives pickled): on MOSES a worker held ~0.9 GB before, mostly imports.
"""
from __future__ import annotations

_STATE: dict = {}


def start(model, domain) -> None:
    """Process-pool initialiser: keep the model and the domain (:class:`tmdlib.chem.domain.Domain` or None)."""
    _STATE.update(model=model, domain=domain)


def chunk(smiles: list) -> tuple:
    """``(outputs, domain columns or None)`` of a chunk of SMILES
    (:func:`tmdlib.chem.domain.outputs_with_domain`)."""
    from tmdlib.chem.domain import outputs_with_domain

    return outputs_with_domain(_STATE["model"], _STATE["domain"], smiles)
