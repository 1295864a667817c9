"""Stage 1's verifier against the scripted OpenAI-compatible server (real HTTP): the judge's yes / no / garbled
answers → accepted / quarantined with the reason and retried / asked again; bad judge templates and an unreachable
judge endpoint fail before any work; the encoder ordering check."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pyarrow.parquet as pq
import pytest

from flows.generate_sts_triples import generate_sts_triples
from tasks.core.config import ConfigError, LLMSettings
from tasks.generate.settings import GenerateSettings, SamplingSettings, VerifierSettings
from tasks.generate.verification import load_judge_template, ordering_gaps, p_yes, verdict_of
from tasks.llm.client import CallResult
from tasks.llm.scripted_server import ScriptedOpenAI, default_responder, is_judge_request
from tests.conftest import generate_settings


# One choice per request: these tests count the judge's verdicts per generation (best of N: test_best_of_n.py).
def one_choice(corpus, **fields) -> GenerateSettings:
    return generate_settings(corpus, **{"sampling": SamplingSettings(candidates=1), **fields})

QUESTION_KIND = {"sentence A says also said by sentence B": "positive",
                 "sentence B says also said by sentence A": "intermediate", "mean the same thing": "negative"}


def judged(messages) -> tuple[str, str, str]:
    """(kind asked about, anchor, candidate) of a judge request."""
    text = messages[-1]["content"]
    kind = next(k for q, k in QUESTION_KIND.items() if q in text)
    lines = text.splitlines()
    return kind, lines[0].removeprefix("Sentence A: "), lines[1].removeprefix("Sentence B: ")


def llm(server, tmp_path, **kw) -> LLMSettings:
    return LLMSettings(base_url=server.base_url, model="scripted-model", cache_path=str(tmp_path / "llm.sqlite"),
                       max_concurrency=1, backoff_base_s=0.01, **kw)


def test_p_yes_reads_the_answer_tokens_mass_or_the_text():
    top = [("yes", math.log(0.6)), ("Yes", math.log(0.1)), (" no", math.log(0.2)), ("maybe", math.log(0.1))]
    prob, answer = p_yes(top, "yes")
    assert prob == pytest.approx(0.7 / 0.9) and answer == "yes"
    assert p_yes(None, "No, it does not.") == (0.0, "no") and p_yes([], "Yes.") == (1.0, "yes")
    assert p_yes([("maybe", 0.0)], "maybe") == (None, None)


def test_judge_answers_accept_quarantine_and_retry(prefect_harness, tiny_corpus, tmp_path):
    """Every first negative is judged a paraphrase ("yes, same meaning"): quarantined as judge_rejected and generated
    again (the second passes: "no"). The first
    judge answer about each intermediate is garbled: asked again (sampled), then accepted. One anchor's positives
    are always garbled: judge_unparsed on every attempt, the slot and its dependants quarantined."""
    seen_negatives: Counter = Counter()
    garbled_anchor: list[str] = []

    def responder(messages, body):
        if not is_judge_request(messages):
            return default_responder(messages, body)
        kind, anchor, _ = judged(messages)
        if kind == "positive":
            garbled_anchor[:] = garbled_anchor or [anchor]
            return "perhaps" if anchor == garbled_anchor[0] else "yes"
        if kind == "intermediate":
            return "I think so" if body["temperature"] == 0 else "Yes"
        seen_negatives[anchor] += 1
        return "Yes" if seen_negatives[anchor] == 1 else "no"

    with ScriptedOpenAI(responder=responder) as server:
        paths = generate_sts_triples(settings=one_choice(tiny_corpus, n=6, max_attempts=3), llm=llm(server, tmp_path),
                                     output_dir=str(tmp_path / "out"))
        judge_calls = [r for r in server.chat_requests() if is_judge_request(r["body"]["messages"])]
    triples = pq.read_table(paths["triples"]).to_pandas()
    rejected = pq.read_table(paths["rejected"]).to_pandas()
    doomed = garbled_anchor[0]
    assert len(triples) == 5 and doomed not in set(triples["anchor"])
    assert (triples["negative_attempts"] == 2).all() and (triples["intermediate_attempts"] == 1).all()
    assert (triples["negative_judge_p_pass"] == 1.0).all() and set(triples["judge_model"]) == {"scripted-model"}
    by_reason = rejected.groupby("reason")
    assert set(by_reason.groups) == {"judge_rejected", "judge_unparsed", "base_rejected"}
    no = by_reason.get_group("judge_rejected")
    assert len(no) == 5 and set(no["kind"]) == {"negative"} and (no["attempt"] == 0).all()
    assert no["text"].notna().all() and no["detail"].str.contains("answered yes, P(pass) = 0.000", regex=False).all()
    unparsed = by_reason.get_group("judge_unparsed")
    assert list(unparsed["attempt"]) == [0, 1, 2] and set(unparsed["anchor"]) == {doomed}
    assert unparsed["detail"].str.contains("2 answers without yes/no").all()
    # Judge calls: positives 5 + 3 attempts × 2 asks; intermediates 5 × 2 asks; negatives 5 × 2 attempts.
    assert Counter(judged(r["body"]["messages"])[0] for r in judge_calls) == \
        {"positive": 5 + 6, "intermediate": 10, "negative": 10}


def test_judge_with_log_probs_and_its_own_endpoint(prefect_harness, tiny_corpus, tmp_path):
    """A separate judge endpoint: P(pass) comes from the answer token's alternatives and the threshold decides (the
    negative's question passes on "no": P(pass) = 1 − P(yes))."""
    def judge_logprobs(messages, body):
        kind, _, _ = judged(messages)
        p = {"positive": 0.9, "intermediate": 0.7, "negative": 0.6}[kind]
        return [("yes", math.log(p)), ("no", math.log(1 - p))]

    with ScriptedOpenAI() as generator, ScriptedOpenAI(models=("judge-model",), responder=lambda m, b: "yes",
                                                       logprobs=judge_logprobs) as judge:
        # The per-kind thresholds decide (positive 0.63 < 0.9, intermediate 0.5 < 0.7, negative 0.4 < 0.5).
        verifier = VerifierSettings(llm=llm(judge, tmp_path).model_copy(update={"model": "judge-model"}))
        paths = generate_sts_triples(settings=one_choice(tiny_corpus, n=3, max_attempts=2, verifier=verifier),
                                     llm=llm(generator, tmp_path), output_dir=str(tmp_path / "out"))
        assert not any(is_judge_request(r["body"]["messages"]) for r in generator.chat_requests())
        assert len(judge.chat_requests()) == 3 + 3 + 3 * 2
    triples = pq.read_table(paths["triples"]).to_pandas()
    rejected = pq.read_table(paths["rejected"]).to_pandas()
    assert len(triples) == 0 and set(triples.columns) >= {"judge_model", "positive_judge_p_pass"}
    negatives = rejected[rejected["kind"] == "negative"]
    assert len(negatives) == 6 and set(negatives["reason"]) == {"judge_rejected"}
    assert negatives["detail"].str.contains("P(pass) = 0.400", regex=False).all()


