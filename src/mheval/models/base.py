"""What every chat endpoint looks like to the rest of mheval."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from mheval.records import Usage

Message = dict[str, str]  # {"role": ..., "content": ...}


class ModelError(Exception):
    """A call that failed for good, after the retry policy gave up. `kind` is a short machine tag
    (http_429, http_500, http_400, timeout, connection, bad_response) and the message never holds a key."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(f"{kind}: {message}")


def valid_text(text: str) -> str:
    """`text` as valid Unicode: a lone surrogate (which a Python target can return, and JSON's \\ud800 escape
    decodes to) becomes U+FFFD; a surrogate pair becomes the character it encodes. Without this, the first
    store that serialises the reply (UTF-8) crashes, after the call cache has already kept it."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def valid_count(value: object) -> int | None:
    """A token count as a target reported it, if it is one: a finite, non-negative integer (an integral float or
    numeric text is taken), else None (the caller drops the usage and says so)."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        value = value.strip()
        if not value.isdigit():
            return None
        return int(value)
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value >= 0 and value.is_integer():
        return int(value)
    return None


# finish_reason of a reply cut because its HTTP answer was too long to read whole (openai_compat.py).
BODY_CAP = "body_cap"


@dataclass
class Completion:
    text: str
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    # How structured output was obtained: "json_schema", "json_object" or "none" (free text).
    structured: str = "none"
    finish_reason: str | None = None
    raw: dict[str, Any] | None = None


class ChatModel(Protocol):
    """An async chat endpoint. `name` is the canonical spec string used in the store and the cache key."""

    name: str
    endpoint: str

    async def complete(
        self,
        messages: list[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: int | None = None,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class CallOptions:
    """The settings of one `complete` call besides its messages, as one value: a wrapper hands them on and the
    call cache keys them (engine/cache.py, `call_key`) without naming the four again. The defaults are
    `ChatModel.complete`'s."""

    temperature: float = 0.0
    max_tokens: int = 512
    seed: int | None = None
    json_schema: dict[str, Any] | None = None

    def as_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of `ChatModel.complete` that give these options: each field is named as its
        keyword. Shallow (unlike `dataclasses.asdict`): the schema is handed on, not copied."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


class ChatModelBase(ABC):
    """A ChatModel of mheval's own: `complete` with the protocol's signature is declared here once, packs its
    options and calls `_complete`, which a subclass implements. Other targets need not inherit this: anything
    with `name`, `endpoint`, `complete` and `aclose` is a ChatModel."""

    name: str
    endpoint: str

    async def complete(
        self,
        messages: list[Message],
        *,
        temperature: float = CallOptions.temperature,
        max_tokens: int = CallOptions.max_tokens,
        seed: int | None = CallOptions.seed,
        json_schema: dict[str, Any] | None = CallOptions.json_schema,
    ) -> Completion:
        """The reply to `messages`, from `_complete` with the settings as one CallOptions (whose defaults these
        are, read from the class so the two cannot drift apart)."""
        return await self._complete(messages, CallOptions(temperature, max_tokens, seed, json_schema))

    @abstractmethod
    async def _complete(self, messages: list[Message], options: CallOptions) -> Completion:
        """Answer `messages` under `options`."""

    @abstractmethod
    async def aclose(self) -> None: ...


class SessionTarget(Protocol):
    """A target that keeps state per conversation (an application: models/python_target.py,
    models/http_target.py). `session(key)` gives the ChatModel of one conversation (`key` names it: a case
    and sample, or a scenario and sample); its `aclose()` ends that conversation (a class target's `close()`),
    not the target. A session of a stateful target has its own `endpoint`, so the call cache keeps its answers
    apart from other conversations' (an app whose state a cached answer skipped would drift from the transcript)."""

    name: str
    endpoint: str

    def session(self, key: str) -> ChatModel | None: ...


class OneCallSession:
    """For a SessionTarget: a call made outside any conversation (a simulated user, a judge) runs in a
    session of its own, opened and closed around it."""

    def session(self, key: str) -> Any:
        raise NotImplementedError

    async def complete(self, messages: list[Message], **params: Any) -> Completion:
        session = self.session("")
        try:
            return await session.complete(messages, **params)
        finally:
            await session.aclose()


def session_of(model: object, key: str) -> ChatModel | None:
    """The per-conversation ChatModel of `model` when it is a SessionTarget, else None (call `model` itself).
    This is how the engine calls a target: one session per conversation (a single-turn case is a
    conversation of one turn), `complete` for each turn, `aclose` at its end."""
    opener = getattr(model, "session", None)
    return opener(key) if callable(opener) else None
