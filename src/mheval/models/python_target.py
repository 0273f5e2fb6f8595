"""Python targets: a function or class of the user's, evaluated like a model (`python:MODULE:FUNCTION`).

The spec is `python:MODULE:NAME[@VERSION]` or `python:path/to/file.py:NAME[@VERSION]`. NAME is a function
(sync or async) or a class; it is given the conversation so far (a list of `{"role", "content"}`) and returns
the reply's text, or a dict with `content` (and optional `usage`: prompt_tokens, completion_tokens, and any
other keys, kept as the raw answer). A second argument, when the callable takes one, is a dict with
`session_id`, `temperature`, `max_tokens` and `seed`. A class gets one instance per conversation (made with
no arguments; its instances are called like the function) and its optional `close()` (sync or async) at the
conversation's end.

Identity (what resume and the call cache key on): the import path plus the version, from the spec's
`@VERSION` or else the callable's `mheval_version` attribute. Changing the code without changing the
version is the user's call: finished units and cached answers are kept.

Failures: an exception becomes a failed reply whose error names its type and message (an unscored unit,
never a crash of the run). It is retried, under the run's retry policy, when the exception has a truthy
`retryable` attribute or is an instance of a class in the callable's `mheval_retry_on` tuple; a call that
takes longer than the run's `timeout_s` counts as a (retried) timeout. Sync callables run on daemon threads, as
many at once as the run's concurrency; a timed-out sync call cannot be stopped: it goes on in the background
and never keeps the process alive (a daemon thread ends with the process).

Answers: the text is made valid Unicode (a lone surrogate becomes U+FFFD) before anything stores it, and token
counts must be finite, non-negative whole numbers, else the usage is dropped and a warning says so once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mheval.errors import InputError
from mheval.models.app_session import AppSession
from mheval.models.base import Completion, Message, ModelError, OneCallSession, valid_count, valid_text
from mheval.models.limits import EndpointLimiter, RetryPolicy, TransientError
from mheval.records import Usage

PREFIX = "python:"
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_MAX_MESSAGE = 300
ON_RESUME = ("mark", "restart")

_log = logging.getLogger(__name__)

# Callables handed to `mheval.evaluate(models=[fn])`, by the spec they were given: found here first, so a
# function defined in a notebook or inside another function works without being importable.
_GIVEN: dict[str, Any] = {}


@dataclass(frozen=True)
class PythonSpec:
    where: str  # a module name, or a path to a .py file
    attr: str  # dotted name inside it
    version: str | None

    @property
    def name(self) -> str:
        """The target's name in the store: its import path (the version is identity, not name)."""
        return f"{PREFIX}{self.where}:{self.attr}"

    @property
    def is_file(self) -> bool:
        return self.where.endswith(".py") or "/" in self.where or "\\" in self.where


def parse_python_spec(text: str) -> PythonSpec:
    body = text.strip()[len(PREFIX) :]
    version: str | None = None
    head, at, tail = body.rpartition("@")
    if at and tail and ":" not in tail and "/" not in tail:
        body, version = head, tail.strip()
    where, colon, attr = body.rpartition(":")
    where, attr = where.strip(), attr.strip()
    if not colon or not where or not _DOTTED.match(attr):
        raise InputError(
            f"python target {text!r} is not python:MODULE:FUNCTION or python:path/to/file.py:FUNCTION "
            "(optionally @VERSION)",
            field="model",
        )
    return PythonSpec(where, attr, version)


def register(fn: Any) -> str:
    """The spec of a callable given in Python (`evaluate(models=[fn])`), remembered for this process."""
    if not callable(fn):
        raise InputError(f"a target must be a spec string or a callable, not {type(fn).__name__}", field="models")
    module = getattr(fn, "__module__", None) or "__main__"
    qualname = str(getattr(fn, "__qualname__", None) or type(fn).__qualname__)
    attr = ".".join(re.sub(r"[^A-Za-z0-9_]", "_", part) or "_" for part in qualname.split("."))
    spec = f"{PREFIX}{module}:{attr}"
    _GIVEN[spec] = fn
    return spec


