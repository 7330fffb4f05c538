r"""One graph-store file as one object: every read a stage makes of it, each reading only what it needs.

A :class:`GraphStore` stands for the Parquet file the ingest stage writes (the graph-store schema,
:mod:`tmdlib.datasets._schema`) and reads from it on demand: the graphs (read and checked once, on first use), the
task recorded at ingest, the graph ids, the SMILES, the labels, the split and the appended batches.  A column read
for one of them (``graph_id``, ``smiles``, ``y``, ``split``) reads that column only; the schema's metadata answers the
task and the batches without reading a row.  A pool too large to hold is reached a chunk at a time through
:meth:`GraphStore.stored` (:class:`tmdlib.datasets._stored.StoredGraphs`).

Its content hash (:func:`tmdlib.datasets._identity.store_content_hash`, the identity every artifact made from the store
records) is taken from the graphs in memory when they are loaded, else streamed a chunk at a time
(:func:`streamed_store_hash`); both give the same value.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ._errors import InputError
from ._graph import GraphDataset


def _schema(path: str):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_schema(path)
    except (OSError, pa.ArrowException) as err:
        raise InputError(path, f"not a readable graph store: {err}") from None


def _column(path: str, name: str):
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=[name]).column(name)


def read_task(path: str):
    """The task recorded at ingest (:class:`tmdlib.datasets._task.TaskSpec`), from the schema's metadata only
    (binary for stores written before task types)."""
    from .datasets._task import task_of_metadata

    meta = _schema(path).metadata or {}
    try:
        return task_of_metadata({k.decode(): v.decode() for k, v in meta.items() if k.startswith(b"tmdlib.")})
    except InputError as err:
        raise InputError(path, err.problem) from None


def read_graph_ids(path: str) -> np.ndarray:
    """The ``graph_id`` column of a Parquet file (a graph store, label requests), shape ``(n,)``; nothing else
    is read."""
    return _column(path, "graph_id").to_numpy()


def store_segments(path: str, n: int) -> list[int]:
    """Graph counts of the base and of each appended batch of a store of ``n`` graphs (``[n]`` without batches):
    the batches' counts are in the schema's metadata (:data:`tmdlib.datasets.append.META_BATCHES`)."""
    from .datasets.append import META_BATCHES

    meta = _schema(path).metadata or {}
    batches = [int(c) for _name, c in json.loads(meta.get(META_BATCHES.encode(), b"[]"))]
    return [n - sum(batches)] + batches


def store_smiles(path: str, positions: np.ndarray, method: str | None = None) -> list[str] | None:
    """SMILES of the graphs at ``positions`` (``(k,)`` rows of the store), or None when the store has no
    ``smiles`` column or selection ``method`` reads none (:func:`tmdlib.select.get_method`); only that column is
    read."""
    from .select import get_method

    if method is not None and "smiles" not in get_method(method).needs + get_method(method).uses:
        return None
    if "smiles" not in _schema(path).names:
        return None
    col = _column(path, "smiles").to_pylist()
    return [col[int(p)] or "" for p in positions]


def store_split(path: str, sizes: list[int], test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train / test positions: the store's own ``split`` column where it has one
    (:func:`tmdlib.select._split.split_with_column`), else the seeded split of each ingested batch of ``sizes``
    (:func:`tmdlib.select._split.batched_train_test_split`)."""
    from .select._split import batched_train_test_split, split_with_column

    if "split" not in _schema(path).names:
        return batched_train_test_split(sizes, test_fraction, seed)
    try:
        return split_with_column(_column(path, "split").to_pylist(), sizes, test_fraction, seed)
    except ValueError as err:
        raise InputError(path, f"column 'split': {err}") from None


def store_labelled(path: str) -> bool:
    """Whether the store holds any finite label (a benchmark set, or a pool ingested with its labels); an unlabelled
    pool is production's: its labels come from the lab, its test set is the audit sample."""
    from .datasets._task import table_labels

    if "y" not in _schema(path).names:
        return False
    import pyarrow.parquet as pq

    return bool(np.isfinite(table_labels(pq.read_table(path, columns=["y"]))).any())


def streamed_store_hash(path: str, progress=None) -> str:
    """:func:`tmdlib.datasets._identity.store_content_hash` of the store at ``path``, read a chunk of graphs at a time
    (:class:`tmdlib.datasets._stored.StoredGraphs`): the same hash, without the pool in memory (MOSES: 10 GB).
    ``progress`` is called with a line per chunk of graphs hashed."""
    from .select.scalable.cache import part_hashes
    from .datasets._identity import content_hash
    from .datasets._stored import StoredGraphs

    stored = StoredGraphs(path)
    return content_hash(stored.graph_ids, (h.decode() for h in part_hashes(stored, progress)))


