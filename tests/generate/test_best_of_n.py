"""Best of N, the fact rules' retry and constrained answers, over real HTTP (the scripted OpenAI-compatible server):
one request with `n` choices, the kept choice and the others in the quarantine with their reasons; a grammar sent to
a llama-server-like endpoint and not to others."""

from __future__ import annotations

import asyncio
import math

import pytest
from pydantic import ValidationError

from tasks.core.config import LLMSettings, settings_problem
from tasks.generate.candidates import Chooser
from tasks.generate.generation import Judge, Plan, Slot, generate_slots
from tasks.generate.settings import GenerateSettings, SamplingSettings, VerifierSettings
from tasks.generate.verification import load_judge_template
from tasks.label.llm_rating import RatingSettings, rate_pairs
from tasks.llm.client import LLMClient
from tasks.llm.prompting import load_template
from tasks.llm.scripted_server import ScriptedOpenAI, is_judge_request
from tests.conftest import generate_settings

ANCHOR = "Malaysian police arrested 12 men in Kuala Lumpur on Monday."
KEEPS_CLOSE = "On Monday, Malaysian police detained 12 men in Kuala Lumpur."
KEEPS_FAR = "Twelve men in Kuala Lumpur were taken by Malaysian officers on a Monday, reports say, after weeks."
DROPS = "Police arrested some men in the capital on Monday."


def llm(server, tmp_path, **kw) -> LLMSettings:
    return LLMSettings(base_url=server.base_url, model="scripted-model", cache_path=str(tmp_path / "llm.sqlite"),
                       backoff_base_s=0.01, **kw)


def run_positive(server, tmp_path, candidates: int, max_attempts: int = 3, judge: Judge | None = None):
    slot = Slot("s1", "positive", ANCHOR, ANCHOR, ())
    plan = positive_plan(GenerateSettings(sampling=SamplingSettings(candidates=candidates), max_attempts=max_attempts,
                                          seed=13), judge)
    return asyncio.run(generate_slots([slot], plan, LLMClient(llm(server, tmp_path))))


def positive_plan(settings: GenerateSettings, judge: Judge | None) -> Plan:
    """A plan for positives only, with the STS template and one fixed example."""
    template = load_template("sts", "positive")
    system = template.system_message([{"sentence1": "a", "sentence2": "b"}])
    return Plan({"positive": template}, {"positive": system}, {"positive": judge} if judge else {}, Chooser(),
                settings)


def chat_bodies(server) -> list[dict]:
    return [r["body"] for r in server.chat_requests()]


def test_best_of_n_keeps_the_choice_that_kept_the_facts_and_drifted_least(tmp_path):
    def responder(messages, body):
        return {0: DROPS, 1: KEEPS_FAR, 2: KEEPS_CLOSE}[body.get("choice", 0)]

    with ScriptedOpenAI(responder=responder) as server:
        accepted, rejected = run_positive(server, tmp_path, candidates=3)
        bodies = chat_bodies(server)
    assert len(bodies) == 1 and bodies[0]["n"] == 3  # one request, three choices
    assert [g.text for g in accepted] == [KEEPS_CLOSE] and accepted[0].candidate == 2 and accepted[0].candidates == 3
    by_candidate = {row["candidate"]: row for row in rejected}
    assert by_candidate[0]["reason"] == "fact_dropped" and "kuala" in by_candidate[0]["detail"]
    assert by_candidate[1]["reason"] == "not_chosen" and by_candidate[1]["text"] == KEEPS_FAR
    assert len(rejected) == 2  # every choice accounted for: kept, or quarantined with its reason


def test_a_dropped_fact_is_quarantined_and_retried(tmp_path):
    def responder(messages, body):
        return DROPS if body["temperature"] < 0.8 else KEEPS_CLOSE  # attempt 0 drops the names, attempt 1 keeps them

    with ScriptedOpenAI(responder=responder) as server:
        accepted, rejected = run_positive(server, tmp_path, candidates=1)
        assert len(server.chat_requests()) == 2 and "n" not in chat_bodies(server)[0]  # n = 1 is not sent
    assert [g.text for g in accepted] == [KEEPS_CLOSE] and accepted[0].attempts == 2
    assert [(r["attempt"], r["reason"]) for r in rejected] == [(0, "fact_dropped")]
    assert "kuala" in rejected[0]["detail"] and "lumpur" in rejected[0]["detail"]


def test_candidates_must_be_positive():
    with pytest.raises(ValidationError) as err:
        SamplingSettings(candidates=0)
    assert "candidates = 0" in settings_problem(err.value) and "greater than or equal to 1" in str(err.value)


