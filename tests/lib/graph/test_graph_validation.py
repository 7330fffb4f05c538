"""GraphDataset built from arrays checks what Graph checks, vectorised over all graphs.

The TMD follows out-neighbours and the GIN in-neighbours: only for symmetric, simple graphs are they the
same graph, so an unchecked asymmetric input would make the bound silently wrong.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import examples
from tmdlib import Graph, GraphDataset, GraphValidationError

TRI = ([0, 0, 1, 1, 2, 2], [1, 2, 0, 2, 0, 1])
EDGE = ([0, 1], [1, 0])


def _arrays(x, graphs):
    """Dataset arrays of ``graphs`` = list of (num_nodes, (src, dst)) in local ids."""
    x = np.asarray(x, dtype=float).reshape(-1, 1) if np.ndim(x) == 1 else np.asarray(x, dtype=float)
    npg = [n for n, _ in graphs]
    epg = [len(e[0]) for _, e in graphs]
    return dict(x=x, node_ptr=np.r_[0, np.cumsum(npg)], edge_ptr=np.r_[0, np.cumsum(epg)],
                src=np.concatenate([np.asarray(e[0], np.int64) for _, e in graphs]),
                dst=np.concatenate([np.asarray(e[1], np.int64) for _, e in graphs]),
                graph_ids=np.arange(len(graphs)))


BAD = {  # name -> (the second graph's features, its edges, what the error says)
    "asymmetric": ([1.0, 2.0], ([0], [1]), "graph 1: edge 0 (0, 1): asymmetric: (1, 0) is missing"),
    "directed cycle": ([1.0, 2.0, 3.0], ([0, 1, 2], [1, 2, 0]), "graph 1: edge 0 (0, 1): asymmetric"),
    "self-loop": ([1.0, 2.0], ([0, 1, 1], [1, 0, 1]), "graph 1: edge 2 (1, 1): self-loop"),
    "duplicate": ([1.0, 2.0], ([0, 1, 0], [1, 0, 1]), "graph 1: edge 2 (0, 1): duplicate edge"),
    "out of range": ([1.0, 2.0], ([0, 2], [2, 0]), "graph 1: edge 0 (0, 2): endpoint out of range [0, 2)"),
    "negative id": ([1.0, 2.0], ([-1, 0], [0, -1]), "graph 1: edge 0 (-1, 0): endpoint out of range"),
    "nan feature": ([1.0, np.nan], EDGE, "graph 1: node 1: feature 0 = nan is not finite"),
    "inf feature": ([-np.inf, 1.0], EDGE, "graph 1: node 0: feature 0 = -inf is not finite"),
    "extreme feature": ([1e200, 1.0], EDGE, "graph 1: node 0: feature 0 = 1e+200 exceeds the feature limit"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_dataset_from_arrays_refuses_what_graph_refuses(case):
    feats, edges, message = BAD[case]
    n = len(feats)
    with pytest.raises(GraphValidationError):
        Graph(np.asarray(feats)[:, None], np.array(edges))
    arrays = _arrays(np.r_[[0.0, 1.0, 2.0], feats], [(3, TRI), (n, edges)])
    with pytest.raises(GraphValidationError) as info:
        GraphDataset(**arrays)
    assert message in str(info.value)


def test_pointer_and_shape_errors():
    good = _arrays(np.arange(5.0), [(3, TRI), (2, EDGE)])
    GraphDataset(**good)
    for change, message in ((dict(node_ptr=np.array([0, 6, 5])), "node_ptr must rise from 0 to 5"),
                            (dict(node_ptr=np.array([0, 3, 4])), "node_ptr must rise from 0 to 5"),
                            (dict(edge_ptr=np.array([0, 6])), "edge_ptr must rise from 0 to 8"),
                            (dict(edge_ptr=np.array([0, 8, 8, 8])), "node_ptr has 2 graphs, edge_ptr 3"),
                            (dict(dst=good["dst"][:-1]), "src and dst must be 1-D of equal length"),
                            (dict(graph_ids=np.arange(3)), "graph_ids must have shape (2,)"),
                            (dict(y=np.zeros(3)), "y must have shape (2,)")):
        with pytest.raises(GraphValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
            GraphDataset(**{**good, **change})


def test_trusted_constructors_skip_the_check(monkeypatch, mutag):
    """take() (and the engine's concatenation, induced subgraphs) derive from a validated dataset."""
    import tmdlib._graph as graph_module
    from tmdlib.select.nodes import induced_subdataset

    calls = []
    real = graph_module.validate_graph_arrays
    monkeypatch.setattr(graph_module, "validate_graph_arrays", lambda *a: calls.append(1) or real(*a))
    part = mutag.take(np.arange(0, 188, 3))
    induced_subdataset(part, np.arange(part.num_nodes) % 2 == 0)
    assert calls == []
    GraphDataset(x=part.x, node_ptr=part.node_ptr, edge_ptr=part.edge_ptr, src=part.src, dst=part.dst,
                 graph_ids=part.graph_ids)
    assert calls == [1]
    with pytest.raises(GraphValidationError):  # the opt-out is explicit, the default checks
        GraphDataset(x=part.x, node_ptr=part.node_ptr, edge_ptr=part.edge_ptr, src=part.src, dst=part.dst[::-1],
                     graph_ids=part.graph_ids)


_graph = st.integers(1, 6).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(-1, n), st.integers(-1, n)), max_size=10),
    st.lists(st.sampled_from([0.0, 1.0, -2.5, np.nan, np.inf, 1e39, 3.4e38]), min_size=n, max_size=n)))


