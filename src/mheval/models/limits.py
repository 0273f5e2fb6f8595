"""The one retry policy and the per-endpoint limits of mheval.

Every model call goes through `run_with_retry` (what to retry, how long to wait), holds a slot of its
endpoint's limiter while a request is on the wire (how many calls one server sees at once), and, when
the model has a tokens-per-minute budget, first takes its tokens from a `TokenBucket`.

The endpoint limiter is adaptive (`AdaptiveLimiter`, AIMD as in TCP congestion control): it starts at
the configured concurrency, which is also its ceiling; an overload signal (HTTP 429 or 503, a timeout,
or latency that jumps well above its long-run level) halves the limit, at most once per round trip;
each full window of successes (as many as the limit) adds one slot back, up to the ceiling. So a run
that hits a provider's rate limit slows down by itself instead of retrying into a wall, and speeds up
again when the provider recovers.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import random
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from mheval.models.base import ModelError

T = TypeVar("T")

# Statuses worth another try: rate limits, server-side failures, and a request timeout.
RETRYABLE_STATUSES = frozenset({408, 429})


# Statuses that say "too much, slow down": they make an adaptive limiter cut its limit.
OVERLOAD_STATUSES = frozenset({429, 503, 529})


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUSES or 500 <= status <= 599


class TransientError(Exception):
    """A failure that may go away if we wait and try again (raised inside a call, caught by the retry loop).

    `kind` follows ModelError's tags (http_429, http_503, timeout, connection, bad_response);
    `retry_after` is the server's own wait hint in seconds, if it gave one.
    """

    def __init__(self, kind: str, message: str, retry_after: float | None = None) -> None:
        self.kind = kind
        self.message = message
        self.retry_after = retry_after
        super().__init__(f"{kind}: {message}")


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: either delta-seconds or an HTTP date. None if unusable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with full jitter; a server's Retry-After wins (capped at max_s).

    `max_attempts` counts every try, the first included. `sleep` waits between attempts (a test gives
    one that records the delays instead of waiting them).
    """

    max_attempts: int = 6
    base_s: float = 0.5
    max_s: float = 30.0
    jitter: bool = True
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base_s < 0 or self.max_s < 0:
            raise ValueError("base_s and max_s must not be negative")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """How long to sleep after failed attempt number `attempt` (1-based)."""
        if retry_after is not None:
            return min(retry_after, self.max_s)
        ceiling = min(self.max_s, self.base_s * (2 ** (attempt - 1)))
        # Full jitter (uniform in [0, ceiling]) spreads a burst of clients that failed together.
        return random.uniform(0.0, ceiling) if self.jitter else ceiling


async def run_with_retry(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[object]] | None = None,
) -> T:
    """Await `call()` until it succeeds, retrying TransientError per `policy` (waiting with `sleep`, by
    default the policy's).

    Any other exception (ModelError for a 401, a cancellation, ...) passes through at once.
    When the attempts run out the last transient failure becomes a ModelError of the same kind.
    """
    attempt = 1
    while True:
        try:
            return await call()
        except TransientError as exc:
            if attempt >= policy.max_attempts:
                raise ModelError(exc.kind, f"gave up after {attempt} attempts: {exc.message}") from None
            await (sleep or policy.sleep)(policy.delay(attempt, exc.retry_after))
            attempt += 1


