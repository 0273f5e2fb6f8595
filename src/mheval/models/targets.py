"""Application targets next to model specs: `python:MODULE:FUNCTION[@VERSION]` (models/python_target.py),
`http:path/to/app.yaml` (models/http_target.py) and the targets plug-in packages add (entry point group
`mheval.targets`, models/registry.py). The built-ins are SessionTargets (models/base.py): the engine opens one
session per conversation and calls `complete` on it for each turn, exactly as it calls a model.

    is_app_spec("python:mybot:reply")        -> True
    check_app_spec("http:app.yaml")          # InputError for a bad spec or file, before a run starts
    open_app_target("python:mybot:reply", concurrency=8, timeout_s=60)
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from mheval.errors import InputError
from mheval.models.http_target import PREFIX as HTTP_PREFIX
from mheval.models.http_target import HttpTarget
from mheval.models.limits import RetryPolicy
from mheval.models.python_target import PREFIX as PYTHON_PREFIX
from mheval.models.python_target import PythonTarget, importable, parse_python_spec
from mheval.models.registry import TARGETS, TargetKind

AppTarget = PythonTarget | HttpTarget
"""The built-in application targets; a plug-in's target is any ChatModel or SessionTarget."""


def is_app_spec(text: object) -> bool:
    """Whether a target spec names an application (python:, http: or a plug-in's kind) rather than a model.
    `http:` alone, not `http://`: a URL is never a spec."""
    return isinstance(text, str) and TARGETS.find(text) is not None


def open_app_target(
    text: str, *, concurrency: int = 16, timeout_s: float = 120.0, retry: RetryPolicy | None = None
) -> Any:
    """The target an app spec names (importing the module or reading the file now)."""
    return _kind(text).open(text, concurrency=concurrency, timeout_s=timeout_s, retry=retry)


def check_app_spec(text: str) -> None:
    """Everything about an app spec that can be known before a run: the module imports and names a callable, or
    the file parses and every ${ENV_VAR} its headers name is set. Raises InputError."""
    kind = _kind(text)
    if kind.check is not None:
        kind.check(text)
    else:
        open_app_target(text)


def ray_problem(text: str) -> str | None:
    """Why Ray workers (other processes, maybe other machines) could not open this target, or None: a callable
    given in Python that no import path reaches."""
    kind = TARGETS.find(text)
    return kind.ray_problem(text) if kind is not None and kind.ray_problem is not None else None


def target_identity(text: str) -> str | None:
    """What, besides its spec, decides an app target's replies (the version of a Python target, the content of an
    HTTP target's file), for the engine's unit identity; None for a model spec."""
    kind = TARGETS.find(text)
    return kind.identity(text) if kind is not None and kind.identity is not None else None


def _kind(text: str) -> TargetKind:
    kind = TARGETS.find(text)
    if kind is None:
        raise InputError(f"{text!r} is not an application target (python:... or http:...)", field="model")
    return kind


# -- python:MODULE:FUNCTION -------------------------------------------------------------------------------------


def _is_python_spec(text: str) -> bool:
    return text.strip().startswith(PYTHON_PREFIX)


def _python_ray_problem(text: str) -> str | None:
    if not importable(parse_python_spec(text)):
        return (
            f"Ray workers cannot import the Python target {text!r} (defined in __main__ or inside a function): "
            "put it in a module installed on every node and name it as python:MODULE:FUNCTION"
        )
    return None


def _python_identity(text: str) -> str:
    return open_app_target(text).endpoint  # an import already made, or the callable given in Python


# -- http:app.yaml ----------------------------------------------------------------------------------------------


def _is_http_spec(text: str) -> bool:
    stripped = text.strip()
    return stripped.startswith(HTTP_PREFIX) and not stripped.startswith("http://")


def _check_http(text: str) -> None:
    target = HttpTarget(text)
    missing = target.missing_env()
    if missing:
        raise InputError(
            f"HTTP target {target.name} needs the environment variable {missing} (named in its headers)",
            path=target.app.path,
            field="headers",
        )


def _http_file_identity(text: str) -> str:
    path = Path(text.strip()[len(HTTP_PREFIX) :].strip())
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        stamp = 0
    return _http_identity(text, stamp)


@cache
def _http_identity(text: str, stamp: int) -> str:
    """Read once per version of the file (`stamp`: its modification time), not once per unit."""
    return str(open_app_target(text).endpoint)


# The built-in kinds, asked before any plug-in: python: first, as open_app_target always did.
TARGETS.register(
    TargetKind("python", _is_python_spec, PythonTarget, ray_problem=_python_ray_problem, identity=_python_identity)
)
TARGETS.register(TargetKind("http", _is_http_spec, HttpTarget, check=_check_http, identity=_http_file_identity))


__all__ = ["AppTarget", "check_app_spec", "is_app_spec", "open_app_target", "ray_problem", "target_identity"]
