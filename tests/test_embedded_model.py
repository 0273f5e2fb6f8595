"""The embedded target's model (models/__init__.py EmbeddedModel): it shows the chat protocol's signature and
counts every call on its server's meter, with the options of the call reaching the server.

The llama.cpp child process is not started here (tests/test_local_model.py runs the real one, with SmolLM2):
a LocalServer object is pointed at the scriptable OpenAI-compatible server on loopback (tests/fake_openai.py),
so the HTTP client, the meter and the end-of-run figures are the real ones.
"""

from __future__ import annotations

import asyncio
import inspect

import pytest

from fake_openai import FakeOpenAI, reply, status
from mheval.models import ChatModel, EmbeddedModel, ModelError, parse_model_spec
from mheval.models.local import LocalServer

HELLO = [{"role": "user", "content": "I have had a long week and could use a kind word."}]


def _model_on(fake: FakeOpenAI, slots: int = 2) -> EmbeddedModel:
    server = LocalServer(slots=slots, threads=1)
    server.port = fake.port  # the fake stands where the llama.cpp child would listen
    return EmbeddedModel(parse_model_spec("local/smollm2"), server, concurrency=16)


def test_help_shows_the_protocols_keywords() -> None:
    assert inspect.signature(EmbeddedModel.complete) == inspect.signature(ChatModel.complete)


def test_each_call_is_counted_with_its_tokens_and_its_options_reach_the_server(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(reply("That sounds tiring.", usage=(12, 3)), reply("You got through it.", usage=(12, 4)))
    model = _model_on(fake_openai)

    async def two_calls() -> None:
        try:
            await model.complete(HELLO, max_tokens=40, temperature=0.6, seed=5)
            await model.complete(HELLO)
        finally:
            await model.aclose()

    asyncio.run(two_calls())
    stats = model.server.stats
    assert (stats.calls, stats.completion_tokens) == (2, 7)
    assert stats.busy_s > 0
    first, second = (r.json for r in fake_openai.requests)
    assert (first["max_tokens"], first["temperature"], first["seed"]) == (40, 0.6, 5)
    assert (second["max_tokens"], second["temperature"]) == (512, 0.0) and "seed" not in second


def test_a_failed_call_is_counted_without_tokens(fake_openai: FakeOpenAI) -> None:
    """A call the server refuses (a 400 is not retried) still leaves the meter: one call, no tokens."""
    fake_openai.script(status(400, "bad request"))
    model = _model_on(fake_openai)

    async def refused() -> None:
        try:
            with pytest.raises(ModelError, match="http_400"):
                await model.complete(HELLO)
        finally:
            await model.aclose()

    asyncio.run(refused())
    assert (model.server.stats.calls, model.server.stats.completion_tokens) == (1, 0)
