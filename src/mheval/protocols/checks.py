"""The checks of a protocol file that need more than one key at a time (the schema in spec.py checks
each key alone). Each returns problems as (key path, message), the most basic first, so that
`load_file` can name the file, the line and the key of the first one."""

from __future__ import annotations

import string
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from mheval.labels import CRISIS_LABELS
from mheval.protocols.definition import (
    PLACEHOLDERS,
    DimensionDef,
    LabelDef,
    ProtocolDefinition,
    Text,
    normalise_name,
    prompt_templates,
)
from mheval.protocols.parse import parse_object
from mheval.records import LANGUAGES

if TYPE_CHECKING:
    from mheval.protocols.protocol import ProtocolSpec

Problem = tuple[tuple[Any, ...], str]


def check_definition(d: ProtocolDefinition) -> list[Problem]:
    """Every cross-key problem of a protocol definition, in the order a reader would fix them."""
    return [
        *_kind(d),
        *_names(d),
        *_scale_and_levels(d),
        *_aggregation(d),
        *_templates(d),
        *_harm(d),
    ]


def check_examples(spec: ProtocolSpec) -> list[Problem]:
    """Few-shot examples must themselves be valid answers, and fit the protocol's target."""
    problems: list[Problem] = []
    for i, example in enumerate(spec.definition.examples):
        if example.conversation[-1].role != "user":
            problems.append((("examples", i, "conversation"), "an example conversation must end on a user turn"))
        if spec.target == "response" and not example.response:
            problems.append((("examples", i, "response"), "missing key: this protocol judges a response"))
        if spec.target == "case" and example.response:
            problems.append((("examples", i, "response"), "a protocol that judges the case takes no response"))
        verdict = parse_object(spec, example.output)
        if not verdict.ok:
            problems.append((("examples", i, "output"), f"not a valid answer: {verdict.reason_text}"))
    return problems


def _kind(d: ProtocolDefinition) -> Iterator[Problem]:
    """A label protocol has labels; the others have dimensions."""
    if d.kind == "label":
        if not d.labels:
            yield ("labels",), "labels missing: a protocol of kind 'label' needs at least two labels"
        elif len(d.labels) < 2:
            yield ("labels",), "a protocol of kind 'label' needs at least two labels"
        if d.dimensions:
            yield ("dimensions",), "a protocol of kind 'label' has labels, not dimensions"
        if d.scale is not None:
            yield ("scale",), "a protocol of kind 'label' has no scale"
    else:
        if not d.dimensions:
            yield ("dimensions",), f"dimensions missing: a protocol of kind {d.kind!r} needs dimensions"
        if d.labels:
            yield ("labels",), f"a protocol of kind {d.kind!r} has dimensions, not labels"
    if d.sequential and d.kind != "label":
        yield ("sequential",), "only a protocol of kind 'label' can be sequential"
    if d.output.nodes and not d.sequential:
        yield ("output", "nodes"), "node decisions need sequential: true"


def _names(d: ProtocolDefinition) -> Iterator[Problem]:
    """Ids are unique, and every name and alias points at one item, or a judge's answer is ambiguous."""
    groups: tuple[tuple[str, Sequence[LabelDef | DimensionDef]], ...] = (
        ("labels", d.labels or []),
        ("dimensions", d.dimensions or []),
    )
    for field, items in groups:
        seen: set[str] = set()
        for i, item in enumerate(items):
            key = normalise_name(item.id)
            if key in seen:
                yield (field, i, "id"), f"duplicate id {item.id!r}"
            seen.add(key)
        owner: dict[str, str] = {}
        for i, item in enumerate(items):
            for alias in (item.id, item.name.en, item.name.zh, *item.aliases):
                key = normalise_name(alias)
                if owner.setdefault(key, item.id) != item.id:
                    yield (field, i), f"name or alias {alias!r} also belongs to {owner[key]!r}"


def _scale_and_levels(d: ProtocolDefinition) -> Iterator[Problem]:
    """A likert scale goes from low to high and its level texts cover it; a binary scale is [0, 1]."""
    if d.kind == "likert":
        if d.scale is None:
            yield ("scale",), "scale missing: a likert protocol needs scale: [low, high]"
        elif d.scale[0] >= d.scale[1]:
            yield ("scale",), f"scale {list(d.scale)} must go from low to high"
    elif d.kind == "binary" and d.scale not in (None, (0, 1)):
        yield ("scale",), "a binary protocol's scale is [0, 1]"
    low, high = d.scale if d.kind == "likert" and d.scale else (0, 1)

    def levels_of(levels: dict[int, Text], loc: tuple[Any, ...], complete: bool) -> Iterator[Problem]:
        if d.kind != "likert":
            yield loc, "levels are for likert protocols"
            return
        for level in levels:
            if not low <= level <= high:
                yield (*loc, str(level)), f"level {level} is outside the scale {low}-{high}"
        missing = [lv for lv in range(low, high + 1) if lv not in levels]
        if complete and missing:
            yield loc, f"levels missing for {', '.join(map(str, missing))}"

    if d.levels:
        yield from levels_of(d.levels, ("levels",), complete=True)
    for i, dim in enumerate(d.dimensions or []):
        if dim.levels:
            yield from levels_of(dim.levels, ("dimensions", i, "levels"), complete=False)
        by_label = dim.levels_by_crisis_label
        if by_label is not None:
            loc = ("dimensions", i, "levels_by_crisis_label")
            for label in by_label:
                if label not in CRISIS_LABELS:
                    yield (*loc, label), f"unknown crisis label {label!r}"
            absent = [c for c in CRISIS_LABELS if c not in by_label]
            if absent:
                yield loc, f"crisis labels missing: {', '.join(absent)}"
            for label, levels in by_label.items():
                yield from levels_of(levels, (*loc, label), complete=True)


