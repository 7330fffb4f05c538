"""The hit report's lists (tmdlib.reporting.hits)."""
import numpy as np

from tmdlib.reporting.hits import hit_facts, hit_lines


def test_best_measured_and_best_predicted_unmeasured():
    gids = np.arange(10, 20)
    pred = np.arange(10, dtype=float)
    measured = {19: 5.0, 18: 9.5, 10: 1.0}
    h = hit_facts("maximize", measured, gids, pred, pred - 1, pred + 1, names=[f"C{i}" for i in range(10)], n=3)
    assert [r[0] for r in h["measured"]] == [18, 19, 10] and h["measured"][0][1] == "C8"
    assert [r[0] for r in h["predicted"]] == [17, 16, 15] and h["predicted"][0][3:] == [6.0, 8.0]
    assert h["n_unmeasured"] == 7
    lo = hit_facts("minimize", measured, gids, pred, n=2)
    assert [r[0] for r in lo["measured"]] == [10, 19] and [r[0] for r in lo["predicted"]] == [11, 12]
    text = "\n".join(hit_lines(h))
    assert "C8 (graph 18): 9.5" in text and "[6, 8]" in text and "highest" in text


def test_audit_report_section():
    from tmdlib.reporting.audit import _hits_section

    h = hit_facts("maximize", {3: 2.0}, np.arange(5), np.arange(5, dtype=float), names=list("abcde"), n=2)
    sec = _hits_section(h)
    labels = [r[0] for r in sec["rows"]]
    assert sec["title"] == "Hits (select.goal: maximize)"
    assert labels == ["measured #1: d (graph 3)", "predicted #1: e (graph 4)", "predicted #2: c (graph 2)"]
