"""The two "ungrounded" measures of a report, under distinct names wherever they show, each with its one-line
definition: the share of judgments that are ungrounded (reporting/reliability.ungrounded_judgments) and the rate
of positive claims whose quoted evidence is not in the text (judges/grounding.ungrounded_rate).

A module of its own, below the tables and the sections that compute them, so that neither imports the other
for a name."""

from __future__ import annotations

UNGROUNDED_JUDGMENTS = "ungrounded_judgments"
UNGROUNDED_CLAIMS = "ungrounded_claims"
UNGROUNDED_DEFINITIONS = {
    UNGROUNDED_JUDGMENTS: "judgments unscored as ungrounded or flagged ungrounded, of all judgments",
    UNGROUNDED_CLAIMS: "positive claims whose quoted evidence is not in the text judged, of the positive claims "
    "whose grounding was checked",
}


def ungrounded_definition(name: str) -> str:
    """`name: what it counts`, as shown under a table."""
    return f"{name}: {UNGROUNDED_DEFINITIONS[name]}"


__all__ = ["UNGROUNDED_CLAIMS", "UNGROUNDED_DEFINITIONS", "UNGROUNDED_JUDGMENTS", "ungrounded_definition"]
