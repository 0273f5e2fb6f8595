"""The one HTTP client path of mheval: OpenAI chat-completions over aiohttp.

OpenAI, vLLM, SGLang, Ollama, llama.cpp, LM Studio, OpenRouter and Together all serve this protocol.
The hot path is plain dicts and json (no SDK, no pydantic validation): on loopback it runs thousands
of calls per second, so the model server, not this client, is the bottleneck.

Structured output (when `json_schema` is given) tries three request shapes, best first:

1. `response_format={"type": "json_schema", ...}`  (OpenAI, vLLM, SGLang, Ollama, LM Studio)
2. `response_format={"type": "json_object", "schema": ...}`  (llama.cpp's server; it answers 500 to 1.)
3. no response_format: free text, parsed tolerantly downstream.

The rule for "this server refuses that shape": on a structured attempt, HTTP 400, 415, 422 or 501
is a refusal (a client error that only the request shape we vary can explain); HTTP 500 is a
refusal when its body names the feature (response_format, json_schema, json_object, schema,
grammar) or when that shape has never worked on this model object yet (llama.cpp's plain 500).
Once a shape has worked, a 500 is an ordinary server error and is retried. A refusal moves on to
the next shape at once (it is not a retry attempt). The model object remembers the best shape
that worked and starts there next time; a shape is only given up after a lower one succeeded,
so a request that fails in every shape (say, a prompt too long: 400) changes nothing.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import aiohttp

from mheval.engine.limits import (
    EndpointLimiter,
    RetryPolicy,
    TransientError,
    endpoint_limiter,
    is_retryable_status,
    parse_retry_after,
    run_with_retry,
)
from mheval.models.base import Completion, Message, ModelError
from mheval.models.spec import ModelSpec
from mheval.records import Usage

STRUCTURED_MODES: tuple[str, ...] = ("json_schema", "json_object", "none")
_REFUSAL_STATUSES = frozenset({400, 415, 422, 501})
_FEATURE_WORDS = ("response_format", "json_schema", "json_object", "schema", "grammar")
_MAX_MESSAGE = 300


class _Refused(Exception):
    """The server refused this structured-output shape; try the next one."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message


def _schema_name(schema: dict[str, Any]) -> str:
    # OpenAI wants ^[a-zA-Z0-9_-]{1,64}$ here.
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", str(schema.get("title") or "response")).strip("_")
    return (name or "response")[:64]