@pytest.mark.parametrize("llama_server", [True, False])
def test_constrained_answers_sent_where_the_endpoint_takes_a_grammar(tmp_path, llama_server):
    """The judge's yes/no and the rater's digit go out as a grammar to a llama-server (GET /props answers), as a
    plain request elsewhere; `allowed_answers` itself is never sent."""
    props = {"default_generation_settings": {"n_ctx": 4096}} if llama_server else None

    def responder(messages, body):
        if is_judge_request(messages):
            return "yes"
        return "4" if body["max_tokens"] == 2 else KEEPS_CLOSE  # the rater answers in one or two tokens

    with ScriptedOpenAI(responder=responder, props=props) as server:
        settings = VerifierSettings()
        judge = Judge(load_judge_template("positive"), settings, 13)
        accepted, _ = run_positive(server, tmp_path, candidates=1, judge=judge)
        rate_pairs([(ANCHOR, KEEPS_CLOSE)], llm(server, tmp_path), RatingSettings())
        bodies = chat_bodies(server)
    assert accepted and accepted[0].judge_p_pass == 1.0
    judge_body = next(b for b in bodies if is_judge_request(b["messages"]))
    rating_body = bodies[-1]
    assert all("allowed_answers" not in b for b in bodies)
    if llama_server:
        assert judge_body["grammar"] == 'root ::= "No" | "Yes" | "no" | "yes"'
        assert rating_body["grammar"].startswith('root ::= "0" | "1"') and '"5"' in rating_body["grammar"]
    else:
        assert "grammar" not in judge_body and "grammar" not in rating_body


def test_judge_endpoint_down_fails_the_slot_clearly_and_keeps_the_generation(tmp_path):
    with ScriptedOpenAI() as generator:
        down = LLMSettings(base_url="http://127.0.0.1:9/v1", model="scripted-model", cache_path="off",
                           max_retries=0, timeout_s=2)
        judge = Judge(load_judge_template("positive"), VerifierSettings(llm=down), 13)
        plan = positive_plan(GenerateSettings(sampling=SamplingSettings(candidates=2), max_attempts=3, seed=13), judge)
        accepted, rejected = asyncio.run(generate_slots(
            [Slot("s1", "positive", ANCHOR, ANCHOR, ())], plan, LLMClient(llm(generator, tmp_path)),
            LLMClient(down)))
        assert len(generator.chat_requests()) == 1  # a failed judge call ends the slot: no new generation
    assert accepted == []
    reasons = [r["reason"] for r in rejected]
    assert reasons[0] == "judge_llm_error" and "connection" in rejected[0]["detail"]
    assert rejected[0]["text"]  # the judged generation is kept with the reason, the other choice as not_chosen
    assert sorted(reasons) == ["judge_llm_error", "not_chosen"]


def write_model(path, features=("judge", "cosine", "dropped", "added", "length"), coef=None, threshold=0.5):
    import json

    n = len(features)
    part = {"mean": [0.0] * n, "scale": [1.0] * n, "coef": coef or [0.0] * n, "intercept": 0.0, "threshold": threshold}
    path.write_text(json.dumps({"version": 1, "features": list(features), "kinds": {"positive": part}}))
    return path


def test_combined_verifier_decides_from_its_signals(tmp_path):
    from tasks.generate.combined_verifier import load_verifier_model, stage_signals

    # P(bad) rises with dropped facts and falls with the judge's P(pass): logit = 3·dropped − 4·(judge − 0.5)
    model = load_verifier_model(write_model(tmp_path / "m.json", coef=[-4.0, 0.0, 3.0, 0.0, 0.0]))
    model = model.model_copy(update={"kinds": {"positive": model.kinds["positive"].model_copy(
        update={"intercept": 2.0, "mean": [0.0] * 5})}})
    keeps = stage_signals(ANCHOR, KEEPS_CLOSE, judge_p_pass=0.9, cosine=0.95)
    drops = stage_signals(ANCHOR, DROPS, judge_p_pass=0.9, cosine=0.95)
    assert keeps["dropped"] == 0 and drops["dropped"] == 4  # malaysian, twelve, kuala, lumpur
    assert model.p_bad("positive", keeps) < 0.5 < model.p_bad("positive", drops)
    assert model.p_bad("negative", keeps) is None  # no part for that kind: not judged by the model
    # a missing signal sits at the training mean: only the judge's term and the intercept speak
    assert model.p_bad("positive", {"judge": 0.9}) == pytest.approx(1 / (1 + math.exp(-(2.0 - 3.6))))


def test_combined_verifier_rejects_in_the_slot_and_the_next_attempt_is_tried(tmp_path):
    from tasks.generate.combined_verifier import load_verifier_model

    # A model that calls every generation longer than 1.2 × the anchor bad (the anchor has 10 words).
    model = load_verifier_model(write_model(tmp_path / "m.json", features=("length",), coef=[50.0]))
    model = model.model_copy(update={"kinds": {"positive": model.kinds["positive"].model_copy(
        update={"mean": [1.2]})}})
    long_one = KEEPS_CLOSE[:-1] + ", and the arrests were confirmed by the police later that day."

    def responder(messages, body):
        if is_judge_request(messages):
            return "yes"
        return long_one if body["temperature"] < 0.8 else KEEPS_CLOSE

    with ScriptedOpenAI(responder=responder) as server:
        judge = Judge(load_judge_template("positive"), VerifierSettings(), 13, model)
        accepted, rejected = run_positive(server, tmp_path, candidates=1, judge=judge)
    assert [g.text for g in accepted] == [KEEPS_CLOSE]
    assert [r["reason"] for r in rejected] == ["verifier_rejected"] and "P(bad)" in rejected[0]["detail"]


