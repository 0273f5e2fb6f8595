"""A multi-turn run's conversations as the two tables the measures read (stats/multiturn.py)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from mheval.dialogues.scenario import Scenario, split_turn_case_id
from mheval.dialogues.signals import turn_signals
from mheval.records import Conversation, Exchange, Judgment
from mheval.runfolder.store import Store

TURN_COLUMNS = [
    "scenario_id", "family", "language", "model", "sample", "turn", "beat", "user_risk", "scripted_risk", "retracts",
    "acknowledged", "probed", "resource", "validated", "safe", "harmful", "withdrew", "quality", "safety",
]  # fmt: skip
CONVERSATION_COLUMNS = [
    "scenario_id", "family", "language", "risk_level", "model", "sample", "status", "reason", "stop_reason", "turns",
]  # fmt: skip


def frames(
    scenarios: list[Scenario], exchanges: list[Exchange], conversations: list[Conversation],
    judgments: list[Judgment], judge: str | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:  # fmt: skip
    """(turns, conversations) tables; per-turn signals come from `judge`'s verdicts (or the first judge's)."""
    by_id = {s.id: s for s in scenarios}
    per_turn: dict[tuple[str, str, int], list[Judgment]] = {}
    for j in judgments:
        parts = split_turn_case_id(j.case_id)
        if parts is not None and j.model is not None:
            per_turn.setdefault((parts[0], j.model, j.sample or 0), []).append(j)
    grouped: dict[tuple[str, str, int], list[Exchange]] = {}
    for e in exchanges:
        grouped.setdefault((e.scenario_id, e.model, e.sample), []).append(e)
    rows: list[dict[str, Any]] = []
    for key, conv in grouped.items():
        scenario = by_id.get(key[0])
        if scenario is None:
            continue
        for e, s in zip(conv, turn_signals(conv, per_turn.get(key, []), judge), strict=True):
            beat = scenario.beats[min(e.beat, len(scenario.beats) - 1)]
            rows.append(
                {"scenario_id": key[0], "family": scenario.family, "language": scenario.language, "model": key[1],
                 "sample": key[2], "turn": e.turn, "beat": e.beat, "user_risk": s.user_risk,
                 "scripted_risk": beat.discloses_risk, "retracts": beat.retracts, "acknowledged": s.acknowledged,
                 "probed": s.probed, "resource": s.resource, "validated": s.validated, "safe": s.safe,
                 "harmful": s.harmful, "withdrew": s.withdrew, "quality": s.quality, "safety": s.safety}
            )  # fmt: skip
    conv_rows = [
        {"scenario_id": c.scenario_id, "family": by_id[c.scenario_id].family, "language": by_id[c.scenario_id].language,
         "risk_level": by_id[c.scenario_id].risk_level, "model": c.model, "sample": c.sample, "status": c.status,
         "reason": c.reason.value if c.reason else None, "stop_reason": c.stop_reason, "turns": c.turns}
        for c in conversations
        if c.scenario_id in by_id
    ]  # fmt: skip
    return (
        pd.DataFrame(rows, columns=TURN_COLUMNS).astype({"user_risk": object, "safe": object, "harmful": object}),
        pd.DataFrame(conv_rows, columns=CONVERSATION_COLUMNS),
    )


def run_frames(store: Store, judge: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The tables of a run folder's conversations."""
    return frames(store.scenarios(), store.exchanges(), store.conversations(), store.judgments(), judge)
