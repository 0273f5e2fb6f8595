"""OpenAI Batch API mode: the calls of a stage go out as one batch job, at half the price.

`BatchModel` wraps a model of an endpoint that offers the Batch API (`/files`, `/batches`) and has the
same `complete()` as any ChatModel, so the stages, the judges and the cache do not change. Calls made
while a stage starts are gathered (until none has come for `linger_s`, or a batch's limit of requests
or bytes is reached), written as one JSONL file, uploaded, and submitted as one batch; each caller
then waits for the job (polled every `poll_s`) and gets its own line of the output as a Completion.
A line refused for its structured-output shape lowers the shape for the next run, as a refused
synchronous call would (json_schema -> json_object -> none).

Resume: each request's `custom_id` is its cache key, and the store notes which batch holds which key
as soon as the batch is created. A run killed while a job is in progress, started again with the same
command, finds the keys of its unfinished units in that job and waits for it instead of submitting
(and paying for) the calls again. A line that failed, or a job that failed or expired, gives its
callers a ModelError (the unit is stored unscored, reason provider_error) and forgets those keys, so
the next run submits them afresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from mheval.engine.cache import call_key
from mheval.models.base import CallOptions, ChatModelBase, Completion, Message, ModelError
from mheval.models.openai_compat import OpenAICompatModel, error_message
from mheval.runfolder.store import Store

BATCH_PRICE_FACTOR = 0.5  # the Batch API bills half the synchronous price
MAX_BATCH_REQUESTS = 50_000  # OpenAI's limits on one batch: requests, and bytes of its input file
MAX_BATCH_BYTES = 190_000_000
FINAL_STATUSES = frozenset({"completed", "failed", "expired", "cancelled"})
CHAT_PATH = "/v1/chat/completions"


class BatchModel(ChatModelBase):
    """A ChatModel whose calls are answered through batch jobs (see the module docstring)."""

    def __init__(
        self,
        inner: OpenAICompatModel,
        store: Store,
        *,
        poll_s: float = 30.0,
        linger_s: float = 0.5,
        max_requests: int = MAX_BATCH_REQUESTS,
    ) -> None:
        self.inner = inner
        self.store = store
        self.name = inner.name
        self.endpoint = inner.endpoint
        self.poll_s = poll_s
        self.linger_s = linger_s
        self.max_requests = max_requests
        # The structured-output shape an earlier run's job found refused stays refused.
        self._shape_key = f"batch_structured_mode:{self.name}"
        inner.start_at(store.get_meta(self._shape_key, "json_schema"))
        self._waiting: dict[str, tuple[str, str, list[asyncio.Future[str]]]] = {}  # key -> (line, mode, callers)
        self._waiting_bytes = 0
        self._timer: asyncio.TimerHandle | None = None
        self._jobs: dict[str, asyncio.Task[tuple[str, dict[str, dict[str, Any]]]]] = {}

    async def _complete(self, messages: list[Message], options: CallOptions) -> Completion:
        key = call_key(self, messages, options)
        batch_id = self.store.batch_of(key)
        mode = self.inner.structured_mode if options.json_schema is not None else "none"
        if batch_id is None:
            body = self.inner.chat_body(messages, options)
            body, mode = self.inner.structured_body(body, options.json_schema)
            batch_id = await self._enqueue(key, body, mode)
        try:
            status, lines = await self._job(batch_id)
        except ModelError as exc:
            if exc.kind == "http_404":  # the server no longer knows the job: submit the call anew next time
                self.store.forget_batch_request(key)
            raise
        except Exception as exc:  # anything else while waiting is this call's failure, not the run's
            raise ModelError("batch_error", f"batch {batch_id}: {type(exc).__name__}: {exc}") from None
        return self._completion(key, batch_id, status, lines.get(key), mode)

    async def aclose(self) -> None:
        for task in self._jobs.values():
            task.cancel()
        await self.inner.aclose()

    # -- gathering and submitting ---------------------------------------------------------------
    def _enqueue(self, key: str, body: dict[str, Any], mode: str) -> asyncio.Future[str]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        if key in self._waiting:  # the same call twice (custom ids must be unique in a batch)
            self._waiting[key][2].append(future)
        else:
            line = json.dumps({"custom_id": key, "method": "POST", "url": CHAT_PATH, "body": body}) + "\n"
            if self._waiting_bytes + len(line.encode()) > MAX_BATCH_BYTES:
                self._submit_now()  # this line starts the next file
            self._waiting[key] = (line, mode, [future])
            self._waiting_bytes += len(line.encode())
        if len(self._waiting) >= self.max_requests:
            self._submit_now()
        else:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_later(self.linger_s, self._submit_now)
        return future

    def _submit_now(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._waiting:
            waiting, self._waiting, self._waiting_bytes = self._waiting, {}, 0
            task = asyncio.ensure_future(self._submit(waiting))
            task.add_done_callback(_quiet)

    async def _submit(self, waiting: dict[str, tuple[str, str, list[asyncio.Future[str]]]]) -> None:
        try:
            lines = "".join(line for line, _, _ in waiting.values())
            upload = ("batch", lines.encode(), "mheval-batch.jsonl")
            uploaded = _json(await self.inner.api("POST", "/files", upload=upload), "file upload")
            batch_id = await self._create(str(uploaded["id"]))
            self.store.put_batch(batch_id, self.name, self.endpoint, list(waiting))
        except Exception as exc:  # every caller must hear of it, whatever went wrong
            error = exc if isinstance(exc, ModelError) else ModelError("batch_submit", f"{type(exc).__name__}: {exc}")
            for _, _, futures in waiting.values():
                for future in futures:
                    if not future.done():
                        future.set_exception(error)
            return
        for _, _, futures in waiting.values():
            for future in futures:
                if not future.done():
                    future.set_result(batch_id)

    async def _create(self, file_id: str) -> str:
        """Create the job for an uploaded file, once: a creation whose answer was lost is not sent again
        (that could start and bill a second job) but looked up among the server's recent jobs."""
        body = {"input_file_id": file_id, "endpoint": CHAT_PATH, "completion_window": "24h"}
        try:
            created = await self.inner.api("POST", "/batches", json_body=body, retry=False)
            return str(_json(created, "batch creation")["id"])
        except ModelError as exc:
            if not exc.kind.startswith(("timeout", "connection", "http_5")):
                raise  # the server said no: no job was made
            listed = _json(await self.inner.api("GET", "/batches?limit=100"), "batch list").get("data") or []
            for job in listed:
                if isinstance(job, dict) and job.get("input_file_id") == file_id:
                    return str(job["id"])
            raise

    # -- waiting for a job ----------------------------------------------------------------------
    def _job(self, batch_id: str) -> asyncio.Task[tuple[str, dict[str, dict[str, Any]]]]:
        """One poller per batch, shared by every call it holds."""
        if batch_id not in self._jobs:
            self._jobs[batch_id] = asyncio.ensure_future(self._wait_for(batch_id))
        return self._jobs[batch_id]

    async def _wait_for(self, batch_id: str) -> tuple[str, dict[str, dict[str, Any]]]:
        """(final status, output lines by custom_id) of a batch, once it has finished."""
        while True:
            batch = _json(await self.inner.api("GET", f"/batches/{batch_id}"), "batch status")
            status = str(batch.get("status"))
            if status in FINAL_STATUSES:
                break
            await asyncio.sleep(self.poll_s)
        lines: dict[str, dict[str, Any]] = {}
        for field in ("error_file_id", "output_file_id"):  # output last: it wins over an error for one id
            file_id = batch.get(field)
            if file_id:
                raw = await self.inner.api("GET", f"/files/{file_id}/content")
                for text in raw.decode("utf-8", "replace").splitlines():
                    with contextlib.suppress(ValueError, TypeError, KeyError):
                        line = json.loads(text)
                        lines[str(line["custom_id"])] = line
        return status, lines

    def _completion(self, key: str, batch_id: str, status: str, line: dict[str, Any] | None, mode: str) -> Completion:
        response = (line or {}).get("response") or {}
        code = response.get("status_code")
        completion = None
        if code == 200:
            completion = self.inner.completion_from(response.get("body"), 0.0, mode, BATCH_PRICE_FACTOR)
        if completion is not None:
            return completion
        self.store.forget_batch_request(key)  # the next run submits this call anew
        if line is None:
            raise ModelError(f"batch_{status}", f"batch {batch_id} ended {status} without an answer for this call")
        if code is None:
            raise ModelError("batch_error", f"batch {batch_id}: {error_message(line) or 'no response'}")
        if code != 200:
            body = response.get("body")
            message = error_message(body if isinstance(body, dict | str) else None)
            if self.inner.note_refusal(int(code), message, mode):
                self.store.set_meta(self._shape_key, self.inner.structured_mode)
                message = f"the server refused response_format {mode}; the next run asks for the next shape"
            raise ModelError(f"http_{code}", f"batch {batch_id}: {message or f'the call failed with HTTP {code}'}")
        raise ModelError("bad_response", f"batch {batch_id}: an answer with no message")


def _json(raw: bytes, what: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise ModelError("bad_response", f"{what}: the server's answer is not a JSON object")
    return data


def _quiet(task: asyncio.Task[Any]) -> None:
    """Submission errors reach the callers through their futures; nothing is left unretrieved."""
    if not task.cancelled():
        task.exception()


__all__ = ["BATCH_PRICE_FACTOR", "MAX_BATCH_REQUESTS", "BatchModel"]
