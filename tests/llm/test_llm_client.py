"""The LLM layer against a real local HTTP server with scripted faults (no mock of the openai client)."""

from __future__ import annotations

import asyncio
import time

import pytest

from tasks.core.config import ConfigError, LLMSettings
from tasks.llm.client import LLMClient, retry_after_seconds
from tasks.llm.endpoint import check_endpoint
from tasks.llm.ratelimit import RateLimiter
from tasks.llm.scripted_server import ScriptedOpenAI

MESSAGES = [{"role": "system", "content": "Your task is to generate a new sentence that is semantically similar."},
            {"role": "user", "content": "The bridge was closed after the storm."}]


def settings(server: ScriptedOpenAI, tmp_path, **kw) -> LLMSettings:
    base = dict(base_url=server.base_url, model="scripted-model", cache_path=str(tmp_path / "cache.sqlite"),
                backoff_base_s=0.05, backoff_max_s=0.2, timeout_s=5.0)
    base.update(kw)
    return LLMSettings(**base)


def params(seed: int = 1) -> dict:
    return {"temperature": 0.7, "top_p": 0.95, "max_tokens": 32, "seed": seed}


def run(coro):
    return asyncio.run(coro)


def test_429_with_retry_after_is_honoured(scripted, tmp_path):
    scripted.push(("status", 429, {"Retry-After": "1"}))
    client = LLMClient(settings(scripted, tmp_path))
    result = run(client.complete(MESSAGES, params()))
    reqs = scripted.chat_requests()
    assert result.ok and result.http_attempts == 2
    assert reqs[1]["t"] - reqs[0]["t"] >= 0.95  # waited as told, not the 0.05 s backoff
    assert client.stats.errors_by_kind == {"http_429": 1}


def test_500_then_success_and_usage_recorded(scripted, tmp_path):
    scripted.push(("status", 500), ("status", 503))
    client = LLMClient(settings(scripted, tmp_path))
    result = run(client.complete(MESSAGES, params()))
    assert result.ok and result.http_attempts == 3 and client.stats.retries == 2
    assert result.prompt_tokens > 0 and result.completion_tokens > 0 and result.latency_s > 0


def test_timeout_is_retried(scripted, tmp_path):
    scripted.push(("sleep", 6.0))  # the retry gets 2 s: ample for a loopback answer on a busy 2-core machine
    client = LLMClient(settings(scripted, tmp_path, timeout_s=2.0))
    result = run(client.complete(MESSAGES, params()))
    assert result.ok and result.http_attempts == 2
    assert client.stats.errors_by_kind.get("timeout") == 1


@pytest.mark.parametrize("action", ["malformed", "no_choices", "drop"])
def test_malformed_or_dropped_response_is_retried(scripted, tmp_path, action):
    scripted.push(action)
    client = LLMClient(settings(scripted, tmp_path))
    result = run(client.complete(MESSAGES, params()))
    assert result.ok and result.http_attempts == 2 and result.text


def test_gives_up_after_max_retries_with_reason_and_no_cache(scripted, tmp_path):
    scripted.push(*[("status", 500)] * 3)
    client = LLMClient(settings(scripted, tmp_path, max_retries=2))
    result = run(client.complete(MESSAGES, params()))
    assert not result.ok and "gave up after 3 attempts" in result.error and "500" in result.error
    assert len(client.cache) == 0  # a failure is never cached: the next run tries again
    assert run(client.complete(MESSAGES, params())).ok


def test_client_errors_are_not_retried(scripted, tmp_path):
    scripted.push(("status", 400))
    client = LLMClient(settings(scripted, tmp_path))
    result = run(client.complete(MESSAGES, params()))
    assert not result.ok and result.http_attempts == 1 and "http_400" in result.error


def test_cache_means_a_rerun_sends_nothing(scripted, tmp_path):
    reqs = [(MESSAGES, params(seed)) for seed in range(5)]
    first = run(LLMClient(settings(scripted, tmp_path)).complete_many(reqs))
    sent = len(scripted.chat_requests())
    again_client = LLMClient(settings(scripted, tmp_path))
    again = run(again_client.complete_many(reqs))
    assert sent == 5 and len(scripted.chat_requests()) == 5
    assert [r.text for r in again] == [r.text for r in first] and all(r.cached for r in again)
    assert again_client.stats.cache_hits == 5
    # Different sampling params are a different request.
    run(again_client.complete(MESSAGES, {**params(0), "temperature": 0.9}))
    assert len(scripted.chat_requests()) == 6


