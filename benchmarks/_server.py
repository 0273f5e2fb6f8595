"""A loopback OpenAI-compatible judge server for the benchmarks, meant to run in its own process.

It answers every POST /v1/chat/completions with one valid psycrisis verdict (or a crisis-triage label
when the request's schema asks for a label) after a set latency, so the benchmark measures mheval's
own overhead and not a model. Run in a separate process so it shares neither the event loop nor the
GIL with the harness being measured.

    python benchmarks/_server.py --latency 0.2      # prints "PORT <n>" once it listens

GET /stats answers {"calls": n, "in_flight": n, "max_in_flight": n}; POST /reset zeroes them.
The server stops when its standard input closes (the parent died or closed the pipe) or on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web

# The five psycrisis dimensions; each verdict quotes a span that the benchmark's responses contain.
DIMENSIONS = ("empathy_collaboration", "emotion_regulation", "explore_concerns", "risk_assessment", "external_support")
QUOTE = "Are you safe right now?"


def _completion(content: str) -> bytes:
    body = {
        "id": "bench",
        "object": "chat.completion",
        "created": 0,
        "model": "bench",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 600, "completion_tokens": 120, "total_tokens": 720},
    }
    return json.dumps(body).encode()


VERDICT = _completion(
    json.dumps(
        {"dimensions": {d: {"value": 1, "rationale": "The reply does this.", "evidence": [QUOTE]} for d in DIMENSIONS}}
    )
)
LABEL = _completion(json.dumps({"label": "no_crisis", "rationale": "No sign of danger in the message."}))


class Stats:
    def __init__(self) -> None:
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0


def make_app(latency: float) -> web.Application:
    stats = Stats()

    async def chat(request: web.Request) -> web.Response:
        raw = await request.read()
        stats.calls += 1
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            if latency > 0:
                await asyncio.sleep(latency)
            # A substring test instead of parsing the request keeps the server cheap.
            body = LABEL if b'"label"' in raw and b'"dimensions"' not in raw else VERDICT
            return web.Response(body=body, content_type="application/json")
        finally:
            stats.in_flight -= 1

    async def get_stats(request: web.Request) -> web.Response:
        return web.json_response(
            {"calls": stats.calls, "in_flight": stats.in_flight, "max_in_flight": stats.max_in_flight}
        )

    async def reset(request: web.Request) -> web.Response:
        stats.calls = stats.max_in_flight = 0
        return web.json_response({"ok": True})

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "bench", "object": "model"}]})

    app = web.Application(client_max_size=16 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/stats", get_stats)
    app.router.add_post("/reset", reset)
    return app


async def serve(latency: float, port: int) -> None:
    runner = web.AppRunner(make_app(latency), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=4096)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"PORT {bound}", flush=True)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    # Stop when the parent closes our stdin pipe, so a crashed benchmark never leaves a server behind.
    if stat.S_ISFIFO(os.fstat(sys.stdin.fileno()).st_mode):
        loop.add_reader(sys.stdin.fileno(), lambda: stop.set() if not os.read(sys.stdin.fileno(), 1) else None)
    await stop.wait()
    await runner.cleanup()


@contextmanager
def judge_server(latency: float) -> Iterator[str]:
    """Start the server in a child process; yields its base URL (…/v1) and stops it on exit."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "--latency", str(latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"the benchmark server did not start (said {line!r})")
        yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait(timeout=5)


def server_stats(base_url: str) -> dict[str, int]:
    """The server's counters (calls, max_in_flight), read over HTTP."""
    import urllib.request

    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats", timeout=10) as resp:
        return json.loads(resp.read())


def reset_stats(base_url: str) -> None:
    import urllib.request

    req = urllib.request.Request(base_url.removesuffix("/v1") + "/reset", data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=10):
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args()
    asyncio.run(serve(args.latency, args.port))


if __name__ == "__main__":
    main()
