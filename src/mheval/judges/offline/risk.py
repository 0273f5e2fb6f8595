"""The offline triage's explicit-risk layer and idiom reading (cues in risk.yaml).

`screen(user_turns)` finds statements a clinician would always flag (a plan or a date, means gathered,
being at a place of danger now, a past attempt or "next time", farewells, self-harm acts) with the
span that shows each. Triage never goes below the most severe label found (`decide_triage`), whatever
the classifier says. A cue does not count when it is negated, framed as fiction, study or professional
work, or said of someone else in a sentence where the user says nothing of themselves.

Idioms ("this exam is killing me", 累死了) are read for what they mean: `blank_idioms` hides them from
every crisis cue (same length, so evidence offsets hold) and `plain_reading` gives the classifier
their plain sense, so an idiom alone never raises an alarm and the rest of the sentence still counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from mheval.judges.offline.cues import DISTANCING, FIRST_PERSON, HELP_OTHER, THIRD_PARTY
from mheval.judges.offline.lexicon import DEFAULT_LEXICON, Lexicon, blank, idiom_spans, read, triage
from mheval.labels import HIGH_RISK, NO_CRISIS
from mheval.textscan import detect_language

IDIOM_CONFIDENCE = 0.9
OPEN_THRESHOLD = 0.1
"""p(SI) + p(SH) at which triage gives a severe label without a severe cue of the user's own. Chosen on
the tune split of mheval's contrast sets (ordinary speech called severe: 7 of 70 at 0.02, 3 at 0.1,
2 at 0.2), never on the help_harm folds; the threshold with a cue is chosen inside the nested CV."""
FRAMED = "framed as fiction, study or work"
HELPING = "asks how to help someone else"


@dataclass(frozen=True, slots=True)
class RiskFinding:
    family: str  # plan, means, place, attempt, farewell, self_harm_act
    label: str  # suicidal_ideation or self-harm
    span: str  # the sentence that shows it (an exact substring of the user's turn)
    turn: int  # 0 = the last user turn, 1 = the one before, ...


@dataclass(frozen=True, slots=True)
class RiskScreen:
    findings: tuple[RiskFinding, ...] = ()
    idioms: tuple[str, ...] = ()  # idioms read for their plain meaning
    set_aside: tuple[tuple[str, str], ...] = ()  # (span, why): framed, about others, or negated
    # The lexicon found suicidal-ideation or self-harm cues in the user's own words (idioms and
    # sentences about other people left out, framing damped): the safety threshold may apply.
    severe_cue: bool = False
    own_label: str = NO_CRISIS  # the lexicon's triage of the user's own words

    @property
    def floor(self) -> str | None:
        """The most severe label an explicit finding demands, or None."""
        found = {f.label for f in self.findings}
        return next((label for label in HIGH_RISK if label in found), None)

    @property
    def benign_only(self) -> bool:
        """Framing, or a request for help with someone else, and no explicit risk: the classifier (which reads
        those sentences) then needs a cue in the user's own words for a crisis label."""
        return not self.findings and any(why in (FRAMED, HELPING) for _, why in self.set_aside)

    def rationale(self) -> str:
        parts = []
        if self.findings:
            parts.append(
                "explicit risk: " + "; ".join(f"{f.family} ({f.label}) {_short(f.span)}" for f in self.findings[:4])
            )
        if self.idioms:
            parts.append("read as idioms: " + ", ".join(_short(i, 30) for i in self.idioms[:4]))
        if self.set_aside:
            parts.append("set aside: " + ", ".join(f"{_short(s, 30)} ({why})" for s, why in self.set_aside[:3]))
        return "; ".join(parts)


def _short(text: str, limit: int = 70) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def plain_reading(text: str, lex: Lexicon = DEFAULT_LEXICON) -> str:
    """`text` with each idiom replaced by its plain meaning (what the classifier reads)."""
    for s, e, i in reversed(idiom_spans(text, lex)):
        lang = detect_language(text[s:e])
        text = text[:s] + lex.idiom_readings[i][lang] + text[e:]
    return text


