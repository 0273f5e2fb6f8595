"""Regexes with a literal prefilter: skip the regex when the text lacks every string a match must contain.

The reply checks (judges/flags.py, resources/matching.py) run dozens of word-list regexes on every
judged reply, and almost all of them do not match. Python's `re` tries such a pattern at every
position; a substring test (`needle in text`) runs in C and is many times faster. `Prefiltered` works
out, from the pattern's own parse tree, sets of literal strings such that every match contains one
string of each set ({"ignore", "disregard", ...} and {"rubric", "instructions", ...} for
`\\b(?:ignore|disregard|...)\\b[^.]{0,40}?\\b(?:rubric|instructions|...)`), and searches only texts that
pass that test. The test is done on `fold(text)` with folded needles: lower case, with the Turkish
dotted capital and dotless small i made a plain "i" (re.IGNORECASE matches them to "i" one character
for one, while str.lower turns the capital into two characters). Callers NFKC-normalise first, which
folds the other characters where the two part ways (long s, Kelvin and Angstrom signs, ligatures). So
the test is a necessary condition whether or not the pattern ignores case. A pattern whose needles
cannot be worked out (or a Python whose parser differs) is always searched: the filter can only skip,
never change, a result.

It is also the one home of the text tables several rooms read: which characters are CJK ideographs
(`CJK_IDEOGRAPHS`, `has_cjk`, `count_cjk`), the wider set of East Asian characters (`CJK_SCRIPTS`), and
the one language guess for a text that does not say its language (`detect_language`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

try:  # the parser behind `re`; its shape is stable since 3.11 but private, hence the fallback
    from re import _constants as _c
    from re import _parser as _p
except ImportError:  # pragma: no cover - other Pythons search every text
    _c = _p = None

_TURKISH_I = str.maketrans({"\u0130": "i", "\u0131": "i"})


def fold(text: str) -> str:
    """The form needles are looked for in (see the module docstring)."""
    return text.translate(_TURKISH_I).lower()


Needles = tuple[frozenset[str], ...]  # every match holds at least one string of each set


def needles(pattern: re.Pattern[str]) -> Needles | None:
    """Sets of strings (lower-cased) such that every match of `pattern` holds one of each, or None."""
    if _p is None:
        return None
    try:
        found = _candidates(list(_p.parse(pattern.pattern, pattern.flags)))
    except Exception:  # a construct this walk does not know: no filter
        return None
    usable = [s for s in found if all(n and len(fold(n)) == len(n) for n in s)]
    return tuple(frozenset(fold(n) for n in s) for s in usable) or None


def _candidates(items: list[tuple[Any, Any]]) -> list[set[str]]:
    """Every set of strings a match of this sequence of parse items must hold one of: each run of
    literals, and what each required group, alternation or repeat requires."""
    found: list[set[str]] = []
    run = ""
    for op, arg in items:
        if op is _c.LITERAL:
            run += chr(arg)
            continue
        if run:
            found.append({run})
            run = ""
        part: set[str] | None = None
        if op is _c.SUBPATTERN:
            part = _best(list(arg[-1]))
        elif op is _c.BRANCH:
            branches = [_best(list(b)) for b in arg[1]]
            part = None if any(b is None for b in branches) else set().union(*branches)  # type: ignore[arg-type]
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT) and arg[0] >= 1:
            part = _best(list(arg[2]))
        # Anything else (assertions, classes, optional parts) requires no particular string.
        if part:
            found.append(part)
    if run:
        found.append({run})
    return found


def _best(items: list[tuple[Any, Any]]) -> set[str] | None:
    """The most selective of a sequence's sets (longest shortest string, then fewest strings)."""
    found = _candidates(items)
    return max(found, key=lambda s: (min(len(n) for n in s), -len(s))) if found else None


class Prefiltered:
    """A compiled regex and its needles; `search(text, folded)` takes the text and `fold(text)`
    (computed once by the caller for all patterns)."""

    __slots__ = ("needles", "regex")

    def __init__(self, regex: re.Pattern[str]) -> None:
        self.regex = regex
        self.needles = needles(regex)

    def possible(self, folded: str) -> bool:
        return self.needles is None or all(any(n in folded for n in group) for group in self.needles)

    def search(self, text: str, folded: str) -> re.Match[str] | None:
        return self.regex.search(text) if self.possible(folded) else None


# -- CJK characters and the language of a text --------------------------------------------------------

CJK_IDEOGRAPHS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df"
"""Han ideographs as the body of a regex character class: CJK Unified Ideographs, Extension A,
Compatibility Ideographs and Extension B (what Chinese text is written in)."""

CJK_SCRIPTS = "\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff"
"""Wider than the ideographs, as a character-class body: every East Asian block of the BMP from the CJK
radicals to the ideographs (CJK punctuation, kana, bopomofo, Hangul syllables...). Grounding compares
quotes with it, where a space between two such characters is the judge's, not the text's."""

CJK_RE = re.compile(f"[{CJK_IDEOGRAPHS}]")


def is_cjk(ch: str) -> bool:
    """Whether the one character `ch` is a CJK ideograph."""
    return CJK_RE.fullmatch(ch) is not None


def has_cjk(text: str) -> bool:
    return CJK_RE.search(text) is not None


def count_cjk(text: str) -> int:
    return len(CJK_RE.findall(text))


def detect_language(text: str) -> Literal["en", "zh"]:
    """`zh` if the text holds any CJK ideograph, else `en`: the two languages mheval supports. Any one
    ideograph decides, so a Chinese turn after English small talk ("hi", "hello", "我最近睡不好") is zh."""
    return "zh" if has_cjk(text) else "en"


__all__ = [
    "CJK_IDEOGRAPHS",
    "CJK_RE",
    "CJK_SCRIPTS",
    "Prefiltered",
    "count_cjk",
    "detect_language",
    "fold",
    "has_cjk",
    "is_cjk",
    "needles",
]
