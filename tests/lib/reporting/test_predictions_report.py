"""The production audit report's predictions (tmdlib.reporting.predictions, issue 61): the audit sample's parity plot
with its intervals, the distribution of the pool's predictions, the in-domain share; the task that reads them from
predictions.parquet / .json and labels.csv; the page in a real headless Chromium.  The whole production walk through
the flows: pipeline/test_production_flows.py."""
from __future__ import annotations

import json
import struct

import numpy as np
import pyarrow as pa
import pytest

from helpers import HAVE_CHROMIUM, NO_CHROMIUM, open_in_chromium
from tmdlib.reporting import audit
from tmdlib.reporting import predictions as rp

PNG = b"\x89PNG\r\n\x1a\n"


def _size(png: bytes) -> tuple[int, int]:
    assert png.startswith(PNG)
    return struct.unpack(">II", png[16:24])


def test_audit_agreement_counts_the_measurements_inside_their_interval():
    a = rp.audit_agreement([5.0, 6.0, 7.0, np.nan], [5.5, 6.0, 8.0, 6.0], [5.0, 5.0, 7.5, 5.0], [6.0, 7.0, 8.5, 7.0])
    assert a["n"] == 3 and a["covered"] == 2 and a["coverage"] == pytest.approx(2 / 3)
    assert a["rmse"] == pytest.approx(np.sqrt((0.25 + 0 + 1) / 3)) and a["mae"] == pytest.approx(0.5)
    assert rp.audit_agreement([1.0], [1.0])["covered"] is None
    assert rp.audit_agreement([], [])["rmse"] is None
    with pytest.raises(ValueError, match="differ in length"):
        rp.audit_agreement([1.0], [1.0, 2.0])


def test_domain_share_and_confusion_counts():
    d = rp.domain_share({"computed": True, "rows_in_domain": 270, "rows_out_of_domain": 90, "threshold": 0.41,
                         "rule": "q", "similarity": "Tanimoto"})
    assert (d["in_domain"], d["out_of_domain"], d["share_in_domain"], d["threshold"]) == (270, 90, 0.75, 0.41)
    none = rp.domain_share({"computed": False, "why": "a pool without SMILES"})
    assert none["computed"] is False and none["share_in_domain"] is None and none["why"] == "a pool without SMILES"
    assert rp.domain_share(None)["why"]
    assert rp.confusion_counts([1, 0, 1, 1, None], [1.0, 0.0, 0.0, 1.0, 1.0]) == [("0", "0", 1), ("1", "0", 1),
                                                                                   ("1", "1", 2)]


def test_the_plots_are_pngs_of_their_data():
    rng = np.random.default_rng(0)
    y = rng.normal(6, 1, 40)
    p = y + rng.normal(0, 0.4, 40)
    par = rp.parity_png(y, p, p - 0.8, p + 0.8, rng.random(40) > 0.3, title="t", quantity="pIC50")
    assert _size(par) == (550, 500)
    assert par != rp.parity_png(y, p + 1.0, p + 0.2, p + 1.8, title="t", quantity="pIC50")  # other data, other image
    assert rp.parity_png(y, p, title="t") == rp.parity_png(y, p, title="t")  # the same bytes on every run
    hist = rp.distribution_png(rng.normal(6, 1, 500), rng.random(500) > 0.2, title="pool")
    assert _size(hist) == (700, 360)
    classes = rp.distribution_png(rng.integers(0, 2, 100).astype(float), discrete=True)
    assert classes.startswith(PNG) and classes != hist


def test_the_plots_draw_the_points_and_bars_given(monkeypatch):
    """The parity plot has one point per audit molecule at (measured, predicted) with its interval, and the line
    y = x; the histogram counts every pool prediction."""
    from matplotlib.axes import Axes

    calls = {}
    for name in ("errorbar", "plot", "hist"):
        real = getattr(Axes, name)

        def spy(self, *args, _real=real, _name=name, **kw):
            calls.setdefault(_name, []).append((args, kw))
            return _real(self, *args, **kw)
        monkeypatch.setattr(Axes, name, spy)
    y, p = np.array([5.0, 6.0, 7.0]), np.array([5.5, 6.5, 6.0])
    rp.parity_png(y, p, p - 1, p + [1, 2, 3], in_domain=[True, False, True])
    (a_in, k_in), (a_out, k_out) = calls["errorbar"]
    assert list(a_in[0]) == [5.0, 7.0] and list(a_in[1]) == [5.5, 6.0] and k_in["label"] == "in domain"
    assert k_in["yerr"].tolist() == [[1.0, 1.0], [1.0, 3.0]] and list(a_out[0]) == [6.0]
    (line, _), = calls["plot"]
    assert line[0] == line[1]  # y = x
    rp.distribution_png([1.0, 2.0, 2.5, np.nan], in_domain=[True, False, True, True])
    (h, _), = calls["hist"]
    assert [list(x) for x in h[0]] == [[1.0, 2.5], [2.0]]


