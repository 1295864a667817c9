"""Chat completions against any OpenAI-compatible endpoint, through the official `openai` client.

What this layer adds to a bare client loop:
- bounded concurrency (a semaphore per batch) and client-side RPM/TPM limits shared by all batches of a process;
- its own retry loop (the `openai` client's retries are switched off so every attempt is counted): exponential
  backoff with jitter on 429, 5xx, timeouts, connection errors and malformed bodies, honouring `Retry-After`;
- a persistent content-addressed response cache, so a re-run or a resumed run never pays for a request twice;
- per-call token usage and latency, and a `CallResult` instead of an exception: a failed call is data.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import threading
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import openai

from tasks.core.config import LLMSettings
from tasks.llm.cache import ResponseCache, request_key
from tasks.llm.endpoint import api_key, redact
from tasks.llm.ratelimit import PrefectRateLimit, RateLimiter, check_prefect_limit

# Status codes worth another try; anything else in 4xx is the caller's fault and is not retried.
RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529}
MAX_RETRY_AFTER_S = 300.0
# A request parameter of stsgen's own, not the API's: the only answers a call may give (the judge's yes/no, the
# rater's digits). The client enforces it the way the endpoint can (`request_params`) and never sends it as such.
ALLOWED_ANSWERS = "allowed_answers"


@dataclass
class CallResult:
    """Outcome of one logical request (after retries)."""

    ok: bool
    text: str | None = None
    error: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    http_attempts: int = 0
    key: str = ""
    # [(token, logprob), …] of the first generated token, when the request asked for `logprobs` (LLM ratings).
    top_logprobs: list[list] | None = None
    # Log-probs of the prompt's tokens (`prompt_logprobs` calls: stage-3 scoring through a served LM).
    prompt_logprobs: list[float | None] | None = None
    # Every choice's text when the request asked for `n` > 1 (best-of-N generation); `text` is the first.
    texts: list[str] | None = None


@dataclass
class ClientStats:
    requests_sent: int = 0
    retries: int = 0
    cache_hits: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Tokens of the answers taken from the response cache: paid by an earlier run, part of what the data cost.
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0
    rate_limit_wait_s: float = 0.0
    errors_by_kind: dict[str, int] = field(default_factory=dict)

    def count_error(self, kind: str) -> None:
        self.errors_by_kind[kind] = self.errors_by_kind.get(kind, 0) + 1


def merge_stats(total: dict, batch: dict) -> dict:
    """Sum two `asdict(ClientStats)` dicts (the per-batch stats a stage adds up), nested error counts included."""
    out = dict(total)
    for name, value in batch.items():
        if isinstance(value, dict):
            out[name] = {k: out.get(name, {}).get(k, 0) + value.get(k, 0) for k in {*out.get(name, {}), *value}}
        else:
            out[name] = out.get(name, 0) + value
    return out


_shared_lock = threading.Lock()
_limiters: dict[tuple, RateLimiter | PrefectRateLimit] = {}
_caches: dict[Path, ResponseCache] = {}


def _shared_limiter(settings: LLMSettings) -> RateLimiter | PrefectRateLimit:
    key = (settings.base_url, settings.model, settings.requests_per_minute, settings.tokens_per_minute,
           settings.prefect_limit)
    with _shared_lock:
        if key in _limiters:
            return _limiters[key]
    limiter: RateLimiter | PrefectRateLimit = RateLimiter(settings.requests_per_minute, settings.tokens_per_minute)
    if settings.prefect_limit:  # checked once per process (a Prefect API call), outside the lock
        check_prefect_limit(settings.prefect_limit)
        limiter = PrefectRateLimit(settings.prefect_limit, local=limiter)
    with _shared_lock:
        return _limiters.setdefault(key, limiter)


def _shared_cache(path: Path | None) -> ResponseCache | None:
    if path is None:
        return None
    path = path.resolve()
    with _shared_lock:
        if path not in _caches:
            _caches[path] = ResponseCache(path)
        return _caches[path]


def model_identity(settings: LLMSettings) -> dict:
    """What identifies a served model in a cache key: its name and the checksum of the local server's weights
    (`model_sha256`, set by whoever started the server), never the endpoint's URL."""
    return {"model": settings.model, "sha256": settings.model_sha256}


