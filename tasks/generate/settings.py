"""Stage 1's settings (generate-sts-triples), owned by the stage: sampling, validation rules, the pattern source, the
verifier, and `GenerateSettings` — the one settings object the stage's flow takes: everything that determines the
stage's output but the LLM endpoint (its cache key is computed from both and the input hashes). Shared settings (the
LLM endpoint, the corpus) are tasks.core.config's."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from tasks.core.config import DEFAULT_SEED, CorpusSettings, LLMSettings, Settings
from tasks.core.defaults import DEFAULT_ENCODER
from tasks.generate.anchors import AnchorSettings

PatternKind = Literal["sts", "nli"]
IntermediateChoice = Literal["fewest_added", "pattern_cosine"]  # best of N for intermediates (candidates.rank)


class SamplingSettings(Settings):
    """Sampling for generations; attempt k of a rejected generation adds k*temperature_step."""

    temperature: float = Field(0.7, ge=0, le=2)
    temperature_step: float = Field(0.2, ge=0, le=1)
    top_p: float = Field(0.95, gt=0, le=1)
    max_tokens: int = Field(64, ge=8, le=4096, description="A sentence fits; longer outputs are explanations.")
    candidates: int = Field(4, ge=1, le=16, description="Best of N: choices asked for in one request (`n`); the rule-"
                            "passing one that drifted least is kept (tasks/generate/candidates.py). llama-server "
                            "allows n up to its --parallel slots (4 by default); an endpoint that ignores n gives one.")
    intermediate_choice: IntermediateChoice = Field(
        "fewest_added", description="Best of N for intermediates, after fewest facts added: 'fewest_added' prefers the "
        "candidate with the fewest content words its anchor lacks (one that only leaves details out), then the "
        "pattern's cosine; 'pattern_cosine' (before issue 34) the pattern's cosine alone, which prefers rewrites.")

    def key_exclusions(self) -> frozenset[str]:
        """`intermediate_choice` enters the key only when it differs from the rule before it ('pattern_cosine'): a run
        from before it keeps its key."""
        return self.NOT_IN_KEY | (frozenset({"intermediate_choice"}) if self.intermediate_choice == "pattern_cosine"
                                  else frozenset())


class ValidationSettings(Settings):
    """Rules a generation must pass (see tasks/generate/validation.py for each rule)."""

    min_words: int = Field(3, ge=1)
    max_words: int = Field(80, ge=1)
    max_length_ratio: float = Field(3.0, gt=0, description="Max words of output / words of its base.")
    near_copy_threshold: float = Field(0.9, gt=0, le=1, description="Similarity ratio at or above = near-copy.")
    intermediate_must_be_shorter: bool = True
    facts: bool = Field(True, description="Positives keep every number, name and date of the anchor (fact_dropped), "
                        "positives and intermediates add none (fact_added); tasks/generate/facts.py.")
    copied_example: bool = Field(True, description="Quarantine a generation equal or near-equal to a sentence of its "
                                 "prompt's examples (copied_example).")
    copy_jaccard: float = Field(0.7, gt=0, le=1, description="copied_example: character 5-gram Jaccard at or above "
                                "= a copy (build-dataset's near-duplicate rule).")
    deletion_allowance: int | None = Field(None, ge=0, description="Intermediates must only delete words from "
                                           "their base or the anchor, adding at most this many other words beside "
                                           "function words (not_deletion); None = off.")
    negative_max_cosine: float | None = Field(0.8, gt=0, le=1, description="STS pattern: quarantine a negative "
                                              "whose all-MiniLM-L6-v2 cosine to the anchor is at or above this "
                                              "(negative_too_close: a paraphrase, or s⁺ with a word changed — the "
                                              "pattern's negatives say something else); None = off.")

    @model_validator(mode="after")
    def _bounds(self) -> "ValidationSettings":
        if self.min_words > self.max_words:
            raise ValueError(f"min_words ({self.min_words}) > max_words ({self.max_words})")
        return self


class PatternSettings(Settings):
    kind: PatternKind = "sts"
    source: str = Field(
        "default",
        description="'default' (STS12 train rows of STS-B for sts; required path for nli) or a path to "
        "a SemEval TSV file/folder (sts) or a SICK file (nli).",
    )
    examples_per_prompt: int = Field(3, ge=1, le=16)
    intermediate_examples: Literal["band", "deletion"] = Field(
        "deletion", description="STS intermediates' examples: any pair of the 1–4 band, or only its pairs whose shorter "
        "sentence deletes words from the longer (shown longer → shorter, as the prompt asks: omit details). "
        "'deletion' raised the chosen intermediates that only delete from 53 % to 75 % (59 positives; "
        "benchmarks/negative_prompts.py).")
    intermediate_base: Literal["positive", "anchor"] = Field(
        "anchor", description="What intermediates are derived from: 'positive' (seed 004: s⁺ with details left out) "
        "or 'anchor' (the anchor with details left out: sᵐ does not inherit s⁺'s changes). 'anchor' raised the chosen "
        "intermediates that only delete words from the anchor from 5/39 to 24/40 (benchmarks/negative_prompts.py, "
        "docs/benchmarks.md issue 34).")

    def key_exclusions(self) -> frozenset[str]:
        """`intermediate_examples` ('band') and `intermediate_base` ('positive') enter the key only when they differ
        from the values before them: a run from before them keeps its key."""
        return self.NOT_IN_KEY | (frozenset({"intermediate_examples"}) if self.intermediate_examples == "band"
                                  else frozenset()) | (frozenset({"intermediate_base"})
                                                       if self.intermediate_base == "positive" else frozenset())

    @field_validator("source")
    @classmethod
    def _nonempty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("pattern source must be 'default' or a path")
        return v


class VerifierSettings(Settings):
    """Checks of each generation after the rules (tasks/generate/verification.py): an LLM judge per kind, and optionally an
    encoder ordering check per triple. Rejections are quarantined with their reason and retried like any other."""

    judge: bool = Field(True, description="Ask an LLM judge one yes/no question per generation.")
    judged_kinds: tuple[Literal["positive", "intermediate", "negative"], ...] = Field(
        ("positive", "intermediate", "negative"), min_length=1,
        description="The kinds the judge is asked about (one request per judged generation).")
    llm: LLMSettings | None = Field(None, description="The judge's endpoint and model; None = the generator's.")
    template_dir: str | None = Field(None, description="Folder with judge-positive.j2, judge-intermediate.j2 and "
                                     "judge-negative.j2 (placeholders {{ anchor }}, {{ candidate }}; a {# passes: no #} "
                                     "comment when 'no' is the passing answer); None = the built-in "
                                     "prompts/templates/judge-<kind>.v1.j2.")
    threshold: float | None = Field(None, ge=0, le=1, description="P(pass) at or above which the judge accepts, "
                                    "every kind; None: the per-kind `thresholds`.")
    thresholds: dict[Literal["positive", "intermediate", "negative"], Annotated[float, Field(ge=0, le=1)]] = Field(
        {"positive": 0.63, "intermediate": 0.5, "negative": 0.5},
        description="P(pass) per kind at or above which the judge accepts. Positive 0.63: fit on 210 hand-labeled "
        "generations (where a one-signal logistic regression with balanced classes puts P(bad) = 0.5). The fit for "
        "intermediates (0.67) cost 28 of 90 slots on the 100-sentence run without a better reading, so they keep 0.5 "
        "(docs/benchmarks.md, issue 24).")

    def key_exclusions(self) -> frozenset[str]:
        """The role check's fields enter the key only when it is on: a run without it keeps its earlier key."""
        return self.NOT_IN_KEY | (frozenset() if self.roles else frozenset({"roles", "role_min_match"}))

    def threshold_for(self, kind: str) -> float:
        return self.threshold if self.threshold is not None else self.thresholds.get(kind, 0.5)
    top_logprobs: int = Field(10, ge=0, le=20, description="Alternatives of the answer token read for P(pass) "
                              "(0: the answered word only).")
    attempts: int = Field(2, ge=1, le=5, description="Calls per generation when the judge answers neither yes nor no.")
    ordering_margin: float | None = Field(
        None, ge=0, le=2, description="Encoder ordering check: cos(a, s+) − cos(a, s−) must be at least this; "
        "None = off. A triple that fails is quarantined as ordering.")
    ordering_model: str = Field(DEFAULT_ENCODER, description="Encoder of the ordering check (a name or a "
                                "sentence-transformers folder).")
    roles: bool = Field(False, description="Role check (role_changed): the judge's endpoint lists who does what in "
                        "the anchor and in each positive, and the lists are compared with the run's encoder "
                        "(tasks/generate/roles.py); one request per positive that passed the judge. Off: measured on "
                        "70 labeled positives first (docs/benchmarks.md, issue 34).")
    role_min_match: float = Field(0.6, ge=0, le=1, description="Role check: each anchor action's best match in the "
                                  "positive (mean cosine of subject, verb, object) must reach this.")
    model: str | None = Field(None, description="A combined-verifier model file (JSON, benchmarks/verifier_combined.py):"
                              " after the judge accepts, P(bad) from the judge's P(pass), the encoder cosine, the fact "
                              "counts and the length; at or above the model's threshold → verifier_rejected. None: off.")


