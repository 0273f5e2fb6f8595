"""Adaptive concurrency (AIMD) and the tokens-per-minute budget: the rules on a scripted clock, and the
client against a real loopback server (tests/fake_openai.py) in a 429 storm and under a TPM budget."""

from __future__ import annotations

import asyncio

import pytest

from fake_openai import FakeOpenAI, rate_limited, reply, status
from mheval.models import parse_model_spec
from mheval.models.context import RunContext
from mheval.models.limits import (
    AdaptiveLimiter,
    AIMDPolicy,
    EndpointLimiter,
    RetryPolicy,
    TokenBucket,
    estimate_tokens,
)
from mheval.models.openai_compat import OpenAICompatModel

HELLO = [{"role": "user", "content": "hello there"}]
FAST_RETRY = RetryPolicy(max_attempts=40, base_s=0.001, max_s=0.01)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


# -- AIMD on a scripted clock ----------------------------------------------------------------------


def test_overload_halves_once_per_round_trip_and_successes_add_one_per_window() -> None:
    clock = Clock()
    lim = AdaptiveLimiter(16, clock=clock)
    assert lim.limit == 16
    started = clock()
    clock.t += 0.1
    lim.on_overload(started)
    assert lim.limit == 8
    # Every other request of the same burst started before the cut: no further cut.
    for _ in range(15):
        lim.on_overload(started)
    assert lim.limit == 8 and lim.decreases == 1
    clock.t += 0.1
    lim.on_overload(clock())  # a request sent after the cut is a new signal
    assert lim.limit == 4
    # Additive increase: one slot per window of `limit` successes.
    for _ in range(3):
        lim.on_success(0.01, clock())
    assert lim.limit == 4
    lim.on_success(0.01, clock())
    assert lim.limit == 5
    for _ in range(5 + 6 + 7):
        lim.on_success(0.01, clock())
    assert lim.limit == 8


def test_floor_and_ceiling_hold() -> None:
    clock = Clock()
    lim = AdaptiveLimiter(8, AIMDPolicy(floor=2), clock=clock)
    for _ in range(10):
        clock.t += 1
        lim.on_overload(clock())
    assert lim.limit == 2 and lim.lowest == 2
    for _ in range(1000):
        lim.on_success(0.01, clock())
    assert lim.limit == 8  # never above the configured concurrency


def test_latency_jump_counts_as_overload_but_steady_slowness_does_not() -> None:
    clock = Clock()
    lim = AdaptiveLimiter(32, clock=clock)
    for _ in range(40):
        lim.on_success(0.5, clock())
    assert lim.limit == 32
    lim.on_success(5.0, clock())  # one slow call: the fast average is not yet 3x the slow one
    assert lim.limit == 32
    lim.on_success(5.0, clock())
    assert lim.limit == 16
    # Fast loopback jitter (well under min_latency_s) never cuts, however large in relative terms.
    jitter = AdaptiveLimiter(32, clock=clock)
    for i in range(200):
        jitter.on_success(0.0005 if i % 2 else 0.05, clock())
    assert jitter.limit == 32 and jitter.decreases == 0


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        AIMDPolicy(decrease=1.5)
    with pytest.raises(ValueError):
        AIMDPolicy(floor=0)


# -- the client in a 429 storm --------------------------------------------------------------------


