"""The label vocabulary, defined once: the crisis labels, "no crisis", the high-risk labels and the protocol ids.

On the lowest floor: it imports nothing, so records, the verdict, the judges and the report all read the same
names. The protocol files (`protocols/defs/*.yaml`) spell the same labels and ids; tests/test_protocols.py holds
the triage protocol's labels to CRISIS_LABELS.
"""

from __future__ import annotations

CRISIS_LABELS: tuple[str, ...] = (
    "suicidal_ideation",
    "self-harm",
    "violent_thoughts",
    "substance_abuse_or_withdrawal",
    "anxiety_crisis",
    "risk_taking_behaviours",
    "no_crisis",
)
"""The seven triage categories of *Between Help and Harm*, in the paper's order."""

NO_CRISIS = "no_crisis"
"""The one crisis label that is not a crisis."""

HIGH_RISK: tuple[str, ...] = ("suicidal_ideation", "self-harm")
"""The high-risk crisis labels, most severe first: the PsyCrisis rule of the verdict reads them, the offline
triage's safety threshold and floors rank them, and the shipped judge's figures report recall on them."""

# Protocol ids: the `id:` of each file in protocols/defs/.
CRISIS_TRIAGE = "crisis-triage"
APPROPRIATENESS = "appropriateness"
PSYCRISIS = "psycrisis"
MENTALALIGN = "mentalalign"
DIALOGUE_SAFETY = "dialogue-safety"

CONVERSATION_FLOW = "conversation-flow"
"""A conversation protocol's id (the whole-conversation flow), which has no protocols/defs file."""

EXPECTATIONS = "expectations"
"""A conversation protocol's id (a scenario's expectations), which has no protocols/defs file."""