class GenerateSettings(Settings):
    """Stage 1's settings: everything that determines its output besides the LLM endpoint (the cache key is computed
    from these, the endpoint's model and the input hashes). The judge samples with `seed` too."""

    # avoid_used_sources enters the key as the set of sources it avoided (none: the key of a run without it); how
    # requests are sent (the Batch API, the order) does not change what they return.
    NOT_IN_KEY: ClassVar[frozenset[str]] = frozenset({"batch_size", "avoid_used_sources", "batch_api", "batch_poll_s",
                                                       "request_order"})

    n: int = Field(30, ge=1, description="Number of source sentences.")
    seed: int = DEFAULT_SEED
    corpus: CorpusSettings = CorpusSettings()
    anchors: AnchorSettings = AnchorSettings()
    pattern: PatternSettings = PatternSettings()
    sampling: SamplingSettings = SamplingSettings()
    validation: ValidationSettings = ValidationSettings()
    verifier: VerifierSettings = VerifierSettings()
    max_attempts: int = Field(3, ge=1, le=10, description="Generations tried per slot before quarantine.")
    batch_size: int = Field(32, ge=1, le=10_000, description="Requests per batch (one prompt kind).")
    avoid_used_sources: bool = Field(
        False, description="Sample no source sentence an earlier run under the same output directory already used "
        "(its triples or its quarantine): scheduled runs grow one dataset instead of repeating sources.")
    batch_api: bool = Field(
        False,
        description="Send the requests through the OpenAI Batch API (/files + /batches: half the price, results "
        "within 24 h) instead of one chat call each: one batch per prompt kind and attempt round, results put into "
        "the response cache, resumable by the batch id stored beside the cache (<cache dir>/llm-batches/).",
    )
    batch_poll_s: float = Field(5.0, gt=0, description="Seconds between status polls of a submitted batch.")
    request_order: Literal["auto", "by_source", "by_kind"] = Field(
        "auto",
        description="The request order (the same requests and results either way). 'by_source': each sentence's "
        "next kind as soon as its base is accepted — keeps a multi-slot server (llama-server, vLLM) busy; "
        "'by_kind': all positives, then all intermediates, … — one few-shot prefix at a time, for a single-slot "
        "server (llama-cpp-python's). 'auto': by_kind with the Batch API or llama-cpp-python's embedded server, "
        "by_source otherwise.",
    )

    @model_validator(mode="after")
    def _batch_api_goes_kind_by_kind(self) -> "GenerateSettings":
        if self.batch_api and self.request_order == "by_source":
            raise ValueError("request_order 'by_source' cannot be used with batch_api (a batch holds one prompt kind's "
                             "attempt round): use 'by_kind' or 'auto'")
        return self

    def resolved_request_order(self, llm: LLMSettings) -> str:
        """The order requests go in: the setting, or for 'auto' by the Batch API and the endpoint's engine."""
        if self.request_order != "auto":
            return self.request_order
        single_slot = llm.server_engine == "llama-cpp-python"
        return "by_kind" if self.batch_api or single_slot else "by_source"