def test_429_storm_drops_the_in_flight_limit_then_it_recovers(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(*[rate_limited(retry_after="0") for _ in range(60)])
    fake_openai.default = reply("ok", delay=0.002)
    spec = parse_model_spec(f"test/storm@{fake_openai.base_url}")
    model = OpenAICompatModel(spec, concurrency=16, retry=FAST_RETRY)
    seen: list[int] = []
    used: list[AdaptiveLimiter] = []

    async def main() -> list[object]:
        stop = asyncio.Event()

        async def watch() -> None:
            while not stop.is_set():
                if model.limiter is not None:
                    seen.append(model.limiter.limit)
                await asyncio.sleep(0.001)

        watcher = asyncio.ensure_future(watch())
        try:
            return await asyncio.gather(*(model.complete(HELLO) for _ in range(400)))
        finally:
            stop.set()
            await watcher
            assert isinstance(model.limiter, AdaptiveLimiter)
            used.append(model.limiter)
            await model.aclose()

    results = asyncio.run(main())
    assert all(r.text == "ok" for r in results)  # type: ignore[attr-defined]
    limiter = used[0]
    assert limiter.lowest <= 2, f"the storm should have cut the limit far down, lowest was {limiter.lowest}"
    assert min(seen) <= 2
    assert limiter.limit == 16, "after the storm the limit climbs back to the configured concurrency"
    assert fake_openai.calls == 460


def test_a_fixed_limiter_is_available_and_ignores_signals(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(*[rate_limited(retry_after="0") for _ in range(10)])
    spec = parse_model_spec(f"test/fixed@{fake_openai.base_url}")
    model = OpenAICompatModel(spec, concurrency=4, retry=FAST_RETRY, adaptive=False)

    async def main() -> EndpointLimiter | None:
        try:
            await asyncio.gather(*(model.complete(HELLO) for _ in range(20)))
            return model.limiter
        finally:
            await model.aclose()

    limiter = asyncio.run(main())
    assert type(limiter) is EndpointLimiter and limiter.limit == 4


# -- tokens per minute ----------------------------------------------------------------------------


def test_token_bucket_waits_exactly_the_computed_time() -> None:
    clock = Clock()
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    bucket = TokenBucket(600, burst=50, clock=clock, sleep=fake_sleep)  # 10 tokens per second

    async def main() -> list[float]:
        return list(await asyncio.gather(*(bucket.take(30) for _ in range(3))))

    waits = asyncio.run(main())
    # 50 -> 20 (no wait) -> -10 (1 s) -> -40 (4 s): arrival order, each waits for its own debt.
    assert waits == pytest.approx([0.0, 1.0, 4.0])
    assert slept == pytest.approx([1.0, 4.0])
    clock.t += 4.0
    assert bucket.level == pytest.approx(0.0)
    assert bucket.delay_for(25) == pytest.approx(2.5)
    bucket.adjust(1000)  # a refund never overfills the bucket
    assert bucket.level == pytest.approx(50.0)
    assert asyncio.run(bucket.take(500)) == 0.0  # one call larger than the burst is capped, not stuck


def test_cancelled_wait_gives_its_tokens_back() -> None:
    bucket = TokenBucket(60, burst=1)  # one token per second

    async def main() -> None:
        await bucket.take(1)
        waiter = asyncio.ensure_future(bucket.take(1))
        await asyncio.sleep(0.01)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    asyncio.run(main())
    assert bucket.level == pytest.approx(0.0, abs=0.1)


def test_tpm_budget_delays_client_calls_as_computed(fake_openai: FakeOpenAI) -> None:
    max_tokens = 40
    charge = estimate_tokens(HELLO) + max_tokens
    # The server reports exactly what was charged, so nothing is given back and the pacing is exact.
    fake_openai.default = reply("ok", usage=(estimate_tokens(HELLO), max_tokens))
    bucket = TokenBucket(60 * 2 * charge, burst=2 * charge)  # two calls' worth now, then two per second
    spec = parse_model_spec(f"test/tpm@{fake_openai.base_url}")
    model = OpenAICompatModel(spec, tpm=bucket)

    async def main() -> None:
        try:
            for _ in range(4):
                await model.complete(HELLO, max_tokens=max_tokens)
        finally:
            await model.aclose()

    asyncio.run(main())
    # Calls 1-2 use the burst; calls 3 and 4 each wait for one call's worth: 0.5 s each, as the bucket
    # computes it (not a wall-clock reading, which a loaded machine would stretch).
    assert bucket.waited_s == pytest.approx(1.0, abs=0.1)


def test_tpm_is_settled_with_real_usage_and_failed_calls_refund(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(status(429, "slow down", headers={"Retry-After": "0"}))
    fake_openai.default = reply("ok", usage=(1, 1))
    charge = estimate_tokens(HELLO) + 40
    bucket = TokenBucket(60 * charge, burst=charge + 10)  # one call's worth and a little
    spec = parse_model_spec(f"test/refund@{fake_openai.base_url}")
    model = OpenAICompatModel(spec, tpm=bucket, retry=FAST_RETRY)

    async def main() -> None:
        try:
            for _ in range(5):
                await model.complete(HELLO, max_tokens=40)
        finally:
            await model.aclose()

    asyncio.run(main())
    # Each call was charged a full burst but used 2 tokens: the rest came back, so nobody waited,
    # and the 429 attempt gave back everything it took.
    assert bucket.waited_s == 0.0
    assert fake_openai.calls == 6


def test_tpm_budgets_belong_to_one_run_and_are_shared_by_name_within_it() -> None:
    first = RunContext.of({"openai/some-model": 90_000})
    a = first.bucket("openai/some-model")
    assert a is not None and a is first.bucket("openai/some-model")
    assert a.rate == pytest.approx(1500.0)
    assert first.bucket("openai/other") is None
    # A second run in the same process has its own budgets: nothing leaks from the first.
    second = RunContext.of({"openai/other": 60_000}, tpm_share=2)
    assert second.bucket("openai/some-model") is None
    other = second.bucket("openai/other")
    assert other is not None and other.rate == pytest.approx(500.0) and first.bucket("openai/other") is None
    spec = parse_model_spec("openai/some-model")
    assert OpenAICompatModel(spec, context=first).token_bucket is a
    assert OpenAICompatModel(spec, context=second).token_bucket is None


def test_estimate_is_generous_for_chinese() -> None:
    assert estimate_tokens([{"role": "user", "content": "a" * 400}]) == 104
    assert estimate_tokens([{"role": "user", "content": "我很难过" * 10}]) == 44


# -- the hot path's memoised JSON gives exactly the bytes of plain json.dumps ---------------------------


def test_memoised_schema_json_leaves_cache_keys_and_request_bodies_unchanged() -> None:
    import hashlib
    import json

    from mheval.engine.cache import cache_key
    from mheval.models.openai_compat import _payload, _response_format

    schema = {"title": "verdict", "type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}}
    # Text that looks like the internal stand-in must not confuse the splice.
    messages = [{"role": "user", "content": 'a "\\u0000mheval-schema\\u0000" b \x00mheval-schema\x00 我'}]
    for params in (
        {"temperature": 0.0, "max_tokens": 5, "seed": 1, "schema": schema},
        {"seed": 1},
        {"seed": None, "schema": None},
    ):
        plain = json.dumps(
            {"endpoint": "e", "model": "m", "messages": messages, "params": params}, sort_keys=True, ensure_ascii=False
        )
        for _ in range(2):  # the second time from the memo
            assert cache_key("e", "m", messages, params) == hashlib.sha256(plain.encode()).hexdigest()
    body = {"model": "x", "messages": messages, "temperature": 0.1, "max_tokens": 3}
    for mode in ("json_schema", "json_object", "none"):
        fmt = _response_format(mode, schema)
        plain_body = json.dumps({**body, "response_format": fmt} if fmt is not None else body).encode()
        for _ in range(2):
            assert _payload(body, mode, schema) == plain_body