def _facts(**predictions):
    pred = {"file": "data/predictions/POOL/predictions.parquet", "rows": 360, "model": "svm", "confidence": 0.9,
            "task": "regression", "quantity": "y",
            "domain": rp.domain_share({"computed": True, "rows_in_domain": 270, "rows_out_of_domain": 90,
                                       "threshold": 0.4125, "rule": "the 10 % quantile", "similarity": "Tanimoto"}),
            "audit": {"n": 50, "covered": 46, "coverage": 0.92, "rmse": 0.81, "mae": 0.62},
            "plots": [("parity.png", "Audit sample: parity"), ("predictions.png", "Pool predictions")], **predictions}
    return {"dataset": "POOL", "mode": "production", "task": {"type": "regression"},
            "pool_estimate": {"metric": "rmse", "value": 0.8, "ci_low": 0.6, "ci_high": 1.0, "n_audit": 50,
                              "confidence": 0.9, "method": "bootstrap"},
            "predictions": pred}


def test_the_production_report_shows_the_predictions_section_with_its_plots():
    png = rp.distribution_png([1.0, 2.0, 3.0])
    images = [("counts.png", "counts", png), ("parity.png", "Audit sample: parity", png),
              ("predictions.png", "Pool predictions", png)]
    f = _facts()
    titles = [s["title"] for s in audit.report_sections(f)]
    assert titles[:3] == ["Pool estimate (production: the audit sample)", "Predictions: the audit sample and the pool",
                          "Verdict"]
    rows = dict(audit.report_sections(f)[1]["rows"])
    assert rows["in the applicability domain"] == "270 of 360 (75.0 %)"
    assert rows["out of the applicability domain"] == "90 of 360 (25.0 %)"
    assert rows["domain threshold (similarity to the nearest trained molecule)"] == "0.4125"
    assert rows["audit sample: measurements inside their interval"].startswith("46 of 50 (92.0 %)")
    md = audit.render_markdown(f, images)
    assert "75.0 % of the pool (270 of 360 molecules) lies inside" in md
    section = md.split("## Predictions: the audit sample and the pool", 1)[1].split("\n## ", 1)[0]
    assert "![Audit sample: parity](parity.png)" in section and "![Pool predictions](predictions.png)" in section
    assert md.split("## Plots", 1)[1].count("![") == 1  # counts.png only: the others are not shown twice
    page = audit.render_html(f, images)
    sec = page.split("<h2>Predictions: the audit sample and the pool</h2>", 1)[1].split("</section>", 1)[0]
    assert sec.count('<img src="data:image/png;base64,') == 2 and 'title="parity.png"' in sec
    assert page.count("data:image/png;base64,") == 3
    # a pool without SMILES: no domain, said once; classification: the confusion counts instead of a parity plot
    g = _facts(domain=rp.domain_share({"computed": False, "why": "a pool without SMILES"}), audit={"n": 4},
               confusion=[("0", "0", 3), ("1", "0", 1)], parity_note="classification: no parity plot", plots=[])
    text = audit.render_markdown(g)
    assert "No applicability domain: a pool without SMILES." in text
    assert "| audit sample: measured 1, predicted 0 | 1 |" in text and "classification: no parity plot" in text


def _pool_files(tmp_path, task=None):
    """predictions.parquet / .json (as the predict stage writes them), labels.csv and selection.json of a pool."""
    from tasks.predict import write_predictions

    rng = np.random.default_rng(1)
    gid = np.arange(60)
    truth = rng.normal(6, 1, 60)
    pred = truth + rng.normal(0, 0.3, 60)
    flags = [bool(x) for x in rng.random(60) > 0.25]
    table = pa.table({"graph_id": pa.array(gid, pa.int64()), "prediction": pred, "lower": pred - 0.6,
                      "upper": pred + 0.6, "nn_similarity": rng.random(60), "in_domain": flags,
                      "labelled": [False] * 60})
    meta = {"model": "svm", "confidence": 0.9, "task": task or {"type": "regression", "targets": ["y"]},
            "domain": {"computed": True, "threshold": 0.3, "rule": "r", "similarity": "s",
                       "rows_in_domain": sum(flags), "rows_out_of_domain": 60 - sum(flags)}}
    write_predictions.fn(str(tmp_path / "pred"), table, meta)
    audit_ids = [3, 8, 13, 21, 34, 55]
    (tmp_path / "labels.csv").write_text("graph_id,y\n" + "".join(f"{g},{float(truth[g])!r}\n" for g in audit_ids[:-1]))
    (tmp_path / "sel.json").write_text(json.dumps({"medoids": [0, 1], "tau": [30.0, 30.0], "train_ids": list(range(60)),
                                                   "test_ids": [], "audit_ids": audit_ids}))
    return truth, pred, flags