def answer_grammar(answers: list[str]) -> str:
    """A GBNF grammar (llama.cpp's) whose only sentences are the allowed answers, lower-case or capitalised (the
    model's own first choice is often "Yes": both spellings count the same when P(answer) is read)."""
    spellings = sorted({v for a in answers for v in (a, a[:1].upper() + a[1:])})
    return "root ::= " + " | ".join(json.dumps(v) for v in spellings)


def request_params(params: dict[str, Any], grammar: bool) -> dict[str, Any]:
    """stsgen's request parameters as the endpoint takes them: `allowed_answers` becomes a grammar (`extra_body`)
    where the endpoint takes one, and is left out elsewhere (the caller parses the free answer, as before)."""
    answers = params.get(ALLOWED_ANSWERS)
    sent = {k: v for k, v in params.items() if k != ALLOWED_ANSWERS}
    if answers and grammar:
        sent["extra_body"] = {**sent.get("extra_body", {}), "grammar": answer_grammar(list(answers))}
    return sent


_grammar_support: dict[str, bool] = {}


def takes_grammar(settings: LLMSettings) -> bool:
    """Whether calls to this endpoint carry a grammar for `allowed_answers`: `constrained_answers` 'grammar' / 'off'
    say so; 'auto' asks the server once per process — llama.cpp's llama-server answers GET /props with its
    generation settings (llama-cpp-python's server, vLLM and hosted APIs do not, and get the free answer)."""
    if settings.constrained_answers != "auto":
        return settings.constrained_answers == "grammar"
    root = settings.base_url.rstrip("/").removesuffix("/v1")
    with _shared_lock:
        if root in _grammar_support:
            return _grammar_support[root]
    import httpx

    try:
        body = httpx.get(f"{root}/props", timeout=5.0).json()
        found = isinstance(body, dict) and "default_generation_settings" in body
    except (httpx.HTTPError, ValueError):
        found = False
    with _shared_lock:
        return _grammar_support.setdefault(root, found)


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms`, or `retry-after` as seconds or HTTP date)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return min(float(ms) / 1000.0, MAX_RETRY_AFTER_S)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return min(max(float(value), 0.0), MAX_RETRY_AFTER_S)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        return min(max(parsed.timestamp() - time.time(), 0.0), MAX_RETRY_AFTER_S)


def first_token_top_logprobs(choice: Any) -> list[list] | None:
    """[(token, logprob), …] of the first generated token's alternatives, or None when not asked for."""
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return None
    return [[t.token, float(t.logprob)] for t in (content[0].top_logprobs or [])]


def _usage(response: Any) -> dict[str, int]:
    usage = response.usage
    return {"prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
            "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0)}


def estimate_tokens(messages: list[dict[str, str]], max_tokens: int) -> int:
    """Rough pre-call token count for the TPM limiter (4 chars/token), corrected after the call."""
    return sum(len(m.get("content", "")) for m in messages) // 4 + 8 * len(messages) + max_tokens


class LLMClient:
    """One endpoint + model. Safe to use from several threads/event loops; create one per stage run."""

    def __init__(self, settings: LLMSettings):
        self.settings = settings
        self.limiter = _shared_limiter(settings)
        self.cache = _shared_cache(settings.resolved_cache_path())
        self.stats = ClientStats()
        self._stats_lock = threading.Lock()
        self._grammar: bool | None = None  # takes_grammar(settings), asked at the first call that needs it

    def sent_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """`params` as this endpoint takes them (`request_params`); the endpoint is asked only when they hold
        `allowed_answers`."""
        if ALLOWED_ANSWERS in params and self._grammar is None:
            self._grammar = takes_grammar(self.settings)
        return request_params(params, bool(self._grammar))

    def _client(self) -> openai.AsyncOpenAI:
        # One AsyncOpenAI per event loop: its httpx pool is bound to the loop that created it.
        return openai.AsyncOpenAI(
            base_url=self.settings.base_url,
            api_key=api_key(self.settings),
            max_retries=0,
            timeout=self.settings.timeout_s,
        )

    def _backoff(self, attempt: int) -> float:
        base = min(self.settings.backoff_max_s, self.settings.backoff_base_s * (2**attempt))
        return base * (0.5 + random.random() / 2)

    def _add(self, **deltas: float) -> None:
        with self._stats_lock:
            for name, value in deltas.items():
                setattr(self.stats, name, getattr(self.stats, name) + value)

    def count_cache_hit(self, hit: dict) -> None:
        """A cached answer used: counted, with the tokens it took when it was paid for (the data's cost)."""
        self._add(cache_hits=1, cached_prompt_tokens=int(hit.get("prompt_tokens") or 0),
                  cached_completion_tokens=int(hit.get("completion_tokens") or 0))

    async def complete(
        self,
        messages: list[dict[str, str]],
        params: dict[str, Any],
        client: openai.AsyncOpenAI | None = None,
    ) -> CallResult:
        """One chat completion with retries; never raises for per-call failures. With `n` > 1, `texts` holds every
        choice the endpoint returned (one that ignores `n` returns one)."""
        params = self.sent_params(params)

        async def send(api: openai.AsyncOpenAI) -> dict[str, Any]:
            response = await api.chat.completions.create(model=self.settings.model, messages=messages, **params)
            choice = response.choices[0]
            texts = [c.message.content or "" for c in response.choices] if params.get("n", 1) > 1 else None
            return dict(text=choice.message.content or "", top_logprobs=first_token_top_logprobs(choice),
                        finish_reason=choice.finish_reason, texts=texts, **_usage(response))

        return await self._call(request_key(self.settings.model, messages, params),
                                estimate_tokens(messages, int(params.get("max_tokens", 256))), send, client)

    async def prompt_logprobs(self, prompt: list[int] | str, client: openai.AsyncOpenAI | None = None
                              ) -> CallResult:
        """Log-probabilities of the prompt's own tokens from /v1/completions (echo + logprobs, one generated token,
        as vLLM and llama-cpp-python's server answer it): `CallResult.prompt_logprobs` holds one entry per echoed
        token (None for the first) and the generated token's last; same retries, limiter and cache as chat calls."""
        params = {"echo": True, "logprobs": 1, "max_tokens": 1, "temperature": 0.0}

        async def send(api: openai.AsyncOpenAI) -> dict[str, Any]:
            response = await api.completions.create(model=self.settings.model, prompt=prompt, **params)
            choice = response.choices[0]
            logprobs = getattr(choice, "logprobs", None)
            values = getattr(logprobs, "token_logprobs", None)
            return dict(text=choice.text or "", finish_reason=choice.finish_reason, **_usage(response),
                        prompt_logprobs=None if values is None else [None if v is None else float(v) for v in values])

        size = len(prompt) if isinstance(prompt, list) else len(prompt) // 4
        return await self._call(request_key(self.settings.model, [{"role": "prompt", "content": prompt}], params),
                                size + 1, send, client)

    async def _call(self, key: str, estimate: int, send: Callable[[openai.AsyncOpenAI], Awaitable[dict[str, Any]]],
                    client: openai.AsyncOpenAI | None) -> CallResult:
        """`send` with the cache, the limiter and the retry loop around it; `send` returns CallResult fields."""
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.count_cache_hit(hit)
                return CallResult(ok=True, cached=True, key=key, **hit)

        own_client = client is None
        client = client or self._client()
        last_error = "no attempt made"
        attempts = 0
        try:
            for attempt in range(self.settings.max_retries + 1):
                waited = await self.limiter.acquire(estimate)
                self._add(rate_limit_wait_s=waited, requests_sent=1, retries=1 if attempt else 0)
                attempts += 1
                started = time.perf_counter()
                delay: float | None = None
                try:
                    result = await send(client)
                    result["latency_s"] = round(time.perf_counter() - started, 4)
                except openai.APIStatusError as exc:
                    kind = f"http_{exc.status_code}"
                    last_error = f"{kind}: {exc.message}"
                    if exc.status_code not in RETRYABLE_STATUS:
                        self._error(kind)
                        return CallResult(ok=False, error=redact(last_error, self.settings), key=key,
                                          http_attempts=attempts)
                    delay = retry_after_seconds(exc.response.headers)
                    self._error(kind)
                except openai.APITimeoutError:
                    last_error = f"timeout after {self.settings.timeout_s}s"
                    self._error("timeout")
                except openai.APIConnectionError as exc:
                    last_error = f"connection error: {exc.__cause__ or exc}"
                    self._error("connection")
                except Exception as exc:  # malformed body: not JSON, no choices, wrong types
                    last_error = f"malformed response: {type(exc).__name__}: {str(exc)[:200]}"
                    self._error("malformed")
                else:
                    self._add(prompt_tokens=result["prompt_tokens"], completion_tokens=result["completion_tokens"])
                    self.limiter.settle(estimate, result["prompt_tokens"] + result["completion_tokens"])
                    if self.cache is not None:
                        self.cache.put(key, result)
                    return CallResult(ok=True, key=key, http_attempts=attempts, **result)
                if attempt < self.settings.max_retries:
                    await asyncio.sleep(delay if delay is not None else self._backoff(attempt))
        finally:
            if own_client:
                await client.close()
        self._add(failures=1)
        return CallResult(
            ok=False,
            error=redact(f"gave up after {attempts} attempts: {last_error}", self.settings),
            key=key,
            http_attempts=attempts,
        )

    def _error(self, kind: str) -> None:
        with self._stats_lock:
            self.stats.count_error(kind)

    @asynccontextmanager
    async def open(self, kind: str = "chat") -> AsyncIterator[Callable[..., Awaitable[CallResult]]]:
        """Yield `call(…)` — `complete(messages, params)` for kind 'chat', `prompt_logprobs(prompt)` for kind
        'prompt_logprobs' — with at most `max_concurrency` calls in flight, sharing one HTTP connection pool (use
        inside one event loop)."""
        semaphore = asyncio.Semaphore(self.settings.max_concurrency)
        client = self._client()
        method = {"chat": self.complete, "prompt_logprobs": self.prompt_logprobs}[kind]

        async def call(*args: Any) -> CallResult:
            async with semaphore:
                return await method(*args, client=client)

        try:
            yield call
        finally:
            await client.close()

    async def complete_many(self, requests: list[tuple[list[dict[str, str]], dict[str, Any]]],
                            on_result: Callable[[], None] | None = None) -> list[CallResult]:
        """Run requests with bounded concurrency; results in input order. `on_result()` is called in the event loop
        as each request finishes (keep it cheap: a counter)."""
        async with self.open() as call:
            async def one(messages: list[dict[str, str]], params: dict[str, Any]) -> CallResult:
                result = await call(messages, params)
                if on_result is not None:
                    on_result()
                return result

            return list(await asyncio.gather(*(one(m, p) for m, p in requests)))

    async def prompt_logprobs_many(self, prompts: list[list[int] | str]) -> list[CallResult]:
        """`prompt_logprobs` for many prompts with bounded concurrency; results in input order."""
        async with self.open("prompt_logprobs") as call:
            return list(await asyncio.gather(*(call(p) for p in prompts)))
