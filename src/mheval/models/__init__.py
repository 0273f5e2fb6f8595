"""Chat models: spec strings, the OpenAI-compatible client, the embedded local target, and application
targets (`python:MODULE:FUNCTION`, `http:app.yaml`; models/targets.py).

async with open_models(["openai/gpt-4o-mini", "local/smollm2", "python:mybot:reply"]) as models:
    completion = await models[0].complete([{"role": "user", "content": "hello"}])
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence

from mheval.models.base import CallOptions, ChatModel, Completion, Message, ModelError, SessionTarget, session_of
from mheval.models.context import RunContext
from mheval.models.limits import RetryPolicy
from mheval.models.local import DEFAULT_SLOTS, LocalServer
from mheval.models.openai_compat import OpenAICompatModel
from mheval.models.spec import PROVIDERS, ModelSpec, parse_model_spec
from mheval.models.targets import check_app_spec, is_app_spec, open_app_target

__all__ = [
    "PROVIDERS",
    "ChatModel",
    "Completion",
    "EmbeddedModel",
    "LocalServer",
    "Message",
    "ModelError",
    "ModelSpec",
    "OpenAICompatModel",
    "RunContext",
    "SessionTarget",
    "check_app_spec",
    "is_app_spec",
    "make_model",
    "open_app_target",
    "open_models",
    "parse_model_spec",
    "session_of",
]

# A llama.cpp server works on as many requests at once as it has slots; more in flight only queue up
# inside it (and count against their timeout there). For a `local/NAME@URL` server of unknown size,
# llama-server's default number of slots.
LOCAL_CONCURRENCY = DEFAULT_SLOTS


def _as_spec(spec: str | ModelSpec) -> ModelSpec:
    return parse_model_spec(spec) if isinstance(spec, str) else spec


def make_model(
    spec: str | ModelSpec,
    *,
    concurrency: int = 16,
    timeout_s: float = 120.0,
    retry: RetryPolicy | None = None,
    context: RunContext | None = None,
) -> ChatModel:
    """A model for a remote (or already running) endpoint. `local/...` specs need `open_models`,
    which starts the embedded server, unless the spec already carries a base URL."""
    spec = _as_spec(spec)
    if spec.base_url is None:
        raise ValueError(f"{spec.name} runs embedded: use `async with open_models([...])` to start it")
    if spec.is_local:
        concurrency = min(concurrency, LOCAL_CONCURRENCY)
    return OpenAICompatModel(spec, concurrency=concurrency, timeout_s=timeout_s, retry=retry, context=context)


class EmbeddedModel(OpenAICompatModel):
    """A model served by an embedded LocalServer: as many requests in flight as the server has slots
    (a fixed capacity, so no adaptive back-off), and every call counted for the end-of-run figures."""

    def __init__(
        self,
        spec: ModelSpec,
        server: LocalServer,
        *,
        concurrency: int | None = None,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        context: RunContext | None = None,
    ) -> None:
        super().__init__(
            spec.with_base_url(server.base_url),
            concurrency=min(concurrency or server.slots, server.slots),
            timeout_s=timeout_s,
            retry=retry,
            adaptive=False,
            context=context,
        )
        self.server = server

    async def _complete(self, messages: list[Message], options: CallOptions) -> Completion:
        # `complete` (ChatModelBase: the protocol's signature, for help() and type checkers) calls this; the
        # server is counted busy from the request to its answer, tokens or not.
        self.server.meter.begin()
        tokens = 0
        try:
            completion = await super()._complete(messages, options)
            tokens = completion.usage.completion_tokens
            return completion
        finally:
            self.server.meter.end(tokens)


@contextlib.asynccontextmanager
async def open_models(
    specs: Sequence[str | ModelSpec],
    *,
    concurrency: int = 16,
    timeout_s: float = 120.0,
    retry: RetryPolicy | None = None,
    context: RunContext | None = None,
) -> AsyncIterator[list[ChatModel]]:
    """Models for `specs`, in the same order, sharing the run's `context` (budgets, prices). Starts one
    embedded server per local model without a URL, and on exit closes every session and stops those
    servers (also on error or cancellation). An application spec (`python:...`, `http:...`) opens its
    target (models/targets.py), under the same concurrency, timeout and retry policy."""
    parsed = [s if is_app_spec(s) else _as_spec(s) for s in specs]
    models: list[ChatModel] = []
    servers: dict[str, LocalServer] = {}
    async with contextlib.AsyncExitStack() as stack:
        for spec in parsed:
            model: ChatModel
            if isinstance(spec, str):
                model = open_app_target(spec, concurrency=concurrency, timeout_s=timeout_s, retry=retry)
            elif spec.is_embedded:
                if spec.model not in servers:
                    server = LocalServer(spec.model)
                    await stack.enter_async_context(server)
                    servers[spec.model] = server
                model = EmbeddedModel(
                    spec, servers[spec.model], concurrency=concurrency, timeout_s=timeout_s, retry=retry,
                    context=context,
                )  # fmt: skip
            else:
                model = make_model(spec, concurrency=concurrency, timeout_s=timeout_s, retry=retry, context=context)
            stack.push_async_callback(model.aclose)
            models.append(model)
        yield models
