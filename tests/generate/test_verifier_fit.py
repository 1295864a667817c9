"""`stsgen verifier fit`: the combined verifier's model fit on labeled generations (tasks/generate/verifier_fit.py)
is a file stage 1 loads, and the shipped model is what the command makes of the committed readings."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.conftest import PROJECT


def tiny_signals(path):
    """Four labeled generations per kind: the bad ones have a low judge P(pass), a low cosine and dropped facts."""
    rows = []
    for kind in ("positive", "intermediate", "negative"):
        for i, human in enumerate(("good", "good", "bad", "bad")):
            good = human == "good"
            judge = (0.9 if good else 0.2) - 0.05 * i
            rows.append({"kind": kind, "anchor": f"anchor {i}", "candidate": f"text {i}", "human": human,
                         "judge": judge, "a_in_b": judge, "cosine": 0.95 if good else 0.6 + 0.01 * i,
                         "dropped": 0 if good else 2, "added": i % 2, "length": 1.0 - 0.1 * i})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_fit_writes_a_model_stage_one_loads_and_it_separates_the_verdicts(tmp_path, capsys):
    from flows.cli import main
    from tasks.generate.combined_verifier import load_verifier_model, stage_signals

    out = tmp_path / "models" / "combined.json"
    assert main(["verifier", "fit", "--labels", str(tiny_signals(tmp_path / "s.csv")), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| positive | combined (2-fold CV) |" in printed and str(out) in printed
    model = load_verifier_model(out)
    assert set(model.kinds) == {"positive", "intermediate", "negative"}
    good = stage_signals("Paris is big.", "Paris is big.", judge_p_pass=0.9, cosine=0.95)
    bad = {**good, "judge": 0.2, "cosine": 0.6, "dropped": 2.0}
    for kind in model.kinds:
        assert model.p_bad(kind, bad) > 0.5 > model.p_bad(kind, good)


def test_the_shipped_model_is_the_fit_on_the_committed_readings():
    from tasks.generate.verifier_fit import fit_verifier, read_labeled_signals

    fitted = fit_verifier(read_labeled_signals(PROJECT / "data" / "annotations" / "verifier_signals.csv"))
    shipped = json.loads((PROJECT / "models" / "verifiers" / "combined.v1.json").read_text())
    assert fitted["features"] == shipped["features"] and fitted["kinds"].keys() == shipped["kinds"].keys()
    for kind, part in fitted["kinds"].items():
        for key in ("mean", "scale", "coef", "intercept"):
            np.testing.assert_allclose(part[key], shipped["kinds"][kind][key], atol=1e-9)  # BLAS differs by 1e-16
        assert (part["rows"], part["bad"]) == (shipped["kinds"][kind]["rows"], shipped["kinds"][kind]["bad"])


@pytest.mark.parametrize("drop, verdicts, message", [
    ("cosine", None, "lacks the column(s) cosine"),
    (None, ["good"] * 12, "need both verdicts"),
])
def test_a_table_the_fit_cannot_use_is_refused_with_the_reason(tmp_path, capsys, drop, verdicts, message):
    from flows.cli import main

    path = tiny_signals(tmp_path / "s.csv")
    table = pd.read_csv(path)
    if drop:
        table = table.drop(columns=[drop])
    if verdicts:
        table["human"] = verdicts
    table.to_csv(path, index=False)
    assert main(["verifier", "fit", "--labels", str(path), "--out", str(tmp_path / "m.json")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()
