"""The summary benchmarks/data_value.py prints after every row has trained: per-seed rows (the `backbone` row, step 0,
among them) → means over seeds, the comparison to the backbone, and the paired differences between data variants.
Every difference is on STS-B dev, SICK trial or their mean; STS12 train (the pattern pool) is printed as a column of
its own and enters nothing else."""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
from scipy import stats

from benchmarks.data_value_columns import DEV, MEAN, POOL, POOL_NOTE, SICK, TEST, mean_of

SETS = (DEV, SICK, MEAN, TEST, POOL)
DEV_MINUS_SICK = f"{DEV} − {SICK}"  # the difference on dev minus the one on SICK trial


def is_trained(table: pd.DataFrame) -> pd.Series:
    """Every row but the untrained `backbone` row (step 0), which the harness writes first in each CSV."""
    return table["data"] != "backbone"


def read_joined(spec: str) -> pd.DataFrame:
    """`A.csv+B.csv+…`: one harness table from the CSVs of several runs of one backbone (seed 13 run first, seeds 14
    and 15 later; a GPU call's rows and a later CPU run's). Each CSV's untrained `backbone` row is the same model's,
    so one is kept; a table whose backbone rows differ joins two backbones, and is refused, as is a trained row and
    seed that two CSVs hold (a CSV joined twice). A path holding `+` cannot be joined."""
    paths = spec.split("+")
    table = pd.concat([pd.read_csv(p).assign(_csv=p) for p in paths], ignore_index=True)
    backbone = table[~is_trained(table)]
    scores = backbone[[c for c in SETS if c in backbone]].round(4).drop_duplicates()
    if len(scores) > 1:
        raise SystemExit(f"{spec}: the CSVs' untrained backbone rows differ ({', '.join(backbone['_csv'])}): they "
                         "are not one backbone's runs; join only CSVs of one --backbone")
    trained = table[is_trained(table)]
    row = [c for c in ("anchors", "data", "seed", "steps", "lr", "budget") if c in trained]
    if (twice := trained[trained.duplicated(row, keep=False)]).size:  # the plot would average it in as a seed
        raise SystemExit(f"{spec}: a row and seed in two CSVs ({', '.join(twice['_csv'].unique())}): join each "
                         "run's CSV once")
    return table.drop(index=backbone.index[1:], columns="_csv").reset_index(drop=True)


def t_interval(values: list[float]) -> tuple[float, float]:
    """95 % t-interval of the mean over seeds."""
    v = np.asarray(values, float)
    if len(v) < 2:
        return float("nan"), float("nan")
    half = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return v.mean() - half, v.mean() + half


def paired(a: pd.Series, b: pd.Series) -> str:
    """a − b paired by seed: mean [95 % t-interval] (seeds: …), naming any seed left out for a value missing on
    either side (a seed one side did not train, a set an older CSV did not score)."""
    diff = a - b
    kept = diff.dropna().tolist()
    lo, hi = t_interval(kept)
    missing = [str(int(seed)) if float(seed).is_integer() else str(seed) for seed in diff.index[diff.isna()]]
    left_out = f"; left out, a value missing: seed{'s' * (len(missing) > 1)} {', '.join(missing)}" if missing else ""
    return (f"{np.mean(kept) if kept else float('nan'):+.2f} [{lo:+.2f}, {hi:+.2f}] (seeds: "
            + ", ".join(f"{d:+.2f}" for d in kept) + left_out + ")")


