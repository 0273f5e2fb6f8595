"""The verdict (reporting/verdict_block.py) as the report and the summary show it: HTML context and plain text."""

from __future__ import annotations

from typing import Any

from mheval.judges.offline.validity import card_text
from mheval.reporting import formatting as f
from mheval.reporting.cases import shown
from mheval.reporting.rundata import category_name
from mheval.reporting.verdict_block import (
    DOCS,
    REPLY_CHARS,
    ConversationRow,
    ConversationSection,
    ModelVerdict,
    VerdictBlock,
    WorstReply,
)


def headline(block: VerdictBlock) -> str:
    """One sentence: the primary judge's count, or why there is none."""
    if not block.measurable:
        return f"Unsafe replies: {block.reason or 'not measurable in this run'}."
    if block.corrected and block.corrected.get("corrected") is not None:
        c = block.corrected
        return (
            f"{f.pct(c['corrected'], *(c['ci'] or (None, None)))} of replies unsafe, corrected for the judge's "
            f"errors with {c['n_human']} human-rated replies ({c['method']}, 95% interval); the judge alone: "
            f"{block.unsafe} of {block.replies} ({f.pct(block.rate, block.low, block.high)}), judge {block.judge}"
        )
    text = (
        f"{block.unsafe} of {block.replies} judged replies unsafe "
        f"({f.pct(block.rate, block.low, block.high)}, 95% Wilson interval)"
    )
    if len(block.rows) > 1:
        text += f", all models, judge {block.judge}"
    else:
        text += f", judge {block.judge}"
    return text + (" · a screen, not a measurement" if block.screen else "")


def row_count(r: ModelVerdict) -> str:
    """`3 of 40 unsafe (8% [3–20%])`, or the reason there is no number."""
    if not r.measurable:
        return r.reason or "not measurable"
    text = f"{r.unsafe} of {r.replies} unsafe ({f.pct(r.rate, r.low, r.high)})"
    c = r.corrected
    if c and c.get("corrected") is not None:
        text += f"; corrected with {c['n_human']} human ratings: {f.pct(c['corrected'], *(c['ci'] or (None, None)))}"
    return text


def row_notes(r: ModelVerdict) -> list[str]:
    """What the count leaves out: unscored, not measurable and failed replies."""
    notes = []
    if r.unscored:
        notes.append(f"{r.unscored} could not be judged (unscored)")
    if r.not_measurable and r.measurable:
        notes.append(
            f"{r.not_measurable} not measurable (only PsyCrisis judged them, and the person is not at high risk)"
        )
    if r.failed:
        notes.append(f"{r.failed} failed at the provider (no reply)")
    return notes


def _worst_html(w: WorstReply, redact: bool) -> dict[str, Any]:
    return {
        "case_id": w.case_id,
        "sample": w.sample,
        "language": w.language,
        "category": category_name(w.crisis_label) if w.crisis_label else "no crisis label",
        "reasons": list(w.reasons),
        "evidence": [] if redact else list(w.evidence),
        "evidence_redacted": len(w.evidence) if redact else 0,
        "rationale": None if redact else w.rationale,
        "prompt": None if redact else w.prompt,
        "reply_html": None
        if redact or w.reply_full is None
        else shown(w.reply_full, list(w.evidence), preview=REPLY_CHARS),
    }


def html_context(block: VerdictBlock, *, redact: bool = False) -> dict[str, Any]:
    """What verdict.html.j2 renders."""
    return {
        "measurable": block.measurable,
        "headline": headline(block),
        "validity": [card_text(c) for c in block.validity],
        "caveat": block.caveat,
        "screen": block.screen,
        "definition": block.definition,
        "docs": DOCS,
        "rows": [
            {
                "model": r.model,
                "judge": r.judge or "no judge",
                "screen": r.screen,
                "measurable": r.measurable,
                "count": row_count(r),
                "rate": r.rate,
                "notes": row_notes(r),
                "protocols": ", ".join(r.protocols),
                "caveat": r.caveat,
                "worst": [_worst_html(w, redact) for w in r.worst],
                "none_unsafe": r.measurable and r.unsafe == 0,
            }
            for r in block.rows
        ],
        "several_judges": len({r.judge for r in block.rows}) > 1,
        "conversations": block.conversations,
        "conversation_counts": [conversation_count(c) for c in block.conversations.rows]
        if block.conversations is not None
        else [],
        "redact": redact,
    }


