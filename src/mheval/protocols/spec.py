"""The protocol file schema (a rubric as data) and its loader.

A protocol is one YAML file: what it judges, its labels or dimensions with texts in `en` and `zh`,
the judge prompt templates, which output fields it asks for and how scores aggregate. Loading
validates everything up front so that a broken file fails at startup, naming the file, the key path
and the reason, instead of failing on the thousandth judge call.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mheval.errors import InputError
from mheval.labels import APPROPRIATENESS, CRISIS_TRIAGE, DIALOGUE_SAFETY, MENTALALIGN, PSYCRISIS
from mheval.records import LANGUAGES
from mheval.yamlio import compose_yaml, read_yaml_file

DEFS_DIR = Path(__file__).resolve().parent / "defs"

# The order of the built-in protocols in listings and reports (the order of the design table).
BUILTIN_ORDER: tuple[str, ...] = (CRISIS_TRIAGE, APPROPRIATENESS, PSYCRISIS, MENTALALIGN, DIALOGUE_SAFETY)

# Placeholders a prompt template may use; render.py fills each one.
PLACEHOLDERS: tuple[str, ...] = (
    "conversation",
    "response",
    "criteria",
    "crisis_label",
    "output_format",
    "data_rules",
    "examples",
    "title",
    "scale_min",
    "scale_max",
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Text(_Model):
    """One text in both languages."""

    en: str = Field(min_length=1)
    zh: str = Field(min_length=1)

    def get(self, language: str) -> str:
        return self.zh if language == "zh" else self.en


class Paper(_Model):
    citation: str = Field(min_length=1)
    arxiv: str | None = None


class LabelDef(_Model):
    id: str = Field(min_length=1)
    name: Text
    description: Text
    # Other spellings a judge may answer with (matched after normalising case, spaces and hyphens).
    aliases: list[str] = Field(default_factory=list)


class DimensionDef(_Model):
    id: str = Field(min_length=1, pattern=r"^[a-z][a-z0-9_]*$")
    name: Text
    description: Text
    aliases: list[str] = Field(default_factory=list)
    # Level descriptions for this dimension (likert), keyed by scale point; any subset of the scale.
    levels: dict[int, Text] | None = None
    # Level descriptions that depend on the case's crisis label: {crisis_label: {level: text}}.
    levels_by_crisis_label: dict[str, dict[int, Text]] | None = None


class PromptPair(_Model):
    system: str = Field(min_length=1)
    user: str = Field(min_length=1)


class Prompts(_Model):
    en: PromptPair
    zh: PromptPair


class EvidenceDef(_Model):
    """Ask for exact quotes from the response: for binary dimensions scored 1, for likert scores >= min_score."""

    min_score: int = 4


class OutputDef(_Model):
    rationale: Text | None = None
    evidence: EvidenceDef | None = None
    # For sequential label protocols: also ask for the yes/no decision at every node.
    nodes: bool = False


class AggregateDef(_Model):
    op: Literal["sum", "mean", "min", "max"]
    of: list[str] = Field(min_length=1)


class ExampleTurn(_Model):
    role: Literal["user", "assistant"]
    content: str = Field(min_length=1)


class Example(_Model):
    language: Literal["en", "zh"]
    conversation: list[ExampleTurn] = Field(min_length=1)
    response: str | None = None
    output: dict[str, Any]


class HarmDef(_Model):
    """What the verdict (`mheval.verdict`, docs/verdict.md) reads from this protocol: the harm policy as data.

    It says how the protocol's scores are read, not what the judge is asked, so it is left out of the
    protocol's digest: editing it never makes a run judge again."""

    # A score (a likert protocol's total, a binary protocol's number of dimensions met) at or below this is
    # unsafe.
    harmful_at_or_below: int | None = None
    # A likert score at or below this counts in the rate of inappropriate replies (harmful included): a
    # quality figure, not the verdict.
    inappropriate_at_or_below: int | None = None
    # Labels that make a reply unsafe (a label protocol that judges a response).
    unsafe_labels: list[str] | None = None
    # The high-risk labels, most severe first (the triage protocol).
    high_risk: list[str] | None = None
    # The harmful score counts only for a person at high risk (the triage protocol's `high_risk`).
    only_at_high_risk: bool = False
    # Protocol id -> a score at or above which, by the same judge on the same reply, the harmful score is
    # cleared.
    cleared_by: dict[str, int] = Field(default_factory=dict)


class ProtocolDefinition(_Model):
    """The YAML file, as validated data."""

    id: str = Field(min_length=1, pattern=r"^[a-z][a-z0-9-]*$")
    version: int = 1
    title: str = Field(min_length=1)
    description: Text | None = None
    paper: Paper
    target: Literal["case", "response"]
    kind: Literal["label", "binary", "likert"]
    labels: list[LabelDef] | None = None
    # Labels are decided in the listed order: the first that applies wins, the last is the fallback.
    sequential: bool = False
    dimensions: list[DimensionDef] | None = None
    scale: tuple[int, int] | None = None
    levels: dict[int, Text] | None = None
    prompts: Prompts
    output: OutputDef = Field(default_factory=OutputDef)
    aggregation: dict[str, AggregateDef] = Field(default_factory=dict)
    examples: list[Example] = Field(default_factory=list)
    harm: HarmDef | None = None


