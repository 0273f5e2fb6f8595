"""The verdict at the top of the report and of `mheval summary`: how many replies were unsafe, per model.

"Unsafe" is mheval.verdict's definition, never restated here: `reply_verdicts` gives one verdict per
reply and judge, and this module counts them. Per model and judge: the unsafe replies of the judged ones
with a Wilson interval, the replies the judge could not judge (unscored), those no protocol that ran can
judge (not measurable: PsyCrisis on a case that is not high risk), and the two or three worst replies with
the judge's reasons and evidence. Where no protocol that ran can find an unsafe reply (triage only,
MentalAlign only, PsyCrisis only on cases without a high-risk label), a row says why instead of a number.

The crisis label the PsyCrisis rule reads is the case's gold label, else the crisis-triage label that the
run's first judge gave the case (the same triage reporting/rundata.py uses for categories).

Multi-turn runs: `verdict_block(run, conversations=...)` takes the conversations' verdicts as a
`ConversationSection` (built from verdict.conversation_verdict by reporting/multiturn.py); it is shown
under the replies' verdict and is `"conversations"` in the JSON. `conversation_section` is the hook that
builds it from a run. When people rated whole conversations (a conversation-flow study), each row also
carries the unsafe-conversation rate corrected for the judge's errors, the figure `mheval agree
--protocol conversation-flow --corrected` gives.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from mheval.labels import (
    APPROPRIATENESS,
    CRISIS_TRIAGE,
    DIALOGUE_SAFETY,
    HIGH_RISK,
    PSYCRISIS,
    case_label,
)
from mheval.records import Judgment, Response
from mheval.reporting.rundata import RunData
from mheval.reporting.worst import Ranked, reply_scores, severity, worst_first
from mheval.stats.corrected import corrected_unsafe_rate
from mheval.stats.intervals import wilson
from mheval.verdict import DEFINITION, HARM_PROTOCOLS, ReplyVerdict, is_screen, reply_verdicts, unsafe_reason

N_WORST = 3
PROMPT_CHARS = 400  # the person's last message, as quoted beside a worst reply
REPLY_CHARS = 800  # a worst reply, as quoted (the report's worst cases show it whole)
RATIONALE_CHARS = 400
DOCS = "docs/verdict.md"
VALIDITY_DOCS = "docs/offline-judges.md"


@dataclass(frozen=True)
class WorstReply:
    """One unsafe reply, quoted with what made it unsafe."""

    case_id: str
    model: str
    sample: int
    judge: str
    language: str
    crisis_label: str | None
    reasons: tuple[str, ...]
    evidence: tuple[str, ...]  # the spans the judge quoted for the verdicts that made it unsafe
    rationale: str | None  # the first such verdict's rationale, clipped
    prompt: str | None  # the person's last message, clipped
    reply: str | None  # the reply, clipped
    reply_full: str | None = field(default=None, repr=False)  # whole, for the report's highlighting


@dataclass(frozen=True)
class ModelVerdict:
    """The verdict on one model's replies by one judge."""

    model: str
    judge: str | None
    screen: bool
    replies: int  # judged replies: a harm protocol scored them (the denominator)
    unsafe: int
    unscored: int  # the judge could not judge them (every harm verdict it tried was unscored)
    not_measurable: int  # no protocol that ran can judge them (e.g. PsyCrisis on a case not at high risk)
    failed: int  # the target gave no reply (provider error): nothing to judge
    rate: float | None
    low: float | None
    high: float | None
    protocols: tuple[str, ...]  # the harm protocols that scored this judge's verdicts
    reason: str | None  # why there is no number (None when there is one)
    caveat: str
    worst: tuple[WorstReply, ...] = ()
    # With human ratings of some of these replies: the unsafe rate corrected for the judge's errors (PPI++,
    # stats/corrected.py) as CorrectedEstimate.to_dict(); it replaces `rate` in the top line when defined.
    corrected: dict[str, Any] | None = None

    @property
    def measurable(self) -> bool:
        return self.replies > 0

    def to_dict(self, *, texts: bool = True) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "worst"}
        out["protocols"] = list(self.protocols)
        out["measurable"] = self.measurable
        out["worst"] = [_worst_dict(w, texts) for w in self.worst]
        return out


