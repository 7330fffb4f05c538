r"""Label requests as an SD file (what chemists open in their tools), the same bytes on every run.

One record per requested molecule, in the order given (the label request table's: largest clusters first): a
V2000 mol block with 2D coordinates (:func:`tmdlib.chem._depict.mol_2d`; V3000 beyond 999 atoms, as RDKit
writes it) titled with the user's compound id when the pool has them (the name chemists' tools show), else the graph
id, then the SD properties ``graph_id``, ``compound_id`` (only when the pool has compound ids), ``source_id``,
``tau``, ``rank`` and ``smiles``.
The mol block's second header line (program and date) is always ``     RDKit          2D``, so
the text depends only on the inputs (a DVC hash does not change between runs).  A SMILES RDKit cannot parse
gives a record without atoms whose ``warning`` property says so (the request itself is kept).

Examples
--------
>>> from tmdlib.chem._sdf import requests_sdf
>>> text = requests_sdf(["c1ccccc1O", "CCO"], graph_ids=[7, 3], tau=[5, 2], rank=[1, 2])
>>> text.count("$$$$"), text.splitlines()[0], text.splitlines()[1]
(2, '7', '     RDKit          2D')
"""
from __future__ import annotations

from typing import Sequence

from ._depict import mol_2d

__all__ = ["requests_sdf", "requests_table_sdf", "SDF_PROPERTIES", "HEADER_LINE", "TITLE_MAX"]

#: The SD properties of every record, in the order written (``compound_id`` after ``graph_id`` when given).
SDF_PROPERTIES = ("graph_id", "source_id", "tau", "rank", "smiles")
#: Longest title line written (a V2000 header line holds 80 characters).
TITLE_MAX = 80
#: The fixed second line of every mol block (program name and dimension, no date).
HEADER_LINE = "     RDKit          2D"
_EMPTY = "\n".join(["", HEADER_LINE, "", "  0  0  0  0  0  0  0  0  0  0999 V2000", "M  END"]) + "\n"


def _value(v) -> str:
    """One SD property value on one line (line breaks would end the value)."""
    text = " ".join(str(v).split("\n")).replace("\r", " ")
    return text if text.strip() else "n/a"


def _int(v, what: str) -> int:
    if isinstance(v, bool) or int(v) != v:
        raise ValueError(f"{what} must hold integers, got {v!r}")
    return int(v)


def _molblock(smiles: str | None, title: str) -> tuple[str, bool]:
    """``(mol block ending with "M  END\\n", parsed)``: the molecule's, or one without atoms."""
    from rdkit import Chem

    mol = mol_2d(smiles)
    if mol is None:
        block = _EMPTY
    else:
        block = Chem.MolToMolBlock(mol)
    lines = block.split("\n")
    lines[0], lines[1] = title, HEADER_LINE  # title = graph id; no program / date stamp
    return "\n".join(lines), mol is not None


def requests_sdf(smiles: Sequence[str | None], graph_ids: Sequence[int], tau: Sequence[int], rank: Sequence[int],
                 source_ids: Sequence[str] | None = None, compound_ids: Sequence[str | None] | None = None) -> str:
    """SD file text of the molecules requested for labelling, one record each, in the order given.

    Parameters
    ----------
    smiles : sequence of str (or None), length k
        The molecules (as stored in the graph store).
    graph_ids : sequence of int, length k
        Their graph ids (the ``graph_id`` a label file gives back); each record's title.
    tau : sequence of int, length k
        Cluster sizes τ (graphs the molecule stands for).
    rank : sequence of int, length k
        Cluster rank (1 = largest cluster).
    source_ids : sequence of str, length k, optional
        Human-facing ids (default: the SMILES).
    compound_ids : sequence of str (or None), length k, optional
        The user's own compound ids (a registry number, :data:`tmdlib.datasets._smiles.ID_COLUMN` of the pool):
        written as the ``compound_id`` property of every record and as the record's title (line breaks made spaces,
        cut to :data:`TITLE_MAX` characters); a record whose id is None or blank keeps the graph id as its title.

    Returns
    -------
    str
        ``k`` records, each ending with ``$$$$``; ``""`` (a valid SD file without records) when ``k = 0``.
        Properties :data:`SDF_PROPERTIES` (with ``compound_id`` when ``compound_ids`` are given), plus ``warning`` on
        a record whose SMILES RDKit cannot parse.

    Raises
    ------
    ValueError
        Sequences of different lengths, or non-integer ids, τ or ranks.
    """
    smiles, graph_ids, tau, rank = list(smiles), list(graph_ids), list(tau), list(rank)
    source_ids = ["" if s is None else s for s in smiles] if source_ids is None else list(source_ids)
    cids = None if compound_ids is None else list(compound_ids)
    k = len(smiles)
    if not len(graph_ids) == len(tau) == len(rank) == len(source_ids) == k or (cids is not None and len(cids) != k):
        raise ValueError(f"smiles, graph_ids, tau, rank, source_ids and compound_ids differ in length: {len(smiles)}, "
                         f"{len(graph_ids)}, {len(tau)}, {len(rank)}, {len(source_ids)}"
                         + ("" if cids is None else f", {len(cids)}"))
    out = []
    for i, (smi, gid, t, r, src) in enumerate(zip(smiles, graph_ids, tau, rank, source_ids)):
        gid = _int(gid, "graph_ids")
        cid = None if cids is None or cids[i] is None or not str(cids[i]).strip() else _value(cids[i]).strip()
        block, parsed = _molblock(smi, str(gid) if cid is None else cid[:TITLE_MAX])
        props = {"graph_id": gid}
        if cids is not None:
            props["compound_id"] = "" if cid is None else cid
        props.update({"source_id": src, "tau": _int(t, "tau"), "rank": _int(r, "rank"),
                      "smiles": "" if smi is None else smi})
        if not parsed:
            props["warning"] = "RDKit cannot parse this SMILES (or it has no atoms): no structure"
        out.append(block + "".join(f"> <{name}>\n{_value(v)}\n\n" for name, v in props.items()) + "$$$$\n")
    return "".join(out)


def requests_table_sdf(smiles: Sequence[str | None], requests) -> str:
    """:func:`requests_sdf` of a label-request table (``graph_id``, ``tau``, ``rank``, ``source_id`` and, when the
    pool has them, the user's compound ids) and its molecules ``smiles`` (aligned with its rows)."""
    from ..datasets._smiles import ID_COLUMN

    col = lambda name: requests.column(name).to_pylist()  # noqa: E731
    ids = col(ID_COLUMN) if ID_COLUMN in requests.column_names else None  # the user's compound ids, if any
    return requests_sdf(smiles, col("graph_id"), col("tau"), col("rank"), col("source_id"), compound_ids=ids)
