"""A multi-turn run's conversations as records the measures, the report and the export read.

Every view of a conversation is built here, once, from stored records: the scenario's truth (where risk
was disclosed: conversations/truth.py; for an imported transcript the judge's triage,
judges/conversation/triage_truth.py), each reply's verdict (verdict.py, with the crisis label that holds
at that turn), the scenario's expectations as judged (conversations/expectations.py), the flow verdict's
red flags, and from those the conversation's verdict (`verdict.conversation_verdict`, the one definition
of an unsafe conversation). The turns that make a conversation unsafe are marked in the turns table
(`safe` is False there), so pass^k, safety by turn, the flow summaries and the report's verdict agree:
a conversation is unsafe exactly when one of its turns is.

Tables (stats/multiturn.py reads them):
- turns: one row per exchange (TURN_COLUMNS);
- conversations: one row per conversation, for one judge (CONVERSATION_COLUMNS);
- expectations: one row per conversation and expectation id (EXPECTATION_COLUMNS).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from mheval.conversations.expectations import Outcome, escalated_turns, read_outcomes, states
from mheval.conversations.flow import quoted_turn, red_dimensions
from mheval.conversations.scenario import MUST, Scenario, split_turn_case_id
from mheval.conversations.signals import TurnSignals, primary_judge, turn_signals, turn_verdicts
from mheval.conversations.truth import Truth
from mheval.labels import CONVERSATION_FLOW, EXPECTATIONS
from mheval.records import Conversation, Exchange, Judgment
from mheval.runfolder.store import Store
from mheval.verdict import ConversationVerdict, conversation_verdict

TURN_COLUMNS = [
    "scenario_id", "family", "language", "model", "sample", "turn", "beat", "risk_source", "disclosure_turn",
    "user_risk", "scripted_risk", "retracts", "acknowledged", "probed", "resource", "validated", "safe", "harmful",
    "withdrew", "escalated", "quality", "safety",
]  # fmt: skip
CONVERSATION_COLUMNS = [
    "scenario_id", "family", "language", "risk_level", "benign", "model", "sample", "judge", "status", "reason",
    "stop_reason", "turns", "risk_source", "disclosure_turn", "retract_turn", "unsafe", "handled_risk", "reasons",
    "expectations", "flow",
]  # fmt: skip
EXPECTATION_COLUMNS = [
    "scenario_id", "family", "language", "model", "sample", "judge", "expectation", "kind", "state", "turn",
    "evidence", "why",
]  # fmt: skip

Key = tuple[str, str, int]


@dataclass
class ConversationView:
    """One conversation as one judge's verdicts show it."""

    key: Key
    judge: str | None
    scenario: Scenario | None
    truth: Truth
    exchanges: list[Exchange]
    signals: list[TurnSignals]
    outcomes: dict[str, Outcome]
    verdict: ConversationVerdict
    unsafe_turns: dict[int, list[str]] = field(default_factory=dict)  # turn -> why it makes the conversation unsafe
    escalated: set[int] | None = None
    flow: Judgment | None = None
    end: Conversation | None = None

    @property
    def family(self) -> str:
        return self.scenario.family if self.scenario else "unknown"

    @property
    def language(self) -> str | None:
        return self.scenario.language if self.scenario else None


def _group(exchanges: Sequence[Exchange]) -> dict[Key, list[Exchange]]:
    grouped: dict[Key, list[Exchange]] = {}
    for e in sorted(exchanges, key=lambda e: (e.scenario_id, e.model, e.sample, e.turn)):
        grouped.setdefault((e.scenario_id, e.model, e.sample), []).append(e)
    return grouped


def views(
    scenarios: Sequence[Scenario], exchanges: Sequence[Exchange], conversations: Sequence[Conversation],
    judgments: Sequence[Judgment], judges: Sequence[str] | None = None,
) -> list[ConversationView]:  # fmt: skip
    """One view per stored conversation and judge (`judges`: those named, else the primary judge only,
    the first by name with per-turn verdicts)."""
    by_id = {s.id: s for s in scenarios}
    ends = {(c.scenario_id, c.model, c.sample): c for c in conversations}
    per_conv: dict[Key, list[Judgment]] = {}
    whole: dict[tuple[str, str, int, str, str], Judgment] = {}
    for j in judgments:
        parts = split_turn_case_id(j.case_id)
        if parts is not None and j.model is not None:
            per_conv.setdefault((parts[0], j.model, j.sample or 0), []).append(j)
        elif j.protocol in (CONVERSATION_FLOW, EXPECTATIONS) and j.repeat == 0:
            whole[(j.case_id, j.model or "", j.sample or 0, j.protocol, j.judge)] = j
    names: list[str | None] = list(judges) if judges is not None else [primary_judge(judgments)]
    out = []
    for key, conv in _group(exchanges).items():
        for judge in names:
            out.append(_view(key, judge, by_id.get(key[0]), conv, per_conv.get(key, []), whole, ends.get(key)))
    return out


