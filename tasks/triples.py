"""Stage 1 output tables: `triples.parquet` (one row per complete triple) and `rejected.parquet` (quarantine).

The schemas are fixed here (and documented in the README), so every run writes the same columns in the same
types, whatever the pattern: for NLI the intermediate columns are null.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

ALL_KINDS = ("positive", "intermediate", "negative")
_PER_KIND = [
    ("base", pa.string()),
    ("prompt", pa.string()),
    ("example_ids", pa.list_(pa.string())),
    ("attempts", pa.int32()),
    ("seed", pa.int64()),
    ("temperature", pa.float64()),
    ("top_p", pa.float64()),
    ("prompt_tokens", pa.int32()),
    ("completion_tokens", pa.int32()),
    ("latency_s", pa.float64()),
    ("cached", pa.bool_()),
    ("rules_passed", pa.list_(pa.string())),
    ("judge_p_pass", pa.float64()),  # the verifier's P(pass) (null: judge off)
]
TRIPLES_SCHEMA = pa.schema(
    [
        ("source_id", pa.string()),
        ("doc_id", pa.string()),
        ("position", pa.int32()),
        ("pattern", pa.string()),
        ("model", pa.string()),
        ("judge_model", pa.string()),  # the verifier's model (null: judge off)
        ("ordering_gap", pa.float64()),  # cos(a, s+) − cos(a, s−) of the ordering check (null: off)
        ("anchor", pa.string()),
        ("positive", pa.string()),
        ("intermediate", pa.string()),
        ("negative", pa.string()),
    ]
    + [(f"{kind}_{name}", typ) for kind in ALL_KINDS for name, typ in _PER_KIND]
)
REJECTED_SCHEMA = pa.schema(
    [
        ("stage", pa.string()),  # input | generation
        ("source_id", pa.string()),
        ("kind", pa.string()),
        ("attempt", pa.int32()),
        ("seed", pa.int64()),
        ("anchor", pa.string()),
        ("base_text", pa.string()),
        ("text", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)
# Columns that differ between an uninterrupted and a resumed run by nature (timings, cache hits).
VOLATILE_COLUMNS = tuple(f"{kind}_{name}" for kind in ALL_KINDS for name in ("latency_s", "cached"))


def triples_table(
    sample: pd.DataFrame,
    accepted: dict[str, dict[str, dict]],
    *,
    kinds: tuple[str, ...],
    pattern: str,
    model: str,
    prompts: dict[str, str],
    example_ids: dict[str, list[str]],
    bases: dict[str, str],
    judge_model: str | None = None,
) -> pa.Table:
    """One row per source sentence whose every kind was accepted, in sample order."""
    rows = []
    for src in sample.itertuples(index=False):
        gens = {k: accepted[k].get(src.source_id) for k in kinds}
        if any(g is None for g in gens.values()):
            continue
        row = {"source_id": src.source_id, "doc_id": src.doc_id, "position": int(src.position),
               "pattern": pattern, "model": model, "judge_model": judge_model, "anchor": src.text}
        for kind in ALL_KINDS:
            g = gens.get(kind)
            row[kind] = g["text"] if g else None
            meta = {name: None for name, _ in _PER_KIND}
            if g:
                meta.update({k: g[k] for k in ("attempts", "seed", "temperature", "top_p", "prompt_tokens",
                                                "completion_tokens", "latency_s", "cached", "rules_passed",
                                                "judge_p_pass")})
                meta.update(base=bases[kind], prompt=prompts[kind], example_ids=example_ids[kind])
            row.update({f"{kind}_{name}": value for name, value in meta.items()})
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=TRIPLES_SCHEMA)


def rejected_table(rows: list[dict]) -> pa.Table:
    names = REJECTED_SCHEMA.names
    return pa.Table.from_pylist([{n: r.get(n) for n in names} for r in rows], schema=REJECTED_SCHEMA)
