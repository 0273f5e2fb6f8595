"""One YAML reader for the package: libyaml's C parser when PyYAML was built with it (about ten times
faster on the protocol and crisis-line files than the pure-Python one), the same safe subset either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from mheval.errors import InputError

SafeLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """`yaml.safe_load`, through the C parser when there is one; raises yaml.YAMLError as it does."""
    return yaml.load(text, Loader=SafeLoader)


def compose_yaml(text: str) -> yaml.Node | None:
    """The node tree of `text` (with line marks), for pointing an error at the line that holds a field."""
    return yaml.compose(text, Loader=SafeLoader)


def read_yaml_file(path: Path, what: str) -> tuple[str, Any]:
    """(text, parsed data) of a YAML file; unreadable or invalid YAML is an InputError naming the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the {what}: {exc}", path=path) from None
    try:
        return text, load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(
            f"invalid YAML: {problem}", path=path, line=mark.line + 1 if mark is not None else None
        ) from None
