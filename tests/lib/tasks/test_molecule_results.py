"""The molecules benchmark's results file: a row is stored once, whether it is already there or appears twice in one
append (two GPU runs merged together), and a reopened file knows its finished rows."""
from __future__ import annotations

import pytest

from tasks.molecules import MoleculeResults


def _row(trial: int, rmse: float) -> dict:
    return {"dataset": "S", "model": "gin", "method": "tmd", "fraction": 0.1, "trial": trial, "weighted": True,
            "epochs": 100, "k": 5, "n_train": 50, "n_test": 10, "n_cliff": 2, "rmse": rmse, "rmse_cliff": rmse,
            "mae": rmse, "r2": 0.0, "spearman": 0.0, "epsilon": 1.0, "select_seconds": 0.1, "train_seconds": 1.0,
            "device": "cuda"}


def test_a_row_is_stored_once(tmp_path):
    store = MoleculeResults(str(tmp_path), "S")
    store.append([_row(0, 1.0), _row(1, 2.0), _row(0, 9.0)])  # trial 0 twice in one batch: the first is kept
    store.append([_row(1, 7.0), _row(2, 3.0)])  # trial 1 already stored
    again = MoleculeResults(str(tmp_path), "S")
    assert [(int(r["trial"]), float(r["rmse"])) for r in again.rows] == [(0, 1.0), (1, 2.0), (2, 3.0)]
    assert again.done(("S", "gin", "tmd", 0.1, 2, True, 100))


def test_cached_picks_of_more_trials_serve_fewer(tmp_path, monkeypatch):
    """Picks cached for 5 trials serve a run asking 1 (trial t's picks do not depend on the trial count): nothing is
    selected again and the cache is left as it was; a run asking more trials, or other budgets, selects again."""
    import json

    import tasks.molecules as tm

    paths = {"meta": str(tmp_path / "meta.json")}
    cache = tmp_path / "picks-tmd.json"
    doc = {"fractions": [0.1, 0.3], "trials": 5, "method": "tmd", "picks": []}
    cache.write_text(json.dumps(doc))
    assert tm.select_method.fn("S", "raw", paths, "tmd", [0.1, 0.3], 1) == 0
    assert json.loads(cache.read_text()) == doc

    class Reselects(Exception):
        pass

    def loading(*args):  # what a new selection reads first: stop there
        raise Reselects

    monkeypatch.setattr(tm, "_loaded", loading)
    for fractions, trials in (([0.1, 0.3], 6), ([0.1, 0.2], 1)):
        with pytest.raises(Reselects):
            tm.select_method.fn("S", "raw", paths, "tmd", fractions, trials)


def test_rows_gathered_as_cells_finish():
    """Each finished cell's rows go to the store with a progress line; a failed cell stops none of the others and
    is reported once every cell finished."""
    from tmdlib.experiment._results import gather_rows

    class Done:
        def __init__(self, rows=None, err=None):
            self.rows, self.err = rows, err

        def result(self):
            if self.err:
                raise self.err
            return self.rows

    class Store(list):
        def append(self, rows):
            self.extend(rows)

    store, lines = Store(), []
    assert gather_rows([Done([1, 2]), Done([3])], store, "S", 3, 0.0, lines.append) == 3
    assert store == [1, 2, 3] and lines[-1].startswith("S: 3/3 models")
    with pytest.raises(RuntimeError, match="S: 1 cells failed, first: boom"):
        gather_rows([Done(err=ValueError("boom")), Done([4])], store, "S", 1, 0.0)
    assert store[-1] == 4
