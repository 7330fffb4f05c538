"""Built-in dataset metadata and dataset-name checks.

Nothing here knows absolute paths: each entry names its raw folder relative to
a caller-supplied raw root (e.g. ``"ogbg-molbace"`` lives in
``<raw_root>/ogbg_molbace``).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import pyarrow as pa

from ..errors import InputError

__all__ = ["DatasetInfo", "DATASETS", "check_dataset_name", "get_dataset_info", "dataset_names",
           "load_builtin"]

_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_MAX_NAME = 128

_TU = ("Christopher Morris, Nils M. Kriege, Franka Bause, Kristian Kersting, Petra Mutzel, Marion Neumann. "
       "TUDataset: A collection of benchmark datasets for learning with graphs. "
       "ICML 2020 Workshop on Graph Representation Learning and Beyond (GRL+ 2020). arXiv:2007.08663.")
_OGB = ("Weihua Hu, Matthias Fey, Marinka Zitnik, Yuxiao Dong, Hongyu Ren, Bowen Liu, Michele Catasta, "
        "Jure Leskovec. Open Graph Benchmark: Datasets for Machine Learning on Graphs. NeurIPS 2020. "
        "arXiv:2005.00687. Molecules and labels from MoleculeNet: Zhenqin Wu et al., MoleculeNet: a benchmark "
        "for molecular machine learning. Chemical Science 9(2):513-530, 2018.")
_DOBSON = ("P. D. Dobson and A. J. Doig. Distinguishing enzyme structures from non-enzymes without alignments. "
           "J. Mol. Biol., 330(4):771-783, 2003.")

_MOSES = ("Daniil Polykovskiy et al. Molecular Sets (MOSES): A Benchmarking Platform for Molecular Generation "
          "Models. Frontiers in Pharmacology 11:565644, 2020. arXiv:1811.12823. Molecules from ZINC Clean Leads: "
          "T. Sterling, J. J. Irwin. ZINC 15 -- Ligand Discovery for Everyone. J. Chem. Inf. Model. 55(11), 2015.")
MOSES_MEAN_NODES, MOSES_MEAN_EDGES = 21.64, 23.21  # measured by `tmdsub ingest MOSES` (1,584,663 molecules)


@dataclass(frozen=True)
class DatasetInfo:
    """Metadata of one built-in dataset.

    Attributes
    ----------
    name : str
        Public name (``"MUTAG"``, ``"ogbg-molbace"``).
    kind : {"tu", "ogb", "smiles"}
        Raw layout, i.e. which reader applies.
    folder : str
        Raw folder relative to the raw root.
    num_graphs : int
        Expected number of graphs.
    mean_nodes, mean_edges : float
        Expected mean nodes and mean *undirected* edges per graph (2 decimals).
    citation : str
        What to cite.
    file : str, optional
        ``smiles`` kind: the CSV inside the folder.
    standin : str, optional
        Unlabelled pools: the flagged benchmark label stand-in
        (:data:`tmdlib.datasets.smiles.STANDIN_RULES`) filled in at ingest.
    """

    name: str
    kind: str
    folder: str
    num_graphs: int
    mean_nodes: float
    mean_edges: float
    citation: str
    file: str | None = None
    standin: str | None = None


def _tu(name, g, n, e, original):
    return DatasetInfo(name, "tu", name, g, n, e, f"{original} Collected in: {_TU}")


def _ogb(name, g, n, e):
    return DatasetInfo(name, "ogb", name.replace("-", "_"), g, n, e, _OGB)


DATASETS = MappingProxyType({d.name: d for d in [
    _tu("MUTAG", 188, 17.93, 19.79,
        "A. K. Debnath, R. L. Lopez de Compadre, G. Debnath, A. J. Shusterman, C. Hansch. Structure-activity "
        "relationship of mutagenic aromatic and heteroaromatic nitro compounds. Correlation with molecular orbital "
        "energies and hydrophobicity. J. Med. Chem. 34(2):786-797, 1991."),
    _tu("PROTEINS", 1113, 39.06, 72.82,
        "K. M. Borgwardt, C. S. Ong, S. Schoenauer, S. V. N. Vishwanathan, A. J. Smola, H.-P. Kriegel. Protein "
        "function prediction via graph kernels. Bioinformatics 21(Suppl 1):i47-i56, 2005. " + _DOBSON),
    _tu("COX2", 467, 41.22, 43.45,
        "J. J. Sutherland, L. A. O'Brien, D. F. Weaver. Spline-fitting with a genetic algorithm: a method for "
        "developing classification structure-activity relationships. J. Chem. Inf. Comput. Sci. 43:1906-1915, 2003."),
    _tu("NCI1", 4110, 29.87, 32.30,
        "N. Wale, G. Karypis. Comparison of descriptor spaces for chemical compound retrieval and classification. "
        "ICDM 2006, 678-689."),
    _tu("DD", 1178, 284.32, 715.66, _DOBSON),
    _ogb("ogbg-molbace", 1513, 34.09, 36.86),
    _ogb("ogbg-molbbbp", 2039, 24.06, 25.95),
    DatasetInfo("MOSES", "smiles", "MOSES", 1_584_663, MOSES_MEAN_NODES, MOSES_MEAN_EDGES, _MOSES,
                file="train.csv.gz", standin="logp"),
]})


def check_dataset_name(name: str) -> str:
    """Return ``name`` if it is a safe dataset/folder name, else raise.

    A safe name uses only ``[A-Za-z0-9_.-]``, does not start with a dot,
    contains no ``..`` and is at most 128 characters, so it can never
    escape the folder it is joined to (no ``/``, ``\\``, absolute paths or
    hidden files).

    Raises
    ------
    InputError
        Describing why the name is rejected.
    """
    if not isinstance(name, str) or not name:
        raise InputError(None, f"invalid dataset name {name!r}: must be a non-empty string")
    if not _NAME.fullmatch(name):
        raise InputError(None, f"invalid dataset name {name!r}: only letters, digits, '_', '.' and '-' are allowed "
                               "(no path separators)")
    if name.startswith("."):
        raise InputError(None, f"invalid dataset name {name!r}: must not start with '.'")
    if ".." in name:
        raise InputError(None, f"invalid dataset name {name!r}: must not contain '..'")
    if len(name) > _MAX_NAME:
        raise InputError(None, f"invalid dataset name {name[:20]!r}...: longer than {_MAX_NAME} characters")
    return name


def dataset_names() -> list[str]:
    """Names of the built-in datasets."""
    return list(DATASETS)


def metric_for(dataset: str) -> str:
    """Test metric of a dataset: ``"rocauc"`` for OGB datasets (name starts with ``ogbg``), else ``"accuracy"``.

    As in the paper's Section 5 (following DosCond): ROC-AUC on the OGB molecule sets, accuracy on TU.
    """
    return "rocauc" if dataset.lower().startswith("ogbg") else "accuracy"


def get_dataset_info(name: str) -> DatasetInfo:
    """Metadata of a built-in dataset.

    Raises
    ------
    InputError
        If the name is unsafe (:func:`check_dataset_name`) or unknown (the
        message lists the known names).
    """
    check_dataset_name(name)
    try:
        return DATASETS[name]
    except KeyError:
        raise InputError(None, f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}") from None


def load_builtin(name: str, raw_root: str | os.PathLike, **kwargs) -> pa.Table:
    """Read a built-in dataset from ``raw_root/<folder>`` with the matching reader.

    ``kwargs`` go to :func:`~tmdlib.datasets.tu.read_tu` (e.g.
    ``node_attributes=True``), :func:`~tmdlib.datasets.ogb.read_ogb` or
    :func:`~tmdlib.datasets.smiles.read_smiles_csv` (e.g. ``workers=2``, ``limit=50_000``).
    """
    info = get_dataset_info(name)
    folder = Path(raw_root) / info.folder
    if info.kind == "smiles":
        from .smiles import read_smiles_csv
        return read_smiles_csv(folder / info.file, smiles_column="smiles", standin=info.standin, **kwargs)
    if info.kind == "tu":
        from .tu import read_tu
        return read_tu(folder, name=info.folder, **kwargs)
    from .ogb import read_ogb
    return read_ogb(folder, name=info.name, **kwargs)
