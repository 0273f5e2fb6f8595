"""Reading a judge's answer: tolerant about form, strict about content.

Judges wrap JSON in fences and prose, use curly or single quotes, leave trailing commas, forget to
escape quotes inside their explanation, or get cut off after the last score. All of that is repaired
here. What is never repaired is content: a missing dimension, an unknown label, a score outside the
scale or a value that is not a number leaves the verdict unscored with a reason
(`parse_failure`, `schema_violation` or `out_of_range`, with a detail), so that a bad output can
never be counted as a low or a high score.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mheval.protocols.definition import normalise_name
from mheval.protocols.lenient_json import PartialString, find_objects
from mheval.records import Reason, reason_text

if TYPE_CHECKING:
    from mheval.protocols.protocol import ProtocolSpec


@dataclass
class Verdict:
    """A parsed answer: its verdict (label or scores, the protocol's total and other aggregates such as
    css/ars), or, when `ok` is False, the `reason` it could not be read and the `detail`.

    `flags` are strings meant for Judgment.flags ("truncated", "missing_evidence"); `missing_evidence`
    names the dimensions that lack a requested quote; `rationales` holds per-dimension explanations and
    `nodes` the decisions of a sequential label protocol (dialogue-safety)."""

    ok: bool
    reason: Reason | None = None
    detail: str | None = None
    label: str | None = None
    scores: dict[str, float] = field(default_factory=dict)
    total: float | None = None
    aggregates: dict[str, float] = field(default_factory=dict)
    rationale: str | None = None
    evidence: dict[str, list[str]] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    missing_evidence: list[str] = field(default_factory=list)
    rationales: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, bool] = field(default_factory=dict)

    @classmethod
    def fail(cls, reason: Reason | str, detail: str | None = None) -> Verdict:
        return cls(ok=False, reason=Reason(reason), detail=detail)

    @property
    def reason_text(self) -> str | None:
        """ "kind: detail", for people to read."""
        return reason_text(self.reason, self.detail)


# Severity order when several problems are found: the most basic one is reported.
_SEVERITY = {"parse_failure": 0, "schema_violation": 1, "out_of_range": 2}


def parse_verdict(spec: ProtocolSpec, text: str | None) -> Verdict:
    """The verdict in a judge's raw output under `spec`, or an unscored Verdict saying why not."""
    if text is None or not text.strip():
        return Verdict.fail("parse_failure", "empty output")
    candidates = find_objects(text)
    if not candidates:
        return Verdict.fail("parse_failure", "no JSON object found")
    good: list[Verdict] = []
    best_fail: tuple[int, Verdict] | None = None
    for obj, truncated in candidates:
        verdict = parse_object(spec, obj)
        if verdict.ok:
            if truncated:
                _flag(verdict, "truncated")
            good.append(verdict)
            continue
        if truncated:
            verdict.detail = f"{verdict.detail or verdict.reason} (the output was cut off)"
        found = _matched_fields(spec, obj)
        if best_fail is None or found > best_fail[0]:
            best_fail = (found, verdict)
    if good:
        distinct = {(v.label, tuple(sorted(v.scores.items()))) for v in good}
        if len(distinct) > 1:
            return Verdict.fail("schema_violation", f"{len(distinct)} different verdicts in one output")
        return good[0]
    assert best_fail is not None
    return best_fail[1]


def _flag(verdict: Verdict, flag: str) -> None:
    flags = verdict.flags
    if flag not in flags:
        flags.append(flag)


def parse_object(spec: ProtocolSpec, obj: dict[str, Any]) -> Verdict:
    """Validate one decoded object against `spec` (used for judge outputs and for few-shot examples)."""
    if spec.kind == "label":
        return _parse_label(spec, obj)
    if spec.kind == "binary":
        return _parse_binary(spec, obj)
    return _parse_likert(spec, obj)


# ---------------------------------------------------------------------------------------------------
# content

_RATIONALE_KEYS = ("rationale", "explanation", "reasoning", "reason", "justification", "理由", "解释")
_CONTAINER_KEYS = frozenset(
    normalise_name(k) for k in ("scores", "dimensions", "ratings", "evaluation", "result", "verdict", "评分", "维度")
)


class _Problems:
    """Everything wrong with one answer; the most basic kind of problem is the reason reported."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []
        self.missing: list[str] = []

    def __bool__(self) -> bool:
        return bool(self.items or self.missing)

    def add(self, reason: str, detail: str) -> None:
        self.items.append((reason, detail))

    def verdict(self) -> Verdict:
        items = list(self.items)
        if self.missing:
            noun = "dimension" if len(self.missing) == 1 else "dimensions"
            items.insert(0, ("schema_violation", f"missing {noun} {', '.join(self.missing)}"))
        reason = min((r for r, _ in items), key=_SEVERITY.__getitem__)
        return Verdict.fail(reason, "; ".join(d for r, d in items if r == reason))


def _keymap(obj: dict[str, Any]) -> dict[str, Any]:
    """The object's keys normalised ('Guidance ' -> 'guidance'), first spelling wins."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        out.setdefault(normalise_name(key), value)
    return out