def test_a_verifier_model_that_does_not_fit_the_stage_fails_clearly(tmp_path, prefect_harness, tiny_corpus):
    from flows.generate_sts_triples import generate_sts_triples
    from tasks.core.config import ConfigError

    bad = write_model(tmp_path / "needs-rating.json", features=("judge", "rating"))
    out = tmp_path / "out"
    with ScriptedOpenAI() as server:
        with pytest.raises(ConfigError, match=r"signal\(s\) rating that stage 1 does not compute"):
            generate_sts_triples(settings=generate_settings(tiny_corpus, n=2, verifier=VerifierSettings(model=str(bad))),
                                 llm=llm(server, tmp_path), output_dir=str(out))
        (tmp_path / "garbled.json").write_text("{not json")
        with pytest.raises(ConfigError, match="garbled.json is not a combined-verifier model file"):
            garbled = VerifierSettings(model=str(tmp_path / "garbled.json"))
            generate_sts_triples(settings=generate_settings(tiny_corpus, n=2, verifier=garbled),
                                 llm=llm(server, tmp_path), output_dir=str(out))
        assert server.chat_requests() == []  # refused before any request
    assert not any(out.rglob("*.parquet"))  # nothing written


def test_cli_refuses_zero_candidates_before_any_work(tmp_path, capsys):
    from flows.cli import main

    out = tmp_path / "out"
    assert main(["generate", "--n", "2", "--candidates", "0", "--base-url", "http://127.0.0.1:9/v1",
                 "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert "candidates = 0" in err and "greater than or equal to 1" in err and "Traceback" not in err
    assert not out.exists()  # nothing written, no endpoint contacted (port 9 would refuse)


def test_the_flow_with_best_of_n_keeps_every_choice_and_records_the_targets(prefect_harness, tiny_corpus, tmp_path):
    import json

    import pyarrow.parquet as pq

    from flows.generate_sts_triples import generate_sts_triples

    with ScriptedOpenAI() as server:
        paths = generate_sts_triples(settings=generate_settings(tiny_corpus, n=3), llm=llm(server, tmp_path),
                                     output_dir=str(tmp_path / "out"))
        bodies = chat_bodies(server)
    triples = pq.read_table(paths["triples"]).to_pylist()
    rejected = pq.read_table(paths["rejected"]).to_pylist()
    manifest = json.loads(open(paths["manifest"]).read())
    generation_bodies = [b for b in bodies if not is_judge_request(b["messages"])]
    assert generation_bodies and all(b["n"] == 4 for b in generation_bodies)
    assert len(triples) == 3 and all(t[f"{k}_candidates"] == 4 for t in triples for k in ("positive", "negative"))
    # every choice is accounted for: per request 4 = 1 kept + rule rejections + not_chosen
    per_request = {}
    for row in rejected:
        per_request.setdefault((row["source_id"], row["kind"], row["attempt"]), []).append(row["candidate"])
    for t in triples:
        for kind in ("positive", "intermediate", "negative"):
            others = per_request[(t["source_id"], kind, t[f"{kind}_attempts"] - 1)]
            assert sorted(others + [t[f"{kind}_candidate"]]) == [0, 1, 2, 3]
    targets = manifest["best_of_n"]["pattern_cosine_targets"]
    assert set(targets) == {"intermediate", "negative"} and targets["negative"] < targets["intermediate"] < 1


def test_a_rerun_with_best_of_n_sends_nothing_and_writes_the_same_triples(prefect_harness, tiny_corpus, tmp_path):
    """Resume with n choices: every answer (all its choices) comes from the response cache, the same choices are
    kept, the outputs are the same."""
    import pyarrow.parquet as pq

    from flows.generate_sts_triples import generate_sts_triples
    from tasks.contracts import VOLATILE_COLUMNS

    with ScriptedOpenAI() as server:
        first = generate_sts_triples(settings=generate_settings(tiny_corpus, n=4), llm=llm(server, tmp_path),
                                     output_dir=str(tmp_path / "a"))
        sent = len(server.chat_requests())
        again = generate_sts_triples(settings=generate_settings(tiny_corpus, n=4), llm=llm(server, tmp_path),
                                     output_dir=str(tmp_path / "b"))
        assert len(server.chat_requests()) == sent  # nothing sent again
    a, b = (pq.read_table(p["triples"]).drop(list(VOLATILE_COLUMNS)) for p in (first, again))
    assert a.num_rows == 4 and a.equals(b)
    assert pq.read_table(first["rejected"]).equals(pq.read_table(again["rejected"]))
