"""Application targets next to model specs: `python:MODULE:FUNCTION[@VERSION]` (models/python_target.py) and
`http:path/to/app.yaml` (models/http_target.py). Both are SessionTargets (models/base.py): the engine opens one
session per conversation and calls `complete` on it for each turn, exactly as it calls a model.

    is_app_spec("python:mybot:reply")        -> True
    check_app_spec("http:app.yaml")          # InputError for a bad spec or file, before a run starts
    open_app_target("python:mybot:reply", concurrency=8, timeout_s=60)
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from mheval.errors import InputError
from mheval.models.http_target import PREFIX as HTTP_PREFIX
from mheval.models.http_target import HttpTarget
from mheval.models.limits import RetryPolicy
from mheval.models.python_target import PREFIX as PYTHON_PREFIX
from mheval.models.python_target import PythonTarget, importable, parse_python_spec

AppTarget = PythonTarget | HttpTarget


def is_app_spec(text: object) -> bool:
    """Whether a target spec names an application (python: or http:) rather than a model. `http:` alone, not
    `http://`: a URL is never a spec."""
    if not isinstance(text, str):
        return False
    stripped = text.strip()
    return stripped.startswith(PYTHON_PREFIX) or (
        stripped.startswith(HTTP_PREFIX) and not stripped.startswith("http://")
    )


def open_app_target(
    text: str, *, concurrency: int = 16, timeout_s: float = 120.0, retry: RetryPolicy | None = None
) -> AppTarget:
    """The target an app spec names (importing the module or reading the file now)."""
    if text.strip().startswith(PYTHON_PREFIX):
        return PythonTarget(text, concurrency=concurrency, timeout_s=timeout_s, retry=retry)
    if is_app_spec(text):
        return HttpTarget(text, concurrency=concurrency, timeout_s=timeout_s, retry=retry)
    raise InputError(f"{text!r} is not an application target (python:... or http:...)", field="model")


def check_app_spec(text: str) -> None:
    """Everything about an app spec that can be known before a run: the module imports and names a callable, or
    the file parses and every ${ENV_VAR} its headers name is set. Raises InputError."""
    target = open_app_target(text)
    if isinstance(target, HttpTarget):
        missing = target.missing_env()
        if missing:
            raise InputError(
                f"HTTP target {target.name} needs the environment variable {missing} (named in its headers)",
                path=target.app.path,
                field="headers",
            )


def ray_problem(text: str) -> str | None:
    """Why Ray workers (other processes, maybe other machines) could not open this target, or None: a callable
    given in Python that no import path reaches."""
    if text.strip().startswith(PYTHON_PREFIX) and not importable(parse_python_spec(text)):
        return (
            f"Ray workers cannot import the Python target {text!r} (defined in __main__ or inside a function): "
            "put it in a module installed on every node and name it as python:MODULE:FUNCTION"
        )
    return None


def target_identity(text: str) -> str | None:
    """What, besides its spec, decides an app target's replies (the version of a Python target, the content of an
    HTTP target's file), for the engine's unit identity; None for a model spec."""
    if not is_app_spec(text):
        return None
    if text.strip().startswith(PYTHON_PREFIX):
        return open_app_target(text).endpoint  # an import already made, or the callable given in Python
    path = Path(text.strip()[len(HTTP_PREFIX) :].strip())
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        stamp = 0
    return _http_identity(text, stamp)


@cache
def _http_identity(text: str, stamp: int) -> str:
    """Read once per version of the file (`stamp`: its modification time), not once per unit."""
    return open_app_target(text).endpoint


__all__ = ["AppTarget", "check_app_spec", "is_app_spec", "open_app_target", "target_identity"]
