"""benchmarks/data_value_plot.py's titles and lines, from small frames shaped like the harness's CSVs: a line holds
one budget and the title names it. test_data_value.py draws a harness run's CSV; test_smoke.py the committed
curves."""

from __future__ import annotations

import pandas as pd
import pytest

from benchmarks.data_value_columns import DEV, PAPER_BUDGET
from benchmarks.data_value_plot import budget_title, curves, how_drawn


def test_the_plots_title_names_each_datas_fixed_budget_and_a_searched_one_as_searched():
    rows = pd.DataFrame({"data": ["backbone", "triples", "triples", "recipe"], "steps": [0, 200, 200, 200],
                         "lr": [None, 3e-5, 3e-5, 1e-4], "budget": ["untrained", "fixed", "fixed", "fixed"]})
    assert budget_title(rows) == "triples: 200 steps, lr 3e-05\nrecipe: 200 steps, lr 0.0001"
    assert budget_title(rows.assign(budget=["untrained", "fixed", "fixed", "100@3e-05 → 200@3e-05"])) == (
        "each row's budget (steps, lr) chosen on STS-B dev")
    assert budget_title(rows[rows["data"] != "recipe"]) == "200 steps, lr 3e-05"
    older = pd.DataFrame({"data": ["simcse"], "steps": [100], "lr": [3e-5]})  # a CSV from before the budget column
    paper = pd.DataFrame({"data": ["simcse-paper"], "steps": [19], "lr": [3e-5], "budget": [PAPER_BUDGET]})
    assert budget_title(pd.concat([rows, older, paper])) == ("triples: 200 steps, lr 3e-05\nrecipe: 200 steps, "
                                                             "lr 0.0001\nsimcse: 100 steps, lr 3e-05\n"
                                                             "simcse-paper: 19 steps, lr 3e-05")
    mixed = pd.concat([older, older.assign(data="triples", steps=200)])  # CSVs without a budget column at all
    assert budget_title(mixed) == "simcse: 100 steps, lr 3e-05\ntriples: 200 steps, lr 3e-05"


def test_each_budget_of_one_data_is_a_line_of_its_own_and_one_budget_keeps_the_datas_name():
    searched = "100@3e-05 → 400@3e-05"
    rows = pd.DataFrame([  # data, anchors, steps, lr, budget (None: a CSV from before the column, so fixed), dev
        ("backbone", 0, 0, None, "untrained", 60.0),
        ("triples", 400, 100, 3e-5, None, 70.0), ("triples", 1200, 100, 3e-5, "fixed", 80.0),
        ("triples", 1200, 200, 3e-5, "fixed", 81.0), ("triples", 1200, 200, 3e-5, "fixed", 83.0),
        ("simcse", 400, 100, 3e-5, None, 71.0), ("simcse", 1200, 400, 3e-5, searched, 72.0),
        ("recipe", 400, 200, 1e-4, "fixed", 73.0), ("recipe", 400, 200, 3e-5, "fixed", 74.0),
        ("pairs", 400, 200, 1e-4, "100@1e-04 → 200@1e-04", 75.0), ("pairs", 1200, 400, 1e-4, searched, 76.0),
        ("simcse-paper", 1200, 19, 3e-5, PAPER_BUDGET, 77.0)],
        columns=["data", "anchors", "steps", "lr", "budget", DEV])
    lines = curves(rows, 60.0)
    assert set(lines) == {"triples, 100 steps", "triples, 200 steps", "simcse, 100 steps", "simcse, searched",
                          "recipe, 200 steps, lr 0.0001", "recipe, 200 steps, lr 3e-05", "pairs", "simcse-paper"}
    assert list(lines["triples, 100 steps"]["mean"]) == [60.0, 70.0, 80.0]  # the older CSV's row is a fixed one
    assert list(lines["triples, 200 steps"]["anchors"]) == [0, 1200]
    assert list(lines["triples, 200 steps"]["mean"]) == [60.0, 82.0]  # its two seeds, not the 100-step row's
    assert list(lines["simcse, searched"]["mean"]) == [60.0, 72.0]  # never averaged with a fixed budget
    assert list(lines["pairs"]["mean"]) == [60.0, 75.0, 76.0]  # searched at every size: one line, the search's
    assert list(lines["recipe, 200 steps, lr 3e-05"]["mean"]) == [60.0, 74.0]
    one_budget = rows[(rows["steps"] != 200) | (rows["data"] != "triples")]
    one_budget = one_budget[(one_budget["budget"] != searched) | (one_budget["data"] != "simcse")]
    assert set(curves(one_budget[one_budget["lr"] != 3e-5], 60.0)) == {"recipe", "pairs"}
    assert {"triples", "simcse"} <= set(curves(one_budget, 60.0))
    older = curves(rows.drop(columns="budget"), 60.0)  # no budget column at all: every row's budget was given
    assert {"simcse, 100 steps", "simcse, 400 steps", "pairs, 200 steps", "pairs, 400 steps"} <= set(older)