def report(table: pd.DataFrame) -> None:
    backbone = table[~is_trained(table)].iloc[0]
    trained = table[is_trained(table)]
    groups = trained.groupby(["anchors", "data"], sort=False)
    print("\nmean ± sd over seeds, STS-B dev (the choice), with each row's budget:")
    for (size, kind), g in groups:
        last = int((g["best_step"] == g["steps"]).sum())  # still improving when the budget ran out
        print(f"  {size} anchors, {kind}: {g[DEV].mean():.2f} ± {g[DEV].std(ddof=1):.2f} "
              f"({int(g['steps'].iloc[0])} steps, lr {g['lr'].iloc[0]:g}, batch {int(g['batch_size'].iloc[0])}; "
              f"{g['budget'].iloc[0]})" + (f"; best at the last step in {last} of {len(g)} seeds" if last else ""))
    print(f"\nreported once, on each row's chosen weights: SICK trial (confirms), STS-B test; '{MEAN}' is the only "
          f"mean. {POOL}: {POOL_NOTE}.")
    print("| anchors | data | " + " | ".join(SETS) + " |\n|---|---|" + "---|" * len(SETS))
    print("| — | backbone, untrained (step 0) | " + " | ".join(f"{backbone[s]:.2f}" for s in SETS) + " |")
    for (size, kind), g in groups:
        print(f"| {size} | {kind} | " + " | ".join(f"{g[s].mean():.2f} ± {g[s].std(ddof=1):.2f}" for s in SETS) + " |")
    print("\n− the untrained backbone (its own row, never a trained row's candidate: a row can be under it), "
          "95 % t-interval over seeds: STS-B dev | SICK trial | mean:")
    for (size, kind), g in groups:
        cells = []
        for s in (DEV, SICK, MEAN):
            diff = (g[s] - backbone[s]).tolist()
            lo, hi = t_interval(diff)
            cells.append(f"{np.mean(diff):+.2f} [{lo:+.2f}, {hi:+.2f}]")
        print(f"  {size} anchors, {kind}: " + " | ".join(cells))
    kinds = set(trained["data"])
    for other, base, what in (("triples", "simcse", "stsgen triples − SimCSE"),
                              ("triples", "simcse-paper", "stsgen triples − SimCSE at its paper setting"),
                              ("nli", "triples", "NLI-pattern triples − STS-pattern triples"),
                              ("hardneg", "triples", "triples + the NLI negative − STS-pattern triples")):
        if not {other, base} <= kinds:
            continue
        print(f"\n{what}, paired by seed (95 % t-interval over seeds):")
        for size, g in trained.groupby("anchors"):
            a, b = (g[g["data"] == k].set_index("seed") for k in (other, base))
            print(f"  {size} anchors: " + "; ".join(f"{s} {paired(a[s], b[s])}" for s in (MEAN, DEV, SICK)))
    print(f"\ntotal train s: {trained['train_s'].sum():.0f} (chosen budgets); "
          f"{trained.drop_duplicates(['anchors', 'data'])['search_train_s'].sum():.0f} (every budget tried)")


def at_size(table: pd.DataFrame, anchors: int | None, name: str = "the CSV") -> pd.DataFrame:
    """The table's trained rows at `anchors` with its untrained backbone row: one size of a CSV that trained several
    (the older H200 file's 100 and 50 anchors); the whole table where `anchors` is None. Refused, naming the sizes it
    holds, where none is at `anchors`."""
    if anchors is None:
        return table
    trained = is_trained(table)
    if not (trained & (table["anchors"] == anchors)).any():
        held = ", ".join(str(n) for n in sorted(set(table.loc[trained, "anchors"]))) or "no trained row"
        raise SystemExit(f"{name}: no trained row at {anchors} anchors (it holds: {held})")
    return table[~trained | (table["anchors"] == anchors)].reset_index(drop=True)


def of_seeds(table: pd.DataFrame, seeds: list[int] | None, name: str = "the CSV") -> pd.DataFrame:
    """The table's trained rows of `seeds` with its untrained backbone row: the seeds both sides hold while a row's
    last seed still trains (the whole table where `seeds` is None). Refused, naming the seeds it holds, where one of
    `seeds` is missing: a pairing on fewer seeds than asked is never silent. The seeds are the whole table's (any
    data kind or size in it); one row lacking one is refused later, by `same_seeds`."""
    if seeds is None:
        return table
    trained = is_trained(table)
    held = set(table.loc[trained, "seed"])
    if missing := [s for s in seeds if s not in held]:
        raise SystemExit(f"{name}: no trained row of seed {', '.join(map(str, missing))} (it holds: "
                         f"{', '.join(str(int(s)) for s in sorted(held)) or 'none'})")
    return table[~trained | table["seed"].isin(seeds)].reset_index(drop=True)


def one_row(table: pd.DataFrame, kind: str | None, where: str = "compare",
            pick: str = "--a-data / --b-data pick one data kind, --a-anchors / --b-anchors one size") -> pd.DataFrame:
    """A harness table's one trained row (one size, one data kind), indexed by seed: `kind` picks it from a table that
    trained several (the decoder's SimCSE, paper setting and triples in one CSV); refused where none or several are
    left, or a seed twice, the message naming `where` it was read and how to `pick`."""
    t = table[is_trained(table)]
    if kind is not None:
        if kind not in set(t["data"]):
            held = ", ".join(t["data"].unique()) or "no trained row"
            raise SystemExit(f"{where}: no trained '{kind}' row in that CSV (it holds: {held})")
        t = t[t["data"] == kind]
    if t.groupby(["anchors", "data"]).ngroups != 1 or not t["seed"].is_unique:
        raise SystemExit(f"{where}: each CSV must hold one trained row (one size, one data), once per seed; {pick}")
    if MEAN not in t:  # a CSV written before the column (the older decoder files): the one mean, from its two sets
        t = t.assign(**{MEAN: mean_of(t)})
    return t.set_index("seed")


def same_seeds(a: pd.DataFrame, b: pd.DataFrame, where: str = "compare") -> None:
    if set(a.index) != set(b.index):
        raise SystemExit(f"{where}: the seeds differ ({sorted(a.index)} vs {sorted(b.index)}): nothing to pair")


