"""The options of one chat call (models/base.py: CallOptions, ChatModelBase) and the cache key made from them.

mheval's own wrappers declare `complete` once, through ChatModelBase; a target of someone else's keeps
implementing the ChatModel protocol with a plain class. The cache key must stay the one stored runs hold,
or a resumed run would pay for every call again.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
from typing import Any

import pytest

from mheval.engine.batch import BatchModel
from mheval.engine.cache import CachedModel, call_key
from mheval.models.app_session import AppSession
from mheval.models.base import CallOptions, ChatModel, Completion
from mheval.models.openai_compat import OpenAICompatModel
from mheval.runfolder.store import Store

MESSAGES = [
    {"role": "system", "content": "You are a supportive listener."},
    {"role": "user", "content": "I haven't slept properly in weeks and I feel like I'm falling apart. 我好累。"},
]
SCHEMA = {"title": "reply", "type": "object", "properties": {"text": {"type": "string"}}}


class PlainModel:
    """A target as a third party writes one: only name, endpoint, complete and aclose, no mheval base class."""

    def __init__(self) -> None:
        self.name = "plain/listener"
        self.endpoint = "http://127.0.0.1:9/v1"
        self.calls: list[dict[str, Any]] = []

    async def complete(self, messages: list[dict[str, str]], **params: Any) -> Completion:
        self.calls.append(params)
        return Completion(text=f"reply {len(self.calls)}")

    async def aclose(self) -> None:
        pass


def old_call_key(endpoint: str, model: str, messages: list[dict[str, str]], **params: Any) -> str:
    """The key as it was computed when the four values were passed one by one (json.dumps of them all)."""
    payload = json.dumps(
        {"endpoint": endpoint, "model": model, "messages": messages, "params": params},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@pytest.mark.parametrize(
    "options",
    [
        CallOptions(),
        CallOptions(temperature=0.7, max_tokens=64, seed=3),
        CallOptions(temperature=0.0, max_tokens=512, seed=None, json_schema=SCHEMA),
    ],
)
def test_a_call_key_is_the_key_a_stored_run_holds(options: CallOptions) -> None:
    model = PlainModel()
    old = old_call_key(
        model.endpoint,
        model.name,
        MESSAGES,
        temperature=options.temperature,
        max_tokens=options.max_tokens,
        seed=options.seed,
        schema=options.json_schema,
    )
    assert call_key(model, MESSAGES, options) == old


@pytest.mark.parametrize("wrapper", [BatchModel, CachedModel, AppSession, OpenAICompatModel])
def test_each_wrapper_shows_the_protocols_signature(wrapper: type) -> None:
    """help() and inspect see the keywords and defaults of ChatModel.complete, not **kwargs."""
    assert inspect.signature(wrapper.complete) == inspect.signature(ChatModel.complete)


def test_options_default_to_the_protocols_defaults() -> None:
    defaults = {name: p.default for name, p in inspect.signature(ChatModel.complete).parameters.items()}
    assert CallOptions().as_kwargs() == {k: defaults[k] for k in ("temperature", "max_tokens", "seed", "json_schema")}


def test_a_plain_model_behind_the_cache_answers_new_calls_and_a_stored_answer_is_found(tmp_path) -> None:
    """A row kept under the key's old formula (a run folder from before) is found; other options reach the
    plain model, every one of them."""
    inner = PlainModel()
    stored = {"text": "kept earlier", "usage": {}, "structured": "json_schema", "finish_reason": "stop"}
    old = old_call_key(inner.endpoint, inner.name, MESSAGES, temperature=0.3, max_tokens=40, seed=7, schema=SCHEMA)

    async def calls(store: Store) -> list[str]:
        cached = CachedModel(inner, store)
        first = await cached.complete(MESSAGES, temperature=0.3, max_tokens=40, seed=7, json_schema=SCHEMA)
        second = await cached.complete(MESSAGES, temperature=0.3, max_tokens=40, seed=8, json_schema=SCHEMA)
        third = await cached.complete(MESSAGES)
        assert (cached.hits, cached.misses) == (1, 2)
        return [first.text, second.text, third.text]

    with Store.open(tmp_path) as store:
        store.cache_put(old, stored)
    with Store.open_existing(tmp_path) as store:
        assert asyncio.run(calls(store)) == ["kept earlier", "reply 1", "reply 2"]
    assert inner.calls == [
        {"temperature": 0.3, "max_tokens": 40, "seed": 8, "json_schema": SCHEMA},
        {"temperature": 0.0, "max_tokens": 512, "seed": None, "json_schema": None},
    ]
