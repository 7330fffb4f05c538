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


def test_a_multi_target_pool_reports_the_target_select_target_names(tmp_path):
    """select.target on a multi-target pool: the hit report ranks that target (its predictions and intervals, the
    molecules measured for it), says which, and the summary lines follow it; without a name, the first target."""
    import pyarrow as pa

    from tasks.audit import _hits, hit_summary, prediction_report
    from tasks.predict import write_predictions
    from tmdlib.datasets import TaskSpec
    from tmdlib.reporting.audit import _hits_section

    gid = np.arange(8)
    a, b = np.arange(8, dtype=float), 10.0 - np.arange(8, dtype=float)  # a rises with the id, b falls
    table = pa.table({"graph_id": pa.array(gid, pa.int64()), "prediction_a": a, "lower_a": a - 1, "upper_a": a + 1,
                      "prediction_b": b, "lower_b": b - 1, "upper_b": b + 1, "labelled": [False] * 8})
    task = {"type": "regression", "targets": ["a", "b"]}
    write_predictions.fn(str(tmp_path / "pred"), table, {"task": task, "domain": {"computed": False}})
    pred = str(tmp_path / "pred" / "predictions.parquet")
    labels = tmp_path / "labels.csv"
    labels.write_text("graph_id,a,b\n0,0.5,20\n1,1.5,\n7,7.5,3\n")  # graph 1 not measured for b
    (tmp_path / "sel.json").write_text('{"medoids": [0, 1], "tau": [1.0, 1.0], "train_ids": [0, 1, 2, 3, 4, 5, 6, 7], '
                                       '"test_ids": [], "audit_ids": [7]}')
    spec = TaskSpec.from_dict(task)
    hb = _hits(pred, str(labels), spec, "maximize", "b", n=3)
    assert hb["target"] == "b" and [r[0] for r in hb["measured"]] == [0, 7] and hb["n_measured"] == 2
    assert [r[0] for r in hb["predicted"]] == [1, 2, 3] and hb["predicted"][0][2:] == [9.0, 8.0, 10.0]
    assert _hits_section(hb)["title"] == "Hits (select.goal: maximize, select.target: b)"
    ha = _hits(pred, str(labels), spec, "maximize", {"a": 1, "b": -1}, n=2)  # a desirability: the first target
    assert ha["target"] == "a" and [r[0] for r in ha["measured"]] == [7, 1]
    assert [r[0] for r in ha["predicted"]] == [6, 5]
    lines = hit_summary(pred, str(labels), "minimize", n=2, hunt="b")
    assert lines[0] == "Hits (select.goal: minimize, select.target: b): the lowest measured so far, 2 of 2:"
    assert lines[1] == "   1. graph 7: 3" and lines[4] == "   1. graph 6: 4 [3, 5]"
    facts, _ = prediction_report.fn(pred, str(labels), str(tmp_path / "sel.json"), task, "maximize", "b")
    assert facts["hits"] == _hits(pred, str(labels), spec, "maximize", "b")
