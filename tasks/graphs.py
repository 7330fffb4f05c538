"""Reading the graph store, shared by every stage; the artifacts made from it checked against it
(:func:`tmdlib.datasets.identity.check_same_store`, :func:`check_matrix_meta`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from prefect import task

from tmdlib import GraphDataset, InputError
from tmdlib.datasets import to_dataset
from tmdlib.datasets.documents import read_id_pairs  # noqa: F401  (the TMD flow's)
from tmdlib.datasets.identity import STORE_HASH_KEY, check_same_store, store_content_hash  # noqa: F401  (the stages')


@task(name="load-graph-store", persist_result=False)
def load_graph_store(path: str) -> GraphDataset:
    """Read and validate ``data/graphs/<DATASET>.parquet`` into a :class:`GraphDataset`."""
    from tmdlib.datasets import read_graph_parquet

    if not Path(path).exists():
        raise InputError(path, "graph store not found (run `tmdsub ingest` first)")
    return to_dataset(read_graph_parquet(path), checked=True)


def open_graph_store(path: str):
    """``data/graphs/<DATASET>.parquet`` as a :class:`tmdlib.datasets.stored.StoredGraphs`: graph ids and sizes read,
    the graphs read (and checked) a chunk at a time when asked for."""
    from tmdlib.datasets.stored import StoredGraphs

    if not Path(path).exists():
        raise InputError(path, "graph store not found (run `tmdsub ingest` first)")
    return StoredGraphs(path)


def matrix_path(path: str | None) -> str | None:
    """``path``, or None when the TMD stage chose the scalable engine and wrote no matrix.

    That stage leaves ``meta.json`` with ``"matrix": false`` beside where the matrix would be; a path
    with neither file is returned as is (the loader then reports it missing).
    """
    import json
    from pathlib import Path

    if path is None or Path(path).exists():
        return path
    meta = Path(path).with_name("meta.json")
    try:
        if json.loads(meta.read_text(encoding="utf-8")).get("matrix") is False:
            return None
    except (OSError, ValueError, AttributeError):
        pass
    return path


def load_matrix(path: str, n: int) -> np.ndarray:
    """The TMD matrix (``.npy``, rows/cols in graph-store order, never pickled), checked to be ``(n, n)``."""
    try:
        mat = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(path, "TMD matrix not found (run `tmdsub tmd-matrix` first)") from None
    except (ValueError, OSError, EOFError) as err:
        raise InputError(path, f"not a readable .npy matrix: {err}") from None
    if mat.shape != (n, n):
        raise InputError(path, f"TMD matrix has shape {mat.shape}, the graph store has {n} graphs")
    if not np.all(np.isfinite(mat)):
        raise InputError(path, "TMD matrix has non-finite entries")
    return np.asarray(mat, dtype=np.float64)


def store_segments(path: str, n: int) -> list[int]:
    """Graph counts of the base and of each appended batch of a graph store (``[n]`` without batches)."""
    import json

    import pyarrow.parquet as pq

    from tmdlib.datasets.append import META_BATCHES

    meta = pq.read_schema(path).metadata or {}
    batches = [int(c) for _name, c in json.loads(meta.get(META_BATCHES.encode(), b"[]"))]
    return [n - sum(batches)] + batches


def store_smiles(path: str, positions: np.ndarray, method: str | None = None) -> list[str] | None:
    """SMILES of the graphs at ``positions`` of a store (its ``smiles`` column), or None when the store has none
    or ``method`` does not need them (:func:`tmdlib.select.get_method`); only that column is read."""
    import pyarrow.parquet as pq

    from tmdlib.select import get_method

    if method is not None and "smiles" not in get_method(method).needs + get_method(method).uses:
        return None
    if "smiles" not in pq.read_schema(path).names:
        return None
    col = pq.read_table(path, columns=["smiles"]).column("smiles").to_pylist()
    return [col[int(p)] or "" for p in positions]


def store_split(path: str, sizes: list[int], test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train / test positions: the store's own ``split`` column where it has one
    (:func:`tmdlib.select.split.split_with_column`), else the seeded split per ingested batch."""
    import pyarrow.parquet as pq

    from tmdlib.select.split import batched_train_test_split, split_with_column

    if "split" not in pq.read_schema(path).names:
        return batched_train_test_split(sizes, test_fraction, seed)
    try:
        return split_with_column(pq.read_table(path, columns=["split"]).column("split").to_pylist(), sizes,
                                 test_fraction, seed)
    except ValueError as err:
        raise InputError(path, f"column 'split': {err}") from None