def test_the_audit_task_reads_the_predictions_and_the_lab(tmp_path):
    from tasks.audit import prediction_report

    truth, pred, flags = _pool_files(tmp_path)
    facts, images = prediction_report.fn(str(tmp_path / "pred" / "predictions.parquet"), str(tmp_path / "labels.csv"),
                                         str(tmp_path / "sel.json"), {"type": "regression", "targets": ["y"]})
    answered = [3, 8, 13, 21, 34]  # the audit molecule without an answer (55) is left out
    assert facts["audit"] == rp.audit_agreement(truth[answered], pred[answered], pred[answered] - 0.6,
                                                pred[answered] + 0.6)
    assert facts["audit"]["n"] == 5 and facts["rows"] == 60 and facts["model"] == "svm"
    assert facts["domain"]["in_domain"] == sum(flags) and facts["domain"]["share_in_domain"] == sum(flags) / 60
    assert [name for name, _, _ in images] == ["parity.png", "predictions.png"]
    assert images[0][2] == rp.parity_png(truth[answered], pred[answered], pred[answered] - 0.6, pred[answered] + 0.6,
                                         [flags[g] for g in answered], title=images[0][1], quantity="y")
    assert images[1][2] == rp.distribution_png(pred, flags, title=images[1][1], quantity="y")
    assert facts["plots"] == [(n, c) for n, c, _ in images]


def test_the_property_names_the_axes_and_the_table(tmp_path):
    """Issue 70 item 4: predictions.json's property (labels.name) names the plots' axes and the report's row."""
    from tasks.audit import prediction_report
    from tasks.predict import read_prediction_set, write_predictions

    truth, pred, flags = _pool_files(tmp_path)
    import pyarrow.parquet as pq

    meta = read_prediction_set(str(tmp_path / "pred"))
    write_predictions.fn(str(tmp_path / "pred"), pq.read_table(tmp_path / "pred" / "predictions.parquet"),
                         {**meta, "property": "pIC50"})
    facts, images = prediction_report.fn(str(tmp_path / "pred" / "predictions.parquet"), str(tmp_path / "labels.csv"),
                                         str(tmp_path / "sel.json"), None)
    assert facts["quantity"] == "pIC50"
    assert images[1][2] == rp.distribution_png(pred, flags, title=images[1][1], quantity="pIC50")
    text = audit.render_markdown({**_facts(), "predictions": facts}, images)
    assert "| property predicted (labels.name) | pIC50 |" in text


def test_a_classification_pool_gets_counts_not_a_parity_plot(tmp_path):
    from tasks.audit import prediction_report

    _pool_files(tmp_path, task={"type": "binary", "targets": ["y"]})
    (tmp_path / "labels.csv").write_text("graph_id,y\n3,1\n8,0\n")
    import pyarrow.parquet as pq
    from tasks.predict import write_predictions

    t = pq.read_table(tmp_path / "pred" / "predictions.parquet")
    t = t.set_column(1, "prediction", pa.array([float(i % 2) for i in range(60)]))
    write_predictions.fn(str(tmp_path / "pred"), t, {"task": {"type": "binary"}, "domain": {"computed": False}})
    facts, images = prediction_report.fn(str(tmp_path / "pred" / "predictions.parquet"), str(tmp_path / "labels.csv"),
                                         str(tmp_path / "sel.json"), None)
    assert [n for n, _, _ in images] == ["predictions.png"] and "no parity plot" in facts["parity_note"]
    assert facts["confusion"] == [("0", "0", 1), ("1", "1", 1)]


@pytest.mark.skipif(not HAVE_CHROMIUM, reason=NO_CHROMIUM)
def test_the_production_report_renders_its_plots_in_headless_chromium(tmp_path):
    from tasks.audit import prediction_report

    _pool_files(tmp_path)
    pf, images = prediction_report.fn(str(tmp_path / "pred" / "predictions.parquet"), str(tmp_path / "labels.csv"),
                                      str(tmp_path / "sel.json"), None)
    page_file = tmp_path / "report.html"
    page_file.write_text(audit.render_html({**_facts(), "predictions": pf}, images), encoding="utf-8")
    text, shown, problems, requests = open_in_chromium(page_file, "title")
    share = pf["domain"]["share_in_domain"]
    assert f"{100 * share:.1f} % of the pool" in text and "inside their interval" in text
    assert [t for _, _, t in shown] == ["parity.png", "predictions.png"] and all(ok and w > 0 for ok, w, _ in shown)
    assert problems == [] and requests == [page_file.as_uri()], (problems, requests)