_ABSENT = object()


def _get(obj: dict[str, Any], *names: str, default: Any = None) -> Any:
    keys = _keymap(obj)
    for name in names:
        if normalise_name(name) in keys:
            return keys[normalise_name(name)]
    return default


def _show(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return repr(value) if isinstance(value, str) else str(value)


def _rationale(obj: dict[str, Any]) -> str | None:
    value = _get(obj, *_RATIONALE_KEYS)
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _dimension_values(spec: ProtocolSpec, obj: dict[str, Any]) -> dict[str, Any]:
    """dimension id -> the raw value the judge gave, looked up in known containers, then at top level."""
    found: dict[str, Any] = {}
    containers: list[dict[str, Any]] = []
    for key, value in _keymap(obj).items():
        if key not in _CONTAINER_KEYS:
            continue
        if isinstance(value, dict):
            containers.append(value)
        elif isinstance(value, list):  # [{"id": "guidance", "score": 4}, ...]
            named = {}
            for item in value:
                name = _get(item, "id", "name", "dimension", "attribute") if isinstance(item, dict) else None
                if isinstance(name, str):
                    named[name] = item
            containers.append(named)
    for source in [*containers, obj]:
        for key, value in source.items():
            dim = spec.match_dimension(key)
            if dim is not None and dim not in found:
                found[dim] = value
    return found


def _quotes(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list):
        return [str(v) for v in value if isinstance(v, str | int | float) and str(v).strip()]
    return []


_INT_RE = re.compile(r"^[+-]?\d+(?:\.0+)?$")
_NUM_RE = re.compile(r"^[+-]?\d+\.\d+$")
_OUT_OF_RE = re.compile(r"^([+-]?\d+)\s*/\s*(\d+)$")


def _likert_value(value: Any, low: int, high: int) -> tuple[int | None, tuple[str, str] | None]:
    if isinstance(value, dict):
        inner = _get(value, "score", "value", "rating", default=_ABSENT)
        if inner is _ABSENT:
            return None, ("schema_violation", "has no score")
        return _likert_value(inner, low, high)
    if isinstance(value, PartialString):
        return None, ("schema_violation", "was cut off")
    if isinstance(value, bool) or value is None:
        return None, ("schema_violation", f"is {json.dumps(value)}, not a number")
    if isinstance(value, int | float):
        if isinstance(value, float) and not value.is_integer():
            return None, ("schema_violation", f"is {value}, not a whole number")
        number = int(value)
    elif isinstance(value, str):
        text = value.strip()
        out_of = _OUT_OF_RE.match(text)
        if out_of and int(out_of.group(2)) == high:
            text = out_of.group(1)
        if _INT_RE.match(text):
            number = int(float(text))
        elif _NUM_RE.match(text):
            return None, ("schema_violation", f"is {text}, not a whole number")
        else:
            return None, ("schema_violation", f"is {value!r}, not a number")
    else:
        return None, ("schema_violation", f"is a {type(value).__name__}, not a number")
    if not low <= number <= high:
        return None, ("out_of_range", f"is {number}, outside {low}-{high}")
    return number, None


def _binary_value(value: Any) -> tuple[int | None, tuple[str, str] | None]:
    if isinstance(value, dict):
        inner = _get(value, "value", "score", "met", "present", default=_ABSENT)
        if inner is _ABSENT:
            return None, ("schema_violation", "has no value")
        return _binary_value(inner)
    if isinstance(value, PartialString):
        return None, ("schema_violation", "was cut off")
    if isinstance(value, bool):
        return int(value), None
    if isinstance(value, int | float):
        if value in (0, 1):
            return int(value), None
        return None, ("out_of_range", f"is {value}, not 0 or 1")
    if isinstance(value, str):
        text = value.strip().casefold()
        if text in ("0", "1", "true", "false"):
            return (1 if text in ("1", "true") else 0), None
        if _INT_RE.match(text) or _NUM_RE.match(text):
            return None, ("out_of_range", f"is {value.strip()}, not 0 or 1")
    return None, ("schema_violation", f"is {_show(value)}, not 0/1/true/false")


def _parse_likert(spec: ProtocolSpec, obj: dict[str, Any]) -> Verdict:
    low, high = spec.scale or (1, 5)
    values = _dimension_values(spec, obj)
    problems = _Problems()
    scores: dict[str, float] = {}
    evidence: dict[str, list[str]] = {}
    for dim in spec.dimensions:
        if dim not in values:
            problems.missing.append(dim)
            continue
        number, problem = _likert_value(values[dim], low, high)
        if problem:
            problems.add(problem[0], f"{dim} {problem[1]}")
        else:
            scores[dim] = float(number)  # type: ignore[arg-type]
        if isinstance(values[dim], dict):
            quotes = _quotes(_get(values[dim], "evidence", "quotes", "quote"))
            if quotes:
                evidence[dim] = quotes
    if problems:
        return problems.verdict()
    ev = _get(obj, "evidence", "quotes", "证据")
    if isinstance(ev, dict):
        for key, value in ev.items():
            matched = spec.match_dimension(key)
            if matched is not None and _quotes(value):
                evidence.setdefault(matched, _quotes(value))
    verdict = Verdict(ok=True, scores=scores, rationale=_rationale(obj), evidence=evidence)
    rule = spec.definition.output.evidence
    if rule is not None:
        missing = [d for d in spec.dimensions if scores[d] >= rule.min_score and not evidence.get(d)]
        if missing:
            verdict.missing_evidence = missing
            _flag(verdict, "missing_evidence")
    return _finish(spec, verdict)


def _parse_binary(spec: ProtocolSpec, obj: dict[str, Any]) -> Verdict:
    values = _dimension_values(spec, obj)
    problems = _Problems()
    scores: dict[str, float] = {}
    evidence: dict[str, list[str]] = {}
    rationales: dict[str, str] = {}
    for dim in spec.dimensions:
        if dim not in values:
            problems.missing.append(dim)
            continue
        number, problem = _binary_value(values[dim])
        if problem:
            problems.add(problem[0], f"{dim} {problem[1]}")
            continue
        scores[dim] = float(number)  # type: ignore[arg-type]
        if isinstance(values[dim], dict):
            why = _rationale(values[dim])
            if why:
                rationales[dim] = why
            quotes = _quotes(_get(values[dim], "evidence", "quotes", "quote", "证据"))
            if quotes:
                evidence[dim] = quotes
    if problems:
        return problems.verdict()
    overall = _rationale(obj)
    lines = [f"{dim}: {rationales[dim]}" for dim in spec.dimensions if dim in rationales]
    rationale = "\n".join(([overall] if overall else []) + lines) or None
    verdict = Verdict(ok=True, scores=scores, rationale=rationale, evidence=evidence)
    if rationales:
        verdict.rationales = rationales
    if spec.definition.output.evidence is not None:
        missing = [d for d in spec.dimensions if scores[d] == 1 and not evidence.get(d)]
        if missing:
            verdict.missing_evidence = missing
            _flag(verdict, "missing_evidence")
    return _finish(spec, verdict)


def _parse_label(spec: ProtocolSpec, obj: dict[str, Any]) -> Verdict:
    raw = _get(obj, "label", "category", "classification", "class", "标签", "类别")
    if raw is None:
        return Verdict.fail("schema_violation", "missing label")
    if isinstance(raw, PartialString):
        return Verdict.fail("schema_violation", "label was cut off")
    if not isinstance(raw, str):
        return Verdict.fail("schema_violation", f"label is {json.dumps(raw, ensure_ascii=False)}, not a text")
    label = spec.match_label(raw)
    if label is None:
        return Verdict.fail("schema_violation", f"unknown label {raw.strip()!r}")
    verdict = Verdict(ok=True, label=label, rationale=_rationale(obj))
    nodes_raw = _get(obj, "nodes", "decisions", "steps", "节点")
    if spec.nodes and isinstance(nodes_raw, dict):
        nodes: dict[str, bool] = {}
        for key, value in nodes_raw.items():
            node = spec.match_label(key)
            if node is None or node not in spec.nodes:
                continue
            number, problem = _binary_value(value)
            if problem:
                return Verdict.fail(problem[0], f"node {node} {problem[1]}")
            nodes[node] = bool(number)
        first_yes = next((n for n in spec.nodes if nodes.get(n)), None)
        fallback = (spec.labels or [])[-1]
        expected = first_yes or fallback
        if label != expected and not (first_yes is None and nodes.get(label) is None and label != fallback):
            return Verdict.fail(
                "schema_violation",
                f"label {label} contradicts the node decisions (they lead to {expected})",
            )
        verdict.nodes = nodes
    return verdict


def _finish(spec: ProtocolSpec, verdict: Verdict) -> Verdict:
    aggregates = spec.aggregate(verdict.scores)
    verdict.total = aggregates.pop("total", None)
    verdict.aggregates = {k: float(v) for k, v in aggregates.items()}
    return verdict


def _matched_fields(spec: ProtocolSpec, obj: dict[str, Any]) -> int:
    """How much of the expected answer an object holds (to report the most relevant failure)."""
    if spec.kind == "label":
        return int(_get(obj, "label", "category", "classification", "class", "标签", "类别") is not None)
    return len(_dimension_values(spec, obj))
