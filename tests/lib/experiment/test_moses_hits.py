"""The MOSES hit run's protocol (tmdlib.experiment.hits.moses_hits) on 2,000 MOSES molecules: sparse features equal to
the product's ECFP4 counts, three rounds to the budget, the audit sample never picked, MolPAL's metrics as shares, and
the hunt finds more of the top than Random on an easy computed property."""
import gzip
import itertools

import numpy as np
import pytest

from helpers import ROOT
from tmdlib.experiment import hits as H

pytest.importorskip("rdkit")
SMILES = ROOT / "data" / "raw" / "MOSES" / "train.csv.gz"


@pytest.fixture(scope="module")
def moses():
    if not SMILES.is_file():
        pytest.skip("data/raw/MOSES/train.csv.gz not shipped here")
    with gzip.open(SMILES, "rt", encoding="utf-8") as fh:
        smiles = [s.strip() for s in itertools.islice(fh, 1, 2001)]
    X, values = H.moses_features(smiles + ["not a smiles"], ("logp",), chunk=700)
    return smiles, X, values["logp"]


def test_features_are_the_ecfp4_counts_and_a_bad_smiles_is_an_empty_row(moses):
    from tmdlib.chem import ecfp4_counts

    smiles, X, y = moses
    assert X.shape == (2001, 2048) and X.dtype == np.uint8
    assert np.array_equal(X[:50].toarray(), ecfp4_counts(smiles[:50], dtype=np.uint8))
    assert X[2000].nnz == 0 and np.isnan(y[2000]) and np.isfinite(y[:2000]).all()


def test_three_rounds_to_one_percent_never_touching_the_audit_sample(moses):
    _, X, y = moses
    X, y = X[:2000], y[:2000]
    audit = H.moses_audit(2000)
    assert audit.size == 200  # at least 200
    rounds = (0.05, 0.10, 0.15)  # larger than the real 1/3 %, 2/3 %, 1 %: 2,000 molecules hold 2 of the top 0.1 %
    got = {}
    for s in (H.RANDOM, H.MOSES_HUNT):
        picks = []
        rows = H.moses_hits(X, y, s, 0, rounds=rounds, picks_out=picks)
        got[s] = rows
        assert [r["round"] for r in rows] == [1, 2, 3] and [r["k"] for r in rows] == [90, 180, 270]
        assert all(r["n_pool"] == 1800 and r["n_audit"] == 200 for r in rows)
        assert all(np.intersect1d(p, audit).size == 0 for p in picks)
        assert set(picks[0]) <= set(picks[1]) <= set(picks[2])
        for r in rows:
            assert 0 <= r["top01"] <= 1 and 0 <= r["top1"] <= 1 and r["score1"] <= 1
            assert r["rmse_audit"] > 0 and r["rmse_rest"] > 0 and r["peak_mib"] > 0
    assert got[H.RANDOM][0]["top1"] == got[H.MOSES_HUNT][0]["top1"]  # the same uniform round one
    assert got[H.MOSES_HUNT][-1]["top1"] > got[H.RANDOM][-1]["top1"] + 0.3  # logP: near-linear in the counts
    text = "\n".join(H.moses_lines(got[H.RANDOM] + got[H.MOSES_HUNT]))
    assert "| `random>greedy/ridge` | ridge | 1 | 3 |" in text and "Goal (≥ 70 % of the top 0.1 %" in text
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert len({line.count("|") for line in table}) == 1  # header, rule and rows have as many cells


def test_a_bad_strategy_or_nan_labels_are_refused(moses):
    _, X, y = moses
    with pytest.raises(ValueError, match="NaN"):
        H.moses_hits(X, y)
    with pytest.raises(ValueError, match="uniform"):
        H.moses_hits(X[:2000], y[:2000], "fpk>greedy/ridge")
