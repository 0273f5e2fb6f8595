"""The one retry policy and the per-endpoint concurrency limit of mheval.

Every model call goes through `run_with_retry` (what to retry, how long to wait) and holds an
`EndpointLimiter` slot while a request is on the wire (how many calls one server sees at once).
Both are small on purpose: an adaptive limiter can replace `EndpointLimiter` later as long as it
keeps `acquire`/`release`.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

# Statuses worth another try: rate limits, server-side failures, and a request timeout.
RETRYABLE_STATUSES = frozenset({408, 429})


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

    `max_attempts` counts every try, the first included.
    """

    max_attempts: int = 6
    base_s: float = 0.5
    max_s: float = 30.0
    jitter: bool = True

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
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> T:
    """Await `call()` until it succeeds, retrying TransientError per `policy`.

    Any other exception (ModelError for a 401, a cancellation, ...) passes through at once.
    When the attempts run out the last transient failure becomes a ModelError of the same kind.
    """
    attempt = 1
    while True:
        try:
            return await call()
        except TransientError as exc:
            if attempt >= policy.max_attempts:
                # Imported here: mheval.models imports this module, so a top-level import would be circular.
                from mheval.models.base import ModelError

                raise ModelError(exc.kind, f"gave up after {attempt} attempts: {exc.message}") from None
            await sleep(policy.delay(attempt, exc.retry_after))
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

    async def __aenter__(self) -> EndpointLimiter:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()


# One registry per event loop, so a limiter never outlives (or crosses) the loop it waits in.
_registry: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, EndpointLimiter]] = (
    weakref.WeakKeyDictionary()
)


def endpoint_limiter(endpoint: str, limit: int) -> EndpointLimiter:
    """The shared limiter of `endpoint` (a base URL) in the running loop.

    The first caller sets the limit; later callers on the same endpoint share that limiter, so
    two model objects on one server together stay under it.
    """
    loop = asyncio.get_running_loop()
    per_loop = _registry.setdefault(loop, {})
    key = endpoint.rstrip("/")
    limiter = per_loop.get(key)
    if limiter is None:
        limiter = per_loop[key] = EndpointLimiter(limit)
    return limiter
