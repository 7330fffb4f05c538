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

from .._errors import InputError

__all__ = ["DatasetInfo", "DATASETS", "check_dataset_name", "get_dataset_info", "dataset_names",
           "load_builtin", "metric_for", "ACE_SETS", "known_datasets_text"]

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
        Unlabelled pools: the flagged benchmark label stand-in (:data:`tmdlib.datasets._smiles.STANDIN_RULES`)
        filled in at ingest when asked for (``tmdsub ingest MOSES --standin logp``; benchmark mode only).  Without
        it the pool is stored unlabelled.
    task : {"binary", "multiclass", "multitask", "regression"}, default "binary"
        The task type its labels are ingested as (:mod:`tmdlib.datasets._task`), checked at ingest (an unlabelled
        pool: the stand-in's).
    label_columns : tuple of str
        ``smiles`` kind: the label column(s) of the CSV (none: unlabelled, or the stand-in).
    split_column : str, optional
        ``smiles`` kind: the CSV's column holding the authors' split (stored as ``split``).
    keep_columns : tuple of str
        ``smiles`` kind: further numeric columns kept in the store (MoleculeACE's ``cliff_mol``).
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
    task: str = "binary"
    label_columns: tuple = ()
    split_column: str | None = None
    keep_columns: tuple = ()


def _tu(name, g, n, e, original):
    return DatasetInfo(name, "tu", name, g, n, e, f"{original} Collected in: {_TU}")


def _ogb(name, g, n, e):
    return DatasetInfo(name, "ogb", name.replace("-", "_"), g, n, e, _OGB)


_ACE = ("Derek van Tilborg, Alisa Alenicheva, Francesca Grisoni. Exposing the Limitations of Molecular Machine "
        "Learning with Activity Cliffs. J. Chem. Inf. Model. 62(23):5938-5951, 2022. doi:10.1021/acs.jcim.2c01073. "
        "Bioactivities from ChEMBL.")
#: MoleculeACE's 30 ChEMBL sets: file stem -> (molecules, mean atoms, mean bonds), measured by `tmdsub ingest`.
ACE_SETS = {
    "CHEMBL1862_Ki": (794, 26.97, 29.97),
    "CHEMBL1871_Ki": (659, 33.02, 35.61),
    "CHEMBL2034_Ki": (750, 31.65, 35.30),
    "CHEMBL2047_EC50": (631, 33.21, 36.25),
    "CHEMBL204_Ki": (2_754, 35.41, 38.07),
    "CHEMBL2147_Ki": (1_456, 27.36, 30.53),
    "CHEMBL214_Ki": (3_317, 29.48, 32.68),
    "CHEMBL218_EC50": (1_031, 32.13, 35.32),
    "CHEMBL219_Ki": (1_865, 27.88, 30.72),
    "CHEMBL228_Ki": (1_704, 26.32, 29.04),
    "CHEMBL231_Ki": (973, 28.90, 31.83),
    "CHEMBL233_Ki": (3_142, 35.19, 39.33),
    "CHEMBL234_Ki": (3_657, 30.03, 33.19),
    "CHEMBL235_EC50": (2_349, 33.07, 35.75),
    "CHEMBL236_Ki": (2_598, 37.95, 42.25),
    "CHEMBL237_EC50": (955, 35.38, 39.78),
    "CHEMBL237_Ki": (2_603, 34.84, 39.20),
    "CHEMBL238_Ki": (1_052, 24.14, 26.45),
    "CHEMBL239_EC50": (1_721, 31.99, 34.38),
    "CHEMBL244_Ki": (3_097, 35.31, 38.51),
    "CHEMBL262_Ki": (856, 25.56, 28.31),
    "CHEMBL264_Ki": (2_862, 26.73, 29.43),
    "CHEMBL2835_Ki": (615, 37.00, 41.08),
    "CHEMBL287_Ki": (1_328, 24.43, 26.79),
    "CHEMBL2971_Ki": (976, 32.89, 36.51),
    "CHEMBL3979_EC50": (1_125, 33.26, 35.76),
    "CHEMBL4005_Ki": (960, 31.39, 35.01),
    "CHEMBL4203_Ki": (731, 24.39, 26.98),
    "CHEMBL4616_EC50": (682, 38.79, 41.75),
    "CHEMBL4792_Ki": (1_471, 31.05, 34.86),
}


def _ace(stem, g, n, e):
    """A MoleculeACE set: regression on ``y`` (log-transformed Ki / EC50), the authors' split, the cliff flag."""
    return DatasetInfo(f"ACE-{stem}", "smiles", "MoleculeACE", g, n, e, _ACE, file=f"{stem}.csv", task="regression",
                       label_columns=("y",), split_column="split", keep_columns=("cliff_mol",))


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
                file="train.csv.gz", standin="logp"),  # the stand-in is 0/1 (logP >= 2.75): binary
    *(_ace(stem, *stats) for stem, stats in ACE_SETS.items()),
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


def known_datasets_text() -> str:
    """The built-in names for a message: each, with the 30 MoleculeACE sets as one ``ACE-<set>`` item."""
    names = [n for n in DATASETS if not n.startswith("ACE-")]
    return ", ".join(names) + f", ACE-<set> ({len(ACE_SETS)} MoleculeACE sets, e.g. ACE-CHEMBL204_Ki)"


def metric_for(dataset: str) -> str:
    """Test metric of a dataset: ``"rmse"`` for a built-in regression set (MoleculeACE, as its authors report),
    ``"rocauc"`` for OGB datasets (name starts with ``ogbg``), else ``"accuracy"``.

    As in the paper's Section 5 (following DosCond): ROC-AUC on the OGB molecule sets, accuracy on TU.
    """
    from ..metrics import headline

    info = DATASETS.get(dataset)
    return headline(info.task if info is not None else "binary", dataset)


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
        raise InputError(None, f"unknown dataset {name!r}; known datasets: {known_datasets_text()}") from None


def load_builtin(name: str, raw_root: str | os.PathLike, **kwargs) -> pa.Table:
    """Read a built-in dataset from ``raw_root/<folder>`` with the matching reader.

    ``kwargs`` go to :func:`~tmdlib.datasets._tu.read_tu` (e.g.
    ``node_attributes=True``), :func:`~tmdlib.datasets._ogb.read_ogb` or
    :func:`~tmdlib.datasets._smiles.read_smiles_csv` (e.g. ``workers=2``, ``limit=50_000``, ``standin="logp"``:
    an unlabelled pool's flagged benchmark stand-in, none by default); ``task`` defaults to the dataset's own
    (:attr:`DatasetInfo.task`), a forced one must fit its labels.
    """
    from dataclasses import replace

    from ._task import table_task, with_task

    info = get_dataset_info(name)
    folder = Path(raw_root) / info.folder
    standin = kwargs.pop("standin", None)
    # an unlabelled pool without its stand-in has no task of its own (its registered task is the stand-in's)
    own = kwargs.get("task") in (None, "", "auto") and (info.standin is None or standin is not None)
    if own:
        kwargs["task"] = info.task
    if info.kind == "smiles":
        from ._smiles import read_smiles_csv
        table = read_smiles_csv(folder / info.file, smiles_column="smiles", label_column=info.label_columns or None,
                                split_column=info.split_column, keep_columns=info.keep_columns,
                                standin=standin, **kwargs)
    elif info.kind == "tu":
        from ._tu import read_tu
        table = read_tu(folder, name=info.folder, **kwargs)
    else:
        from ._ogb import read_ogb
        table = read_ogb(folder, name=info.name, **kwargs)
    return with_task(table, replace(table_task(table), source="builtin")) if own else table
