"""A loaded protocol (`ProtocolSpec`): the validated definition with the lookups judges need, and the JSON
schema of the answer a judge is asked for. It reads no file: `spec.load_protocol` makes one."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any, Literal

from mheval.protocols.definition import (
    DimensionDef,
    HarmDef,
    LabelDef,
    ProtocolDefinition,
    normalise_name,
    prompt_templates,
)
from mheval.protocols.phrases import PHRASES


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
        lang = language or "en"
        cached = self._schemas.get(lang)
        if cached is None:
            cached = self._schemas[lang] = output_schema(self, lang)
        return cached


def output_schema(spec: ProtocolSpec, lang: str) -> dict[str, Any]:
    """A strict JSON schema (every object closed, every key required) of the expected answer."""
    p = PHRASES[lang if lang in PHRASES else "en"]
    d = spec.definition
    rationale_text = d.output.rationale.get(lang) if d.output.rationale else p["schema_rationale"]
    rationale = {"type": "string", "description": rationale_text}
    quotes = {"type": "array", "items": {"type": "string"}, "description": p["schema_quotes"]}

    def closed(props: dict[str, Any], description: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "object",
            "properties": props,
            "required": list(props),
            "additionalProperties": False,
        }
        if description:
            out["description"] = description
        return out

    if spec.kind == "label":
        props: dict[str, Any] = {}
        if spec.nodes:
            props["nodes"] = closed(
                {n: {"type": "boolean", "description": spec.label_def(n).description.get(lang)} for n in spec.nodes}
            )
        props["label"] = {"type": "string", "enum": list(spec.labels or [])}
        props["rationale"] = rationale
        return closed(props)
    if spec.kind == "binary":
        dims = {
            dim.id: closed(
                {"value": {"type": "integer", "enum": [0, 1]}, "rationale": rationale, "evidence": quotes},
                dim.description.get(lang),
            )
            for dim in d.dimensions or []
        }
        return closed({"dimensions": closed(dims)})
    low, high = spec.scale or (1, 5)
    scores = {
        dim.id: {"type": "integer", "enum": list(range(low, high + 1)), "description": dim.description.get(lang)}
        for dim in d.dimensions or []
    }
    return closed(
        {
            "scores": closed(scores),
            "rationale": rationale,
            "evidence": closed({dim: quotes for dim in spec.dimensions}),
        }
    )
