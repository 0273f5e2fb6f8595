"""The protocol file's schema (a rubric as data): the validated models of one YAML file, and the name
matching every reader of a judge's answer shares. Nothing here loads a file or renders a prompt."""

from __future__ import annotations

import functools
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mheval.records import LANGUAGES

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


_NAME_SEP_RE = re.compile(r"[\s_\-]+")


@functools.lru_cache(maxsize=8192)
def normalise_name(text: str) -> str:
    """Case-, space-, hyphen- and underscore-insensitive form used to match labels and keys."""
    return _NAME_SEP_RE.sub("_", str(text).strip().strip("\"'`“”‘’「」.。").casefold()).strip("_")


def prompt_templates(definition: ProtocolDefinition) -> dict[tuple[str, ...], str]:
    """Every prompt template by its key path."""
    out: dict[tuple[str, ...], str] = {}
    for lang in LANGUAGES:
        pair: PromptPair = getattr(definition.prompts, lang)
        out[("prompts", lang, "system")] = pair.system
        out[("prompts", lang, "user")] = pair.user
    return out
