"""The OpenAI-compatible client against a real loopback server: retries, limits, structured output, keys."""

from __future__ import annotations

import asyncio
import email.utils
import gc
import json
import time
from typing import Any

import pytest

from fake_openai import (
    FakeOpenAI,
    drop,
    malformed,
    no_choices,
    rate_limited,
    reply,
    respond,
    status,
)
from mheval.models import ModelError, OpenAICompatModel, make_model, open_models, parse_model_spec
from mheval.models.limits import EndpointLimiter, RetryPolicy, parse_retry_after, run_with_retry

FAST = RetryPolicy(max_attempts=4, base_s=0.01, max_s=0.05)
HELLO = [{"role": "user", "content": "hello there"}]
SCHEMA = {
    "title": "Verdict score",
    "type": "object",
    "properties": {"score": {"type": "integer"}},
    "required": ["score"],
}
KEY = "sk-test-0123456789abcdefSECRET"


def model_for(server: FakeOpenAI, **kwargs: Any) -> OpenAICompatModel:
    kwargs.setdefault("retry", FAST)
    return OpenAICompatModel(parse_model_spec(f"test/some-model@{server.base_url}"), **kwargs)


def call(model: OpenAICompatModel, n: int = 1, **kwargs: Any) -> list[Any]:
    """Run n concurrent completions in a fresh loop, close the model, return results or exceptions."""

    async def main() -> list[Any]:
        try:
            return await asyncio.gather(*(model.complete(HELLO, **kwargs) for _ in range(n)), return_exceptions=True)
        finally:
            await model.aclose()

    return asyncio.run(main())


def one(model: OpenAICompatModel, **kwargs: Any) -> Any:
    (result,) = call(model, **kwargs)
    if isinstance(result, BaseException):
        raise result
    return result


# -- the plain path -----------------------------------------------------------------------------