KINDS = (("is not finite", "exceeds the feature limit"), ("out of range",), ("self-loop",), ("duplicate",),
         ("asymmetric",))


@settings(max_examples=examples(60), deadline=None)
@given(graphs=st.lists(_graph, min_size=1, max_size=5), symmetrise=st.booleans())
def test_dataset_verdict_equals_per_graph_verdicts(graphs, symmetrise):
    """The vectorised check accepts exactly when every graph is a valid Graph, and its error is Graph's."""
    parts, verdicts = [], []
    for n, edges, feats in graphs:
        src = np.array([e[0] for e in edges], dtype=np.int64)
        dst = np.array([e[1] for e in edges], dtype=np.int64)
        if symmetrise:
            src, dst = np.r_[src, dst], np.r_[dst, src]
        parts.append((n, (src, dst), feats))
        try:
            Graph(np.array(feats)[:, None], np.stack([src, dst]))
            verdicts.append(None)
        except GraphValidationError as err:
            verdicts.append(str(err))
    arrays = _arrays(np.concatenate([p[2] for p in parts]), [(n, e) for n, e, _ in parts])
    bad = [k for k, v in enumerate(verdicts) if v is not None]
    try:
        ds = GraphDataset(**arrays)
    except GraphValidationError as err:
        text = str(err)
        assert bad, text
        # the dataset checks one rule at a time over all graphs, in Graph's order: it names the first graph
        # breaking the earliest rule any graph breaks, with the message Graph gives for it
        kind = {k: next(i for i, key in enumerate(KINDS) if any(w in verdicts[k] for w in key)) for k in bad}
        expect = min(bad, key=lambda k: (kind[k], k))
        where = f"graph {expect}: " if len(parts) > 1 else ""
        assert text == where + verdicts[expect], (text, verdicts)
        return
    assert not bad, verdicts
    assert len(ds) == len(parts)


def test_asymmetric_input_is_what_the_check_protects():
    """Why it matters: the TMD of a one-directional edge list differs from the graph it stands for."""
    from tmdlib import tmd

    sym = Graph(np.array([[1.0], [2.0], [3.0]]), np.array([[0, 1, 1, 2], [1, 0, 2, 1]]))
    one_way = Graph(np.array([[1.0], [2.0], [3.0]]), np.array([[0, 1], [1, 2]]), validate=False)
    assert tmd(sym, Graph.empty(1), 3) != tmd(one_way, Graph.empty(1), 3)
