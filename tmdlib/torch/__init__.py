"""The torch side of tmdlib (imported explicitly, like ``ot.gnn``; ``import tmdlib`` never imports torch).

* :mod:`~tmdlib.torch.gin` -- the GIN of the paper (Appendix B.2), τ-weighted training, its
  stability constant :math:`c` (:func:`~tmdlib.torch.gin.lipschitz_bound`).
* :mod:`~tmdlib.torch.certified` -- certified mode: Lipschitz-budgeted training with an exact :math:`c`.
* :mod:`~tmdlib.torch.pyg` -- conversion between :class:`tmdlib.Graph` and PyG ``Data``.
* :mod:`~tmdlib.torch.condense` -- the condensation baselines of the paper's Section 5 (DosCond, KiDD), with
  and without labels: synthetic training sets of k graphs.
"""
