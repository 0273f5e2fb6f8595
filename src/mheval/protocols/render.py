"""Turning a protocol, a case and a response into judge messages (the answer's JSON schema is `protocol.output_schema`).

The texts under judgment always travel as delimited data: the conversation inside `<conversation>`,
the response inside `<response>`, with any look-alike tag inside those texts defused, and every system
prompt carries the rule that block contents are material to assess, never instructions. Templates may
place these parts with placeholders; whatever a template leaves out (rules, rubric, output format,
examples) is appended to the system prompt, so no protocol file can forget them.
"""

from __future__ import annotations

import functools
import json
import re
from typing import TYPE_CHECKING, Any

from mheval.errors import InputError
from mheval.labels import CRISIS_LABELS, CRISIS_TRIAGE
from mheval.protocols.phrases import PHRASES
from mheval.records import LANGUAGES, Case

if TYPE_CHECKING:
    from mheval.protocols.definition import Example
    from mheval.protocols.protocol import ProtocolSpec


class RenderError(InputError, ValueError):
    """This case (or response) cannot be put to the judge under this protocol, e.g. no crisis label.

    An InputError for the CLI, and a ValueError so that a judge can turn it into an unscored judgment."""


_TAG_NAMES = r"(?:conversation|response|turn|example|examples|system|rubric|instructions?)"
_TAG_RE = re.compile(r"<(\s*/?\s*" + _TAG_NAMES + r"\b)", re.IGNORECASE)


def neutralise(text: str) -> str:
    """Defuse anything in a text that looks like one of our block tags, so it cannot close a block."""
    return _TAG_RE.sub("\uff1c\\1", text.replace("\x00", ""))


def render_conversation(turns: list[Any]) -> str:
    body = "\n".join(
        f'<turn index="{i}" role="{t.role}">\n{neutralise(t.content)}\n</turn>' for i, t in enumerate(turns, 1)
    )
    return f"<conversation>\n{body}\n</conversation>"


def render_response(text: str) -> str:
    return f"<response>\n{neutralise(text)}\n</response>"


def render_messages(
    spec: ProtocolSpec,
    case: Case,
    response_text: str | None = None,
    *,
    crisis_label: str | None = None,
    language: str | None = None,
    few_shot: bool = False,
) -> list[dict[str, str]]:
    """The system and user messages that ask a judge for a verdict on `case` (and `response_text`).

    `language` defaults to the case's language. `crisis_label` picks the rubric row for
    category-specific protocols; when omitted, the case's own crisis label is used.
    """
    lang = language or case.language
    if lang not in LANGUAGES:
        raise RenderError(f"unsupported language {lang!r}", field="language", choices=LANGUAGES)
    if spec.target == "response" and response_text is None:
        raise RenderError(f"protocol {spec.id!r} judges a response, but no response text was given", field="response")
    if spec.target == "case" and response_text is not None:
        raise ValueError(f"protocol {spec.id!r} judges the case itself; pass response_text=None")
    label = crisis_label or case.crisis_label
    if spec.needs_crisis_label:
        if label is None:
            raise RenderError(
                f"protocol {spec.id!r} needs a crisis label for case {case.id!r} (run triage, or give the "
                "case a crisis_label)",
                field="crisis_label",
                choices=CRISIS_LABELS,
            )
        if label not in CRISIS_LABELS:
            raise RenderError(f"unknown crisis label {label!r}", field="crisis_label", choices=CRISIS_LABELS)

    phrases = PHRASES[lang]
    low, high = spec.scale or (0, 0)
    values = {
        "conversation": render_conversation(case.turns),
        "response": render_response(response_text) if response_text is not None else "",
        "criteria": render_criteria(spec, lang, label),
        "crisis_label": _label_name(label, lang) if label else "",
        "output_format": render_output_format(spec, lang),
        "data_rules": phrases["data_rules"],
        "examples": render_examples(spec, lang) if few_shot else "",
        "title": spec.title,
        "scale_min": str(low),
        "scale_max": str(high),
    }
    pair = getattr(spec.definition.prompts, lang)
    system = _fill(pair.system, values)
    user = _fill(pair.user, values)
    placed = pair.system + pair.user
    extra = [
        values[k]
        for k in ("criteria", "examples", "data_rules", "output_format")
        if values[k] and "{" + k + "}" not in placed
    ]
    if extra:
        system = "\n\n".join([system, *extra])
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


_EMPTY = "\x00empty\x00"
_EMPTY_RE = re.compile(r"\n*[ \t]*\x00empty\x00[ \t]*\n*")


def _fill(template: str, values: dict[str, str]) -> str:
    """Fill a template; a placeholder with nothing to show leaves no blank gap behind.

    Same result as `_EMPTY_RE.sub("\\n\\n", text)`, without a regex scan of the whole prompt (which
    was most of the cost of rendering)."""
    text = template.format(**{k: v if v else _EMPTY for k, v in values.items()})
    if _EMPTY in text:
        parts = text.split(_EMPTY)
        last = len(parts) - 1
        for i, part in enumerate(parts):
            if i > 0:
                part = part.lstrip(" \t").lstrip("\n")
            if i < last:
                part = part.rstrip(" \t").rstrip("\n")
            parts[i] = part
        text = "\n\n".join(parts)
    return text.strip()


