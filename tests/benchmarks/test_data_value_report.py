"""benchmarks/data_value_report.py's `compare`, the results page's paired A − B: by seed, refusing what it cannot
pair, naming a seed it leaves out."""

from __future__ import annotations

import pandas as pd
import pytest

from benchmarks.data_value_columns import DEV, MEAN, SICK, TEST
from benchmarks.data_value_report import DEV_MINUS_SICK, at_size, compare, gap, main, paired, read_joined


def table(size, data, dev, sick, seeds=(13, 14, 15), backbone=(86.0, 79.0)):
    """A harness CSV's frame: the untrained `backbone` row (its dev, SICK trial), then one trained row per seed."""
    rows = pd.DataFrame({"anchors": size, "data": data, "seed": list(seeds), DEV: dev, SICK: sick})
    untrained = pd.DataFrame({"anchors": [0], "data": ["backbone"], "seed": [None], DEV: [backbone[0]],
                              SICK: [backbone[1]]})
    return pd.concat([untrained, rows.assign(**{MEAN: (rows[DEV] + rows[SICK]) / 2})], ignore_index=True)


def test_compare_pairs_two_csvs_by_seed_and_refuses_what_it_cannot_pair(tmp_path, capsys):
    a = table(400, "recipe", [87.3, 87.1, 87.2], [80.0, 81.0, 80.5], seeds=(15, 13, 14))  # any row order
    b = table(100, "recipe", [87.0, 87.0, 87.0], [80.5, 80.5, 80.5])
    got = compare(a, b)
    assert got[DEV].startswith("+0.20 [") and "(seeds: +0.10, +0.20, +0.30)" in got[DEV]  # paired on seed 13, 14, 15
    assert got[SICK].startswith("+0.00 [-1.24, +1.24]")  # differences +0.5, 0, −0.5: t(2) × sd 0.5 / √3
    assert got[MEAN].startswith("+0.10 [")
    with pytest.raises(SystemExit, match="seeds differ"):
        compare(a, table(100, "recipe", [87.0, 87.0], [80.5, 80.5], seeds=(13, 14)))
    with pytest.raises(SystemExit, match="one trained row"):
        compare(pd.concat([a, b]), b)
    with pytest.raises(SystemExit, match="once per seed"):
        compare(pd.concat([a, a[a["data"] != "backbone"]]), b)
    a.to_csv(tmp_path / "a.csv", index=False)  # the command line the results page names
    b.to_csv(tmp_path / "b.csv", index=False)
    main([str(tmp_path / "a.csv"), str(tmp_path / "b.csv")])
    assert capsys.readouterr().out.splitlines() == [f"{name}: {cell}" for name, cell in got.items()]

    # A CSV that trained several data kinds (the decoder's SimCSE and triples): --a-data / --b-data pick one each.
    several = pd.concat([b, a[a["data"] != "backbone"].assign(anchors=100, data="triples")], ignore_index=True)
    several.to_csv(tmp_path / "several.csv", index=False)
    with pytest.raises(SystemExit, match="one trained row"):
        compare(several, b)
    with pytest.raises(SystemExit, match="no trained 'simcse' row in that CSV \\(it holds: recipe, triples\\)"):
        compare(several, b, a_data="simcse")
    with pytest.raises(SystemExit, match="no trained 'backbone' row"):  # the untrained row is no row to pair
        compare(several, b, a_data="backbone")
    assert compare(several, b, a_data="triples") == got  # a's numbers, now under another name in a wider CSV
    assert compare(b, several, b_data="recipe") == compare(b, b)  # a difference of 0: the same row picked
    main([str(tmp_path / "several.csv"), str(tmp_path / "several.csv"), "--a-data", "triples", "--b-data", "recipe"])
    assert capsys.readouterr().out.splitlines() == [f"{name}: {cell}" for name, cell in got.items()]
    # A CSV written before the mean's column (the older decoder files) gets the one mean from its dev and SICK trial.
    assert compare(a.drop(columns=MEAN), b.drop(columns=MEAN)) == got
    # STS-B test, read once, is paired too where both CSVs hold it (the results tables quote it).
    assert TEST not in got
    with_test = compare(a.assign(**{TEST: a[DEV] - 5}), b.assign(**{TEST: b[DEV] - 5}))
    assert with_test[TEST] == got[DEV] and {k: v for k, v in with_test.items() if k != TEST} == got
    # A seed with a value missing on one side (an older CSV's unscored set) is left out by name, never silently.
    gap = compare(a.assign(**{TEST: [None, 80.0, None, 81.0]}), b.assign(**{TEST: b[DEV] - 5}))
    assert gap[TEST].endswith("(seeds: -1.00, -2.00; left out, a value missing: seed 13)")
    assert gap[DEV] == got[DEV] and "left out" not in got[DEV]
    big = pd.Series([1.0, None, None], index=[20261207.0, 20261208.0, 20261209.0])  # seeds as the CSV's floats
    assert paired(big, big * 0).endswith("(seeds: +1.00; left out, a value missing: seeds 20261208, 20261209)")


