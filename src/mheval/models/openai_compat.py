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

Limits (models/limits.py), all on the one path every attempt takes (`_post`): a tokens-per-minute
budget, when the model has one (`tpm=` or its run's RunContext), is charged the prompt's estimated tokens
plus `max_tokens` before the request and settled with the real usage after it (a refused or failed
request gives its tokens back); the endpoint's adaptive limiter hears of every success (with its
latency) and every overload (429, 503, 529, a timeout) and moves the in-flight limit accordingly.

Cost: each completion's `usage.cost_usd` comes from models/pricing.py (0 for self-hosted and unknown
prices); this is the one place where cost is computed, so Responses and Judgments carry it.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import aiohttp

from mheval.models.base import BODY_CAP, CallOptions, ChatModelBase, Completion, Message, ModelError
from mheval.models.context import RunContext
from mheval.models.limits import (
    OVERLOAD_STATUSES,
    EndpointLimiter,
    RetryPolicy,
    TokenBucket,
    TransientError,
    endpoint_limiter,
    estimate_tokens,
    is_retryable_status,
    json_of,
    parse_retry_after,
    run_with_retry,
)
from mheval.models.loop_client import LoopClient
from mheval.models.spec import ModelSpec
from mheval.records import Usage

STRUCTURED_MODES: tuple[str, ...] = ("json_schema", "json_object", "none")
_REFUSAL_STATUSES = frozenset({400, 415, 422, 501})
_FEATURE_WORDS = ("response_format", "json_schema", "json_object", "schema", "grammar")
_MAX_MESSAGE = 300
HANDOFF_PASSES = 3


# The most of one chat answer that is read into memory. A server that ignores max_tokens may send far
# more; past this the rest is not read and the reply's beginning is kept, marked cut (`BODY_CAP`).
MAX_BODY_BYTES = 8 << 20


async def _read_capped(resp: aiohttp.ClientResponse, cap: int) -> tuple[bytes, bool]:
    """The body, or its first `cap` bytes and True when it is longer (the connection is then closed)."""
    if resp.content_length is not None and resp.content_length <= cap:
        return await resp.read(), False
    chunks, size = [], 0
    async for chunk in resp.content.iter_chunked(1 << 16):
        chunks.append(chunk)
        size += len(chunk)
        if size > cap:
            resp.close()  # do not read (or keep the connection for) the rest
            return b"".join(chunks)[:cap], True
    return b"".join(chunks), False


_STRING = json.JSONDecoder()


def _salvage(prefix: bytes, latency: float) -> Completion:
    """The reply's text from the beginning of an over-long chat answer (the JSON is cut, so it cannot be
    parsed whole): the start of the first message's content string."""
    found = re.search(rb'"content"\s*:\s*"', prefix)
    if found is not None:
        body = prefix[found.end() :].decode("utf-8", "ignore")
        for trim in range(8):  # a cut escape sequence (\, \u12) at the end: drop it and try again
            try:
                text, _ = _STRING.raw_decode('"' + body[: len(body) - trim] + '"')
            except ValueError:
                continue
            text = text.encode("utf-8", "replace").decode("utf-8")  # a cut surrogate pair
            return Completion(text=text, latency_s=latency, finish_reason=BODY_CAP)
    raise ModelError("oversized_body", f"the answer is longer than {MAX_BODY_BYTES >> 20} MiB and holds no message")


