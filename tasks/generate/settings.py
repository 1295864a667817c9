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

    temperature: float = Field(0.7, ge=0, le=2, description="Sampling temperature of a first attempt: varied "
                               "rewrites that still keep to the instruction.")
    temperature_step: float = Field(0.2, ge=0, le=1, description="Added to the temperature per retry of a rejected "
                                    "generation, so a retry does not repeat the rejected answer.")
    top_p: float = Field(0.95, gt=0, le=1, description="Nucleus sampling: the unlikely tail (5 % of the probability) is "
                         "never drawn.")
    max_tokens: int = Field(64, ge=8, le=4096, description="Completion tokens per generation: a sentence fits; longer "
                            "outputs are explanations.")
    candidates: int = Field(4, ge=1, le=16, description="Best of N: choices per request (`n`), the rule-passing one "
                            "that drifted least kept; 4 = llama-server's default slots (an endpoint ignoring n gives 1).")
    intermediate_choice: IntermediateChoice = Field(
        "fewest_added", description="Best of N for intermediates: 'fewest_added' (fewest content words the anchor "
        "lacks, then the pattern's cosine: deletions win) or 'pattern_cosine' alone (prefers rewrites).")

    def key_exclusions(self) -> frozenset[str]:
        """`intermediate_choice` enters the key only when it differs from the rule before it ('pattern_cosine'): a run
        from before it keeps its key."""
        return self.NOT_IN_KEY | (frozenset({"intermediate_choice"}) if self.intermediate_choice == "pattern_cosine"
                                  else frozenset())


class ValidationSettings(Settings):
    """Rules a generation must pass (see tasks/generate/validation.py for each rule)."""

    min_words: int = Field(3, ge=1, description="Fewer words: too_short (a fragment, not a sentence).")
    max_words: int = Field(80, ge=1, description="More words: too_long (a run-on answer or an explanation).")
    max_length_ratio: float = Field(3.0, gt=0, description="Max words of output / words of its base: a longer one "
                                    "added content.")
    near_copy_threshold: float = Field(0.9, gt=0, le=1, description="Character similarity ratio to the base at or "
                                       "above which a generation is a near-copy (it changed nothing).")
    intermediate_must_be_shorter: bool = Field(True, description="An intermediate must have fewer words than its "
                                               "base: it leaves details out.")
    facts: bool = Field(True, description="Positives keep the anchor's numbers, names and dates (fact_dropped); "
                        "positives and intermediates add none (fact_added).")
    copied_example: bool = Field(True, description="Quarantine a generation (near-)equal to a sentence of its "
                                 "prompt's examples (copied_example): a small LLM copies them.")
    copy_jaccard: float = Field(0.7, gt=0, le=1, description="copied_example: character 5-gram Jaccard at or above "
                                "which it is a copy (build-dataset's near-duplicate rule).")
    deletion_allowance: int | None = Field(None, ge=0, description="Intermediates may add at most this many words "
                                           "(beside function words) to what they delete from (not_deletion); None: "
                                           "off.")
    negative_max_cosine: float | None = Field(0.8, gt=0, le=1, description="STS pattern: a negative whose encoder "
                                              "cosine to the anchor is at or above this is a paraphrase "
                                              "(negative_too_close); None: off.")

    @model_validator(mode="after")
    def _bounds(self) -> "ValidationSettings":
        if self.min_words > self.max_words:
            raise ValueError(f"min_words ({self.min_words}) > max_words ({self.max_words})")
        return self