class ProtocolSpec:
    """A loaded protocol. `definition` holds every text; the properties are what callers usually need."""

    def __init__(self, definition: ProtocolDefinition, path: Path) -> None:
        self.definition = definition
        self.path = path
        self._schemas: dict[str, dict[str, Any]] = {}
        self._label_lookup: dict[str, str] = {}
        for label in definition.labels or []:
            for alias in (label.id, label.name.en, label.name.zh, *label.aliases):
                self._label_lookup.setdefault(normalise_name(alias), label.id)
        self._dimension_lookup: dict[str, str] = {}
        for dim in definition.dimensions or []:
            for alias in (dim.id, dim.name.en, dim.name.zh, *dim.aliases):
                self._dimension_lookup.setdefault(normalise_name(alias), dim.id)

    @functools.cached_property
    def digest(self) -> str:
        """A hash of everything the file defines (not its comments or layout) but its harm policy: a unit
        judged under an edited rubric or prompt is judged again on resume; an edited `harm:` changes how
        the judgments are read, not what they are."""
        payload = self.definition.model_dump_json(exclude={"harm"}).encode("utf-8")
        return hashlib.sha256(payload).hexdigest()[:16]

    def __repr__(self) -> str:
        return f"ProtocolSpec(id={self.id!r}, kind={self.kind!r}, target={self.target!r})"

    @property
    def id(self) -> str:
        return self.definition.id

    @property
    def title(self) -> str:
        return self.definition.title

    @property
    def paper(self) -> str:
        """The citation as one line, with its arXiv id when there is one."""
        paper = self.definition.paper
        return paper.citation + (f", arXiv:{paper.arxiv}" if paper.arxiv else "")

    @property
    def arxiv(self) -> str | None:
        return self.definition.paper.arxiv

    @property
    def target(self) -> Literal["case", "response"]:
        return self.definition.target

    @property
    def kind(self) -> Literal["label", "binary", "likert"]:
        return self.definition.kind

    @property
    def labels(self) -> list[str] | None:
        if self.definition.labels is None:
            return None
        return [label.id for label in self.definition.labels]

    @property
    def dimensions(self) -> list[str]:
        return [dim.id for dim in self.definition.dimensions or []]

    @property
    def scale(self) -> tuple[int, int] | None:
        if self.kind == "binary":
            return (0, 1)
        return self.definition.scale

    @property
    def sequential(self) -> bool:
        return self.definition.sequential

    @property
    def nodes(self) -> list[str]:
        """The yes/no decision points of a sequential label protocol (every label but the fallback)."""
        labels = self.labels or []
        return labels[:-1] if self.sequential and self.definition.output.nodes else []

    @property
    def needs_crisis_label(self) -> bool:
        """True when rendering needs the case's crisis label (category-specific rubric rows)."""
        if any(d.levels_by_crisis_label for d in self.definition.dimensions or []):
            return True
        return any("{crisis_label" in t for t in prompt_templates(self.definition).values())

    @property
    def harm(self) -> HarmDef:
        """The protocol's harm policy (empty when the file declares none)."""
        return self.definition.harm or HarmDef()

    @property
    def aggregates(self) -> list[str]:
        return list(self.definition.aggregation)

    def label_def(self, label_id: str) -> LabelDef:
        for label in self.definition.labels or []:
            if label.id == label_id:
                return label
        raise KeyError(label_id)

    def dimension_def(self, dim_id: str) -> DimensionDef:
        for dim in self.definition.dimensions or []:
            if dim.id == dim_id:
                return dim
        raise KeyError(dim_id)

    def match_label(self, text: str) -> str | None:
        """The label id a judge meant by `text` (id, English or Chinese name, alias), or None."""
        return self._label_lookup.get(normalise_name(text))

    def match_dimension(self, key: str) -> str | None:
        return self._dimension_lookup.get(normalise_name(key))

    def aggregate(self, scores: dict[str, float]) -> dict[str, float]:
        """Aggregates such as {"total": 3} or {"css": .., "ars": ..}; a group missing any input is left out."""
        out: dict[str, float] = {}
        for name, agg in self.definition.aggregation.items():
            if not all(d in scores and scores[d] is not None for d in agg.of):
                continue
            values = [float(scores[d]) for d in agg.of]
            if agg.op == "sum":
                out[name] = sum(values)
            elif agg.op == "mean":
                out[name] = sum(values) / len(values)
            elif agg.op == "min":
                out[name] = min(values)
            else:
                out[name] = max(values)
        return out

    def output_schema(self, language: str | None = None) -> dict[str, Any]:
        """JSON schema of the judge's answer, usable as an OpenAI-style strict `json_schema`.

        Built once per language and then the same object every time (do not mutate it): the client
        and the call cache remember its JSON by identity, so judge calls skip serialising it."""
        from mheval.protocols.render import output_schema

        lang = language or "en"
        cached = self._schemas.get(lang)
        if cached is None:
            cached = self._schemas[lang] = output_schema(self, lang)
        return cached


_NAME_SEP_RE = re.compile(r"[\s_\-]+")


@functools.lru_cache(maxsize=8192)
def normalise_name(text: str) -> str:
    """Case-, space-, hyphen- and underscore-insensitive form used to match labels and keys."""
    return _NAME_SEP_RE.sub("_", str(text).strip().strip("\"'`“”‘’「」.。").casefold()).strip("_")


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
    from mheval.protocols.checks import check_definition, check_examples

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


def prompt_templates(definition: ProtocolDefinition) -> dict[tuple[str, ...], str]:
    """Every prompt template by its key path."""
    out: dict[tuple[str, ...], str] = {}
    for lang in LANGUAGES:
        pair: PromptPair = getattr(definition.prompts, lang)
        out[("prompts", lang, "system")] = pair.system
        out[("prompts", lang, "user")] = pair.user
    return out
