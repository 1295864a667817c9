"""Training data that needs no LLM, built from the same anchors as stsgen's triples: the baselines the triples must
beat to be worth generating (benchmarks/data_value.py; NGCSE, Table 1).

- `simcse_rows` — unsupervised SimCSE: each anchor is its own positive; the two dropout masks make the views differ
  (the trainer's `simcse` dataset, LossSettings.simcse).
- `neighbour_rows` — what the corpus alone gives: the anchor's next sentence in its document as the positive (the
  previous one for a document's last sentence), a usable sentence of another document as the negative.
- `same_anchor_rows` — another stage-1 run's triples for the same anchors (the NLI pattern's beside the STS one's);
  `anchor_corpus` writes the anchors as a corpus so such a run samples exactly them. `with_extra_negative` adds that
  run's negative to each triple as a second hard negative (the NLI pattern's is a contradiction: a minimal edit of a
  paraphrase of the anchor), in the column the trainer reads mined negatives from.

Inputs: stage-1 triples (anchor; doc_id and position for the neighbours) and the corpus's sentence table (doc_id,
position, text, usable: tasks/corpus/sentences.Corpus.sentences). Outputs: anchor, positive[, negative] — the columns
tasks/train/trainer.training_datasets reads.

citation: Gao, Yao, Chen. SimCSE: Simple Contrastive Learning of Sentence Embeddings. EMNLP 2021.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tasks.core.config import ConfigError


def simcse_rows(triples: pd.DataFrame) -> pd.DataFrame:
    """anchor, positive (= anchor) for every triple."""
    return pd.DataFrame({"anchor": triples["anchor"].to_numpy(), "positive": triples["anchor"].to_numpy()})


def neighbour_rows(triples: pd.DataFrame, sentences: pd.DataFrame, seed: int) -> pd.DataFrame:
    """anchor, positive (its document neighbour), negative (a usable sentence of another document), in the triples'
    order; anchors whose document the corpus lacks (or a one-sentence document) are left out."""
    missing = [c for c in ("anchor", "doc_id", "position") if c not in triples]
    if missing:
        raise ConfigError(f"The triples lack column(s) {', '.join(missing)}: corpus neighbours need stage 1's "
                          "triples.parquet (doc_id and position of each anchor in its corpus).")
    table = sentences[["doc_id", "position", "text"]]
    keys = triples[["doc_id", "position"]].reset_index(drop=True)

    def shifted(by: int) -> pd.Series:  # the text at position + by of each anchor's document (NaN: none)
        found = keys.assign(position=keys["position"] + by).merge(table, on=["doc_id", "position"], how="left")
        return found["text"]

    positive = shifted(1).fillna(shifted(-1))
    keep = positive.notna().to_numpy()
    pool = sentences.loc[sentences["usable"], ["doc_id", "text"]].reset_index(drop=True)
    docs = keys["doc_id"].to_numpy()[keep]
    rng = np.random.default_rng(seed)
    drawn = rng.integers(len(pool), size=len(docs))
    same = pool["doc_id"].to_numpy()[drawn] == docs
    while same.any():  # redraw the few that hit the anchor's own document
        drawn[same] = rng.integers(len(pool), size=int(same.sum()))
        same = pool["doc_id"].to_numpy()[drawn] == docs
    return pd.DataFrame({"anchor": triples["anchor"].to_numpy()[keep], "positive": positive.to_numpy()[keep],
                         "negative": pool["text"].to_numpy()[drawn]})


def anchor_corpus(triples: pd.DataFrame) -> pd.DataFrame:
    """doc_id, text: each anchor as a one-sentence document (a corpus.parquet for `./stsgen generate --corpus`), so a
    run of another pattern with n = len(triples) samples these anchors and no others."""
    return pd.DataFrame({"doc_id": [f"anchor-{i:05d}" for i in range(len(triples))],
                         "text": triples["anchor"].to_numpy()})


def same_anchor_rows(triples: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """anchor, positive, intermediate, negative of `other` (another run's complete triples) for the anchors of
    `triples`, in their order: a row's data differ from the triples' only in how they were generated. Anchors
    `other` has no complete triple for are left out (the caller reports how many)."""
    columns = ["anchor", "positive", "intermediate", "negative"]
    complete = other.dropna(subset=["positive", "negative"]).drop_duplicates("anchor")
    found = triples[["anchor"]].merge(complete.reindex(columns=columns), on="anchor", how="inner")
    return found[columns].reset_index(drop=True)


def with_extra_negative(triples: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """The triples (their order) with `other`'s negative for the same anchor as `mined_negative_1`, the column
    InfoNCE reads beside s⁻ with losses.negatives = "both"; anchors `other` has no complete triple for are left
    out."""
    from tasks.train.hard_negatives import MINED_PREFIX

    extra = same_anchor_rows(triples, other)[["anchor", "negative"]].rename(columns={"negative": f"{MINED_PREFIX}1"})
    # One extra negative per anchor: an anchor the triples hold twice keeps two rows, not four.
    extra = extra.drop_duplicates("anchor")
    return triples.merge(extra, on="anchor", how="inner", validate="many_to_one").reset_index(drop=True)


def ensure_dropout(model, p: float) -> int:
    """Give a backbone that ships without dropout (decoders such as SmolLM2: attention_dropout 0, no hidden dropout)
    dropout p, so that SimCSE's two views of a sentence differ at all; without it the SimCSE row of a decoder would
    train on identical views. Sets every `nn.Dropout` at 0 and every attention module's float `attention_dropout`
    at 0 (Llama-style attention applies it functionally); dropout a backbone has already is left as it is (BERT-style
    encoders keep their 0.1, so their SimCSE rows are NGCSE's). Returns how many were set."""
    import torch

    changed = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout) and module.p == 0:
            module.p, changed = p, changed + 1
        if isinstance(getattr(module, "attention_dropout", None), float) and module.attention_dropout == 0:
            module.attention_dropout, changed = p, changed + 1
    return changed
