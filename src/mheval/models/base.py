"""What every chat endpoint looks like to the rest of mheval."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from mheval.records import Usage

Message = dict[str, str]  # {"role": ..., "content": ...}


class ModelError(Exception):
    """A call that failed for good, after the retry policy gave up. `kind` is a short machine tag
    (http_429, http_500, http_400, timeout, connection, bad_response) and the message never holds a key."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(f"{kind}: {message}")


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