def _quote(text: str | None) -> str:
    return "“" + " ".join((text or "").split()) + "”"


def verdict_text(block: VerdictBlock) -> str:
    """The verdict as plain text lines for `mheval summary` (indented under its title)."""
    lines = [f"Verdict: {headline(block)}"]
    if block.measurable or block.screen:
        lines.append(f"  caveat: {block.caveat}")
    lines.append(f"  {block.definition} ({DOCS})")
    for card in block.validity:
        lines.append("  validity: " + card_text(card).replace("\n", "\n  "))
    for r in block.rows:
        judge = f" · judge {r.judge}" if r.judge else ""
        lines.append(f"  {r.model}{judge}: {row_count(r)}")
        notes = row_notes(r)
        if notes:
            lines.append(f"    ({'; '.join(notes)})")
        if r.measurable and not r.unsafe:
            lines.append("    no reply was unsafe")
        for i, w in enumerate(r.worst, start=1):
            label = w.crisis_label.replace("_", " ") if w.crisis_label else "no crisis label"
            lines.append(f"    worst {i}: {w.case_id} (sample {w.sample}, {w.language}, {label})")
            if w.prompt is not None:
                lines.append(f"      person: {_quote(w.prompt)}")
            if w.reply is not None:
                lines.append(f"      reply:  {_quote(w.reply)}")
            lines.append(f"      why:    {'; '.join(w.reasons)}")
            if w.evidence:
                lines.append(f"      evidence: {'; '.join(_quote(e) for e in w.evidence)}")
    conv = block.conversations
    if conv is not None:
        lines += conversation_lines(conv)
        if conv.note:
            lines.append(f"  ({conv.note})")
    return "\n".join(f.wrap(line) for text in lines for line in text.split("\n"))


def conversation_lines(conv: ConversationSection) -> list[str]:
    """Per model and judge: how many conversations were unsafe, with the interval (or not measurable)."""
    lines = []
    for c in conv.rows:
        count = conversation_count(c) if c.conversations else "conversations: not measurable"
        lines.append(f"  {c.model}{f' · judge {c.judge}' if c.judge else ''}: {count}")
    return lines


def conversation_count(c: ConversationRow) -> str:
    """`2 of 8 conversations unsafe (25% [7–59%])`; with people's ratings of some of them, the corrected rate
    first and the judge's own count beside it, worded as the replies' corrected headline."""
    if not c.conversations:
        return "not measurable"
    judge_alone = f"{c.unsafe} of {c.conversations}"
    k = c.corrected
    if k and k.get("corrected") is not None:
        return (
            f"{f.pct(k['corrected'], *(k['ci'] or (None, None)))} of conversations unsafe, corrected for the "
            f"judge's errors with {k['n_human']} human-rated conversations ({k['method']}, 95% interval); the "
            f"judge alone: {judge_alone} ({f.pct(c.rate, c.low, c.high)})"
        )
    return f"{judge_alone} conversations unsafe ({f.pct(c.rate, c.low, c.high)})"


def verdict_brief(block: VerdictBlock) -> str:
    """The verdict in a few lines, as a run ends with it: the headline, per model the unsafe replies of N with
    the interval and the worst reply's id, and the caveat (`mheval summary` has the whole verdict)."""
    lines = [f"Verdict: {headline(block)}"]
    for r in block.rows:
        judge = f" · judge {r.judge}" if r.judge else ""
        worst = f"; worst reply: {r.worst[0].case_id} (sample {r.worst[0].sample})" if r.worst else ""
        lines.append(f"  {r.model}{judge}: {row_count(r)}{worst}")
        notes = row_notes(r)
        if notes:
            lines.append(f"    ({'; '.join(notes)})")
    if block.conversations is not None:
        lines += conversation_lines(block.conversations)
    if block.measurable or block.screen:
        lines.append(f"  caveat: {block.caveat}")
    return "\n".join(f.wrap(line) for line in lines)


__all__ = ["conversation_count", "headline", "html_context", "row_count", "row_notes", "verdict_brief", "verdict_text"]
