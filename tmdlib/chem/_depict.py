r"""2D depictions of molecules (RDKit): coordinates and SVG pictures, the same bytes on every run.

Coordinates come from RDKit's own depiction code (``rdDepictor.Compute2DCoords`` with ``forceRDKit=True`` and
``canonOrient=True``, so a process that switched on CoordGen globally draws the same) and are deterministic:
the same SMILES gives the same coordinates, hence the same mol block (:mod:`tmdlib.chem._sdf`) and the same SVG.
Pictures are drawn by ``rdMolDraw2D.MolDraw2DSVG`` (no Cairo, no PIL).  RDKit is imported when a function is
called; its parse-error log is silenced (a SMILES it rejects gives ``None``).
"""
from __future__ import annotations

__all__ = ["mol_2d", "depict_svg", "DEPICTION_SIZE"]

#: Width and height (pixels) of one depiction.
DEPICTION_SIZE = (200, 150)


def mol_2d(smiles: str | None):
    """The RDKit molecule of ``smiles`` with 2D coordinates, or ``None``.

    Parameters
    ----------
    smiles : str or None

    Returns
    -------
    rdkit.Chem.Mol or None
        One conformer of 2D coordinates; ``None`` when RDKit cannot parse the SMILES, or it has no atoms
        (an empty string, ``None``).
    """
    from rdkit import Chem, rdBase
    from rdkit.Chem import rdDepictor

    if not isinstance(smiles, str) or not smiles.strip():
        return None
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(smiles)
    if mol is None or mol.GetNumAtoms() == 0:
        return None
    rdDepictor.Compute2DCoords(mol, canonOrient=True, forceRDKit=True)
    return mol


def depict_svg(smiles: str | None, size: tuple[int, int] = DEPICTION_SIZE) -> str | None:
    """An SVG picture (one standalone document) of a molecule, or ``None`` when RDKit cannot parse it.

    Parameters
    ----------
    smiles : str or None
    size : (int, int)
        Width and height in pixels.

    Returns
    -------
    str or None
        The SVG text, starting at ``<svg`` (no XML declaration; no legend: captions belong to the page that
        shows it); the same bytes for the same SMILES and size.
    """
    from rdkit.Chem.Draw import rdMolDraw2D

    mol = mol_2d(smiles)
    if mol is None:
        return None
    drawer = rdMolDraw2D.MolDraw2DSVG(int(size[0]), int(size[1]))
    drawer.drawOptions().clearBackground = True
    rdMolDraw2D.PrepareAndDrawMolecule(drawer, mol)
    drawer.FinishDrawing()
    svg = drawer.GetDrawingText()
    if svg.startswith("<?xml"):  # RDKit declares iso-8859-1; the text is ASCII: drop it (UTF-8 by default)
        svg = svg[svg.index("?>") + 2:].lstrip()
    return svg
