"""The data-value tables' columns (benchmarks/data_value.py's CSVs): which set chooses, which confirms, what is
reported once and what is only a pattern pool. A module of its own, importing nothing, so the report and the plot
read the CSVs without loading torch and the trainer (benchmarks/data_value_selection.py)."""

DEV, SICK, TEST = "STS-B dev", "SICK trial", "STS-B test"
POOL = "sts12_train_pattern_pool"  # the generator's few-shot pattern pool: reported, never chosen on, in no mean
POOL_NOTE = "STS12 train: the generator's pattern pool, not a judgement (in no choice and no mean)"
MEAN = "mean STS-B dev + SICK trial"
MEAN_OF = (DEV, SICK)

VS_BACKBONE = {DEV: f"{DEV} vs backbone", SICK: f"{SICK} vs backbone", MEAN: f"{MEAN} vs backbone"}
# The `budget` cell of a row whose budget was given, not searched on dev (empty in a CSV written before the column:
# every budget was given then).
FIXED_BUDGET = "fixed"
PAPER_BUDGET = "SimCSE's paper setting: 1 epoch, batch 64, lr 3e-5"
COLUMNS = ["anchors", "data", "seed", "rows", "steps", "lr", "batch_size", "best_step", "train_s", "search_train_s",
           DEV, SICK, MEAN, *VS_BACKBONE.values(), TEST, POOL, "budget"]


def mean_of(scores):
    """The one mean, of dev and SICK trial: one row's scores (a dict) or every row's (a frame's columns)."""
    return sum(scores[s] for s in MEAN_OF) / len(MEAN_OF)