def _view(
    key: Key, judge: str | None, scenario: Scenario | None, exchanges: list[Exchange], per_turn: list[Judgment],
    whole: dict[tuple[str, str, int, str, str], Judgment], end: Conversation | None,
) -> ConversationView:  # fmt: skip
    # An imported transcript has no scenario to say where risk was disclosed: the judge's triage does. The
    # judges' package is loaded here, on use, so importing the views (the report does) loads no judge.
    from mheval.judges.conversation.triage_truth import conversation_truth

    truth = conversation_truth(scenario, exchanges, per_turn, judge)
    labels = {e.turn: truth.label_at(e.turn) for e in exchanges}
    signals = turn_signals(exchanges, per_turn, judge, labels) if judge is not None else [
        TurnSignals(turn=e.turn) for e in exchanges]  # fmt: skip
    replies = turn_verdicts(per_turn, judge, labels) if judge is not None else {}
    flow = whole.get((*key, CONVERSATION_FLOW, judge or ""))
    expect = whole.get((*key, EXPECTATIONS, judge or ""))
    must = list(scenario.expectations.must) if scenario else []
    must_not = list(scenario.expectations.must_not) if scenario else []
    outcomes = read_outcomes(expect, [*must, *must_not])
    outcomes = {k: outcomes[k] for k in [*must, *must_not]}
    red = red_dimensions(flow)
    ordered = [replies[t] for t in sorted(replies)]
    verdict = conversation_verdict(ordered, states(outcomes), must, must_not, red)
    last = exchanges[-1].turn if exchanges else 1
    unsafe: dict[int, list[str]] = {}
    for turn, rv in replies.items():
        if rv.unsafe:
            unsafe.setdefault(turn, []).append(f"reply unsafe: {'; '.join(rv.reasons)}")
    for eid in must_not:
        o = outcomes[eid]
        if o.state == "violated":
            unsafe.setdefault(o.turn or last, []).append(f"must_not {eid} violated")
    for dim in red:
        cited = [t for t in (quoted_turn(q) for q in (flow.evidence.get(dim, []) if flow else [])) if t is not None]
        unsafe.setdefault(min(cited) if cited else last, []).append(f"flow: high potential for harm in {dim}")
    return ConversationView(
        key=key, judge=judge, scenario=scenario, truth=truth, exchanges=exchanges, signals=signals,
        outcomes=outcomes, verdict=verdict, unsafe_turns=unsafe, escalated=escalated_turns(expect), flow=flow,
        end=end,
    )  # fmt: skip


def _turn_safe(view: ConversationView, s: TurnSignals) -> bool | None:
    if s.turn in view.unsafe_turns:
        return False
    return None if s.harmful is None else True


