"""The multi-turn part of a report, `mheval summary --format json`'s multi-turn part, and one conversation
as text (`mheval transcript`).

Each takes the run as read once (reporting/rundata.load_run: a RunData) and never opens the store; a Store
is still taken, and read whole, by the older forms. Reads stored records only, through runfolder/conversation_views.py
(every view of a conversation, with its verdict from verdict.conversation_verdict) and the measures of
stats/multiturn.py; no model client or judge is imported. The single-turn sections never see these judgments
(reporting/rundata.single_turn).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from mheval.conversations.expectations import describe
from mheval.conversations.flow import NOT_RELEVANT, OUTCOMES, answer_for, answer_name, load_flow
from mheval.conversations.scenario import Scenario, split_turn_case_id
from mheval.conversations.signals import primary_judge
from mheval.errors import InputError
from mheval.labels import CONVERSATION_FLOW, CRISIS_TRIAGE, EXPECTATIONS
from mheval.records import Conversation, Exchange, Judgment
from mheval.reporting.rundata import RunData, load_run, read_run
from mheval.runfolder.conversation_views import (
    ConversationView,
    conversation_judges,
    frames_from_views,
    views,
    with_unplayed,
)
from mheval.runfolder.store import Store
from mheval.stats.intervals import Estimate, wilson
from mheval.stats.multiturn import MEASURES, expectation_rates, measures_by, safety_curve

MEASURE_NAMES = {
    "detected": "risk detected",
    "missed_risk": "risk missed (disclosed, never acknowledged)",
    "over_reaction": "over-reaction (crisis line or emergency advice on benign controls, per reply)",
    "detection_latency": "detection latency (turns)",
    "unsafe_conversations": "unsafe conversations (verdict)",
    "harmful_turn_rate": "unsafe replies",
    "withdrawal_rate": "withdrawing replies",
    "abandonment_rate": "conversations abandoned",
    "reassurance_override": "reassurance override",
    "resource_repetition": "resource repeated",
    "pass_k": "pass^k (no sample unsafe)",
    "conversation_safety": "conversation safety (min appropriateness, 1-5)",
    "conversation_quality": "conversation quality (mean PsyCrisis, 0-5)",
}
RATES = {"detected", "missed_risk", "over_reaction", "unsafe_conversations", "harmful_turn_rate", "withdrawal_rate",
         "abandonment_rate", "reassurance_override", "resource_repetition", "pass_k"}  # fmt: skip
FAMILY_MEASURES = ("detected", "missed_risk", "over_reaction", "unsafe_conversations", "pass_k")
WORST_SHOWN = 5


class RunConversations:
    """A run's conversations as stored, and their views (one judge each)."""

    def __init__(
        self, scenarios: list[Scenario], exchanges: list[Exchange], conversations: list[Conversation],
        judgments: list[Judgment],
    ) -> None:  # fmt: skip
        self.scenarios = scenarios
        self.exchanges = exchanges
        self.conversations = conversations
        self.judgments = judgments
        self.judge = primary_judge(judgments)
        self.by_key: dict[tuple[str, str, int], list[Exchange]] = {}
        for e in sorted(exchanges, key=lambda e: (e.scenario_id, e.model, e.sample, e.turn)):
            self.by_key.setdefault((e.scenario_id, e.model, e.sample), []).append(e)

    def views(self, judges: list[str] | None = None) -> list[ConversationView]:
        return views(self.scenarios, self.exchanges, self.conversations, self.judgments, judges)


RunLike = RunData | Store
"""What the sections take: the run as read once, or (the older form) an open store, which is then read whole."""


def read(run: RunLike) -> RunConversations | None:
    """The run's conversations (with every stored judgment, as the views read them), or None for a
    single-turn run."""
    data = read_run(run) if isinstance(run, Store) else run
    d = data.dialogue
    if not d.scenarios:
        return None
    return RunConversations(d.scenarios, d.exchanges, d.conversations, data.stored)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and pd.isna(value))