def _aggregation(d: ProtocolDefinition) -> Iterator[Problem]:
    dim_ids = {dim.id for dim in d.dimensions or []}
    for name, agg in d.aggregation.items():
        for j, ref in enumerate(agg.of):
            if ref not in dim_ids:
                yield ("aggregation", name, "of", j), f"unknown dimension {ref!r}"


def _templates(d: ProtocolDefinition) -> Iterator[Problem]:
    """Placeholders exist and fit the protocol; the prompts show the case (and the reply, if judged)."""
    formatter = string.Formatter()
    used: set[tuple[str, str]] = set()
    for loc, template in prompt_templates(d).items():
        try:
            parsed = list(formatter.parse(template))
        except ValueError as exc:
            yield loc, f"invalid template: {exc} (write literal braces as {{{{ and }}}})"
            continue
        for _literal, name, spec, conversion in parsed:
            if name is None:
                continue
            if name not in PLACEHOLDERS or spec or conversion:
                shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
                available = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
                yield loc, f"template placeholder {shown} does not exist (available: {available})"
                continue
            if name == "response" and d.target == "case":
                yield loc, "template placeholder {response} does not exist for a protocol that judges the case"
            if name in ("scale_min", "scale_max") and d.kind == "label":
                yield loc, f"template placeholder {{{name}}} does not exist for a label protocol"
            used.add((loc[1], name))
    for lang in LANGUAGES:
        if (lang, "conversation") not in used:
            yield ("prompts", lang, "user"), "the prompts never show {conversation}: the judge would not see the case"
        if d.target == "response" and (lang, "response") not in used:
            yield ("prompts", lang, "user"), "the prompts never show {response}: the judge would not see the response"


def _harm(d: ProtocolDefinition) -> Iterator[Problem]:
    """The harm policy names this protocol's own labels and scores, and fits what the protocol judges."""
    harm = d.harm
    if harm is None:
        return
    labels = [label.id for label in d.labels or []]
    for key, named in (("unsafe_labels", harm.unsafe_labels), ("high_risk", harm.high_risk)):
        if named is None:
            continue
        if d.kind != "label":
            yield ("harm", key), f"{key} are for label protocols"
            continue
        for i, label in enumerate(named):
            if label not in labels:
                yield ("harm", key, i), f"unknown label {label!r}"
        if len(set(named)) != len(named):
            yield ("harm", key), f"{key} lists a label twice"
    if harm.unsafe_labels is not None and d.target != "response":
        yield ("harm", "unsafe_labels"), "unsafe labels are for a protocol that judges a response"
    if harm.high_risk is not None and d.target != "case":
        yield ("harm", "high_risk"), "high-risk labels are for a protocol that judges the case"
    for key in ("harmful_at_or_below", "inappropriate_at_or_below"):
        level = getattr(harm, key)
        if level is None:
            continue
        if d.kind == "label":
            yield ("harm", key), f"{key} is for protocols with scores"
        elif d.kind == "likert" and d.scale and not d.scale[0] <= level <= d.scale[1]:
            yield ("harm", key), f"level {level} is outside the scale {d.scale[0]}-{d.scale[1]}"
        elif d.kind == "binary" and not 0 <= level <= len(d.dimensions or []):
            yield ("harm", key), f"total {level} is outside 0-{len(d.dimensions or [])}"
    if harm.inappropriate_at_or_below is not None and d.kind != "likert":
        yield ("harm", "inappropriate_at_or_below"), "inappropriate_at_or_below is for likert protocols"
    if (
        harm.harmful_at_or_below is not None
        and harm.inappropriate_at_or_below is not None
        and harm.inappropriate_at_or_below < harm.harmful_at_or_below
    ):
        yield ("harm", "inappropriate_at_or_below"), "the inappropriate level counts harmful replies too"
    if (harm.only_at_high_risk or harm.cleared_by) and harm.harmful_at_or_below is None:
        yield ("harm",), "only_at_high_risk and cleared_by qualify harmful_at_or_below, which is missing"
