"""The role check (issue 34, `role_changed`): the LLM's "subject | verb | object" lists parsed and compared, decided on
scripted answers — over real HTTP with the scripted OpenAI-compatible server inside stage 1's slot loop — and the
refusals (the judge's endpoint down, the Batch API) before anything is written."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tasks.core.config import ConfigError, CorpusSettings, LLMSettings
from tasks.generate.candidates import Chooser
from tasks.generate.generation import Plan, Slot, generate_slots
from tasks.generate.roles import RoleCheck, parse_roles, role_template, role_verdict
from tasks.generate.settings import GenerateSettings, SamplingSettings, VerifierSettings
from tasks.llm.client import LLMClient
from tasks.llm.prompting import load_template
from tasks.llm.scripted_server import ScriptedOpenAI

ANCHOR = "Anne told Bob the news before the meeting."
KEPT = "Before the meeting, Anne informed Bob of the news."
SWAPPED = "Before the meeting, Bob told Anne the news."
LISTS = {
    KEPT: "A:\nAnne | told | Bob\nB:\nAnne | informed | Bob\n",
    SWAPPED: "A:\nAnne | told | Bob\nB:\nBob | told | Anne\n",
}


def bag_encoder(texts: list[str]) -> np.ndarray:
    """A deterministic stand-in for the run's encoder in the pure tests: one dimension per word, with `informed` and
    `told` sharing one (synonyms), so matches are decided by the words the lists hold."""
    vocab = {"anne": 0, "bob": 1, "told": 2, "informed": 2, "news": 3, "eggs": 4, "broods": 5, "lays": 6, "bird": 7}
    out = np.zeros((len(texts), 8))
    for i, text in enumerate(texts):
        for word in text.lower().split():
            out[i, vocab.get(word, 3)] += 1.0
    return out


def test_lists_are_parsed_from_the_answer_whatever_its_decoration():
    answer = "Sure! Here are the lists.\n**A:** Anne | told | Bob\n- the meeting | began | -\nB:\n1. Anne | informed\n" \
             "Note: both keep the roles."
    assert parse_roles(answer) == ([("anne", "told", "bob"), ("the meeting", "began", "-")],
                                   [("anne", "informed", "-")])
    assert parse_roles("A:\nAnne | told | Bob\n") is None  # no list for B: unparsed
    assert parse_roles("I cannot tell.") is None


def test_the_decision_on_scripted_lists_keeps_synonyms_and_catches_swaps_and_changed_verbs():
    kept, detail, score = role_verdict(*parse_roles(LISTS[KEPT]), bag_encoder, 0.6)
    assert kept and score == pytest.approx(1.0) and "every action kept" in detail
    kept, detail, _ = role_verdict(*parse_roles(LISTS[SWAPPED]), bag_encoder, 0.6)
    assert not kept and detail.startswith("roles swapped")
    verb = parse_roles("A:\nthe bird | broods | the eggs\nB:\nthe bird | lays | the eggs")
    kept, detail, score = role_verdict(*verb, bag_encoder, 0.7)
    assert not kept and "broods" in detail and score < 0.7  # subject and object kept, the action changed
    assert role_verdict(*verb, bag_encoder, 0.6)[0]  # the threshold decides: 2/3 of the roles match


def _plan(roles: RoleCheck | None) -> Plan:
    template = load_template("sts", "positive")
    return Plan({"positive": template}, {"positive": template.system_message([{"sentence1": "a", "sentence2": "b"}])},
                {}, Chooser(), GenerateSettings(sampling=SamplingSettings(candidates=1), seed=13), roles=roles)


def test_a_positive_that_swaps_who_does_what_is_quarantined_and_the_next_attempt_kept(tmp_path):
    def responder(messages, body):
        user = messages[-1]["content"]
        if "who does what" in user:  # the role check's question: the lists of the positive it shows
            return LISTS[SWAPPED if SWAPPED in user else KEPT]
        return SWAPPED if body["temperature"] < 0.8 else KEPT  # attempt 0 swaps the roles, attempt 1 keeps them

    roles = RoleCheck(role_template(), Chooser().encoder, 0.6, 2, 13)
    slot = Slot("s1", "positive", ANCHOR, ANCHOR, ())
    with ScriptedOpenAI(responder=responder) as server:
        settings = LLMSettings(base_url=server.base_url, model="scripted-model",
                               cache_path=str(tmp_path / "llm.sqlite"), backoff_base_s=0.01)
        accepted, rejected = asyncio.run(generate_slots([slot], _plan(roles), LLMClient(settings)))
        asked = [r for r in server.chat_requests() if "who does what" in r["body"]["messages"][-1]["content"]]
    assert [g.text for g in accepted] == [KEPT] and accepted[0].attempts == 2
    assert [(r["reason"], r["text"]) for r in rejected] == [("role_changed", SWAPPED)]  # kept, with why
    assert rejected[0]["detail"].startswith("roles swapped")
    assert len(asked) == 2 and ANCHOR in asked[0]["body"]["messages"][-1]["content"]  # one question per positive
    with ScriptedOpenAI(responder=responder) as server:  # the check off: the swapped positive passes
        settings = LLMSettings(base_url=server.base_url, model="scripted-model", cache_path="off")
        accepted, rejected = asyncio.run(generate_slots([slot], _plan(None), LLMClient(settings)))
    assert [g.text for g in accepted] == [SWAPPED] and rejected == []


def test_a_role_check_endpoint_that_is_down_fails_before_anything_is_written(tmp_path):
    from flows.generate_sts_triples import generate_sts_triples

    with ScriptedOpenAI() as server:
        cfg = GenerateSettings(n=2, corpus=CorpusSettings(source="data/examples/docs"), verifier=VerifierSettings(
            judge=False, roles=True, llm=LLMSettings(base_url="http://127.0.0.1:9/v1", model="judge")))
        with pytest.raises(ConfigError, match=r"role check.*127\.0\.0\.1:9/v1 is unreachable"):
            generate_sts_triples.fn(settings=cfg, llm=LLMSettings(base_url=server.base_url, model="scripted-model"),
                                    output_dir=str(tmp_path / "out"))
    assert not list((tmp_path / "out").rglob("*.parquet"))


def test_the_role_check_is_refused_with_the_batch_api():
    from tasks.generate.stage import role_check_of

    with pytest.raises(ConfigError, match="verifier.roles.*Batch API"):
        role_check_of(GenerateSettings(verifier=VerifierSettings(roles=True), batch_api=True))
    assert role_check_of(GenerateSettings()) is None
    assert role_check_of(GenerateSettings(verifier=VerifierSettings(roles=True))).min_match == 0.6
