"""Stage 2's settings (retrieve-contexts), owned by the stage: the one object its flow takes, and its parts —
screening and selection (driven by retrieval.py), the coherence model (coherence.py), written contexts
(generated_contexts.py) — with the corpus and the shard runner. Settings only: importing them loads no torch."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from tasks.core.config import DEFAULT_SEED, CorpusSettings, Settings
from tasks.core.defaults import DEFAULT_ENCODER
from tasks.core.device import DEVICE_DESCRIPTION, DeviceSetting
from tasks.core.runners import ExecutionSettings


class SelectionSettings(Settings):
    """Screening (a sparse index's top candidates per sentence) and the choice of its context set C_s."""

    screener: Literal["tfidf", "bm25"] = Field("tfidf", description="The sparse index that screens a corpus's "
                                               "windows for each sentence: TF-IDF cosine or BM25.")
    ngram_min: int = Field(1, ge=1, le=3, description="Shortest word n-gram of the screening index.")
    ngram_max: int = Field(2, ge=1, le=3, description="Longest word n-gram of the screening index: bigrams match "
                           "phrases at twice a unigram index's size.")
    min_df: int = Field(1, ge=1, description="Screening terms in fewer contexts than this are dropped (a smaller "
                        "index for a large corpus; 1 keeps every term).")
    screen_k: int = Field(1000, ge=1, description="Candidates kept by screening per sentence (the paper: 20K; 1000 "
                          "is what 2 CPU cores rank in seconds).")
    contexts_per_sentence: int = Field(50, ge=1, description="|C_s|: contexts kept per sentence (the paper: 500; "
                                       "stage 3 scores 32 of them).")
    max_jaccard: float = Field(0.5, gt=0, le=1, description="Diversity: a context whose word set shares this much "
                               "with a kept one is skipped.")
    one_per_chunk: bool = Field(True, description="At most one context per document chunk: C_s spans documents, "
                                "not one document's neighbouring windows.")
    exclude_self: bool = Field(
        True, description="Skip windows that contain the sentence itself (a corpus-drawn anchor would fit its own "
        "neighbours: self-retrieval).")
    screen_weight: float = Field(
        1.0, ge=0, description="Ranking = z(coherence) + screen_weight·z(screening score); 0: coherence alone, as in "
        "the paper (docs/results.md: why the default mixes).")


class CoherenceSettings(Settings):
    """The coherence model p(y=1 | c<, s, c>) that ranks the screened candidates: a frozen encoder's head or a
    BiLSTM trained on the corpus."""

    NOT_IN_KEY: ClassVar[frozenset[str]] = frozenset({"device"})  # where it trains, not what (tasks.core.stage)
    # Training windows when `max_train_contexts` is left unset, per ranker (benchmarks/coherence.py,
    # docs/results.md): the BiLSTM's 60k reach the paper's larger model's held-out AUC at a third of its time; a
    # frozen encoder's head has three weights, which 10k fit as well as 60k in a sixth of the encoding.
    DEFAULT_TRAIN_CONTEXTS: ClassVar[dict[str, int]] = {"bilstm": 60_000, "encoder": 10_000}

    max_train_contexts: int | None = Field(None, ge=10, description="Positives sampled for training (+ as many "
                                    "negatives); unset: 60,000 for the BiLSTM, 10,000 for a frozen encoder's head.")
    heldout_fraction: float = Field(0.1, gt=0, lt=0.5, description="Share of the training windows held out to score "
                                    "the model (its ROC AUC in the manifest).")
    epochs: int = Field(1, ge=1, le=50, description="BiLSTM: training epochs (one reaches two epochs' held-out AUC of "
                        "the paper's larger model).")
    batch_size: int = Field(256, ge=2, description="BiLSTM: training batch size.")
    lr: float = Field(2e-3, gt=0, description="BiLSTM: Adam's learning rate.")
    embedding_dim: int = Field(100, ge=8, description="BiLSTM: word embedding size (word2vec's usual 100).")
    hidden: int = Field(128, ge=8, description="BiLSTM hidden size (the paper: 300; 128 trains ~3× faster on a CPU).")
    max_len: int = Field(64, ge=4, description="Tokens kept per text (the end nearest the gap).")
    vocab_size: int = Field(30_000, ge=100, description="BiLSTM: most frequent corpus words kept; the rest share "
                            "one unknown token.")
    word2vec_epochs: int = Field(3, ge=0, le=20, description="BiLSTM: word embeddings start from word2vec trained on "
                                 "the corpus this many epochs (0: random).")
    seed: int = Field(DEFAULT_SEED, description="Seed of the training sample, split and initialisation.")
    device: DeviceSetting = Field("auto", description=DEVICE_DESCRIPTION)
    encoder: str = Field(
        DEFAULT_ENCODER, description="The ranker: a frozen sentence encoder (registered name or folder) with a "
        "logistic head on its cosines, or 'bilstm' (Sun et al. 2022's model: faster, ranks worse).")
    precision: Literal["auto", "float32", "bfloat16"] = Field(
        "auto", description="A frozen encoder's encoding: 'auto' = bf16 where native (GPU, AVX-512-BF16 or AMX CPU: "
        "faster, the same AUC), else float32; the BiLSTM ignores it.")

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
    """Contexts retrieved from the corpus, written by the LLM around each sentence, or both."""

    source: Literal["retrieved", "generated", "both"] = Field(
        "retrieved", description="Where C_s comes from: the corpus (screening + coherence ranking), the LLM writing "
        "(c<, c>) around each sentence, or both interleaved.")
    genres: list[str] = Field(["news report", "encyclopedia article", "forum post", "short story"], min_length=1,
                              description="Genres the LLM places the sentence in (one request per genre and draw): "
                              "varied contexts.")
    draws_per_genre: int = Field(1, ge=1, le=16, description="Requests per (sentence, genre), each with its own "
                                 "seed.")
    temperature: float = Field(0.8, ge=0, le=2, description="Sampling temperature of written contexts: varied, "
                               "still fluent.")
    max_tokens: int = Field(120, ge=16, description="Completion tokens per request: two sides of a few sentences.")
    min_words: int = Field(3, ge=1, description="A side with fewer words is garbled.")
    max_words: int = Field(60, ge=5, description="A side with more words is garbled (a run-on answer).")
    max_copy_jaccard: float = Field(0.7, gt=0, le=1, description="A side sharing this share of its word set with the "
                                    "sentence is a copy of it.")
    max_jaccard: float = Field(0.5, gt=0, le=1, description="Diversity: a c< this similar to an accepted one is "
                               "rejected (the rule of the retrieved contexts).")
    seed: int = Field(DEFAULT_SEED, description="Seed of the first draw of each request.")

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
    selection: SelectionSettings = Field(SelectionSettings(), description="Screening and the choice of C_s.")
    coherence: CoherenceSettings = Field(CoherenceSettings(), description="The coherence model that ranks "
                                         "candidates.")
    source: ContextSourceSettings = Field(ContextSourceSettings(), description="Retrieved or LLM-written contexts.")
    shard_size: int = Field(256, ge=1, description="Query sentences per shard (a shard is the unit of resumption).")
    execution: ExecutionSettings = Field(ExecutionSettings(), description="Where the shards run.")

    def corpora_or(self, default: CorpusSettings) -> list[CorpusSettings]:
        """The corpora to read: the ones given, else `default` (the default corpus, or the pipeline's stage 1's)."""
        return list(self.corpora) if self.corpora else [default]