def read_task(path: str):
    """The dataset's task (:class:`tmdlib.datasets.task.TaskSpec`) from the store's schema metadata only
    (binary for stores written before task types)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tmdlib.datasets.task import task_of_metadata

    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowException) as err:
        raise InputError(path, f"not a readable graph store: {err}") from None
    try:
        return task_of_metadata({k.decode(): v.decode() for k, v in meta.items() if k.startswith(b"tmdlib.")})
    except InputError as err:
        raise InputError(path, err.problem) from None


def read_graph_ids(path: str) -> np.ndarray:
    """The ``graph_id`` column of a Parquet file (graph store, label requests); nothing else is read."""
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=["graph_id"]).column("graph_id").to_numpy()


# --------------------------------------------------------------------------------- artifacts that belong together
def _hash_cache_file(path: str) -> Path | None:
    """Where the content hash of the store file at ``path`` is remembered: a file under ``$TMDSUB_HASH_CACHE``
    (default ``~/.cache/tmdsub/store-hashes``) named by the file's real path, size, modification time (ns), inode
    and device; a store rewritten (an atomic replace is a new inode) gets another name.  None when ``path`` cannot
    be stat'ed or ``TMDSUB_HASH_CACHE`` is ``off``."""
    import hashlib
    import os

    root = os.environ.get("TMDSUB_HASH_CACHE", "")
    if root == "off":
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = f"{os.path.realpath(path)}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|{st.st_dev}"
    base = Path(root) if root else Path.home() / ".cache" / "tmdsub" / "store-hashes"
    return base / (hashlib.sha256(key.encode()).hexdigest() + ".txt")


def streamed_content_hash(path: str, progress=None) -> str:
    """:func:`store_content_hash` of the store at ``path``, read a chunk of graphs at a time
    (:class:`tmdlib.datasets.stored.StoredGraphs`): the same hash, without the pool in memory (MOSES: 10 GB).

    Remembered per store file (:func:`_hash_cache_file`): the stages after ingest each check their inputs against
    the store, and a pass over 1.58 M molecules takes ~40 s; the file's identity, not its content, keys it."""
    from tmdlib.datasets.identity import content_hash
    from tmdlib.select.scalable.cache import part_hashes

    from . import io

    cached = _hash_cache_file(path)
    if cached is not None and cached.is_file():
        value = cached.read_text().strip()
        if len(value) == 64:
            return value
    stored = open_store(path).stored()
    value = content_hash(stored.graph_ids, (h.decode() for h in part_hashes(stored, progress)))
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            io.write_text(cached, value + "\n")
        except OSError:  # a read-only home: the hash is computed again next time
            pass
    return value


def check_matrix_meta(matrix: str, graphs: str, store_hash, depth: int, weights, trust: bool = False) -> dict | None:
    """Refuse a TMD matrix that is not the one its ``meta.json`` (beside it) describes, or that was made for another
    store, depth or weights (:func:`tmdlib.distance.blocks.check_matrix_meta`).

    A matrix without ``meta.json`` is refused unless ``trust`` (``--trust-matrix``: the user vouches for it; it is
    then used unchecked).  Returns the meta (None when trusted without one).
    """
    import json

    from tmdlib.distance.blocks import check_matrix_meta as check

    meta_path = Path(matrix).with_name("meta.json")
    if not meta_path.is_file():
        if trust:
            return None
        raise InputError(matrix, f"no {meta_path.name} beside this TMD matrix, so nothing says which graph store, "
                                 "depth and weights it was computed for; recompute it with `tmdsub tmd-matrix`, or "
                                 "pass --trust-matrix to use it unchecked")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InputError(meta_path, f"not a readable TMD meta file: {err}") from None
    return check(matrix, meta, meta_path, graphs, store_hash, depth, weights)


def store_labelled(path: str) -> bool:
    """Whether the store holds any label (a benchmark set, or a pool ingested with its labels); an unlabelled pool
    is production's: its labels come from the lab, its test set is the audit sample."""
    import pyarrow.parquet as pq

    from tmdlib.datasets.task import table_labels

    if "y" not in pq.read_schema(path).names:
        return False
    return bool(np.isfinite(table_labels(pq.read_table(path, columns=["y"]))).any())


