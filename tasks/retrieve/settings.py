"""Stage 2's settings (retrieve-contexts), owned by the stage: the one object its flow takes, and its parts —
screening and selection (driven by retrieval.py), the coherence model (coherence.py), written contexts
(generated_contexts.py) — with the corpus and the shard runner. Settings only: importing them loads no torch."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from tasks.core.config import DEFAULT_SEED, CorpusSettings, Settings
from tasks.core.device import DEVICE_DESCRIPTION, DeviceSetting
from tasks.core.runners import ExecutionSettings


class SelectionSettings(Settings):

    screener: Literal["tfidf", "bm25"] = "tfidf"
    ngram_min: int = Field(1, ge=1, le=3)
    ngram_max: int = Field(2, ge=1, le=3)
    min_df: int = Field(1, ge=1, description="Screening terms in fewer contexts than this are dropped (a smaller "
                        "index for a large corpus; 1 keeps every term)")
    screen_k: int = Field(1000, ge=1, description="Candidates kept by screening per sentence (paper: 20K)")
    contexts_per_sentence: int = Field(50, ge=1, description="|C_s| (paper: 500)")
    max_jaccard: float = Field(0.5, gt=0, le=1)
    one_per_chunk: bool = True
    exclude_self: bool = Field(
        True, description="A sentence never gets a context whose window (c<, the gap's sentence, c>) contains it or "
        "an exact copy of it: a corpus-drawn anchor would otherwise fit its own neighbours' contexts (self-retrieval)")
    screen_weight: float = Field(
        1.0, ge=0, description="Ranking = z(coherence) + screen_weight·z(screening score), z over a sentence's "
        "candidates; 0 ranks by coherence alone as in the paper (see docs/retrieval.md for why the default mixes).")


class CoherenceSettings(Settings):
    NOT_IN_KEY: ClassVar[frozenset[str]] = frozenset({"device"})  # where it trains, not what (tasks.core.stage)
    # Training windows when `max_train_contexts` is left unset, per ranker. The BiLSTM's, chosen by
    # benchmarks/coherence.py on the default corpus (docs/retrieval.md): 60k windows (120k training examples), one
    # epoch of a hidden-128 BiLSTM from word2vec embeddings — the held-out AUC of two epochs of the paper's hidden-300
    # model at ~1/3 of its time on 2 cores. A frozen encoder's head has three weights: 10k windows (20k examples, 2k
    # held out) fit it as well as 60k (held-out ROC AUC 0.806 at 5k, 0.794 at 60k) in a sixth of the encoding.
    DEFAULT_TRAIN_CONTEXTS: ClassVar[dict[str, int]] = {"bilstm": 60_000, "encoder": 10_000}

    max_train_contexts: int | None = Field(None, ge=10, description="Positives sampled for training (+ as many "
                                    "negatives); unset: 60,000 for the BiLSTM, 10,000 for a frozen encoder's head")
    heldout_fraction: float = Field(0.1, gt=0, lt=0.5)
    epochs: int = Field(1, ge=1, le=50)
    batch_size: int = Field(256, ge=2)
    lr: float = Field(2e-3, gt=0)
    embedding_dim: int = Field(100, ge=8)
    hidden: int = Field(128, ge=8, description="BiLSTM hidden size (paper: 300; 128 trains ~3x faster on a CPU)")
    max_len: int = Field(64, ge=4, description="Tokens kept per text (the end nearest the gap)")
    vocab_size: int = Field(30_000, ge=100)
    word2vec_epochs: int = Field(3, ge=0, le=20, description="Word embeddings initialised from word2vec trained on "
                                 "the corpus's sentences for this many epochs (0: random initialisation)")
    seed: int = DEFAULT_SEED
    device: DeviceSetting = Field("auto", description=DEVICE_DESCRIPTION)
    encoder: str = Field(
        "all-minilm-l6-v2", description="The ranker. A sentence encoder (a registered name such as "
        "'all-minilm-l6-v2', the default, or a sentence-transformers folder) kept frozen, the head's weights on its "
        "cosines of s to c< and to c> fit by logistic regression on the corpus's windows — held-out ROC AUC 0.79 on "
        "the default corpus; ranking encodes every screened window's distinct c< and c> texts (~89k for the main "
        "job's 108 sentences: ~2 min on 2 AMX CPU cores in bf16, ~7 min on a CPU without native bf16; "
        "docs/benchmarks.md). Or 'bilstm': seed 003's model trained from scratch on the corpus (the fields above; "
        "held-out ROC AUC 0.69, ranking in seconds, ~5 min of training per corpus); they are ignored with an encoder")
    precision: Literal["auto", "float32", "bfloat16"] = Field(
        "auto", description="A frozen encoder's encoding: 'auto' = bf16 autocast where bf16 is native (a GPU with "
        "bf16; a CPU with AVX-512-BF16 or AMX: 2.55x the float32 encoding on an AMX CPU, the held-out ROC AUC "
        "unchanged, docs/benchmarks.md), float32 elsewhere; resolved before the model's key. The BiLSTM ignores it")

    @property
    def train_contexts(self) -> int:
        """`max_train_contexts`, or its ranker's default when unset: resolved here and not stored, so a copy that
        switches the ranker (`model_copy(update={"encoder": "bilstm"})`) gets the other ranker's default."""
        return self.max_train_contexts or self.DEFAULT_TRAIN_CONTEXTS["encoder" if self.frozen_encoder else "bilstm"]

    def resolved(self) -> CoherenceSettings:
        """These settings with the training size made concrete: what keys, fits and manifests use (the BiLSTM's
        default resolves to the 60,000 its keys held before the size depended on the ranker)."""
        return self.model_copy(update={"max_train_contexts": self.train_contexts})

    @property
    def frozen_encoder(self) -> str | None:
        return None if self.encoder == "bilstm" else self.encoder

    # What only the BiLSTM reads: out of a frozen encoder's key, which names the encoder by content instead
    # (tasks/retrieve/coherence.py model_key), so `./enc`, `enc` and its absolute path are one model.
    BILSTM_ONLY: ClassVar[frozenset[str]] = frozenset({"epochs", "batch_size", "lr", "embedding_dim", "hidden",
                                                       "max_len", "vocab_size", "word2vec_epochs"})

    def key_exclusions(self) -> frozenset[str]:
        # The BiLSTM's keys stay what they were before `encoder` existed: its prepared models are reused.
        # `precision` only in a frozen encoder's key, and only away from float32: the keys of models prepared before
        # it existed stay valid.
        precision = frozenset() if self.frozen_encoder and self.precision != "float32" else {"precision"}
        return self.NOT_IN_KEY | {"encoder"} | precision | (self.BILSTM_ONLY if self.frozen_encoder else frozenset())


