"""Loading the offline judge's lexicons (`common.yaml`, `triage.yaml`, `psycrisis.yaml`): every key is
checked, naming the file and the field at fault, and every pattern compiled once into a `Lexicon`."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from mheval.errors import InputError
from mheval.judges.offline.cues import (
    CONTEXTS,
    DISTANCING,
    FIRST_PERSON,
    GATES,
    HELP_OTHER,
    IDIOM,
    LANGS,
    PSYCRISIS_DIMENSIONS,
    RECOMMENDATION,
    REPLY_MOVES,
    THIRD_PARTY,
    VETO,
    Cue,
    CueSet,
)
from mheval.labels import CRISIS_LABELS, HIGH_RISK, NO_CRISIS
from mheval.textscan import TRADITIONAL_TO_SIMPLIFIED
from mheval.yamlio import load_yaml

try:  # the stdlib's own regex parser, used only to index cues; private, so a full scan is the fallback
    import re._constants as _C
    import re._parser as _re_parser
except ImportError:  # pragma: no cover - a future Python that moved them
    _C = _re_parser = None


@dataclass(frozen=True, slots=True)
class Dimension:
    name: str
    title: str
    present: str
    absent: str


@dataclass(frozen=True, slots=True, eq=False)
class Lexicon:
    """A validated, compiled set of lexicons (build one with `load_lexicon`)."""

    table: Mapping[int, str]
    en_window: int
    en_negators: frozenset[str]
    en_pseudo: re.Pattern[str]
    zh_window: int
    zh_negators: re.Pattern[str]
    zh_pseudo: re.Pattern[str]
    clause_breaks: re.Pattern[str]
    distancing_same_sentence: float
    distancing_same_turn: float
    question_en: re.Pattern[str]
    question_zh: re.Pattern[str]
    severity: tuple[str, ...]
    threshold: float
    decisive: float
    ratio: float
    turn_decay: float
    turn_floor: float
    labels: tuple[str, ...]
    dimensions: Mapping[str, Dimension]
    triage_cues: CueSet
    psycrisis_cues: CueSet
    # risk.yaml: explicit-risk families (owner = family), third-party and first-person markers, idioms
    # (owner = IDIOM + index into `idiom_readings`), and the distancing frames again.
    risk_cues: CueSet
    risk_labels: Mapping[str, str]
    idiom_readings: tuple[Mapping[str, str], ...]
    # reply.yaml: what a reply does that a reader can check (owner = the move, REPLY_MOVES)
    reply_cues: CueSet
    any_negator: re.Pattern[str]
    word_keys: frozenset[str]
    char_keys: frozenset[str]
    source: str = ""


class _Check:
    """Validation helpers that raise InputError naming the file and the field at fault."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: str, message: str, choices: Sequence[str] | None = None) -> InputError:
        return InputError(message, path=self.path, field=where or None, choices=list(choices) if choices else None)

    def mapping(self, value: Any, where: str, required: Sequence[str], optional: Sequence[str] = ()) -> dict:
        if not isinstance(value, dict):
            raise self.fail(where, "expected a mapping")
        allowed = [*required, *optional]
        for key in value:
            if key not in allowed:
                raise self.fail(f"{where}.{key}".lstrip("."), "unknown key", choices=allowed)
        for key in required:
            if key not in value:
                raise self.fail(f"{where}.{key}".lstrip("."), "missing")
        return value

    def number(self, value: Any, where: str, lo: float, hi: float = math.inf, lo_open: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(where, f"expected a number, got {value!r}")
        if value < lo or value > hi or (lo_open and value == lo):
            raise self.fail(where, f"{value} is out of range ({'(' if lo_open else '['}{lo}, {hi}])")
        return float(value)

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, f"expected a non-empty string, got {value!r}")
        return value

    def strings(self, value: Any, where: str) -> list[str]:
        return self._each(value, where, "strings", self.text)

    def pattern(self, value: Any, where: str) -> str:
        text = self.text(value, where)
        try:
            compiled = re.compile(text, re.IGNORECASE)
        except re.error as exc:
            raise self.fail(where, f"bad regular expression {text!r}: {exc}") from exc
        if compiled.groups:
            raise self.fail(where, f"{text!r} has a capturing group; write (?:...) instead")
        if compiled.fullmatch(""):
            raise self.fail(where, f"{text!r} matches the empty string")
        return text

    def patterns(self, value: Any, where: str) -> list[str]:
        return self._each(value, where, "patterns", self.pattern)

    def _each(self, value: Any, where: str, what: str, check: Callable[[Any, str], str]) -> list[str]:
        """A non-empty list, each item checked by `check` under its own index (`where[i]`)."""
        if not isinstance(value, list) or not value:
            raise self.fail(where, f"expected a non-empty list of {what}")
        return [check(v, f"{where}[{i}]") for i, v in enumerate(value)]

    def flag(self, value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(where, f"expected true or false, got {value!r}")
        return value

    def choice(self, value: Any, where: str, choices: Sequence[str]) -> str:
        if value not in choices:
            raise self.fail(where, f"unknown value {value!r}", choices=choices)
        return value

    def version(self, doc: dict) -> None:
        if doc.get("version") != 1:
            raise self.fail("version", f"unsupported lexicon version {doc.get('version')!r}", choices=["1"])

    def pairs(self, value: Any, where: str) -> dict[int, str]:
        chars = re.sub(r"\s", "", self.text(value, where))
        if len(chars) % 2:
            raise self.fail(where, "expected pairs of characters (from, to); the count is odd")
        table: dict[int, str] = {}
        for i in range(0, len(chars), 2):
            src, dst = chars[i], chars[i + 1]
            if table.get(ord(src), dst) != dst:
                raise self.fail(where, f"{src!r} is mapped twice, to {table[ord(src)]!r} and {dst!r}")
            table[ord(src)] = dst
        return table


def _alternation(patterns: Sequence[str]) -> str:
    return "|".join(f"(?:{p})" for p in patterns)


def _cues(check: _Check, group: dict, where: str, owner: str, **meta: Any) -> list[Cue]:
    langs = [lang for lang in LANGS if lang in group]
    if not langs:
        raise check.fail(where, "a group needs at least one of en, zh, any")
    return [
        Cue(pattern=p, lang=lang, where=f"{where}.{lang}[{i}]", owner=owner, **meta)
        for lang in langs
        for i, p in enumerate(check.patterns(group[lang], f"{where}.{lang}"))
    ]


def _read(source: Path | resources.abc.Traversable, name: str) -> tuple[dict, _Check]:
    path = source / name
    check = _Check(str(path))
    try:
        doc = load_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise check.fail("", "lexicon file not found") from exc
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise InputError(f"not valid YAML: {exc}", path=str(path), line=None if line is None else line + 1) from exc
    if not isinstance(doc, dict):
        raise check.fail("", "expected a mapping at the top level")
    check.version(doc)
    return doc, check


def load_lexicon(directory: str | Path | None = None) -> Lexicon:
    """Validate and compile the lexicons in `directory` (default: the ones shipped with mheval).

    A custom directory holds the same five files (copy the shipped ones and extend them).
    Raises InputError naming the file and field of the first problem found.
    """
    source: Path | resources.abc.Traversable
    source = Path(directory) if directory is not None else resources.files(__package__)
    common, c1 = _read(source, "common.yaml")
    triage_doc, c2 = _read(source, "triage.yaml")
    psy_doc, c3 = _read(source, "psycrisis.yaml")
    risk_doc, c4 = _read(source, "risk.yaml")
    reply_doc, c5 = _read(source, "reply.yaml")

    # common.yaml
    c1.mapping(common, "", ["version", "normalise", "negation", "distancing", "question"])
    table = _fold_table(c1, common["normalise"])
    neg = c1.mapping(common["negation"], "negation", ["en", "zh", "clause_breaks"])
    neg_en = c1.mapping(neg["en"], "negation.en", ["window", "negators", "pseudo"])
    neg_zh = c1.mapping(neg["zh"], "negation.zh", ["window", "negators", "pseudo"])
    dist = c1.mapping(common["distancing"], "distancing", ["same_sentence", "same_turn", "en", "zh"])
    question = c1.mapping(common["question"], "question", ["en", "zh"])
    triage_cues = _cues(c1, dist, "distancing", DISTANCING)

    # triage.yaml
    c2.mapping(triage_doc, "", ["version", "severity", "threshold", "decisive", "ratio", "turns", "labels"])
    severity = tuple(c2.strings(triage_doc["severity"], "severity"))
    if sorted(severity) != sorted(CRISIS_LABELS) or severity[-1] != NO_CRISIS:
        raise c2.fail("severity", "must list every crisis label once, no_crisis last", choices=CRISIS_LABELS)
    turns = c2.mapping(triage_doc["turns"], "turns", ["decay", "floor"])
    crisis_labels = [lab for lab in CRISIS_LABELS if lab != NO_CRISIS]
    triage_cues += _triage_cues(c2, triage_doc["labels"], crisis_labels)

    # psycrisis.yaml, risk.yaml, reply.yaml
    psycrisis_cues, dimensions = _psycrisis(c3, psy_doc)
    risk_cues, risk_labels, readings = _risk(c4, risk_doc, _cues(c1, dist, "distancing", DISTANCING))
    c5.mapping(reply_doc, "", ["version", "moves"])
    moves = c5.mapping(reply_doc["moves"], "moves", REPLY_MOVES)
    reply_cues = [cue for move in REPLY_MOVES for cue in _cues(c5, moves[move], f"moves.{move}", move)]

    negators = c1.strings(neg_en["negators"], "negation.en.negators")
    zh_negators = c1.pattern(neg_zh["negators"], "negation.zh.negators")
    # One cheap regex that says whether a window could hold any negator at all.
    any_negator = rf"n't|\b(?:{'|'.join(map(re.escape, negators))})\b|{zh_negators}"
    cuesets = [CueSet(triage_cues), CueSet(psycrisis_cues), CueSet(risk_cues), CueSet(reply_cues)]
    return Lexicon(
        table=table,
        en_window=int(c1.number(neg_en["window"], "negation.en.window", 1, 20)),
        en_negators=frozenset(n.lower() for n in negators),
        en_pseudo=re.compile(_alternation(c1.patterns(neg_en["pseudo"], "negation.en.pseudo")), re.I),
        zh_window=int(c1.number(neg_zh["window"], "negation.zh.window", 1, 20)),
        zh_negators=re.compile(zh_negators),
        zh_pseudo=re.compile(_alternation(c1.patterns(neg_zh["pseudo"], "negation.zh.pseudo"))),
        clause_breaks=re.compile(c1.pattern(neg["clause_breaks"], "negation.clause_breaks"), re.I),
        distancing_same_sentence=c1.number(dist["same_sentence"], "distancing.same_sentence", 0.0, 1.0),
        distancing_same_turn=c1.number(dist["same_turn"], "distancing.same_turn", 0.0, 1.0),
        question_en=re.compile(_alternation(c1.patterns(question["en"], "question.en")), re.I),
        question_zh=re.compile(_alternation(c1.patterns(question["zh"], "question.zh"))),
        severity=severity,
        threshold=c2.number(triage_doc["threshold"], "threshold", 0.0, 100.0, lo_open=True),
        decisive=c2.number(triage_doc["decisive"], "decisive", 0.0, 100.0, lo_open=True),
        ratio=c2.number(triage_doc["ratio"], "ratio", 0.0, 1.0, lo_open=True),
        turn_decay=c2.number(turns["decay"], "turns.decay", 0.0, 1.0, lo_open=True),
        turn_floor=c2.number(turns["floor"], "turns.floor", 0.0, 1.0),
        labels=tuple(crisis_labels),
        dimensions=dimensions,
        triage_cues=cuesets[0],
        psycrisis_cues=cuesets[1],
        risk_cues=cuesets[2],
        risk_labels=risk_labels,
        idiom_readings=tuple(readings),
        reply_cues=cuesets[3],
        any_negator=re.compile(any_negator, re.IGNORECASE),
        word_keys=frozenset(k for cs in cuesets for k in cs.word_keys()),
        char_keys=frozenset(k for cs in cuesets for k in cs.char_keys()),
        source=str(source),
    )


def _fold_table(check: _Check, normalise: Any) -> dict[int, str]:
    """The normalising translation: the punctuation pairs, then traditional characters to simplified ones by
    the one table (mheval.textscan), then any pairs a custom lexicon adds under normalise.traditional."""
    norm = check.mapping(normalise, "normalise", ["punctuation"], ["traditional"])
    table = check.pairs(norm["punctuation"], "normalise.punctuation")
    for key, value in TRADITIONAL_TO_SIMPLIFIED.items():
        table.setdefault(key, value)
    if "traditional" in norm:
        for key, value in check.pairs(norm["traditional"], "normalise.traditional").items():
            table.setdefault(key, value)
    return table


def _triage_cues(check: _Check, labels: Any, crisis_labels: list[str]) -> list[Cue]:
    """triage.yaml's cue groups, by crisis label, each with its weight."""
    labels_doc = check.mapping(labels, "labels", crisis_labels)
    cues: list[Cue] = []
    for label in crisis_labels:
        groups = labels_doc[label]
        if not isinstance(groups, list) or not groups:
            raise check.fail(f"labels.{label}", "expected a non-empty list of cue groups")
        for g, group in enumerate(groups):
            where = f"labels.{label}[{g}]"
            check.mapping(group, where, ["weight"], ["negatable", "distancing", *LANGS])
            cues += _cues(
                check,
                group,
                where,
                label,
                weight=check.number(group["weight"], f"{where}.weight", 0.0, 10.0, lo_open=True),
                negatable=check.flag(group.get("negatable", True), f"{where}.negatable"),
                distancing=check.flag(group.get("distancing", True), f"{where}.distancing"),
            )
    return cues


def _psycrisis(check: _Check, doc: dict) -> tuple[list[Cue], dict[str, Dimension]]:
    """psycrisis.yaml: the cues of every dimension (with the recommendation cues and each dimension's vetoes), and
    the dimensions' texts."""
    check.mapping(doc, "", ["version", "recommendation", "dimensions"])
    rec = check.mapping(doc["recommendation"], "recommendation", [], LANGS)
    dims_doc = check.mapping(doc["dimensions"], "dimensions", PSYCRISIS_DIMENSIONS)
    psycrisis_cues = _cues(check, rec, "recommendation", RECOMMENDATION) if rec else []
    dimensions: dict[str, Dimension] = {}
    for name in PSYCRISIS_DIMENSIONS:
        where = f"dimensions.{name}"
        dim = check.mapping(dims_doc[name], where, ["title", "present", "absent", "groups"], ["vetoes"])
        if not isinstance(dim["groups"], list) or not dim["groups"]:
            raise check.fail(f"{where}.groups", "expected a non-empty list of cue groups")
        for g, group in enumerate(dim["groups"]):
            gw = f"{where}.groups[{g}]"
            check.mapping(group, gw, ["gate"], ["context", "negatable", *LANGS])
            context = group.get("context")
            psycrisis_cues += _cues(
                check,
                group,
                gw,
                name,
                gate=check.choice(group["gate"], f"{gw}.gate", GATES),
                context=None if context is None else check.choice(context, f"{gw}.context", CONTEXTS),
                negatable=check.flag(group.get("negatable", True), f"{gw}.negatable"),
            )
        if "vetoes" in dim:
            check.mapping(dim["vetoes"], f"{where}.vetoes", [], LANGS)
            psycrisis_cues += _cues(check, dim["vetoes"], f"{where}.vetoes", VETO + name)
        dimensions[name] = Dimension(
            name=name,
            title=check.text(dim["title"], f"{where}.title"),
            present=check.text(dim["present"], f"{where}.present"),
            absent=check.text(dim["absent"], f"{where}.absent"),
        )
    return psycrisis_cues, dimensions


def _risk(check: _Check, doc: dict, distancing: list[Cue]) -> tuple[list[Cue], dict[str, str], list[dict[str, str]]]:
    """risk.yaml: the explicit-risk cues (after the distancing frames, read again), each family's label, and the
    idioms' plain readings."""
    check.mapping(doc, "", ["version", "families", "third_party", "help_other", "first_person", "idioms"])
    families = doc["families"]
    if not isinstance(families, dict) or not families:
        raise check.fail("families", "expected a mapping of cue families")
    risk_cues = list(distancing)
    risk_labels: dict[str, str] = {}
    for family, group in families.items():
        where = f"families.{family}"
        check.mapping(group, where, ["label"], LANGS)
        risk_labels[family] = check.choice(group["label"], f"{where}.label", HIGH_RISK)
        risk_cues += _cues(check, {k: v for k, v in group.items() if k != "label"}, where, family)
    for marker in (THIRD_PARTY, HELP_OTHER, FIRST_PERSON):
        check.mapping(doc[marker], marker, [], LANGS)
        risk_cues += _cues(check, doc[marker], marker, marker)
    if not isinstance(doc["idioms"], list):
        raise check.fail("idioms", "expected a list of idiom groups")
    readings: list[dict[str, str]] = []
    for i, group in enumerate(doc["idioms"]):
        where = f"idioms[{i}]"
        check.mapping(group, where, ["reads_as"], LANGS)
        reads = check.mapping(group["reads_as"], f"{where}.reads_as", ["en", "zh"])
        readings.append({lang: check.text(reads[lang], f"{where}.reads_as.{lang}") for lang in ("en", "zh")})
        risk_cues += _cues(check, {k: v for k, v in group.items() if k != "reads_as"}, where, f"{IDIOM}{i}")
    return risk_cues, risk_labels, readings
