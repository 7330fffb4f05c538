"""The molecules benchmark's summary arithmetic (tmdlib.reporting.molecules) on hand-made rows: wins per cell, the
goal's shares against Random and MaxMin, the unweighted TMD variant reported apart, RMSE relative to Random."""
from __future__ import annotations

import math

from tmdlib.reporting.molecules import cell_means, entries, goal, summary_page


def _rows(table: dict, model: str = "rf") -> list[dict]:
    """``{(set, fraction): {(method, weighted): [rmse per trial]}}`` -> result rows."""
    out = []
    for (ds, f), by in table.items():
        for (method, weighted), vals in by.items():
            for trial, v in enumerate(vals):
                out.append({"dataset": ds, "model": model, "method": method, "weighted": weighted, "fraction": f,
                            "trial": trial, "rmse": v, "rmse_cliff": v + 0.1, "epsilon": 1.0,
                            "select_seconds": 0.5, "n_train": 100, "n_test": 25, "n_cliff": 5})
    return out


# A: tmd beats random and maxmin at 10 % and 20 %, loses to both at 30 %; its unweighted variant wins everywhere.
TABLE = {
    ("A", 0.1): {("tmd", True): [1.0, 1.2], ("tmd", False): [0.8, 0.8], ("random", False): [1.2, 1.2],
                 ("maxmin", False): [1.3, 1.3]},
    ("A", 0.2): {("tmd", True): [0.9, 0.9], ("tmd", False): [0.7, 0.7], ("random", False): [1.0, 1.0],
                 ("maxmin", False): [0.95, 0.95]},
    ("A", 0.3): {("tmd", True): [0.9, 0.9], ("tmd", False): [0.6, 0.6], ("random", False): [0.8, 0.8],
                 ("maxmin", False): [0.85, 0.85]},
}


def test_cell_means_and_entries_keep_the_unweighted_variant_apart():
    rows = _rows(TABLE)
    assert entries(rows, "rf") == ["tmd", "random", "maxmin", "tmd (unweighted)"]
    cm = cell_means(rows, "rf")
    mean, ci, n = cm[("A", 0.1)]["tmd"]
    assert math.isclose(mean, 1.1) and n == 2 and ci > 0
    assert cm[("A", 0.1)]["random"][0] == 1.2  # random has no tau: its rows are its main entry


def test_goal_counts_cells_against_random_and_maxmin():
    g = goal({"A": _rows(TABLE)})["rf"]
    assert g["sets"] == 1 and g["threshold"] == 0.5
    assert g["tmd"]["beats_random"] == [2, 3] and g["tmd"]["beats_maxmin"] == [2, 3]
    assert math.isclose(g["tmd"]["share_random"], 2 / 3)
    # wins among the label-free pickers (TMD entry swapped in): tmd wins 10 % and 20 %, random 30 %
    assert g["tmd"]["wins"] == {"tmd": 2, "random": 1, "maxmin": 0} and g["tmd"]["most_wins"]
    assert g["tmd (unweighted)"]["beats_random"] == [3, 3] and g["tmd (unweighted)"]["wins"]["tmd (unweighted)"] == 3


def test_summary_page_states_wins_ratios_and_the_goal():
    page = summary_page({"A": _rows(TABLE)}, {})
    assert "| tmd | 1 | 1 | 0 | 2 |" in page and "| random | 0 | 0 | 1 | 1 |" in page  # wins per budget, all
    # RMSE relative to Random: 1.1 / 1.2, 0.9 / 1.0, 0.9 / 0.8 (one set: no interval)
    assert "| tmd | 0.917 | 0.900 | 1.125 |" in page and "| tmd (unweighted) | 0.667 | 0.700 | 0.750 |" in page
    assert "**tmd** beats Random in 2 of 3 cells (67 %), MaxMin in 2 of 3 (67 %)" in page


