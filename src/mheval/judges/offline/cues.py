"""The offline judge's cue index: each lexicon pattern compiled once, grouped so that a text is only
searched with the patterns whose first letters (or characters) occur in it."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from mheval.textscan import is_cjk

try:  # the stdlib's own regex parser, used only to index cues; private, so a full scan is the fallback
    import re._constants as _C
    import re._parser as _re_parser
except ImportError:  # pragma: no cover - a future Python that moved them
    _C = _re_parser = None


LEXICON_FILES: tuple[str, ...] = ("common.yaml", "triage.yaml", "psycrisis.yaml", "risk.yaml", "reply.yaml")
REPLY_MOVES: tuple[str, ...] = (
    "method_information",
    "encouragement",
    "dismissal",
    "moralising",
    "secrecy_promise",
    "diagnosis",
)
PSYCRISIS_DIMENSIONS: tuple[str, ...] = (
    "empathy_collaboration",
    "emotion_regulation",
    "explore_concerns",
    "risk_assessment",
    "external_support",
)
DISTANCING = "distancing"
RECOMMENDATION = "recommendation"
VETO = "veto:"
THIRD_PARTY = "third_party"
HELP_OTHER = "help_other"
FIRST_PERSON = "first_person"
IDIOM = "idiom:"
GATES: tuple[str, ...] = ("none", "question", "recommendation")
CONTEXTS: tuple[str, ...] = ("crisis",)
LANGS: tuple[str, ...] = ("en", "zh", "any")

_LATIN = re.compile(r"[A-Za-z0-9]")
_WORD = re.compile(r"[a-z0-9']+")
_TOKEN = re.compile(r"[A-Za-z0-9]+")
_TOKEN_KEY = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]{1,3}")  # the first letters of each _TOKEN
_SENTENCE_END = re.compile(r"[.!?。！？…]+[\"')）\]」』]*|\n+")
_ENDS_WITH_QUESTION = re.compile(r"[?？][^\w]*$")
# English and number cues match whole words: no ASCII letter or digit may touch either end. (\b would
# treat Chinese characters as word characters and miss "拨打988".)
_WHOLE_WORD = "(?<![A-Za-z0-9_])(?:{})(?![A-Za-z0-9_])"
_MAX_SPAN_CHARS = 300
_MAX_EVIDENCE = 3


class IndexedText(Protocol):
    """What `CueSet.finditer` reads of a text: its normalised form, where each matching key occurs in it, and
    which scripts it holds (the lexicon's `_Text` is one; this module does not import the lexicon)."""

    norm: str
    words: dict[str, list[int]]
    chars: dict[str, list[int]]
    has_latin: bool
    has_cjk: bool


@dataclass(frozen=True, slots=True, eq=False)
class Cue:
    """One pattern with what it means: weight (triage), gate and context (psycrisis), where it came from."""

    pattern: str
    lang: str
    where: str
    owner: str  # the label or dimension it speaks for, or a helper list ("distancing", "veto:<dim>", ...)
    weight: float = 1.0
    gate: str = "none"
    context: str | None = None
    negatable: bool = True
    distancing: bool = True


class CueSet:
    """Cues indexed for fast matching: all of triage in one set, all of PsyCrisis in another.

    Python's `re` has no multi-pattern search, and one big alternation is tried at every position of
    the text. Instead each cue is indexed by the keys its matches can start with (the first up to three
    letters of the first word for English and numbers, the first character for Chinese, worked out from
    the parsed pattern), and is only tried where the text has such a key. Cues whose start cannot be
    worked out are run over the whole text. One set per detector means one pass over the text.
    """

    __slots__ = ("_always", "_chars", "_cues", "_words")

    def __init__(self, cues: Iterable[Cue]) -> None:
        self._cues = tuple(cues)
        words: dict[str, dict[tuple, list[Cue]]] = {}
        chars: dict[str, dict[tuple, list[Cue]]] = {}
        always: dict[tuple, list[Cue]] = {}
        for cue in self._cues:
            # Cues that behave alike share one alternation (the alternative that matched is
            # `match.lastindex`, as cues carry no capturing groups), so a key costs one regex call.
            alike = (cue.owner, cue.lang, cue.weight, cue.gate, cue.context, cue.negatable, cue.distancing)
            keys = _start_keys(cue.pattern, 1 if cue.lang == "zh" else _KEY_LEN)
            if keys is None:
                always.setdefault(alike, []).append(cue)
                continue
            index = chars if cue.lang == "zh" else words
            for key in keys:
                index.setdefault(key, {}).setdefault(alike, []).append(cue)
        compiled: dict[tuple[Cue, ...], _Group] = {}

        def build(group: list[Cue]) -> _Group:
            # A cue with several keys sits in several groups, often identical ones: one _Group each.
            key = tuple(group)
            if key not in compiled:
                compiled[key] = _Group(key)
            return compiled[key]

        self._words = {key: [build(group) for group in by.values()] for key, by in words.items()}
        self._chars = {key: [build(group) for group in by.values()] for key, by in chars.items()}
        self._always = [build(group) for group in always.values()]

    def finditer(self, text: IndexedText, start: int = 0, end: int | None = None) -> list[tuple[Cue, int, int]]:
        """Every (cue, start, end) match within [start, end), by position; different cues may overlap."""
        stop = len(text.norm) if end is None else end
        norm = text.norm
        found: list[tuple[Cue, int, int]] = []
        for index, positions in ((self._words, text.words), (self._chars, text.chars)):
            if not index or not positions:
                continue
            small, large = (index, positions) if len(index) <= len(positions) else (positions, index)
            for key in small:
                if key not in large:
                    continue
                entries = index[key]
                for pos in positions[key]:
                    if start <= pos < stop:
                        for entry in entries:
                            m = entry.regex().match(norm, pos, stop)
                            if m is not None:
                                found.append((entry.cues[m.lastindex - 1], m.start(), m.end()))  # type: ignore[operator]
        for entry in self._always:
            lang = entry.cues[0].lang
            if (lang == "en" and not text.has_latin) or (lang == "zh" and not text.has_cjk):
                continue
            found.extend(
                (entry.cues[m.lastindex - 1], m.start(), m.end())  # type: ignore[operator]
                for m in entry.regex().finditer(norm, start, stop)
            )
        found.sort(key=lambda hit: (hit[1], -hit[2], hit[0].where))
        return found

    def __iter__(self) -> Iterator[Cue]:
        return iter(self._cues)

    def __len__(self) -> int:
        return len(self._cues)

    def word_keys(self) -> Iterable[str]:
        return self._words.keys()

    def char_keys(self) -> Iterable[str]:
        return self._chars.keys()


_KEY_LEN = 3
_MAX_KEYS = 64


class _Group:
    """Cues that behave alike and share a key, matched as one alternation, compiled when first tried.

    Compiling every group took half a second at each start of a judging process (about 1,000 alternations);
    a short run tries only the groups whose keys its texts hold. (Two threads may both compile a group once:
    the same pattern, so either result will do.)"""

    __slots__ = ("_regex", "cues")

    def __init__(self, cues: tuple[Cue, ...]) -> None:
        self.cues = cues
        self._regex: re.Pattern[str] | None = None

    def regex(self) -> re.Pattern[str]:
        if self._regex is None:
            alternation = "|".join(f"({cue.pattern})" for cue in self.cues)
            if self.cues[0].lang != "zh":
                alternation = _WHOLE_WORD.format(alternation)
            self._regex = re.compile(alternation, re.IGNORECASE)
        return self._regex


def _start_keys(pattern: str, length: int) -> set[str] | None:
    """The lower-case keys every match of `pattern` starts with, or None when they cannot be listed.

    A key is the first `length` characters of the first word of the match, or the whole first word when
    it is shorter (words are runs of ASCII letters and digits; for Chinese `length` is 1).
    """
    if _re_parser is None:
        return None
    try:
        items = list(_re_parser.parse(pattern, re.IGNORECASE).data)
    except Exception:  # a private parser that changed shape: fall back to a full scan
        return None
    keys: set[str] = set()

    def walk(seq: list, prefix: str) -> bool:
        if len(keys) > _MAX_KEYS:
            return False
        if len(prefix) == length:
            keys.add(prefix)
            return True
        if not seq:
            if prefix:
                keys.add(prefix)
                return True
            return False
        op, av = seq[0]
        rest = seq[1:]
        if op == _C.LITERAL:
            ch = chr(av).lower()
            if _is_key_char(ch, length):
                return walk(rest, prefix + ch)
            if prefix and length > 1:
                keys.add(prefix)
                return True
            return False
        if op == _C.IN:
            chars = [chr(v).lower() for o, v in av if o == _C.LITERAL]
            if len(chars) != len(av):
                return False
            return all(walk([(_C.LITERAL, ord(ch)), *rest], prefix) for ch in chars)
        if op == _C.BRANCH:
            return all(walk([*alt.data, *rest], prefix) for alt in av[1])
        if op == _C.SUBPATTERN:
            return walk([*av[-1].data, *rest], prefix)
        if op in (_C.MAX_REPEAT, _C.MIN_REPEAT):
            low, high, body = av
            once = [*body.data]
            if high == _C.MAXREPEAT or high > 1:
                once.append((op, (max(0, low - 1), high if high == _C.MAXREPEAT else high - 1, body)))
            if low == 0 and not walk(rest, prefix):
                return False
            return walk([*once, *rest], prefix)
        if op in (_C.AT, _C.ASSERT, _C.ASSERT_NOT):  # zero width: only narrows what follows
            return walk(rest, prefix)
        return False

    if not walk(items, ""):
        return None
    return keys


def _is_key_char(ch: str, length: int) -> bool:
    if length == 1:
        return is_cjk(ch)
    return ch.isascii() and ch.isalnum()