def test_completion_fields_and_request_shape(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(reply("I hear you.", usage=(11, 4)))
    c = one(model_for(fake_openai), temperature=0.7, max_tokens=64, seed=3)
    assert c.text == "I hear you."
    assert (c.usage.prompt_tokens, c.usage.completion_tokens) == (11, 4)
    assert c.latency_s > 0 and c.structured == "none" and c.finish_reason == "stop"
    (req,) = fake_openai.requests
    assert req.path == "/v1/chat/completions"
    assert req.json == {"model": "some-model", "messages": HELLO, "temperature": 0.7, "max_tokens": 64, "seed": 3}
    assert "authorization" not in req.headers  # no key variable for an unknown provider


def test_seed_left_out_when_none_and_usage_absent_is_zero(fake_openai: FakeOpenAI) -> None:
    def no_usage(body: dict[str, Any]) -> Any:
        assert "seed" not in body
        return reply("fine", usage=(0, 0))

    fake_openai.script(respond(no_usage))
    c = one(model_for(fake_openai))
    assert c.text == "fine" and c.usage.prompt_tokens == 0 and c.usage.completion_tokens == 0


# -- retries ------------------------------------------------------------------------------------


class RecordedSleep:
    """An injected clock for the retry loop: records each wait instead of waiting it."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def test_429_retry_after_is_honoured(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(rate_limited(retry_after="1"), reply("after the wait"))
    sleep = RecordedSleep()
    c = one(model_for(fake_openai, retry=RetryPolicy(max_attempts=3, base_s=0.01, max_s=5, sleep=sleep)))
    assert c.text == "after the wait" and fake_openai.calls == 2
    assert sleep.waits == [1.0]


def test_retry_after_is_capped_at_max_s(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(rate_limited(retry_after="120"), reply("soon"))
    sleep = RecordedSleep()
    c = one(model_for(fake_openai, retry=RetryPolicy(max_attempts=2, base_s=0.01, max_s=0.2, sleep=sleep)))
    assert c.text == "soon" and sleep.waits == [0.2]


@pytest.mark.parametrize(
    "failure",
    [status(500), status(503), drop(), malformed(), no_choices(), rate_limited()],
    ids=["500", "503", "dropped", "malformed", "no_choices", "429"],
)
def test_transient_failure_then_success(fake_openai: FakeOpenAI, failure: Any) -> None:
    fake_openai.script(failure, reply("recovered"))
    assert one(model_for(fake_openai)).text == "recovered"
    assert fake_openai.calls == 2


def test_timeout_then_success(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(reply("too late", delay=2.0), reply("in time"))
    c = one(model_for(fake_openai, timeout_s=0.3))
    # "in time" can only come from a second attempt: the first was cut off by the timeout.
    assert c.text == "in time" and fake_openai.calls == 2


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        (status(503), "http_503"),
        (drop(), "connection"),
        (malformed(), "bad_response"),
        (rate_limited(retry_after="0"), "http_429"),
    ],
    ids=["503", "dropped", "malformed", "429"],
)
def test_gives_up_after_max_attempts(fake_openai: FakeOpenAI, failure: Any, kind: str) -> None:
    fake_openai.default = failure
    with pytest.raises(ModelError) as info:
        one(model_for(fake_openai, retry=RetryPolicy(max_attempts=3, base_s=0.01, max_s=0.02)))
    assert info.value.kind == kind and "after 3 attempts" in str(info.value)
    assert fake_openai.calls == 3


def test_gives_up_on_repeated_timeouts(fake_openai: FakeOpenAI) -> None:
    fake_openai.default = reply("never in time", delay=1.0)
    with pytest.raises(ModelError) as info:
        one(model_for(fake_openai, timeout_s=0.15, retry=RetryPolicy(max_attempts=2, base_s=0.01)))
    assert info.value.kind == "timeout" and fake_openai.calls == 2


@pytest.mark.parametrize("code", [400, 401, 403, 404])
def test_client_errors_are_not_retried(fake_openai: FakeOpenAI, code: int) -> None:
    fake_openai.default = status(code, "you cannot do that")
    with pytest.raises(ModelError) as info:
        one(model_for(fake_openai))
    assert info.value.kind == f"http_{code}"
    assert "you cannot do that" in str(info.value)
    assert fake_openai.calls == 1


# -- concurrency --------------------------------------------------------------------------------


def test_concurrency_limit_is_respected(fake_openai: FakeOpenAI) -> None:
    fake_openai.default = reply("slow", delay=0.05)
    results = call(model_for(fake_openai, concurrency=3), n=15)
    assert all(r.text == "slow" for r in results)
    assert fake_openai.max_in_flight == 3


def test_two_models_on_one_endpoint_share_the_limit(fake_openai: FakeOpenAI) -> None:
    fake_openai.default = reply("slow", delay=0.05)
    a, b = model_for(fake_openai, concurrency=2), model_for(fake_openai, concurrency=2)

    async def main() -> None:
        try:
            await asyncio.gather(*(m.complete(HELLO) for m in [a, b] * 6))
        finally:
            await a.aclose()
            await b.aclose()

    asyncio.run(main())
    assert fake_openai.calls == 12 and fake_openai.max_in_flight == 2


def test_limiter_survives_cancelled_waiters() -> None:
    async def main() -> None:
        limiter = EndpointLimiter(1)
        await limiter.acquire()
        waiter = asyncio.ensure_future(limiter.acquire())
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        limiter.release()
        assert limiter.in_use == 0
        async with limiter:
            assert limiter.in_use == 1
        # Raising the limit lets queued callers in at once.
        await limiter.acquire()
        queued = asyncio.ensure_future(limiter.acquire())
        await asyncio.sleep(0)
        assert not queued.done()
        limiter.limit = 2
        await asyncio.wait_for(queued, 1)
        assert limiter.in_use == 2

    asyncio.run(main())


# -- structured output --------------------------------------------------------------------------


def test_json_schema_is_asked_first(fake_openai: FakeOpenAI) -> None:
    fake_openai.script('{"score": 4}')
    c = one(model_for(fake_openai), json_schema=SCHEMA)
    assert c.structured == "json_schema" and json.loads(c.text) == {"score": 4}
    fmt = fake_openai.requests[0].json["response_format"]
    assert fmt == {"type": "json_schema", "json_schema": {"name": "Verdict_score", "schema": SCHEMA, "strict": False}}


def test_llamacpp_style_refusal_falls_back_to_json_object_and_is_remembered(fake_openai: FakeOpenAI) -> None:
    fake_openai.refuse("json_schema", code=500)
    fake_openai.default = reply('{"score": 2}')
    model = model_for(fake_openai)

    async def main() -> list[Any]:
        try:
            first = await model.complete(HELLO, json_schema=SCHEMA)
            assert model.structured_mode == "json_object"
            second = await model.complete(HELLO, json_schema=SCHEMA)
            return [first, second]
        finally:
            await model.aclose()

    first, second = asyncio.run(main())
    assert first.structured == second.structured == "json_object"
    types = [r.json["response_format"]["type"] for r in fake_openai.requests]
    assert types == ["json_schema", "json_object", "json_object"]  # the second call skips json_schema
    assert fake_openai.requests[1].json["response_format"]["schema"] == SCHEMA


def test_full_fallback_to_free_text(fake_openai: FakeOpenAI) -> None:
    fake_openai.refuse("json_schema", "json_object", code=400)
    fake_openai.default = reply("score: 3")
    model = model_for(fake_openai)
    results = call(model, n=1, json_schema=SCHEMA)
    assert results[0].structured == "none" and results[0].text == "score: 3"
    assert "response_format" not in fake_openai.requests[-1].json
    assert model.structured_mode == "none"


def test_500_after_a_mode_worked_is_retried_not_a_fallback(fake_openai: FakeOpenAI) -> None:
    fake_openai.script('{"score": 1}', status(500, "internal error"), '{"score": 5}')
    model = model_for(fake_openai)

    async def main() -> Any:
        try:
            await model.complete(HELLO, json_schema=SCHEMA)
            return await model.complete(HELLO, json_schema=SCHEMA)
        finally:
            await model.aclose()

    second = asyncio.run(main())
    assert second.structured == "json_schema" and json.loads(second.text) == {"score": 5}
    assert [r.json["response_format"]["type"] for r in fake_openai.requests] == ["json_schema"] * 3


def test_error_in_every_mode_does_not_change_the_remembered_mode(fake_openai: FakeOpenAI) -> None:
    fake_openai.default = status(400, "prompt is too long")
    model = model_for(fake_openai)
    with pytest.raises(ModelError) as info:
        one(model, json_schema=SCHEMA)
    assert info.value.kind == "http_400" and "too long" in str(info.value)
    assert fake_openai.calls == 3  # one try per request shape, none of them retried
    assert model.structured_mode == "json_schema"


# -- keys ---------------------------------------------------------------------------------------


def test_key_is_sent_as_bearer_and_never_shown(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MHEVAL_TEST_KEY", KEY)
    spec = parse_model_spec(f"vllm/m@{fake_openai.base_url}", api_key_env="MHEVAL_TEST_KEY")
    model = OpenAICompatModel(spec, retry=FAST)
    assert one(model).text == "ok"
    assert fake_openai.requests[0].headers["authorization"] == f"Bearer {KEY}"
    for text in (repr(spec), str(spec), json.dumps(spec.model_dump()), repr(model), spec.name):
        assert KEY not in text

    # A server that echoes the Authorization header into its error body, for both error paths.
    fake_openai.default = status(401, "invalid credentials: {authorization}")
    with pytest.raises(ModelError) as info:
        one(OpenAICompatModel(spec, retry=FAST))
    assert info.value.kind == "http_401" and "invalid credentials" in str(info.value)
    assert KEY not in str(info.value) and KEY[:10] not in repr(info.value)

    fake_openai.default = status(503, "overloaded, your request had {authorization}")
    with pytest.raises(ModelError) as info:
        one(OpenAICompatModel(spec, retry=RetryPolicy(max_attempts=2, base_s=0.01)))
    assert info.value.kind == "http_503" and KEY not in str(info.value)


def test_key_read_at_call_time_and_required_key_missing(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # A loopback URL needs no key (tests/test_local_keys.py); required here as it is for a hosted one.
    spec = parse_model_spec(f"openai/gpt-x@{fake_openai.base_url}").model_copy(update={"key_required": True})
    assert spec.missing_key() == "OPENAI_API_KEY"
    with pytest.raises(ModelError) as info:
        one(OpenAICompatModel(spec, retry=FAST))
    assert info.value.kind == "no_api_key" and "OPENAI_API_KEY" in str(info.value)
    assert fake_openai.calls == 0
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # set after the spec was made: still used
    assert one(OpenAICompatModel(spec, retry=FAST)).text == "ok"
    assert fake_openai.requests[0].headers["authorization"] == f"Bearer {KEY}"


# -- policy details and helpers -----------------------------------------------------------------


def test_backoff_is_exponential_capped_and_jittered() -> None:
    plain = RetryPolicy(base_s=0.5, max_s=3, jitter=False)
    assert [plain.delay(a) for a in range(1, 6)] == [0.5, 1.0, 2.0, 3, 3]
    jittered = RetryPolicy(base_s=0.5, max_s=3)
    samples = [jittered.delay(3) for _ in range(200)]
    assert all(0 <= s <= 2.0 for s in samples) and len(set(samples)) > 100
    assert jittered.delay(1, retry_after=10) == 3  # the server's hint, capped


def test_parse_retry_after_seconds_and_http_date() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    now = time.time()
    date = email.utils.formatdate(now + 20, usegmt=True)
    assert 18 <= parse_retry_after(date, now=now) <= 21  # type: ignore[operator]
    assert parse_retry_after(email.utils.formatdate(now - 50, usegmt=True), now=now) == 0.0


def test_run_with_retry_passes_other_errors_through() -> None:
    attempts = 0

    async def boom() -> None:
        nonlocal attempts
        attempts += 1
        raise ModelError("http_401", "no")

    with pytest.raises(ModelError):
        asyncio.run(run_with_retry(boom, RetryPolicy(base_s=0)))
    assert attempts == 1


def test_open_models_closes_sessions(fake_openai: FakeOpenAI) -> None:
    async def main() -> list[Any]:
        async with open_models([f"test/a@{fake_openai.base_url}", f"test/b@{fake_openai.base_url}"]) as models:
            texts = [(await m.complete(HELLO)).text for m in models]
            sessions = [m._client.session for m in models]  # type: ignore[attr-defined]
        assert all(s is not None and s.closed for s in sessions)
        return texts

    assert asyncio.run(main()) == ["ok", "ok"]
    assert [r.json["model"] for r in fake_openai.requests] == ["a", "b"]


# The first loop's session cannot be closed once that loop is gone; aiohttp warns about it.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning", "ignore::ResourceWarning")
def test_model_survives_a_new_event_loop(fake_openai: FakeOpenAI) -> None:
    model = model_for(fake_openai)
    assert asyncio.run(model.complete(HELLO)).text == "ok"  # no aclose: its loop is gone afterwards
    assert one(model).text == "ok"
    assert fake_openai.calls == 2
    gc.collect()  # let the abandoned session's warning fire here, under this test's filter


def test_make_model_refuses_unstarted_local() -> None:
    with pytest.raises(ValueError, match="open_models"):
        make_model("local/smollm2")


def test_many_calls_in_parallel_on_loopback(fake_openai: FakeOpenAI) -> None:
    """600 calls at concurrency 32: every one answered, several at once, never more than the limit.
    (How fast is measured by benchmarks/throughput.py, not asserted here.)"""
    fake_openai.default = reply("ok", delay=0.005)
    n = 600
    model = model_for(fake_openai, concurrency=32)
    results = call(model, n=n)
    assert len(results) == n and all(r.text == "ok" for r in results)
    assert fake_openai.calls == n and 1 < fake_openai.max_in_flight <= 32