def test_a_line_names_its_seeds_once_labels_a_point_with_other_seeds_and_dashes_a_single_trained_point():
    rows = pd.DataFrame([("backbone", 0, None, 64.0)] + [("simcse", n, seed, 75.0) for n in (400, 1200)
                                                         for seed in (13, 14, 15)]
                        + [("simcse", 800, 13, 75.4), ("simcse-paper", 1200, 13, 74.0),
                           ("simcse-paper", 1200, 14, 74.2)], columns=["data", "anchors", "seed", DEV])
    rows = rows.assign(steps=rows["data"].map({"simcse": 100, "simcse-paper": 19}).fillna(0), lr=3e-5)
    lines = curves(rows, 64.0)
    note, style, labeled = how_drawn(lines["simcse"])
    assert (note, style, list(labeled["anchors"]), list(labeled["count"])) == ("n=3", "-", [800], [1])
    note, style, labeled = how_drawn(lines["simcse-paper"])  # 0 and 1,200 only: no curve was measured between
    assert (note, style, labeled.empty) == ("n=2", "--", True)
    unscored = curves(rows.assign(**{DEV: rows[DEV].where(rows["anchors"] != 800)}), 64.0)  # an older CSV's gap
    assert how_drawn(unscored["simcse"])[2].empty  # nothing to label where nothing was scored


def test_the_plot_draws_joined_csvs_with_each_lines_seeds_and_style(tmp_path, monkeypatch):
    """main wires read_joined and how_drawn: CSVs joined with `+` draw one line per data, its seeds in the legend,
    a line of one trained point dashed."""
    import matplotlib.axes

    from benchmarks import data_value_plot

    drawn = {}
    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", lambda self, x, y, **kw: drawn.update({kw["label"]: kw}))
    backbone = pd.DataFrame({"anchors": [0], "data": ["backbone"], "seed": [None], "steps": [0], "lr": [None],
                             DEV: [64.0], "backbone": ["decoder"]})
    for name, seeds in (("a", [13]), ("b", [14, 15])):
        rows = pd.DataFrame([(n, "simcse", seed, 100, 3e-5, 75.0, "decoder") for n in (400, 800) for seed in seeds]
                            + [(800, "simcse-paper", seed, 19, 3e-5, 74.0, "decoder") for seed in seeds],
                            columns=backbone.columns)
        pd.concat([backbone, rows]).to_csv(tmp_path / f"{name}.csv", index=False)
    monkeypatch.setattr("sys.argv", ["plot", "--out", str(tmp_path / "p.png"),
                                     f"{tmp_path / 'a.csv'}+{tmp_path / 'b.csv'}"])
    data_value_plot.main()
    assert {label: kw["linestyle"] for label, kw in drawn.items()} == {"simcse (n=3)": "-", "simcse-paper (n=3)": "--"}
    monkeypatch.setattr("sys.argv", ["plot", "--out", str(tmp_path / "p.png"),
                                     f"{tmp_path / 'b.csv'}+{tmp_path / 'b.csv'}"])
    with pytest.raises(SystemExit, match="a row and seed in two CSVs"):  # never averaged in as seeds of their own
        data_value_plot.main()


def test_up_to_twenty_lines_each_get_a_colour_of_their_own(tmp_path, monkeypatch):
    """The decoder's plot draws 14 lines: matplotlib's default cycle of 10 would give two lines one colour."""
    import matplotlib.axes

    from benchmarks import data_value_plot

    drawn = {}
    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", lambda self, x, y, **kw: drawn.update({kw["label"]: kw}))
    rows = pd.DataFrame([(0, "backbone", None, 0, None, 64.0, "decoder")]
                        + [(1200, f"kind{k}", 13, 100, 3e-5, 70.0 + k, "decoder") for k in range(17)],
                        columns=["anchors", "data", "seed", "steps", "lr", DEV, "backbone"])
    rows.to_csv(tmp_path / "many.csv", index=False)
    monkeypatch.setattr("sys.argv", ["plot", "--out", str(tmp_path / "p.png"), str(tmp_path / "many.csv")])
    data_value_plot.main()
    assert len(drawn) == 17
    assert len({kw["color"] for kw in drawn.values()}) == 17