def _fmt(name: str, est: dict[str, Any]) -> str:
    value = est["value"]
    if _missing(value):
        return f"n/a ({est['note']})" if isinstance(est.get("note"), str) else "n/a"
    rate = name in RATES
    text = f"{value * 100:.1f}%" if rate else f"{value:.2f}"
    if not _missing(est.get("ci_low")):
        text += f" [{est['ci_low'] * 100:.1f}, {est['ci_high'] * 100:.1f}]" if rate else (
            f" [{est['ci_low']:.2f}, {est['ci_high']:.2f}]")  # fmt: skip
    return text + f" (n={est['n']})"


def _plain(value: Any) -> Any:
    """A value as JSON can hold it (NaN and numpy numbers to plain Python)."""
    if _missing(value):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def _tables(run: RunConversations) -> tuple[list[ConversationView], pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    vs = run.views()
    turns, convs, exps = frames_from_views(vs)
    return vs, turns, with_unplayed(convs, run.scenarios, run.conversations), exps


def summary_data(run: RunLike) -> dict[str, Any] | None:
    """The multi-turn numbers as plain data (JSON-able): per model the measures, over-reaction beside the
    miss rate, each expectation's rate met / violated with Wilson intervals, the same per scenario family,
    and each conversation's failed expectations with the quoted turn. None for a single-turn run."""
    conversations = read(run)
    if conversations is None:
        return None
    return _summary_data(conversations)


def _summary_data(run: RunConversations) -> dict[str, Any]:
    vs, turns, convs, exps = _tables(run)
    if convs.empty:
        return {"judge": run.judge, "models": {}, "conversations": 0}
    models: dict[str, Any] = {}
    table = measures_by(turns, convs, ("model",))
    rates = expectation_rates(exps, ("model",))
    by_family = measures_by(turns, convs, ("model", "family"))
    family_rates = expectation_rates(exps, ("model", "family"))
    for model in sorted(convs["model"].unique()):
        mine = table[table["model"] == model]
        fams: dict[str, Any] = {}
        for family in sorted(by_family[by_family["model"] == model]["family"].unique()):
            rows = by_family[(by_family["model"] == model) & (by_family["family"] == family)]
            fr = family_rates[(family_rates["model"] == model) & (family_rates["family"] == family)]
            fams[family] = {"measures": _estimates(rows), "expectations": _rates(fr)}
        models[model] = {
            "measures": _estimates(mine),
            "expectations": _rates(rates[rates["model"] == model]),
            "families": fams,
            "failed": [f for v in vs if v.key[1] == model for f in _failed(v)],
        }
    return {
        "judge": run.judge,
        "judges": conversation_judges(run.judgments),
        "conversations": len(run.conversations),
        "unscored": sum(1 for c in run.conversations if c.status == "unscored"),
        "models": models,
    }


def _estimates(rows: pd.DataFrame) -> dict[str, Any]:
    return {
        r["measure"]: {k: _plain(r[k]) for k in ("value", "ci_low", "ci_high", "n", "note")}
        for r in rows.to_dict("records")
    }


def _rates(rows: pd.DataFrame) -> dict[str, Any]:
    out = {}
    for r in rows.to_dict("records"):
        out[r["expectation"]] = {
            k: _plain(r[k])
            for k in ("kind", "rate_of", "value", "ci_low", "ci_high", "n", "met", "missed", "violated", "unknown")
        }
    return out


def _failed(v: ConversationView) -> list[dict[str, Any]]:
    """A conversation's missed or violated expectations, each with the quoted turn."""
    by_turn = {e.turn: e for e in v.exchanges}
    out = []
    for eid, o in v.outcomes.items():
        if o.state not in ("missed", "violated"):
            continue
        e = by_turn.get(o.turn) if o.turn is not None else None
        out.append({
            "scenario_id": v.key[0], "model": v.key[1], "sample": v.key[2], "judge": v.judge, "family": v.family,
            "expectation": eid, "state": o.state, "turn": o.turn, "evidence": list(o.evidence), "why": o.why,
            "user": e.user if e else None, "reply": e.reply if e else None,
        })  # fmt: skip
    return out


def section(run_data: RunLike, *, redact: bool = False) -> dict[str, Any] | None:
    """Everything the report's multi-turn section shows, or None for a single-turn run."""
    run = read(run_data)
    if run is None:
        return None
    vs, turns, convs, exps = _tables(run)
    models = sorted(convs["model"].unique()) if not convs.empty else []
    table = measures_by(turns, convs, ("model",)) if not convs.empty else pd.DataFrame()
    rows = []
    for name in MEASURES:
        cells = []
        for model in models:
            hit = table[(table["model"] == model) & (table["measure"] == name)]
            cells.append(_fmt(name, hit.iloc[0].to_dict()) if not hit.empty else "n/a")
        rows.append([MEASURE_NAMES[name], *cells])
    by_family = measures_by(turns, convs, ("model", "family")) if not convs.empty else pd.DataFrame()
    family_rows = []
    for (model, family), group in by_family.groupby(["model", "family"]) if not by_family.empty else []:
        get = {r["measure"]: r for r in group.to_dict("records")}
        family_rows.append([model, family, *(_fmt(m, get[m]) for m in FAMILY_MEASURES)])
    return {
        "judge": run.judge,
        "models": models,
        "measures": rows,
        "families": family_rows,
        "expectations": _expectation_rows(exps, models),
        "expectation_families": _expectation_family_rows(exps),
        "failed": [] if redact else [f for v in vs for f in _failed(v)],
        "stops": _stops(run.conversations),
        "flow": _flow_outcomes(run.judgments, models),
        "flow_answers": [answer_name(o).lower() for o in OUTCOMES],  # the flow table's columns, in its order
        "curve": _curve(turns, models),
        "worst": [] if redact else _worst(run, vs),
        "unscored": sum(1 for c in run.conversations if c.status == "unscored"),
        "conversations": len(run.conversations),
    }


def _rate_cell(r: dict[str, Any]) -> str:
    if _missing(r["value"]):
        return f"n/a ({r['unknown']} unknown)"
    text = f"{r['value'] * 100:.1f}% [{r['ci_low'] * 100:.1f}, {r['ci_high'] * 100:.1f}] (n={r['n']})"
    return text + (f", {r['unknown']} unknown" if r["unknown"] else "")


def _expectation_rows(exps: pd.DataFrame, models: list[str]) -> list[list[str]]:
    """One row per expectation id: what it asks, then per model its rate met (must) or violated (must_not)."""
    rates = expectation_rates(exps, ("model",))
    out = []
    for (eid, kind), group in rates.groupby(["expectation", "kind"], sort=False) if not rates.empty else []:
        get = {r["model"]: r for r in group.to_dict("records")}
        what = f"{eid} ({kind}: {'met' if kind == 'must' else 'violated'})"
        out.append([what, describe(eid), *(_rate_cell(get[m]) if m in get else "–" for m in models)])
    return sorted(out, key=lambda r: (" (must_not" in r[0], r[0]))


def _expectation_family_rows(exps: pd.DataFrame) -> list[list[str]]:
    rates = expectation_rates(exps, ("model", "family"))
    return [[r["model"], r["family"], r["expectation"], r["rate_of"], _rate_cell(r)] for r in rates.to_dict("records")]


def _stops(conversations: list[Conversation]) -> list[list[Any]]:
    """Per model, stop reason and status: conversations, and how many of them a stateful app played on in a new
    session after the run was cut (records.Conversation.resumed_in_new_session)."""
    counts = Counter((c.model, c.stop_reason, c.status) for c in conversations)
    resumed = Counter((c.model, c.stop_reason, c.status) for c in conversations if c.resumed_in_new_session)
    return [[m, s, st, n, resumed[(m, s, st)]] for (m, s, st), n in sorted(counts.items())]


def _flow_outcomes(judgments: list[Judgment], models: list[str]) -> list[list[Any]]:
    spec = load_flow()
    counts: Counter[tuple[str, str, str]] = Counter()
    for j in judgments:
        if j.protocol != CONVERSATION_FLOW or j.status != "ok" or j.repeat != 0:
            continue
        for dim, _ in spec.dimensions:
            score = j.scores.get(dim)
            outcome = NOT_RELEVANT if score is None else answer_for(score)
            counts[(j.model or "", dim, outcome)] += 1
    return [[m, dim, *(counts[(m, dim, o)] for o in OUTCOMES)] for m in models for dim, _ in spec.dimensions]


def _curve(turns: pd.DataFrame, models: list[str]) -> str | None:
    """A line per model: share of safe turns at each turn index, with Wilson intervals."""
    if turns.empty or not models:
        return None
    import matplotlib

    from mheval.reporting.figures import _data_uri, _figure, _rc, plot_text

    points: dict[str, list[tuple[int, Estimate]]] = {}
    for model in models:
        curve = [(t, e) for t, e in safety_curve(turns[turns["model"] == model]) if e.value is not None]
        if curve:
            points[model] = curve
    if not points:
        return None
    with matplotlib.rc_context(_rc()):
        fig = _figure(6.0, 2.8)
        ax = fig.subplots()
        for model, curve in points.items():
            xs = [t for t, _ in curve]
            ys = [e.value or 0.0 for _, e in curve]
            lo = [max(0.0, y - (e.ci_low if e.ci_low is not None else y)) for y, (_, e) in zip(ys, curve, strict=True)]
            hi = [
                max(0.0, (e.ci_high if e.ci_high is not None else y) - y) for y, (_, e) in zip(ys, curve, strict=True)
            ]
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=plot_text(model))
        ax.set_xlabel("turn")
        ax.set_ylabel("share of safe turns")
        ax.set_ylim(-0.05, 1.05)
        ax.set_xticks(sorted({t for c in points.values() for t, _ in c}))
        ax.legend(fontsize=7, loc="lower left")
        return _data_uri(fig)


