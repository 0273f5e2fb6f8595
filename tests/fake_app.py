"""A chat application on 127.0.0.1 that wraps a chat model, for the HTTP-target tests (tests/test_app_targets.py).

`POST /chat` takes `{"message": ..., "session": ...}` and remembers each session's turns on the server: the model
it wraps (an OpenAI-compatible server, here tests/fake_openai.py) is sent that session's whole history, so the app
replies as the bare model would only when mheval keeps one session per conversation. A body that carries
`"messages"` (the whole conversation) is answered from it instead, without memory. With `"session": null` the
app makes a new session and returns its id (`{"reply": ..., "session": ...}`), for `session: {from: response}`.

Faults, one per request, in order (`app.script(...)`): "500" (a server error), "timeout" (answers after
`slow_s`), "nopath" (a 200 without `reply`), "notjson" (a 200 that is not JSON), "echo401" (401 whose body
echoes the Authorization header). With `token` set every request must carry `Authorization: Bearer <token>`.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections import deque
from typing import Any

import aiohttp
from aiohttp import web


class FakeApp:
    def __init__(self, model_url: str, model: str = "bot") -> None:
        self.model_url = model_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.token: str | None = None
        self.slow_s = 2.0
        self.memory: dict[str, list[dict[str, str]]] = {}
        self.requests: list[dict[str, Any]] = []
        self._faults: deque[str] = deque()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/chat"

    def script(self, *faults: str) -> None:
        with self._lock:
            self._faults.extend(faults)

    def reset(self) -> None:
        with self._lock:
            self._faults.clear()
            self.memory.clear()
            self.requests.clear()
            self.token = None

    def __enter__(self) -> FakeApp:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            loop.run_until_complete(self._serve())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup() if self._runner else asyncio.sleep(0))
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-app", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_post("/chat", self._chat)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        auth = request.headers.get("Authorization", "")
        with self._lock:
            self.requests.append({"body": body, "authorization": auth})
            fault = self._faults.popleft() if self._faults else None
        if fault == "echo401" or (self.token is not None and auth != f"Bearer {self.token}"):
            return web.json_response({"error": f"bad credentials: {auth}"}, status=401)
        if fault == "500":
            return web.json_response({"error": "scripted failure"}, status=500)
        if fault == "timeout":
            await asyncio.sleep(self.slow_s)
        if fault == "notjson":
            return web.Response(text="<html>busy</html>", content_type="text/html")
        session = body.get("session") or uuid.uuid4().hex
        if "messages" in body:
            history = [dict(m) for m in body["messages"]]
        else:
            with self._lock:
                history = self.memory.setdefault(session, [])
                history.append({"role": "user", "content": body["message"]})
        async with aiohttp.ClientSession() as http:
            payload = {"model": self.model, "messages": list(history), "temperature": 0.0}
            async with http.post(self.model_url, json=payload) as resp:
                answer = await resp.json()
        reply = answer["choices"][0]["message"]["content"]
        if "messages" not in body:
            with self._lock:
                history.append({"role": "assistant", "content": reply})
        if fault == "nopath":
            return web.json_response({"answer": reply, "session": session})
        return web.json_response({"reply": reply, "session": session})


def app_yaml(url: str, **extra: Any) -> str:
    """An app file for `url` (JSON is YAML): body {message, session}, reply $.reply, session from client."""
    data: dict[str, Any] = {
        "url": url,
        "body": {"message": "{{message}}", "session": "{{session_id}}"},
        "reply": "$.reply",
        "session": {"from": "client"},
    }
    data.update(extra)
    return json.dumps(data, indent=2)
