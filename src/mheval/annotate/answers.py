"""A rater's answer to one question, and a study's answers as the long labels table `agree` reads.

Below `study` and `export`: the study reads earlier studies' labels as a pilot for its Neyman plan, and
the export writes them, so both take the table from here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from mheval.analysis.conversation_verdicts import UNSAFE
from mheval.conversations.flow import NOT_RELEVANT, SCORES  # the flow's answers, defined once in its yaml
from mheval.labels import CONVERSATION_FLOW

# (rater, unit key (case id, model, sample), language, crisis label, answers by question): `Study.rated()`.
Rated = tuple[str, tuple[str, str, int], str, str | None, Mapping[str, "Answer"]]


@dataclass(frozen=True)
class Answer:
    question: str
    value: str | None
    unsure: bool
    comment: str | None
    seconds: float


def labels_frame(protocol: str, rated: Iterable[Rated]) -> pd.DataFrame:
    """The ratings as `agree`'s long labels table: id, rater, value (and dimension, model, sample)."""
    rows = []
    for rater, key, _, _, answers in rated:
        for q, a in answers.items():
            if a.unsure or a.value is None or a.value == NOT_RELEVANT:  # a question that does not apply
                continue
            value: Any = SCORES.get(a.value, a.value) if protocol == CONVERSATION_FLOW else a.value
            if (protocol != CONVERSATION_FLOW and q != "label") or q == UNSAFE:
                value = float(value)
            row: dict[str, Any] = {"id": key[0], "rater": rater, "value": value}
            if q != "label":
                row["dimension"] = q
            if key[1]:
                row["model"], row["sample"] = key[1], str(key[2])
            rows.append(row)
    return pd.DataFrame(rows)
