"""Flat tables of a run (cases, responses, judgments, verdicts, exchanges, conversations) for export and for
the summary.

`verdicts` has one row per reply and judge with verdict.py's verdict (`unsafe`: true, false or null when
not measurable), its reasons and evidence, and, where the offline reply-harm detector read the reply, its
harm category and probability: the table a reviewer sorts to check the flagged replies.

`conversations` has one row per multi-turn conversation and judge, with its verdict (`unsafe`: true,
false or null when not measurable, by verdict.conversation_verdict) and `expectations`: each expectation
id of its scenario -> {state: met / missed / violated / unknown, turn, evidence, why}
(runfolder/conversation_views.py builds them from the stored records).

Every export is strict: JSONL has no NaN or Infinity (a missing value is null), and a column of whole
numbers (sample, repeat, turn, tokens) stays whole numbers in every format, even with some rows empty.
The `messages` format writes each multi-turn conversation as one chat-format JSON line.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from mheval.conversations.scenario import turn_case_id
from mheval.errors import InputError
from mheval.fileio import atomic_path, atomic_write, check_output, csv_safe_frame
from mheval.labels import APPROPRIATENESS
from mheval.records import Exchange, Judgment, Response, Usage
from mheval.runfolder.store import Store

TABLES = ("cases", "responses", "judgments", "verdicts", "exchanges", "conversations")
FORMATS = ("jsonl", "csv", "parquet", "messages")
MESSAGE_TABLES = ("exchanges", "conversations")
"""The tables `--format messages` can write: those made of conversations."""


def default_table(fmt: str) -> str:
    """The table exported when none is named: the conversations for `messages`, else the judgments."""
    return MESSAGE_TABLES[0] if fmt == "messages" else "judgments"


# The judge saw text in the reply addressed to it (judges/flags.py). What the aggregates do with such
# judgments is the run's `on_injection` policy, applied here and nowhere else.
INJECTION_FLAG = "injection_suspected"
INJECTION_POLICIES = ("flag", "exclude")


def injection_policy(config: dict[str, Any] | None) -> str:
    """The run's `on_injection` ("flag" unless the run's config says "exclude")."""
    policy = (config or {}).get("on_injection") or "flag"
    return policy if policy in INJECTION_POLICIES else "flag"


def is_injected(judgment: Judgment) -> bool:
    return INJECTION_FLAG in judgment.flags


@dataclass
class CountedJudgments:
    """A run's judgments as its aggregates see them: under "exclude" the flagged ones are set apart."""

    policy: str
    counted: list[Judgment]
    excluded: list[Judgment] = field(default_factory=list)


def counted_judgments(store: Store, judgments: Iterable[Judgment] | None = None) -> CountedJudgments:
    """Every aggregate (summary, report, compare, agree) reads judgments through this one function."""
    policy = injection_policy(store.get_meta("config"))
    items = list(store.iter_judgments() if judgments is None else judgments)
    if policy != "exclude":
        return CountedJudgments(policy, items)
    return CountedJudgments(policy, [j for j in items if not is_injected(j)], [j for j in items if is_injected(j)])


