"""Chat models: spec strings, the OpenAI-compatible client, and the embedded local target.

async with open_models(["openai/gpt-4o-mini", "local/smollm2"]) as models:
    completion = await models[0].complete([{"role": "user", "content": "hello"}])
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence

from mheval.engine.limits import RetryPolicy
from mheval.models.base import ChatModel, Completion, Message, ModelError
from mheval.models.local import LocalServer
from mheval.models.openai_compat import OpenAICompatModel
from mheval.models.spec import PROVIDERS, ModelSpec, parse_model_spec

__all__ = [
    "PROVIDERS",
    "ChatModel",
    "Completion",
    "LocalServer",
    "Message",
    "ModelError",
    "ModelSpec",
    "OpenAICompatModel",
    "make_model",
    "open_models",
    "parse_model_spec",
]

# llama.cpp's server handles one request at a time; more in flight only queue up inside it.
LOCAL_CONCURRENCY = 1


def _as_spec(spec: str | ModelSpec) -> ModelSpec:
    return parse_model_spec(spec) if isinstance(spec, str) else spec


def make_model(
    spec: str | ModelSpec,
    *,
    concurrency: int = 16,
    timeout_s: float = 120.0,
    retry: RetryPolicy | None = None,
) -> ChatModel:
    """A model for a remote (or already running) endpoint. `local/...` specs need `open_models`,
    which starts the embedded server, unless the spec already carries a base URL."""
    spec = _as_spec(spec)
    if spec.base_url is None:
        raise ValueError(f"{spec.name} runs embedded: use `async with open_models([...])` to start it")
    if spec.is_local:
        concurrency = min(concurrency, LOCAL_CONCURRENCY)
    return OpenAICompatModel(spec, concurrency=concurrency, timeout_s=timeout_s, retry=retry)


@contextlib.asynccontextmanager
async def open_models(
    specs: Sequence[str | ModelSpec],
    *,
    concurrency: int = 16,
    timeout_s: float = 120.0,
    retry: RetryPolicy | None = None,
) -> AsyncIterator[list[ChatModel]]:
    """Models for `specs`, in the same order. Starts one embedded server if any spec is local,
    and on exit closes every session and stops that server (also on error or cancellation)."""
    parsed = [_as_spec(s) for s in specs]
    models: list[ChatModel] = []
    async with contextlib.AsyncExitStack() as stack:
        local_url: str | None = None
        if any(s.is_local and s.base_url is None for s in parsed):
            local_url = await stack.enter_async_context(LocalServer())
        for spec in parsed:
            if spec.is_local and spec.base_url is None:
                assert local_url is not None
                spec = spec.with_base_url(local_url)
            model = make_model(spec, concurrency=concurrency, timeout_s=timeout_s, retry=retry)
            stack.push_async_callback(model.aclose)
            models.append(model)
        yield models
