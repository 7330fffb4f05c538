"""Fingerprint of the distance engine: what cached distances depend on besides the graphs and parameters.

A cache of TMD values (the pipeline's blocks, the experiment's matrices) is valid only for the code
that computed it.  :func:`engine_fingerprint` hashes that code -- the engine's own source files
(``tmdlib/distance/*.py``) -- and the versions of the two libraries whose arithmetic it runs on
(numpy, numba), so any edit of a kernel or an upgrade invalidates every cached value, with no
version number to remember to bump.

numba's own on-disk cache of compiled functions has the same flaw one level down: it recompiles a
function when *its* source file changes, but not when a compiled function it calls from another file
does (a fix in ``assign.py`` left ``_kernels.py``'s cached machine code calling the old solver).
:func:`install_numba_cache_key` (run by ``tmdlib.distance`` before any kernel is defined) adds the
fingerprint of the function's package folder to the source stamp numba checks, for tmdlib's files.
"""
from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

__all__ = ["SOURCE_DIR", "engine_fingerprint", "install_numba_cache_key"]

#: The folder whose ``*.py`` files are the engine (this package).
SOURCE_DIR = Path(__file__).resolve().parent

#: Folders whose numba-cached functions get the fingerprint of their folder in their cache stamp.
_CACHE_ROOTS: set[Path] = set()


def engine_fingerprint(source_dir: str | os.PathLike | None = None) -> str:
    """Hex sha256 of the distance engine's source and of the numpy and numba versions.

    Parameters
    ----------
    source_dir : path, optional
        The folder of the engine's ``*.py`` files (default :data:`SOURCE_DIR`, ``tmdlib/distance``).

    Returns
    -------
    str
        64 hex digits over ``numpy <version>``, ``numba <version>`` and, for every ``*.py`` file of
        the folder in name order, its name, length and bytes.  Equal for two checkouts with the same
        engine files and library versions, wherever they live; different after any edit.

    Notes
    -----
    Files are re-read only when their size or modification time changes (checked on every call,
    one ``stat`` per file), so calling it once per cache key is cheap.
    """
    folder = Path(source_dir).resolve() if source_dir is not None else SOURCE_DIR
    files = sorted(folder.glob("*.py"))
    stamp = tuple((f.name, st.st_size, st.st_mtime_ns) for f in files for st in [f.stat()])
    import numba
    import numpy

    return _fingerprint(str(folder), stamp, f"numpy {numpy.__version__}\nnumba {numba.__version__}\n")


@functools.lru_cache(maxsize=16)
def _fingerprint(folder: str, stamp: tuple, versions: str) -> str:
    h = hashlib.sha256(versions.encode())
    for name, _size, _mtime in stamp:
        data = (Path(folder) / name).read_bytes()
        h.update(f"{name} {len(data)}\n".encode())
        h.update(data)
    return h.hexdigest()


def install_numba_cache_key(root: str | os.PathLike | None = None) -> None:
    """Make numba's on-disk cache of every compiled function under ``root`` follow its folder's code.

    A cached function's source stamp (which numba compares with the stamp stored in the cache index, and
    recompiles on a mismatch) becomes ``(numba's stamp of its file, engine_fingerprint(its folder))``, so
    an edit of any ``*.py`` file beside it -- where the functions it calls live -- invalidates it too.

    Parameters
    ----------
    root : path, optional
        Default: the ``tmdlib`` package.  Idempotent; must run before the functions are defined (numba
        reads the stamp when ``njit(cache=True)`` decorates).
    """
    import warnings

    _CACHE_ROOTS.add(Path(root).resolve() if root is not None else SOURCE_DIR.parent)
    try:
        from numba.core import caching

        impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")
        if any(getattr(c, "_tmdlib_stamp", False) for c in impl._locator_classes):
            return
        bases = [caching.UserProvidedCacheLocator, caching.InTreeCacheLocator, caching.UserWideCacheLocator]
    except (ImportError, AttributeError):  # pragma: no cover - only with a numba whose internals moved
        warnings.warn("numba's cache internals changed: cached kernels may outlive an edit of a file they call "
                      "into; clear NUMBA_CACHE_DIR after changing tmdlib/distance", RuntimeWarning, stacklevel=2)
        return
    impl._locator_classes[:0] = [_fingerprinted(base) for base in bases]


def _under_roots(py_file: str) -> bool:
    try:
        path = Path(py_file).resolve()
    except OSError:
        return False
    return any(root == path.parent or root in path.parents for root in _CACHE_ROOTS)


def _fingerprinted(base: type) -> type:
    """``base`` (a numba cache locator) for files under the roots, with the folder's fingerprint in the stamp."""

    class Locator(base):
        _tmdlib_stamp = True

        @classmethod
        def from_function(cls, py_func, py_file):
            if not _under_roots(py_file):
                return None
            return super().from_function(py_func, py_file)

        def get_source_stamp(self):
            return super().get_source_stamp(), engine_fingerprint(Path(self._py_file).parent)

    Locator.__name__ = Locator.__qualname__ = f"Fingerprinted{base.__name__}"
    return Locator