class PatternSettings(Settings):
    """The pattern the LLM simulates and where its few-shot examples come from."""

    kind: PatternKind = Field("sts", description="'sts' (positive, intermediate, negative from STS pairs) or 'nli' "
                              "(entailment, neutral, contradiction from SICK); sts needs no file.")
    source: str = Field(
        "default", description="The examples: 'default' (STS-B's STS12 train rows; sts only) or a SemEval TSV "
        "file/folder (sts) or a SICK file (nli).")
    examples_per_prompt: int = Field(3, ge=1, le=16, description="Example pairs per prompt: enough to show the "
                                     "relation, few enough for a short shared prefix.")
    intermediate_examples: Literal["band", "deletion"] = Field(
        "deletion", description="STS intermediates' examples: any pair of the 1–4 band, or 'deletion' (only pairs "
        "whose shorter sentence deletes words: more generations that only leave details out).")
    intermediate_base: Literal["positive", "anchor"] = Field(
        "anchor", description="What intermediates leave details out of: 'positive' (NGCSE) or 'anchor' (sᵐ does not "
        "inherit s⁺'s changes: more pure deletions).")

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
    template_dir: str | None = Field(None, description="Folder with judge-<kind>.j2 templates ({{ anchor }}, "
                                     "{{ candidate }}); None: the built-in prompts/templates/judge-<kind>.v1.j2.")
    threshold: float | None = Field(None, ge=0, le=1, description="P(pass) at or above which the judge accepts, "
                                    "every kind; None: the per-kind `thresholds`.")
    # Positive 0.63: where a logistic regression on hand-labeled generations puts P(bad) = 0.5; the intermediates'
    # fit (0.67) cost slots without better readings, so they keep 0.5 (docs/results.md).
    thresholds: dict[Literal["positive", "intermediate", "negative"], Annotated[float, Field(ge=0, le=1)]] = Field(
        {"positive": 0.63, "intermediate": 0.5, "negative": 0.5},
        description="P(pass) per kind at or above which the judge accepts (positive 0.63: fit on hand-labeled "
        "generations; the others 0.5).")

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
    roles: bool = Field(False, description="Role check (role_changed): compare who does what in the anchor and each "
                        "positive (one more request per positive); off: not better than the judge on labeled data.")
    role_min_match: float = Field(0.6, ge=0, le=1, description="Role check: each anchor action's best match in the "
                                  "positive (mean cosine of subject, verb, object) must reach this.")
    model: str | None = Field(None, description="A combined-verifier JSON (`stsgen verifier fit`) whose "
                              "P(bad) from judge, cosine, facts and length rejects accepted generations; None: off.")


class GenerateSettings(Settings):
    """Stage 1's settings: everything that determines its output besides the LLM endpoint (the cache key is computed
    from these, the endpoint's model and the input hashes). The judge samples with `seed` too."""

    # avoid_used_sources enters the key as the set of sources it avoided (none: the key of a run without it); how
    # requests are sent (the Batch API, the order) does not change what they return.
    NOT_IN_KEY: ClassVar[frozenset[str]] = frozenset({"batch_size", "avoid_used_sources", "batch_api", "batch_poll_s",
                                                       "request_order"})

    n: int = Field(30, ge=1, description="Source sentences (anchors) of a run: 30 is a main job of minutes on 2 CPU "
                   "cores.")
    seed: int = Field(DEFAULT_SEED, description="Seed of the anchor sample and of every request (the judge's too): "
                      "the same seed repeats a run.")
    corpus: CorpusSettings = Field(CorpusSettings(), description="The corpus anchors are sampled from.")
    anchors: AnchorSettings = AnchorSettings()
    pattern: PatternSettings = PatternSettings()
    sampling: SamplingSettings = SamplingSettings()
    validation: ValidationSettings = ValidationSettings()
    verifier: VerifierSettings = VerifierSettings()
    max_attempts: int = Field(3, ge=1, le=10, description="Generations tried per slot before quarantine.")
    batch_size: int = Field(32, ge=1, le=10_000, description="Requests per batch (one prompt kind).")
    avoid_used_sources: bool = Field(
        False, description="Skip source sentences earlier runs in the same output directory used: scheduled runs grow "
        "one dataset instead of repeating sources.")
    batch_api: bool = Field(
        False, description="Send requests through the OpenAI Batch API (half the price, results within 24 h; "
        "resumable), one batch per prompt kind and attempt round; off: one chat call each.")
    batch_poll_s: float = Field(5.0, gt=0, description="Seconds between status polls of a submitted batch.")
    request_order: Literal["auto", "by_source", "by_kind"] = Field(
        "auto", description="Same requests either way: 'by_source' keeps a multi-slot server busy, 'by_kind' reuses "
        "one prefix on a single slot; 'auto': by_kind with the Batch API or llama-cpp-python, else by_source.")

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
