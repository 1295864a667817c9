"""Stage 1 through the OpenAI Batch API against the scripted server: same triples as direct calls, per-line failures
quarantined, re-attaching to a stored batch after an interruption, and nothing sent again once results are cached."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from flows.generate_sts_triples import generate_sts_triples
from tasks.contracts import VOLATILE_COLUMNS
from tasks.core.config import LLMSettings
from tasks.generate.settings import GenerateSettings, SamplingSettings, VerifierSettings
from tasks.llm.batch import ENDPOINT, BatchPending, BatchRunner, find_batch
from tasks.llm.cache import request_key
from tasks.llm.client import LLMClient
from tasks.llm.scripted_server import ScriptedOpenAI, default_responder, prompt_kind
from tests.conftest import PROJECT, generate_settings
from tests.faults.processes import kill_group


# These tests count generation requests and batches; the verifier's own requests are tested in test_verification.py.
def unjudged(corpus, **fields) -> GenerateSettings:
    """No judge, one choice per request, through the Batch API (polled every 10 ms) unless `batch_api=False`: the
    request counts of the one-choice path."""
    return generate_settings(corpus, **{"verifier": VerifierSettings(judge=False), "batch_api": True,
                                        "batch_poll_s": 0.01, "sampling": SamplingSettings(candidates=1), **fields})

CANARY = "sk-canary-batch-4d1e9b"
SYSTEM = "Your task is to generate a new sentence that is semantically similar."


def llm(server, folder, **kw) -> LLMSettings:
    return LLMSettings(base_url=server.base_url, model="scripted-model", cache_path=str(folder / "llm.sqlite"),
                       backoff_base_s=0.01, backoff_max_s=0.05, **kw)


def read(paths):
    return (pq.read_table(paths["triples"]), pq.read_table(paths["rejected"]),
            json.loads(open(paths["manifest"]).read()))


def requests(n: int) -> list[tuple[list[dict], dict]]:
    return [([{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"The bridge {i} was closed."}],
             {"temperature": 0.7, "top_p": 0.95, "max_tokens": 32, "seed": i}) for i in range(n)]


def meta_first(messages, body):
    """Every positive's first attempt is meta-text (rejected): the positives need a second round."""
    if prompt_kind(messages[0]["content"]) == "positive" and body["temperature"] < 0.8:
        return "Sure, here is the sentence: " + messages[-1]["content"]
    return default_responder(messages, body)