@dataclass(frozen=True)
class ConversationRow:
    """Conversations of one model judged by one judge (filled in by the multi-turn analysis)."""

    model: str
    judge: str | None
    conversations: int  # judged conversations (verdict.conversation_verdict gave True or False)
    unsafe: int
    unscored: int = 0  # conversations with no verdict (unscored, or a simulator failure)
    handled_risk: int | None = None  # conversations whose every `must` expectation was met
    handled_of: int | None = None  # conversations with a known handled_risk
    rate: float | None = None
    low: float | None = None
    high: float | None = None
    worst: tuple[dict[str, Any], ...] = ()  # scenario_id, sample, reasons, evidence (free form)
    # With people's answers to "is this conversation unsafe?" (a conversation-flow study of the run): the
    # unsafe-conversation rate corrected for the judge's errors (PPI++, as `mheval agree --corrected`), as
    # CorrectedEstimate.to_dict(); shown first, with the judge's own rate beside it.
    corrected: dict[str, Any] | None = None


@dataclass(frozen=True)
class ConversationSection:
    """The conversations' verdict: rows per model and judge, with the same caveat rules as the replies."""

    rows: tuple[ConversationRow, ...]
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [asdict(r) for r in self.rows], "note": self.note}


@dataclass(frozen=True)
class VerdictBlock:
    """The verdict of a run: the primary judge's totals pooled over models, then one row per model x judge."""

    judge: str | None  # the judge the totals are of (the run's first judge that could judge harm)
    screen: bool
    replies: int
    unsafe: int
    unscored: int
    not_measurable: int
    rate: float | None
    low: float | None
    high: float | None
    caveat: str  # one line: what the number is and is not
    reason: str | None  # why there is no number (None when there is one)
    rows: tuple[ModelVerdict, ...]
    definition: str = DEFINITION
    conversations: ConversationSection | None = None
    # The primary judge's unsafe rate over all models corrected by human ratings (ModelVerdict.corrected).
    corrected: dict[str, Any] | None = None
    # Per judge and protocol that ran: its validity card (shipped judges: measured on data they never saw,
    # read from their figures file; any other judge: not validated in this run unless people rated it).
    validity: tuple[dict[str, Any], ...] = ()

    @property
    def measurable(self) -> bool:
        return self.replies > 0

    def to_dict(self, *, texts: bool = True) -> dict[str, Any]:
        """The `"verdict"` object of `mheval summary --format json` (texts=False: ids and numbers only)."""
        return {
            "measurable": self.measurable,
            "unsafe": self.unsafe if self.measurable else None,
            "replies": self.replies,
            "unscored": self.unscored,
            "not_measurable": self.not_measurable,
            "rate": self.rate,
            "low": self.low,
            "high": self.high,
            "judge": self.judge,
            "screen": self.screen,
            "caveat": self.caveat,
            "reason": self.reason,
            "definition": self.definition,
            "docs": DOCS,
            "models": [r.to_dict(texts=texts) for r in self.rows],
            "conversations": self.conversations.to_dict() if self.conversations is not None else None,
            "corrected": self.corrected,
            "validity": list(self.validity),
        }


def _worst_dict(w: WorstReply, texts: bool) -> dict[str, Any]:
    out = {k: v for k, v in asdict(w).items() if k != "reply_full"}
    out["reasons"], out["evidence"] = list(w.reasons), list(w.evidence)
    if not texts:
        for key in ("prompt", "reply", "rationale"):
            out[key] = None
        out["evidence"] = [f"{len(w.evidence)} quote(s) redacted"] if w.evidence else []
    return out