def test_one_rows_seeds_run_apart_join_with_plus_and_pair_as_one(tmp_path, capsys):
    """The decoder's 800-anchor row ran seed 13 first and seeds 14, 15 later: `A+B` pairs all three seeds at once,
    its backbone row kept once; CSVs of two backbones (their untrained rows differ) are refused by name."""
    def run(seeds, dev, data="triples", backbone=(64.15, 65.82)):  # one run's CSV of the decoder at 800 anchors
        return table(800, data, dev, [70.0] * len(seeds), seeds, backbone)

    for name, t in {"t13": run([13], [80.0]), "t1415": run([14, 15], [81.0, 82.0]),
                    "s13": run([13], [75.0], "simcse"), "s1415": run([14, 15], [75.0, 76.0], "simcse"),
                    "other": run([14, 15], [81.0, 82.0], backbone=(86.72, 65.82))}.items():
        t.to_csv(tmp_path / f"{name}.csv", index=False)
    joined = read_joined(f"{tmp_path / 't13.csv'}+{tmp_path / 't1415.csv'}")
    assert (joined["data"] == "backbone").sum() == 1 and sorted(joined["seed"].dropna()) == [13, 14, 15]
    main([f"{tmp_path / 't13.csv'}+{tmp_path / 't1415.csv'}", f"{tmp_path / 's13.csv'}+{tmp_path / 's1415.csv'}"])
    assert f"{DEV}: +5.67 [" in capsys.readouterr().out  # triples − SimCSE on 13, 14, 15: +5, +6, +6
    with pytest.raises(SystemExit, match=r"untrained backbone rows differ \(.*t13\.csv, .*other\.csv\)"):
        read_joined(f"{tmp_path / 't13.csv'}+{tmp_path / 'other.csv'}")
    with pytest.raises(SystemExit, match=r"a row and seed in two CSVs \(.*t1415\.csv\)"):  # joined twice
        read_joined(f"{tmp_path / 't13.csv'}+{tmp_path / 't1415.csv'}+{tmp_path / 't1415.csv'}")
    with pytest.raises(SystemExit, match="seeds differ"):  # one side's later seeds forgotten: nothing to pair
        main([f"{tmp_path / 't13.csv'}+{tmp_path / 't1415.csv'}", str(tmp_path / "s13.csv")])
    # --seeds pairs the seeds both sides hold while a row's last seeds still train, and names a seed one side lacks.
    main([f"{tmp_path / 't13.csv'}+{tmp_path / 't1415.csv'}", str(tmp_path / "s13.csv"), "--seeds", "13"])
    assert f"{DEV}: +5.00 [+nan, +nan] (seeds: +5.00)" in capsys.readouterr().out
    main([str(tmp_path / "t1415.csv"), f"{tmp_path / 's13.csv'}+{tmp_path / 's1415.csv'}", "--seeds", "15,14"])
    assert f"{DEV}: +6.00 [" in capsys.readouterr().out  # seeds 14 and 15 only: +6, +6, not seed 13's +5
    with pytest.raises(SystemExit, match=r"B \(.*s13\.csv\): no trained row of seed 14 \(it holds: 13\)"):
        main([f"{tmp_path / 't13.csv'}+{tmp_path / 't1415.csv'}", str(tmp_path / "s13.csv"), "--seeds", "13,14"])


