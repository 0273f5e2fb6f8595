"""Loading protocol files: a built-in protocol by id or any file by path, validated up front.

A protocol is one YAML file: what it judges, its labels or dimensions with texts in `en` and `zh`,
the judge prompt templates, which output fields it asks for and how scores aggregate. Loading
validates everything up front so that a broken file fails at startup, naming the file, the key path
and the reason, instead of failing on the thousandth judge call. The schema lives in `definition`,
the loaded protocol in `protocol`; their names are also importable from here.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from mheval.errors import InputError
from mheval.labels import APPROPRIATENESS, CRISIS_TRIAGE, DIALOGUE_SAFETY, MENTALALIGN, PSYCRISIS
from mheval.protocols.checks import check_definition, check_examples
from mheval.protocols.definition import (
    PLACEHOLDERS,
    AggregateDef,
    DimensionDef,
    EvidenceDef,
    Example,
    ExampleTurn,
    HarmDef,
    LabelDef,
    OutputDef,
    Paper,
    PromptPair,
    Prompts,
    ProtocolDefinition,
    Text,
    normalise_name,
    prompt_templates,
)
from mheval.protocols.protocol import ProtocolSpec
from mheval.yamlio import compose_yaml, read_yaml_file

__all__ = [
    "BUILTIN_ORDER",
    "DEFS_DIR",
    "PLACEHOLDERS",
    "AggregateDef",
    "DimensionDef",
    "EvidenceDef",
    "Example",
    "ExampleTurn",
    "HarmDef",
    "LabelDef",
    "OutputDef",
    "Paper",
    "PromptPair",
    "Prompts",
    "ProtocolDefinition",
    "ProtocolSpec",
    "Text",
    "builtin_ids",
    "list_protocols",
    "load_file",
    "load_protocol",
    "normalise_name",
    "prompt_templates",
]

DEFS_DIR = Path(__file__).resolve().parent / "defs"

# The order of the built-in protocols in listings and reports (the order of the design table).
BUILTIN_ORDER: tuple[str, ...] = (CRISIS_TRIAGE, APPROPRIATENESS, PSYCRISIS, MENTALALIGN, DIALOGUE_SAFETY)


# ---------------------------------------------------------------------------------------------------
# loading


def load_protocol(id_or_path: str | Path) -> ProtocolSpec:
    """A built-in protocol by id, or any protocol file by path. Cached; a changed file is reloaded."""
    text = str(id_or_path)
    builtin = DEFS_DIR / f"{text}.yaml"
    if "/" not in text and "\\" not in text and not text.endswith((".yaml", ".yml")):
        if not builtin.is_file():
            raise InputError(f"unknown protocol {text!r}", choices=builtin_ids())
        path = builtin
    else:
        path = Path(text).expanduser()
        if not path.is_file():
            raise InputError("protocol file not found", path=path)
    path = path.resolve()
    return _load_cached(path, path.stat().st_mtime_ns)


def builtin_ids() -> list[str]:
    found = {p.stem for p in DEFS_DIR.glob("*.yaml")}
    ordered = [i for i in BUILTIN_ORDER if i in found]
    return ordered + sorted(found - set(ordered))


def list_protocols() -> list[ProtocolSpec]:
    return [load_protocol(i) for i in builtin_ids()]


@functools.lru_cache(maxsize=64)
def _load_cached(path: Path, mtime_ns: int) -> ProtocolSpec:
    del mtime_ns  # part of the cache key only
    return load_file(path)


def load_file(path: Path) -> ProtocolSpec:
    """Read, validate and check one protocol file; every problem becomes an InputError."""
    text, raw = read_yaml_file(path, "protocol file")
    root = compose_yaml(text)
    if not isinstance(raw, dict):
        raise InputError("a protocol file must be a YAML mapping", path=path)
    try:
        definition = ProtocolDefinition.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        where = _format_loc(first["loc"])
        message = _pydantic_message(first)
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
        raise InputError(message, path=path, field=where or None, line=_line_of(root, first["loc"])) from exc
    problems = check_definition(definition)
    if path.parent == DEFS_DIR and definition.id != path.stem:
        problems.insert(0, (("id",), f"id {definition.id!r} differs from the file name {path.stem!r}"))
    spec = ProtocolSpec(definition, path)
    if not problems:
        problems = check_examples(spec)
    if problems:
        loc, message = problems[0]
        if len(problems) > 1:
            message += f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''})"
        raise InputError(message, path=path, field=_format_loc(loc), line=_line_of(root, loc))
    return spec


def _pydantic_message(error: Mapping[str, Any]) -> str:
    kind = error.get("type", "")
    if kind == "missing":
        return "missing key"
    if kind == "extra_forbidden":
        return "unknown key"
    message = str(error.get("msg", "invalid value"))
    value = error.get("input")
    if isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= 60):
        message += f" (got {value!r})"
    return message


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _line_of(root: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the deepest YAML node along `loc` (best effort, for the error message)."""
    node = root
    line = None
    for part in loc:
        child = None
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if str(key.value) == str(part):
                    child = value
                    line = key.start_mark.line + 1
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
            line = child.start_mark.line + 1
        if child is None:
            break
        node = child
    return line
