"""Client-side request and token rate limits.

The limiter reserves a start time under a `threading.Lock` and then sleeps outside it, so one limiter can be shared
by several event loops (each Prefect task runs its own) and threads without binding to any loop.
"""

from __future__ import annotations

import asyncio
import threading
import time


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

    Burst capacity is one second's worth (at least one request), so over any window of T seconds at most
    rpm*T/60 + max(1, rpm/60) requests start: the limit holds when measured over any window.
    """

    def __init__(self, requests_per_minute: float | None = None, tokens_per_minute: float | None = None):
        self._lock = threading.Lock()
        self._req = (
            TokenBucket(requests_per_minute / 60.0, max(1.0, requests_per_minute / 60.0))
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