class _Refused(Exception):
    """The server refused this structured-output shape; try the next one."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message


def _schema_name(schema: dict[str, Any]) -> str:
    # OpenAI wants ^[a-zA-Z0-9_-]{1,64}$ here.
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", str(schema.get("title") or "response")).strip("_")
    return (name or "response")[:64]


def _response_format(mode: str, schema: dict[str, Any], placeholder: Any = None) -> dict[str, Any] | None:
    value = schema if placeholder is None else placeholder
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": _schema_name(schema), "schema": value, "strict": False}}
    if mode == "json_object":
        return {"type": "json_object", "schema": value}
    return None


class OpenAICompatModel(ChatModelBase):
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
        tpm: float | TokenBucket | None = None,
        adaptive: bool = True,
        context: RunContext | None = None,
    ) -> None:
        """`tpm`: this model's tokens-per-minute budget, or a TokenBucket to share (None: whatever
        the run's `context` gives this model's name, else no budget). `context`: the run's budgets and prices
        (models/context.py); None for the default prices and no budget.
        `adaptive`: let the endpoint's in-flight limit back off on overload (AIMD) below `concurrency`."""
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
        self.tpm = tpm
        self.adaptive = adaptive
        self.context = context or RunContext()
        self._own_bucket = tpm if isinstance(tpm, TokenBucket) else TokenBucket(tpm) if tpm else None
        self._url = spec.base_url + "/chat/completions"
        self._client = LoopClient()
        self._mode = 0  # index into STRUCTURED_MODES of the best shape not known to be refused
        self._worked: set[str] = set()

    def __repr__(self) -> str:
        return f"OpenAICompatModel({self.name!r}, endpoint={self.endpoint!r}, concurrency={self.concurrency})"

    @property
    def structured_mode(self) -> str:
        """The structured-output shape the next call will try first."""
        return STRUCTURED_MODES[self._mode]

    def _open(self) -> tuple[aiohttp.ClientSession, EndpointLimiter]:
        return self._client.open(
            self.concurrency,
            self.timeout_s,
            lambda: endpoint_limiter(self.endpoint, self.concurrency, adaptive=self.adaptive),
        )

    @property
    def limiter(self) -> EndpointLimiter | None:
        """The endpoint's limiter in the current loop (None before the first call)."""
        return self._client.limiter

    @property
    def token_bucket(self) -> TokenBucket | None:
        """This model's tokens-per-minute bucket, or None when it has no budget."""
        return self._own_bucket or self.context.bucket(self.name)

    async def aclose(self) -> None:
        await self._client.close()

    def chat_body(self, messages: list[Message], options: CallOptions) -> dict[str, Any]:
        """The chat-completions request body, without response_format (see `structured_body`)."""
        body: dict[str, Any] = {
            "model": self.spec.model,
            "messages": messages,
            "temperature": options.temperature,
            "max_tokens": options.max_tokens,
        }
        if options.seed is not None:
            body["seed"] = options.seed
        return body

    def structured_body(self, body: dict[str, Any], json_schema: dict[str, Any] | None) -> tuple[dict[str, Any], str]:
        """`body` with the response_format of the best structured-output shape not known to be refused,
        and that shape's name ("none" when there is no schema)."""
        if json_schema is None:
            return body, "none"
        mode = self.structured_mode
        fmt = _response_format(mode, json_schema)
        return ({**body, "response_format": fmt} if fmt else body), mode

    async def api(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        upload: tuple[str, bytes, str] | None = None,
        retry: bool = True,
    ) -> bytes:
        """Another endpoint of the same server (files, batches), under the same retry policy (unless
        `retry` is False: a request that must not happen twice) and the same handling of keys in errors;
        returns the 200 body. `upload` is (purpose, file bytes, file name), sent as a multipart form.
        Not counted against the chat limiter."""

        async def once() -> bytes:
            session, _ = self._open()
            key = self._key()
            headers = {"Authorization": "Bearer " + key} if key else {}
            form = None
            if upload is not None:  # a form is spent once sent: each attempt builds its own
                form = aiohttp.FormData()
                form.add_field("purpose", upload[0])
                form.add_field("file", upload[1], filename=upload[2], content_type="application/jsonl")
            url = self.endpoint + path
            try:
                async with session.request(method, url, json=json_body, data=form, headers=headers) as resp:
                    status, raw = resp.status, await resp.read()
                    retry_after = resp.headers.get("Retry-After")
            except (TimeoutError, aiohttp.ClientError) as exc:
                raise self._transport_error(exc, key) from None
            if status != 200:
                self._fail(status, raw, retry_after, "none", key)
            return raw

        if not retry:
            try:
                return await once()
            except TransientError as exc:
                raise ModelError(exc.kind, str(exc)) from None
        return await run_with_retry(once, self.retry)

    def _key(self) -> str | None:
        key = self.spec.api_key()
        if key is None and self.spec.key_required:
            raise ModelError("no_api_key", f"set the environment variable {self.spec.api_key_env}")
        return key

    async def _complete(self, messages: list[Message], options: CallOptions) -> Completion:
        body = self.chat_body(messages, options)
        bucket = self.token_bucket
        charge = estimate_tokens(messages) + options.max_tokens if bucket is not None else 0
        json_schema = options.json_schema
        if json_schema is None:
            return await self._retrying(json.dumps(body).encode(), "none", charge)

        start = self._mode
        for index in range(start, len(STRUCTURED_MODES)):
            mode = STRUCTURED_MODES[index]
            try:
                completion = await self._retrying(_payload(body, mode, json_schema), mode, charge)
            except _Refused:
                continue
            self._worked.add(mode)
            if index > self._mode:
                self._mode = index
            return completion
        raise AssertionError("unreachable: the last mode never counts as refused")

    async def _retrying(self, payload: bytes, mode: str, charge: int = 0) -> Completion:
        return await run_with_retry(lambda: self._post(payload, mode, charge), self.retry)

    async def _post(self, payload: bytes, mode: str, charge: int = 0) -> Completion:
        session, limiter = self._open()
        key = self._key()
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = "Bearer " + key
        bucket = self.token_bucket if charge else None
        taken = 0.0
        if bucket is not None:
            taken = min(float(charge), bucket.capacity)
            await bucket.take(taken)
        settled = False
        try:
            async with limiter:
                slot = limiter.now()
                started = time.perf_counter()
                try:
                    async with session.post(self._url, data=payload, headers=headers) as resp:
                        status = resp.status
                        raw, cut = await _read_capped(resp, MAX_BODY_BYTES)
                        retry_after = resp.headers.get("Retry-After") if status != 200 else None
                except TimeoutError as exc:
                    limiter.on_overload(slot)
                    settled = True  # the server may have spent the tokens: keep them charged
                    raise self._transport_error(exc, key) from None
                except aiohttp.ClientError as exc:
                    raise self._transport_error(exc, key) from None
                latency = time.perf_counter() - started
            # Let the callers we just handed slots to send their requests before we parse, judge and
            # store this answer: a wave of answers then costs the server no idle time. One pass of the
            # event loop's queue lets a waiter start its request; aiohttp writes the body in a task of
            # its own, queued behind this wave's other answers, hence a few passes (at 1 s latency and
            # concurrency 256 one pass gave 0.74 of the ideal rate, three 0.87).
            for _ in range(HANDOFF_PASSES):
                await asyncio.sleep(0)
            if status != 200:
                if status in OVERLOAD_STATUSES:
                    limiter.on_overload(slot)
                self._fail(status, raw, retry_after, mode, key)
            completion = _salvage(raw, latency) if cut else self._parse(raw, latency, mode, key)
            limiter.on_success(latency, slot)
            if bucket is not None:
                used = completion.usage.prompt_tokens + completion.usage.completion_tokens
                if used > 0:
                    bucket.adjust(taken - used)
                settled = True
            return completion
        finally:
            if bucket is not None and not settled:
                bucket.adjust(taken)  # refused, failed or cancelled: no tokens were spent

    def _transport_error(self, exc: BaseException, key: str | None) -> TransientError:
        """A request that got no usable HTTP answer (timeout, dropped or refused connection, cut or invalid
        answer): worth another try, described without the key."""
        if isinstance(exc, TimeoutError):
            return TransientError("timeout", f"no answer within {self.timeout_s:g} s")
        if isinstance(exc, aiohttp.ClientPayloadError):
            return TransientError("connection", _scrub(f"incomplete body: {exc}", key))
        return TransientError("connection", _scrub(f"{type(exc).__name__}: {exc}", key))

    def _fail(self, status: int, raw: bytes, retry_after: str | None, mode: str, key: str | None) -> None:
        message = _server_message(raw, key)
        if mode != "none" and self._refuses(status, message, mode):
            raise _Refused(status, message)
        if is_retryable_status(status):
            raise TransientError(f"http_{status}", message, parse_retry_after(retry_after))
        raise ModelError(f"http_{status}", message)

    def note_refusal(self, status: int, message: str, mode: str) -> bool:
        """For answers that came back another way (a batch job's line): when `status` refuses `mode`
        and `message` names the feature, the next requests use the next shape. True if so. (Stricter
        than a live call, which can try the next shape at once and keep it only if that one works.)"""
        named = any(word in message.lower() for word in _FEATURE_WORDS)
        if mode == "none" or not named or not self._refuses(status, message, mode):
            return False
        self.start_at(STRUCTURED_MODES[STRUCTURED_MODES.index(mode) + 1])
        return True

    def start_at(self, mode: str) -> None:
        """Begin with this structured-output shape (or a lower one already chosen), e.g. as remembered
        from an earlier run whose server refused the better shapes."""
        if mode in STRUCTURED_MODES:
            self._mode = max(self._mode, STRUCTURED_MODES.index(mode))

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
        except ValueError:
            data = None
        completion = self.completion_from(data, latency, mode)
        if completion is None:
            snippet = _scrub(raw.decode("utf-8", "replace"), key)[:120]
            raise TransientError("bad_response", f"unusable 200 body: {snippet!r}")
        return completion

    def completion_from(self, data: Any, latency: float, mode: str, price_factor: float = 1.0) -> Completion | None:
        """The Completion in a decoded chat-completions body, or None when it holds none. `price_factor`
        scales the cost (the Batch API bills half)."""
        try:
            choice = data["choices"][0]
            message = choice["message"]
            text = message.get("content")
        except (KeyError, IndexError, TypeError, AttributeError):
            return None
        if text is None:
            text = message.get("refusal") or ""
        usage = data.get("usage")
        if not isinstance(usage, dict):
            usage = {}
        prompt_tokens = _count(usage.get("prompt_tokens"))
        completion_tokens = _count(usage.get("completion_tokens"))
        # model_construct skips validation in the hot path; _count makes the numbers sound anyway.
        return Completion(
            text=text if isinstance(text, str) else json.dumps(text),
            usage=Usage.model_construct(
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cost_usd=price_factor
                * self.context.prices.cost(self.name, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
            ),
            latency_s=latency,
            structured=mode,
            finish_reason=choice.get("finish_reason"),
            raw=data,
        )


_MARK = "\x00mheval-schema\x00"
_MARK_JSON = json.dumps(_MARK)


def _payload(body: dict[str, Any], mode: str, schema: dict[str, Any]) -> bytes:
    """The request body for `mode`: exactly json.dumps of it, with the schema's JSON memoised (the same
    schema object goes out on every call of a judge, and it is most of the bytes)."""
    fmt = _response_format(mode, schema, placeholder=_MARK)
    if fmt is None:
        return json.dumps(body).encode()
    text = json.dumps({**body, "response_format": fmt})
    # response_format comes after the messages, so the last mark is the schema's.
    before, _, after = text.rpartition(_MARK_JSON)
    return (before + json_of(schema) + after).encode()


def _server_message(raw: bytes, key: str | None) -> str:
    """A short human message from an error body (error.message when JSON, else the text's start),
    with the key scrubbed before anything is cut."""
    text = _scrub(raw.decode("utf-8", "replace"), key)
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    return error_message(data if isinstance(data, dict) else text) or "(empty body)"


def error_message(body: dict[str, Any] | str | None) -> str:
    """A short human message from a decoded error body (its error.message, or detail), or from its
    text; "" when there is none."""
    text = body if isinstance(body, str) else ""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            text = str(err.get("message") or err.get("detail") or err)
        elif err:
            text = str(err)
        elif body.get("detail"):
            text = str(body["detail"])
    text = " ".join(text.split())
    return text[:_MAX_MESSAGE] + ("..." if len(text) > _MAX_MESSAGE else "")


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