def _worst(run: RunConversations, vs: list[ConversationView]) -> list[dict[str, Any]]:
    """The unsafe conversations first (verdict.py), then the lowest flow outcomes, as transcripts with the
    turns that make them unsafe marked."""
    ranked = []
    for v in vs:
        flow_total = v.flow.total if v.flow is not None and v.flow.total is not None else 3.0
        unsafe = 0 if v.verdict.unsafe else 1
        ranked.append((unsafe, flow_total, -len(v.unsafe_turns), v.key, v))
    ranked.sort(key=lambda r: r[:4])
    out = []
    for unsafe, total, _, key, v in ranked[:WORST_SHOWN]:
        if unsafe and total >= 2.0:
            continue
        out.append({
            "scenario": key[0], "model": key[1], "sample": key[2],
            "outcome": ("unsafe" if v.verdict.unsafe else "not unsafe") + (
                f"; flow {v.flow.label}" if v.flow is not None and v.flow.label else ""),
            "flags": list(v.verdict.reasons),
            "turns": [{"turn": e.turn, "user": e.user, "reply": e.reply or "", "failing": e.turn in v.unsafe_turns}
                      for e in v.exchanges],
        })  # fmt: skip
    return out


def conversation_verdicts(run_data: RunData | str | Path) -> list[dict[str, Any]]:
    """The conversations' verdicts per model and judge (verdict.conversation_verdict), for the report's top
    verdict (reporting/verdict_block.ConversationRow's fields): conversations judged, unsafe, unscored,
    handled_risk / handled_of, the unsafe rate with its Wilson interval, the worst ones with reasons, and the
    rate corrected by people's ratings when the run holds them (`corrected_conversations`). Takes the RunData
    (a run folder's path is loaded first).

    When the run has several models and the ratings correct a judge's rate over all of them, that judge also
    gets a pooled row, model `ALL_MODELS` ("(all)"): the counts summed over its models and the pooled corrected
    rate (one PPI++ estimate over every conversation the judge decided, not an average of the models' rates).
    Without ratings there is no pooled row: the rows stay one per model, as the gate and compare read them."""
    data = run_data if isinstance(run_data, RunData) else load_run(run_data)
    run = read(data)
    if run is None:
        return []
    judges = conversation_judges(run.judgments)
    corrected = corrected_conversations(data)
    scored_out = {(c.scenario_id, c.model, c.sample) for c in run.conversations if c.status == "unscored"}
    groups: dict[tuple[str, str | None], list[ConversationView]] = {}
    for v in run.views(judges):
        groups.setdefault((v.key[1], v.judge), []).append(v)
    rows = []
    for (model, judge), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        judged = [v for v in group if v.key not in scored_out and v.verdict.unsafe is not None]
        unsafe = [v for v in judged if v.verdict.unsafe]
        handled = [v for v in judged if v.verdict.handled_risk is not None]
        est = wilson(len(unsafe), len(judged)) if judged else None
        rows.append({
            "model": model, "judge": judge, "conversations": len(judged), "unsafe": len(unsafe),
            "unscored": len(group) - len(judged), "handled_risk": sum(bool(v.verdict.handled_risk) for v in handled),
            "handled_of": len(handled), "rate": est.value if est else None, "low": est.ci_low if est else None,
            "high": est.ci_high if est else None,
            "worst": tuple({"scenario_id": v.key[0], "sample": v.key[2], "reasons": list(v.verdict.reasons),
                            "evidence": [s for f in _failed(v) for s in f["evidence"]]} for v in unsafe[:3]),
            "corrected": corrected.get((model, judge or "")),
        })  # fmt: skip
    return rows + _pooled_rows(rows, corrected)


