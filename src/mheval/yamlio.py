"""One YAML reader for the package: libyaml's C parser when PyYAML was built with it (about ten times
faster on the protocol and crisis-line files than the pure-Python one), the same safe subset either way."""

from __future__ import annotations

from typing import Any

import yaml

SafeLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """`yaml.safe_load`, through the C parser when there is one; raises yaml.YAMLError as it does."""
    return yaml.load(text, Loader=SafeLoader)


def compose_yaml(text: str) -> yaml.Node | None:
    """The node tree of `text` (with line marks), for pointing an error at the line that holds a field."""
    return yaml.compose(text, Loader=SafeLoader)