def crisis_labels(run: RunData) -> dict[str, str | None]:
    """Case id -> the label the PsyCrisis rule reads: the gold label, else the run's triage of the case."""
    return {
        cid: case_label(
            case.crisis_label,
            run.category.get(cid) if run.category_source.get(cid) == "triage" else None,
            prefer="gold",
        )
        for cid, case in run.cases.items()
    }


def caveat(judge: str | None) -> str:
    """What a judge's verdict is worth, in one line (the validity figures themselves are not invented here)."""
    if judge is None:
        return "no judge judged the replies"
    if is_screen(judge):
        return (
            f"Screen, not a measurement: the {judge} judge reads each reply's sentences with small trained models "
            "(a harm detector that misses some harmful replies and flags some poor or incoherent ones as harmful) "
            "and the protective moves; "
            f"read the flagged replies, and use an LLM judge checked against human labels for a rate you publish "
            f"({VALIDITY_DOCS} has its figures on data it never saw)"
        )
    if judge.startswith("human:"):
        return f"Rated by {judge}"
    return (
        f"Not validated in this run: {judge} is an LLM judge; compare it with human labels (mheval agree, or a "
        "rating study) before you publish the rate"
    )


def _clip(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit].rstrip() + "…"


def _last_user(run: RunData, case_id: str) -> str | None:
    case = run.cases.get(case_id)
    if case is None:
        return None
    users = [t.content for t in case.turns if t.role == "user"]
    return users[-1] if users else None


def _worst(
    run: RunData,
    verdicts: list[ReplyVerdict],
    by_reply: dict[tuple[str, str, int, str], list[Judgment]],
    responses: dict[tuple[str, str, int], Response],
    labels: dict[str, str | None],
    n: int,
) -> tuple[WorstReply, ...]:
    """The `n` worst unsafe replies, in reporting/worst.py's one order (the report's Worst cases use it too)."""
    candidates = []
    for v in verdicts:
        if not v.unsafe:
            continue
        judgments = by_reply.get((v.case_id, v.model, v.sample, v.judge), [])
        candidates.append(
            Ranked(severity(v, reply_scores(judgments)), (v.case_id, v.sample), labels.get(v.case_id), v.model,
                   (v, judgments))
        )  # fmt: skip
    picked = worst_first(candidates, n)
    out = []
    for v, judgments in picked:
        label = labels.get(v.case_id)
        order = {p: i for i, p in enumerate((APPROPRIATENESS, DIALOGUE_SAFETY, PSYCRISIS))}
        why = sorted(
            (j for j in judgments if unsafe_reason(j, label) is not None and j.rationale),
            key=lambda j: order.get(j.protocol, len(order)),
        )
        rationale = why[0].rationale if why else None
        case = run.cases.get(v.case_id)
        response = responses.get((v.case_id, v.model, v.sample))
        text = response.text if response is not None else None
        out.append(
            WorstReply(
                case_id=v.case_id,
                model=v.model,
                sample=v.sample,
                judge=v.judge,
                language=case.language if case is not None else "en",
                crisis_label=label,
                reasons=v.reasons,
                evidence=v.evidence,
                rationale=_clip(rationale, RATIONALE_CHARS),
                prompt=_clip(_last_user(run, v.case_id), PROMPT_CHARS),
                reply=_clip(text, REPLY_CHARS),
                reply_full=text,
            )
        )
    return tuple(out)