def _load_file(path: str) -> Any:
    file = Path(path)
    if not file.is_file():
        raise InputError("python target file not found", path=file, field="model")
    resolved = file.resolve()
    stat = resolved.stat()
    name = "mheval_target_" + hashlib.sha256(f"{resolved}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise InputError("cannot load this file as Python", path=file, field="model")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise InputError(f"importing it raised {type(exc).__name__}: {exc}", path=file, field="model") from None
    return module


def _import_module(name: str) -> Any:
    """Import `name`, also from the current folder, as `python -m` would: `--model python:mybot:reply` beside
    mybot.py works from the `mheval` command too. The folder is tried last, so it never shadows an installed
    package of the same name."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        if exc.name != name.split(".")[0] or here in sys.path or "" in sys.path:
            raise
        sys.path.append(here)
        return importlib.import_module(name)


def load_callable(spec: PythonSpec) -> Any:
    """The function or class a spec names; InputError when it cannot be imported or is not callable."""
    given = _GIVEN.get(spec.name)
    if given is not None:
        return given
    if spec.is_file:
        module = _load_file(spec.where)
    else:
        try:
            module = _import_module(spec.where)
        except Exception as exc:
            raise InputError(
                f"python target {spec.name!r}: cannot import {spec.where!r}: {type(exc).__name__}: {exc}",
                field="model",
            ) from None
    obj: Any = module
    for part in spec.attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise InputError(f"python target {spec.name!r}: {spec.where} has no {spec.attr!r}", field="model") from None
    if not callable(obj):
        raise InputError(f"python target {spec.name!r}: {spec.attr!r} is not a function or class", field="model")
    return obj


def importable(spec: PythonSpec) -> bool:
    """Whether another process could load the target by its spec (not only this one's registry)."""
    if spec.is_file:
        return True
    return spec.where != "__main__" and not any(part in ("_locals_", "_lambda_") for part in spec.attr.split("."))


def identity(spec: PythonSpec, obj: Any) -> str:
    """Import path and version: what decides the target's replies as far as mheval can know."""
    version = spec.version or getattr(obj, "mheval_version", None)
    return spec.name + (f"@{version}" if version not in (None, "") else "")


def _takes_context(fn: Any) -> bool:
    try:
        inspect.signature(fn).bind([], {})
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): call it with the messages only
        return False
    return True


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004


def _text(value: Any) -> str:
    text = " ".join(valid_text(str(value)).split())
    return text[:_MAX_MESSAGE] + ("..." if len(text) > _MAX_MESSAGE else "")


def usage_of(given: Any) -> tuple[Usage, str | None]:
    """The token counts of a target's `usage`, and a note when they were dropped: each count must be a finite,
    non-negative integer (`inf`, `-3`, `2.5` or `"many"` would crash or poison every sum downstream)."""
    if given is None:
        return Usage(), None
    if not isinstance(given, dict):
        return Usage(), f"usage dropped: it is a {type(given).__name__}, not a mapping"
    counts = {k: valid_count(given.get(k)) for k in ("prompt_tokens", "completion_tokens")}
    bad = [f"{k}={given.get(k)!r}" for k, v in counts.items() if v is None]
    if bad:
        return Usage(), f"usage dropped: {', '.join(bad)} is not a finite, non-negative whole number"
    return Usage(prompt_tokens=counts["prompt_tokens"] or 0, completion_tokens=counts["completion_tokens"] or 0), None


def completion_of(result: Any, latency: float, on_note: Callable[[str], None] | None = None) -> Completion:
    """The Completion of what a target returned: text, or a dict with `content` (and optional `usage`). The text is
    made valid Unicode (models/base.py valid_text); a usage that is not token counts is dropped and `on_note` told."""
    if isinstance(result, str):
        return Completion(text=valid_text(result), latency_s=latency)
    if isinstance(result, dict) and isinstance(result.get("content"), str):
        usage, note = usage_of(result.get("usage"))
        if note is not None and on_note is not None:
            on_note(note)
        return Completion(text=valid_text(result["content"]), usage=usage, latency_s=latency, raw=result)
    raise ModelError("bad_response", f"the target returned {type(result).__name__}, not text or a dict with 'content'")


class PythonTarget(OneCallSession):
    """A SessionTarget (models/base.py) over a user's function or class."""

    def __init__(
        self, text: str, *, concurrency: int = 16, timeout_s: float = 120.0, retry: RetryPolicy | None = None
    ) -> None:
        self.spec = parse_python_spec(text)
        self.obj = load_callable(self.spec)
        self.name = self.spec.name
        self.endpoint = identity(self.spec, self.obj)
        self.is_class = inspect.isclass(self.obj)
        if self.is_class and not any("__call__" in vars(k) for k in self.obj.__mro__):
            raise InputError(f"python target {self.name!r}: the class's instances must be callable (define __call__)",
                             field="model")  # fmt: skip
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        # A class target that cannot go on with a conversation cut mid-way in a new instance says
        # `mheval_on_resume = "restart"` (engine/conversation_stages.py); "mark" is the default.
        self.on_resume = getattr(self.obj, "mheval_on_resume", "mark")
        if self.on_resume not in ON_RESUME:
            raise InputError(f"python target {self.name!r}: mheval_on_resume is {self.on_resume!r}", field="model",
                             choices=ON_RESUME)  # fmt: skip
        retry_on = getattr(self.obj, "mheval_retry_on", ())
        self.retry_on: tuple[type[BaseException], ...] = tuple(retry_on) if isinstance(retry_on, tuple | list) else ()
        self.limiter = EndpointLimiter(concurrency)
        self._noted: set[str] = set()

    def __repr__(self) -> str:
        return f"PythonTarget({self.endpoint!r})"

    def session(self, key: str) -> PythonSession:
        return PythonSession(self, key)

    async def aclose(self) -> None:
        return None

    async def run_sync(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call a sync callable on a daemon thread of its own. Not a ThreadPoolExecutor: its workers are joined
        when the interpreter exits, so a target that never returns (past `timeout_s`, abandoned) would keep the
        process alive for ever; a daemon thread dies with the process. How many run at once is bounded by the
        target's limiter (the run's concurrency), plus the abandoned calls that are still running."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def settle(ok: bool, value: Any) -> None:
            if not future.done():
                (future.set_result if ok else future.set_exception)(value)

        def work() -> None:
            try:
                outcome: tuple[bool, Any] = (True, fn(*args))
            except BaseException as exc:  # handed to the awaiting coroutine, as run_in_executor does
                outcome = (False, exc)
            # RuntimeError: the loop closed while the call ran (it had timed out): nobody waits for it.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, *outcome)

        threading.Thread(target=work, name="mheval-target", daemon=True).start()
        return await future

    def note(self, text: str) -> None:
        """Say once per target and kind of note what was dropped from its answers (on stderr, via logging)."""
        kind = text.split(":", 1)[0]
        if kind not in self._noted:
            self._noted.add(kind)
            _log.warning("%s: %s (said once per target)", self.name, text)

    def failure(self, exc: BaseException) -> Exception:
        """The retry loop's view of an exception the target raised."""
        message = f"{type(exc).__name__}: {_text(exc)}"
        if getattr(exc, "retryable", False) or isinstance(exc, self.retry_on):
            return TransientError("exception", message)
        return ModelError("exception", message)


class PythonSession(AppSession["PythonTarget"]):
    """One conversation with a Python target: a class target's own instance, made on the first turn."""

    def __init__(self, target: PythonTarget, key: str) -> None:
        self.target = target
        self.key = key
        self.name = target.name
        # A class keeps state: its conversations' answers are cached apart (models/base.py, SessionTarget).
        self.endpoint = f"{target.endpoint}#{key}" if target.is_class else target.endpoint
        self.stateful = target.is_class
        self.on_resume = target.on_resume
        self._instance: Any = None

    async def _callable(self) -> Any:
        target = self.target
        if not target.is_class:
            return target.obj
        if self._instance is None:
            self._instance = await target.run_sync(target.obj)
        return self._instance

    async def _answer(self, messages: list[Message], context: dict[str, Any]) -> Completion:
        """The callable gets the messages, and the context too when it takes a second argument."""
        target = self.target
        try:
            fn = await self._callable()
            args: tuple[Any, ...] = ([dict(m) for m in messages],)
            if _takes_context(fn):
                args += (dict(context),)
            async with target.limiter:
                started = time.perf_counter()
                async with asyncio.timeout(target.timeout_s):
                    if _is_async(fn):
                        result = await fn(*args)
                    else:
                        result = await target.run_sync(fn, *args)
                        if inspect.isawaitable(result):
                            result = await result
                latency = time.perf_counter() - started
        except TimeoutError:
            raise TransientError("timeout", f"no answer within {target.timeout_s:g} s") from None
        except (ModelError, TransientError, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise target.failure(exc) from None
        return completion_of(result, latency, target.note)

    async def aclose(self) -> None:
        """End the conversation: a class instance's `close()`, if it has one (its failure is ignored)."""
        instance, self._instance = self._instance, None
        close = getattr(instance, "close", None)
        if not callable(close):
            return
        try:
            result = close() if inspect.iscoroutinefunction(close) else await self.target.run_sync(close)
            if inspect.isawaitable(result):
                await result
        except Exception:  # a failing close() must not fail the conversation it ends
            return