def test_batch_flow_matches_direct_calls(prefect_harness, tiny_corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("STSGEN_TEST_KEY", CANARY)
    with ScriptedOpenAI(responder=meta_first) as direct:
        ref = generate_sts_triples(settings=unjudged(tiny_corpus, n=6, batch_api=False),
                                   output_dir=str(tmp_path / "direct"), llm=llm(direct, tmp_path / "direct"))
    with ScriptedOpenAI(responder=meta_first, batch_polls=3) as server:
        paths = generate_sts_triples(settings=unjudged(tiny_corpus, n=6), output_dir=str(tmp_path / "batch"),
                                     llm=llm(server, tmp_path / "batch", api_key_env="STSGEN_TEST_KEY"))
        assert server.chat_requests() == []
        # positive: round 0 (all meta-text) + round 1; intermediate and negative: one round each.
        assert server.batches_created == 4 and server.files_uploaded == 4 and len(server.batch_lines) == 24
        assert {r["authorization"] for r in server.control_requests} == {f"Bearer {CANARY}"}
        uploads = [f for f in server.files.values() if f["object"]["purpose"] == "batch"]
        line = json.loads(uploads[0]["content"].splitlines()[0])
        assert line["method"] == "POST" and line["url"] == "/v1/chat/completions" and len(line["custom_id"]) == 64
        assert set(line["body"]) == {"model", "messages", "temperature", "top_p", "max_tokens", "seed"}
        assert all(CANARY.encode() not in f["content"] for f in uploads)

    (ref_triples, ref_rejected, ref_manifest), (triples, rejected, manifest) = read(ref), read(paths)
    assert triples.num_rows == 6 and triples.drop(list(VOLATILE_COLUMNS)).equals(
        ref_triples.drop(list(VOLATILE_COLUMNS)))
    assert rejected.num_rows == 6 and rejected.equals(ref_rejected)  # the six first-attempt positives, same rows
    assert manifest["counts"] == ref_manifest["counts"] and manifest["cache_key"] == ref_manifest["cache_key"]
    stats = manifest["llm_stats"]
    assert stats["requests_sent"] == 0 and stats["batches_created"] == 4 and stats["batch_lines"] == 24
    assert stats["failures"] == 0 and stats["completion_tokens"] > 0
    assert not list((tmp_path / "batch" / "llm-batches").glob("*.json"))  # collected: the state is gone
    for path in (p for p in tmp_path.rglob("*") if p.is_file()):
        assert CANARY.encode() not in path.read_bytes(), path


def test_line_failures_are_quarantined_as_llm_error(prefect_harness, tiny_corpus, tmp_path):
    faults = {"Prices for seed rose sharply in the local markets during March.": "error",
              "Critics praised the second movement for its quiet strings.": ("status", 500),
              "Engineers inspected the old stone bridge on Monday morning.": "missing"}

    def fault(custom_id, body):
        if prompt_kind(body["messages"][0]["content"]) == "positive":
            return faults.get(body["messages"][-1]["content"])
        return None

    with ScriptedOpenAI() as server:
        server.batch_line_fault = fault
        paths = generate_sts_triples(settings=unjudged(tiny_corpus, n=11), output_dir=str(tmp_path / "out"),
                                     llm=llm(server, tmp_path))
        triples, rejected, manifest = read(paths)
        rows = rejected.to_pylist()
        errors = {r["anchor"]: r for r in rows if r["reason"] == "llm_error"}
        assert set(errors) == set(faults) and {r["kind"] for r in errors.values()} == {"positive"}
        assert "scripted_line_error" in errors[next(iter(faults))]["detail"]
        assert "http_500" in errors["Critics praised the second movement for its quiet strings."]["detail"]
        assert "no result" in errors["Engineers inspected the old stone bridge on Monday morning."]["detail"]
        assert all(r["attempt"] == 0 and r["text"] is None for r in errors.values())  # a failed call ends the slot
        # Their intermediate and negative cannot be derived: kept with that reason, not dropped.
        assert sum(r["reason"] == "base_rejected" for r in rows) == 6 and triples.num_rows == 8
        stats = manifest["llm_stats"]
        assert manifest["counts"]["rejected_by_reason"]["llm_error"] == 3
        assert stats["failures"] == 3 and stats["batch_lines_failed"] == 3 and stats["batches_created"] == 3
        assert stats["errors_by_kind"] == {"batch_line_error": 1, "http_500": 1, "batch_missing": 1}

        # Failures are never cached: a later run (fault gone) submits only the three failed requests again.
        server.batch_line_fault = None
        created = server.batches_created
        again = generate_sts_triples(settings=unjudged(tiny_corpus, n=11), output_dir=str(tmp_path / "again"),
                                     llm=llm(server, tmp_path))
        stats = read(again)[2]["llm_stats"]
        assert read(again)[0].num_rows == 11 and server.batches_created == created + 3
        assert stats["batch_lines"] == 9 and stats["cache_hits"] == 8 + 2 * 8 and server.chat_requests() == []


@pytest.mark.parametrize("final", ["expired", "failed"])
def test_expired_batch_keeps_its_completed_lines_failed_batch_fails_all(scripted, tmp_path, final):
    scripted.batch_final_status = final
    client = LLMClient(llm(scripted, tmp_path))
    results = BatchRunner(client, poll_s=0.01).run(requests(6))
    if final == "expired":  # the scripted server completes the first half of the lines
        assert sum(r.ok for r in results) == 3 and len(client.cache) == 3
        assert all("batch_expired" in r.error for r in results if not r.ok)
    else:
        assert not any(r.ok for r in results) and len(client.cache) == 0
        assert all("status failed" in r.error and "scripted batch failure" in r.error for r in results)
    assert client.stats.failures == 6 - len(client.cache)


def test_failed_create_keeps_the_uploaded_file_for_the_next_run(scripted, tmp_path):
    scripted.batch_create_errors = 1
    settings = llm(scripted, tmp_path, max_retries=0)
    first = BatchRunner(LLMClient(settings), poll_s=0.01).run(requests(4))
    assert not any(r.ok for r in first) and all("submission failed" in r.error for r in first)
    results = BatchRunner(LLMClient(settings), poll_s=0.01).run(requests(4))
    assert all(r.ok for r in results) and scripted.files_uploaded == 1 and scripted.batches_created == 1


def test_lost_create_answer_finds_the_batch_instead_of_creating_another(scripted, tmp_path):
    # The endpoint makes the batch but its answer is lost (500): the retry finds that batch by its input file.
    scripted.batch_create_lost = 1
    runner = BatchRunner(LLMClient(llm(scripted, tmp_path, max_retries=2)), poll_s=0.01)
    results = runner.run(requests(4))
    assert all(r.ok for r in results) and scripted.batches_created == 1 and scripted.files_uploaded == 1
    assert runner.stats.batches_reattached == 1 and runner.stats.batches_created == 0
    assert [c["method"] for c in scripted.control_requests if c["path"].endswith("/batches")] == ["POST", "GET"]


def test_batch_made_but_not_stored_is_found_by_the_next_run(scripted, tmp_path):
    # The same window as a crash between create and storing the id: the state holds the file, not the batch.
    scripted.batch_create_lost = 1
    settings = llm(scripted, tmp_path, max_retries=0)
    first = BatchRunner(LLMClient(settings), poll_s=0.01).run(requests(4))
    assert not any(r.ok for r in first) and scripted.batches_created == 1
    again = BatchRunner(LLMClient(settings), poll_s=0.01)
    results = again.run(requests(4))
    assert all(r.ok for r in results) and again.stats.batches_reattached == 1
    assert scripted.batches_created == 1 and scripted.files_uploaded == 1  # nothing paid twice


def test_find_batch_matches_the_input_file_and_skips_failed_batches(scripted):
    import openai

    with openai.OpenAI(base_url=scripted.base_url, api_key="unused") as client:
        files = [client.files.create(file=(f"{i}.jsonl", b"{}\n", "application/jsonl"), purpose="batch").id
                 for i in range(3)]
        made = [client.batches.create(input_file_id=f, endpoint=ENDPOINT, completion_window="24h") for f in files]
        scripted.batches[made[2].id]["status"] = "failed"
        for _ in range(150):  # more than one page of the list call (100 a page)
            client.batches.create(input_file_id=files[1], endpoint=ENDPOINT, completion_window="24h")
        assert find_batch(client, files[0]).id == made[0].id  # found on the second page
        assert find_batch(client, files[2]) is None  # failed: a new batch is needed
        assert find_batch(client, "file-unknown") is None


def test_interrupted_poll_reattaches_to_the_stored_batch(scripted, tmp_path, monkeypatch):
    monkeypatch.setenv("STSGEN_TEST_KEY", CANARY)
    scripted.batch_polls = 4
    settings = llm(scripted, tmp_path, api_key_env="STSGEN_TEST_KEY")
    runner = BatchRunner(LLMClient(settings), poll_s=0.01, max_polls=1)
    with pytest.raises(BatchPending):
        runner.run(requests(5))
    keys = [request_key(settings.model, m, p) for m, p in requests(5)]
    state_file = runner.state_path(keys)
    state = json.loads(state_file.read_text())
    assert state["batch_id"] and state["input_file_id"] and state["keys"] == sorted(keys)
    assert CANARY not in state_file.read_text() and scripted.batches_created == 1 and scripted.files_uploaded == 1

    client = LLMClient(settings)
    again = BatchRunner(client, poll_s=0.01)
    results = again.run(requests(5))
    assert scripted.batches_created == 1 and scripted.files_uploaded == 1 and again.stats.batches_reattached == 1
    assert [r.text for r in results] == [default_responder(m, p) for m, p in requests(5)]
    assert not state_file.exists() and len(client.cache) == 5 and scripted.chat_requests() == []


RUNNER = """
import sys
from flows.generate_sts_triples import generate_sts_triples
from tasks.core.config import CorpusSettings, LLMSettings
from tasks.generate.settings import GenerateSettings, SamplingSettings, VerifierSettings
base_url, cache, out, corpus = sys.argv[1:5]
no_judge = VerifierSettings(judge=False)
settings = GenerateSettings(n=5, corpus=CorpusSettings(source=corpus), verifier=no_judge,
                            sampling=SamplingSettings(candidates=1), batch_api=True, batch_poll_s=0.05)
generate_sts_triples(settings=settings, output_dir=out, llm=LLMSettings(
    base_url=base_url, model="scripted-model", cache_path=cache))
"""


def test_flow_killed_while_polling_reattaches_on_rerun(child_env, tiny_corpus, tmp_path):
    env = child_env  # the session's Prefect API server (prefect_harness): no ephemeral one to start in the child
    with ScriptedOpenAI(batch_polls=10**9) as server:  # the first batch never finishes while the process lives
        proc = subprocess.Popen([sys.executable, "-c", RUNNER, server.base_url, str(tmp_path / "llm.sqlite"),
                                 str(tmp_path / "out"), str(tiny_corpus)],
                                cwd=PROJECT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        deadline = time.monotonic() + 300
        while server.batch_retrievals < 2 and time.monotonic() < deadline:  # created, state written, polling
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
            time.sleep(0.05)
        kill_group(proc)
        assert server.batches_created == 1 and server.files_uploaded == 1
        assert len(list((tmp_path / "llm-batches").glob("*.json"))) == 1
        assert not (tmp_path / "out" / "generate-sts-triples" / "manifest.json").exists()

        server.batch_polls = 1  # the batch finishes at the next poll
        paths = generate_sts_triples(settings=unjudged(tiny_corpus, n=5), output_dir=str(tmp_path / "out"),
                                     llm=llm(server, tmp_path))
        triples, _, manifest = read(paths)
        # The positive batch was re-attached, not paid twice; intermediate and negative are new batches.
        assert server.batches_created == 3 and server.files_uploaded == 3 and server.chat_requests() == []
        assert manifest["llm_stats"]["batches_reattached"] == 1 and triples.num_rows == 5
        assert not list((tmp_path / "llm-batches").glob("*.json"))


def test_rerun_after_completion_sends_nothing(prefect_harness, tiny_corpus, tmp_path):
    with ScriptedOpenAI() as server:
        first = generate_sts_triples(settings=unjudged(tiny_corpus, n=4), output_dir=str(tmp_path / "a"),
                                     llm=llm(server, tmp_path))
        control = len(server.control_requests)
        # Another output folder: the stage is not reused as a whole, every request is answered by the cache.
        second = generate_sts_triples(settings=unjudged(tiny_corpus, n=4), output_dir=str(tmp_path / "b"),
                                      llm=llm(server, tmp_path))
        # The same folder: the stage is reused without any LLM work.
        generate_sts_triples(settings=unjudged(tiny_corpus, n=4), output_dir=str(tmp_path / "a"), llm=llm(server, tmp_path))
        assert len(server.control_requests) == control and server.batches_created == 3 and server.files_uploaded == 3
        assert server.chat_requests() == []
    (t1, _, _), (t2, _, m2) = read(first), read(second)
    assert t2.drop(list(VOLATILE_COLUMNS)).equals(t1.drop(list(VOLATILE_COLUMNS)))
    assert m2["llm_stats"]["cache_hits"] == 12 and m2["llm_stats"].get("batch_lines", 0) == 0
    assert set(t2.column("positive_cached").to_pylist()) == {True}
