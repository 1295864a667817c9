"""Stage 3 inputs → scoring units: which sentences are scored together, over which contexts, and which pairs each
unit labels.

- From triples: one unit per triple (anchor, positive, intermediate, negative) with all six pairs among them, plus
  `cross_pairs_per_triple` units pairing the anchor with a random sentence of another triple (relation `cross`,
  low-similarity calibration).
- From a pairs file (Parquet with s1/s2 or sentence1/sentence2, optional relation and gold/score): one unit per pair.

A unit's contexts are the union of its sentences' own top-k context sets (stage 2 rank order, deduplicated). A
sentence with no contexts of its own is still scored over its partners' contexts (documented fallback,
visible as n_contexts_s1/s2 = 0); a unit whose union is empty is quarantined by the labeler.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from tasks.contracts import PAIR_COLUMNS, PAIRS_SCHEMA, TRIPLE_SLOTS, sentence_id
from tasks.core.config import ConfigError
from tasks.core.store import fingerprint, read_input_table


@dataclass
class Unit:
    """Sentences scored together over the union of their contexts; pairs are (i, j, relation, extra columns)."""
    unit_id: str
    sentence_ids: list[str]
    sentences: list[str]
    own_contexts: list[int]  # number of each sentence's own contexts in the union
    context_ids: list[int]
    left: list[str]
    right: list[str]
    pairs: list[tuple[int, int, str, dict]] = field(default_factory=list)
    own_sets: list[list[int]] = field(default_factory=list)  # per sentence: indices of its own contexts

    def own_mask(self) -> np.ndarray:
        """(n_sentences, n_contexts) bool: context c was retrieved for sentence i itself."""
        mask = np.zeros((len(self.sentences), len(self.context_ids)), dtype=bool)
        for i, idx in enumerate(self.own_sets):
            mask[i, idx] = True
        return mask


# A shard holds both: labeled pairs (reason null) and quarantined ones.
SHARD_SCHEMA = pa.schema(list(PAIRS_SCHEMA) + [("reason", pa.string()), ("detail", pa.string())])


def context_sets(contexts: pd.DataFrame, k: int) -> dict[str, pd.DataFrame]:
    """sentence_id → its top-k contexts (context_id, left, right) in rank order."""
    top = contexts.sort_values(["sentence_id", "rank"], kind="stable").groupby("sentence_id", sort=False).head(k)
    return {sid: g[["context_id", "left", "right"]] for sid, g in top.groupby("sentence_id", sort=False)}


def make_unit(texts: list[str], sets: dict[str, pd.DataFrame], pairs: list[tuple[int, int, str, dict]]) -> Unit:
    ids = [sentence_id(t) for t in texts]
    own = [sets.get(i) for i in ids]
    frames = [f for f in own if f is not None]
    union = pd.concat(frames).drop_duplicates("context_id") if frames else pd.DataFrame(
        {"context_id": [], "left": [], "right": []})
    context_ids = [int(c) for c in union["context_id"]]
    position = {c: n for n, c in enumerate(context_ids)}
    own_sets = [[] if f is None else [position[int(c)] for c in f["context_id"]] for f in own]
    return Unit(unit_id=fingerprint({"s": ids, "c": context_ids})[:16], sentence_ids=ids, sentences=list(texts),
                own_contexts=[0 if f is None else len(f) for f in own], context_ids=context_ids,
                left=union["left"].tolist(), right=union["right"].tolist(), pairs=pairs, own_sets=own_sets)


def triple_units(triples: pd.DataFrame, sets: dict[str, pd.DataFrame], cross_per_triple: int, seed: int
                 ) -> tuple[list[Unit], list[dict]]:
    """Units for the triples and their cross pairs, and quarantine rows for triples without a usable anchor or
    partner (they are never used as cross-pair partners either)."""
    units, members, ids, bad = [], [], [], []
    for n, row in enumerate(triples.itertuples(index=False)):
        slots = [s for s in TRIPLE_SLOTS if isinstance(getattr(row, s, None), str) and getattr(row, s).strip()]
        if slots[:1] != ["anchor"] or len(slots) < 2:
            bad.append({"triple_id": row.source_id, "s1": getattr(row, "anchor", None), "relation": "triple",
                        "reason": "bad_input", "detail": f"triples row {n}: needs an anchor and at least one other "
                        f"sentence (has: {', '.join(slots) or 'none'})", "_row": n})
            continue
        texts = [getattr(row, s) for s in slots]
        members.append(texts)
        ids.append(row.source_id)
        pairs = [(i, j, f"{slots[i]}-{slots[j]}", {"triple_id": row.source_id})
                 for i, j in combinations(range(len(slots)), 2)]
        units.append(make_unit(texts, sets, pairs))
    rng = np.random.default_rng(seed)
    for t in range(len(ids) if len(ids) > 1 else 0):
        for r in range(cross_per_triple):
            other = int(rng.integers(len(ids) - 1))
            other += other >= t  # any triple but t
            partner = members[other][int(rng.integers(len(members[other])))]
            units.append(make_unit([members[t][0], partner], sets, [(0, 1, "cross", {
                "triple_id": ids[t], "other_triple_id": ids[other], "_row": r})]))
    return units, bad


def read_pairs(path: Path) -> tuple[pd.DataFrame, list[dict]]:
    """Pairs file → (pairs with s1, s2, relation, gold), quarantine rows for unusable rows."""
    frame = read_input_table(path, "Pairs file", "pass a Parquet of sentence pairs").to_pandas()
    for a, b in PAIR_COLUMNS:
        if a in frame and b in frame:
            frame = frame.rename(columns={a: "s1", b: "s2"})
            break
    else:
        raise ConfigError(f"{path} needs sentence columns s1/s2 or sentence1/sentence2 (found: "
                          f"{', '.join(frame.columns)}).")
    gold_col = next((c for c in ("gold", "score") if c in frame), None)
    frame["gold"] = pd.to_numeric(frame[gold_col], errors="coerce") if gold_col else np.nan
    frame["relation"] = frame["relation"].astype(str) if "relation" in frame else "pair"
    ok = frame["s1"].map(lambda x: isinstance(x, str) and bool(x.strip())) & \
        frame["s2"].map(lambda x: isinstance(x, str) and bool(x.strip()))
    bad = [{"s1": r.s1 if isinstance(r.s1, str) else None, "s2": r.s2 if isinstance(r.s2, str) else None,
            "relation": r.relation, "reason": "bad_input", "detail": f"{path.name} row {i}: empty or missing sentence",
            "_row": i}
           for i, r in zip(frame.index[~ok], frame[~ok].itertuples(index=False))]
    return frame[ok].reset_index(drop=True), bad


def pair_units(pairs: pd.DataFrame, sets: dict[str, pd.DataFrame]) -> list[Unit]:
    return [make_unit([r.s1, r.s2], sets, [(0, 1, r.relation, {"gold": None if pd.isna(r.gold) else float(r.gold),
                                                               "_row": n})])
            for n, r in enumerate(pairs.itertuples(index=False))]


def finish_rows(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Rows → a table of `schema` (columns a row lacks are null). Pair ids hash everything that tells two rows
    apart: unit, sentences, relation, triples, and the source row (`_row`: pairs-file row or cross-pair draw)."""
    for r in rows:
        r.setdefault("pair_id", fingerprint([r.get(k) for k in ("unit_id", "s1_id", "s2_id", "relation", "triple_id",
                                                               "other_triple_id", "_row")])[:16])
    return pa.Table.from_pylist([{name: r.get(name) for name in schema.names} for r in rows], schema=schema)
