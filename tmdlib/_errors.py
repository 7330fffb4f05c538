"""Errors raised by tmdlib on bad input."""
from __future__ import annotations

import os

__all__ = ["InputError"]


class InputError(ValueError):
    """Bad user input, located as precisely as possible.

    Parameters
    ----------
    path : str or os.PathLike or None
        The offending file (or folder).
    problem : str
        What is wrong, in words a user can act on.
    line : int or None
        1-based line (text files) or row (tables) number, if known.

    The message reads ``"<path>:<line>: <problem>"`` (``line`` omitted when unknown, and just
    ``"<problem>"`` when no file is involved, e.g. a bad command-line value).
    """

    def __init__(self, path: str | os.PathLike | None, problem: str, line: int | None = None):
        self.path = None if path is None else os.fspath(path)
        self.line = line
        self.problem = problem
        if self.path is None and line is None:
            super().__init__(problem)
            return
        where = self.path or "<input>"
        if line is not None:
            where = f"{where}:{line}"
        super().__init__(f"{where}: {problem}")
