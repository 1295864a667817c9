"""The checks that see what a reader sees (issue 34): a prompt example copied verbatim (`copied_example`), an
intermediate that rewrites instead of deleting (`not_deletion`), a negative inside the paraphrase band
(`negative_too_close`, over real HTTP with the scripted OpenAI-compatible server), and a template that shows no
examples — each quarantined (or refused) with its reason, nothing lost."""

from __future__ import annotations

import asyncio

import pytest

from tasks.core.config import ConfigError, LLMSettings
from tasks.generate.candidates import Chooser
from tasks.generate.generation import Plan, Slot, generate_slots
from tasks.generate.patterns import PatternPair
from tasks.generate.settings import GenerateSettings, SamplingSettings, ValidationSettings
from tasks.generate.validation import added_words, prompt_example_sentences, validate
from tasks.llm.client import LLMClient
from tasks.llm.prompting import PromptTemplate, load_template
from tasks.llm.scripted_server import ScriptedOpenAI

ANCHOR = "The broader market index fell sharply on Tuesday as oil prices climbed."
EXAMPLE = "The broader Standard & Poor's 500 Index gave up 11.91 points, or 1.2 percent, to 986.60."


def test_a_prompt_example_copied_verbatim_or_nearly_is_quarantined():
    examples = (EXAMPLE, "A man is playing a guitar.")
    for text in (EXAMPLE, EXAMPLE.replace("gave up", "lost")):  # verbatim, and one word changed
        verdict = validate(text, kind="negative", base=ANCHOR, anchor=ANCHOR, examples=examples)
        assert verdict.reason == "copied_example" and "Standard" in verdict.detail
    assert validate("A cat sleeps on the warm windowsill.", kind="negative", base=ANCHOR, anchor=ANCHOR,
                    examples=examples).ok
    off = ValidationSettings(copied_example=False)
    assert validate(EXAMPLE, kind="negative", base=ANCHOR, anchor=ANCHOR, examples=examples, settings=off).ok


def test_intermediates_that_only_delete_pass_and_a_substituted_word_does_not():
    base = "Pilots spend seven hours training for every actual hour of flight in the simulator."
    strict = ValidationSettings(deletion_allowance=0)
    deletion = "Pilots spend seven hours training for every hour of flight."
    assert added_words(deletion, base) == []
    assert validate(deletion, kind="intermediate", base=base, anchor=base, settings=strict).ok
    rewrite = "Pilots spend seven hours preparing for the flight."  # "preparing" is no deletion of "training"
    verdict = validate(rewrite, kind="intermediate", base=base, anchor=base, settings=strict)
    assert verdict.reason == "not_deletion" and "preparing" in verdict.detail
    assert validate(rewrite, kind="intermediate", base=base, anchor=base,
                    settings=ValidationSettings(deletion_allowance=1)).ok  # within the allowance
    assert validate(rewrite, kind="intermediate", base=base, anchor=base).ok  # off by default
    # A clause moved to the front costs its own words only; a negation is new content, never a function word.
    assert added_words("On Tuesday, the mayor resigned after the vote.",
                       "The mayor resigned after the vote on Tuesday.") == ["tuesday"]
    assert added_words("The team was not paid.", "The team was paid on Friday by the club.") == ["not"]
    # A function word a dropped clause leaves behind is no rewrite; the anchor counts as a source too.
    assert validate("Pilots spend seven hours training for it.", kind="intermediate", base=base, anchor=base,
                    settings=strict).ok


def test_an_intermediate_may_delete_from_the_anchor_when_its_base_is_another_sentence():
    """With pattern.intermediate_base 'positive' the base is s⁺, not the anchor: an intermediate that only deletes
    from the anchor (not from its base) passes, as does one that only deletes from its base; one that is a
    deletion of neither is quarantined."""
    anchor = "Pilots spend seven hours training for every actual hour of flight in the simulator."
    base = "In the simulator, pilots train seven hours for each real hour they fly."  # the positive
    strict = ValidationSettings(deletion_allowance=0)
    from_anchor = "Pilots spend seven hours training for every hour of flight."
    assert added_words(from_anchor, anchor) == [] and len(added_words(from_anchor, base)) >= 3
    assert validate(from_anchor, kind="intermediate", base=base, anchor=anchor, settings=strict).ok
    from_base = "Pilots train seven hours for each hour they fly."
    assert added_words(from_base, base) == [] and added_words(from_base, anchor)
    assert validate(from_base, kind="intermediate", base=base, anchor=anchor, settings=strict).ok
    neither = "Pilots train seven hours for every hour of flight."  # "train" from the base, "flight" from the anchor
    verdict = validate(neither, kind="intermediate", base=base, anchor=anchor, settings=strict)
    assert verdict.reason == "not_deletion"


def test_a_negative_in_the_paraphrase_band_is_quarantined_with_its_cosine(tmp_path):
    paraphrase = "Oil prices climbed on Tuesday and the broader market index fell sharply."
    unrelated = "The choir rehearsed a new hymn in the old chapel."

    def responder(messages, body):
        return paraphrase if body["temperature"] < 0.8 else unrelated  # attempt 0 paraphrases, attempt 1 does not

    template = load_template("sts", "negative")
    plan = Plan({"negative": template}, {"negative": template.system_message([{"sentence1": "a", "sentence2": "b"}])},
                {}, Chooser(negative_max_cosine=0.8), GenerateSettings(sampling=SamplingSettings(candidates=1),
                                                                       seed=13))
    slot = Slot("s1", "negative", ANCHOR, ANCHOR, ())
    with ScriptedOpenAI(responder=responder) as server:
        settings = LLMSettings(base_url=server.base_url, model="scripted-model",
                               cache_path=str(tmp_path / "llm.sqlite"), backoff_base_s=0.01)
        accepted, rejected = asyncio.run(generate_slots([slot], plan, LLMClient(settings)))
    assert [g.text for g in accepted] == [unrelated] and accepted[0].attempts == 2
    assert [(r["reason"], r["text"]) for r in rejected] == [("negative_too_close", paraphrase)]  # kept, with why
    assert "cosine to the anchor" in rejected[0]["detail"]
    assert Chooser().too_close("negative", 0.99) is None  # no ceiling, no band
    assert Chooser(negative_max_cosine=0.8).too_close("positive", 0.99) is None  # negatives only


def test_a_template_that_shows_no_examples_is_refused_before_anything_is_spent():
    examples = [PatternPair("f:1", "A man plays a guitar.", "A man plays music.", 4.0)]
    shown = prompt_example_sentences(load_template("sts", "positive"), examples)
    assert set(shown) == {"A man plays a guitar.", "A man plays music."}
    blind = PromptTemplate("sts", "positive", "v9", "Rewrite the sentence. Answer with one sentence.")
    with pytest.raises(ConfigError, match=r"sts-positive.v9.j2: the prompt shows none of its 1 examples"):
        prompt_example_sentences(blind, examples)


def test_the_stage_refuses_a_template_without_examples_and_writes_nothing(monkeypatch, tmp_path):
    from flows.generate_sts_triples import generate_sts_triples
    from tasks.generate import stage

    monkeypatch.setattr(stage, "load_template", lambda pattern, kind: PromptTemplate(pattern, kind, "v9", "Rewrite."))
    with pytest.raises(ConfigError, match="shows none of its"):
        generate_sts_triples.fn(settings=GenerateSettings(n=2), llm=LLMSettings(base_url="http://127.0.0.1:9/v1",
                                                                                 model="m"),
                                output_dir=str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
