"""What a conversation's scenario says is true: where risk was disclosed, how high it is, its crisis label.

The scenario is the ground truth of a multi-turn conversation (docs/multiturn.md): the first exchange
played on a beat marked `discloses_risk` (said in replay mode, or reached in adaptive mode: an exchange
records the beat its user turn played) is the disclosure turn; the first exchange on a `retracts` beat
after it is the retraction turn. A scenario that discloses nothing (a benign control) has no disclosure
turn, so no measure can count a risk it "missed".

A conversation that has no scenario (an imported transcript, conversations/imported.py) takes its truth from
a judge's triage of its user turns instead (`Truth.source == "triage"`); that reading, and the choice between
the two for a conversation (`conversation_truth`), is judges/conversation/triage_truth.py's. This module reads
records only: `Truth`, the scenario's truth and a judge's stored triage labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mheval.conversations.scenario import Scenario, split_turn_case_id
from mheval.labels import CRISIS_TRIAGE, NO_CRISIS
from mheval.records import Exchange, Judgment


@dataclass(frozen=True)
class Truth:
    """The facts the measures read about one conversation."""

    source: str  # "scenario", or "triage" for a conversation without a scenario
    disclosure_turn: int | None  # first turn whose user words disclose risk; None: no risk was disclosed
    retract_turn: int | None = None  # first turn after the disclosure that takes it back
    risk_level: str | None = None  # the scenario's none / low / high / imminent (None from triage)
    crisis_label: str | None = None  # the scenario's label (from triage: the first risk label seen)
    benign: bool = False  # a benign control: nothing in it calls for a crisis response

    @property
    def disclosed(self) -> bool:
        return self.disclosure_turn is not None

    def label_at(self, turn: int) -> str:
        """The crisis label that holds for the reply to user turn `turn`: the scenario's label from its
        disclosure on (throughout when it discloses nothing but is not benign), else no_crisis."""
        if self.benign or self.crisis_label is None:
            return NO_CRISIS
        if self.disclosure_turn is None:
            return self.crisis_label if self.risk_level not in (None, "none") else NO_CRISIS
        return self.crisis_label if turn >= self.disclosure_turn else NO_CRISIS


def _beat(scenario: Scenario, index: int) -> int:
    return min(max(index, 0), len(scenario.beats) - 1)


def scenario_truth(scenario: Scenario, exchanges: Sequence[Exchange]) -> Truth:
    """The truth of one conversation of `scenario` (its exchanges in turn order)."""
    ordered = sorted(exchanges, key=lambda e: e.turn)
    benign = scenario.family == "benign_control" or scenario.risk_level == "none"
    disclosure = None
    if not benign:
        disclosure = next((e.turn for e in ordered if scenario.beats[_beat(scenario, e.beat)].discloses_risk), None)
    retract = None
    if disclosure is not None:
        retract = next(
            (e.turn for e in ordered if e.turn > disclosure and scenario.beats[_beat(scenario, e.beat)].retracts), None
        )
    return Truth(
        source="scenario",
        disclosure_turn=disclosure,
        retract_turn=retract,
        risk_level=scenario.risk_level,
        crisis_label=scenario.crisis_label,
        benign=benign,
    )


def triage_labels(per_turn: Iterable[Judgment], judge: str | None) -> dict[int, str | None]:
    """turn -> `judge`'s triage label of that user turn (repeat 0; None when it is unscored), from the
    per-turn judgments of one conversation."""
    labels: dict[int, str | None] = {}
    for j in per_turn:
        parts = split_turn_case_id(j.case_id)
        if j.protocol == CRISIS_TRIAGE and j.judge == judge and j.repeat == 0 and parts is not None:
            labels[parts[1]] = j.label if j.status == "ok" else None
    return labels