def test_failed_judge_calls_are_quarantined_and_the_next_run_judges_only_them(prefect_harness, tiny_corpus,
                                                                             tmp_path):
    """A judge endpoint that answers 500 to every call: each generation is quarantined as judge_llm_error (kept with
    its text, never accepted unjudged) and, like a failed generation call, ends its slot (the client already retried);
    the stage is not taken as done, so the next run with a working judge judges the cached generations again — no
    positive is generated (paid for) twice."""
    def healthy(messages, body):
        return "no" if judged(messages)[0] == "negative" else "yes"

    def verifier(server) -> VerifierSettings:
        return VerifierSettings(llm=llm(server, tmp_path).model_copy(update={"model": "judge-model",
                                                                             "max_retries": 0}))

    out = str(tmp_path / "out")
    with ScriptedOpenAI() as generator:
        with ScriptedOpenAI(models=("judge-model",), responder=healthy) as broken:
            broken.push(*[("status", 500, {})] * 50)
            paths = generate_sts_triples(settings=one_choice(tiny_corpus, n=2, max_attempts=2,
                                                             verifier=verifier(broken)),
                                         llm=llm(generator, tmp_path), output_dir=out)
            assert len(broken.chat_requests()) == 2  # one call per positive: no retries, no second attempt
        rejected = pq.read_table(paths["rejected"]).to_pandas()
        assert pq.read_table(paths["triples"]).num_rows == 0
        failed = rejected[rejected["reason"] == "judge_llm_error"]
        assert set(failed["kind"]) == {"positive"} and list(failed["attempt"]) == [0, 0]
        assert failed["text"].notna().all() and (failed["detail"].str.len() > 0).all()
        assert len(generator.chat_requests()) == 2

        with ScriptedOpenAI(models=("judge-model",), responder=healthy) as working:
            again = generate_sts_triples(settings=one_choice(tiny_corpus, n=2, max_attempts=2,
                                                             verifier=verifier(working)),
                                         llm=llm(generator, tmp_path), output_dir=out)
            assert len(working.chat_requests()) == 2 * 3  # every kind of both sources judged once
        # Only the intermediates and negatives are new generations; the positives came from the cache.
        assert len(generator.chat_requests()) == 2 + 2 * 2
    triples = pq.read_table(again["triples"]).to_pandas()
    assert len(triples) == 2 and (triples["positive_attempts"] == 1).all()


