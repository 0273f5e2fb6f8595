"""Which target a spec names, besides a chat model: the kinds of application target, built-in and plug-in.

The built-ins (models/targets.py) are `python:MODULE:FUNCTION` and `http:app.yaml`; a spec no kind takes is a
chat model spec (`PROVIDER/MODEL[@URL]`, models/spec.py). A plug-in package declares a `TargetKind` under the
entry point group `mheval.targets`:

    target_kind = TargetKind("mybot", matches=lambda spec: spec.startswith("mybot:"), open=MyBotTarget)

where `open(spec, concurrency=..., timeout_s=..., retry=...)` returns a ChatModel, or a SessionTarget (one
session per conversation, models/base.py). The engine treats a plug-in's target as it treats an application.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mheval.models.limits import RetryPolicy
from mheval.plugins import Registry

TARGET_GROUP = "mheval.targets"


class OpenTarget(Protocol):
    def __call__(self, spec: str, /, *, concurrency: int, timeout_s: float, retry: RetryPolicy | None) -> Any: ...


@dataclass(frozen=True)
class TargetKind:
    """A kind of target: the specs it takes, how to open one, and what can be known of it before a run."""

    name: str
    matches: Callable[[str], bool]
    open: OpenTarget
    # Everything about a spec that can be known before a run (raises InputError). None: opening it is the check.
    check: Callable[[str], None] | None = None
    # What, besides its spec, decides a target's replies (a version, a file's content), for the engine's unit
    # identity. None: the spec alone.
    identity: Callable[[str], str | None] | None = None
    # Why Ray workers (other processes) could not open this target, or None.
    ray_problem: Callable[[str], str | None] | None = None


TARGETS: Registry[TargetKind] = Registry(TARGET_GROUP, TargetKind)


__all__ = ["TARGETS", "TARGET_GROUP", "OpenTarget", "TargetKind"]
