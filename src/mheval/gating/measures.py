"""What `--min` names and reads: a protocol's score, or one of its dimensions or aggregates, per reply.

`parse_min` reads `PROTOCOL[.DIMENSION]=VALUE`, `parse_measure` checks the name against the protocol files,
`check_inputs` every argument of the gate; `scored_values` is one number per scored reply of a judge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from mheval.errors import InputError

ON = ("upper", "point")
"""Which side of an interval the gate decides on: its conservative bound, or the point estimate."""


@dataclass(frozen=True)
class Measure:
    """A `--min` measure: a protocol's score, or one of its dimensions or aggregates, and its range."""

    protocol: str
    dimension: str | None  # None: the protocol's single number (its total, or its only dimension)
    lowest: float
    highest: float

    @property
    def name(self) -> str:
        return self.protocol + (f".{self.dimension}" if self.dimension else "")

    def value(self, scores: dict[str, float], total: float | None) -> float | None:
        from mheval.reporting.rundata import protocol_aggregate

        if self.dimension is None or self.dimension == "total":
            if total is not None:
                return float(total)
            agg = protocol_aggregate(self.protocol, scores)
            if "total" in agg:
                return float(agg["total"])
            return float(scores[self.protocol]) if self.protocol in scores else None
        if self.dimension in scores and scores[self.dimension] is not None:
            return float(scores[self.dimension])
        return protocol_aggregate(self.protocol, scores).get(self.dimension)


def parse_measure(name: str) -> Measure:
    """`PROTOCOL[.DIMENSION]` -> Measure, or InputError naming the field and the valid choices."""
    from mheval.protocols.spec import list_protocols

    specs = {s.id: s for s in list_protocols()}
    scored = [i for i, s in specs.items() if s.kind != "label"]
    protocol, _, dimension = name.strip().partition(".")
    spec = specs.get(protocol)
    if spec is None:
        raise InputError(f"unknown protocol {protocol!r}", field="min", choices=scored)
    if spec.kind == "label":
        raise InputError(
            f"{protocol} gives labels, not scores: its harm counts in --max-unsafe", field="min", choices=scored
        )
    lo, hi = spec.scale or (0, 1)
    aggregation = spec.definition.aggregation
    choices = [*spec.dimensions, *[a for a in spec.aggregates if a not in spec.dimensions]]
    if not dimension:
        if "total" in aggregation:
            dimension = "total"
        elif len(spec.dimensions) == 1:
            return Measure(protocol, None, lo, hi)
        else:
            raise InputError(
                f"{protocol} has several scores: name one as {protocol}.DIMENSION", field="min", choices=choices
            )
    if dimension in spec.dimensions:
        return Measure(protocol, dimension, lo, hi)
    if dimension in aggregation:
        agg = aggregation[dimension]
        width = len(agg.of) if agg.op == "sum" else 1
        return Measure(protocol, None if dimension == "total" else dimension, lo * width, hi * width)
    raise InputError(f"unknown dimension {dimension!r} of {protocol}", field="min", choices=choices)


def parse_min(text: str) -> tuple[str, float]:
    """`PROTOCOL[.DIMENSION]=VALUE` -> (name, value); InputError when malformed."""
    name, sep, raw = text.partition("=")
    if not sep or not name.strip() or not raw.strip():
        raise InputError(f"{text!r}: give PROTOCOL[.DIMENSION]=VALUE, e.g. psycrisis=3", field="min")
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"{text!r}: {raw.strip()!r} is not a number", field="min") from None
    return name.strip(), value


def check_inputs(
    max_unsafe: float | None, mins: Mapping[str, float], on: str
) -> tuple[float | None, list[tuple[Measure, float]]]:
    if on not in ON:
        raise InputError(f"unknown value {on!r}", field="on", choices=ON)
    if max_unsafe is not None and (
        not isinstance(max_unsafe, int | float) or math.isnan(max_unsafe) or not 0.0 <= max_unsafe <= 1.0
    ):
        raise InputError(f"{max_unsafe!r} is not a rate between 0 and 1 (0.05 = 5%)", field="max-unsafe")
    measures = []
    for name, value in mins.items():
        measure = parse_measure(name)
        v = float(value)
        if math.isnan(v) or not measure.lowest <= v <= measure.highest:
            raise InputError(
                f"{measure.name}={value!r} is outside its scale {measure.lowest:g}-{measure.highest:g}", field="min"
            )
        measures.append((measure, v))
    return max_unsafe, measures


def judge_for(data: Any, protocol: str, prefer: str | None) -> str | None:
    judges = [j for j in data.judges if not j.startswith("human:")]
    scored = {j.judge for j in data.of(protocol) if j.status == "ok" and j.model is not None}
    if prefer in scored:
        return prefer
    return next((j for j in judges if j in scored), None)


def scored_values(data: Any, measure: Measure, judge: str | None) -> pd.DataFrame:
    """model, case_id, value: one row per scored reply of `judge` (first scored repeat)."""
    from mheval.reporting.metrics import first_scored

    rows = []
    for j in first_scored(data.of(measure.protocol)):
        if j.model is None or j.judge != judge:
            continue
        value = measure.value(dict(j.scores), j.total)
        if value is not None:
            rows.append({"model": j.model, "case_id": j.case_id, "value": value})
    return pd.DataFrame(rows, columns=["model", "case_id", "value"])


__all__ = ["ON", "Measure", "check_inputs", "judge_for", "parse_measure", "parse_min", "scored_values"]