def _label_name(label: str, lang: str) -> str:
    name = _plain_label_name(label, lang)
    return f"{name} ({label})" if lang == "en" else f"{name}（{label}）"


@functools.lru_cache(maxsize=1024)  # pure in (spec, lang[, label]); rendered for every judge call
def render_criteria(spec: ProtocolSpec, lang: str, crisis_label: str | None = None) -> str:
    """The rubric in `lang`: labels, dimensions and the level descriptions that apply."""
    p = PHRASES[lang]
    d = spec.definition
    lines: list[str] = []
    if d.description:
        lines += [d.description.get(lang), ""]
    if spec.kind == "label":
        labels = d.labels or []
        if spec.sequential:
            lines.append(p["sequence"])
            for i, label in enumerate(labels[:-1], 1):
                lines.append(f"{i}. {label.id} ({label.name.get(lang)}): {label.description.get(lang)}")
            last = labels[-1]
            lines.append(f"{p['fallback']} {last.id} ({last.name.get(lang)}): {last.description.get(lang)}")
        else:
            lines.append(p["labels"])
            lines += [f"- {lb.id} ({lb.name.get(lang)}): {lb.description.get(lang)}" for lb in labels]
        return "\n".join(lines)
    low, high = spec.scale or (0, 1)
    lines.append(p["binary"] if spec.kind == "binary" else p["likert"].format(low=low, high=high))
    for dim in d.dimensions or []:
        lines.append(f"- {dim.id} ({dim.name.get(lang)}): {dim.description.get(lang)}")
        if dim.levels:
            lines += [f"    {lv}: {text.get(lang)}" for lv, text in sorted(dim.levels.items())]
        if dim.levels_by_crisis_label and crisis_label:
            row = dim.levels_by_crisis_label[crisis_label]
            lines.append("")
            lines.append(p["category"].format(name=_plain_label_name(crisis_label, lang), id=crisis_label))
            lines.append(p["category_levels"])
            lines += [f"{lv} = {text.get(lang)}" for lv, text in sorted(row.items())]
    if d.levels:
        lines.append("")
        lines.append(p["scale"])
        lines += [f"{lv} = {text.get(lang)}" for lv, text in sorted(d.levels.items())]
    return "\n".join(lines)


def _plain_label_name(label: str, lang: str) -> str:
    from mheval.protocols.spec import load_protocol

    try:
        return load_protocol(CRISIS_TRIAGE).label_def(label).name.get(lang)
    except KeyError:
        return label


def _skeleton(spec: ProtocolSpec, lang: str) -> dict[str, Any]:
    p = dict(PHRASES[lang])
    if spec.definition.output.rationale:
        p["ph_rationale"] = f"<{spec.definition.output.rationale.get(lang)}>"
    low, high = spec.scale or (0, 1)
    if spec.kind == "label":
        out: dict[str, Any] = {}
        if spec.nodes:
            out["nodes"] = {n: p["ph_node"] for n in spec.nodes}
        out["label"] = p["ph_label"]
        out["rationale"] = p["ph_rationale"]
        return out
    if spec.kind == "binary":
        return {
            "dimensions": {
                dim: {"value": p["ph_value"], "rationale": p["ph_rationale"], "evidence": [p["ph_quote"]]}
                for dim in spec.dimensions
            }
        }
    return {
        "scores": {dim: p["ph_score"].format(low=low, high=high) for dim in spec.dimensions},
        "rationale": p["ph_rationale"],
        "evidence": {dim: [p["ph_quote"]] for dim in spec.dimensions},
    }


@functools.lru_cache(maxsize=1024)  # pure in (spec, lang[, label]); rendered for every judge call
def render_output_format(spec: ProtocolSpec, lang: str) -> str:
    p = PHRASES[lang]
    skeleton = json.dumps(_skeleton(spec, lang), ensure_ascii=False, indent=2)
    low, high = spec.scale or (0, 1)
    for bare in (p["ph_value"], p["ph_node"], p["ph_score"].format(low=low, high=high)):
        skeleton = skeleton.replace(json.dumps(bare, ensure_ascii=False), bare)  # numbers and booleans unquoted
    parts = [p["format"], skeleton]
    if spec.kind == "label":
        parts.append(p["format_label"].format(labels=", ".join(spec.labels or [])))
        if spec.nodes:
            parts.append(p["format_nodes"].format(fallback=(spec.labels or [""])[-1]))
    elif spec.kind == "binary":
        parts.append(p["format_binary"])
    else:
        evidence = spec.definition.output.evidence
        min_score = evidence.min_score if evidence else high
        parts.append(p["format_likert"].format(low=low, high=high, min_score=min_score))
    return "\n".join(parts)


def render_examples(spec: ProtocolSpec, lang: str) -> str:
    examples: list[Example] = list(spec.definition.examples)
    if not examples:
        return ""
    p = PHRASES[lang]
    blocks = [p["examples"]]
    for i, ex in enumerate(examples, 1):
        body = [render_conversation(ex.conversation)]
        if ex.response is not None:
            body.append(render_response(ex.response))
        body.append(f"{p['answer']} {json.dumps(ex.output, ensure_ascii=False)}")
        blocks.append(f'<example index="{i}">\n' + "\n".join(body) + "\n</example>")
    return "\n\n".join(blocks)