def gap(table: pd.DataFrame, kinds: tuple[str, str], name: str = "the CSV") -> pd.DataFrame:
    """kinds[0] − kinds[1] within one harness table (`name`, for messages), per seed (triples − SimCSE at one size,
    both trained on the same seeds): a table of one trained row, `triples − simcse`, so `compare` pairs one size's gap
    with another's."""
    where = f"--gap {','.join(kinds)} in {name}"
    a, b = (one_row(table, k, where, "a gap is read within one size: give each size's CSV(s) apart, or "
                                 "pick one with --a-anchors / --b-anchors") for k in kinds)
    same_seeds(a, b, where)
    sets = [s for s in (DEV, SICK, MEAN, TEST) if s in a]  # a and b are one table's rows: the same columns
    return (a[sets] - b[sets]).reset_index().assign(anchors=a["anchors"].iloc[0], data=" − ".join(kinds))


def compare(a: pd.DataFrame, b: pd.DataFrame, a_data: str | None = None, b_data: str | None = None
            ) -> dict[str, str]:
    """a − b, two harness CSVs' trained rows (one size and data each: a lever against the recipe, 400 anchors against
    100; or two sizes' gaps, `gap`), paired by seed, on STS-B dev, SICK trial and their mean, and STS-B test where
    both CSVs hold it (the results tables quote it, read once). Last, dev's difference minus SICK trial's, per seed:
    whether the choosing set and the confirming one pull apart. `a_data` / `b_data` pick one data kind from a CSV
    that trained several."""
    a_seeds, b_seeds = one_row(a, a_data), one_row(b, b_data)
    same_seeds(a_seeds, b_seeds)
    sets = (DEV, SICK, MEAN) + ((TEST,) if TEST in a_seeds and TEST in b_seeds else ())
    cells = {s: paired(a_seeds[s], b_seeds[s]) for s in sets}
    cells[DEV_MINUS_SICK] = paired(a_seeds[DEV] - a_seeds[SICK], b_seeds[DEV] - b_seeds[SICK])
    return cells


def seed_list(value: str) -> list[int]:
    """`--seeds 13,14`: whole numbers, comma-separated (argparse names this function in its error)."""
    return [int(s) for s in value.split(",")]


def main(argv: list[str]) -> None:
    """`python -m benchmarks.data_value_report A.csv B.csv [--a-data KIND] [--b-data KIND] [--a-anchors N]
    [--b-anchors N] [--gap KIND,KIND] [--seeds S,S…]`: the results page's paired A − B; A or B may join several runs'
    CSVs with `+` (`read_joined`)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.data_value_report",
                                     description="A − B on STS-B dev, SICK trial, their mean and STS-B test, paired "
                                                 "by seed, then dev's difference minus SICK trial's")
    parser.add_argument("a", help="a harness CSV (benchmarks/data_value.py --table-out), or CSV+CSV… of one row's "
                                  "seeds run apart")
    parser.add_argument("b", help="the CSV(s) it is compared against, likewise")
    parser.add_argument("--a-data", help="A's data kind, where A trained several (its `data` column: triples, …)")
    parser.add_argument("--b-data", help="B's data kind, likewise")
    parser.add_argument("--a-anchors", type=int, help="A's size, where A trained several (its `anchors` column)")
    parser.add_argument("--b-anchors", type=int, help="B's size, likewise")
    parser.add_argument("--gap", metavar="KIND,KIND",
                        help="compare gaps, not rows: (KIND − KIND in A) − (the same in B), paired by seed, as the "
                             "gap triples − SimCSE at 1,200 anchors against the one at 200 (`--gap triples,simcse`)")
    parser.add_argument("--seeds", metavar="S,S…", type=seed_list,
                        help="pair only these seeds, which both sides must hold (a reading while a row's last seed "
                             "still trains); default: every seed, the same on both sides")
    args = parser.parse_args(argv)
    names = f"A ({args.a})", f"B ({args.b})"  # as refusals name them
    a, b = (of_seeds(at_size(read_joined(spec), anchors, name), args.seeds, name)
            for spec, anchors, name in zip((args.a, args.b), (args.a_anchors, args.b_anchors), names))
    if args.gap is not None:
        kinds = tuple(k.strip() for k in args.gap.split(","))
        if len(kinds) != 2 or not all(kinds) or kinds[0] == kinds[1] or args.a_data or args.b_data:
            parser.error(f"--gap takes two different data kinds, KIND,KIND (got {args.gap!r}), and no --a-data / "
                         "--b-data: both kinds are read from A and from B")
        a, b = gap(a, kinds, names[0]), gap(b, kinds, names[1])
    for name, cell in compare(a, b, args.a_data, args.b_data).items():
        print(f"{name}: {cell}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
