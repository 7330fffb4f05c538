"""Native-state hazards that crash a test worker (``Fatal Python error: Segmentation fault`` in a thread
with no Python frame), kept from coming back.

The crash of ``test_fuzz.py::test_corpus_tu[exponent_id]`` (now tests/lib/datasets/test_fuzz.py): the TU
and OGB readers handed pyarrow's CSV reader a Python object (``io.BytesIO``).  pyarrow reads its input on
its I/O threads and releases it there -- on the error path after ``read_csv`` has already raised -- so a
native thread takes the GIL and allocates a Python thread state at that later moment.  The corpus tests
measure allocations with ``tracemalloc`` and stop it right after the reader raised; on CPython < 3.12.9
(gh-128679) ``tracemalloc.stop()`` races with such a thread, which then writes through the freed traceback buffer
(native stack: ``~PyReadableFile`` -> ``PyGILState_Ensure`` -> ``PyThreadState_New`` ->
``tracemalloc_raw_calloc`` -> ``traceback_new``).  The readers now give pyarrow an Arrow-owned copy
(:func:`tmdlib.datasets._tu.arrow_input`): no Python object ever reaches pyarrow's threads.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import DATA, ROOT

MALFORMED = DATA / "malformed"

# Reader calls of pyarrow (and of the stack above it) that take a source as first argument.
_READERS = {"read_csv", "open_csv", "read_json", "read_table", "ParquetFile", "read_metadata", "read_schema",
            "read_feather", "open_file", "open_stream", "dataset"}
# Sources that are Python objects: pyarrow's threads would read and release them holding the GIL.
_PYTHON_SOURCES = {"BytesIO", "StringIO", "py_buffer", "PythonFile", "open", "TextIOWrapper", "BufferedReader"}


def _python_object_sources(path: Path):
    """(line, reader, source) for each reader call whose source is built from a Python object."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if name not in _READERS:
            continue
        sources = list(node.args[:1]) + [k.value for k in node.keywords if k.arg in ("source", "input_file", "where")]
        for src in sources:
            if isinstance(src, ast.Call):
                inner = src.func.attr if isinstance(src.func, ast.Attribute) else getattr(src.func, "id", None)
                if inner in _PYTHON_SOURCES:
                    yield node.lineno, name, inner


def test_pyarrow_readers_get_no_python_file_objects():
    """No library, task or flow code passes pyarrow a Python file object or a buffer over Python bytes."""
    found = [f"{p.relative_to(ROOT)}:{line}: {reader}({src}(...))"
             for top in ("tmdlib", "tasks", "flows") for p in sorted((ROOT / top).rglob("*.py"))
             for line, reader, src in _python_object_sources(p)]
    assert not found, "pass pyarrow an Arrow-owned buffer (tmdlib.datasets._tu.arrow_input) or a path:\n" + \
        "\n".join(found)


def test_arrow_input_keeps_no_reference_to_the_bytes():
    """The reader handed to pyarrow owns a copy: releasing it never touches a Python object."""
    import pyarrow.csv as pacsv

    from tmdlib.datasets._tu import arrow_input

    data = b"a,b\n1,2\n3,4\n"
    before = sys.getrefcount(data)
    reader = arrow_input(data)
    assert sys.getrefcount(data) == before
    assert pacsv.read_csv(reader).to_pydict() == {"a": [1, 3], "b": [2, 4]}


_STRESS = textwrap.dedent("""
    import faulthandler, sys, time, tracemalloc
    from pathlib import Path
    faulthandler.enable()
    from tmdlib.datasets._ogb import read_csv_column
    from tmdlib.datasets._tu import read_numeric_text
    from tmdlib._errors import InputError

    malformed = Path(sys.argv[1])
    calls = [lambda: read_numeric_text(malformed / "tu" / "exponent_id" / "TINY_A.txt", 2, "int"),
             lambda: read_csv_column(malformed / "labels" / "ragged.csv", "graph_id")]
    for k in range(int(sys.argv[2])):
        tracemalloc.start()        # as test_fuzz.py measures a reader's allocations
        try:
            calls[k % 2]()
        except InputError:
            until = time.perf_counter() + 0.0003
            while time.perf_counter() < until:   # the caller's error handling, holding the GIL
                pass
        tracemalloc.stop()
        time.sleep(0.0005)         # the test runner goes on and lets other threads run
    print("ok")
""")


def test_readers_survive_tracemalloc_stop_after_an_error():
    """The crash's pattern, in a fresh interpreter: an erroring reader, then ``tracemalloc.stop()``, in a
    loop.  With ``io.BytesIO`` inputs this crashed within 2000 rounds every time (6 of 6, 1-3 s)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", _STRESS, str(MALFORMED), "2000"], env=env, capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 0 and res.stdout.strip() == "ok", (res.returncode, res.stderr[-3000:])


@pytest.mark.parametrize("case", ["exponent_id", "binary_garbage", "nul_bytes", "hex_id"])
def test_tu_reader_results_are_unchanged(case):
    """The Arrow-owned input gives the same results and errors as before (spot check of the corpus)."""
    from tmdlib.datasets import read_tu
    from tmdlib import InputError

    folder = MALFORMED / "tu" / case
    if case == "hex_id":
        assert read_tu(folder, name="TINY", node_attributes=True).num_rows > 0
        return
    with pytest.raises(InputError):
        read_tu(folder, name="TINY", node_attributes=True)
