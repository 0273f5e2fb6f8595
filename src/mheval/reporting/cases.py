"""The worst cases of a run, ready to show: conversation, response, each judge's verdict and evidence.

Every text that came from a user, a model or a judge is HTML-escaped here before it meets markup; the
only tags added are `<mark>` around evidence spans, so a response that contains HTML shows as text.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from markupsafe import Markup, escape

from mheval.labels import CRISIS_TRIAGE, PSYCRISIS
from mheval.records import Judgment
from mheval.reporting.metrics import first_scored, score_value
from mheval.reporting.overview import reason_kind
from mheval.reporting.rundata import UNLABELLED, RunData, category_name
from mheval.reporting.worst import DEFAULT_WORST, Ranked, reply_scores, severity, worst_first

_ELLIPSIS = re.compile(r"\.{3,}|…+")
# A text longer than PREVIEW_CHARS shows its beginning and the rest behind a click; at most FULL_CHARS
# of it enter the page (the store keeps at most max_reply_chars, 64 KB by default, of a reply).
PREVIEW_CHARS = 2_000
FULL_CHARS = 65_536
QUOTE_CHARS = 1_000
_QUOTE_CHARS = "\"'“”‘’「」『』"


def _pattern(piece: str) -> re.Pattern[str] | None:
    tokens = piece.strip().strip(_QUOTE_CHARS).split()
    if not tokens:
        return None
    return re.compile(r"\s+".join(re.escape(t) for t in tokens), re.IGNORECASE)


def evidence_spans(text: str, quotes: list[str]) -> list[tuple[int, int]]:
    """Merged (start, end) spans of `text` matching the quotes (case and runs of whitespace ignored)."""
    spans: list[tuple[int, int]] = []
    for quote in quotes:
        for piece in _ELLIPSIS.split(quote):
            pattern = _pattern(piece)
            if pattern is None:
                continue
            spans.extend(m.span() for m in pattern.finditer(text) if m.end() > m.start())
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _marked(text: str, spans: list[tuple[int, int]], start: int, end: int) -> str:
    """text[start:end] escaped, with the parts of `spans` inside it wrapped in <mark>."""
    out: list[str] = []
    pos = start
    for a, b in spans:
        a, b = max(a, start), min(b, end)
        if a >= b:
            continue
        out.append(str(escape(text[pos:a])))
        out.append(f"<mark>{escape(text[a:b])}</mark>")
        pos = b
    out.append(str(escape(text[pos:end])))
    return "".join(out)


def highlight(text: str, quotes: list[str]) -> Markup:
    """`text` escaped, with the evidence spans wrapped in <mark>."""
    return Markup(_marked(text, evidence_spans(text, quotes), 0, len(text)))


def shown(text: str, quotes: list[str], *, preview: int = PREVIEW_CHARS, limit: int = FULL_CHARS) -> Markup:
    """A long text as the report shows it: its beginning, and the rest one click away (<details>).

    At most `limit` characters enter the page (a misbehaving server's 50 MB reply must not make a
    50 MB report); the count of those left out is said, with where to find them.
    """
    quotes = [q[:QUOTE_CHARS] for q in quotes]
    kept = text[:limit]
    spans = evidence_spans(kept, quotes)
    if len(text) <= preview:
        return Markup(_marked(kept, spans, 0, len(kept)))
    parts = [
        _marked(kept, spans, 0, preview),
        "…",
        f'<details class="more"><summary>show the whole text ({len(text):,} characters)</summary>',
        _marked(kept, spans, preview, len(kept)),
    ]
    if len(text) > limit:
        parts.append(
            f'<p class="note">… {len(text) - limit:,} more characters are not in this report: '
            "<code>mheval export RUN --table responses</code> has them all.</p>"
        )
    parts.append("</details>")
    return Markup("".join(parts))


def clip(text: str | None, limit: int = QUOTE_CHARS) -> str | None:
    """A short text (an error, a quote) cut to `limit` characters, marked with an ellipsis."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


@dataclass
class Verdict:
    protocol: str
    judge: str
    summary: str
    status: str
    reason: str | None
    rationale: Markup | None  # escaped, with the judge's own quotes marked
    evidence: dict[str, list[str]]
    flags: list[str]


@dataclass
class WorstCase:
    rank: int
    case_id: str
    model: str
    sample: int
    category: str
    category_name: str
    language: str
    appropriateness: float | None
    psycrisis_total: float | None
    turns: list[dict[str, Any]] = field(default_factory=list)  # role, html
    response_html: Markup | None = None
    error: str | None = None
    truncated: bool = False  # the run stored only the beginning of the reply (max_reply_chars)
    verdicts: list[Verdict] = field(default_factory=list)


def _summary(j: Judgment) -> str:
    if j.status != "ok":
        return f"unscored ({j.reason_text})"
    if j.label is not None:
        return f"label {j.label}"
    value = score_value(j)
    if j.protocol == PSYCRISIS and value is not None:
        met = [k for k, v in j.scores.items() if v >= 1]
        return f"total {value:g}/5" + (f" (met: {', '.join(met)})" if met else " (none met)")
    if value is not None:
        return f"score {value:g}"
    return ", ".join(f"{k} {v:g}" for k, v in j.scores.items())


def _quotes(j: Judgment) -> list[str]:
    return [q for qs in j.evidence.values() for q in qs]


