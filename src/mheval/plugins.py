"""Registries of the kinds of thing a spec string can name (judges, targets), open to plug-in packages.

A kind says which specs it takes (`matches`, a predicate on the spec string as given) and how to make one.
The built-in kinds register themselves in code (judges/__init__.py, models/targets.py); an installed package
adds one through an entry point in the registry's group, e.g. in its pyproject.toml:

    [project.entry-points."mheval.judges"]
    myjudge = "mypackage.mheval_plugin:judge_kind"   # a mheval.judges.registry.JudgeKind

`find(spec)` asks the built-ins first, in the order they registered, then the plug-ins, so a plug-in never
changes what an existing spec means; no kind matching leaves the spec to the caller's default (a chat
model spec, for judges and targets alike). Plug-ins are read on the first lookup that gets past the built-ins,
once per process, so `import mheval` and specs of the built-in kinds never scan the installed packages.
"""

from __future__ import annotations

import importlib.metadata
import warnings
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar


class Kind(Protocol):
    """What a registry needs of a kind: a name for messages and the predicate that picks its specs."""

    @property
    def name(self) -> str: ...

    @property
    def matches(self) -> Callable[[str], bool]: ...


K = TypeVar("K", bound=Kind)


class Registry(Generic[K]):
    """The kinds of one entry point `group`; plug-ins must be instances of `kind_type`."""

    def __init__(self, group: str, kind_type: type[K]) -> None:
        self.group = group
        self.kind_type = kind_type
        self._builtins: list[K] = []
        self._plugins: list[K] | None = None  # None: not read yet

    def register(self, kind: K) -> K:
        """Add a built-in kind (asked before every plug-in, in registration order); returns it."""
        if any(k.name == kind.name for k in self._builtins):
            raise ValueError(f"{self.group}: a kind named {kind.name!r} is registered already")
        self._builtins.append(kind)
        return kind

    def find(self, spec: str) -> K | None:
        """The first kind that takes `spec` (built-ins, then plug-ins), or None."""
        for kind in self._builtins:
            if kind.matches(spec):
                return kind
        for kind in self.plugins():
            if kind.matches(spec):
                return kind
        return None

    def kinds(self) -> list[K]:
        """Every kind: the built-ins, then the plug-ins."""
        return [*self._builtins, *self.plugins()]

    def plugins(self) -> list[K]:
        """The kinds installed packages declare in this group, loaded once."""
        if self._plugins is None:
            self._plugins = list(self._load_plugins())
        return self._plugins

    def forget_plugins(self) -> None:
        """Read the entry points again on the next lookup (after installing a package, or in a test)."""
        self._plugins = None

    def _load_plugins(self) -> list[K]:
        # Called through the module so that a test can replace entry_points.
        loaded: list[K] = []
        for point in importlib.metadata.entry_points(group=self.group):
            # A broken plug-in is skipped with a warning rather than raised: it would otherwise stop every run
            # that names a chat model, whether or not it asked for the plug-in.
            try:
                kind = point.load()
            except Exception as exc:  # any error of a third-party import
                warnings.warn(
                    f"{self.group} plug-in {point.name!r} ({point.value}) could not be loaded: {exc}",
                    RuntimeWarning,
                    stacklevel=2,
                )
                continue
            if not isinstance(kind, self.kind_type):
                warnings.warn(
                    f"{self.group} plug-in {point.name!r} ({point.value}) is a {type(kind).__name__}, "
                    f"not a {self.kind_type.__name__}: skipped",
                    RuntimeWarning,
                    stacklevel=2,
                )
                continue
            loaded.append(kind)
        return loaded


__all__ = ["Kind", "Registry"]