def test_every_picker_unweighted_is_the_like_for_like_field():
    # every cell holds every picker (a cell missing some is left out: test_a_cell_missing_some_pickers_...)
    butina = {cell: {("butina", True): [1.5, 1.5], ("butina", False): [1.4, 1.4]} for cell in TABLE}
    rows = _rows({**{cell: {**by, **butina[cell]} for cell, by in TABLE.items()},
                  ("B", 0.1): {("tmd", True): [1.0], ("tmd", False): [0.9], ("random", False): [0.8],
                               ("maxmin", False): [1.1], ("butina", True): [0.7], ("butina", False): [0.6]}})
    from tmdlib.reporting.molecules import unweighted_field

    ents = entries(rows, "rf")
    assert unweighted_field(ents) == ["tmd (unweighted)", "random", "maxmin", "butina (unweighted)"]
    g = goal({"A": [r for r in rows if r["dataset"] == "A"], "B": [r for r in rows if r["dataset"] == "B"]})["rf"]
    # A: tmd (unweighted) wins 3 cells (butina worse there); B 10 %: butina (unweighted) 0.6 wins
    assert g["all_unweighted"]["wins"]["tmd (unweighted)"] == 3 and g["all_unweighted"]["wins"]["butina (unweighted)"] == 1
    assert g["all_unweighted"]["most_wins"]
    page = summary_page({"A": rows}, {})
    assert "every picker trained without τ" in page and "| butina (unweighted) | 1 | 0 | 0 | 1 |" in page


def test_no_like_for_like_field_when_a_picker_with_tau_has_no_unweighted_rows():
    """The GIN trains the other pickers only with their τ: no 'every picker unweighted' claim is made for it."""
    rows = _rows({("A", 0.1): {("tmd", True): [1.0], ("tmd", False): [0.9], ("random", False): [0.8],
                               ("butina", True): [0.7]}}, model="gin")
    from tmdlib.reporting.molecules import unweighted_field

    assert unweighted_field(entries(rows, "gin")) == ["tmd (unweighted)", "random"]
    g = goal({"A": rows})["gin"]
    assert "all_unweighted" not in g
    # unweighted TMD is never counted against τ-weighted rivals (the claim issue 53 found unsupported)
    assert g["tmd (unweighted)"]["wins"] is None and g["tmd (unweighted)"]["beats_random"] == [0, 1]
    page = summary_page({"A": rows}, {})
    assert "every picker trained without τ" not in page
    assert "which picker has the lowest RMSE among the unweighted ones is not measured" in page


def test_every_model_in_the_rows_gets_its_section_and_page():
    """The SVM's rows (issue 53) are summarised beside the forest's, the chemists' models first; a model without
    the old goal gets the comparison without a threshold."""
    from tmdlib.reporting.molecules import dataset_page

    rows = _rows(TABLE, model="svm") + _rows(TABLE)
    page = summary_page({"A": rows}, {})
    assert page.index("## SVM (Tanimoto kernel") < page.index("## random forest")
    assert "### TMD against Random and MaxMin (cells at 10–30 %)" in page and "### The goal (50 %" in page
    assert goal({"A": rows})["svm"]["threshold"] is None
    assert "## SVM (Tanimoto kernel on ECFP4 counts): test RMSE" in dataset_page("A", rows)


def test_a_cell_missing_some_pickers_is_left_out_of_the_summary():
    """A run stopped part-way through a set leaves a cell with only some pickers: that cell is not compared (TMD
    would otherwise 'beat' pickers that are not there), and the summary says how many cells it left out."""
    from tmdlib.reporting.molecules import complete_cells

    partial = {("B", 0.1): {("tmd", True): [0.1], ("tmd", False): [0.1]}}  # B at 10 %: Random and MaxMin not run
    rows = _rows(TABLE) + _rows(partial)
    kept = complete_cells(rows)
    assert {r["dataset"] for r in kept} == {"A"} and len(kept) == len(_rows(TABLE))
    g = goal({"A": _rows(TABLE), "B": _rows(partial)})
    assert g == goal({"A": _rows(TABLE)})
    page = summary_page({"A": _rows(TABLE), "B": _rows(partial)}, {})
    assert "1 cells that lack some of their model's pickers" in page and "(1 sets, 2 trials)" in page