class GraphStore:
    """One graph-store file, opened once per stage: every read of it goes through here (the module docstring).

    Parameters
    ----------
    path : str
        The store's Parquet file; refused (:class:`tmdlib.InputError`) when it does not exist.
    missing : str
        What the refusal of a missing file says.
    """

    def __init__(self, path: str, missing: str = "graph store not found"):
        if not Path(path).exists():
            raise InputError(path, missing)
        self.path = str(path)
        self._dataset = self._task = self._smiles = self._ids = self._hash = self._y = None

    @property
    def dataset(self) -> GraphDataset:
        """All graphs (:class:`tmdlib.GraphDataset`), read and validated on first use."""
        if self._dataset is None:
            from .datasets import read_graph_parquet, to_dataset

            self._dataset = to_dataset(read_graph_parquet(self.path), checked=True)
        return self._dataset

    @property
    def task(self):
        """The task recorded at ingest (:func:`read_task`; None for an unlabelled pool whose task is decided by its
        first label import)."""
        if self._task is None:
            self._task = read_task(self.path)
        return self._task

    @property
    def graph_ids(self) -> np.ndarray:
        """The graph ids, shape ``(n,)`` (the ``graph_id`` column only, unless the graphs are loaded)."""
        if self._dataset is not None:
            return self._dataset.graph_ids
        if self._ids is None:
            self._ids = read_graph_ids(self.path)
        return self._ids

    @property
    def has_smiles(self) -> bool:
        """Whether the graphs are molecules with their SMILES (molecule models can train on them)."""
        return "smiles" in _schema(self.path).names

    def smiles(self, positions=None) -> list[str] | None:
        """SMILES of the graphs at ``positions`` (all when None), or None when the store has none."""
        if self._smiles is None:
            if not self.has_smiles:
                return None
            self._smiles = [s or "" for s in _column(self.path, "smiles").to_pylist()]
        return list(self._smiles) if positions is None else [self._smiles[int(p)] for p in positions]

    @property
    def labelled(self) -> bool:
        """:func:`store_labelled`."""
        return store_labelled(self.path)

    def smiles_for(self, positions, method: str | None = None) -> list[str] | None:
        """:func:`store_smiles` of ``positions`` for selection ``method``."""
        return store_smiles(self.path, positions, method)

    def stored(self):
        """The graphs as a :class:`tmdlib.datasets._stored.StoredGraphs` (ids and sizes read; graphs a chunk at a
        time, for pools too large to hold)."""
        from .datasets._stored import StoredGraphs

        return StoredGraphs(self.path)

    def split(self, sizes: list[int], test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """:func:`store_split`."""
        return store_split(self.path, sizes, test_fraction, seed)

    def segments(self, n: int) -> list[int]:
        """:func:`store_segments`."""
        return store_segments(self.path, n)

    def streamed_hash(self) -> str:
        """The content hash read a chunk at a time (:func:`streamed_store_hash`); a caller may remember it."""
        return streamed_store_hash(self.path)

    def content_hash(self) -> str:
        """:func:`tmdlib.datasets._identity.store_content_hash` of the graphs (computed once): from the graphs in
        memory when they are loaded, else :meth:`streamed_hash` (the same value; a pool of millions is never loaded
        for it)."""
        if self._hash is None:
            from .datasets._identity import store_content_hash

            self._hash = (store_content_hash(self._dataset) if self._dataset is not None else self.streamed_hash())
        return self._hash

    @property
    def y(self) -> np.ndarray | None:
        """The stored labels as the dataset's ``y`` (:func:`tmdlib.datasets._arrow.labels_of`): only the ``y`` column
        is read unless the graphs are loaded."""
        if self._dataset is not None:
            return self._dataset.y
        if self._y is None and "y" in _schema(self.path).names:
            import pyarrow.parquet as pq

            from .datasets._arrow import labels_of

            self._y = labels_of(pq.read_table(self.path, columns=["y"]))
        return self._y

    @property
    def num_features(self) -> int:
        """Node feature width (the schema's feature table; no graph read unless they are loaded)."""
        return self._dataset.num_features if self._dataset is not None else int(self.stored().num_features)