# --------------------------------------------------------------------------------- the store as one object
class Store:
    """One graph store (``data/graphs/<DATASET>.parquet``), opened once per stage: every read of it goes through
    here — the graphs (read and checked once, on first use), its task, SMILES, ids, split and batches.

    Parameters
    ----------
    path : str
    """

    def __init__(self, path: str):
        if not Path(path).exists():
            raise InputError(path, "graph store not found (run `tmdsub ingest` first)")
        self.path = str(path)
        self._dataset = None
        self._task = None
        self._smiles = None

    @property
    def dataset(self) -> GraphDataset:
        """All graphs (:class:`tmdlib.GraphDataset`), read and validated on first use."""
        if self._dataset is None:
            self._dataset = load_graph_store.fn(self.path)
        return self._dataset

    @property
    def task(self):
        """The task recorded at ingest (:class:`tmdlib.datasets.task.TaskSpec`; None for an unlabelled pool whose
        task is decided by its first label import)."""
        if self._task is None:
            self._task = read_task(self.path)
        return self._task

    @property
    def graph_ids(self) -> np.ndarray:
        if self._dataset is not None:
            return self._dataset.graph_ids
        if getattr(self, "_ids", None) is None:
            self._ids = read_graph_ids(self.path)
        return self._ids

    @property
    def has_smiles(self) -> bool:
        """Whether the graphs are molecules with their SMILES (molecule models can train on them)."""
        import pyarrow.parquet as pq

        return "smiles" in pq.read_schema(self.path).names

    def smiles(self, positions=None) -> list[str] | None:
        """SMILES of the graphs at ``positions`` (all when None), or None when the store has none."""
        if self._smiles is None:
            import pyarrow.parquet as pq

            if "smiles" not in pq.read_schema(self.path).names:
                return None
            self._smiles = [s or "" for s in pq.read_table(self.path, columns=["smiles"]).column("smiles").to_pylist()]
        return list(self._smiles) if positions is None else [self._smiles[int(p)] for p in positions]

    @property
    def labelled(self) -> bool:
        """:func:`store_labelled`."""
        return store_labelled(self.path)

    def smiles_for(self, positions, method: str | None = None) -> list[str] | None:
        """:meth:`smiles` of ``positions`` when selection ``method`` reads SMILES (:func:`tmdlib.select.get_method`),
        else None; only the ``smiles`` column is read."""
        return store_smiles(self.path, positions, method)

    def stored(self):
        """The graphs as a :class:`tmdlib.datasets.stored.StoredGraphs` (ids and sizes read; graphs a chunk at a time,
        for pools too large to hold)."""
        return open_graph_store(self.path)

    def split(self, sizes: list[int], test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
        return store_split(self.path, sizes, test_fraction, seed)

    def segments(self, n: int) -> list[int]:
        return store_segments(self.path, n)

    def content_hash(self) -> str:
        """:func:`store_content_hash` of the graphs (computed once): from the graphs in memory when they are loaded,
        else read a chunk at a time (:func:`streamed_content_hash`, the same value; a pool of millions is never
        loaded for it)."""
        if getattr(self, "_hash", None) is None:
            self._hash = (store_content_hash(self._dataset) if self._dataset is not None
                          else streamed_content_hash(self.path))
        return self._hash

    @property
    def y(self) -> np.ndarray | None:
        """The stored labels as the dataset's ``y`` (:func:`tmdlib.datasets.arrow.labels_of`): only the ``y`` column
        is read unless the graphs are loaded."""
        if self._dataset is not None:
            return self._dataset.y
        if getattr(self, "_y", None) is None:
            import pyarrow.parquet as pq

            from tmdlib.datasets.arrow import labels_of

            names = pq.read_schema(self.path).names
            self._y = labels_of(pq.read_table(self.path, columns=["y"])) if "y" in names else None
        return self._y

    @property
    def num_features(self) -> int:
        """Node feature width (the schema's feature table; no graph read unless they are loaded)."""
        return self._dataset.num_features if self._dataset is not None else int(self.stored().num_features)


def open_store(path: str) -> Store:
    """The graph store at ``path`` as a :class:`Store` (nothing read yet but its existence)."""
    return Store(path)