def _why_not(
    run: RunData, judge: str | None, protocols: set[str], labels: dict[str, str | None], verdicts: list[ReplyVerdict]
) -> str:
    """Why a model x judge has no judged reply, in one sentence."""
    if not run.responses:
        return "no reply was generated in this run"
    harm = [p for p in HARM_PROTOCOLS if p in protocols]
    if not harm:
        ran = ", ".join(sorted(protocols | ({CRISIS_TRIAGE} if run.of(CRISIS_TRIAGE) else set()))) or "none"
        return (
            f"not measurable: no protocol that ran can find an unsafe reply (protocols: {ran}); add appropriateness "
            "(the offline judge scores it) or dialogue-safety"
        )
    unscored = Counter(u for v in verdicts for u in v.unscored)
    if unscored and not any(v.unsafe is not None for v in verdicts):
        found = ", ".join(f"{k} {c}" for k, c in unscored.most_common())
        return f"not measurable: every verdict of {judge} on these replies was unscored ({found})"
    if harm == [PSYCRISIS]:
        high = sum(1 for label in labels.values() if label in HIGH_RISK)
        return (
            "not measurable: only PsyCrisis judged the replies, and it can find an unsafe reply only for a person at "
            f"high risk (suicidal ideation or self-harm); {high} of {len(labels)} case(s) have such a label (gold, "
            "else triage). Add appropriateness or dialogue-safety"
        )
    return "not measurable: no harm verdict was given on these replies"


def verdict_block(
    run: RunData, *, n_worst: int = N_WORST, conversations: ConversationSection | None = None
) -> VerdictBlock:
    """The verdict of a run (see the module docstring). Texts are kept; the renderers leave them out when redacting."""
    labels = crisis_labels(run)
    judgments = [j for j in run.judgments if not j.judge.startswith("human:")]
    verdicts = reply_verdicts(judgments, labels)
    by_reply: dict[tuple[str, str, int, str], list[Judgment]] = {}
    reply_protocols: dict[tuple[str, str], set[str]] = {}
    for j in judgments:
        if j.model is None or j.repeat != 0:
            continue
        by_reply.setdefault((j.case_id, j.model, j.sample or 0, j.judge), []).append(j)
        reply_protocols.setdefault((j.model, j.judge), set()).add(j.protocol)
    responses = {(r.case_id, r.model, r.sample): r for r in run.responses}
    failed = Counter(r.model for r in run.responses if r.text is None)

    judges = [j for j in run.judges if not j.startswith("human:")]
    pairs: list[tuple[str, str | None]] = []
    for model in run.models:
        theirs: list[str | None] = [j for j in judges if (model, j) in reply_protocols]
        pairs.extend((model, j) for j in (theirs or [next(iter(judges), None)]))

    rated = human_unsafe(run, labels)
    rows = []
    judged_of: dict[str | None, list[ReplyVerdict]] = {}
    for model, judge in pairs:
        mine = [v for v in verdicts if v.model == model and v.judge == judge]
        judged = [v for v in mine if v.unsafe is not None]
        judged_of.setdefault(judge, []).extend(judged)
        unsafe = sum(1 for v in judged if v.unsafe)
        estimate = wilson(unsafe, len(judged))
        protocols = reply_protocols.get((model, judge), set()) if judge is not None else set()
        scored = {j.protocol for v in judged for j in by_reply.get((v.case_id, model, v.sample, v.judge), [])}
        rows.append(
            ModelVerdict(
                model=model,
                judge=judge,
                screen=judge is not None and is_screen(judge),
                replies=len(judged),
                unsafe=unsafe,
                unscored=sum(1 for v in mine if v.unsafe is None and v.unscored),
                not_measurable=sum(1 for v in mine if v.unsafe is None and not v.unscored),
                failed=failed.get(model, 0),
                rate=estimate.value,
                low=estimate.ci_low,
                high=estimate.ci_high,
                protocols=tuple(p for p in HARM_PROTOCOLS if p in scored),
                reason=None if judged else _why_not(run, judge, protocols, labels, mine),
                caveat=caveat(judge),
                worst=_worst(run, mine, by_reply, responses, labels, n_worst),
                corrected=_corrected(judged, rated),
            )
        )
    primary = next((r.judge for r in rows if r.measurable), rows[0].judge if rows else None)
    top = [r for r in rows if r.judge == primary]
    replies, unsafe = sum(r.replies for r in top), sum(r.unsafe for r in top)
    estimate = wilson(unsafe, replies)
    reason = None
    if not replies:
        reasons = list(dict.fromkeys(r.reason for r in top if r.reason))
        dialogue = getattr(run, "dialogue", None)  # a multi-turn run's conversations (reporting/rundata.py)
        if not reasons and dialogue is not None and dialogue.conversations:
            reasons = ["the replies of this run are turns of conversations: their verdict is in the multi-turn section"]
        reason = "; ".join(reasons) if reasons else "not measurable: the run has no replies to judge"
    return VerdictBlock(
        judge=primary,
        screen=primary is not None and is_screen(primary),
        replies=replies,
        unsafe=unsafe,
        unscored=sum(r.unscored for r in top),
        not_measurable=sum(r.not_measurable for r in top),
        rate=estimate.value,
        low=estimate.ci_low,
        high=estimate.ci_high,
        caveat=caveat(primary),
        reason=reason,
        rows=tuple(rows),
        conversations=conversations,
        corrected=_corrected(judged_of.get(primary, []), rated),
        validity=validity_cards(run, judges, bool(rated)),
    )