def test_gap_pairs_one_sizes_gap_with_anothers_and_dev_minus_sick_says_whether_they_pull_apart(tmp_path, capsys):
    """The results page's (gap at 1,200) − (gap at 200), triples − SimCSE, paired by seed: `--gap triples,simcse`
    reads both kinds from each CSV; the last line, dev's difference minus SICK trial's, per seed."""
    def size(n, triples_dev, simcse_dev, triples_sick, seeds=(13, 14, 15)):  # one decoder CSV: SimCSE and triples
        simcse = table(n, "simcse", simcse_dev[::-1], [70.0] * len(seeds), seeds[::-1])  # its seeds in another order
        return pd.concat([simcse, table(n, "triples", triples_dev, triples_sick, seeds).iloc[1:]], ignore_index=True)

    small = size(200, [77.0, 77.0, 77.0], [76.0, 75.0, 76.0], [73.0, 74.0, 73.0])  # gaps dev 1, 2, 1; SICK 3, 4, 3
    large = size(1200, [80.0, 81.0, 80.0], [76.0, 75.0, 75.0], [71.0, 71.0, 70.0], seeds=(15, 14, 13))
    # large's gaps by seed 13, 14, 15: dev 5, 6, 4; SICK 0, 1, 1 → against small: dev +4, +4, +3; SICK −3, −3, −2
    got = compare(gap(large, ("triples", "simcse")), gap(small, ("triples", "simcse")))
    assert got[DEV].endswith("(seeds: +4.00, +4.00, +3.00)") and got[DEV].startswith("+3.67 [")
    assert got[SICK].endswith("(seeds: -3.00, -3.00, -2.00)")
    assert got[MEAN].endswith("(seeds: +0.50, +0.50, +0.50)") and got[MEAN].startswith("+0.50 [+0.50, +0.50]")
    assert got[DEV_MINUS_SICK].endswith("(seeds: +7.00, +7.00, +5.00)")
    # The gap of a size against itself is 0 on every set, dev − SICK trial included.
    assert all(cell.startswith("+0.00 [+0.00, +0.00]") for cell in compare(gap(small, ("triples", "simcse")),
                                                                          gap(small, ("triples", "simcse"))).values())
    for name, t in {"small": small, "large": large}.items():
        t.to_csv(tmp_path / f"{name}.csv", index=False)
    main([str(tmp_path / "large.csv"), str(tmp_path / "small.csv"), "--gap", "triples, simcse"])
    assert capsys.readouterr().out.splitlines() == [f"{name}: {cell}" for name, cell in got.items()]
    # Without --gap the same CSVs hold two rows each, which compare refuses.
    with pytest.raises(SystemExit, match="one trained row"):
        main([str(tmp_path / "large.csv"), str(tmp_path / "small.csv")])
    for bad in (["--gap", "triples"], ["--gap", "triples,triples"], ["--gap", "triples,simcse", "--a-data", "triples"]):
        with pytest.raises(SystemExit):
            main([str(tmp_path / "large.csv"), str(tmp_path / "small.csv"), *bad])
        assert "--gap takes two different data kinds" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--gap nli,simcse in the CSV: no trained 'nli' row"):
        gap(small, ("nli", "simcse"))
    pd.concat([small, large.iloc[1:]]).to_csv(tmp_path / "both.csv", index=False)  # two sizes in one CSV
    with pytest.raises(SystemExit, match=r"--gap triples,simcse in A \(.*both\.csv\): each CSV must hold one trained "
                                         r"row .* give each size's CSV\(s\) apart"):
        main([str(tmp_path / "both.csv"), str(tmp_path / "small.csv"), "--gap", "triples,simcse"])
    uneven = pd.concat([small[small["seed"] != 15], table(200, "triples", [77.0], [73.0], seeds=(16,)).iloc[1:]])
    with pytest.raises(SystemExit, match=r"--gap triples,simcse in the CSV: the seeds differ"):
        gap(uneven, ("triples", "simcse"))


def test_anchors_pick_one_size_from_a_csv_that_trained_several(tmp_path, capsys):
    """The older H200 file trained SimCSE at 100 and 50 anchors in one CSV: `--a-anchors` / `--b-anchors` pick one
    size, so its gap at 100 pairs by seed; a size the CSV lacks is refused, naming the sizes it holds."""
    hundred = table(100, "simcse", [74.0, 74.5, 74.2], [71.0, 71.5, 70.5])
    fifty = table(50, "simcse", [73.0, 73.5, 73.2], [72.0, 72.5, 71.5]).iloc[1:]
    triples = table(100, "triples", [76.0, 77.0, 76.5], [71.5, 71.0, 71.8]).iloc[1:]
    several = pd.concat([hundred, fifty, triples], ignore_index=True)
    assert at_size(several, None) is several
    picked = at_size(several, 100)
    assert set(picked["anchors"]) == {0, 100} and (picked["data"] == "backbone").sum() == 1
    want = compare(picked, picked, "triples", "simcse")
    assert want == compare(pd.concat([hundred, triples]), pd.concat([hundred, triples]), "triples", "simcse")
    several.to_csv(tmp_path / "h200.csv", index=False)
    h200 = str(tmp_path / "h200.csv")
    with pytest.raises(SystemExit, match="one trained row .* --a-anchors / --b-anchors one size"):
        main([h200, h200, "--a-data", "triples", "--b-data", "simcse"])  # SimCSE at two sizes: refused
    main([h200, h200, "--a-data", "triples", "--b-data", "simcse", "--a-anchors", "100", "--b-anchors", "100"])
    assert capsys.readouterr().out.splitlines() == [f"{name}: {cell}" for name, cell in want.items()]
    # 100 against 50 anchors, SimCSE: dev +1.00 in every seed, SICK trial −1.00.
    main([h200, h200, "--a-data", "simcse", "--b-data", "simcse", "--a-anchors", "100", "--b-anchors", "50"])
    out = capsys.readouterr().out
    assert f"{DEV}: +1.00 [+1.00, +1.00]" in out and f"{SICK}: -1.00 [-1.00, -1.00]" in out
    with pytest.raises(SystemExit, match=r"B \(.*h200\.csv\): no trained row at 400 anchors \(it holds: 50, 100\)"):
        main([h200, h200, "--a-anchors", "100", "--b-anchors", "400"])