def frames_from_views(views_: Sequence[ConversationView]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(turns, conversations, expectations) tables of some views (one judge per conversation)."""
    turn_rows: list[dict[str, Any]] = []
    conv_rows: list[dict[str, Any]] = []
    exp_rows: list[dict[str, Any]] = []
    for v in views_:
        sid, model, sample = v.key
        scenario = v.scenario
        for e, s in zip(v.exchanges, v.signals, strict=True):
            beat = scenario.beats[min(e.beat, len(scenario.beats) - 1)] if scenario and scenario.beats else None
            turn_rows.append({
                "scenario_id": sid, "family": v.family, "language": v.language, "model": model, "sample": sample,
                "turn": e.turn, "beat": e.beat, "risk_source": v.truth.source,
                "disclosure_turn": v.truth.disclosure_turn, "user_risk": s.user_risk,
                "scripted_risk": bool(beat and beat.discloses_risk), "retracts": e.turn == v.truth.retract_turn,
                "acknowledged": s.acknowledged, "probed": s.probed, "resource": s.resource, "validated": s.validated,
                "safe": _turn_safe(v, s), "harmful": s.harmful, "withdrew": s.withdrew,
                "escalated": None if v.escalated is None else e.turn in v.escalated,
                "quality": s.quality, "safety": s.safety,
            })  # fmt: skip
        end = v.end
        conv_rows.append({
            "scenario_id": sid, "family": v.family, "language": v.language,
            "risk_level": scenario.risk_level if scenario else None, "benign": v.truth.benign, "model": model,
            "sample": sample, "judge": v.judge, "status": end.status if end else "ok",
            "reason": end.reason.value if end and end.reason else None,
            "stop_reason": end.stop_reason if end else None, "turns": len(v.exchanges),
            "risk_source": v.truth.source, "disclosure_turn": v.truth.disclosure_turn,
            "retract_turn": v.truth.retract_turn, "unsafe": v.verdict.unsafe, "handled_risk": v.verdict.handled_risk,
            "reasons": list(v.verdict.reasons), "expectations": states(v.outcomes),
            "flow": v.flow.label if v.flow is not None and v.flow.status == "ok" else None,
        })  # fmt: skip
        for eid, o in v.outcomes.items():
            exp_rows.append({
                "scenario_id": sid, "family": v.family, "language": v.language, "model": model, "sample": sample,
                "judge": v.judge, "expectation": eid, "kind": "must" if eid in MUST else "must_not",
                "state": o.state, "turn": o.turn, "evidence": list(o.evidence), "why": o.why,
            })  # fmt: skip
    turns = pd.DataFrame(turn_rows, columns=TURN_COLUMNS)
    turns = turns.astype({c: object for c in ("user_risk", "safe", "harmful", "escalated", "acknowledged")})
    convs = pd.DataFrame(conv_rows, columns=CONVERSATION_COLUMNS).astype({"unsafe": object, "handled_risk": object})
    return turns, convs, pd.DataFrame(exp_rows, columns=EXPECTATION_COLUMNS)


def frames(
    scenarios: list[Scenario], exchanges: list[Exchange], conversations: list[Conversation],
    judgments: list[Judgment], judge: str | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:  # fmt: skip
    """(turns, conversations) tables, from `judge`'s verdicts (or the primary judge's)."""
    judges = [judge] if judge is not None else None
    turns, convs, _ = frames_from_views(views(scenarios, exchanges, conversations, judgments, judges))
    return turns, with_unplayed(convs, scenarios, conversations)


def with_unplayed(convs: pd.DataFrame, scenarios: list[Scenario], conversations: list[Conversation]) -> pd.DataFrame:
    """Conversations stored with no exchange (a failure at turn 1) still count where the measures count them."""
    seen = set(map(tuple, convs[["scenario_id", "model", "sample"]].itertuples(index=False, name=None)))
    by_id = {s.id: s for s in scenarios}
    extra: list[dict[str, Any]] = [
        {"scenario_id": c.scenario_id, "family": by_id[c.scenario_id].family,
         "language": by_id[c.scenario_id].language, "risk_level": by_id[c.scenario_id].risk_level,
         "benign": by_id[c.scenario_id].family == "benign_control", "model": c.model, "sample": c.sample,
         "judge": None, "status": c.status, "reason": c.reason.value if c.reason else None,
         "stop_reason": c.stop_reason, "turns": c.turns, "risk_source": "scenario", "disclosure_turn": None,
         "retract_turn": None, "unsafe": None, "handled_risk": None, "reasons": [], "expectations": {}, "flow": None}
        for c in conversations
        if (c.scenario_id, c.model, c.sample) not in seen and c.scenario_id in by_id
    ]  # fmt: skip
    if not extra:
        return convs
    more = pd.DataFrame(extra, columns=CONVERSATION_COLUMNS)
    return pd.concat([convs, more], ignore_index=True) if not convs.empty else more


def run_views(store: Store, judges: Sequence[str] | None = None) -> list[ConversationView]:
    return views(store.scenarios(), store.exchanges(), store.conversations(), store.judgments(), judges)


def run_frames(store: Store, judge: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The tables of a run folder's conversations."""
    return frames(store.scenarios(), store.exchanges(), store.conversations(), store.judgments(), judge)


def conversation_judges(judgments: Sequence[Judgment]) -> list[str]:
    """Every judge that judged the run's conversations (per turn or as a whole), by name."""
    names = {j.judge for j in judgments if j.protocol in (CONVERSATION_FLOW, EXPECTATIONS)}
    names |= {j.judge for j in judgments if split_turn_case_id(j.case_id) is not None}
    return sorted(names)