def cost_columns(usage: Usage, latency_s: float) -> dict[str, Any]:
    """What a call cost (tokens, dollars, seconds): the same four columns in the responses, judgments and exchanges
    tables."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cost_usd": usage.cost_usd,
        "latency_s": latency_s,
    }


def judgment_row(j: Judgment) -> dict[str, Any]:
    """One judgment as a flat row (the judgments table, and the frames the analyses read)."""
    return {
        "case_id": j.case_id,
        "model": j.model,
        "sample": j.sample,
        "protocol": j.protocol,
        "judge": j.judge,
        "repeat": j.repeat,
        "label": j.label,
        "scores": j.scores,
        "total": j.total,
        "status": j.status,
        "reason": j.reason,
        "detail": j.detail,
        "rationale": j.rationale,
        "evidence": j.evidence,
        "flags": j.flags,
        **cost_columns(j.usage, j.latency_s),
        "raw": j.raw,
    }


def exchange_row(e: Exchange) -> dict[str, Any]:
    """One exchange of a multi-turn conversation as a flat row; `case_id` is that of its per-turn judgments."""
    return {
        "scenario_id": e.scenario_id,
        "case_id": turn_case_id(e.scenario_id, e.turn),
        "model": e.model,
        "sample": e.sample,
        "turn": e.turn,
        "beat": e.beat,
        "user": e.user,
        "reply": e.reply,
        "error": e.error,
        "rejected": e.rejected,
        "new_session": e.new_session,
        **cost_columns(e.usage, e.latency_s),
    }


def response_row(r: Response) -> dict[str, Any]:
    """One model reply as a flat row (the responses table)."""
    return {
        "case_id": r.case_id,
        "model": r.model,
        "sample": r.sample,
        "text": r.text,
        "truncated": r.truncated,
        "error": r.error,
        **cost_columns(r.usage, r.latency_s),
    }


def table_rows(store: Store, table: str, *, counted: bool = False) -> list[dict[str, Any]]:
    """One table of the run as rows; with `counted`, the judgments table holds only those the aggregates count."""
    if table == "cases":
        return [
            {
                "case_id": c.id,
                "language": c.language,
                "crisis_label": c.crisis_label,
                "locale": c.locale,
                "source": c.source,
                "n_turns": len(c.turns),
                "turns": [t.model_dump() for t in c.turns],
                "metadata": c.metadata,
            }
            for c in store.cases()
        ]
    if table == "responses":
        return [response_row(r) for r in store.responses()]
    if table == "judgments":
        return [judgment_row(j) for j in (counted_judgments(store).counted if counted else store.iter_judgments())]
    if table == "verdicts":
        return verdict_rows(store)
    if table == "exchanges":
        return [exchange_row(e) for e in store.exchanges()]
    if table == "conversations":
        return conversation_rows(store)
    raise InputError(f"unknown table {table!r}", field="table", choices=TABLES)


def verdict_rows(store: Store) -> list[dict[str, Any]]:
    """One row per reply and judge: verdict.py's verdict with its reasons and evidence, and the harm
    detector's category and probability where it read the reply (the offline appropriateness judgment)."""
    from mheval.verdict import reply_verdicts, verdict_crisis_labels

    judgments = counted_judgments(store).counted
    labels = verdict_crisis_labels(store.cases(), judgments)
    harm: dict[tuple[str, str, int, str], dict[str, Any]] = {}
    for j in judgments:
        if j.protocol == APPROPRIATENESS and j.repeat == 0 and j.model is not None and j.raw:
            try:
                found = json.loads(j.raw).get("harm")
            except (ValueError, AttributeError):
                found = None
            if isinstance(found, dict):
                harm[j.case_id, j.model, j.sample or 0, j.judge] = found
    rows = []
    for v in reply_verdicts(judgments, labels):
        h = harm.get((v.case_id, v.model, v.sample, v.judge), {})
        rows.append(
            {
                "case_id": v.case_id,
                "model": v.model,
                "sample": v.sample,
                "judge": v.judge,
                "crisis_label": labels.get(v.case_id),
                "unsafe": v.unsafe,
                "reasons": list(v.reasons),
                "evidence": list(v.evidence),
                "unscored": list(v.unscored),
                "harm_category": h.get("category"),
                "harm_probability": h.get("probability"),
                "harm_evidence": h.get("evidence"),
                "harm_screened": h.get("screened"),  # the fast detector's reading: it cleared this long reply
            }
        )
    return sorted(rows, key=lambda r: (r["case_id"], r["model"], r["sample"], r["judge"]))


def conversation_rows(store: Store) -> list[dict[str, Any]]:
    """One row per conversation and judge: what it was, how it ended, its verdict and its expectations."""
    from mheval.runfolder.conversation_views import conversation_judges, run_views

    judgments = store.judgments()
    rows = []
    for v in run_views(store, conversation_judges(judgments) or None):
        sid, model, sample = v.key
        end = v.end
        rows.append(
            {
                "scenario_id": sid,
                "model": model,
                "sample": sample,
                "judge": v.judge,
                "family": v.family,
                "language": v.language,
                "locale": v.scenario.locale if v.scenario else None,
                "risk_level": v.scenario.risk_level if v.scenario else None,
                "crisis_label": v.scenario.crisis_label if v.scenario else None,
                "mode": end.mode if end else None,
                "stop_reason": end.stop_reason if end else None,
                "status": end.status if end else None,
                "reason": end.reason.value if end and end.reason else None,
                "resumed_in_new_session": end.resumed_in_new_session if end else None,
                "turns": len(v.exchanges),
                "risk_source": v.truth.source,
                "disclosure_turn": v.truth.disclosure_turn,
                "retract_turn": v.truth.retract_turn,
                "unsafe": v.verdict.unsafe,
                "handled_risk": v.verdict.handled_risk,
                "reasons": list(v.verdict.reasons),
                "unsafe_turns": sorted(v.unsafe_turns),
                "expectations": {k: o.as_dict() for k, o in v.outcomes.items()},
                "flow": v.flow.label if v.flow is not None and v.flow.status == "ok" else None,
            }
        )
    return rows


def table_frame(store: Store, table: str, *, counted: bool = False) -> pd.DataFrame:
    """One table of the run as a DataFrame (the analyses' view; exports type their columns with `typed_frame`)."""
    return pd.DataFrame(table_rows(store, table, counted=counted))