def _response_format(mode: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": _schema_name(schema), "schema": schema, "strict": False}}
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


class OpenAICompatModel:
    """A ChatModel for any server that speaks OpenAI chat completions.

    One aiohttp session per object, opened lazily in the running loop; call `aclose()` when done
    (`open_models` does it for you). Concurrency is limited per endpoint, shared with every other
    model object on the same base URL in the same loop.
    """

    def __init__(
        self,
        spec: ModelSpec,
        *,
        concurrency: int = 16,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        if spec.base_url is None:
            raise ValueError(f"{spec.name} has no base URL yet (local models are started by open_models)")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.spec = spec
        self.name = spec.name
        self.endpoint = spec.base_url
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self._url = spec.base_url + "/chat/completions"
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._limiter: EndpointLimiter | None = None
        self._mode = 0  # index into STRUCTURED_MODES of the best shape not known to be refused
        self._worked: set[str] = set()

    def __repr__(self) -> str:
        return f"OpenAICompatModel({self.name!r}, endpoint={self.endpoint!r}, concurrency={self.concurrency})"

    @property
    def structured_mode(self) -> str:
        """The structured-output shape the next call will try first."""
        return STRUCTURED_MODES[self._mode]

    def _open(self) -> tuple[aiohttp.ClientSession, EndpointLimiter]:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            # A new loop (say, a second asyncio.run) cannot use the old loop's session: start afresh.
            self._loop = loop
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.concurrency),
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
            )
            self._limiter = endpoint_limiter(self.endpoint, self.concurrency)
        assert self._limiter is not None
        return self._session, self._limiter

    async def aclose(self) -> None:
        if self._session is not None and self._loop is asyncio.get_running_loop():
            await self._session.close()
        self._session = None
        self._limiter = None

    async def complete(
        self,
        messages: list[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: int | None = None,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        body: dict[str, Any] = {
            "model": self.spec.model,
            "messages": messages,
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
        if seed is not None:
            body["seed"] = seed
        if json_schema is None:
            return await self._retrying(json.dumps(body).encode(), "none")

        start = self._mode
        for index in range(start, len(STRUCTURED_MODES)):
            mode = STRUCTURED_MODES[index]
            fmt = _response_format(mode, json_schema)
            payload = {**body, "response_format": fmt} if fmt is not None else body
            try:
                completion = await self._retrying(json.dumps(payload).encode(), mode)
            except _Refused:
                continue
            self._worked.add(mode)
            if index > self._mode:
                self._mode = index
            return completion
        raise AssertionError("unreachable: the last mode never counts as refused")

    async def _retrying(self, payload: bytes, mode: str) -> Completion:
        return await run_with_retry(lambda: self._post(payload, mode), self.retry)

    async def _post(self, payload: bytes, mode: str) -> Completion:
        session, limiter = self._open()
        key = self.spec.api_key()
        if key is None and self.spec.key_required:
            raise ModelError("no_api_key", f"set the environment variable {self.spec.api_key_env}")
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = "Bearer " + key
        async with limiter:
            started = time.perf_counter()
            try:
                async with session.post(self._url, data=payload, headers=headers) as resp:
                    status = resp.status
                    raw = await resp.read()
                    retry_after = resp.headers.get("Retry-After") if status != 200 else None
            except TimeoutError:
                raise TransientError("timeout", f"no answer within {self.timeout_s:g} s") from None
            except aiohttp.ClientConnectionError as exc:
                detail = _scrub(f"{type(exc).__name__}: {exc}", key)
                raise TransientError("connection", detail) from None
            except aiohttp.ClientPayloadError as exc:
                raise TransientError("connection", _scrub(f"incomplete body: {exc}", key)) from None
            latency = time.perf_counter() - started
        if status != 200:
            self._fail(status, raw, retry_after, mode, key)
        return self._parse(raw, latency, mode, key)

    def _fail(self, status: int, raw: bytes, retry_after: str | None, mode: str, key: str | None) -> None:
        message = _server_message(raw, key)
        if mode != "none" and self._refuses(status, message, mode):
            raise _Refused(status, message)
        if is_retryable_status(status):
            raise TransientError(f"http_{status}", message, parse_retry_after(retry_after))
        raise ModelError(f"http_{status}", message)

    def _refuses(self, status: int, message: str, mode: str) -> bool:
        if status in _REFUSAL_STATUSES:
            return True
        if status == 500:
            lowered = message.lower()
            return mode not in self._worked or any(w in lowered for w in _FEATURE_WORDS)
        return False

    def _parse(self, raw: bytes, latency: float, mode: str, key: str | None) -> Completion:
        try:
            data = json.loads(raw)
            choice = data["choices"][0]
            message = choice["message"]
            text = message.get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            snippet = _scrub(raw.decode("utf-8", "replace"), key)[:120]
            raise TransientError("bad_response", f"unusable 200 body: {snippet!r}") from None
        if text is None:
            text = message.get("refusal") or ""
        usage = data.get("usage")
        if not isinstance(usage, dict):
            usage = {}
        # model_construct skips validation in the hot path; _count makes the numbers sound anyway.
        return Completion(
            text=text if isinstance(text, str) else json.dumps(text),
            usage=Usage.model_construct(
                prompt_tokens=_count(usage.get("prompt_tokens")),
                completion_tokens=_count(usage.get("completion_tokens")),
                cost_usd=0.0,
            ),
            latency_s=latency,
            structured=mode,
            finish_reason=choice.get("finish_reason"),
            raw=data,
        )


def _server_message(raw: bytes, key: str | None) -> str:
    """A short human message from an error body (error.message when JSON, else the text's start),
    with the key scrubbed before anything is cut."""
    text = _scrub(raw.decode("utf-8", "replace"), key)
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            text = str(err.get("message") or err.get("detail") or err)
        elif err:
            text = str(err)
        elif data.get("detail"):
            text = str(data["detail"])
    text = " ".join(text.split())
    return text[:_MAX_MESSAGE] + ("..." if len(text) > _MAX_MESSAGE else "") if text else "(empty body)"


def _count(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def _scrub(text: str, key: str | None) -> str:
    """Remove the API key from anything that may reach an error message or a log."""
    if key:
        text = text.replace(key, "***")
        if len(key) > 12:  # a truncated echo can still leak most of a key
            text = text.replace(key[: len(key) // 2], "***")
    return text
