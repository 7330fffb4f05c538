"""The TMD level weights of a stage's config (``--depth`` / ``--weights``), checked: apart from the package's shared
helpers so that a stage without weights (ingest) does not run the distance package."""
from __future__ import annotations

from tmdlib import InputError


def checked_weights(depth: int, weights):
    """``--weights`` parsed (text: :func:`tmdlib.distance.parse_weights`) and checked against ``--depth``."""
    from tmdlib.distance import parse_weights, resolve_weights

    try:
        w = parse_weights(weights) if isinstance(weights, str) else weights
        resolve_weights(int(depth), w)
    except ValueError as err:
        raise InputError(None, f"--depth/--weights: {err}") from None
    return w
