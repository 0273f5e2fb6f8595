"""Which replies are the worst: one definition and one order, read by the verdict block (the two or three
replies it quotes per model) and by the report's Worst cases, so the two never disagree.

Worst first: a reply verdict.py calls unsafe before any that it does not; then more reasons; lower
appropriateness; lower PsyCrisis total; evidence to show; then case id and sample, so ties keep one order.
Among equally bad replies of one model, one per crisis label first: three quoted replies that all answer the
same kind of crisis would hide what else went wrong.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from mheval.records import Judgment
from mheval.verdict import ReplyVerdict

T = TypeVar("T")
DEFAULT_WORST = 10
"""How many worst cases the report lists."""
_CLASS = 4  # the leading fields of a severity that make two replies "equally bad"


def reply_scores(judgments: Iterable[Judgment]) -> dict[str, float]:
    """Protocol -> total of a reply's scored first-repeat judgments (one judge's)."""
    return {j.protocol: float(j.total) for j in judgments if j.status == "ok" and j.repeat == 0 and j.total is not None}


def severity(verdict: ReplyVerdict | None, scores: Mapping[str, float]) -> tuple[Any, ...]:
    """Sort key of one reply as one judge saw it, worst first (see the module docstring)."""
    unsafe = verdict is not None and bool(verdict.unsafe)
    return (
        0 if unsafe else 1,
        -len(verdict.reasons) if verdict is not None else 0,
        scores.get("appropriateness", math.inf),
        scores.get("psycrisis", math.inf),
        0 if verdict is not None and verdict.evidence else 1,
    )


@dataclass(frozen=True)
class Ranked(Generic[T]):
    """One reply to rank: its severity, the key that breaks ties (case id, sample), its crisis label and its model."""

    severity: tuple[Any, ...]
    tie: tuple[Any, ...]
    label: str | None
    model: str
    item: T


def _one_model(items: Sequence[Ranked[T]], n: int) -> list[Ranked[T]]:
    ranked = sorted(items, key=lambda r: (r.severity, r.tie))
    picked: list[Ranked[T]] = []
    seen: set[str | None] = set()
    while ranked and len(picked) < n:  # among equally bad replies, one per crisis label first
        worst_class = ranked[0].severity[:_CLASS]
        pick = next((i for i, r in enumerate(ranked) if r.severity[:_CLASS] == worst_class and r.label not in seen), 0)
        chosen = ranked.pop(pick)
        seen.add(chosen.label)
        picked.append(chosen)
    return picked


def worst_first(items: Iterable[Ranked[T]], n: int, *, keep: Callable[[Ranked[T]], bool] | None = None) -> list[T]:
    """The `n` worst of `items`, in the one order. Across models, each model's own order is kept (so its
    first replies here are the ones its verdict quotes), merged by how bad the replies are."""
    by_model: dict[str, list[Ranked[T]]] = {}
    for r in items:
        if keep is None or keep(r):
            by_model.setdefault(r.model, []).append(r)
    merged = [
        (r.severity[:_CLASS], position, model, r.item)
        for model, rs in by_model.items()
        for position, r in enumerate(_one_model(rs, n))
    ]
    merged.sort(key=lambda t: t[:3])
    return [t[3] for t in merged[:n]]


__all__ = ["DEFAULT_WORST", "Ranked", "reply_scores", "severity", "worst_first"]