class ContextSourceSettings(Settings):

    source: Literal["retrieved", "generated", "both"] = Field(
        "retrieved", description="Where C_s comes from: the corpus (screening + coherence ranking), the LLM writing "
        "(c<, c>) around each sentence, or both interleaved")
    genres: list[str] = Field(["news report", "encyclopedia article", "forum post", "short story"], min_length=1,
                              description="Genres the LLM places the sentence in; one request per genre and draw")
    draws_per_genre: int = Field(1, ge=1, le=16, description="Requests per (sentence, genre), each with its own seed")
    temperature: float = Field(0.8, ge=0, le=2)
    max_tokens: int = Field(120, ge=16)
    min_words: int = Field(3, ge=1, description="A side with fewer words is garbled")
    max_words: int = Field(60, ge=5, description="A side with more words is garbled (a run-on answer)")
    max_copy_jaccard: float = Field(0.7, gt=0, le=1, description="A side sharing this share of its word set with the "
                                    "sentence is a copy of it")
    max_jaccard: float = Field(0.5, gt=0, le=1, description="Diversity: a c< this similar to an accepted one is "
                               "rejected (the rule of the retrieved contexts)")
    seed: int = DEFAULT_SEED

    @property
    def generates(self) -> bool:
        return self.source != "retrieved"



class RetrieveSettings(Settings):
    """Where contexts come from and how they are chosen. The cache key is built from the corpus content, the
    coherence model's key and these fields (tasks/retrieve/stage.py)."""

    NOT_IN_KEY: ClassVar[frozenset[str]] = frozenset({"shard_size", "execution"})

    corpora: list[CorpusSettings] | None = Field(
        None, description="Corpora the contexts come from; None: the default corpus (in sts-pipeline: stage 1's).")
    window_k: int = Field(1, ge=1, description="Sentences on each side of a context window (c<, c>).")
    chunk_size: int = Field(0, ge=0, description="Split documents into chunks of this many sentences (0: whole).")
    selection: SelectionSettings = SelectionSettings()
    coherence: CoherenceSettings = CoherenceSettings()
    source: ContextSourceSettings = ContextSourceSettings()
    shard_size: int = Field(256, ge=1, description="Query sentences per shard (a shard is the unit of resumption).")
    execution: ExecutionSettings = ExecutionSettings()

    def corpora_or(self, default: CorpusSettings) -> list[CorpusSettings]:
        """The corpora to read: the ones given, else `default` (the default corpus, or the pipeline's stage 1's)."""
        return list(self.corpora) if self.corpora else [default]
