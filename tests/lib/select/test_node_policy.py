"""nodes.method resolved (tmdlib.select.nodes._policy): off on a production molecule pool by default (issue 61 item 4,
issue 63), the paper's tmd elsewhere, an explicit choice kept."""
from __future__ import annotations

import pytest

from tmdlib.select.nodes import METHODS, node_method, off_line


@pytest.mark.parametrize("production,molecules,want", [
    (True, True, "off"),      # a molecule pool without labels: production
    (False, True, "tmd"),     # benchmark mode (labels present): MUTAG-like molecules, OGB, MoleculeACE
    (True, False, "tmd"),     # a graph pool without SMILES
    (False, False, "tmd"),    # the TU sets
])
def test_auto_is_off_only_on_a_production_molecule_pool(production, molecules, want):
    method, reason = node_method("auto", production, molecules)
    assert method == want
    assert (reason == "production molecule pool; nodes.method: auto") if want == "off" else reason is None


@pytest.mark.parametrize("production,molecules", [(True, True), (False, False)])
def test_an_explicit_choice_is_kept(production, molecules):
    assert node_method("off", production, molecules) == ("off", "nodes.method: off")
    for m in METHODS:
        assert node_method(m, production, molecules) == (m, None)


def test_the_line_every_report_gives():
    _, reason = node_method("auto", True, True)
    assert off_line(reason) == "node subsampling: off (production molecule pool; nodes.method: auto)"
