"""Writes the two Parquet examples beside this script (run it again after editing the rows below):

- corpus.parquet — a corpus: one document per row (`doc_id`, `text`), read by `--corpus`;
- pairs.parquet — sentence pairs with a 0–5 similarity score (`sentence1`, `sentence2`, `score`), read by
  `stsgen label --pairs` and `stsgen retrieve --sentences`.

    .venv/bin/python data/examples/make_parquet.py
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent

CORPUS_ROWS = [
    {"doc_id": "garden",
     "text": "Residents turned an empty parking lot into a community garden. Each family looks after one raised bed "
             "and shares the tools kept in a small shed. In late summer they hold a dinner with what the garden has "
             "grown."},
    {"doc_id": "observatory",
     "text": "The observatory on the ridge opens its telescope to visitors on clear Friday nights. Guides point out "
             "the planets and explain how the old dome turns. Warm coats are needed, because the dome is never "
             "heated."},
    {"doc_id": "lighthouse",
     "text": "The council voted to repaint the lighthouse in its original red and white stripes. The work will start "
             "once the spring storms have passed. Painters will have to climb the tower on ropes, since no "
             "scaffolding reaches the top."},
]

PAIR_ROWS = [
    {"sentence1": "A man is slicing bread in the kitchen.", "sentence2": "Someone is cutting a loaf of bread.",
     "score": 4.6},
    {"sentence1": "The children are playing football in the park.",
     "sentence2": "Kids are kicking a ball around on the grass.", "score": 4.2},
    {"sentence1": "The train to the coast was delayed by an hour.", "sentence2": "The coastal train arrived late.",
     "score": 3.4},
    {"sentence1": "A woman is watering the flowers in her garden.",
     "sentence2": "A woman is picking flowers in a field.", "score": 2.2},
    {"sentence1": "The museum closes early on public holidays.",
     "sentence2": "The library stays open late on Thursdays.", "score": 1.0},
    {"sentence1": "A dog is sleeping on the porch.", "sentence2": "The stock market fell sharply this morning.",
     "score": 0.0},
]

CORPUS_SCHEMA = pa.schema([("doc_id", pa.string()), ("text", pa.string())])
PAIRS_SCHEMA = pa.schema([("sentence1", pa.string()), ("sentence2", pa.string()), ("score", pa.float64())])


def tables() -> dict[str, pa.Table]:
    return {"corpus.parquet": pa.Table.from_pylist(CORPUS_ROWS, schema=CORPUS_SCHEMA),
            "pairs.parquet": pa.Table.from_pylist(PAIR_ROWS, schema=PAIRS_SCHEMA)}


def main() -> None:
    for name, table in tables().items():
        pq.write_table(table, HERE / name)
        print(f"wrote {HERE / name} ({table.num_rows} rows)")


if __name__ == "__main__":
    main()