def validity_cards(run: RunData, judges: list[str], rated: bool) -> tuple[dict[str, Any], ...]:
    """How far each judge of the run can be trusted, per protocol it judged."""
    from mheval.judges.offline.validity import validity_card

    cards = []
    for judge in judges:
        for protocol in sorted({j.protocol for j in run.judgments if j.judge == judge}):
            card = validity_card(judge, protocol)
            if card is None:
                note = (
                    "people rated some of its units: `mheval agree` measures it against them"
                    if rated
                    else "not validated in this run: rate a sample (`mheval annotate`) or `mheval agree` on your labels"
                )
                card = {"judge": judge, "protocol": protocol, "figures": [], "trained_on": [], "note": note}
            cards.append(card)
    return tuple(cards)


def human_unsafe(run: RunData, labels: Mapping[str, str | None]) -> dict[tuple[str, str, int], float]:
    """Per reply rated by people (judgments `human:<rater>` in the run, or ratings of its `mheval annotate`
    studies, read with the run): the share of its raters whose ratings make it unsafe under verdict.py's one
    definition."""
    humans = [j for j in run.judgments if j.judge.startswith("human:")]
    for study in run.studies:
        humans += study.judgments
    shares: dict[tuple[str, str, int], list[float]] = {}
    for v in reply_verdicts(humans, labels):
        if v.unsafe is not None:
            shares.setdefault((v.case_id, v.model, v.sample), []).append(float(v.unsafe))
    return {k: sum(v) / len(v) for k, v in shares.items()}


def _corrected(judged: list[ReplyVerdict], rated: Mapping[tuple[str, str, int], float]) -> dict[str, Any] | None:
    """The judge's unsafe rate corrected by the human ratings of some of its replies (PPI++), or None."""
    keys = [(v.case_id, v.model, v.sample) for v in judged]
    if not any(k in rated for k in keys):
        return None
    judge = np.array([1.0 if v.unsafe else 0.0 for v in judged])
    human = np.array([rated.get(k, np.nan) for k in keys])
    return corrected_unsafe_rate(judge, human).to_dict()


def conversation_section(run: RunData) -> ConversationSection | None:
    """The conversations' verdicts of a multi-turn run (verdict.conversation_verdict per conversation,
    counted per model and judge by reporting/multiturn.py), or None for a run without conversations."""
    from mheval.reporting.multiturn import conversation_verdicts

    rows = conversation_verdicts(run)
    if not rows:
        return None
    return ConversationSection(tuple(ConversationRow(**row) for row in rows))


__all__ = [
    "ConversationRow",
    "ConversationSection",
    "ModelVerdict",
    "VerdictBlock",
    "WorstReply",
    "caveat",
    "conversation_section",
    "crisis_labels",
    "verdict_block",
]
