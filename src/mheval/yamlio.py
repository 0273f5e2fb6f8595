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


# What a user's YAML file (a scenario, an app file, a protocol) may expand to. Aliases make a few lines stand for
# an exponential tree (a "billion laughs"): PyYAML builds it with shared objects, cheaply, and the first code that
# walks it (json.dumps, pydantic) runs out of time and memory. Counted on the node graph before anything is built.
MAX_EXPANDED_NODES = 200_000
MAX_DEPTH = 100


class YamlTooLarge(yaml.YAMLError):
    def __init__(self, problem: str, mark: yaml.Mark | None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


def _check_size(root: yaml.Node) -> None:
    """Refuse a document whose nodes, aliases expanded, exceed MAX_EXPANDED_NODES or nest deeper than MAX_DEPTH.
    Each node's expanded size is computed once (aliases are the same node object), so this is linear in the
    file, whatever it expands to."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node, depth: int) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        if depth > MAX_DEPTH:
            raise YamlTooLarge(f"nested deeper than {MAX_DEPTH} levels", node.start_mark)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k, depth + 1) + size(v, depth + 1) for k, v in node.value)
        if total > MAX_EXPANDED_NODES:
            raise YamlTooLarge(
                f"the document expands to more than {MAX_EXPANDED_NODES:,} values (aliases nested in aliases?)",
                node.start_mark,
            )
        sizes[id(node)] = total
        return total

    size(root, 0)


def load_guarded_yaml(text: str) -> Any:
    """`load_yaml` for a user's file: the same safe subset, refusing (YAMLError) a document that expands past
    MAX_EXPANDED_NODES or nests past MAX_DEPTH, before any object is built."""
    loader = SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_size(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def read_yaml_file(path: Path, what: str) -> tuple[str, Any]:
    """(text, parsed data) of a YAML file, through the guarded loader; unreadable, invalid or oversized YAML is an
    InputError naming the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} not found", path=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the {what}: {exc}", path=path) from None
    try:
        return text, load_guarded_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(
            f"invalid YAML: {problem}", path=path, line=mark.line + 1 if mark is not None else None
        ) from None