def export_table(
    store: Store, table: str, fmt: str, output: str | Path | None = None, *, overwrite: bool = False
) -> str | None:
    """Write one table as JSONL, CSV or Parquet, or its conversations as chat messages (`messages`), to
    `output` (and return None), or return the text when `output` is None.

    Nested fields (turns, scores, evidence) stay nested in JSONL and Parquet, and are JSON strings
    in CSV; CSV text cells that a spreadsheet would run as formulas are prefixed with `'`. `output`
    is refused when it is a run's own file, or exists without `overwrite`; it is checked before
    anything is read and written through a temporary file, so a failure leaves no half file.
    """
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}", field="format", choices=FORMATS)
    if table not in TABLES:
        raise InputError(f"unknown table {table!r}", field="table", choices=TABLES)
    if fmt == "messages" and table not in MESSAGE_TABLES:
        raise InputError(
            f"the messages format writes conversations, and the {table} table holds none",
            field="table",
            choices=MESSAGE_TABLES,
        )
    if fmt == "parquet" and output is None:
        raise InputError("parquet is binary: give --output FILE", field="output")
    if output is not None:
        check_output(output, overwrite=overwrite)
    if fmt == "messages":
        return _emit(messages_text(store), output)
    rows = table_rows(store, table)
    if fmt == "jsonl":
        return _emit(jsonl_text(rows), output)
    if fmt == "csv":
        return _emit(csv_text(typed_frame(rows)), output)
    assert output is not None
    with atomic_path(output) as tmp:
        frame_for_parquet(typed_frame(rows)).to_parquet(tmp, index=False)
    return None


def jsonl_text(rows: Iterable[dict[str, Any]]) -> str:
    """Rows as strict JSON Lines: a missing or not-a-number value is null, never NaN or Infinity."""
    return "".join(json.dumps(_strict(row), ensure_ascii=False, allow_nan=False, default=str) + "\n" for row in rows)


def _strict(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v) for v in value]
    return value


def typed_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows as a DataFrame whose whole-number columns stay whole numbers when some rows are empty
    (pandas' nullable Int64, where a plain frame would turn them into floats with NaN)."""
    frame = pd.DataFrame(rows)
    for col in frame.columns:
        values = [row.get(col) for row in rows]
        present = [v for v in values if v is not None]
        if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
            frame[col] = pd.array(values, dtype="Int64")
        elif present and len(present) < len(values) and all(isinstance(v, bool) for v in present):
            frame[col] = pd.array(values, dtype="boolean")  # true / false / missing (a verdict not measurable)
    return frame


def messages_text(store: Store) -> str:
    """Each stored conversation as one JSON line in the OpenAI chat format, its turns in order:
    {"messages": [{"role": "user", ...}, {"role": "assistant", ...}, ...], "metadata": {...}}.

    A turn the target did not answer (its call failed) ends the messages on that user turn, so roles
    always alternate. The metadata names the conversation and how it ended (null while it is unfinished).
    """
    exchanges = store.exchanges()
    if not exchanges:
        raise InputError("this run has no multi-turn conversations to write as messages", field="format")
    scenarios = {s.id: s for s in store.scenarios()}
    ends = {(c.scenario_id, c.model, c.sample): c for c in store.conversations()}
    grouped: dict[tuple[str, str, int], list[Exchange]] = {}
    for e in exchanges:
        grouped.setdefault((e.scenario_id, e.model, e.sample), []).append(e)
    lines = []
    for key, turns in grouped.items():
        messages: list[dict[str, str]] = []
        for e in sorted(turns, key=lambda e: e.turn):
            messages.append({"role": "user", "content": e.user})
            if e.reply is None:
                break
            messages.append({"role": "assistant", "content": e.reply})
        scenario, end = scenarios.get(key[0]), ends.get(key)
        metadata = {
            "scenario_id": key[0],
            "model": key[1],
            "sample": key[2],
            "turns": len(turns),
            "language": scenario.language if scenario else None,
            "locale": scenario.locale if scenario else None,
            "family": scenario.family if scenario else None,
            "risk_level": scenario.risk_level if scenario else None,
            "crisis_label": scenario.crisis_label if scenario else None,
            "mode": end.mode if end else None,
            "stop_reason": end.stop_reason if end else None,
            "status": end.status if end else None,
            "reason": end.reason if end else None,
            "resumed_in_new_session": end.resumed_in_new_session if end else None,
            "error": turns[-1].error,
        }
        lines.append({"messages": messages, "metadata": metadata})
    return jsonl_text(lines)


def csv_text(frame: pd.DataFrame) -> str:
    """A frame as CSV for spreadsheets: nested values as JSON, formula-like text neutralised.

    Rows end in CRLF, as RFC 4180 has them: the writer quotes a cell that holds a character of the row ending,
    so a lone carriage return in a text is quoted too (with LF endings it went out bare, and a reader split
    the row there)."""
    flat = frame.copy()
    for col in flat.columns:
        if flat[col].map(lambda v: isinstance(v, dict | list)).any():
            flat[col] = flat[col].map(lambda v: json.dumps(v, ensure_ascii=False))
    buffer = io.StringIO()
    csv_safe_frame(flat).to_csv(buffer, index=False, lineterminator="\r\n")
    return buffer.getvalue()


def frame_for_parquet(frame: pd.DataFrame) -> pd.DataFrame:
    """Parquet wants one type per column: dicts with varying keys become JSON strings."""
    out = frame.copy()
    for col in ("scores", "evidence", "metadata", "turns", "expectations"):
        if col in out.columns:
            out[col] = out[col].map(lambda v: json.dumps(v, ensure_ascii=False))
    return out


def _emit(text: str, output: str | Path | None) -> str | None:
    """The text when there is no `output`, else None once it is written there."""
    if output is None:
        return text
    atomic_write(output, text)
    return None
