"""Hard negatives mined from the corpus for stage 4's InfoNCE: for each triple's (anchor, positive), corpus sentences
the backbone finds close to the anchor but not too close to be paraphrases, through sentence-transformers'
`mine_hard_negatives` (optionally rescored by a cross-encoder). They become extra negative columns
(`mined_negative_1..k`) beside the LLM's s⁻; `LossSettings.negatives` picks generated, mined or both.

Candidates: the corpus without the triples' anchors (they come from the same corpus: an anchor's nearest corpus
sentence is itself) and positives; `mine_hard_negatives` adds every triple's positive back, so another triple's
positive can be a negative, never the triple's own (nor its anchor: checked after mining). The held-out triples'
sentences are excluded too (`exclude`): their text never reaches training, nor does an evaluation set's (`evals`:
STS-B dev and test and the run's eval sets; a corpus sentence holding one, by build-dataset's n-gram containment, or
equal to one in its words goes; the manifest counts them: `counts.mined_negatives.eval_overlap_removed`). Triples
with fewer than k passing candidates get no mined negatives and are left out of training when mined negatives are
used (`counts.mined_negatives.without`).
"""

from __future__ import annotations

from typing import ClassVar

import pandas as pd
from pydantic import Field

from tasks.core.config import ConfigError, CorpusSettings, Settings
from tasks.core.decontamination import EvalSentences, without_eval_sentences

MINED_PREFIX = "mined_negative_"


class MiningSettings(Settings):
    NOT_IN_KEY: ClassVar[frozenset[str]] = frozenset({"corpus"})  # it enters the stage key as its content

    corpus: CorpusSettings | None = Field(None, description="Corpus the negatives are mined from; None: the "
                                          "default corpus (in sts-pipeline: stage 1's)")
    num_negatives: int = Field(0, ge=0, description="Mined negatives per triple (0 = no mining)")
    range_max: int = Field(50, ge=1, description="Candidates: the anchor's top range_max corpus sentences")
    relative_margin: float = Field(0.05, ge=0, lt=1, description="A candidate must score below "
                                   "(1 − margin) × the positive's score: closer ones are likely paraphrases")
    sampling: str = Field("top", pattern="^(top|random)$", description="Take the hardest passing candidates or a "
                          "random sample of them")
    cross_encoder: str | None = Field(None, description="A local cross-encoder folder to rescore the candidates")
    max_corpus_sentences: int = Field(20_000, ge=1, description="At most this many corpus sentences (a seeded "
                                      "sample) are embedded as candidates")


def mined_columns(frame: pd.DataFrame) -> list[str]:
    return sorted((c for c in frame.columns if c.startswith(MINED_PREFIX)), key=lambda c: int(c[len(MINED_PREFIX):]))


def candidate_sentences(corpus: list[str], triples: pd.DataFrame, limit: int, seed: int) -> list[str]:
    """Distinct corpus sentences that are not an anchor or positive of any of `triples`, at most `limit` (seeded)."""
    taken = set(triples["anchor"]) | set(triples["positive"])
    pool = pd.Series(pd.unique(pd.Series(corpus, dtype=object)))
    pool = pool[~pool.isin(taken)]
    if len(pool) > limit:
        pool = pool.sample(n=limit, random_state=seed).sort_index()
    return pool.tolist()


def mine(triples: pd.DataFrame, corpus: list[str], model, settings: MiningSettings, seed: int,
         batch_size: int = 64, exclude: pd.DataFrame | None = None,
         evals: EvalSentences | None = None) -> tuple[pd.DataFrame, dict]:
    """`triples` with `mined_negative_1..k` columns (None where too few candidates passed) and counts. `exclude`:
    more triples whose sentences must not become candidates (the held-out split: its text never trains); `evals`:
    evaluation sentences that must not either."""
    import random

    from datasets import Dataset
    from sentence_transformers.util import mine_hard_negatives

    k = settings.num_negatives
    everyone = triples if exclude is None else pd.concat([triples, exclude], ignore_index=True)
    candidates = candidate_sentences(corpus, everyone, settings.max_corpus_sentences, seed)
    candidates, eval_overlap = (candidates, 0) if evals is None else without_eval_sentences(candidates, evals)
    if len(candidates) < k:
        raise ConfigError(f"Hard-negative mining needs a corpus with at least {k} sentences besides the triples' "
                          f"own (found {len(candidates)}): pass a larger mining corpus or set "
                          "mining.num_negatives to 0.")
    cross = None
    if settings.cross_encoder:
        from sentence_transformers import CrossEncoder

        cross = CrossEncoder(settings.cross_encoder)
    pairs = triples[["anchor", "positive"]].drop_duplicates().reset_index(drop=True)
    state = random.getstate()
    random.seed(seed)  # sampling="random" draws from the global generator: the same key must give the same data
    try:
        mined = mine_hard_negatives(
            Dataset.from_pandas(pairs, preserve_index=False), model, anchor_column_name="anchor",
            positive_column_name="positive", corpus=candidates, cross_encoder=cross, range_max=settings.range_max,
            relative_margin=settings.relative_margin, num_negatives=k, sampling_strategy=settings.sampling,
            output_format="n-tuple", batch_size=batch_size, verbose=False).to_pandas()
    finally:
        random.setstate(state)
    negative_cols = [c for c in mined.columns if c not in ("anchor", "positive")]
    own = mined[negative_cols].eq(mined["anchor"], axis=0) | mined[negative_cols].eq(mined["positive"], axis=0)
    mined = mined[~own.any(axis=1)]  # defensive: such a row would teach the model its own anchor is a negative
    mined = mined.rename(columns={c: f"{MINED_PREFIX}{i + 1}" for i, c in enumerate(negative_cols)})
    out = triples.drop(columns=mined_columns(triples)).merge(mined, on=["anchor", "positive"], how="left")
    with_all = out[mined_columns(out)].notna().all(axis=1) if len(mined_columns(out)) == k else \
        pd.Series(False, index=out.index)
    counts = {"candidates": len(candidates), "eval_overlap_removed": eval_overlap, "triples": len(out),
              "with_mined_negatives": int(with_all.sum()),
              "without": int((~with_all).sum()), "own_anchor_or_positive_mined": int(own.any(axis=1).sum()),
              "per_triple": k}
    return out, counts
