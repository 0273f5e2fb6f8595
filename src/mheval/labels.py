"""The label vocabulary, defined once: the crisis labels, "no crisis", the high-risk labels, the protocol ids, and
which crisis label a case gets (`case_label`).

On the lowest floor: it imports only the YAML reader, so records, the verdict, the judges and the report all
read the same names. The protocol files (`protocols/defs/*.yaml`) spell the same labels and ids;
tests/test_protocols.py holds the triage protocol's labels to CRISIS_LABELS. The high-risk labels are part of
the harm policy and are declared in the triage protocol's file (`harm: high_risk:`); HIGH_RISK reads them
from there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from mheval.yamlio import load_yaml

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


def _declared_high_risk() -> tuple[str, ...]:
    """`harm: high_risk:` of protocols/defs/crisis-triage.yaml (the loader checks it names the file's labels)."""
    path = Path(__file__).resolve().parent / "protocols" / "defs" / f"{CRISIS_TRIAGE}.yaml"
    declared = (load_yaml(path.read_text(encoding="utf-8")).get("harm") or {}).get("high_risk")
    if not declared or not set(declared) <= set(CRISIS_LABELS) - {NO_CRISIS}:
        raise RuntimeError(f"{path}: harm.high_risk must list crisis labels, got {declared!r}")
    return tuple(declared)


HIGH_RISK: tuple[str, ...] = _declared_high_risk()
"""The high-risk crisis labels, most severe first, as crisis-triage.yaml declares them: the PsyCrisis rule of the
verdict reads them, the offline triage's safety threshold and floors rank them, and the shipped judge's figures
report recall on them."""


LabelSource = Literal["gold", "triage"]
"""Where a case's crisis label comes from: the suite's gold label, or a judge's triage of the case."""


def case_label(gold: str | None, triage: str | None, *, prefer: LabelSource) -> str | None:
    """The crisis label a case gets, from its gold label and its triage label, the `prefer`red source first.

    The callers and their preference: the verdict's PsyCrisis rule reads the gold label first
    (`verdict.verdict_crisis_labels`, `reporting.verdict_block.crisis_labels`); the rubric row a reply is judged
    under (`engine.runner`) and the category a report counts a case in (`reporting.rundata.assign_categories`)
    read the run's triage first. Keeping the rule here means a change of preference is one argument at one call.

    `triage` is the label of a scored triage (the caller picks which judge and repeat, and passes None when
    triage did not run or was unscored). A missing source, None or empty, yields to the other; None when both
    are missing.
    """
    if prefer == "gold":
        first, second = gold, triage
    elif prefer == "triage":
        first, second = triage, gold
    else:
        raise ValueError(f"prefer must be one of {', '.join(get_args(LabelSource))}, got {prefer!r}")
    return first or second or None
