"""The one cache of model calls. The key holds only what changes the output: endpoint, model,
messages and sampling parameters (a repeat or a sample differs by its seed), never the API key."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

from mheval.models.base import CallOptions, ChatModel, ChatModelBase, Completion, Message, session_of, valid_text
from mheval.models.limits import json_of
from mheval.records import Usage

# A stand-in for the schema while the rest of the key is serialised; the schema's own JSON (memoised,
# see `json_of`) is put in its place, giving exactly the bytes json.dumps would have given.
_MARK = "\x00mheval-schema\x00"
_MARK_JSON = json.dumps(_MARK)


def cache_key(endpoint: str, model: str, messages: list[Message], params: dict[str, Any]) -> str:
    schema = params.get("schema")
    if isinstance(schema, dict):
        head = json.dumps(
            {"endpoint": endpoint, "model": model, "messages": messages, "params": {**params, "schema": _MARK}},
            sort_keys=True,
            ensure_ascii=False,
        )
        # "params" sorts last and numbers follow "schema" inside it, so the last mark is the schema's.
        before, _, after = head.rpartition(_MARK_JSON)
        payload = before + json_of(schema, sort_keys=True, ensure_ascii=False) + after
    else:
        payload = json.dumps(
            {"endpoint": endpoint, "model": model, "messages": messages, "params": params},
            sort_keys=True,
            ensure_ascii=False,
        )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def call_key(model: ChatModel, messages: list[Message], options: CallOptions) -> str:
    """The cache key of one `model.complete(...)` call (also a batch request's custom_id). The names under
    "params" are those keys have always had (the schema as "schema"), so a stored run's answers are found."""
    params = {
        "temperature": options.temperature,
        "max_tokens": options.max_tokens,
        "seed": options.seed,
        "schema": options.json_schema,
    }
    return cache_key(model.endpoint, model.name, messages, params)


class CallCache(Protocol):
    """Where answers are kept: the run store, or (on a Ray worker) a `CallRecorder`."""

    def cache_get(self, key: str) -> dict[str, Any] | None: ...

    def cache_put(self, key: str, value: dict[str, Any]) -> None: ...


class CallRecorder:
    """A cache for a process that may not write the store (a Ray worker): it reads answers from the
    run's store when this machine can see it (`reader`), and keeps what is put for the driver to write."""

    def __init__(self, reader: CallCache | None = None) -> None:
        self.reader = reader
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def cache_get(self, key: str) -> dict[str, Any] | None:
        return self.reader.cache_get(key) if self.reader is not None else None

    def cache_put(self, key: str, value: dict[str, Any]) -> None:
        self.calls.append((key, value))

    def take(self) -> list[tuple[str, dict[str, Any]]]:
        calls, self.calls = self.calls, []
        return calls


def _usage(kept: Any) -> Usage:
    """The usage of a cached answer, or none when the row holds something that is not token counts."""
    try:
        return Usage(**kept)
    except (TypeError, ValueError):
        return Usage()


class CachedModel(ChatModelBase):
    """A ChatModel that answers from the run store when the same call was made before."""

    def __init__(self, model: ChatModel, store: CallCache, owner: CachedModel | None = None) -> None:
        self.inner = model
        self.store = store
        self.name = model.name
        self.endpoint = model.endpoint
        self.hits = 0
        self.misses = 0
        self.usage = Usage()  # the tokens of the calls made (misses), as the providers reported them
        self._owner = owner  # a session's calls count on the target it belongs to
        # A session of a stateful app (models/base.py): what a conversation cut mid-way does on resume.
        self.stateful: bool = bool(getattr(model, "stateful", False))
        self.on_resume: str = str(getattr(model, "on_resume", "mark"))

    def session(self, key: str) -> CachedModel | None:
        """The cached view of one conversation's session, when the model is a SessionTarget (models/base.py)."""
        inner = session_of(self.inner, key)
        return None if inner is None else CachedModel(inner, self.store, owner=self._owner or self)

    async def _complete(self, messages: list[Message], options: CallOptions) -> Completion:
        key = call_key(self, messages, options)
        hit = self.store.cache_get(key)
        counts = self._owner or self
        if hit is not None:
            counts.hits += 1
            return Completion(
                # A row kept before replies were made valid Unicode may hold a lone surrogate: recovered here,
                # never replayed into the store's serialiser (a crash on every resume).
                text=valid_text(hit["text"]),
                usage=_usage(hit.get("usage")),
                latency_s=0.0,
                structured=hit["structured"],
                finish_reason=hit.get("finish_reason"),
            )
        try:
            completion = await self.inner.complete(messages, **options.as_kwargs())
        finally:  # counted when it comes back (answered or failed), so progress never counts calls in flight
            counts.misses += 1
        completion.text = valid_text(completion.text)  # whatever the target: the cache keeps valid text only
        counts.usage = counts.usage + completion.usage
        self.store.cache_put(
            key,
            {
                "text": completion.text,
                "usage": completion.usage.model_dump(),
                "structured": completion.structured,
                "finish_reason": completion.finish_reason,
            },
        )
        return completion

    async def aclose(self) -> None:
        await self.inner.aclose()
