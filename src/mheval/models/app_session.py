"""One conversation with an application target (a `python:` callable or class, an `http:` app).

Both kinds answer a turn the same way from the engine's side: one call of the app, retried under the
target's retry policy, with the sampling settings handed over as the call's context (an app may ignore
them). A session class gives only how one call is made (`_answer`)."""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

from mheval.models.base import CallOptions, ChatModelBase, Completion, Message
from mheval.models.limits import RetryPolicy, run_with_retry


class _Retried(Protocol):
    retry: RetryPolicy


T = TypeVar("T", bound=_Retried)


class AppSession(ChatModelBase, Generic[T]):
    """The ChatModel of one conversation with an app (models/base.py, SessionTarget): `key` names the
    conversation; `target` is the app, whose retry policy is read at each call."""

    key: str
    target: T

    async def _complete(self, messages: list[Message], options: CallOptions) -> Completion:
        context = {
            "session_id": self.key,
            "temperature": options.temperature,
            "max_tokens": options.max_tokens,
            "seed": options.seed,
        }
        return await run_with_retry(lambda: self._answer(messages, context), self.target.retry)

    async def _answer(self, messages: list[Message], context: dict[str, Any]) -> Completion:
        """One call of the app for this turn (no retry here)."""
        raise NotImplementedError
