"""One typed config per stage (issue 69, item 2): each stage's options as a frozen dataclass and its files as
another, built once (from the command line's options, or from ``params.yaml``'s group) and checked there, before any
file is read.  One module per stage (:mod:`flows.config.train`, ``.evaluate``, ``.select``, ``.ingest``, ``.audit``,
``.experiment``, ``.molecules``): a stage runs only its own config's code, so a change to one stage's checks reruns
no other stage (``tests/lib/house/test_lineage.py``).

The flow takes the config and the stage's paths; the tasks take what they need of them.  The defaults are the
flows' own (a direct call ``train_flow(...)``); the command line passes every option, with its own defaults
(``tmdsub train --help``).  ``params.yaml``'s stage groups name fields of these classes (a house test,
``tests/lib/house/test_stage_configs.py``, holds them to it).

This package holds what every stage's config shares: the options renamed on the way in and the helpers that build a
config from a command's options.
"""
from __future__ import annotations

from dataclasses import fields

from tmdlib import InputError

#: A command-line option whose config field has another name (``--mlflow``; ``--next`` fills the select config's
#: ``next``, params.yaml's ``select.next``).
RENAMED = {"mlflow": "log_mlflow", "next_strategy": "next"}


def _number(text, option: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        raise InputError(None, f"{option} must be a number or auto, got {text!r}") from None


def _pick(cls, options: dict) -> dict:
    """The options that are fields of ``cls`` (a command-line name mapped by :data:`RENAMED`)."""
    names = {f.name for f in fields(cls)}
    out = {}
    for key, value in options.items():
        key = RENAMED.get(key, key)
        if key in names:
            out[key] = value
    return out


def _paths(cls, options: dict):
    """``cls`` (a paths dataclass) from the command's options: every path as text, an absent one as None."""
    return cls(**{k: (str(v) if v not in (None, "") else None) for k, v in _pick(cls, options).items()})


def one_of(option: str, value, allowed) -> None:
    """Refuse ``value`` of ``option`` unless it is one of ``allowed`` (one InputError naming them)."""
    if value not in allowed:
        raise InputError(None, f"{option} must be one of {', '.join(allowed)}; got {value!r}")