def _evidence(j: Judgment, redact: bool) -> dict[str, list[str]]:
    if redact:  # quotes are pieces of the conversation or the response
        return {d: [f"{len(q)} quote(s) redacted"] for d, q in j.evidence.items() if q}
    return {d: [clip(x) or "" for x in q] for d, q in j.evidence.items() if q}


def worst_cases(run: RunData, n: int = DEFAULT_WORST, *, redact: bool = False) -> list[WorstCase]:
    """The `n` worst judged responses, in reporting/worst.py's one order (the verdict block quotes the first of
    each model): unsafe by verdict.py first, then lower appropriateness and PsyCrisis. A reply judged by
    several judges ranks by the judge that saw it worst."""
    from mheval.reporting.verdict_block import crisis_labels
    from mheval.verdict import reply_verdicts

    labels = crisis_labels(run)
    machine = [j for j in run.judgments if j.model is not None and not j.judge.startswith("human:")]
    verdict_of = {(v.case_id, v.model, v.sample, v.judge): v for v in reply_verdicts(machine, labels)}
    by_reply: dict[tuple[str, str, int, str], list[Judgment]] = defaultdict(list)
    for j in machine:
        by_reply[(j.case_id, j.model or "", j.sample or 0, j.judge)].append(j)
    by_unit: dict[tuple[str, str, int], list[Judgment]] = defaultdict(list)
    for j in first_scored(machine):
        by_unit[(j.case_id, j.model or "", j.sample or 0)].append(j)
    candidates = []
    for key, items in by_unit.items():
        scores: dict[str, list[float]] = defaultdict(list)
        for j in items:
            value = score_value(j)
            if value is not None:
                scores[j.protocol].append(value)
        judges = dict.fromkeys(j.judge for j in items)
        worst = min(severity(verdict_of.get((*key, judge)), reply_scores(by_reply[(*key, judge)])) for judge in judges)
        candidates.append(Ranked(worst, (key[0], key[2]), labels.get(key[0]), key[1], (key, scores)))
    ranked = worst_first(candidates, n)
    responses = {(r.case_id, r.model, r.sample): r for r in run.responses}
    triage = defaultdict(list)
    for j in run.of(CRISIS_TRIAGE):
        triage[j.case_id].append(j)
    unit_judgments = defaultdict(list)
    for j in run.judgments:
        if j.model is not None:
            unit_judgments[(j.case_id, j.model, j.sample or 0)].append(j)

    out = []
    for rank, (key, scores) in enumerate(ranked, start=1):
        case_id, model, sample = key
        case = run.cases.get(case_id)
        category = run.category.get(case_id, UNLABELLED)
        item = WorstCase(
            rank=rank,
            case_id=case_id,
            model=model,
            sample=sample,
            category=category,
            category_name=category_name(category),
            language=case.language if case else "en",
            appropriateness=min(scores["appropriateness"]) if scores.get("appropriateness") else None,
            psycrisis_total=min(scores["psycrisis"]) if scores.get("psycrisis") else None,
        )
        case_verdicts = sorted(triage.get(case_id, []), key=lambda j: (j.judge, j.repeat))
        resp_verdicts = sorted(unit_judgments[key], key=lambda j: (j.protocol, j.judge, j.repeat))
        for j in [*case_verdicts, *resp_verdicts]:
            item.verdicts.append(
                Verdict(
                    protocol=j.protocol,
                    judge=j.judge + (f" (repeat {j.repeat})" if j.repeat else ""),
                    summary=_summary(j) if not redact or j.status == "ok" else f"unscored ({reason_kind(j.reason)})",
                    status=j.status,
                    reason=reason_kind(j.reason) if redact else j.reason_text,
                    rationale=None if redact or not j.rationale else shown(j.rationale, _quotes(j)),
                    evidence=_evidence(j, redact),
                    flags=list(j.flags),
                )
            )
        response = responses.get(key)
        if response is not None and response.text is None:
            item.error = clip(response.error)
        if not redact:
            case_quotes = [q for j in case_verdicts for q in _quotes(j)]
            if case is not None:
                item.turns = [
                    {"role": t.role, "html": shown(t.content, case_quotes if t.role == "user" else [])}
                    for t in case.turns
                ]
            if response is not None and response.text is not None:
                quotes = [q for j in resp_verdicts for q in _quotes(j)]
                item.response_html = shown(response.text, quotes)
                item.truncated = response.truncated
        out.append(item)
    return out


def worst_frame(items: list[WorstCase]) -> pd.DataFrame:
    """The worst cases as a table of ids and numbers only (no texts), for the exports."""
    return pd.DataFrame(
        [
            {
                "rank": w.rank,
                "case_id": w.case_id,
                "model": w.model,
                "sample": w.sample,
                "category": w.category,
                "language": w.language,
                "appropriateness": w.appropriateness,
                "psycrisis_total": w.psycrisis_total,
                "flags": ", ".join(sorted({f for v in w.verdicts for f in v.flags})),
            }
            for w in items
        ],
        columns=[
            "rank",
            "case_id",
            "model",
            "sample",
            "category",
            "language",
            "appropriateness",
            "psycrisis_total",
            "flags",
        ],
    )


__all__ = ["DEFAULT_WORST", "WorstCase", "clip", "evidence_spans", "highlight", "shown", "worst_cases", "worst_frame"]
