r"""What the train stage takes from a selection and the lab's answers: the medoids, τ and ε to train with when only
part of the coreset was answered (:func:`answered_selection`), and the weights of the training loss
(:func:`training_weights`).
"""
from __future__ import annotations

import numpy as np

from .._errors import InputError

__all__ = ["answered_selection", "training_weights"]


def answered_selection(sel: dict, label_map: dict, pool, depth: int, weights, path: str) -> tuple:
    r"""``(medoid ids, τ, ε mean, partial)`` to train with.

    The selection's own when every medoid has a label; otherwise the coreset restricted to the answered medoids
    (:func:`tmdlib.select.partial.answered_certificate`: the graphs of an unanswered medoid go to their nearest
    answered one by exact TMD of ``depth`` and ``weights``, τ and :math:`\varepsilon` follow), with ``partial``
    saying what moved (None when nothing is missing).

    Parameters
    ----------
    sel : dict
        ``selection.json`` (``medoids``, ``tau``, ``epsilon_mean``, ``train_ids``, ``assignment``, ``distance``).
    label_map : dict
        Graph id -> label.
    pool : object
        Anything with a ``dataset`` (:class:`tmdlib.GraphDataset`, in graph-id order), read only for a partial
        answer.
    path : str
        The labels file, named in errors.

    Raises
    ------
    InputError
        No medoid answered, or some unanswered and the selection has no assignment to reweight by.
    """
    from .evidence import CoresetCertificate
    from .partial import answered_certificate

    med = np.asarray(sel["medoids"], dtype=np.int64)
    have = np.array([int(g) in label_map for g in med], dtype=bool)
    if have.all():
        return med, sel["tau"], sel["epsilon_mean"], None
    if not have.any():
        raise InputError(path, f"none of the {len(med)} selected graphs has a label yet: import the lab's answers "
                               "(tmdsub labels import) before training")
    if "assignment" not in sel:
        raise InputError(path, f"{int((~have).sum())} selected graphs have no label, e.g. graph ids "
                               f"{med[~have][:10].tolist()}, and the selection has no assignment to reweight by")
    train = np.asarray(sel["train_ids"], dtype=np.int64)
    order = np.argsort(train)
    at = lambda ids: order[np.searchsorted(train, np.asarray(ids, dtype=np.int64), sorter=order)]  # noqa: E731
    assign = at(sel["assignment"])
    cert = CoresetCertificate(medoids=at(med), assignment=assign, distance=np.asarray(sel["distance"]),
                              tau=np.bincount(assign, minlength=len(train))[at(med)], epsilon=float(np.sum(sel["distance"])),
                              pairs_computed=0, engine=str(sel.get("engine", "exact")))
    new = answered_certificate(cert, at(med[have]), pool.dataset.take(train), depth, weights)
    ids = train[new.medoids]
    eps_mean = float(new.epsilon) / len(train)
    partial = {"requested_medoids": int(len(med)), "answered_medoids": int(have.sum()),
               "unanswered_ids": med[~have].tolist(), "graphs_moved": int(new.info.get("moved", 0)),
               "epsilon_mean_before": sel["epsilon_mean"], "epsilon_mean_after": eps_mean,
               "rule": "graphs of an unanswered medoid go to their nearest answered medoid (exact TMD); tau and "
                       "epsilon follow (docs/pipeline.md#labels)"}
    return ids, np.asarray(new.tau, dtype=np.float64), eps_mean, partial


def training_weights(sel_tau, weighting: str, sel: dict) -> tuple[np.ndarray, str]:
    """``(weights, weighting)`` of the training loss: ``auto`` resolved for the selection ``sel``'s mode
    (:func:`tmdlib.select.rounds.default_weighting`: none on a pool without labels, ``mode: production``; τ in
    benchmark mode), then the answered medoids' τ ``(k,)`` or unit weights ``(k,)``."""
    from .rounds import default_weighting

    weighting = default_weighting(weighting, sel.get("mode") == "production")
    tau = np.asarray(sel_tau, dtype=np.float64)
    return (tau if weighting == "tau" else np.ones(len(tau))), weighting
