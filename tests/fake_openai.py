"""A scriptable OpenAI-compatible chat server on 127.0.0.1, for tests that need a real HTTP endpoint.

It is a real aiohttp.web server running in its own thread and event loop, so it works the same
from sync tests and from tests that run their own `asyncio.run(...)`.

Use the `fake_openai` pytest fixture (tests/conftest.py): one server per test session, reset
before each test. Or start one yourself::

    with FakeOpenAI() as server:
        spec = parse_model_spec(f"test/any@{server.base_url}")

Scripting what the next calls get (a queue, one behaviour per POST /v1/chat/completions)::

    server.script(
        rate_limited(retry_after="1"),        # 429 with a Retry-After header
        status(500),                          # a server error
        drop(),                               # close the connection without answering
        malformed(),                          # 200 with a body that is not JSON
        no_choices(),                         # 200 with "choices": []
        reply("hello", delay=0.5),            # a normal answer, after half a second
        respond(lambda body: body["messages"][-1]["content"].upper()),  # computed from the request
    )
    server.default = reply("ok")              # what calls get once the queue is empty (the default)
    server.refuse("json_schema")              # 500 to response_format json_schema, like llama.cpp

A responder (`respond(fn)`) gets the request's JSON body and returns the reply text or another
behaviour. `status(code, message)` may put "{authorization}" in the message to echo the request's
Authorization header back (for testing that clients keep keys out of their errors).

What you can assert on afterwards:
- `server.requests`: every chat request, in arrival order, as `Recorded(path, json, headers)`
  (headers with lower-case names); refused and dropped calls are recorded too.
- `server.calls`: how many chat requests arrived; `server.max_in_flight`: the most handled at once.
- Every 200 answer carries `usage`: prompt_tokens = words in the messages, completion_tokens = words
  in the reply (or the numbers given to `reply(..., usage=(p, c))`).

`GET /v1/models` answers a one-model list. `reset()` empties the queue, the records, the counters
and the refusals, and restores the default reply.

The Batch API (`POST /v1/files`, `POST /v1/batches`, `GET /v1/batches/{id}`, `GET /v1/files/{id}/content`):
each line of a batch is answered by the next scripted behaviour, as a chat call would be (delays and
dropped connections do not apply), when the batch is first polled after `server.batch_hold` is False.
`server.batch_outcome` ("completed", "failed", "expired") says how the job ends; `batch_create_drops = n`
makes the next n creations drop the connection after making the job; `server.batches` lists
every created batch as a dict (id, status, requests, polls); chat calls made inside a batch do not count
in `server.calls`. 200 answers go to the output file, the others to the error file.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Behaviour:
    """One scripted answer. Build them with the helpers below rather than by hand."""

    kind: str  # reply | status | malformed | no_choices | drop | respond
    text: str = ""
    status: int = 200
    message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    usage: tuple[int, int] | None = None
    finish_reason: str = "stop"
    fn: Callable[[dict[str, Any]], str | Behaviour] | None = None


def reply(
    text: str, *, delay: float = 0.0, usage: tuple[int, int] | None = None, finish_reason: str = "stop"
) -> Behaviour:
    return Behaviour("reply", text=text, delay=delay, usage=usage, finish_reason=finish_reason)


def respond(fn: Callable[[dict[str, Any]], str | Behaviour], *, delay: float = 0.0) -> Behaviour:
    return Behaviour("respond", fn=fn, delay=delay)


def status(
    code: int, message: str = "scripted failure", *, headers: dict[str, str] | None = None, delay: float = 0.0
) -> Behaviour:
    return Behaviour("status", status=code, message=message, headers=dict(headers or {}), delay=delay)


def rate_limited(retry_after: str | None = None, *, delay: float = 0.0) -> Behaviour:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return status(429, "rate limit reached", headers=headers, delay=delay)


def malformed(*, delay: float = 0.0) -> Behaviour:
    return Behaviour("malformed", delay=delay)


def no_choices(*, delay: float = 0.0) -> Behaviour:
    return Behaviour("no_choices", delay=delay)


def drop(*, delay: float = 0.0) -> Behaviour:
    return Behaviour("drop", delay=delay)


@dataclass(frozen=True)
class Recorded:
    path: str
    json: Any
    headers: dict[str, str]


def _words(body: Any) -> int:
    try:
        return sum(len(str(m.get("content") or "").split()) for m in body["messages"])
    except (KeyError, TypeError, AttributeError):
        return 0


class FakeOpenAI:
    """The server. Thread-safe to script and inspect from the test's thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Behaviour] = deque()
        self.default: Behaviour = reply("ok")
        self.requests: list[Recorded] = []
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.refused: dict[str, int] = {}
        self.files: dict[str, bytes] = {}
        self.batches: list[dict[str, Any]] = []
        self.batch_hold = False
        self.batch_outcome = "completed"
        self.batch_create_drops = 0  # creations that make the job but drop the connection before answering
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- scripting -------------------------------------------------------------------------------
    def script(self, *behaviours: Behaviour | str) -> FakeOpenAI:
        """Queue behaviours for the next calls (a plain string means `reply(string)`)."""
        with self._lock:
            self._queue.extend(reply(b) if isinstance(b, str) else b for b in behaviours)
        return self

    def refuse(self, *format_types: str, code: int = 500) -> FakeOpenAI:
        """Answer `code` to any request whose response_format type is one of `format_types`.

        Checked before the script queue, so a refused call does not use up a scripted behaviour.
        """
        with self._lock:
            for t in format_types:
                self.refused[t] = code
        return self

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.default = reply("ok")
            self.requests = []
            self.calls = 0
            self.max_in_flight = 0
            self.refused = {}
            self.files = {}
            self.batches = []
            self.batch_hold = False
            self.batch_outcome = "completed"
            self.batch_create_drops = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> FakeOpenAI:
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve())
            except BaseException as exc:  # surface startup failures to the caller
                errors.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup() if self._runner else asyncio.sleep(0))
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-openai", daemon=True)
        self._thread.start()
        ready.wait(10)
        if errors:
            raise errors[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop = self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/files", self._upload)
        app.router.add_get("/v1/files/{id}/content", self._file_content)
        app.router.add_post("/v1/batches", self._create_batch)
        app.router.add_get("/v1/batches/{id}", self._get_batch)
        app.router.add_get("/v1/batches", self._list_batches)
        # handler_cancellation: a client that gives up (timeout) also ends our sleeping handler.
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    # -- handlers --------------------------------------------------------------------------------
    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = None
        with self._lock:
            headers = {k.lower(): v for k, v in request.headers.items()}
            self.requests.append(Recorded(request.path, body, headers))
            self.calls += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            fmt = (body or {}).get("response_format") if isinstance(body, dict) else None
            fmt_type = fmt.get("type") if isinstance(fmt, dict) else None
            refused_code = self.refused.get(fmt_type) if fmt_type else None
            behaviour: Behaviour | None = None  # None: refused by `refuse()`, the queue is untouched
            if refused_code is None:
                behaviour = self._queue.popleft() if self._queue else self.default
        try:
            if behaviour is None:
                return web.json_response(
                    {"error": {"message": f"response_format type {fmt_type} is not supported"}},
                    status=refused_code,
                )
            return await self._play(request, body, behaviour)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _play(self, request: web.Request, body: Any, b: Behaviour) -> web.StreamResponse:
        if b.delay:
            await asyncio.sleep(b.delay)
        if b.kind == "respond":
            assert b.fn is not None
            out = b.fn(body)
            b = out if isinstance(out, Behaviour) else reply(out, usage=b.usage)
            if b.kind == "respond":
                raise ValueError("a responder must return text or a non-responder behaviour")
            return await self._play(request, body, b)
        if b.kind == "status":
            message = b.message.replace("{authorization}", request.headers.get("Authorization", ""))
            return web.json_response(
                {"error": {"message": message, "code": b.status}}, status=b.status, headers=b.headers
            )
        if b.kind == "malformed":
            return web.Response(text='{"choices": [ {"message": ', content_type="application/json")
        if b.kind == "drop":
            # Close the socket with no answer; the client sees a dropped connection.
            assert request.transport is not None
            request.transport.close()
            raise asyncio.CancelledError
        code, answer = self._answer(body, b)
        return web.json_response(answer, status=code, headers=b.headers)

    def _answer(self, body: Any, b: Behaviour) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) of a behaviour that answers (reply, respond, status, no_choices)."""
        if b.kind == "respond":
            assert b.fn is not None
            out = b.fn(body)
            return self._answer(body, out if isinstance(out, Behaviour) else reply(out, usage=b.usage))
        if b.kind == "status":
            return b.status, {"error": {"message": b.message, "code": b.status}}
        if b.kind == "no_choices":
            return 200, {"id": "fake", "object": "chat.completion", "choices": []}
        prompt, completion = b.usage or (_words(body), len(b.text.split()))
        return 200, (
            {
                "id": "fake-1",
                "object": "chat.completion",
                "model": (body or {}).get("model", "fake") if isinstance(body, dict) else "fake",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": b.text}, "finish_reason": b.finish_reason}
                ],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            }
        )

    # -- the Batch API ---------------------------------------------------------------------------
    def _new_file(self, content: bytes) -> str:
        file_id = f"file-{len(self.files) + 1}"
        self.files[file_id] = content
        return file_id

    async def _upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        if form.get("purpose") != "batch" or not hasattr(upload, "file"):
            return web.json_response({"error": {"message": "expected purpose=batch and a file"}}, status=400)
        with self._lock:
            file_id = self._new_file(upload.file.read())  # type: ignore[union-attr]
        return web.json_response({"id": file_id, "object": "file", "purpose": "batch"})

    async def _file_content(self, request: web.Request) -> web.Response:
        with self._lock:
            content = self.files.get(request.match_info["id"])
        if content is None:
            return web.json_response({"error": {"message": "no such file"}}, status=404)
        return web.Response(body=content, content_type="application/jsonl")

    async def _create_batch(self, request: web.Request) -> web.Response:
        body = await request.json()
        with self._lock:
            content = self.files.get(body.get("input_file_id", ""))
            if content is None or body.get("endpoint") != "/v1/chat/completions":
                return web.json_response({"error": {"message": "bad input_file_id or endpoint"}}, status=400)
            batch = {"id": f"batch-{len(self.batches) + 1}", "object": "batch", "status": "in_progress",
                     "input_file_id": body["input_file_id"], "requests": len(content.splitlines()), "polls": 0,
                     "output_file_id": None, "error_file_id": None}  # fmt: skip
            self.batches.append(batch)
            drop = self.batch_create_drops > 0
            self.batch_create_drops -= drop
        if drop:  # the job exists, but the client never hears of it
            assert request.transport is not None
            request.transport.close()
            raise asyncio.CancelledError
        return web.json_response({k: v for k, v in batch.items() if k != "polls"})

    async def _list_batches(self, request: web.Request) -> web.Response:
        with self._lock:
            data = [{k: v for k, v in b.items() if k != "polls"} for b in reversed(self.batches)]
        return web.json_response({"object": "list", "data": data[: int(request.query.get("limit", "20"))]})

    async def _get_batch(self, request: web.Request) -> web.Response:
        with self._lock:
            found = [b for b in self.batches if b["id"] == request.match_info["id"]]
            if not found:
                return web.json_response({"error": {"message": "no such batch"}}, status=404)
            batch = found[0]
            batch["polls"] += 1
            if batch["status"] == "in_progress" and not self.batch_hold:
                self._finish(batch)
            return web.json_response({k: v for k, v in batch.items() if k != "polls"})

    def _finish(self, batch: dict[str, Any]) -> None:
        """Answer every line of the batch (under the lock) and end it as `batch_outcome` says."""
        batch["status"] = self.batch_outcome
        if self.batch_outcome != "completed":
            return
        out, errors = [], []
        for line in self.files[batch["input_file_id"]].decode().splitlines():
            request = json.loads(line)
            behaviour = self._queue.popleft() if self._queue else self.default
            code, answer = self._answer(request["body"], behaviour)
            result = {"custom_id": request["custom_id"], "response": {"status_code": code, "body": answer}}
            (out if code == 200 else errors).append(json.dumps(result) + "\n")
        batch["output_file_id"] = self._new_file("".join(out).encode()) if out else None
        batch["error_file_id"] = self._new_file("".join(errors).encode()) if errors else None
