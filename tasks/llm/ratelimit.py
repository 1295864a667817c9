"""Client-side request and token rate limits.

The limiter reserves a start time under a `threading.Lock` and then sleeps outside it, so one limiter can be shared
by several event loops (each Prefect task runs its own) and threads without binding to any loop.
`PrefectRateLimit` (llm.prefect_limit) paces requests with a Prefect global concurrency limit instead, shared by
every process using the same (Postgres-backed) Prefect server.
"""

from __future__ import annotations

import asyncio
import threading
import time

from tasks.core.config import ConfigError


class TokenBucket:
    """Classic token bucket: `rate` units per second, at most `capacity` saved up. Debt is allowed, so a single
    request larger than the capacity still passes (it just makes the next ones wait longer)."""

    def __init__(self, rate_per_s: float, capacity: float):
        self.rate = rate_per_s
        self.capacity = capacity
        self._level = capacity
        self._stamp = time.monotonic()

    def reserve(self, amount: float, now: float) -> float:
        """Take `amount` and return how long the caller must wait before it is covered."""
        self._level = min(self.capacity, self._level + (now - self._stamp) * self.rate)
        self._stamp = now
        self._level -= amount
        return 0.0 if self._level >= 0 else -self._level / self.rate

    def refund(self, amount: float) -> None:
        self._level = min(self.capacity, self._level + amount)


class RateLimiter:
    """Requests-per-minute and tokens-per-minute limits (either may be None = unlimited).

    Requests are paced evenly (burst capacity one request), so over any window of T seconds at most rpm*T/60 + 1
    requests start: the limit holds when measured over any window, and a provider's per-second limits never see
    a burst. Tokens keep one second's worth of burst (a request's tokens must fit in the bucket).
    """

    def __init__(self, requests_per_minute: float | None = None, tokens_per_minute: float | None = None):
        self._lock = threading.Lock()
        self._req = (
            TokenBucket(requests_per_minute / 60.0, 1.0)
            if requests_per_minute
            else None
        )
        self._tok = (
            TokenBucket(tokens_per_minute / 60.0, max(1.0, tokens_per_minute / 60.0)) if tokens_per_minute else None
        )

    def _reserve(self, tokens: float) -> float:
        with self._lock:
            now = time.monotonic()
            wait = 0.0
            if self._req:
                wait = max(wait, self._req.reserve(1.0, now))
            if self._tok:
                wait = max(wait, self._tok.reserve(tokens, now))
            return wait

    async def acquire(self, estimated_tokens: float = 0.0) -> float:
        """Wait until a request of `estimated_tokens` may start; returns the seconds waited."""
        wait = self._reserve(estimated_tokens)
        if wait > 0:
            await asyncio.sleep(wait)
        return wait

    def settle(self, estimated_tokens: float, actual_tokens: float) -> None:
        """Correct the token bucket once the real usage is known (charge more, or refund)."""
        if not self._tok or actual_tokens == estimated_tokens:
            return
        with self._lock:
            diff = actual_tokens - estimated_tokens
            if diff > 0:
                self._tok.reserve(diff, time.monotonic())
            else:
                self._tok.refund(-diff)


PREFECT_LIMIT_FIX = "prefect gcl create {name} --limit N --slot-decay-per-second R"


def check_prefect_limit(name: str) -> dict:
    """Fail fast unless the Prefect global concurrency limit `name` exists, is active and has slot decay.

    Needs a Prefect server (PREFECT_API_URL); returns the limit as a dict (limit, slot_decay_per_second, active)."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import get_current_settings

    fix = PREFECT_LIMIT_FIX.format(name=name)
    api_url = get_current_settings().api.url
    if not api_url:
        raise ConfigError(f"llm.prefect_limit='{name}' needs a Prefect server shared by every process: set "
                          "PREFECT_API_URL (a Postgres-backed server; on SQLite, limits fail with 'database is "
                          "locked'), or use llm.requests_per_minute instead.")
    try:
        with get_client(sync_client=True) as client:
            gcl = client.read_global_concurrency_limit_by_name(name)
    except ObjectNotFound:
        raise ConfigError(f"Prefect global concurrency limit '{name}' does not exist on {api_url}. "
                          f"Create it: `{fix}` (N = burst, R = requests per second).") from None
    except Exception as exc:  # unreachable server, HTTP errors
        raise ConfigError(f"Could not read Prefect global concurrency limit '{name}' from {api_url}: "
                          f"{type(exc).__name__}: {str(exc)[:200]}") from None
    if not gcl.slot_decay_per_second:
        raise ConfigError(f"Prefect global concurrency limit '{name}' has no slot decay, so it cannot pace "
                          f"requests: `prefect gcl update {name} --slot-decay-per-second R` (R = requests per second).")
    if not gcl.active:
        raise ConfigError(f"Prefect global concurrency limit '{name}' is disabled (requests would not be paced): "
                          f"`prefect gcl enable {name}`.")
    return {"limit": gcl.limit, "slot_decay_per_second": gcl.slot_decay_per_second, "active": gcl.active}


class PrefectRateLimit:
    """Requests paced by a Prefect global concurrency limit with slot decay, shared by every process, worker and
    machine that talks to the same Prefect server: each request takes one slot with `rate_limit()`; slots free up
    at the limit's decay rate, so it allows bursts of `limit` and `slot_decay_per_second` requests/s sustained.

    Same interface as `RateLimiter`. A `local` RateLimiter (llm.requests_per_minute / tokens_per_minute) still
    applies first, in this process: both hold, the stricter one wins (Prefect limits count requests, not tokens).
    Validate the limit with `check_prefect_limit` first: `acquire` is strict and raises if it has disappeared."""

    def __init__(self, name: str, local: RateLimiter | None = None):
        self.name = name
        self.local = local

    async def acquire(self, estimated_tokens: float = 0.0) -> float:
        from prefect.concurrency.asyncio import ConcurrencySlotAcquisitionError, rate_limit

        started = time.monotonic()
        if self.local is not None:
            await self.local.acquire(estimated_tokens)
        try:
            await rate_limit(self.name, occupy=1, strict=True)
        except ConcurrencySlotAcquisitionError as exc:
            raise ConfigError(f"Could not take a slot of Prefect global concurrency limit '{self.name}': {exc}. "
                              f"If it was deleted: `{PREFECT_LIMIT_FIX.format(name=self.name)}`.") from exc
        return time.monotonic() - started

    def settle(self, estimated_tokens: float, actual_tokens: float) -> None:
        if self.local is not None:
            self.local.settle(estimated_tokens, actual_tokens)
