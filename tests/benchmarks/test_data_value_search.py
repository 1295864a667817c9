"""benchmarks/data_value_search.py: the budget search stops where the mean STS-B dev over seeds stops improving, and
its replay over fixed-budget CSVs run apart takes the same path, names the budget it lacks, and refuses means that
would not compare."""

from __future__ import annotations

import pytest

from benchmarks.data_value_columns import FIXED_BUDGET
from benchmarks.data_value_report import read_joined
from benchmarks.data_value_search import (
    Candidate,
    SeedRun,
    main,
    measured_candidates,
    replay,
    search_budget,
    search_record,
)
from tests.benchmarks.test_data_value_report import table


def scripted(devs: dict, tried: list):
    def run_candidate(steps, lr):
        tried.append((steps, lr))
        return Candidate(steps, lr, 16, {13: SeedRun(object(), steps, devs[(steps, lr)], 1.0)})
    return run_candidate


def test_the_budget_search_stops_where_dev_stops_improving():
    devs = {(100, 3e-5): 80.0, (200, 3e-5): 82.0, (400, 3e-5): 81.0, (800, 3e-5): 99.0,
            (100, 1e-4): 83.0, (200, 1e-4): 83.0, (400, 1e-4): 99.0}
    tried = []
    chosen, candidates = search_budget(scripted(devs, tried), [100, 200, 400, 800], [1e-4, 3e-5])
    assert tried == [(100, 3e-5), (200, 3e-5), (400, 3e-5), (100, 1e-4), (200, 1e-4)]  # 800 and the 99s never run
    assert (chosen.steps, chosen.lr, chosen.dev) == (100, 1e-4, 83.0)
    assert chosen.runs[13].model is not None  # the chosen weights kept, every other candidate's dropped
    assert all(r.model is None for c in candidates if c is not chosen for r in c.runs.values())
    record = search_record(chosen, candidates, [100, 200, 400, 800])
    assert record.endswith("→ 100@0.0001") and "200@3e-05 dev 82.00" in record


def test_the_budget_search_says_when_it_stopped_at_the_ladders_top():
    chosen, candidates = search_budget(scripted({(1, 1e-4): 1.0, (2, 1e-4): 2.0}, []), [1, 2], [1e-4])
    assert chosen.steps == 2 and "at the ladder's top" in search_record(chosen, candidates, [1, 2])


def csv(path, kind, steps, lr, devs, seeds=(13, 14, 15), budget=FIXED_BUDGET):
    """A harness CSV of one budget (test_data_value_report's `table`, with the budget columns on its trained rows,
    each best at `steps`)."""
    frame = table(1200, kind, devs, 70.0, seeds)
    budget_columns = {"steps": steps, "lr": lr, "batch_size": 16, "best_step": steps, "train_s": 10.0, "budget": budget}
    frame.loc[frame["data"] != "backbone", list(budget_columns)] = list(budget_columns.values())
    frame.to_csv(path, index=False)
    return str(path)


def test_the_replay_takes_the_searchs_path_over_csvs_run_apart(tmp_path, capsys):
    budgets = {(100, 3e-5): [75.0, 76.0, 75.0], (200, 3e-5): [77.0, 76.0, 77.0], (400, 3e-5): [76.0, 77.0, 76.0],
               (800, 3e-5): [99.0, 99.0, 99.0], (100, 1e-4): [78.0, 78.0, 78.0], (200, 1e-4): [77.0, 77.0, 77.0]}
    specs = [csv(tmp_path / f"{n}_{lr}.csv", "simcse", n, lr, devs) for (n, lr), devs in budgets.items()]
    specs.append(csv(tmp_path / "triples.csv", "triples", 100, 3e-5, [90.0] * 3))  # another data kind: not a rung
    main(["+".join(specs), "--data", "simcse"])
    out = capsys.readouterr().out
    assert "800@3e-05" not in out  # 400 did not improve on 200: lr 3e-5 ends there, its 99s never read
    assert [line.split(":")[0].strip() for line in out.splitlines()[1:-1]] == [
        "100@3e-05", "200@3e-05", "400@3e-05", "100@0.0001", "200@0.0001"]
    assert "200@3e-05: dev 76.67, best steps 200, 200, 200 (the last in 3 of 3 seeds)" in out
    assert out.splitlines()[-1].endswith("→ 100@0.0001")


def test_the_replay_names_the_budget_it_lacks_and_keeps_the_best_so_far(tmp_path, capsys):
    specs = [csv(tmp_path / "100.csv", "simcse", 100, 3e-5, [75.0, 76.0, 75.0]),
             csv(tmp_path / "200.csv", "simcse", 200, 3e-5, [77.0, 76.0, 77.0])]
    main(["+".join(specs), "--data", "simcse"])
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("incomplete: the search trains 400@3e-05 next") and "--steps 400 --lr 3e-05" in last
    assert last.endswith("best so far 200@3e-05, dev 76.67")


def test_the_replay_refuses_what_its_means_cannot_compare(tmp_path):
    def joined(*specs):
        return read_joined("+".join(specs))
    a = csv(tmp_path / "a.csv", "simcse", 100, 3e-5, [75.0, 76.0, 75.0])
    fewer = csv(tmp_path / "b.csv", "simcse", 200, 3e-5, [77.0, 76.0], seeds=(13, 14))
    with pytest.raises(SystemExit, match="different seeds"):
        measured_candidates(joined(a, fewer), "simcse")
    searched = csv(tmp_path / "c.csv", "simcse", 200, 3e-5, [99.0] * 3, budget="searched on STS-B dev: …")
    assert list(measured_candidates(joined(a, searched), "simcse")) == [(100, 3e-5)]  # a searched row is no rung
    with pytest.raises(SystemExit, match="no fixed-budget 'triples' row"):
        measured_candidates(joined(a), "triples")
    with pytest.raises(SystemExit, match="starts at 100@0.0001"):
        replay(measured_candidates(joined(a), "simcse"), [100, 200], [1e-4])


def test_a_tie_keeps_the_earlier_budget_and_ends_that_lr_as_the_search_does():
    candidates = {(n, 3e-5): Candidate(n, 3e-5, 16, {13: SeedRun(None, n, 77.0, 1.0)}) for n in (100, 200, 400)}
    tried, chosen, missing = replay(candidates, [100, 200, 400], [3e-5])
    assert [c.steps for c in tried] == [100, 200] and chosen.steps == 100 and missing is None