def _pooled_rows(rows: list[dict[str, Any]], corrected: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """Per judge with a pooled corrected rate over several models: the all-models row (see conversation_verdicts)."""
    from mheval.analysis.corrected import ALL_MODELS

    out = []
    for judge in dict.fromkeys(r["judge"] for r in rows):
        pooled = corrected.get((ALL_MODELS, judge or ""))
        mine = [r for r in rows if r["judge"] == judge]
        if pooled is None or len(mine) < 2:
            continue
        judged, unsafe = sum(r["conversations"] for r in mine), sum(r["unsafe"] for r in mine)
        est = wilson(unsafe, judged) if judged else None
        out.append({
            "model": ALL_MODELS, "judge": judge, "conversations": judged, "unsafe": unsafe,
            "unscored": sum(r["unscored"] for r in mine), "handled_risk": sum(r["handled_risk"] for r in mine),
            "handled_of": sum(r["handled_of"] for r in mine), "rate": est.value if est else None,
            "low": est.ci_low if est else None, "high": est.ci_high if est else None, "worst": (),
            "corrected": pooled,
        })  # fmt: skip
    return out


def corrected_conversations(run: RunData) -> dict[tuple[str, str], dict[str, Any]]:
    """(model, judge) -> the unsafe-conversation rate corrected for the judge's errors by the people's answers
    to "is this conversation unsafe?" in the run's newest conversation-flow study (PPI++, stratified when the
    study is), as CorrectedEstimate.to_dict(); empty without such ratings. A run of several models also has
    (ALL_MODELS, judge): the rate over all of them, from one estimate over the pooled conversations. One
    computation: the judges' verdicts laid out as `mheval agree --protocol conversation-flow --corrected` reads
    them (analysis/conversation_verdicts.py) and the same report (analysis/corrected.corrected_report)."""
    study = run.conversation_study
    if study is None or study.labels.empty:
        return {}
    from mheval.analysis.conversation_verdicts import UNSAFE, verdict_rows, verdicts_of
    from mheval.analysis.corrected import corrected_report
    from mheval.stats.corrected import ROGAN_GLADEN

    d = run.dialogue
    frame = verdict_rows(verdicts_of(d.scenarios, d.exchanges, d.conversations, run.stored))
    try:
        report = corrected_report(study.labels, frame, protocol=CONVERSATION_FLOW, strata=study.strata)
    except InputError:  # no rated conversation is one the judges decided: nothing to correct
        return {}
    return {
        (r.model, r.judge): r.estimate.to_dict()
        for r in report.rows
        if r.measure == UNSAFE and not r.estimate.method.endswith(ROGAN_GLADEN)
    }


# -- one conversation as text ---------------------------------------------------------------------


def transcript_text(
    run_data: RunData | str | Path, scenario_id: str, model: str | None = None, sample: int | None = None
) -> str:
    """One conversation with its per-turn verdicts and its whole-conversation outcome, as plain text; takes
    the RunData (a run folder's path is loaded first)."""
    data = run_data if isinstance(run_data, RunData) else load_run(run_data)
    run = read(data)
    if run is None:
        raise InputError("this run has no multi-turn conversations", path=data.run_dir)
    keys = [k for k in run.by_key if k[0] == scenario_id and (model is None or k[1] == model)
            and (sample is None or k[2] == sample)]  # fmt: skip
    if not keys:
        known = sorted({k[0] for k in run.by_key})
        raise InputError(f"no conversation of scenario {scenario_id!r} with that model and sample", field="scenario",
                         choices=known[:20])  # fmt: skip
    per_turn: dict[tuple[str, str, int, int], list[Judgment]] = {}
    flows: dict[tuple[str, str, int], list[Judgment]] = {}
    for j in run.judgments:
        parts = split_turn_case_id(j.case_id)
        if parts is not None and j.model is not None:
            per_turn.setdefault((parts[0], j.model, j.sample or 0, parts[1]), []).append(j)
        elif j.protocol in (CONVERSATION_FLOW, EXPECTATIONS):
            flows.setdefault((j.case_id, j.model or "", j.sample or 0), []).append(j)
    verdicts = {(v.key, v.judge): v for v in run.views(conversation_judges(run.judgments))}
    ends = {(c.scenario_id, c.model, c.sample): c for c in run.conversations}
    lines: list[str] = []
    for key in sorted(keys):
        end = ends.get(key)
        lines.append(f"== {key[0]} · {key[1]} · sample {key[2]}")
        if end is not None:
            status = f"{end.status}" + (f" ({end.reason.value}: {end.detail})" if end.reason else "")
            lines.append(f"   stopped: {end.stop_reason}; {end.turns} turns; {end.mode} mode; {status}")
            if end.resumed_in_new_session:
                lines.append(f"   resumed_in_new_session: the run was cut; turns {end.resumed_at_turn} on went to "
                             "a new app session that never saw the turns before")  # fmt: skip
        for e in run.by_key[key]:
            if e.new_session:
                lines.append(
                    f"-- resumed in a new app session at turn {e.turn} (the app never saw turns 1-{e.turn - 1})"
                )
            lines.append(f"[t{e.turn}] user: {e.user}")
            for j in sorted(per_turn.get((*key, e.turn), []), key=lambda j: (j.protocol != CRISIS_TRIAGE, j.protocol)):
                if j.protocol == CRISIS_TRIAGE:
                    lines.append(f"        triage ({j.judge}): {_verdict(j)}")
            lines.append(f"[t{e.turn}] assistant: {e.reply or ''}")
            for j in sorted(per_turn.get((*key, e.turn), []), key=lambda j: j.protocol):
                if j.protocol != CRISIS_TRIAGE:
                    lines.append(f"        {j.protocol} ({j.judge}): {_verdict(j)}")
            for rejected in e.rejected:
                lines.append(f"        simulator turn regenerated: {rejected}")
        for j in flows.get(key, []):
            if j.protocol == EXPECTATIONS:
                view = verdicts.get((key, j.judge))
                lines.append(f"-- expectations ({j.judge}): {_verdict(j)}")
                for eid, o in (view.outcomes if view else {}).items():
                    cited = "; ".join(o.evidence)
                    lines.append(f"   {eid}: {o.state}" + (f" — {cited}" if cited else "") + (
                        f" ({o.why})" if o.why and o.state != "met" else ""))  # fmt: skip
                if view is not None:
                    state = {True: "unsafe", False: "not unsafe", None: "not measurable"}[view.verdict.unsafe]
                    why = "; ".join(view.verdict.reasons)
                    lines.append(f"-- verdict ({j.judge}): {state}" + (f" ({why})" if why else ""))
                continue
            lines.append(f"-- {CONVERSATION_FLOW} ({j.judge}): {_verdict(j)}")
            for dim, score in j.scores.items():
                name = answer_name(answer_for(score)).lower()
                cited = "; ".join(j.evidence.get(dim, []))
                lines.append(f"   {dim}: {name}" + (f" — {cited}" if cited else ""))
            for f in j.flags:
                if f.startswith("not_relevant:"):
                    lines.append(f"   {f.split(':', 1)[1]}: not relevant")
        lines.append("")
    return "\n".join(lines)


def _verdict(j: Judgment) -> str:
    if j.status != "ok":
        return f"unscored ({j.reason_text})"
    if j.protocol == EXPECTATIONS:
        return f"{j.label or 'nothing decided'}" + (f" ({j.total:.0%} met)" if j.total is not None else "")
    if j.label is not None and j.protocol != CONVERSATION_FLOW:
        return j.label
    if j.protocol == CONVERSATION_FLOW:
        return f"{j.label} (min {j.total:g})" if j.total is not None else str(j.label)
    scores = ", ".join(f"{k}={v:g}" for k, v in j.scores.items())
    return (
        f"total {j.total:g}" + (f" ({scores})" if scores and len(j.scores) > 1 else "")
        if j.total is not None
        else scores
    )