def test_corrupt_cache_entry_is_not_returned(scripted, tmp_path):
    s = settings(scripted, tmp_path)
    client = LLMClient(s)
    run(client.complete(MESSAGES, params()))
    client.cache._db.execute("UPDATE responses SET payload = replace(payload, 'a', 'b')")
    result = run(client.complete(MESSAGES, params()))
    assert not result.cached and client.cache.corrupt_entries == 1 and len(scripted.chat_requests()) == 2


def test_concurrency_is_bounded_on_slow_responses(tmp_path):
    with ScriptedOpenAI(latency_s=0.3) as server:
        client = LLMClient(settings(server, tmp_path, max_concurrency=3, cache_path="off"))
        started = time.perf_counter()
        results = run(client.complete_many([(MESSAGES, params(i)) for i in range(9)]))
        elapsed = time.perf_counter() - started
        assert all(r.ok for r in results)
        assert server.max_in_flight == 3
        assert elapsed >= 0.85  # 9 requests / 3 in flight * 0.3 s


@pytest.fixture
def paced(monkeypatch) -> list[float]:
    """The rate limiter on a clock that stands still: every wait it asks for is recorded instead of slept. Each
    request's start is then its reservation time (the still clock) + its wait, so the pacing is checked by counting
    those starts, not by timing sleeps on a loaded machine (a stalled process wakes several due starts at once)."""
    from types import SimpleNamespace

    from tasks.llm import ratelimit

    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(ratelimit, "time", SimpleNamespace(monotonic=lambda: 1000.0))
    monkeypatch.setattr(ratelimit, "asyncio", SimpleNamespace(sleep=sleep))
    return waits


def most_in_one_second(starts: list[float]) -> int:
    return max(sum(1 for t in starts if t0 <= t < t0 + 1.0 - 1e-9) for t0 in starts)


def test_requests_per_minute_limit_holds(scripted, tmp_path, paced):
    client = LLMClient(settings(scripted, tmp_path, requests_per_minute=600, max_concurrency=8, cache_path="off"))
    run(client.complete_many([(MESSAGES, params(i)) for i in range(31)]))
    assert len(scripted.chat_requests()) == 31
    # 600/min = one start every 0.1 s: the first request starts at once, the k-th after k × 0.1 s.
    assert sorted(paced) == pytest.approx([k / 10 for k in range(1, 31)])
    starts = [0.0, *paced]
    assert most_in_one_second(starts) == 10  # rpm × 1 s / 60 (+ 1 at a window's closed end)
    assert client.stats.rate_limit_wait_s == pytest.approx(sum(paced))


def test_request_limiter_holds_over_every_window(paced):
    limiter = RateLimiter(requests_per_minute=600)  # 10/s, evenly paced

    async def go():
        return await asyncio.gather(*(limiter.acquire() for _ in range(31)))

    starts = sorted(asyncio.run(go()))  # each request's wait from the same instant: its start
    assert starts == pytest.approx([k / 10 for k in range(31)]) and sorted(paced) == starts[1:]
    assert most_in_one_second(starts) == 10


def test_tokens_per_minute_limit_holds(paced):
    limiter = RateLimiter(tokens_per_minute=6000)  # 100 tokens/s, burst 100

    async def go():
        return [await limiter.acquire(100) for _ in range(4)]

    # 400 tokens at 100/s with 100 saved up: the 2nd, 3rd and 4th request start 1, 2 and 3 s after the first
    assert asyncio.run(go()) == pytest.approx([0.0, 1.0, 2.0, 3.0]) and paced == pytest.approx([1.0, 2.0, 3.0])


def test_retry_after_parsing():
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({}) is None
    assert 0 <= retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) <= 0.0 + 1e-9


def test_check_endpoint_errors_are_clear(scripted, tmp_path):
    assert check_endpoint(settings(scripted, tmp_path)) == ["scripted-model"]
    with pytest.raises(ConfigError, match="does not serve model 'nope'.*scripted-model"):
        check_endpoint(settings(scripted, tmp_path, model="nope"))
    with pytest.raises(ConfigError, match="unreachable"):
        check_endpoint(LLMSettings(base_url="http://127.0.0.1:9/v1", model="x", timeout_s=2))