class EndpointLimiter:
    """At most `limit` calls in flight at once, first come first served.

    Unlike asyncio.Semaphore the limit can be changed while in use (an adaptive limiter will),
    and an idle limiter holds no loop-bound state.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self._limit = limit
        self._in_use = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def limit(self) -> int:
        return self._limit

    @limit.setter
    def limit(self, value: int) -> None:
        if value < 1:
            raise ValueError("limit must be at least 1")
        self._limit = value
        self._wake()

    @property
    def in_use(self) -> int:
        return self._in_use

    async def acquire(self) -> None:
        if self._in_use < self._limit and not self._waiters:
            self._in_use += 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                # The slot was handed to us just as we were cancelled: give it back.
                self.release()
            elif fut in self._waiters:
                self._waiters.remove(fut)
            raise

    def release(self) -> None:
        if self._in_use <= 0:
            raise RuntimeError("release() without acquire()")
        self._in_use -= 1
        self._wake()

    def _wake(self) -> None:
        # Hand slots directly to waiters so a newcomer cannot jump the queue.
        while self._waiters and self._in_use < self._limit:
            fut = self._waiters.popleft()
            if not fut.done():
                self._in_use += 1
                fut.set_result(None)

    # What the client reports after each attempt; a fixed limiter ignores it (AdaptiveLimiter acts on it).
    def now(self) -> float:
        return time.monotonic()

    def on_success(self, latency_s: float, started: float) -> None:
        pass

    def on_overload(self, started: float) -> None:
        pass

    async def __aenter__(self) -> EndpointLimiter:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()


@dataclass(frozen=True, slots=True)
class AIMDPolicy:
    """How an `AdaptiveLimiter` moves between `floor` and its ceiling (the configured concurrency).

    - `increase`: slots added per window of successes (a window is as many successes as the limit).
    - `decrease`: the factor the limit is multiplied by on an overload signal.
    - Latency growth counts as overload when the fast moving average of latency exceeds
      `latency_factor` times the slow one, is at least `min_latency_s` (loopback jitter is not
      congestion), and at least `warmup` calls have been seen.
    """

    floor: int = 1
    increase: float = 1.0
    decrease: float = 0.5
    latency_factor: float = 3.0
    min_latency_s: float = 1.0
    warmup: int = 20
    fast_alpha: float = 0.2
    slow_alpha: float = 0.02

    def __post_init__(self) -> None:
        if self.floor < 1:
            raise ValueError("floor must be at least 1")
        if not 0 < self.decrease < 1:
            raise ValueError("decrease must be between 0 and 1")
        if self.increase <= 0 or self.latency_factor <= 1:
            raise ValueError("increase must be positive and latency_factor above 1")


class AdaptiveLimiter(EndpointLimiter):
    """An EndpointLimiter whose limit follows AIMD between `policy.floor` and `ceiling`.

    The client reports every finished attempt: `on_success(latency, started)` or
    `on_overload(started)`, where `started` is `now()` taken when the request got its slot. A cut
    only happens for a request that started after the previous cut, so one burst of 429s (all the
    requests that were in flight together) halves the limit once, not once per request.
    """

    def __init__(
        self, ceiling: int, policy: AIMDPolicy | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(ceiling)
        self.policy = policy or AIMDPolicy()
        self.ceiling = ceiling
        self.floor = min(self.policy.floor, ceiling)
        self._clock = clock
        self.decreases = 0
        self.increases = 0
        self.lowest = ceiling  # the lowest limit reached so far, for reports and tests
        self._credit = 0.0
        self._last_cut = -math.inf
        self._calls = 0
        self._fast: float | None = None
        self._slow: float | None = None

    def now(self) -> float:
        return self._clock()

    def on_success(self, latency_s: float, started: float) -> None:
        self._calls += 1
        fast = latency_s if self._fast is None else self._fast + self.policy.fast_alpha * (latency_s - self._fast)
        slow = latency_s if self._slow is None else self._slow + self.policy.slow_alpha * (latency_s - self._slow)
        self._fast, self._slow = fast, slow
        if self._latency_grew():
            self.on_overload(started)
            return
        if self.limit >= self.ceiling:
            return
        self._credit += self.policy.increase / self.limit
        if self._credit >= 1.0:
            step = int(self._credit)
            self._credit -= step
            self.limit = min(self.ceiling, self.limit + step)
            self.increases += 1

    def on_overload(self, started: float) -> None:
        if started < self._last_cut:
            return  # it was already in flight when we last cut: that cut was the answer to it
        self._last_cut = self.now()
        self._credit = 0.0
        cut = max(self.floor, int(self.limit * self.policy.decrease))
        if cut < self.limit:
            self.limit = cut
            self.decreases += 1
            self.lowest = min(self.lowest, cut)
        # Latency that caused a cut must not cause the next one too: forget the fast average.
        self._fast = self._slow

    def _latency_grew(self) -> bool:
        p = self.policy
        if self._calls < p.warmup or self._fast is None or self._slow is None:
            return False
        return self._fast >= p.min_latency_s and self._fast > p.latency_factor * self._slow


class TokenBucket:
    """A tokens-per-minute budget: `take(n)` waits until `n` tokens fit, refilling at `per_minute / 60`
    per second up to `burst` (default: one minute's worth, as providers count).

    Tokens are taken at once and the bucket may go into debt, so callers are served in arrival order
    without a lock and the wait of each is exact: (debt after taking) / rate. `adjust(n)` gives back
    (or, negative, takes more) once a call's real usage is known; a cancelled wait gives its tokens back.
    """

    def __init__(
        self,
        per_minute: float,
        burst: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        if per_minute <= 0:
            raise ValueError("per_minute must be positive")
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.capacity = float(burst if burst is not None else per_minute)
        if self.capacity <= 0:
            raise ValueError("burst must be positive")
        self._clock = clock
        self._sleep = sleep
        self._level = self.capacity
        self._stamp = clock()
        self.waited_s = 0.0  # total time callers spent waiting, for reports and tests

    @property
    def level(self) -> float:
        self._refill()
        return self._level

    def _refill(self) -> None:
        now = self._clock()
        self._level = min(self.capacity, self._level + (now - self._stamp) * self.rate)
        self._stamp = now

    def delay_for(self, tokens: float) -> float:
        """Seconds a `take(tokens)` made now would wait (without taking anything)."""
        self._refill()
        need = min(tokens, self.capacity)
        return max(0.0, (need - self._level) / self.rate)

    async def take(self, tokens: float) -> float:
        """Take `tokens` (capped at the burst size, so one large call cannot wait forever); returns the wait."""
        need = min(max(0.0, tokens), self.capacity)
        self._refill()
        self._level -= need
        wait = max(0.0, -self._level / self.rate)
        if wait > 0:
            try:
                await self._sleep(wait)
            except asyncio.CancelledError:
                self._level += need
                raise
            self.waited_s += wait
        return wait

    def adjust(self, tokens: float) -> None:
        """Give back `tokens` (or take more when negative) after the fact."""
        self._refill()
        self._level = min(self.capacity, self._level + tokens)


def estimate_tokens(messages: list[dict[str, str]]) -> int:
    """A rough, deliberately generous token count of chat messages, for budgeting before a call:
    about 4 characters per token for ASCII text, one token per other character (CJK), plus a few
    tokens of framing per message."""
    total = 0
    for message in messages:
        text = str(message.get("content") or "")
        ascii_chars = sum(1 for ch in text if ord(ch) < 128) if not text.isascii() else len(text)
        total += math.ceil(ascii_chars / 4) + (len(text) - ascii_chars) + 4
    return total


# JSON text of objects passed again and again (a protocol's output schema on every judge call), by identity.
# Each entry keeps its object alive, so an id cannot be reused by another object while it is here.
_JSON_MEMO: dict[tuple[int, bool, bool], tuple[object, str]] = {}
_JSON_MEMO_SIZE = 64


def json_of(obj: object, *, sort_keys: bool = False, ensure_ascii: bool = True) -> str:
    """`json.dumps(obj, ...)`, remembered for the same object (which must not be mutated afterwards)."""
    key = (id(obj), sort_keys, ensure_ascii)
    hit = _JSON_MEMO.get(key)
    if hit is not None and hit[0] is obj:
        return hit[1]
    text = json.dumps(obj, sort_keys=sort_keys, ensure_ascii=ensure_ascii)
    if len(_JSON_MEMO) < _JSON_MEMO_SIZE:
        _JSON_MEMO[key] = (obj, text)
    return text


# One registry per event loop, so a limiter never outlives (or crosses) the loop it waits in.
_registry: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, EndpointLimiter]] = (
    weakref.WeakKeyDictionary()
)


def endpoint_limiter(endpoint: str, limit: int, *, adaptive: bool = True) -> EndpointLimiter:
    """The shared limiter of `endpoint` (a base URL) in the running loop.

    The first caller sets the limit (the ceiling, when adaptive); later callers on the same endpoint
    share that limiter, so two model objects on one server together stay under it.
    """
    loop = asyncio.get_running_loop()
    per_loop = _registry.setdefault(loop, {})
    key = endpoint.rstrip("/")
    limiter = per_loop.get(key)
    if limiter is None:
        limiter = per_loop[key] = AdaptiveLimiter(limit) if adaptive else EndpointLimiter(limit)
    return limiter
