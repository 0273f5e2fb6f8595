"""Finding and decoding the JSON-like objects a judge writes into free text.

Judges wrap JSON in fences and prose, use curly or single quotes, leave trailing commas, forget to
escape quotes inside their explanation, or get cut off after the last score. `find_objects` returns
every top-level object it can read, strict JSON first and this forgiving reader where that fails,
and says which ones were cut off. It reads form only; what the objects mean is parse.py's business.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mheval.textscan import CJK_IDEOGRAPHS

_THINK_RE = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_DECODER = json.JSONDecoder()


_MAX_STARTS = 64  # braces tried as the start of an object; real answers need one or two
_MAX_DEPTH = 64


class _TooDeep(Exception):
    pass


def find_objects(text: str) -> list[tuple[dict[str, Any], bool]]:
    """Every top-level object in `text`, in order, as (object, was_cut_off)."""
    text = _THINK_RE.sub(" ", text)
    out: list[tuple[dict[str, Any], bool]] = []
    i = 0
    for _ in range(_MAX_STARTS):
        start = text.find("{", i)
        if start < 0:
            break
        try:
            obj, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            reader = _Lenient(text)
            try:
                obj, end = reader.object(start)
            except _TooDeep:
                obj, end = {}, start + 1
            if obj:
                out.append((obj, reader.truncated))
            i = max(end, start + 1)
            continue
        if isinstance(obj, dict) and obj:
            out.append((obj, False))
        i = end
    return out


class PartialString(str):
    """A string value that the output cut off: fine as a rationale, never as a score or label."""


_INCOMPLETE = object()  # a number or word cut off at the end of the output
_NOTHING = object()  # no value where one was due (`"a": ,`): the member is skipped

_OPEN_QUOTES = {'"': '"”', "'": "'", "“": '”"', "‘": "’'", "”": '”"', "„": '“”"'}
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_WORD_RE = re.compile(r"[^,}\]\n]+")
_BARE_KEY_RE = re.compile(f"[A-Za-z_{CJK_IDEOGRAPHS}][\\w \\-{CJK_IDEOGRAPHS}]*(?=\\s*[:：])")
_LITERALS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\", '"': '"', "'": "'"}


class _Lenient:
    """A forgiving reader for JSON as LLMs write it (see the module docstring).

    Quotes inside a string only close it when what follows looks like JSON structure (a colon, comma
    plus a new key, a closing bracket, the end): that is how unescaped quotes in explanations survive.
    Reaching the end of the text marks the result `truncated`; a number cut at the very end is dropped.
    """

    def __init__(self, text: str) -> None:
        self.s = text
        self.n = len(text)
        self.truncated = False
        self.depth = 0

    def _cut(self, i: int) -> bool:
        """Whether the text ends at `i` where more was due: the output was cut off, so the result is marked
        truncated."""
        if i < self.n:
            return False
        self.truncated = True
        return True

    def ws(self, i: int) -> int:
        while i < self.n and (self.s[i].isspace() or self.s[i] == "\ufeff"):
            i += 1
        return i

    def object(self, i: int) -> tuple[dict[str, Any], int]:
        s = self.s
        out: dict[str, Any] = {}
        i += 1
        while True:
            i = self.ws(i)
            if self._cut(i):
                return out, i
            c = s[i]
            if c == "}":
                return out, i + 1
            if c == ",":
                i += 1
                continue
            if c in _OPEN_QUOTES:
                key, i = self.string(i)
                if isinstance(key, PartialString):
                    return out, i
            else:
                match = _BARE_KEY_RE.match(s, i)
                if not match:
                    return out, i  # not an object key: the object ends here, unclosed
                key, i = match.group().strip(), match.end()
            i = self.ws(i)
            if self._cut(i):
                return out, i
            if s[i] not in ":：=":
                return out, i
            i = self.ws(i + 1)
            if self._cut(i):
                return out, i
            value, i = self.value(i)
            if value is _INCOMPLETE:
                return out, i
            if value is not _NOTHING:
                out[key] = value
            i = self.ws(i)
            if self._cut(i):
                return out, i
            if s[i] in ",}":
                continue
            if s[i] in _OPEN_QUOTES:  # a missing comma between members
                continue
            return out, i

    def array(self, i: int) -> tuple[list[Any], int]:
        s = self.s
        out: list[Any] = []
        i += 1
        while True:
            i = self.ws(i)
            if self._cut(i):
                return out, i
            if s[i] == "]":
                return out, i + 1
            if s[i] == ",":
                i += 1
                continue
            value, i = self.value(i)
            if value is _INCOMPLETE:
                return out, i
            if value is not _NOTHING:
                out.append(value)
            i = self.ws(i)
            if self._cut(i):
                return out, i
            if s[i] in ",]" or s[i] in _OPEN_QUOTES:
                continue
            return out, i

    def value(self, i: int) -> tuple[Any, int]:
        s, c = self.s, self.s[i]
        if c in "{[":
            self.depth += 1
            if self.depth > _MAX_DEPTH:
                raise _TooDeep
            try:
                return self.object(i) if c == "{" else self.array(i)
            finally:
                self.depth -= 1
        if c in _OPEN_QUOTES:
            return self.string(i)
        match = _NUMBER_RE.match(s, i)
        if match:
            end = match.end()
            if self._cut(end):
                return _INCOMPLETE, end
            if not (s[end].isalpha() or s[end] in "/_"):
                text = match.group()
                return (float(text) if any(ch in text for ch in ".eE") else int(text)), end
        for word, literal in _LITERALS.items():
            if s.startswith(word, i):
                end = i + len(word)
                if self._cut(end):
                    return _INCOMPLETE, end
                if not (s[end].isalnum() or s[end] == "_"):
                    return literal, end
        match = _WORD_RE.match(s, i)
        if match is None:
            return _NOTHING, i
        end = match.end()
        if self._cut(end):
            return _INCOMPLETE, end
        return match.group().strip(), end

    def string(self, i: int) -> tuple[str, int]:
        s = self.s
        closers = _OPEN_QUOTES[s[i]]
        i += 1
        buf: list[str] = []
        while i < self.n:
            c = s[i]
            if c == "\\" and i + 1 < self.n:
                nxt = s[i + 1]
                if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 2 : i + 6]):
                    buf.append(chr(int(s[i + 2 : i + 6], 16)))
                    i += 6
                else:
                    buf.append(_ESCAPES.get(nxt, nxt))
                    i += 2
                continue
            if c in closers and self._closes(i + 1):
                return _fix_surrogates("".join(buf)), i + 1
            buf.append(c)
            i += 1
        self.truncated = True
        return PartialString(_fix_surrogates("".join(buf))), self.n

    def _closes(self, j: int) -> bool:
        """Whether a quote just before position j ends the string (judged by what follows it)."""
        s = self.s
        k = self.ws(j)
        if k >= self.n:
            return True
        c = s[k]
        if c in ":：}]" or s.startswith("```", k):
            return True
        if c == ",":
            k2 = self.ws(k + 1)
            return k2 >= self.n or s[k2] in _OPEN_QUOTES or s[k2] in "{[]}-" or s[k2].isdigit()
        # A quote that opens the next key on a new line (a missing comma).
        return c in _OPEN_QUOTES and "\n" in s[j:k]


def _fix_surrogates(text: str) -> str:
    try:
        return text.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeError:
        return text