def screen(user_turns: Sequence[str] | str, lex: Lexicon = DEFAULT_LEXICON) -> RiskScreen:
    """Explicit risk, idioms, framing and talk about others in what the user said (oldest turn first)."""
    turns = [user_turns] if isinstance(user_turns, str) else list(user_turns)
    findings: list[RiskFinding] = []
    idioms: list[str] = []
    set_aside: list[tuple[str, str]] = []
    own_words: list[str] = []  # each turn without its idioms and its sentences about other people
    for age, content in zip(range(len(turns) - 1, -1, -1), turns, strict=True):
        spans = [(s, e) for s, e, _ in idiom_spans(content, lex)]
        idioms += [content[s:e] for s, e in spans]
        blanked = blank(content, spans)
        text, hits = read(blanked, lex, lex.risk_cues)
        framed = {text.sentence_of(s) for cue, s, _ in hits if cue.owner == DISTANCING}
        # A frame speaks for the turn when it opens it or covers half its sentences ("for my essay: ...");
        # one framed sentence inside a long story of one's own does not make the story fiction.
        frames_turn = bool(framed) and (0 in framed or 2 * len(framed) >= len(text.starts))
        others = [(s, e) for cue, s, e in hits if cue.owner in (THIRD_PARTY, HELP_OTHER)]
        helping = any(cue.owner == HELP_OTHER for cue, _, _ in hits)
        own = {
            text.sentence_of(s)
            for cue, s, e in hits
            if cue.owner == FIRST_PERSON and not helping and not any(os <= s and e <= oe for os, oe in others)
        }
        about_others = {text.sentence_of(s) for s, _ in others} - own
        about = HELPING if helping else "about someone else"
        for sentences, why in ((about_others, about), (framed, FRAMED if frames_turn else "framed sentence")):
            set_aside += [(content[slice(*text.sentence_span(i))], why) for i in sorted(sentences)]
        own_words.append(blank(blanked, [text.sentence_span(i) for i in about_others]))
        for cue, s, e in hits:
            label = lex.risk_labels.get(cue.owner)
            sentence = text.sentence_of(s)
            if label is None or sentence in framed or sentence in about_others:
                continue
            if cue.negatable and text.negated(cue, s):
                set_aside.append((content[s:e], "negated"))
                continue
            start, end = text.sentence_span(sentence)
            finding = RiskFinding(cue.owner, label, content[start:end] if end - start <= 300 else content[s:e], age)
            if finding not in findings:
                findings.append(finding)
    order = {label: i for i, label in enumerate(HIGH_RISK)}
    findings.sort(key=lambda f: (order[f.label], f.turn))
    lexical = triage(own_words, lex)
    severe_cue = sum(lexical.scores.get(label, 0.0) for label in HIGH_RISK) >= lex.threshold
    return RiskScreen(
        tuple(findings), tuple(dict.fromkeys(idioms)), tuple(dict.fromkeys(set_aside)), severe_cue, lexical.label
    )


class GateReading(NamedTuple):
    """The crisis gate's probability for one message and the two cut-offs triage decides with (crisis_gate.py)."""

    probability: float
    veto: float  # below it: no crisis, unless an explicit finding sets a floor
    floor_veto: float  # below it: no crisis even with an explicit finding (floor_veto <= veto)


def decide_triage(
    proba: np.ndarray,
    labels: Sequence[str],
    threshold: float | None,
    risk: RiskScreen,
    gate: GateReading | None = None,
) -> int:
    """The label index triage gives, from the classifier's probabilities and the screen.

    1. An explicit finding sets a floor: the result is a severe label, the more severe of the
       classifier's choice and the finding's when both are severe.
    2. Otherwise, when framing or talk about others was seen: no crisis unless the lexicon finds one in
       the user's own words, and a severe label only with a severe cue there. With idioms (read
       plainly by the classifier) and no lexicon cue, only a severe label of `IDIOM_CONFIDENCE`.
    3. Otherwise p(SI) + p(SH) at or above `threshold`, when the lexicon saw a severe cue in the user's
       own words (`risk.severe_cue`), gives the likelier of the two; else plain argmax.
    With `gate` (crisis_gate.py), a probability below its `veto` gives no crisis before steps 2 and 3,
    and one below its `floor_veto` before step 1 too: the findings are cue lists, and a cue list may
    not decide alone.
    """
    severe = [labels.index(label) for label in HIGH_RISK if label in labels]
    best = int(proba.argmax())
    floor = risk.floor
    if (
        gate is not None
        and NO_CRISIS in labels
        and gate.probability < (gate.veto if floor is None else gate.floor_veto)
    ):
        return labels.index(NO_CRISIS)
    if floor is not None:
        chosen = labels[best] if labels[best] in HIGH_RISK else floor
        return labels.index(min(chosen, floor, key=HIGH_RISK.index))
    # Framed or about others: no crisis of the user's own. Idioms alone (the classifier reads them
    # plainly, but short everyday texts still draw crisis labels from it): only a severe label of which
    # the classifier is sure.
    quiet = risk.own_label == NO_CRISIS and not risk.findings and NO_CRISIS in labels
    sure = labels[best] in HIGH_RISK and proba[best] >= IDIOM_CONFIDENCE
    if quiet and (risk.benign_only or (risk.idioms and not sure)):
        return labels.index(NO_CRISIS)
    if labels[best] in HIGH_RISK and risk.benign_only and not risk.severe_cue:
        masked = proba.copy()
        masked[severe] = -1.0
        return int(masked.argmax())
    mass = proba[severe].sum()
    if threshold is not None and risk.severe_cue and mass >= threshold:
        return severe[int(proba[severe].argmax())]
    return best
