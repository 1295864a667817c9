"""Stage 3's settings (`LabelSettings`): what the labels are computed from (the λ terms of S(s, c), the scoring LM
and its endpoint, the contexts and how two score rows become a label) and how the rating and TF-IDF mix in; the
stage's one settings object, validated at the edge. The work is in tasks/label/labeling.py."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from tasks.core.config import DEFAULT_SEED, LLMSettings, Settings, key_fields
from tasks.core.defaults import DEFAULT_LM, DEFAULT_TEACHER
from tasks.core.device import DEVICE_DESCRIPTION, DeviceSetting
from tasks.core.runners import ExecutionSettings
from tasks.label.label_similarity import Similarity
from tasks.label.llm_rating import RatingSettings

TERMS = ("disc", "lm_sentence", "lm_left", "lm_right")
DEFAULT_CANDIDATES = 32  # stage-2 contexts per sentence scored for the Eq. 3 choice (stage 2 retrieves 50)
# λ1 and the mix were chosen with the frozen-encoder ranker (stage 2's default); the BiLSTM's were λ1 0.25, mix 0.7/0.3/0
DEFAULT_LAMBDA_DISC = 2.0


LabelMethod = Literal["context", "llm_rating", "combined"]


class ScoringEndpoint(LLMSettings):
    """`label.lm_endpoint`: an OpenAI-compatible endpoint that echoes prompt log-probs on /completions (vLLM,
    llama-cpp-python's server). The shared client settings (response cache, retries, pacing) with the scorer's own
    key variable and concurrency; its URL and key variable stay out of every key (LLMSettings.NOT_IN_KEY)."""

    base_url: str = Field(..., description="The scoring endpoint's base URL (…/v1).")
    model: str = Field(..., description="The model name it serves.")
    api_key_env: str = Field("STSGEN_LM_API_KEY", description="Env var holding the endpoint's API key.")
    max_concurrency: int = Field(8, ge=1, le=1024, description="Scoring requests in flight to the endpoint.")

    # Prompt log-probs take no grammar: the answer constraint does not change a score.
    NOT_IN_KEY: ClassVar[frozenset[str]] = LLMSettings.NOT_IN_KEY | {"constrained_answers"}


class LabelSettings(Settings):
    # How the scoring runs, not what it computes: left out of every cache key (tasks.core.config.key_fields).
    # `calibration` enters the stage key as its file's content (tasks/label/stage.py), not its path.
    NOT_IN_KEY: ClassVar[frozenset[str]] = frozenset({"max_batch_tokens", "threads", "device", "shard_size",
                                                      "execution", "calibration"})
    # How finished context scores and ratings become a label, not the scores themselves: shards are keyed without
    # them, so changing them re-scores nothing.
    LABEL_ONLY: ClassVar[frozenset[str]] = frozenset({"method", "rating", "rating_weight", "tfidf_weight",
                                                      "teacher_weight", "teacher"})

    def key_exclusions(self) -> frozenset[str]:
        """The teacher's fields enter the key only when it is mixed in (a run without it keeps its earlier key), and
        its name or folder never does: the stage key holds its content's sha256 instead."""
        return self.NOT_IN_KEY | ({"teacher"} if self.uses_teacher else {"teacher", "teacher_weight"})

    def score_fields(self) -> dict:
        """The fields the (sentence, context) scores depend on: the shards' key."""
        return {k: v for k, v in key_fields(self).items() if k not in self.LABEL_ONLY}

    method: LabelMethod = Field(
        "combined", description="'context' (context-vector labels, Sun et al. 2022), 'llm_rating' (the LLM's 0–5 "
        "rating) or 'combined': the weighted mix of rating, TF-IDF, teacher and context label (docs/results.md).")
    rating: RatingSettings = Field(RatingSettings(), description="The LLM rating's prompt and sampling.")
    # The mix 0.6 / 0.2 / 0.2 was best on STS-B dev with the encoder ranker and λ1 2, confirmed on a second sample
    # (docs/results.md, "λ1 for the encoder head"); with the BiLSTM ranker 0.7 / 0.3 / 0.
    rating_weight: float = Field(0.6, ge=0, le=1, description="Weight of the LLM rating in method='combined' (0.6 "
                                 "with tfidf_weight 0.2: best on STS-B dev, docs/results.md).")
    tfidf_weight: float = Field(0.2, ge=0, le=1, description="Weight of the pair's TF-IDF cosine in "
                                "method='combined'; the context label gets what the three weights leave.")
    teacher_weight: float = Field(0.0, ge=0, le=1, description="Weight of the encoder teacher's cosine in "
                                  "method='combined' (needs `./stsgen teacher fetch`); 0: the default mix needs no "
                                  "teacher.")
    teacher: str = Field(DEFAULT_TEACHER, description="The teacher of teacher_weight: the registered one (after "
                         "`./stsgen teacher fetch`) or a sentence-transformers folder.")

    @model_validator(mode="after")
    def _weights_sum_to_at_most_one(self):
        if self.rating_weight + self.tfidf_weight + self.teacher_weight > 1 + 1e-9:
            raise ValueError(f"rating_weight ({self.rating_weight}) + tfidf_weight ({self.tfidf_weight}) + "
                             f"teacher_weight ({self.teacher_weight}) must be at most 1: the context label gets the rest")
        return self

    @property
    def context_weight(self) -> float:
        # rounded: 1 − 0.7 − 0.3 is 5.6e-17
        return max(0.0, round(1.0 - self.rating_weight - self.tfidf_weight - self.teacher_weight, 9))

    @property
    def uses_teacher(self) -> bool:
        return self.method == "combined" and self.teacher_weight > 0

    lambda_disc: float = Field(DEFAULT_LAMBDA_DISC, description="λ1: weight of the discriminative coherence "
                               "log-probability (2 with the encoder ranker; 0.25 suits the BiLSTM's logits).")
    lambda_sentence: float = Field(1.0, description="λ2: (1/|s|) log p(s | c<) from the causal LM.")
    lambda_left: float = Field(0.0, description="λ3: (1/|c<|) log p(c< | s, c>), reversed-order approximation; off: "
                               "a causal LM reads c< before s.")
    lambda_right: float = Field(0.0, description="λ4: (1/|c>|) log p(c> | c<, s) from the causal LM; off: it lowered "
                                "STS-B dev Spearman (docs/results.md).")
    lm: str = Field(DEFAULT_LM, description="The scoring causal LM (registered name, .gguf file or transformers "
                    "folder), or with lm_endpoint its tokenizer; a small one scores fast on a CPU.")
    lm_endpoint: ScoringEndpoint | None = Field(None, description="Score (s, c) at this endpoint instead of "
                                                "in-process; None: in-process.")
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto", description="In-process scorer's dtype: 'auto' = bfloat16 where native (GPU, AVX-512-BF16 or AMX "
        "CPU: faster, the same labels), float32 elsewhere.")
    scorer: Literal["transformers", "llama_cpp"] = Field(
        "transformers", description="In-process LM scorer: 'transformers' (torch, CPU or GPU) or 'llama_cpp' (the "
        "GGUF quantized, CPU); the same labels, transformers faster on 2 cores.")
    contexts_per_sentence: int = Field(24, ge=1, description="|C_s|: contexts per sentence in the label's union "
                                       "(stage 2 retrieves more to choose from).")
    context_selection: Literal["score", "rank"] = Field(
        "score", description="How C_s is chosen among the candidates: 'score' = the k the sentence fits best by "
        "S(s, c) (Sun et al. 2022, Eq. 3); 'rank' = stage 2's top k.")
    candidates_per_sentence: int | None = Field(None, ge=1, description="context_selection='score': stage-2 contexts "
                                                "scored per sentence; None: max(32, contexts_per_sentence).")
    max_segment_tokens: int = Field(48, ge=4, description="LM tokens kept per text (c< keeps its end).")
    max_batch_tokens: int = Field(2048, ge=64, description="Padded tokens per forward pass (memory, not results).")
    similarity: Similarity = Field("contrast", description="How two sentences' score rows become a label: "
                                   "centered_cosine, cosine (the paper's), rank or contrast "
                                   "(tasks/label/label_similarity.py).")
    lm_prompt: Literal["left", "right_first"] = Field(
        "left", description="What the LM reads before s: 'left' = c<; 'right_first' = c> then c< (the text after the "
        "gap made visible; λ3 and λ4 must be 0).")
    start_token: str = Field("bos", description="Token before every LM prefix: 'bos', 'eos' (the tokenizer's), or a "
                             "literal token such as '<|endoftext|>'.")
    lm_reference_sentences: int = Field(0, ge=0, description="λ2's per-context correction: subtract the mean "
                                        "log p(r | c<) of this many reference sentences; 0: off.")
    min_contexts: int = Field(3, ge=1, description="Pairs whose union has fewer contexts are quarantined (with "
                              "centring, 2 contexts give labels of ±1).")
    cross_pairs_per_triple: int = Field(1, ge=0, description="Random cross-triple pairs per triple: low-similarity "
                                        "examples for calibration.")
    context_baseline: bool = Field(True, description="Subtract each context's score without the sentence, so a label "
                                   "reads how s changes the context's fit, not how likely the context is.")
    reference_sentences: int = Field(32, ge=0, description="Sentences sampled once per run for the disc baseline.")
    seed: int = Field(DEFAULT_SEED, description="Seed of the reference and cross-pair samples.")
    threads: int | None = Field(None, ge=1, description="torch threads (default: torch's choice).")
    device: DeviceSetting = Field("auto", description=DEVICE_DESCRIPTION)
    calibration: str | None = Field(None, description="A labeled pairs.parquet (label and gold columns) to fit a "
                                    "monotone map of labels onto 0–5; None: labels as computed.")
    shard_size: int = Field(8, ge=1, description="Pairs' sentences per scoring shard (a shard is the unit of "
                            "resumption).")
    execution: ExecutionSettings = Field(ExecutionSettings(), description="Where the shards run.")

    @model_validator(mode="after")
    def _usable(self) -> "LabelSettings":
        if not any(self.weights().values()):
            raise ValueError("every λ is 0: set at least one of lambda_disc, lambda_sentence, lambda_left, "
                             "lambda_right")
        if self.lm_prompt == "right_first" and (self.lambda_right or self.lambda_left):
            raise ValueError("lm_prompt='right_first' already shows c> before s: set lambda_right and lambda_left to 0")
        if self.context_selection == "score" and self.candidates() < self.contexts_per_sentence:
            raise ValueError(f"candidates_per_sentence ({self.candidates_per_sentence}) < contexts_per_sentence "
                             f"({self.contexts_per_sentence}): C_s is chosen among the candidates")
        if self.lm_reference_sentences > self.reference_sentences:
            raise ValueError(f"lm_reference_sentences ({self.lm_reference_sentences}) > reference_sentences "
                             f"({self.reference_sentences}): the LM's references are drawn from that sample")
        if is_endpoint(self.lm):
            raise ValueError("label.lm is a URL: put the scoring endpoint in label.lm_endpoint (base_url, model) and "
                             "the served model's tokenizer (a registered local model, a .gguf file or a transformers "
                             "folder) in label.lm, so segment boundaries are counted in its tokens")
        if self.similarity == "centered_cosine" and self.min_contexts < 3:
            raise ValueError("min_contexts must be ≥ 3 with similarity='centered_cosine' (two centred values are always ±1 "
                             "apart: the label would be the sign of a difference)")
        return self

    def candidates(self) -> int:
        """Stage-2 contexts per sentence that enter its unit (and are scored)."""
        if self.context_selection == "rank":
            return self.contexts_per_sentence
        return self.candidates_per_sentence or max(DEFAULT_CANDIDATES, self.contexts_per_sentence)

    def weights(self) -> dict[str, float]:
        return dict(zip(TERMS, (self.lambda_disc, self.lambda_sentence, self.lambda_left, self.lambda_right)))


def ranker_note(settings: LabelSettings, coherence_manifest: dict) -> str | None:
    """A warning when the coherence model scoring λ1 is a BiLSTM (its manifest names no frozen encoder) and stage 3
    keeps what was chosen with the encoder head: λ1 = 2 (the BiLSTM's logits have another scale) or the context label
    in the mix (never measured with the BiLSTM as a partner that helps); None otherwise."""
    off = [f"label.lambda_disc = {settings.lambda_disc}"] if settings.lambda_disc == DEFAULT_LAMBDA_DISC else []
    if settings.method == "combined" and settings.context_weight > 0:
        off.append(f"the context label's weight {settings.context_weight:g}")
    if coherence_manifest.get("encoder") or not off:
        return None
    return (f"{' and '.join(off)} were chosen with the frozen-encoder ranker, but the coherence model scoring λ1 is "
            "a BiLSTM; its measured settings are label.lambda_disc = 0.25, label.rating_weight = 0.7, "
            "label.tfidf_weight = 0.3 (docs/results.md)")


def is_endpoint(source: str) -> bool:
    return source.startswith(("http://", "https://"))