def test_bad_judge_template_and_unreachable_judge_fail_before_any_work(prefect_harness, scripted, tiny_corpus,
                                                                       tmp_path):
    folder = tmp_path / "judges"
    folder.mkdir()
    for kind in ("positive", "intermediate", "negative"):
        (folder / f"judge-{kind}.j2").write_text("Sentence A: {{ anchor }}\nSentence B: {{ candidate }}\nSame? "
                                                 "Answer yes or no.")
    (folder / "judge-negative.j2").write_text("Is this sentence a contradiction: {{ candidate }}? Answer yes or no.")
    with pytest.raises(ConfigError, match=r"judge-negative.j2 lacks the placeholder\(s\) \{\{ anchor \}\}"):
        generate_sts_triples(settings=one_choice(tiny_corpus, n=2, verifier=VerifierSettings(template_dir=str(folder))),
                             llm=llm(scripted, tmp_path), output_dir=str(tmp_path / "out"))
    unreachable = LLMSettings(base_url="http://127.0.0.1:9/v1", model="judge")
    with pytest.raises(ConfigError, match="unreachable"):
        generate_sts_triples(settings=one_choice(tiny_corpus, n=2, verifier=VerifierSettings(llm=unreachable)),
                             llm=llm(scripted, tmp_path), output_dir=str(tmp_path / "out"))
    assert not (tmp_path / "out").exists() and scripted.chat_requests() == []
    assert load_judge_template("positive").name == "judge-positive.v2"


def test_ordering_gap_and_the_ordering_check(prefect_harness, scripted, tiny_corpus, tiny_encoder_dir, tmp_path):
    vectors = {"a": [1.0, 0.0], "p": [0.8, 0.6], "n": [0.0, 1.0], "n2": [0.8, 0.6]}
    gaps = ordering_gaps(["a", "a"], ["p", "p"], ["n", "n2"], lambda s: np.array([vectors[x] for x in s]))
    assert gaps == pytest.approx([0.8, 0.0])
    # A margin no triple can meet (cosines differ by at most 2): every triple is quarantined as `ordering`.
    verifier = VerifierSettings(judge=False, ordering_margin=2.0, ordering_model=str(tiny_encoder_dir))
    paths = generate_sts_triples(settings=one_choice(tiny_corpus, n=3, verifier=verifier), llm=llm(scripted, tmp_path),
                                 output_dir=str(tmp_path / "out"))
    rejected = pq.read_table(paths["rejected"]).to_pandas()
    assert pq.read_table(paths["triples"]).num_rows == 0
    assert list(rejected["reason"]) == ["ordering"] * 3 and rejected["detail"].str.contains("< margin 2.0").all()


def test_each_kind_is_judged_at_its_own_threshold_and_a_bad_one_is_refused():
    """P(pass) 0.6: under the positives' 0.63 (fit on the labeled generations), over the others' 0.5; one global
    threshold overrides them all. Thresholds outside [0, 1] are a settings error."""
    from pydantic import ValidationError

    answer = CallResult(ok=True, text="yes", top_logprobs=[["yes", math.log(0.6)], ["no", math.log(0.4)]])
    settings = VerifierSettings()
    assert verdict_of([answer], settings, kind="positive").reason == "judge_rejected"
    assert verdict_of([answer], settings, kind="intermediate").reason is None
    assert verdict_of([answer], settings.model_copy(update={"threshold": 0.5}), kind="positive").reason is None
    with pytest.raises(ValidationError, match="thresholds"):
        VerifierSettings(thresholds={"positive": 1.5})
